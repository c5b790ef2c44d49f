"""The scene's configuration: the objects a scene file (``config/scene.yaml``) declares, as
:class:`ObjectConfig` entries of a :class:`SceneConfig`, and the validation of their YAML.

The keys, their units and defaults are listed in :mod:`shadow_twin.model.scene` (and commented in
``config/scene.yaml``); :mod:`shadow_twin.model.scene.build` adds the objects to a model.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from shadow_twin.common import config_values as values
from shadow_twin.common.errors import ConfigError
from shadow_twin.common.files import read_text_limited
from shadow_twin.model.cell.config import rpy_to_quat

#: Shapes and how many ``size`` values each takes (MuJoCo's geom size convention): box half-sizes
#: x y z; cylinder and capsule radius and half-length (of the cylindrical part, along z); sphere
#: radius. A mesh takes no size (its file gives it, times ``scale``).
SHAPE_SIZES = {'box': 3, 'cylinder': 2, 'sphere': 1, 'capsule': 2, 'mesh': 0}
#: Mesh files MuJoCo reads by their suffix (STL: binary; OBJ: text).
MESH_SUFFIXES = ('.stl', '.obj')
#: Frame names that mean the world frame: the sim's ``odom`` frame is its world frame
#: (:mod:`shadow_twin.simulation.mobile_base`: the base's odometry is its free joint's pose).
WORLD_FRAMES = ('world', 'odom')
#: Contact dimensionalities MuJoCo allows: 1 frictionless, 3 sliding, 4 + torsional, 6 + rolling.
CONDIMS = (1, 3, 4, 6)
#: MuJoCo's defaults of a geom's solref (time constant s, damping ratio) and solimp (dmin, dmax,
#: width m, midpoint, power); a 3-value solimp keeps MuJoCo's midpoint and power.
DEFAULT_SOLREF = (0.02, 1.0)
DEFAULT_SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)
#: Sliding, torsional, rolling friction when none is given (MuJoCo's sliding default; no spin or roll).
DEFAULT_FRICTION = (1.0, 0.0, 0.0)
FRICTION_KEYS = ('sliding', 'torsional', 'rolling')
OBJECT_KEYS = ('name', 'shape', 'size', 'mesh', 'scale', 'mass', 'density', 'inertia', 'friction', 'condim',
               'solref', 'solimp', 'rgba', 'frame', 'xyz', 'rpy', 'free')
#: Object names: letters, digits, ``_``, ``.`` and ``-`` (they name MJCF elements and ROS entities).
NAME = re.compile(r'^[A-Za-z0-9_][A-Za-z0-9_.-]*$')


@dataclass(frozen=True)
class ObjectConfig:
    """One object of a scene; built and checked by :meth:`from_mapping` (or :class:`SceneConfig`).

    Attributes:
        name: the object's name (its body and geom in the model; :mod:`shadow_twin.model.scene.names`).
        shape: 'box', 'cylinder', 'sphere', 'capsule' or 'mesh'.
        size: MuJoCo's geom size of the shape, m (:data:`SHAPE_SIZES`); () for a mesh.
        mesh: absolute path of the STL/OBJ file of a mesh (None for a primitive).
        scale: (3,) scale of the mesh's vertices along x y z (1: the file's units are m).
        mass: kg, or None when ``density`` gives it.
        density: kg/m^3 (the mass is density x the geometry's volume), or None when ``mass`` is given.
        inertia: (3,) principal moments of inertia about the centre of mass along the object's axes,
            kg m^2 (only with ``mass``); None: those of a uniform solid of the shape.
        friction: (3,) sliding, torsional (m) and rolling (m) friction: MuJoCo's geom friction.
        condim: contact dimensionality (:data:`CONDIMS`); it uses every non-zero coefficient.
        solref: (2,) MuJoCo's contact solref: time constant (s) and damping ratio, or negative stiffness
            and damping.
        solimp: (5,) MuJoCo's contact solimp: dmin, dmax, width (m), midpoint, power.
        rgba: (4,) colour, each in [0, 1], or None (MuJoCo's grey).
        frame: 'world', 'odom' (the world frame) or a body of the model the pose is given in.
        xyz: (3,) position of the object's frame in ``frame``, m.
        rpy: (3,) URDF roll-pitch-yaw of the object's frame in ``frame``, rad (R = Rz(y) Ry(p) Rx(r)).
        free: a free (6-DoF) body; else fixed to ``frame``'s body (it moves with it).
    """

    name: str
    shape: str
    size: tuple[float, ...] = ()
    mesh: Path | None = None
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)
    mass: float | None = None
    density: float | None = None
    inertia: tuple[float, float, float] | None = None
    friction: tuple[float, float, float] = DEFAULT_FRICTION
    condim: int = 3
    solref: tuple[float, float] = DEFAULT_SOLREF
    solimp: tuple[float, float, float, float, float] = DEFAULT_SOLIMP
    rgba: tuple[float, float, float, float] | None = None
    frame: str = 'world'
    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)
    free: bool = True

    @property
    def quat(self) -> np.ndarray:
        """(4,) quaternion (w x y z) of ``rpy`` (:func:`shadow_twin.model.cell.config.rpy_to_quat`)."""
        return rpy_to_quat(self.rpy)

    def scaled(self, friction: float = 1.0, mass: float = 1.0) -> 'ObjectConfig':
        """A copy with the three friction coefficients times ``friction`` and the mass (or density) and
        inertia times ``mass``: the same object with other contact parameters (the mock hardware's).

        Raises ConfigError for a factor that is not finite, a negative friction factor or a mass factor
        that is not positive.
        """
        friction = values.non_negative(friction, 'friction factor')
        mass = values.positive(mass, 'mass factor')
        return dataclasses.replace(
            self, friction=tuple(friction * f for f in self.friction),
            mass=None if self.mass is None else self.mass * mass,
            density=None if self.density is None else self.density * mass,
            inertia=None if self.inertia is None else tuple(mass * i for i in self.inertia))

    @classmethod
    def from_mapping(cls, data: Any, where: str, root: Path | None = None) -> 'ObjectConfig':
        """Check and build one object from its YAML mapping (keys: the attributes; see the package doc).

        ``where`` names it in errors (e.g. ``scene.yaml: scene.objects[0]``); a relative ``mesh`` is
        relative to ``root`` (the scene file's folder; None: the working directory).
        Raises ConfigError naming the key: an unknown or missing key, a bad or non-finite value, a
        missing mesh file, both or neither of mass and density, a condim that ignores a friction given.
        """
        if not isinstance(data, dict):
            raise ConfigError(f'{where}: expected a mapping, got {type(data).__name__}')
        name = data.get('name')
        if not isinstance(name, str) or not NAME.match(name):
            raise ConfigError(f'{where}.name: expected letters, digits, "_", "." or "-", got {name!r}')
        where = f'{where} ({name})'
        entry = values.mapping(data, where, OBJECT_KEYS)
        shape = entry.get('shape')
        if shape not in SHAPE_SIZES:
            raise ConfigError(f'{where}.shape: expected one of {list(SHAPE_SIZES)}, got {shape!r}')
        size, mesh, scale = _geometry(entry, shape, where, root)
        mass, density, inertia = _mass(entry, where)
        friction = _friction(entry.get('friction', {}), f'{where}.friction')
        condim = _condim(entry.get('condim'), friction, f'{where}.condim')
        solref = _solref(entry.get('solref', DEFAULT_SOLREF), f'{where}.solref')
        solimp = _solimp(entry.get('solimp', DEFAULT_SOLIMP), f'{where}.solimp')
        rgba = None
        if entry.get('rgba') is not None:
            rgba = _numbers(entry['rgba'], f'{where}.rgba', (4,))
            if not all(0.0 <= v <= 1.0 for v in rgba):
                raise ConfigError(f'{where}.rgba: each value must be in [0, 1], got {entry["rgba"]!r}')
        frame = entry.get('frame', 'world')
        if not isinstance(frame, str) or not frame:
            raise ConfigError(f'{where}.frame: expected world, odom or a body name, got {frame!r}')
        xyz = _numbers(entry.get('xyz', (0.0, 0.0, 0.0)), f'{where}.xyz', (3,))
        rpy = _numbers(entry.get('rpy', (0.0, 0.0, 0.0)), f'{where}.rpy', (3,))
        free = values.boolean(entry.get('free', True), f'{where}.free')
        return cls(name, shape, size, mesh, scale, mass, density, inertia, friction, condim, solref, solimp,
                   rgba, frame, xyz, rpy, free)


@dataclass(frozen=True)
class SceneConfig:
    """The objects of a scene, in the order the file declares them (names unique)."""

    objects: tuple[ObjectConfig, ...] = ()

    @property
    def names(self) -> list[str]:
        """The objects' names, in order."""
        return [obj.name for obj in self.objects]

    def scaled(self, friction: float = 1.0, mass: float = 1.0) -> 'SceneConfig':
        """Every object :meth:`ObjectConfig.scaled`; ConfigError for a bad factor."""
        return SceneConfig(tuple(obj.scaled(friction, mass) for obj in self.objects))

    @classmethod
    def from_yaml(cls, path: str | os.PathLike) -> 'SceneConfig':
        """Read a scene file (top-level key ``scene``, holding ``objects``: a list of mappings).

        A relative mesh path is relative to the file's folder.
        Raises ConfigError naming a missing or unreadable file, bad YAML, or the object and key of a
        bad value (:meth:`ObjectConfig.from_mapping`).
        """
        path = Path(path)
        try:
            text = read_text_limited(path, 'scene file')
        except FileNotFoundError:
            raise ConfigError(f'scene file not found: {path}') from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f'{path}: not valid YAML: {" ".join(str(exc).split())}') from None
        return cls.from_mapping(data, str(path), path.parent.resolve())

    @classmethod
    def from_mapping(cls, data: Any, where: str = 'scene config', root: Path | None = None) -> 'SceneConfig':
        """Build from a parsed mapping ``{scene: {objects: [...]}}`` (or the inner ``{objects: [...]}``;
        None or an empty mapping: no objects); ``where`` names the source in errors, ``root`` is the
        folder of relative mesh paths. Raises ConfigError (see :meth:`from_yaml`), also for two objects
        of one name.
        """
        if isinstance(data, dict) and 'scene' in data:
            values.mapping(data, where, ('scene',))
            data = data['scene']
        where = f'{where}: scene'
        objects = values.mapping(data, where, ('objects',)).get('objects') or []
        if not isinstance(objects, list):
            raise ConfigError(f'{where}.objects: expected a list of objects, got {type(objects).__name__}')
        out: list[ObjectConfig] = []
        for index, entry in enumerate(objects):
            obj = ObjectConfig.from_mapping(entry, f'{where}.objects[{index}]', root)
            for earlier, other in enumerate(out):
                if other.name == obj.name:
                    raise ConfigError(f'{where}.objects[{index}].name: {obj.name!r} is declared twice '
                                      f'(also objects[{earlier}])')
            out.append(obj)
        return cls(tuple(out))


# -- checks of the values ----------------------------------------------------------------------------


def _numbers(value: Any, where: str, counts: tuple[int, ...], positive: bool = False) -> tuple[float, ...]:
    """A list of ``counts[i]`` numbers (a bare number when 1 is allowed), each finite (and positive)."""
    if 1 in counts and not isinstance(value, (list, tuple)):
        value = [value]
    if not isinstance(value, (list, tuple)) or len(value) not in counts:
        wanted = ' or '.join(str(c) for c in counts)
        raise ConfigError(f'{where}: expected a list of {wanted} numbers, got {value!r}')
    check = values.positive if positive else values.number
    return tuple(check(v, where) for v in value)


def _geometry(entry: dict, shape: str, where: str, root: Path | None):
    """(size, mesh path, scale) of an object; the mesh keys only with shape mesh, size only without."""
    if shape != 'mesh':
        for key in ('mesh', 'scale'):
            if key in entry:
                raise ConfigError(f'{where}.{key}: only a mesh takes it (shape is {shape})')
        if 'size' not in entry:
            raise ConfigError(f'{where}.size: missing ({SHAPE_SIZES[shape]} value(s), m, for a {shape})')
        return _numbers(entry['size'], f'{where}.size', (SHAPE_SIZES[shape],), positive=True), None, (1.0, 1.0, 1.0)
    if 'size' in entry:
        raise ConfigError(f'{where}.size: a mesh takes no size (its file gives it; use scale)')
    value = entry.get('mesh')
    if not isinstance(value, str) or not value:
        raise ConfigError(f'{where}.mesh: expected the path of an STL or OBJ file, got {value!r}')
    path = Path(value).expanduser()
    path = (root / path if root is not None and not path.is_absolute() else path).resolve()
    if path.suffix.lower() not in MESH_SUFFIXES:
        raise ConfigError(f'{where}.mesh: {path} is not an STL or OBJ file (suffix {list(MESH_SUFFIXES)})')
    if not path.is_file():
        raise ConfigError(f'{where}.mesh: file not found: {path}')
    scale = _numbers(entry.get('scale', 1.0), f'{where}.scale', (1, 3), positive=True)
    return (), path, scale * 3 if len(scale) == 1 else scale


def _mass(entry: dict, where: str):
    """(mass, density, inertia): exactly one of mass and density; inertia only with mass."""
    if ('mass' in entry) == ('density' in entry):
        raise ConfigError(f'{where}: give exactly one of mass (kg) and density (kg/m^3)')
    if 'density' in entry:
        if 'inertia' in entry:
            raise ConfigError(f'{where}.inertia: only with mass (with a density the geometry gives it)')
        return None, values.positive(entry['density'], f'{where}.density'), None
    mass = values.positive(entry['mass'], f'{where}.mass')
    if entry.get('inertia') is None:
        return mass, None, None
    inertia = _numbers(entry['inertia'], f'{where}.inertia', (3,), positive=True)
    for i in range(3):
        if inertia[i] > inertia[(i + 1) % 3] + inertia[(i + 2) % 3]:
            raise ConfigError(f'{where}.inertia: {list(inertia)} breaks the triangle inequality of principal '
                              'moments (each at most the sum of the other two)')
    return mass, None, inertia


def _friction(value: Any, where: str) -> tuple[float, float, float]:
    """Sliding, torsional, rolling: a mapping of :data:`FRICTION_KEYS` (missing: :data:`DEFAULT_FRICTION`)
    or MuJoCo's list of three; each not negative."""
    if isinstance(value, (list, tuple)):
        if len(value) != 3:
            raise ConfigError(f'{where}: expected {{sliding, torsional, rolling}} or a list of 3, got {value!r}')
        return tuple(values.non_negative(v, f'{where}.{key}') for key, v in zip(FRICTION_KEYS, value))
    given = values.mapping(value, where, FRICTION_KEYS)
    return tuple(values.non_negative(given.get(key, default), f'{where}.{key}')
                 for key, default in zip(FRICTION_KEYS, DEFAULT_FRICTION))


def needed_condim(friction) -> int:
    """The smallest condim that uses every non-zero coefficient of ``friction`` (sliding, torsional,
    rolling): 6 with rolling, 4 with torsional, 3 with sliding, else 1 (MuJoCo's contact dimensions)."""
    sliding, torsional, rolling = friction
    return 6 if rolling > 0 else 4 if torsional > 0 else 3 if sliding > 0 else 1


def _condim(value: Any, friction, where: str) -> int:
    """The condim given (one that ignores a non-zero coefficient is refused), else the smallest of 3, 4, 6
    that uses them all."""
    needed = needed_condim(friction)
    if value is None:
        return max(3, needed)
    if isinstance(value, bool) or value not in CONDIMS:
        raise ConfigError(f'{where}: expected one of {list(CONDIMS)}, got {value!r}')
    if value < needed:
        ignored = FRICTION_KEYS[{1: 0, 3: 1, 4: 2}[value]:]
        kind = next(key for key in ignored if friction[FRICTION_KEYS.index(key)] > 0)
        raise ConfigError(f'{where}: condim {value} ignores the {kind} friction '
                          f'{friction[FRICTION_KEYS.index(kind)]:g}; use condim {needed} or set friction.{kind}: 0')
    return int(value)


def _solref(value: Any, where: str) -> tuple[float, float]:
    """(time constant s, damping ratio), both positive, or (-stiffness, -damping): MuJoCo's two forms."""
    solref = _numbers(value, where, (2,))
    if not ((solref[0] > 0 and solref[1] > 0) or (solref[0] < 0 and solref[1] <= 0)):
        raise ConfigError(f'{where}: expected a positive time constant (s) and damping ratio, or a negative '
                          f'stiffness and damping, got {list(solref)}')
    return solref


def _solimp(value: Any, where: str) -> tuple[float, float, float, float, float]:
    """dmin, dmax in (0, 1), width > 0 (m) [, midpoint in (0, 1), power >= 1]: MuJoCo's solimp."""
    solimp = _numbers(value, where, (3, 5))
    solimp = solimp + DEFAULT_SOLIMP[3:] if len(solimp) == 3 else solimp
    dmin, dmax, width, midpoint, power = solimp
    if not (0 < dmin < 1 and 0 < dmax < 1 and width > 0 and 0 < midpoint < 1 and power >= 1):
        raise ConfigError(f'{where}: expected dmin and dmax in (0, 1), a positive width (m), a midpoint in (0, 1) '
                          f'and a power of at least 1, got {list(value)}')
    return solimp
