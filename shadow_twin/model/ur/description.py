"""Universal Robots' arm description files: find them and read one arm type's figures.

Universal Robots' ROS 2 description (github.com/UniversalRobots/Universal_Robots_ROS2_Description,
BSD-3-Clause; the ROS package ``ur_description``) holds, for each arm type, three YAML files in
``config/<type>/``:

* ``default_kinematics.yaml``: the URDF joint origins (``xyz`` m, ``rpy`` rad) of the six joints,
  ``kinematics.<shoulder|upper_arm|forearm|wrist_1|wrist_2|wrist_3>``; the URDF macro
  (``urdf/ur_macro.xacro``) uses them as they are.
* ``physical_parameters.yaml``: ``offsets`` (shoulder_offset, elbow_offset, m), link masses (kg),
  centres of mass (m, link frames), inertia tensors about the centre of mass (``tensor``, kg m^2)
  with their orientation (``rotation``, URDF rpy), and the base's ``links.base`` radius and length.
* ``joint_limits.yaml``: per joint ``max_effort`` (N m), ``max_velocity`` and ``min/max_position``
  (written in degrees with the ``!degrees`` YAML tag), ``has_position_limits``.

:func:`find_ur_description` finds the ``config`` folder; :func:`read_arm_description` reads one
type into an :class:`ArmDescription` (SI units, radians). The project ships none of these files;
it ships their figures in its own format (:mod:`shadow_twin.model.ur.figures`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from shadow_twin.common.errors import ConfigError

#: The arm types of UR's description, lower case (``config/<type>/``).
UR_TYPES = ('ur3', 'ur3e', 'ur5', 'ur5e', 'ur10', 'ur10e', 'ur16e', 'ur20', 'ur30')
#: Environment variable naming a description (a checkout of the ROS 2 description or its config dir).
DESCRIPTION_ENV = 'SHADOW_TWIN_UR_DESCRIPTION'
#: The three files read for a type.
FILES = ('default_kinematics.yaml', 'physical_parameters.yaml', 'joint_limits.yaml')
#: The six links after the base, base to tool (the description's keys).
LINKS = ('shoulder', 'upper_arm', 'forearm', 'wrist_1', 'wrist_2', 'wrist_3')
#: The joint of each link (its parent joint), as ur_robot_driver names them.
JOINTS = ('shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint', 'wrist_2_joint',
          'wrist_3_joint')


@dataclass(frozen=True)
class JointLimits:
    """One joint's published limits: ``effort`` N m, ``velocity`` rad/s, ``position`` (lower, upper) rad
    or None when the joint turns without limit (``has_position_limits: false``)."""

    effort: float
    velocity: float
    position: tuple[float, float] | None


@dataclass(frozen=True)
class LinkInertia:
    """One link's inertial figures as the description gives them: ``mass`` kg, centre of mass ``com``
    (m, link frame), ``tensor`` (ixx, iyy, izz, ixy, ixz, iyz; kg m^2 about the centre of mass, in the
    frame turned by ``rotation``, URDF rpy rad, from the link frame)."""

    mass: float
    com: tuple[float, float, float]
    tensor: tuple[float, float, float, float, float, float]
    rotation: tuple[float, float, float]


@dataclass(frozen=True)
class ArmDescription:
    """One arm type's figures (SI units, rad).

    Attributes:
        arm_type: e.g. ``'ur10e'``.
        origins: per link of :data:`LINKS`, its joint's URDF origin ``(xyz, rpy)`` in the parent link
            (the shoulder's parent: ``base_link_inertia`` = base_link turned by rpy (0 0 pi)).
        offsets: ``shoulder_offset``, ``elbow_offset`` (m).
        base_mass: kg; ``base_radius``, ``base_length``: the base's inertia cylinder (m).
        links: per link of :data:`LINKS`, its :class:`LinkInertia`.
        limits: per joint of :data:`JOINTS`, its :class:`JointLimits`.
        source: the ``config/<type>`` folder read.
    """

    arm_type: str
    origins: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]]
    offsets: dict[str, float]
    base_mass: float
    base_radius: float
    base_length: float
    links: dict[str, LinkInertia]
    limits: dict[str, JointLimits]
    source: Path

    @property
    def dh(self) -> dict[str, float]:
        """The DH lengths (m) implied by the joint origins: d1 = shoulder z, a2 = forearm x,
        a3 = wrist_1 x, d4 = wrist_1 z, d5 = -wrist_2 y, d6 = wrist_3 y (UR's nominal chain)."""
        o = self.origins
        return {'d1': o['shoulder'][0][2], 'a2': o['forearm'][0][0], 'a3': o['wrist_1'][0][0],
                'd4': o['wrist_1'][0][2], 'd5': -o['wrist_2'][0][1], 'd6': o['wrist_3'][0][1]}


def check_arm_type(arm_type: Any) -> str:
    """``arm_type`` lower-cased if it is one of :data:`UR_TYPES`; ConfigError naming the known ones if not."""
    name = str(arm_type).strip().lower() if isinstance(arm_type, str) else None
    if name not in UR_TYPES:
        raise ConfigError(f'unknown arm type {arm_type!r}; known: {", ".join(UR_TYPES)}')
    return name


def _config_dir(folder: Path) -> Path | None:
    """``folder`` or its ``config`` subfolder, whichever holds ``<type>/`` folders of the description."""
    for candidate in (folder / 'config', folder):
        if any((candidate / t / FILES[0]).is_file() for t in UR_TYPES):
            return candidate
    return None


def find_ur_description(explicit: str | os.PathLike | None = None) -> Path | None:
    """The description's ``config`` folder (the one holding ``<type>/``), or None if none is found.

    Looked for, in this order: ``explicit`` (a checkout of Universal_Robots_ROS2_Description or its
    ``config`` folder), the environment variable ``SHADOW_TWIN_UR_DESCRIPTION`` (the same), the
    installed ``ur_description`` ROS package (``ament_index_python``). A folder given explicitly or
    through the environment that holds no description is an error, not skipped.

    Raises:
        ConfigError: ``explicit`` or the environment variable names a folder without the description.
    """
    for given, what in ((explicit, '--ur-description'), (os.environ.get(DESCRIPTION_ENV) or None, DESCRIPTION_ENV)):
        if given is None:
            continue
        folder = Path(given).expanduser()
        found = _config_dir(folder) if folder.is_dir() else None
        if found is None:
            raise ConfigError(f'{what} {folder}: no UR description there (expected config/<type>/{FILES[0]} '
                              f'or <type>/{FILES[0]})')
        return found
    try:  # lazy: ament_index_python is there only in a ROS environment
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
    except ImportError:
        return None
    try:
        return _config_dir(Path(get_package_share_directory('ur_description')))
    except (PackageNotFoundError, ValueError, OSError):
        return None


class _Loader(yaml.SafeLoader):
    """YAML SafeLoader that reads ``!degrees X`` as X in radians (UR's joint_limits.yaml)."""


def _degrees(loader: yaml.SafeLoader, node: yaml.Node) -> float:
    return math.radians(float(loader.construct_scalar(node)))


_Loader.add_constructor('!degrees', _degrees)


def _load(path: Path) -> dict:
    try:
        data = yaml.load(path.read_text(encoding='utf-8'), Loader=_Loader)
    except FileNotFoundError:
        raise ConfigError(f'{path}: no such file (UR description incomplete)') from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f'{path}: cannot read: {" ".join(str(exc).split())}') from None
    except yaml.YAMLError as exc:
        raise ConfigError(f'{path}: not valid YAML: {" ".join(str(exc).split())}') from None
    if not isinstance(data, dict):
        raise ConfigError(f'{path}: expected a mapping')
    return data


def _get(data: Any, path: Path, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            raise ConfigError(f'{path}: missing {".".join(keys)}')
        data = data[key]
    return data


def _num(data: Any, path: Path, *keys: str) -> float:
    value = _get(data, path, *keys)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f'{path}: {".".join(keys)} must be a finite number, got {value!r}')
    return float(value)


def read_arm_description(arm_type: str, config_dir: str | os.PathLike) -> ArmDescription:
    """Read ``config_dir/<arm_type>/`` (the three files of :data:`FILES`) into an :class:`ArmDescription`.

    Raises:
        ConfigError: an unknown type, a missing file or key, a value that is not a finite number, a
            non-positive mass or limit (one line naming the file and key).
    """
    arm_type = check_arm_type(arm_type)
    folder = Path(config_dir) / arm_type
    kin_path, phys_path, lim_path = (folder / name for name in FILES)
    kin, phys, lim = _load(kin_path), _load(phys_path), _load(lim_path)
    origins = {}
    for link in LINKS:
        xyz = tuple(_num(kin, kin_path, 'kinematics', link, k) for k in ('x', 'y', 'z'))
        rpy = tuple(_num(kin, kin_path, 'kinematics', link, k) for k in ('roll', 'pitch', 'yaw'))
        origins[link] = (xyz, rpy)
    offsets = {k: _num(phys, phys_path, 'offsets', k) for k in ('shoulder_offset', 'elbow_offset')}
    inertia = ('inertia_parameters',)
    links = {}
    for link in LINKS:
        mass = _num(phys, phys_path, *inertia, f'{link}_mass')
        com = tuple(_num(phys, phys_path, *inertia, 'center_of_mass', f'{link}_cog', k) for k in 'xyz')
        tensor = tuple(_num(phys, phys_path, *inertia, 'tensor', link, k)
                       for k in ('ixx', 'iyy', 'izz', 'ixy', 'ixz', 'iyz'))
        rotation = tuple(_num(phys, phys_path, *inertia, 'rotation', link, k) for k in ('roll', 'pitch', 'yaw'))
        if mass <= 0:
            raise ConfigError(f'{phys_path}: {link}_mass must be positive, got {mass!r}')
        links[link] = LinkInertia(mass, com, tensor, rotation)
    base = {k: _num(phys, phys_path, *inertia, 'links', 'base', k) for k in ('radius', 'length')}
    base_mass = _num(phys, phys_path, *inertia, 'base_mass')
    if min(base_mass, *base.values()) <= 0:
        raise ConfigError(f'{phys_path}: base_mass and links.base radius/length must be positive')
    limits = {}
    for joint in JOINTS:
        effort = _num(lim, lim_path, 'joint_limits', joint, 'max_effort')
        velocity = _num(lim, lim_path, 'joint_limits', joint, 'max_velocity')
        if effort <= 0 or velocity <= 0:
            raise ConfigError(f'{lim_path}: {joint} max_effort and max_velocity must be positive')
        position = None
        if _get(lim, lim_path, 'joint_limits', joint).get('has_position_limits', True):
            lower = _num(lim, lim_path, 'joint_limits', joint, 'min_position')
            upper = _num(lim, lim_path, 'joint_limits', joint, 'max_position')
            if lower >= upper:
                raise ConfigError(f'{lim_path}: {joint} min_position is not below max_position')
            position = (lower, upper)
        limits[joint] = JointLimits(effort, velocity, position)
    return ArmDescription(arm_type, origins, offsets, base_mass, base['radius'], base['length'], links, limits,
                          folder)
