"""The cell's configuration: the dataclasses :class:`CellConfig` is made of (``config/cell.yaml``) and
the validation of their YAML.

See :mod:`shadow_twin.model.cell.assembly` for the cell they describe (mounts, parts).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import yaml

from shadow_twin.common import config_values as values
from shadow_twin.common.errors import ConfigError
from shadow_twin.model.cell.names import HAND_ROOT
from shadow_twin.model.ur.description import check_arm_type

#: Base settings whose 0 means "none" (the others must be positive).
BASE_ZERO_ALLOWED = ('wheel_ki', 'wheel_torque_limit', 'command_latency', 'suspension_stiffness',
                     'suspension_preload', 'suspension_damping')
_PREFIX = re.compile(r'^[A-Za-z0-9_/]*$')
#: Friction cones by their MJCF names.
CONES = {'elliptic': mujoco.mjtCone.mjCONE_ELLIPTIC, 'pyramidal': mujoco.mjtCone.mjCONE_PYRAMIDAL}
PI = math.pi


def rpy_to_quat(rpy) -> np.ndarray:
    """Quaternion (w x y z) of URDF roll-pitch-yaw (rad): R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = (float(v) / 2 for v in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy,
                     cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy])


@dataclass(frozen=True)
class Mount:
    """Pose of a part's root frame in its parent's mount site: ``xyz`` (m), URDF ``rpy`` (rad)."""

    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class BaseConfig:
    """Overrides of the MiR250 (figures: mir250.xml's header).

    Attributes:
        mass: total mass of the base, kg (twin study table 1: 83; DFKI: 97). The chassis
            takes what the wheels and casters do not; its inertia scales with it.
        wheel_radius: drive wheel radius, m (0.100); the wheel centres sit at this height.
        wheel_separation: distance between the drive wheels, m (twin study: 0.410; DFKI: 0.403).
        friction: wheel-floor Coulomb friction of every wheel (0.5, the twin study's static figure).
        wheel_kv: velocity gain of the wheel servos, N m s/rad at the wheel (310: the
            study's velocity-loop P gain 20 A s/rad * 0.15 N m/A * 10.167^2).
        wheel_ki: integral gain of the wheel velocity loops, N m/rad at the wheel (0.155: the
            study's I gain 0.01 A/rad * 0.15 N m/A * 10.167^2); 0 = a P loop, no integral
            actuators. With it the drive is a PI velocity loop that holds a wheel commanded to
            stand where it stopped.
        wheel_torque_limit: largest torque of a wheel servo, N m at the wheel (the drive's
            current limit x 0.15 N m/A x 10.167); 0 = unlimited, the default: the study
            gives no current limit. With a limit, a steep acceleration saturates the drive
            and the rotor inertia (the wheel armature) shows in the path.
        command_latency: s from a velocity command's stamp to its effect on the wheels (the
            model's custom numeric ``base_command_latency``: ``SimMobileBase``); 0 = none, the
            default: a command takes effect when it arrives. With a latency longer than the
            transport and scheduling delays, a stamped command moves the base the same way
            whenever it arrives, live or replayed from a recording.
        suspension_stiffness: spring rate of each drive wheel's suspension, N/m; 0 = rigid drive
            wheels, the default (the study's model; no figure of the MiR250's suspension is
            published). Above 0 each drive wheel gets a slide joint along the chassis' z
            (``<side>_wheel_suspension_joint``, travel +-``suspension_travel``) whose spring
            pushes it to the floor with ``suspension_preload`` at the wheel's nominal height.
        suspension_preload: spring force on each drive wheel at its nominal height, N (only
            with a stiffness): the joint's springref is -preload / stiffness.
        suspension_damping: damping of each suspension slide, N s/m.
        suspension_travel: travel of each suspension slide either side of the nominal height, m.
    """

    mass: float = 83.0
    wheel_radius: float = 0.100
    wheel_separation: float = 0.410
    friction: float = 0.5
    wheel_kv: float = 310.1
    wheel_ki: float = 0.155
    wheel_torque_limit: float = 0.0
    command_latency: float = 0.0
    suspension_stiffness: float = 0.0
    suspension_preload: float = 550.0
    suspension_damping: float = 3000.0
    suspension_travel: float = 0.015


@dataclass(frozen=True)
class CabinetConfig:
    """The cabinet between base and arm: a uniform box of ``size`` (x y z, m) and ``mass`` (kg),
    its bottom centre at ``mount`` in the base's ``payload`` site. 15 kg: the twin study's table 1;
    the size 0.50 x 0.45 x 0.40 m is this project's choice (the study gives none)."""

    size: tuple[float, float, float] = (0.50, 0.45, 0.40)
    mass: float = 15.0
    mount: Mount = field(default_factory=Mount)


@dataclass(frozen=True)
class ArmConfig:
    """The arm: its UR ``type`` (one of ``ur_description.UR_TYPES``; 'ur5', the default, is the built-in
    ur5.xml), joint/actuator/site ``prefix``, ``mount`` (its base_link) on the cabinet's top centre, and
    ``ur_description``: UR's ROS 2 description (a checkout or its config folder) the arm is built from
    (None: the built-in UR5, else ``SHADOW_TWIN_UR_DESCRIPTION`` or the ``ur_description`` ROS package;
    see :func:`shadow_twin.model.ur.arm.arm_xml`)."""

    prefix: str = ''
    mount: Mount = field(default_factory=Mount)
    type: str = 'ur5'
    ur_description: Path | None = None


@dataclass(frozen=True)
class HandConfig:
    """The hand: MJCF ``model`` (None: the built-in Shadow Hand E), its ``root`` body, and
    ``mount`` on the arm's ``flange`` (Shadow's srhand_ur: xyz 0, rpy (pi/2, pi, pi/2))."""

    model: Path | None = None
    root: str = HAND_ROOT
    mount: Mount = field(default_factory=lambda: Mount((0.0, 0.0, 0.0), (PI / 2, PI, PI / 2)))


@dataclass(frozen=True)
class CellConfig:
    """Everything the cell is built from; :meth:`from_yaml` reads ``config/cell.yaml``.

    ``timestep`` (s) is the cell's physics step (0.002, as the hand model's). ``cone``
    ('elliptic' or 'pyramidal') and ``impratio`` are MuJoCo's friction cone and its
    friction-to-normal impedance ratio: elliptic with impratio 10 (MuJoCo's advice
    against slip) makes the base's stick-slip under a swinging arm depend much less on
    the step (yaw of the arm-swing test: 0.050 / 0.061 / 0.068 rad peak to peak at 2 /
    1 / 0.5 ms, against 0.041 / 0.078 / 0.093 with the pyramidal cone).
    """

    timestep: float = 0.002
    cone: str = 'elliptic'
    impratio: float = 10.0
    base: BaseConfig = field(default_factory=BaseConfig)
    cabinet: CabinetConfig = field(default_factory=CabinetConfig)
    arm: ArmConfig = field(default_factory=ArmConfig)
    hand: HandConfig = field(default_factory=HandConfig)

    @classmethod
    def from_yaml(cls, path: str | os.PathLike) -> 'CellConfig':
        """Read a cell YAML (top-level key ``cell``; every key optional, see config/cell.yaml).

        A relative ``hand.model`` or ``arm.ur_description`` is relative to the YAML file's directory;
        ``arm`` may be a plain type (``arm: ur10e``).
        Raises ConfigError naming a missing file, an unknown key or a bad value.
        """
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f'cell config not found: {path}')
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f'{path}: not valid YAML: {" ".join(str(exc).split())}') from None
        return cls.from_dict(data, source=str(path), root=path.parent)

    @classmethod
    def from_dict(cls, data: Any, source: str = 'cell config', root: Path | None = None) -> 'CellConfig':
        """Build from a parsed mapping ``{cell: {...}}`` (or the inner mapping); see :meth:`from_yaml`."""
        if isinstance(data, dict) and 'cell' in data:
            values.mapping(data, source, ('cell',))
            data = data['cell']
        where = f'{source}: cell'
        cell = values.mapping(data, where, ('timestep', 'cone', 'impratio', 'base', 'cabinet', 'arm', 'hand'))
        cone = cell.get('cone', cls.cone)
        if cone not in CONES:
            raise ConfigError(f'{where}.cone: expected one of {sorted(CONES)}, got {cone!r}')
        impratio = values.number(cell.get('impratio', cls.impratio), f'{where}.impratio')
        if impratio < 1:
            raise ConfigError(f'{where}.impratio: must be at least 1, got {impratio!r}')
        base = values.mapping(cell.get('base', {}), f'{where}.base', [f.name for f in fields(BaseConfig)])
        base_cfg = BaseConfig(**{k: (values.non_negative if k in BASE_ZERO_ALLOWED else values.positive)(
            v, f'{where}.base.{k}') for k, v in base.items()})
        cab = values.mapping(cell.get('cabinet', {}), f'{where}.cabinet', ('size', 'mass', 'xyz', 'rpy'))
        cab_cfg = CabinetConfig(
            size=_vector(cab['size'], f'{where}.cabinet.size', positive=True) if 'size' in cab else CabinetConfig.size,
            mass=values.positive(cab.get('mass', CabinetConfig.mass), f'{where}.cabinet.mass'),
            mount=_mount(cab, f'{where}.cabinet', Mount()))
        arm = cell.get('arm', {})
        arm = {'type': arm} if isinstance(arm, str) else arm      # ``arm: ur10e`` = ``arm: {type: ur10e}``
        arm = values.mapping(arm, f'{where}.arm', ('type', 'ur_description', 'prefix', 'xyz', 'rpy'))
        prefix = arm.get('prefix', '')
        prefix = '' if prefix is None else prefix
        check_prefix(prefix, f'{where}.arm.prefix')
        try:
            arm_type = check_arm_type(arm.get('type') or ArmConfig.type)
        except ConfigError as exc:
            raise ConfigError(f'{where}.arm.type: {exc}') from None
        arm_cfg = ArmConfig(prefix, _mount(arm, f'{where}.arm', Mount()), arm_type,
                            _path(arm.get('ur_description'), f'{where}.arm.ur_description', root))
        hand = values.mapping(cell.get('hand', {}), f'{where}.hand', ('model', 'root', 'xyz', 'rpy'))
        model = _path(hand.get('model'), f'{where}.hand.model', root)
        hand_root = hand.get('root', HAND_ROOT)
        if not isinstance(hand_root, str) or not hand_root:
            raise ConfigError(f'{where}.hand.root: expected a body name, got {hand_root!r}')
        hand_cfg = HandConfig(model, hand_root, _mount(hand, f'{where}.hand', HandConfig().mount))
        timestep = values.positive(cell.get('timestep', cls.timestep), f'{where}.timestep')
        return cls(timestep, cone, impratio, base_cfg, cab_cfg, arm_cfg, hand_cfg)


def _path(value: Any, where: str, root: Path | None) -> Path | None:
    """A path from the YAML: None or '' = None; relative = relative to ``root`` (the YAML's folder)."""
    if value is None or value == '':
        return None
    if not isinstance(value, str):
        raise ConfigError(f'{where}: expected a path, got {value!r}')
    path = Path(value).expanduser()
    return root / path if not path.is_absolute() and root is not None else path


def _vector(value: Any, where: str, positive: bool = False) -> tuple[float, float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise ConfigError(f'{where}: expected a list of 3 numbers, got {value!r}')
    check = values.positive if positive else values.number
    return tuple(check(v, where) for v in value)


def _mount(section: dict, where: str, default: Mount) -> Mount:
    xyz = _vector(section['xyz'], f'{where}.xyz') if 'xyz' in section else default.xyz
    rpy = _vector(section['rpy'], f'{where}.rpy') if 'rpy' in section else default.rpy
    return Mount(xyz, rpy)


def check_prefix(prefix: Any, where: str) -> None:
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise ConfigError(f'{where}: expected letters, digits, "_" or "/", got {prefix!r}')
