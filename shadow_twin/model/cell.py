"""The cell: a Shadow Hand E on a UR5 on a cabinet on a MiR250, assembled with ``mujoco.MjSpec``.

Parts (each its own MJCF, attached with ``MjsSite.attach_body`` so that it keeps
its defaults, assets, tendons, actuators, sensors and contact exclusions):

* base: the built-in MiR250 (``builtin/mir250.xml``), a free body on the floor,
  with the overrides of :class:`BaseConfig` (mass, wheel radius and separation,
  wheel friction, wheel velocity gain);
* cabinet: a uniform box (default 15 kg, the figure of the MiR250+UR5 twin study,
  IMECE 2023, table 1) on the base's ``payload`` site;
* arm: the built-in UR5 (``builtin/ur5.xml``) on the cabinet's top, its names
  prefixed with the arm prefix (default ``''``, ur_robot_driver's default
  ``tf_prefix``; Shadow's combined arm+hand systems use ``ra_``);
* hand: the built-in Shadow Hand E or any hand MJCF whose root body is
  ``rh_forearm``, on the arm's ``flange`` site at xyz 0, rpy (pi/2, pi, pi/2)
  (Shadow's ``srhand_ur`` arm+hand description attaches ``rh_forearm`` to the
  arm's ``flange`` this way). The hand keeps its names (``rh_*``).

Mount transforms are ``xyz`` (m) and URDF ``rpy`` (rad; R = Rz(y) Ry(p) Rx(r)) of
the child's root frame in the parent's mount site; they live in
``config/cell.yaml`` (:meth:`CellConfig.from_yaml`). The root pose a part has in
its own file is replaced by its mount.

Name clash: the MiR250's ``base_link`` and the UR5's ``base_link`` would both be
bodies of the cell when the arm prefix is empty; the arm's root body is then
named ``ur5_base_link`` (with a prefix P it is ``P base_link``). Joint, actuator
and site names are never renamed beyond the prefix.

Mesh, texture, height-field and skin files of the parts are made absolute
before attaching, so a written cell MJCF compiles on its own from any directory.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import threading
import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import mujoco
import numpy as np
import yaml

from shadow_twin.common.errors import ConfigError, ModelError
from shadow_twin.common.files import write_text_atomic
from shadow_twin.model.mjcf import builtin_model_path, load_spec

#: Joint names of the UR5 as ur_robot_driver publishes them (before the arm prefix).
UR5_JOINTS = ('shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint',
              'wrist_1_joint', 'wrist_2_joint', 'wrist_3_joint')
#: The base's free joint (the base pose; not a published joint state).
BASE_FREE_JOINT = 'base_free'
#: Driven (velocity-controlled) wheel joints of the MiR250.
BASE_WHEEL_JOINTS = ('left_wheel_joint', 'right_wheel_joint')
#: The MJCF custom numeric holding the base drive's command latency, s (``BaseConfig.command_latency``;
#: read by ``SimMobileBase``).
LATENCY_NUMERIC = 'base_command_latency'
#: Base settings whose 0 means "none" (the others must be positive).
BASE_ZERO_ALLOWED = ('wheel_torque_limit', 'command_latency')
#: Passive caster joints of the MiR250.
BASE_CASTER_JOINTS = tuple(f'{c}_caster_{j}_joint' for c in ('fl', 'fr', 'bl', 'br') for j in ('rotation', 'wheel'))
#: Root body of the arm in ur5.xml and of the hand (Shadow's naming).
ARM_ROOT, HAND_ROOT = 'base_link', 'rh_forearm'
#: Name of the arm's root body in the cell when the arm prefix is empty (see module doc).
ARM_ROOT_UNPREFIXED = 'ur5_base_link'
log = logging.getLogger(__name__)
_PREFIX = re.compile(r'^[A-Za-z0-9_/]*$')
#: Friction cones by their MJCF names.
CONES = {'elliptic': mujoco.mjtCone.mjCONE_ELLIPTIC, 'pyramidal': mujoco.mjtCone.mjCONE_PYRAMIDAL}
PI = math.pi


def arm_joint_names(prefix: str = '') -> list[str]:
    """The cell's six UR5 joint names with ``prefix`` (e.g. ``ra_shoulder_pan_joint``), base to tool."""
    return [prefix + name for name in UR5_JOINTS]


def base_free_joint_name() -> str:
    """Name of the base's free joint (``base_free``): its qpos is the base pose (x y z, quat w x y z)."""
    return BASE_FREE_JOINT


def arm_root_name(prefix: str = '') -> str:
    """Name of the arm's root body in the cell (``P base_link``, or ``ur5_base_link`` with no prefix)."""
    return prefix + ARM_ROOT if prefix else ARM_ROOT_UNPREFIXED


def rpy_to_quat(rpy) -> np.ndarray:
    """Quaternion (w x y z) of URDF roll-pitch-yaw (rad): R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = (float(v) / 2 for v in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy,
                     cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy])


# -- configuration -----------------------------------------------------------------------------
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
        wheel_torque_limit: largest torque of a wheel servo, N m at the wheel (the drive's
            current limit x 0.15 N m/A x 10.167); 0 = unlimited, the default: the study
            gives no current limit. With a limit, a steep acceleration saturates the drive
            and the rotor inertia (the wheel armature) shows in the path.
        command_latency: s from a velocity command's stamp to its effect on the wheels (the
            model's custom numeric ``base_command_latency``: ``SimMobileBase``); 0 = none, the
            default: a command takes effect when it arrives. With a latency longer than the
            transport and scheduling delays, a stamped command moves the base the same way
            whenever it arrives, live or replayed from a recording.
    """

    mass: float = 83.0
    wheel_radius: float = 0.100
    wheel_separation: float = 0.410
    friction: float = 0.5
    wheel_kv: float = 310.1
    wheel_torque_limit: float = 0.0
    command_latency: float = 0.0


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
    """The UR5: joint/actuator/site ``prefix`` and ``mount`` (its base_link) on the cabinet's top centre."""

    prefix: str = ''
    mount: Mount = field(default_factory=Mount)


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

        A relative ``hand.model`` is relative to the YAML file's directory.
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
            _mapping(data, source, ('cell',))
            data = data['cell']
        where = f'{source}: cell'
        cell = _mapping(data, where, ('timestep', 'cone', 'impratio', 'base', 'cabinet', 'arm', 'hand'))
        cone = cell.get('cone', cls.cone)
        if cone not in CONES:
            raise ConfigError(f'{where}.cone: expected one of {sorted(CONES)}, got {cone!r}')
        impratio = _number(cell.get('impratio', cls.impratio), f'{where}.impratio')
        if impratio < 1:
            raise ConfigError(f'{where}.impratio: must be at least 1, got {impratio!r}')
        base = _mapping(cell.get('base', {}), f'{where}.base', [f.name for f in fields(BaseConfig)])
        base_cfg = BaseConfig(**{k: (_non_negative if k in BASE_ZERO_ALLOWED else _positive)(v, f'{where}.base.{k}')
                                 for k, v in base.items()})
        cab = _mapping(cell.get('cabinet', {}), f'{where}.cabinet', ('size', 'mass', 'xyz', 'rpy'))
        cab_cfg = CabinetConfig(
            size=_vector(cab['size'], f'{where}.cabinet.size', positive=True) if 'size' in cab else CabinetConfig.size,
            mass=_positive(cab.get('mass', CabinetConfig.mass), f'{where}.cabinet.mass'),
            mount=_mount(cab, f'{where}.cabinet', Mount()))
        arm = _mapping(cell.get('arm', {}), f'{where}.arm', ('prefix', 'xyz', 'rpy'))
        prefix = arm.get('prefix', '')
        prefix = '' if prefix is None else prefix
        _check_prefix(prefix, f'{where}.arm.prefix')
        arm_cfg = ArmConfig(prefix, _mount(arm, f'{where}.arm', Mount()))
        hand = _mapping(cell.get('hand', {}), f'{where}.hand', ('model', 'root', 'xyz', 'rpy'))
        model = hand.get('model') or None
        if model is not None:
            if not isinstance(model, str):
                raise ConfigError(f'{where}.hand.model: expected a file path, got {model!r}')
            model = Path(model).expanduser()
            if not model.is_absolute() and root is not None:
                model = root / model
        hand_root = hand.get('root', HAND_ROOT)
        if not isinstance(hand_root, str) or not hand_root:
            raise ConfigError(f'{where}.hand.root: expected a body name, got {hand_root!r}')
        hand_cfg = HandConfig(model, hand_root, _mount(hand, f'{where}.hand', HandConfig().mount))
        timestep = _positive(cell.get('timestep', cls.timestep), f'{where}.timestep')
        return cls(timestep, cone, impratio, base_cfg, cab_cfg, arm_cfg, hand_cfg)


def _mapping(value: Any, where: str, known) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f'{where}: expected a mapping, got {type(value).__name__}')
    unknown = sorted(set(value) - set(known), key=str)
    if unknown:
        raise ConfigError(f'{where}: unknown key(s) {unknown}; known: {sorted(known)}')
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f'{where}: expected a finite number, got {value!r}')
    return float(value)


def _non_negative(value: Any, where: str) -> float:
    number = _number(value, where)
    if number < 0:
        raise ConfigError(f'{where}: must not be negative, got {value!r}')
    return number


def _positive(value: Any, where: str) -> float:
    number = _number(value, where)
    if number <= 0:
        raise ConfigError(f'{where}: must be positive, got {value!r}')
    return number


def _vector(value: Any, where: str, positive: bool = False) -> tuple[float, float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise ConfigError(f'{where}: expected a list of 3 numbers, got {value!r}')
    check = _positive if positive else _number
    return tuple(check(v, where) for v in value)


def _mount(section: dict, where: str, default: Mount) -> Mount:
    xyz = _vector(section['xyz'], f'{where}.xyz') if 'xyz' in section else default.xyz
    rpy = _vector(section['rpy'], f'{where}.rpy') if 'rpy' in section else default.rpy
    return Mount(xyz, rpy)


def _check_prefix(prefix: Any, where: str) -> None:
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise ConfigError(f'{where}: expected letters, digits, "_" or "/", got {prefix!r}')


# -- assembly ------------------------------------------------------------------------------------
def _absolute_files(spec: mujoco.MjSpec, source: Path) -> None:
    """Make the files of meshes, textures, height fields and skins of ``spec`` absolute
    (``source`` is the MJCF they are relative to, with its meshdir/texturedir)."""
    base = source.resolve().parent

    def absolute(folder: str, name: str) -> str:
        if not name or os.path.isabs(name):
            return name
        return str((base / folder / name).resolve())

    for mesh in spec.meshes:
        mesh.file = absolute(spec.meshdir, mesh.file)
    for texture in spec.textures:
        texture.file = absolute(spec.texturedir, texture.file)
        texture.cubefiles = [absolute(spec.texturedir, name) for name in texture.cubefiles]
    for hfield in spec.hfields:
        hfield.file = absolute(spec.meshdir, hfield.file)
    for skin in spec.skins:
        skin.file = absolute(spec.meshdir, skin.file)
    spec.meshdir = spec.texturedir = ''


def _set_pose(element, mount: Mount) -> None:
    """Put a body (or frame) at ``mount`` relative to its parent frame."""
    element.pos = np.asarray(mount.xyz, dtype=float)
    element.quat = rpy_to_quat(mount.rpy)
    element.alt.type = mujoco.mjtOrientation.mjORIENTATION_QUAT


def _part(path: Path, root: str, what: str, parent: mujoco.MjSpec,
          free: bool = False) -> tuple[mujoco.MjSpec, Any]:
    """Load part ``path`` and return it with its root body, ready to attach to ``parent``
    (a free joint on the root is refused unless ``free``: the base is the one free part)."""
    spec = load_spec(path)
    body = spec.body(root)
    if body is None:
        raise ModelError(f'{path}: the {what} model has no body named {root!r}')
    if not free and any(j.type == mujoco.mjtJoint.mjJNT_FREE for j in body.joints):
        raise ModelError(f'{path}: the {what} root body {root!r} has a free joint; a mounted part must be fixed')
    _absolute_files(spec, path)
    _take_globals(spec, parent)
    return spec, body


def _copy_fields(dst, src) -> None:
    """Copy every plain (non-callable, public) field of a MuJoCo struct ``src`` onto ``dst``."""
    for name in dir(src):
        if name.startswith('_') or name == 'authored':
            continue
        value = getattr(src, name)
        if callable(value):
            continue
        try:
            setattr(dst, name, value)
        except (AttributeError, TypeError, ValueError):  # read-only fields
            pass


def _take_globals(part: mujoco.MjSpec, cell: mujoco.MjSpec) -> None:
    """Give ``part`` the cell's options, visual settings and sizes: the cell's rule, and equal
    values raise no attach conflict (Shadow's hand sets cone, impratio, znear, njmax...)."""
    _copy_fields(part.option, cell.option)
    for section in ('global_', 'quality', 'headlight', 'map', 'scale', 'rgba'):
        _copy_fields(getattr(part.visual, section), getattr(cell.visual, section))
    for name in ('njmax', 'nconmax', 'nstack', 'memory', 'nuserdata'):
        setattr(part, name, getattr(cell, name))


def _attach(site, body, prefix: str, what: str):
    try:
        return site.attach_body(body, prefix, '')
    except Exception as exc:  # mujoco raises ValueError (name clashes, conflicts)
        raise ModelError(f'cannot attach the {what}: {_one_line(exc)}') from None


def _apply_base_overrides(spec: mujoco.MjSpec, base: BaseConfig) -> None:
    """Set the :class:`BaseConfig` figures in the MiR250 spec (element names of mir250.xml)."""
    def element(kind: str, name: str):
        found = getattr(spec, kind)(name)
        if found is None:
            raise ModelError(f'mir250.xml: no {kind} named {name!r}')
        return found

    chassis = element('body', 'base_link')
    others = sum(b.mass for b in spec.bodies if b.name not in ('world', 'base_link', 'base_footprint'))
    mass = base.mass - others
    if mass <= 0:
        raise ConfigError(f'cell.base.mass {base.mass} kg is not above the wheels and casters ({others:g} kg)')
    chassis.inertia = np.asarray(chassis.inertia) * (mass / chassis.mass)
    chassis.mass = mass
    for side, sign in (('left', 1.0), ('right', -1.0)):
        wheel = element('body', f'{side}_wheel_link')
        wheel.pos = np.array([wheel.pos[0], sign * base.wheel_separation / 2, base.wheel_radius])
        for geom in wheel.geoms:
            size = np.array(geom.size)
            size[0] = base.wheel_radius
            geom.size = size
        actuator = element('actuator', f'{side}_wheel_joint')
        gain, bias = np.array(actuator.gainprm), np.array(actuator.biasprm)
        gain[0], bias[2] = base.wheel_kv, -base.wheel_kv
        actuator.gainprm, actuator.biasprm = gain, bias
        if base.wheel_torque_limit > 0:
            actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
            actuator.forcerange = np.array([-base.wheel_torque_limit, base.wheel_torque_limit])
    if base.command_latency > 0:
        spec.add_numeric(name=LATENCY_NUMERIC, data=[base.command_latency])
    for geom in spec.geoms:
        if geom.name.endswith('_contact'):
            friction = np.array(geom.friction)
            friction[0] = base.friction
            geom.friction = friction


def _cabinet_spec(cabinet: CabinetConfig) -> mujoco.MjSpec:
    """A spec holding the cabinet body: a uniform box, bottom centre at its frame, site ``cabinet_top``."""
    spec = mujoco.MjSpec()
    spec.modelname = 'cabinet'
    x, y, z = cabinet.size
    body = spec.worldbody.add_body(name='cabinet')
    body.mass = cabinet.mass
    body.ipos = [0.0, 0.0, z / 2]
    body.inertia = [cabinet.mass * (y * y + z * z) / 12, cabinet.mass * (x * x + z * z) / 12,
                    cabinet.mass * (x * x + y * y) / 12]
    body.explicitinertial = True
    body.add_geom(name='cabinet_box', type=mujoco.mjtGeom.mjGEOM_BOX, size=[x / 2, y / 2, z / 2],
                  pos=[0.0, 0.0, z / 2], rgba=[0.35, 0.37, 0.4, 1.0], contype=2, conaffinity=0)
    body.add_site(name='cabinet_top', pos=[0.0, 0.0, z], group=4)
    return spec


def build_cell_spec(config: CellConfig | None = None, hand_path: str | os.PathLike | None = None,
                    arm_prefix: str | None = None) -> mujoco.MjSpec:
    """Assemble the cell (floor, MiR250, cabinet, UR5, hand) as an uncompiled ``MjSpec``.

    The parts are attached (see the module doc), compiled once to check them, and the
    result is returned as a fresh spec parsed from its own MJCF text: it holds no
    attachment history, compiles without MuJoCo's empty-prefix warnings and is
    exactly what :func:`write_cell_mjcf` writes.

    Args:
        config: the cell figures (default: :class:`CellConfig` defaults = config/cell.yaml).
        hand_path: hand MJCF overriding ``config.hand.model`` (None: the config's; the
            built-in Shadow Hand E when that is None too).
        arm_prefix: arm prefix overriding ``config.arm.prefix``.
    Returns:
        The spec; ``spec.compile()`` gives the model (timestep ``config.timestep``, implicitfast).
    Raises:
        ModelError: a part is missing, does not parse, lacks its root body or mount site,
            names clash (e.g. a hand with arm-prefixed names), or the cell does not compile.
        ConfigError: a bad prefix or base mass.
    """
    config = config or CellConfig()
    prefix = config.arm.prefix if arm_prefix is None else arm_prefix
    _check_prefix(prefix, 'arm prefix')
    hand_file = _hand_file(config, hand_path)
    with _quiet_attach():
        cell = _assemble(config, hand_file, prefix)
        try:
            cell.compile()
            xml = cell.to_xml()
        except Exception as exc:
            raise ModelError(f'the cell does not compile: {_one_line(exc)}') from None
    try:
        return mujoco.MjSpec.from_string(xml)
    except Exception as exc:
        raise ModelError(f'the assembled cell MJCF does not parse: {_one_line(exc)}') from None


def _hand_file(config: CellConfig, hand_path: str | os.PathLike | None) -> Path:
    """The hand MJCF: ``hand_path``, else the config's, else the built-in Shadow Hand E."""
    if hand_path is not None:
        return Path(hand_path)
    return config.hand.model if config.hand.model is not None else builtin_model_path('shadow_hand_e')


def _one_line(exc: Exception) -> str:
    return ' '.join(str(exc).split())


_EMPTY_PREFIX = 'empty prefix'
_QUIET = threading.Lock()


@contextlib.contextmanager
def _quiet_attach() -> Iterator[None]:
    """Silence MuJoCo's "Attaching a spec with an empty prefix..." warning while assembling.

    The cell attaches parts with an empty prefix on purpose (their names must stay
    as the robots publish them); MuJoCo warns about it at attach time (printed and
    appended to MUJOCO_LOG.TXT in the working directory) and again at compile time
    (a Python UserWarning). The written MJCF is re-parsed and compiles identically,
    so the warning does not apply. Other MuJoCo warnings raised meanwhile go to this
    module's logger. The handler is process-wide, so the swap is serialised.
    """
    def handler(message: str) -> None:
        if _EMPTY_PREFIX not in message:
            log.warning('MuJoCo: %s', message)

    with _QUIET:
        previous = mujoco.get_mju_user_warning()
        mujoco.set_mju_user_warning(handler)
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings('ignore', message=f'.*{_EMPTY_PREFIX}.*')
                yield
        finally:
            mujoco.set_mju_user_warning(previous)


def _assemble(config: CellConfig, hand_file: Path, prefix: str) -> mujoco.MjSpec:
    """The cell spec with its parts attached (see :func:`build_cell_spec`)."""
    cell = mujoco.MjSpec()
    cell.modelname = 'shadow_twin_cell'
    cell.compiler.autolimits = True
    cell.option.timestep = config.timestep
    cell.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    cell.option.cone = CONES[config.cone]
    cell.option.impratio = config.impratio
    cell.add_texture(name='cell_floor_tex', type=mujoco.mjtTexture.mjTEXTURE_2D,
                     builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER, rgb1=[0.55, 0.6, 0.65], rgb2=[0.45, 0.5, 0.55],
                     width=256, height=256)
    cell.add_material(name='cell_floor_mat', textures=['', 'cell_floor_tex'], texrepeat=[8, 8], reflectance=0.05)
    world = cell.worldbody
    world.add_light(name='cell_light', type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL, pos=[0, 0, 4],
                    dir=[0, 0, -1], diffuse=[0.8, 0.8, 0.8], castshadow=False)
    # floor: conaffinity 3 so that robot geoms of contype 1 (hand) and 2 (base, cabinet, arm) touch it
    world.add_geom(name='floor', type=mujoco.mjtGeom.mjGEOM_PLANE, size=[10, 10, 0.05], material='cell_floor_mat',
                   contype=1, conaffinity=3)
    origin = world.add_site(name='cell_origin', group=4)

    base_spec, base_root = _part(builtin_model_path('mir250'), 'base_footprint', 'base', cell, free=True)
    _apply_base_overrides(base_spec, config.base)
    _set_pose(base_root, Mount())
    _attach(origin, base_root, '', 'base (mir250.xml)')

    cab_spec = _cabinet_spec(config.cabinet)
    cab_root = cab_spec.body('cabinet')
    _set_pose(cab_root, config.cabinet.mount)
    _attach(cell.site('payload'), cab_root, '', 'cabinet')

    arm_spec, arm_root = _part(builtin_model_path('ur5'), ARM_ROOT, 'arm', cell)
    _set_pose(arm_root, config.arm.mount)
    if not prefix:
        arm_root.name = ARM_ROOT_UNPREFIXED
    _attach(cell.site('cabinet_top'), arm_root, prefix, 'arm (ur5.xml)')

    hand_spec, hand_root = _part(hand_file, config.hand.root, 'hand', cell)
    _set_pose(hand_root, config.hand.mount)
    _attach(cell.site(prefix + 'flange'), hand_root, '', f'hand ({hand_file})')
    return cell


def compile_cell(spec: mujoco.MjSpec) -> mujoco.MjModel:
    """Compile a cell spec; ModelError with MuJoCo's message if it fails."""
    try:
        return spec.compile()
    except Exception as exc:
        raise ModelError(f'the cell does not compile: {_one_line(exc)}') from None


def summary(model: mujoco.MjModel) -> str:
    """One line: bodies, joints (dofs), actuators and total mass (kg) of a compiled model."""
    return (f'{model.nbody - 1} bodies, {model.njnt} joints ({model.nv} dof), {model.nu} actuators, '
            f'mass {float(model.body_subtreemass[0]):.2f} kg, timestep {model.opt.timestep:g} s')


def write_cell_mjcf(config: CellConfig | None, out_path: str | os.PathLike,
                    hand_path: str | os.PathLike | None = None, arm_prefix: str | None = None,
                    force: bool = False) -> tuple[Path, mujoco.MjModel]:
    """Assemble, compile and write the cell MJCF to ``out_path`` atomically.

    File paths of meshes and textures in the written MJCF are absolute, so it
    compiles on its own from any directory.

    Returns:
        (path written, compiled model).
    Raises:
        ConfigError: ``out_path`` exists and ``force`` is False, or is the hand model itself.
        ModelError: see :func:`build_cell_spec`; the cell does not compile.
    """
    out = Path(out_path)
    config = config or CellConfig()
    hand_file = _hand_file(config, hand_path)
    if out.is_dir():
        raise ConfigError(f'{out} is a directory')
    if out.exists() and out.resolve() == hand_file.resolve():
        raise ConfigError(f'refusing to overwrite the hand model {hand_file}')
    if out.exists() and not force:
        raise ConfigError(f'{out} exists; choose another file or pass --force to overwrite it')
    spec = build_cell_spec(config, hand_file, arm_prefix)
    model = compile_cell(spec)
    try:
        xml = spec.to_xml()
    except Exception as exc:
        raise ModelError(f'the cell cannot be written as MJCF: {_one_line(exc)}') from None
    prefix = config.arm.prefix if arm_prefix is None else arm_prefix
    header = (f'<!-- shadow_twin cell (shadow-twin model --cell): MiR250 + cabinet + UR5 (arm prefix '
              f'{prefix!r}) + hand {hand_file}. {summary(model)}. -->\n')
    try:
        written = write_text_atomic(out, header + xml)
    except OSError as exc:
        raise ConfigError(f'cannot write {out}: {exc.strerror or exc}') from None
    return written, model


def write_arm_stand_in_mjcf(config: CellConfig | str | os.PathLike | None, out_path: str | os.PathLike,
                            hand_path: str | os.PathLike | None = None, arm_prefix: str | None = None) -> Path:
    """Write the cell reduced to its arm, a stand-in for the UR5 that carries the hand, atomically.

    The cell's MJCF (:func:`build_cell_spec`: same masses, geometry, options and timestep) with
    every joint but the six UR5 joints (:func:`arm_joint_names`) removed: the base's free joint
    (the base welded to the world at its start pose), the wheel and caster joints and the hand's
    joints (the hand rigid in its ``qpos0`` posture, its mass and inertia still on the flange),
    and with them the tendons, actuators, sensors and equality constraints on removed joints
    and every keyframe (their state vectors no longer fit). Its joints and actuators are the
    UR5's six, named as in the cell, so it loads with the UR's gains (config/controllers/ur5.yaml)
    in the mock UR's bridge. Bare ur5.xml lacks the hand on the flange (the built-in hand: 3.79 kg):
    simulated offline (each with its gains) on the sweeps of config/trajectories/ur5.yaml, the
    stand-in's arm joint positions are 14 to 48 times closer (RMS) to the cell's than ur5.xml's
    (shoulder pan, lift, elbow and wrist 1 sweeps measured; test/core/test_cell_model.py checks the
    fast shoulder-lift sweep).

    Args:
        config: the cell figures, or the path of a cell YAML (:meth:`CellConfig.from_yaml`);
            None: the :class:`CellConfig` defaults.
        out_path: the MJCF to write (its folder is created; an existing file is replaced).
        hand_path, arm_prefix: as for :func:`build_cell_spec`.
    Returns:
        The path written.
    Raises:
        ConfigError: a bad cell YAML, ``out_path`` is a directory or the hand model itself,
            or cannot be written.
        ModelError: see :func:`build_cell_spec`; the reduced model does not compile.
    """
    def reduce(spec: mujoco.MjSpec, prefix: str) -> str:
        _keep_joints(spec, set(arm_joint_names(prefix)))
        return 'with only the UR5 joints, the base welded to the world and the hand rigid'
    return _write_stand_in(config, out_path, hand_path, arm_prefix, 'arm', reduce)


def write_base_stand_in_mjcf(config: CellConfig | str | os.PathLike | None, out_path: str | os.PathLike,
                             arm_pose: Mapping[str, float] | None = None, hand_path: str | os.PathLike | None = None,
                             arm_prefix: str | None = None, arm_moves: bool = False) -> Path:
    """Write the cell reduced to its base, a stand-in for the MiR250 that carries the cabinet, the
    arm and the hand, atomically.

    The counterpart of :func:`write_arm_stand_in_mjcf`: the cell's MJCF with only the base's joints
    (its free joint, the drive wheels and the casters) and their actuators; the arm is rigid in
    ``arm_pose`` ({arm joint: rad}, e.g. the calibration protocol's rest pose; joints not named stay
    at 0) and the hand in its ``qpos0`` posture. Bare mir250.xml lacks the 15 kg cabinet, the UR5 and
    the hand on its top, which change the load on the wheels (and so when they slip) by a third.

    With ``arm_moves`` the arm keeps its six joints and their servos instead, starting in ``arm_pose``
    (keyframe 0; without a pose at ``qpos0``, where the arm stand-in starts): a bridge running it
    with ``follow_joint_states_topic`` set to the arm stand-in's joint states moves its arm as that
    one moves, so that its base feels the arm swing as the real cell's does (the protocol's runs CY
    and IY).

    Args and errors as :func:`write_arm_stand_in_mjcf`; ConfigError also for a pose of an unknown joint.
    """
    def reduce(spec: mujoco.MjSpec, prefix: str) -> str:
        arm = arm_joint_names(prefix)
        unknown = sorted(set(arm_pose or {}) - set(arm))
        if unknown:
            raise ConfigError(f'base stand-in: {unknown} are not arm joints ({arm})')
        keep = ({j.name for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_FREE}
                | {j.name for j in spec.joints if 'wheel' in j.name or 'caster' in j.name})
        if arm_moves:
            _keep_joints(spec, keep | set(arm))
            if arm_pose:        # keyframe 0 in the pose (without one the arm starts at qpos0)
                model = compile_cell(spec)
                qpos = model.qpos0.copy()
                for name, angle in arm_pose.items():
                    qpos[model.jnt_qposadr[model.joint(name).id]] = float(angle)
                spec.add_key(name='arm_pose', qpos=qpos)
            return f'with the base and arm joints (the arm starting at {dict(arm_pose or {})} rad) and the hand rigid'
        for name, angle in (arm_pose or {}).items():
            _freeze_hinge(spec.joint(name), float(angle))
        _keep_joints(spec, keep)
        return f'with only the base joints, the arm rigid at {dict(arm_pose or {})} rad and the hand rigid'
    return _write_stand_in(config, out_path, hand_path, arm_prefix, 'base', reduce)


def _write_stand_in(config: CellConfig | str | os.PathLike | None, out_path: str | os.PathLike,
                    hand_path: str | os.PathLike | None, arm_prefix: str | None, what: str,
                    reduce: Callable[[mujoco.MjSpec, str], str]) -> Path:
    """Build the cell's spec, let ``reduce(spec, arm prefix)`` cut it down (it returns the header's
    description), compile it and write it to ``out_path`` atomically: the body of the ``what``
    (``'arm'`` / ``'base'``) stand-in writers, whose errors it raises."""
    if config is not None and not isinstance(config, CellConfig):
        config = CellConfig.from_yaml(config)
    config = config or CellConfig()
    out = Path(out_path)
    hand_file = _hand_file(config, hand_path)
    if out.is_dir():
        raise ConfigError(f'{out} is a directory')
    if out.exists() and out.resolve() == hand_file.resolve():
        raise ConfigError(f'refusing to overwrite the hand model {hand_file}')
    prefix = config.arm.prefix if arm_prefix is None else arm_prefix
    spec = build_cell_spec(config, hand_file, prefix)
    description = reduce(spec, prefix)
    spec.modelname = f'shadow_twin_{what}_stand_in'
    model = compile_cell(spec)
    try:
        xml = spec.to_xml()
    except Exception as exc:
        raise ModelError(f'the {what} stand-in cannot be written as MJCF: {_one_line(exc)}') from None
    header = (f'<!-- shadow_twin {what} stand-in: the cell (arm prefix {prefix!r}, hand {hand_file}) {description}. '
              f'{summary(model)}. -->\n')
    try:
        return write_text_atomic(out, header + xml)
    except OSError as exc:
        raise ConfigError(f'cannot write {out}: {exc.strerror or exc}') from None


def _freeze_hinge(joint, angle: float) -> None:
    """Turn the body of hinge ``joint`` (an MjsJoint) by ``angle`` rad about the joint's axis through
    the joint's position, in its parent's frame, so that deleting the joint leaves the body where
    the joint at ``angle`` held it: quat <- quat * q(axis, angle), pos <- pos + R (a - R(axis, angle) a)."""
    body = joint.parent
    turn, rotated, moved = np.zeros(4), np.zeros(3), np.zeros(3)
    axis = np.asarray(joint.axis, dtype=float)
    mujoco.mju_axisAngle2Quat(turn, axis / np.linalg.norm(axis), angle)
    anchor = np.asarray(joint.pos, dtype=float)
    mujoco.mju_rotVecQuat(rotated, anchor, turn)
    mujoco.mju_rotVecQuat(moved, anchor - rotated, np.asarray(body.quat, dtype=float))
    quat = np.zeros(4)
    mujoco.mju_mulQuat(quat, np.asarray(body.quat, dtype=float), turn)
    body.quat = quat
    body.pos = np.asarray(body.pos, dtype=float) + moved


def _keep_joints(spec: mujoco.MjSpec, keep: set[str]) -> None:
    """Delete every joint of ``spec`` not in ``keep``, the tendons over them, the actuators, sensors
    and equality constraints on deleted joints or tendons (or on deleted actuators), and the keyframes."""
    joints = [j for j in spec.joints if j.name not in keep]
    joint_names = {j.name for j in joints} - {''}
    tendons = [t for t in spec.tendons
               if any(w.type == mujoco.mjtWrap.mjWRAP_JOINT and w.target.name in joint_names for w in t.path)]
    tendon_names = {t.name for t in tendons} - {''}
    driven = {mujoco.mjtTrn.mjTRN_JOINT: joint_names, mujoco.mjtTrn.mjTRN_JOINTINPARENT: joint_names,
              mujoco.mjtTrn.mjTRN_TENDON: tendon_names}
    actuators = [a for a in spec.actuators if a.target in driven.get(a.trntype, ())]
    gone = {mujoco.mjtObj.mjOBJ_JOINT: joint_names, mujoco.mjtObj.mjOBJ_TENDON: tendon_names,
            mujoco.mjtObj.mjOBJ_ACTUATOR: {a.name for a in actuators} - {''}}
    sensors = [s for s in spec.sensors if s.objname in gone.get(s.objtype, ()) or s.refname in gone.get(s.reftype, ())]
    on = {mujoco.mjtEq.mjEQ_JOINT: joint_names, mujoco.mjtEq.mjEQ_TENDON: tendon_names}
    equalities = [e for e in spec.equalities if {e.name1, e.name2} & on.get(e.type, set())]
    for element in sensors + equalities + actuators + tendons + joints + list(spec.keys):
        spec.delete(element)
