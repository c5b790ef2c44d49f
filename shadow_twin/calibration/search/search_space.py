"""Search spaces: which MJCF parameters a calibration varies, and within which bounds.

YAML::

    parameters:
      - name: J1_damping            # one value shared by every matched element
        joints: ['rh_[FMRL]FJ1']    # globs on joint names, and/or
        classes: [FJ1]              # MJCF default classes
        attribute: damping          # damping frictionloss armature stiffness
                                    # springref range_lower range_upper
        bounds: {relative: 0.7}     # +/-70 % of the model default (or of 'around')
        log: false                  # search on a log scale (positive bounds only)
      - name: J0_kp
        actuators: ['rh_*J0']       # actuator globs, attributes kp / kd (position servos), kv (velocity)
        attribute: kp
        bounds: [1.0, 10.0]         # absolute [low, high]
      - name: wheel_friction
        geoms: ['*wheel_contact']   # geom globs: friction (sliding coefficient), friction_torsional (m),
        attribute: friction         # solref_timeconst (s), solref_dampratio, solimp_width (m)
        bounds: [0.2, 0.8]
      - name: can_mass
        bodies: [can]               # body globs: mass (kg; inertia scaled with it), ipos_x/y/z (m)
        attribute: mass
        bounds: {relative: 0.5}

``around`` gives the centre of relative bounds where the model default is
zero or not the value to search around.

Bounds are clipped to each attribute's physical domain, with a warning naming
the parameter, the bounds given and the clipped ones (:func:`physical_domain`):

* damping, frictionloss, armature, stiffness (joints), kd (actuators), friction and
  friction_torsional (geoms) >= 0;
* kp, kv, solref_timeconst, solref_dampratio, solimp_width and mass > 0: a low at or below 0
  becomes ``LOG_FLOOR`` x high;
* range_lower < the joint's upper limit and range_upper > its lower limit, as the
  model has them now (the smallest upper / largest lower over the shared joints),
  kept ``RANGE_GAP`` apart. When both ends of a joint are searched, each is checked
  against the other's model value only;
* springref, ipos_x/y/z: no limit.

A log-scale dimension whose low is at or below 0 after that (``[0, 0.2]``, or
``{relative: 2.0}``: -100 % .. +300 %) starts at ``LOG_FLOOR`` x high instead,
three decades below it, with the same warning. Clipping that leaves
``low >= high`` is a SearchSpaceError naming the parameter.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import yaml

from shadow_twin.common.errors import ModelError, SearchSpaceError
from shadow_twin.model.calibratable import (ACTUATOR_ATTRIBUTES, BODY_ATTRIBUTES, GEOM_ATTRIBUTES, JOINT_ATTRIBUTES,
                                            ParameterTarget, get_parameter)
from shadow_twin.model.mjcf import TwinModel

log = logging.getLogger(__name__)
_KEYS = {'name', 'joints', 'classes', 'actuators', 'geoms', 'bodies', 'attribute', 'bounds', 'log', 'around'}
#: Attributes that are physically >= 0 (N m s/rad, N m, kg m^2, N m/rad; kd N m s/rad; friction, no unit).
NON_NEGATIVE = ('damping', 'frictionloss', 'armature', 'stiffness', 'kd', 'friction', 'friction_torsional')
#: Attributes that are physically > 0 (kp N m/rad, kv N m s/rad: MuJoCo's servos need a positive gain;
#: solref's time constant s and damping ratio, solimp's width m, a body's mass kg).
POSITIVE = ('kp', 'kv', 'solref_timeconst', 'solref_dampratio', 'solimp_width', 'mass')
#: A low that must be > 0 but clips to 0 (kp, log scale) becomes this fraction of the high.
LOG_FLOOR = 1e-3
#: Gap kept between a searched range end and the joint's other limit (rad, or m for slides).
RANGE_GAP = 1e-6


@dataclass
class Dimension:
    """One searched value, shared by ``targets``.

    Attributes:
        name: label used in histories and reports.
        targets: parameters set to this value.
        low, high: bounds in the attribute's unit.
        default: the model's value (mean over targets).
        log: search on a log scale.
    """

    name: str
    targets: list[ParameterTarget]
    low: float
    high: float
    default: float
    log: bool = False

    def skopt_dimension(self):
        """The scikit-optimize ``Real`` dimension."""
        from skopt.space import Real  # lazy: scikit-optimize (and scikit-learn) take ~1 s to import; only BO needs them
        return Real(self.low, self.high, prior='log-uniform' if self.log else 'uniform', name=self.name)


class SearchSpace:
    """A list of :class:`Dimension` resolved against a model.

    Raises SearchSpaceError (from :meth:`from_yaml`) naming the entry at fault:
    unknown joint, class, actuator or attribute; missing or inverted bounds;
    zero-width relative bounds; log scale with non-positive bounds; duplicate names
    or a parameter claimed by two entries.
    """

    def __init__(self, dimensions: Sequence[Dimension], source: str = '') -> None:
        self.dimensions = list(dimensions)
        self.source = source
        if not self.dimensions:
            raise SearchSpaceError(f'{source}: search space has no parameters')

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.dimensions]

    @property
    def lows(self) -> np.ndarray:
        return np.array([d.low for d in self.dimensions])

    @property
    def highs(self) -> np.ndarray:
        return np.array([d.high for d in self.dimensions])

    @property
    def defaults(self) -> np.ndarray:
        """(D,) model defaults (clipped into the bounds)."""
        return np.clip([d.default for d in self.dimensions], self.lows, self.highs)

    def values(self, x: Sequence[float]) -> dict[ParameterTarget, float]:
        """Expand a point (D,) into {target: value} for every shared target."""
        if len(x) != len(self.dimensions):
            raise ValueError(f'point has {len(x)} values, space has {len(self.dimensions)} dimensions')
        return self.named_values(self.named(x))

    def named_values(self, named: Mapping[str, float]) -> dict[ParameterTarget, float]:
        """Expand {dimension name: value} into {target: value}; dimensions not named are left
        out (the model keeps their values)."""
        return {t: float(named[d.name]) for d in self.dimensions if d.name in named for t in d.targets}

    def named(self, x: Sequence[float]) -> dict[str, float]:
        """{dimension name: value} for a point."""
        return {d.name: float(v) for d, v in zip(self.dimensions, x)}

    def to_unit(self, x: np.ndarray) -> np.ndarray:
        """Map points (N, D) to [0, 1]^D (log dimensions in log space)."""
        x = np.atleast_2d(x)
        lo, hi, out = self.lows, self.highs, np.empty_like(x, dtype=float)
        for k, d in enumerate(self.dimensions):
            if d.log:
                out[:, k] = (np.log(x[:, k]) - np.log(lo[k])) / (np.log(hi[k]) - np.log(lo[k]))
            else:
                out[:, k] = (x[:, k] - lo[k]) / (hi[k] - lo[k])
        return out

    def from_unit(self, u: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`to_unit`; (N, D) in [0, 1] -> parameter values."""
        u = np.clip(np.atleast_2d(u), 0.0, 1.0)
        lo, hi, out = self.lows, self.highs, np.empty_like(u, dtype=float)
        for k, d in enumerate(self.dimensions):
            if d.log:
                out[:, k] = np.exp(np.log(lo[k]) + u[:, k] * (np.log(hi[k]) - np.log(lo[k])))
            else:
                out[:, k] = lo[k] + u[:, k] * (hi[k] - lo[k])
        return out

    def to_dict(self) -> dict:
        """Resolved space (names, targets, bounds) for reports."""
        return {d.name: {'targets': [str(t) for t in d.targets], 'low': d.low, 'high': d.high,
                         'default': d.default, 'log': d.log} for d in self.dimensions}

    def subset(self, names: Sequence[str]) -> 'SearchSpace':
        """The space of the dimensions ``names`` only (in this space's order); the others
        are not searched and keep the model's values. Raises SearchSpaceError for an unknown name."""
        unknown = [n for n in names if n not in self.names]
        if unknown:
            raise SearchSpaceError(f'{self.source}: no parameter(s) {unknown}; known: {self.names}')
        return SearchSpace([d for d in self.dimensions if d.name in names], self.source)

    @classmethod
    def from_yaml(cls, path: str | Path, twin: TwinModel) -> 'SearchSpace':
        """Load and resolve a search-space YAML against ``twin``'s model."""
        path = Path(path)
        if not path.is_file():
            raise SearchSpaceError(f'search space file not found: {path}')
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise SearchSpaceError(f'{path}: not valid YAML ({" ".join(str(exc).split())})') from None
        entries = data.get('parameters') if isinstance(data, dict) else None
        if not isinstance(entries, list) or not entries:
            raise SearchSpaceError(f'{path}: needs a non-empty "parameters" list')
        dims, claimed = [], {}
        for k, entry in enumerate(entries):
            dim = _resolve_entry(entry, k, twin, path)
            if dim.name in [d.name for d in dims]:
                raise SearchSpaceError(f'{path}: duplicate parameter name {dim.name!r}')
            for target in dim.targets:
                if target in claimed:
                    raise SearchSpaceError(f'{path}: {target} is in both {claimed[target]!r} and {dim.name!r}')
                claimed[target] = dim.name
            dims.append(dim)
        return cls(dims, str(path))


def _resolve_entry(entry, k: int, twin: TwinModel, path: Path) -> Dimension:
    where = f'{path}: parameter {k}'
    if not isinstance(entry, dict):
        raise SearchSpaceError(f'{where}: must be a mapping')
    unknown = set(entry) - _KEYS
    if unknown:
        raise SearchSpaceError(f'{where}: unknown key(s) {sorted(unknown)}')
    name = str(entry.get('name') or f'p{k}')
    where = f'{path}: parameter {name!r}'
    attribute = entry.get('attribute')
    kind = ('actuator' if entry.get('actuators') else 'geom' if entry.get('geoms') else
            'body' if entry.get('bodies') else 'joint')
    known = {'actuator': ACTUATOR_ATTRIBUTES, 'geom': GEOM_ATTRIBUTES, 'body': BODY_ATTRIBUTES,
             'joint': JOINT_ATTRIBUTES}[kind]
    if attribute not in known:
        raise SearchSpaceError(f'{where}: unknown {kind} attribute {attribute!r}; known: {list(known)}')
    try:
        if kind in ('actuator', 'geom'):
            names = twin.select(kind, _as_list(entry.get(f'{kind}s')))
        elif kind == 'body':
            names = twin.select('body', _as_list(entry.get('bodies')))
        else:
            patterns, classes = _as_list(entry.get('joints')), _as_list(entry.get('classes'))
            if not patterns and not classes:
                raise SearchSpaceError(f'{where}: give joints, classes, actuators, geoms or bodies')
            names = twin.select('joint', patterns, classes)
        targets = [twin.target(kind, n, attribute) for n in names]
    except ModelError as exc:
        raise SearchSpaceError(f'{where}: {exc}') from None
    default = float(np.mean([get_parameter(twin.model, t) for t in targets]))
    low, high = _bounds(entry.get('bounds'), entry.get('around', default), where)
    log_scale = bool(entry.get('log', False))
    low, high = clip_to_domain(low, high, attribute, targets, twin, log_scale, where)
    if log_scale and low <= 0:
        raise SearchSpaceError(f'{where}: log scale needs positive bounds, got [{low}, {high}]')
    return Dimension(name, targets, low, high, default, log_scale)


def physical_domain(attribute: str, targets: Sequence[ParameterTarget], twin: TwinModel) -> tuple[float, float]:
    """(lowest, highest) physical value of ``attribute`` on ``targets`` (the attribute's unit).

    0 and inf for :data:`NON_NEGATIVE` and :data:`POSITIVE` attributes (the low excluded
    for kp); for range_lower, -inf and the smallest current upper limit of the targets'
    joints (excluded); for range_upper, their largest current lower limit (excluded) and
    inf; -inf, inf for springref.
    """
    if attribute in NON_NEGATIVE or attribute in POSITIVE:
        return 0.0, np.inf
    if attribute == 'range_lower':
        return -np.inf, min(get_parameter(twin.model, ParameterTarget(t.kind, t.name, 'range_upper'))
                            for t in targets)
    if attribute == 'range_upper':
        return max(get_parameter(twin.model, ParameterTarget(t.kind, t.name, 'range_lower'))
                   for t in targets), np.inf
    return -np.inf, np.inf


def clip_to_domain(low: float, high: float, attribute: str, targets: Sequence[ParameterTarget], twin: TwinModel,
                   log_scale: bool = False, where: str = '') -> tuple[float, float]:
    """Bounds [low, high] clipped to the :func:`physical_domain` of ``attribute`` (see the module doc).

    Logs a warning naming ``where`` (the parameter), the bounds given and the clipped ones
    when they change. Raises SearchSpaceError when nothing is left (low >= high).
    """
    lowest, highest = physical_domain(attribute, targets, twin)
    new_low, new_high = max(low, lowest), min(high, highest)
    if attribute == 'range_lower' and new_high >= highest:
        new_high = highest - RANGE_GAP
    if attribute == 'range_upper' and new_low <= lowest:
        new_low = lowest + RANGE_GAP
    floor = (attribute in POSITIVE or (log_scale and attribute in NON_NEGATIVE)) and new_low <= 0
    if floor and new_high > 0:
        new_low = LOG_FLOOR * new_high
    domain = {'range_lower': f'below the upper limit {highest:.7g}',
              'range_upper': f'above the lower limit {lowest:.7g}'}
    text = domain.get(attribute, '> 0' if attribute in POSITIVE or floor else '>= 0')
    if not new_low < new_high:
        raise SearchSpaceError(f'{where}: bounds [{low:.7g}, {high:.7g}] leave nothing of the physical domain '
                               f'of {attribute} ({text}): clipped to [{new_low:.7g}, {new_high:.7g}]')
    if (new_low, new_high) != (low, high):
        log.warning('%s: bounds [%.7g, %.7g] cross the physical domain of %s (%s%s): clipped to [%.7g, %.7g]',
                    where, low, high, attribute, text,
                    f'; log-scale floor {LOG_FLOOR:g} x high' if floor else '', new_low, new_high)
    return float(new_low), float(new_high)


def _bounds(spec, centre, where: str) -> tuple[float, float]:
    if isinstance(spec, dict) and set(spec) == {'relative'}:
        try:
            fraction, centre = float(spec['relative']), float(centre)
        except (TypeError, ValueError):
            raise SearchSpaceError(f'{where}: relative bounds and "around" must be numbers, '
                                   f'got {spec["relative"]!r} around {centre!r}') from None
        if fraction <= 0 or centre == 0:
            raise SearchSpaceError(f'{where}: relative bounds of {fraction:g} around {centre:g} have zero '
                                   f'width; give absolute bounds [low, high] or "around"')
        low, high = sorted((centre * (1 - fraction), centre * (1 + fraction)))
    elif isinstance(spec, (list, tuple)) and len(spec) == 2:
        try:
            low, high = float(spec[0]), float(spec[1])
        except (TypeError, ValueError):
            raise SearchSpaceError(f'{where}: bounds must be numbers, got {spec}') from None
        if not low < high:
            raise SearchSpaceError(f'{where}: inverted or empty bounds [{low}, {high}] (need low < high)')
    else:
        raise SearchSpaceError(f'{where}: bounds must be [low, high] or {{relative: fraction}}, got {spec!r}')
    if not (np.isfinite(low) and np.isfinite(high)):
        raise SearchSpaceError(f'{where}: bounds must be finite')
    return low, high


def _as_list(value) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]
