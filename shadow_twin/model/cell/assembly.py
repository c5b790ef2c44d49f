"""The cell: a Shadow Hand E on a UR5 on a cabinet on a MiR250, assembled with ``mujoco.MjSpec``.

Parts (each its own MJCF, attached with ``MjsSite.attach_body`` so that it keeps
its defaults, assets, tendons, actuators, sensors and contact exclusions):

* base: the built-in MiR250 (``builtin/mir250.xml``), a free body on the floor,
  with the overrides of :class:`BaseConfig` (mass, wheel radius and separation,
  wheel friction, wheel velocity gain, drive-wheel suspension; :mod:`shadow_twin.model.cell.base`);
* cabinet: a uniform box (default 15 kg, the figure of the MiR250+UR5 twin study,
  IMECE 2023, table 1) on the base's ``payload`` site;
* arm: the built-in UR5 (``builtin/ur5.xml``), or another UR type generated from UR's
  description (``ArmConfig.type``, :mod:`shadow_twin.model.ur.arm`), on the cabinet's top, its names
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

Modules: the names of joints and bodies are in :mod:`shadow_twin.model.cell.names`, the
configuration (:class:`CellConfig`) in :mod:`shadow_twin.model.cell.config`, the mock hardware
models of arm and base in :mod:`shadow_twin.model.mock_models`; this module assembles and writes the cell.
The public names of ``cell_names`` and ``cell_config`` are re-exported here, so
``from shadow_twin.model.cell.assembly import CellConfig`` (or ``UR5_JOINTS``...) keeps working.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import warnings
from pathlib import Path
from typing import Any, Iterator

import mujoco
import numpy as np

from shadow_twin.common.errors import ConfigError, ModelError, one_line
from shadow_twin.common.files import write_text_atomic
from shadow_twin.model.cell.base import apply_base_config
from shadow_twin.model.cell.config import (BASE_ZERO_ALLOWED, CONES, PI, ArmConfig, BaseConfig, CabinetConfig,
                                           CellConfig, HandConfig, Mount, check_prefix, rpy_to_quat)
from shadow_twin.model.cell.names import (ARM_ROOT, ARM_ROOT_UNPREFIXED, BASE_CASTER_JOINTS, BASE_FREE_JOINT,
                                          BASE_WHEEL_JOINTS, HAND_ROOT, LATENCY_NUMERIC, UR5_JOINTS, arm_joint_names,
                                          arm_root_name, base_free_joint_name)
from shadow_twin.model.mjcf import builtin_model_path, load_spec
from shadow_twin.model.scene import SceneConfig, add_objects
from shadow_twin.model.ur.arm import BUILTIN_TYPE, arm_spec

__all__ = [
    # assembly and writer (this module)
    'build_cell_spec', 'compile_cell', 'rpy_to_quat', 'summary', 'write_cell_mjcf',
    # re-exported from cell_names
    'ARM_ROOT', 'ARM_ROOT_UNPREFIXED', 'BASE_CASTER_JOINTS', 'BASE_FREE_JOINT', 'BASE_WHEEL_JOINTS', 'HAND_ROOT',
    'LATENCY_NUMERIC', 'UR5_JOINTS', 'arm_joint_names', 'arm_root_name', 'base_free_joint_name',
    # re-exported from cell_config
    'BASE_ZERO_ALLOWED', 'CONES', 'PI', 'ArmConfig', 'BaseConfig', 'CabinetConfig', 'CellConfig', 'HandConfig',
    'Mount',
]

log = logging.getLogger(__name__)


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


def _part(path: Path, root: str, what: str, parent: mujoco.MjSpec, free: bool = False,
          spec: mujoco.MjSpec | None = None) -> tuple[mujoco.MjSpec, Any]:
    """Load part ``path`` (or take ``spec``, generated, named ``path``) and return it with its root
    body, ready to attach to ``parent`` (a free joint on the root is refused unless ``free``: the base
    is the one free part)."""
    spec = load_spec(path) if spec is None else spec
    body = spec.body(root)
    if body is None:
        raise ModelError(f'{path}: the {what} model has no body named {root!r}')
    if not free and any(j.type == mujoco.mjtJoint.mjJNT_FREE for j in body.joints):
        raise ModelError(f'{path}: the {what} root body {root!r} has a free joint; a mounted part must be fixed')
    _absolute_files(spec, path)
    _take_globals(spec, parent)
    return spec, body


def _arm_part(arm: ArmConfig, parent: mujoco.MjSpec) -> tuple[mujoco.MjSpec, Any, str]:
    """The arm part: the built-in ur5.xml for the UR5 without a description, else the type generated
    from UR's description (:func:`shadow_twin.model.ur.arm.arm_spec`); returns (spec, root, its name)."""
    if arm.type == BUILTIN_TYPE and arm.ur_description is None:
        return (*_part(builtin_model_path(BUILTIN_TYPE), ARM_ROOT, 'arm', parent), 'ur5.xml')
    name = f'{arm.type}, generated'
    spec = arm_spec(arm.type, arm.ur_description)
    return (*_part(Path(f'{arm.type}.xml'), ARM_ROOT, 'arm', parent, spec=spec), name)


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
        raise ModelError(f'cannot attach the {what}: {one_line(exc)}') from None


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
    check_prefix(prefix, 'arm prefix')
    hand_file = hand_model_file(config, hand_path)
    with _quiet_attach():
        cell = _assemble(config, hand_file, prefix)
        try:
            cell.compile()
            xml = cell.to_xml()
        except Exception as exc:
            raise ModelError(f'the cell does not compile: {one_line(exc)}') from None
    try:
        return mujoco.MjSpec.from_string(xml)
    except Exception as exc:
        raise ModelError(f'the assembled cell MJCF does not parse: {one_line(exc)}') from None


def hand_model_file(config: CellConfig, hand_path: str | os.PathLike | None) -> Path:
    """The hand MJCF: ``hand_path``, else the config's, else the built-in Shadow Hand E."""
    if hand_path is not None:
        return Path(hand_path)
    return config.hand.model if config.hand.model is not None else builtin_model_path('shadow_hand_e')


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
    apply_base_config(base_spec, config.base)
    _set_pose(base_root, Mount())
    _attach(origin, base_root, '', 'base (mir250.xml)')

    cab_spec = _cabinet_spec(config.cabinet)
    cab_root = cab_spec.body('cabinet')
    _set_pose(cab_root, config.cabinet.mount)
    _attach(cell.site('payload'), cab_root, '', 'cabinet')

    _arm_spec, arm_root, arm_name = _arm_part(config.arm, cell)
    _set_pose(arm_root, config.arm.mount)
    if not prefix:
        arm_root.name = ARM_ROOT_UNPREFIXED
    _attach(cell.site('cabinet_top'), arm_root, prefix, f'arm ({arm_name})')

    hand_spec, hand_root = _part(hand_file, config.hand.root, 'hand', cell)
    _set_pose(hand_root, config.hand.mount)
    _attach(cell.site(prefix + 'flange'), hand_root, '', f'hand ({hand_file})')
    return cell


def compile_cell(spec: mujoco.MjSpec) -> mujoco.MjModel:
    """Compile a cell spec; ModelError with MuJoCo's message if it fails."""
    try:
        return spec.compile()
    except Exception as exc:
        raise ModelError(f'the cell does not compile: {one_line(exc)}') from None


def summary(model: mujoco.MjModel) -> str:
    """One line: bodies, joints (dofs), actuators and total mass (kg) of a compiled model."""
    return (f'{model.nbody - 1} bodies, {model.njnt} joints ({model.nv} dof), {model.nu} actuators, '
            f'mass {float(model.body_subtreemass[0]):.2f} kg, timestep {model.opt.timestep:g} s')


def write_cell_mjcf(config: CellConfig | None, out_path: str | os.PathLike,
                    hand_path: str | os.PathLike | None = None, arm_prefix: str | None = None,
                    force: bool = False, scene: SceneConfig | None = None) -> tuple[Path, mujoco.MjModel]:
    """Assemble, compile and write the cell MJCF to ``out_path`` atomically, with ``scene``'s
    objects (:func:`shadow_twin.model.scene.add_objects`) when given.

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
    hand_file = hand_model_file(config, hand_path)
    if out.is_dir():
        raise ConfigError(f'{out} is a directory')
    if out.exists() and out.resolve() == hand_file.resolve():
        raise ConfigError(f'refusing to overwrite the hand model {hand_file}')
    if out.exists() and not force:
        raise ConfigError(f'{out} exists; choose another file or pass --force to overwrite it')
    spec = build_cell_spec(config, hand_file, arm_prefix)
    if scene is not None:
        add_objects(spec, scene)
    model = compile_cell(spec)
    try:
        xml = spec.to_xml()
    except Exception as exc:
        raise ModelError(f'the cell cannot be written as MJCF: {one_line(exc)}') from None
    prefix = config.arm.prefix if arm_prefix is None else arm_prefix
    header = (f'<!-- shadow_twin cell (shadow-twin model, option cell): MiR250 + cabinet + '
              f'{config.arm.type.upper()} (arm prefix {prefix!r}) + hand {hand_file}. {summary(model)}. -->\n')
    try:
        written = write_text_atomic(out, header + xml)
    except OSError as exc:
        raise ConfigError(f'cannot write {out}: {exc.strerror or exc}') from None
    return written, model
