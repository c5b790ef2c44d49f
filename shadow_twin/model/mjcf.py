"""MJCF models: load (with includes and meshes), compile (:class:`TwinModel`), and write a
calibrated MJCF (:func:`write_calibrated_mjcf`); the built-in models' paths.

The model parameters calibration changes (:class:`~shadow_twin.model.calibratable.ParameterTarget`)
are read and set on the compiled model in place by :mod:`shadow_twin.model.calibratable`; the
``mujoco.MjSpec`` a :class:`TwinModel` keeps alongside is only used to write a calibrated MJCF.
"""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path
from typing import Callable, Iterable, Sequence

import mujoco
import numpy as np

from shadow_twin.common.errors import ModelError, ModelTooLarge, one_line
from shadow_twin.common.files import write_text_atomic
from shadow_twin.common.globs import matching
from shadow_twin.model.calibratable import (ACTUATOR_ATTRIBUTES, BODY_ATTRIBUTES, GEOM_ATTRIBUTES, GEOM_FIELDS,
                                            JOINT_ATTRIBUTES, ParameterTarget)

#: Models shipped in shadow_twin/model/builtin: the hand, and the UR5 arm and MiR250 base of the cell.
BUILTIN_MODELS = {'shadow_hand_e': 'shadow_hand_e.xml', 'ur5': 'ur5.xml', 'mir250': 'mir250.xml'}


def builtin_model_path(name: str = 'shadow_hand_e') -> Path:
    """Path of a model shipped with the package (default: the right Shadow Hand E)."""
    if name not in BUILTIN_MODELS:
        raise ModelError(f'no built-in model {name!r}; known: {sorted(BUILTIN_MODELS)}')
    return Path(str(resources.files('shadow_twin.model') / 'builtin' / BUILTIN_MODELS[name]))


#: URL prefix of the built-in models in ROS parameter files (ROS's ``package://`` convention; a
#: colcon install puts them into ``share/shadow_twin/models``).
PACKAGE_MODELS_URL = 'package://shadow_twin/models/'


def resolve_model_path(path: str | os.PathLike | None) -> Path:
    """A model path as given in ROS parameters: None or '' = the built-in Shadow Hand E,
    ``package://shadow_twin/models/<file>`` = that built-in model, else the path itself.
    Raises ModelError for a ``package://`` URL naming no built-in model."""
    text = str(path) if path is not None else ''
    if not text:
        return builtin_model_path()
    if text.startswith(PACKAGE_MODELS_URL):
        name = text[len(PACKAGE_MODELS_URL):]
        known = {file: key for key, file in BUILTIN_MODELS.items()}
        if name not in known:
            raise ModelError(f'{text}: no such built-in model; known: {sorted(known)}')
        return builtin_model_path(known[name])
    return Path(path)


#: ``file`` attribute of an ``<include`` element, matched at the element's start.
_INCLUDE_FILE = re.compile(rb'<include\b[^>]*?\bfile\s*=\s*(["\'])(.*?)\1', re.S)
#: Bytes searched per ``bytes.find`` call (each call holds the GIL; ~0.1 ms per MiB).
_SCAN_WINDOW = 1 << 20


def _find(data: bytes, token: bytes, start: int, end: int | None = None) -> int:
    """``data.find(token, start, end)`` in windows of :data:`_SCAN_WINDOW` bytes, so that
    other threads (the bridge's stepping) get the GIL between them."""
    end = len(data) if end is None else end
    while start < end:
        hit = data.find(token, start, min(end, start + _SCAN_WINDOW + len(token) - 1))
        if hit >= 0:
            return hit
        start += _SCAN_WINDOW
    return -1


def _include_names(data: bytes) -> list[str]:
    """``file`` of every ``<include>`` in MJCF text, outside comments (a byte scan: no element tree)."""
    names, pos = [], 0
    while (start := _find(data, b'<include', pos)) >= 0:
        comment = _find(data, b'<!--', pos, start)
        if comment >= 0:                       # skip the comment, look again after it
            end = _find(data, b'-->', comment + 4)
            pos = len(data) if end < 0 else end + 3
            continue
        match = _INCLUDE_FILE.match(data, start)
        if match:
            names.append(match.group(2).decode(errors='replace'))
        pos = start + len(b'<include')
    return names


def _include_stubs(path: Path, max_bytes: int | None = None) -> dict[str, bytes]:
    """Resolve git symlink stubs among the files a model includes.

    A repository checked out without symlink support stores a symlink as a
    small text file holding the target path (Shadow's model does this for its
    ``duplicate_geoms``). MuJoCo cannot parse those, so each included file whose
    content is a relative path to an existing file is served from its target
    through MjSpec's ``include`` mapping. Returns {include file name: bytes}.

    ``<include file=...>`` is found by a byte scan of each file (read once), so a
    big model does not hold the GIL for an element tree. With ``max_bytes``, the
    sizes of the model file and of every file it includes (recursively) add up,
    each checked before it is read; ModelTooLarge when the sum exceeds ``max_bytes``.
    """
    stubs: dict[str, bytes] = {}
    seen: set[Path] = set()
    root = path.parent
    total = 0

    def visit(file: Path) -> None:
        nonlocal total
        if file in seen or not file.is_file():
            return
        seen.add(file)
        total += file.stat().st_size
        if max_bytes is not None and total > max_bytes:
            raise ModelTooLarge(f'{path}: the model and its includes are at least {total} bytes '
                                f'({total / 2**20:.1f} MiB), above the limit of {max_bytes} bytes')
        for name in _include_names(file.read_bytes()):
            target = root / name
            text = target.read_bytes() if target.is_file() and target.stat().st_size < 1024 else b''
            if text and b'<' not in text:
                linked = (target.parent / text.decode(errors='replace').strip()).resolve()
                if linked.is_file():
                    stubs[name] = linked.read_bytes()
                    target = linked
            visit(target)
    visit(path)
    return stubs


def load_spec(path: str | os.PathLike, max_bytes: int | None = None) -> mujoco.MjSpec:
    """Parse an MJCF file (following includes) into an ``MjSpec``.

    Raises ModelError if the file is missing, does not parse, or (with ``max_bytes``)
    it and the files it includes hold more than ``max_bytes`` bytes (checked first).
    """
    path = Path(path)
    if not path.is_file():
        raise ModelError(f'model file not found: {path}')
    try:
        stubs = _include_stubs(path, max_bytes)
    except OSError as exc:
        raise ModelError(f'{path}: cannot read the model or an included file: {exc}') from None
    try:
        return mujoco.MjSpec.from_file(str(path), include=stubs or None)
    except Exception as exc:  # mujoco raises ValueError with its own message
        raise ModelError(f'{path}: MJCF does not parse: {one_line(exc)}') from None


class TwinModel:
    """An MJCF model: its path, its ``MjSpec`` and the compiled ``MjModel``.

    Args:
        path: MJCF file (default: the built-in Shadow Hand E); ``package://shadow_twin/models/<file>``
            names a built-in model (:func:`resolve_model_path`).
        max_bytes: refuse a model whose MJCF files (with includes) exceed this many
            bytes, before parsing; None for no limit.
        edit: called with the spec before it is compiled (e.g. to add a scene's objects); what it
            raises (ModelError) propagates.
    Raises:
        ModelError: missing file, too big, parse or compile error (MuJoCo's text included).
    """

    def __init__(self, path: str | os.PathLike | None = None, max_bytes: int | None = None,
                 edit: Callable[[mujoco.MjSpec], object] | None = None) -> None:
        self.path = resolve_model_path(path)
        self.spec = load_spec(self.path, max_bytes)
        if edit is not None:        # e.g. a scene's objects added (shadow_twin.model.scene.add_objects)
            edit(self.spec)
        try:
            self.model = self.spec.compile()
        except Exception as exc:
            raise ModelError(f'{self.path}: MJCF does not compile: {one_line(exc)}') from None

    # -- names -----------------------------------------------------------------------
    @property
    def joint_names(self) -> list[str]:
        """Names of all named joints, in model order."""
        return [self.model.joint(i).name for i in range(self.model.njnt) if self.model.joint(i).name]

    @property
    def actuator_names(self) -> list[str]:
        """Names of all named actuators, in model order."""
        return [self.model.actuator(i).name for i in range(self.model.nu) if self.model.actuator(i).name]

    @property
    def geom_names(self) -> list[str]:
        """Names of all named geoms, in model order."""
        return [self.model.geom(i).name for i in range(self.model.ngeom) if self.model.geom(i).name]

    @property
    def body_names(self) -> list[str]:
        """Names of all named bodies but the world, in model order."""
        return [self.model.body(i).name for i in range(1, self.model.nbody) if self.model.body(i).name]

    def joint_id(self, name: str) -> int:
        """Index of joint ``name``; ModelError if absent."""
        jid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if jid < 0:
            raise ModelError(f'{self.path.name}: no joint named {name!r}')
        return jid

    def joint_class(self, name: str) -> str:
        """Default class of joint ``name`` in the MJCF ('main' when none)."""
        joint = self.spec.joint(name)
        if joint is None:
            raise ModelError(f'{self.path.name}: no joint named {name!r}')
        return joint.classname.name or 'main'

    def select(self, kind: str, patterns: Sequence[str] = (), classes: Sequence[str] = ()) -> list[str]:
        """Names of joints, actuators, geoms or bodies (``kind``) matching any glob ``pattern`` or
        default ``class`` (joints only).

        Patterns use shell globs (``rh_*FJ1``, ``rh_[FMRL]FJ3``). Returns names in
        model order. Raises ModelError if a pattern or class matches nothing.
        """
        names = {'joint': self.joint_names, 'actuator': self.actuator_names, 'geom': self.geom_names,
                 'body': self.body_names}[kind]
        chosen: set[str] = set()
        for pattern in patterns:
            hits = matching(names, [pattern])
            if not hits:
                raise ModelError(f'{self.path.name}: no {kind} matches {pattern!r}')
            chosen.update(hits)
        for cls in classes:
            if kind != 'joint':
                raise ModelError('default classes select joints only')
            hits = [n for n in names if self.joint_class(n) == cls]
            if not hits:
                raise ModelError(f'{self.path.name}: no joint has default class {cls!r}')
            chosen.update(hits)
        return [n for n in names if n in chosen]

    def target(self, kind: str, name: str, attribute: str) -> ParameterTarget:
        """Validated :class:`ParameterTarget`; ModelError for unknown names/attributes."""
        if kind == 'joint':
            if attribute not in JOINT_ATTRIBUTES:
                raise ModelError(f'unknown joint attribute {attribute!r}; known: {JOINT_ATTRIBUTES}')
            self.joint_id(name)
        elif kind == 'actuator':
            if attribute not in ACTUATOR_ATTRIBUTES:
                raise ModelError(f'unknown actuator attribute {attribute!r}; known: {ACTUATOR_ATTRIBUTES}')
            if mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_ACTUATOR, name) < 0:
                raise ModelError(f'{self.path.name}: no actuator named {name!r}')
        elif kind == 'geom':
            if attribute not in GEOM_ATTRIBUTES:
                raise ModelError(f'unknown geom attribute {attribute!r}; known: {GEOM_ATTRIBUTES}')
            if mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, name) < 0:
                raise ModelError(f'{self.path.name}: no geom named {name!r}')
        elif kind == 'body':
            if attribute not in BODY_ATTRIBUTES:
                raise ModelError(f'unknown body attribute {attribute!r}; known: {BODY_ATTRIBUTES}')
            if mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, name) < 0 or name == 'world':
                raise ModelError(f'{self.path.name}: no body named {name!r}')
        else:
            raise ModelError(f'unknown parameter kind {kind!r}')
        return ParameterTarget(kind, name, attribute)


def _spec_set(spec: mujoco.MjSpec, target: ParameterTarget, value: float) -> None:
    """Write one joint's model parameter into an MjSpec (explicit value on the element)."""
    joint = spec.joint(target.name)
    if joint is None:
        raise ModelError(f'no joint named {target.name!r}')
    if target.attribute == 'damping':
        damping = np.array(joint.damping, dtype=float)
        damping[0] = value
        joint.damping = damping
    elif target.attribute in ('frictionloss', 'armature', 'stiffness', 'springref'):
        if target.attribute == 'stiffness':
            stiffness = np.array(joint.stiffness, dtype=float)
            stiffness[0] = value
            joint.stiffness = stiffness
        else:
            setattr(joint, target.attribute, value)
    else:
        rng = np.array(joint.range, dtype=float)
        rng[0 if target.attribute == 'range_lower' else 1] = value
        joint.range = rng
        joint.limited = mujoco.mjtLimited.mjLIMITED_TRUE


def _spec_set_geom(spec: mujoco.MjSpec, target: ParameterTarget, value: float) -> None:
    """Write one geom's contact parameter (:data:`GEOM_FIELDS`) into an MjSpec."""
    geom = spec.geom(target.name)
    if geom is None:
        raise ModelError(f'no geom named {target.name!r}')
    field, column = GEOM_FIELDS[target.attribute]
    name = field.removeprefix('geom_')
    array = np.array(getattr(geom, name), dtype=float)
    array[column] = value
    setattr(geom, name, array)


def _spec_set_body(spec: mujoco.MjSpec, target: ParameterTarget, value: float) -> None:
    """Write one body's mass (its inertia scaled with it) or centre of mass into an MjSpec, as an
    explicit inertial."""
    body = spec.body(target.name)
    if body is None:
        raise ModelError(f'no body named {target.name!r}')
    if not body.explicitinertial:           # inferred from the geoms: written out from the compiled model
        compiled = spec.compile()
        bid = compiled.body(target.name).id
        body.mass, body.ipos = float(compiled.body_mass[bid]), compiled.body_ipos[bid].copy()
        body.iquat, body.inertia = compiled.body_iquat[bid].copy(), compiled.body_inertia[bid].copy()
        body.explicitinertial = True
    if target.attribute == 'mass':
        body.inertia = np.array(body.inertia, dtype=float) * (value / body.mass)
        body.mass = value
    else:
        ipos = np.array(body.ipos, dtype=float)
        ipos['xyz'.index(target.attribute[-1])] = value
        body.ipos = ipos


def write_calibrated_mjcf(source: TwinModel, values: dict[ParameterTarget, float],
                          out_path: str | os.PathLike) -> Path:
    """Write a copy of ``source``'s MJCF with ``values`` applied, atomically.

    Joint attributes are written as explicit values on each joint, a geom's contact
    parameters on the geom, a body's mass and centre of mass as its explicit inertial;
    kp/kd/kv of actuators that are affine-bias servos in the MJCF are written to their
    gain/bias parameters (gainprm/biasprm). Every value given is written:
    the drive gains of plain motors belong to the simulated controller, not the MJCF, and
    are split off first by :meth:`shadow_twin.control.controller.SimController.split_values`.
    Includes are flattened and ``meshdir``/``texturedir`` become absolute, so the file
    compiles on its own from any directory.

    Raises ModelError if ``out_path`` is the source model file (never overwritten),
    a value is the gain of a plain motor (a drive gain), or the result does not
    compile.
    """
    out_path = Path(out_path)
    if out_path.exists() and out_path.resolve() == source.path.resolve():
        raise ModelError(f'refusing to overwrite the input model {source.path}')
    spec = load_spec(source.path)
    base = source.path.resolve().parent
    spec.meshdir = str((base / spec.meshdir).resolve()) + os.sep
    spec.texturedir = str((base / spec.texturedir).resolve()) + os.sep
    for target, value in values.items():
        if target.kind == 'joint':
            _spec_set(spec, target, value)
            continue
        if target.kind == 'geom':
            _spec_set_geom(spec, target, value)
            continue
        if target.kind == 'body':
            _spec_set_body(spec, target, value)
            continue
        actuator = spec.actuator(target.name)
        if actuator is None:
            raise ModelError(f'no actuator named {target.name!r}')
        if actuator.biastype != mujoco.mjtBias.mjBIAS_AFFINE:
            raise ModelError(f'{target}: {target.name!r} is a motor whose gains belong to the simulated '
                             f'controller, not the MJCF (split them off with SimController.split_values)')
        gain, bias = np.array(actuator.gainprm), np.array(actuator.biasprm)
        if target.attribute == 'kp':
            gain[0], bias[1] = value, -value
        elif target.attribute == 'kv':
            gain[0], bias[2] = value, -value
        else:
            bias[2] = -value
        actuator.gainprm, actuator.biasprm = gain, bias
    try:
        spec.compile()
        xml = spec.to_xml()
    except Exception as exc:
        raise ModelError(f'calibrated model does not compile: {one_line(exc)}') from None
    header = (f'<!-- Calibrated by shadow_twin from {source.path.name}. '
              f'Parameters: {len(values)}. -->\n')
    return write_text_atomic(out_path, header + xml)


def compile_error(path: str | os.PathLike) -> str | None:
    """MuJoCo's error text if the MJCF at ``path`` fails to load, else None."""
    try:
        TwinModel(path)
    except ModelError as exc:
        return str(exc)
    return None


def natural_key(name: str) -> list:
    """Sort key that orders ``J2`` before ``J10``."""
    return [int(tok) if tok.isdigit() else tok for tok in re.split(r'(\d+)', name)]


def unique(items: Iterable[str]) -> list[str]:
    """Items in first-seen order without repeats."""
    return list(dict.fromkeys(items))
