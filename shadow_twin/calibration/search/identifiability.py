"""What a recording can and cannot tell about the calibrated parameters.

From the Jacobian J of the residual vector at the result (``Evaluator.residuals``: R
residuals, D parameters):

* **Standard deviations and 95 % intervals**: the Gauss-Newton (linearised) covariance
  of a nonlinear least-squares estimate, ``Cov = s^2 (J^T J)^-1`` with
  ``s^2 = SSR / (R - D)``, and intervals ``x +/- t(0.975, R - D) * sd`` (Bates & Watts,
  *Nonlinear Regression Analysis and Its Applications*, Wiley 1988, section 2.3; the
  same formula as ``scipy.optimize.curve_fit``'s ``pcov`` and ``mujoco.sysid``'s
  ``calculate_intervals``). It treats the residuals as independent noise; the error of a
  model along a trajectory is strongly correlated in time, so these intervals are lower
  bounds of the uncertainty, useful to compare parameters rather than as coverage
  guarantees. Directions with no effect at all (singular values below numerical
  precision, ``numpy.linalg.matrix_rank``'s tolerance) make the variance of the
  parameters on them infinite.
* **Directions the recording cannot identify**: the singular vectors of the
  column-normalised Jacobian (each parameter's column divided by its norm, so the
  scale of a parameter does not matter) whose singular value is below
  ``1 / COLLINEARITY_LIMIT``: moving the parameters along such a direction changes the
  residuals by less than 1/15 of what moving one parameter alone would. This is the
  collinearity index of Brun, Reichert & Künsch (*Practical identifiability analysis of
  large environmental simulation models*, Water Resources Research 37(4), 2001), whose
  threshold of 10-15 marks a poorly identifiable parameter set. Before that, as Brun et al.
  screen by their sensitivity measure, a parameter with (next to) no effect, whose column
  norm is below ``NEGLIGIBLE_EFFECT`` of the largest (moving it across its whole range
  changes the residuals by less than 0.1 % of what moving the most influential one does),
  is a direction of its own and left out of the normalised decomposition. Directions are
  named as combinations of the normalised parameters, e.g. ``0.71 J1_damping - 0.70 J2_damping``.
* **Parameters on a bound**: within 0.1 % of the search range of a bound; their interval
  means little and the bound may be too tight.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from shadow_twin.calibration.search.least_squares import finite_difference_jacobian
from shadow_twin.calibration.search.search_space import SearchSpace

log = logging.getLogger(__name__)

#: Collinearity index above which a direction counts as not identifiable (Brun et al. 2001: 10-15).
COLLINEARITY_LIMIT = 15.0
#: Column norm, relative to the largest, below which a parameter has no effect (in the unit cube).
NEGLIGIBLE_EFFECT = 1e-3
#: Distance from a bound, as a fraction of the search range, that counts as on the bound.
BOUND_TOLERANCE = 1e-3
#: Coefficients below this are left out of a direction's name.
NAME_CUTOFF = 0.1


@dataclass
class Direction:
    """A combination of parameters the recording cannot identify.

    Attributes:
        combination: text, e.g. '0.71 J1_damping - 0.70 J2_damping'.
        coefficients: {parameter: coefficient} of the unit vector in the column-normalised scale.
        singular_value: its singular value in that scale; for a parameter without effect,
            its column norm relative to the largest (0: no effect at all).
        collinearity_index: 1 / singular_value (inf for a parameter without effect).
        kind: 'collinear' or 'no effect'.
    """

    combination: str
    coefficients: dict[str, float]
    singular_value: float
    collinearity_index: float
    kind: str


@dataclass
class Identifiability:
    """Result of :func:`analyse`; values in the parameters' units.

    Attributes:
        parameters: {name: {'value', 'sd', 'low', 'high', 'on_bound'}} with the 95 % interval
            [low, high] (sd, low, high are inf/-inf where the recording does not constrain it;
            on_bound is 'lower', 'upper' or None).
        unidentifiable: directions below the collinearity limit, least identifiable first.
        on_bound: names of the parameters on a bound.
        singular_values: (D,) of the column-normalised Jacobian, descending.
        residuals: R; dof: R - D; s2: SSR / dof (rad^2, in the residuals' scale).
        jacobian_rollouts: rollouts spent on the Jacobian here (0 when the optimiser's was reused).
        collinearity_limit, negligible_effect, bound_tolerance: the thresholds used.
    """

    parameters: dict[str, dict]
    unidentifiable: list[Direction]
    on_bound: list[str]
    singular_values: list[float]
    residuals: int
    dof: int
    s2: float
    jacobian_rollouts: int = 0
    collinearity_limit: float = COLLINEARITY_LIMIT
    negligible_effect: float = NEGLIGIBLE_EFFECT
    bound_tolerance: float = BOUND_TOLERANCE

    def to_dict(self) -> dict:
        """JSON-ready (infinities as None)."""
        return _json_safe(asdict(self))


def analyse(jacobian: np.ndarray, residuals: np.ndarray, space: SearchSpace, x: Sequence[float],
            jacobian_rollouts: int = 0) -> Identifiability:
    """Identifiability of the parameters at ``x`` (see the module doc for the formulas).

    Args:
        jacobian: (R, D) d residual / d u, u the unit-cube coordinate of each parameter
            (``SearchSpace.to_unit``; log dimensions on a log scale).
        residuals: (R,) residuals at ``x``.
        space: the search space (names, bounds, scales).
        x: (D,) parameter values.
        jacobian_rollouts: rollouts spent on ``jacobian`` (reported).
    Raises:
        ValueError: shapes that do not match, or no more residuals than parameters.
    """
    J = np.asarray(jacobian, dtype=float)
    r = np.asarray(residuals, dtype=float).ravel()
    x = np.asarray(x, dtype=float)
    n, d = J.shape if J.ndim == 2 else (0, 0)
    if J.ndim != 2 or d != len(space.dimensions) or n != r.size or x.shape != (d,):
        raise ValueError(f'Jacobian {J.shape}, residuals {r.shape} and point {x.shape} do not match '
                         f'{len(space.dimensions)} parameters')
    if n <= d:
        raise ValueError(f'{n} residuals cannot identify {d} parameters')
    dof = n - d
    s2 = float(r @ r) / dof
    u = space.to_unit(x[None])[0]
    # dx/du of each parameter at x: linear dims (high - low), log dims x * ln(high / low)
    gain = np.array([v * np.log(dim.high / dim.low) if dim.log else dim.high - dim.low
                     for v, dim in zip(x, space.dimensions)])
    cov_u, infinite = covariance(J, s2)
    sd_u = np.sqrt(np.clip(np.diag(cov_u), 0.0, None))
    sd_u[infinite] = np.inf
    import scipy.special    # lazy: 0.15 s of imports, at the report (scipy.stats would cost 0.27 s)
    t = float(scipy.special.stdtrit(dof, 0.975))      # Student's t quantile
    names = space.names
    parameters, on_bound = {}, []
    for k, dim in enumerate(space.dimensions):
        bound = 'lower' if u[k] <= BOUND_TOLERANCE else 'upper' if u[k] >= 1 - BOUND_TOLERANCE else None
        if bound:
            on_bound.append(dim.name)
        low, high = (_from_unit(dim, u[k] - t * sd_u[k]), _from_unit(dim, u[k] + t * sd_u[k]))
        parameters[dim.name] = {'value': float(x[k]), 'sd': float(sd_u[k] * gain[k]),
                                'low': low, 'high': high, 'on_bound': bound}
    norms = np.linalg.norm(J, axis=0)
    singular, directions = normalised_svd(J, norms)
    unidentifiable = []
    for value, vector, kind in directions:
        coefficients = {name: float(c) for name, c in zip(names, vector)}
        index = float(1.0 / value) if kind == 'collinear' and value > 0 else float('inf')
        unidentifiable.append(Direction(combination(coefficients), coefficients, float(value), index, kind))
    return Identifiability(parameters, unidentifiable, on_bound, [float(v) for v in singular], n, dof, s2,
                           jacobian_rollouts)


def covariance(J: np.ndarray, s2: float) -> tuple[np.ndarray, np.ndarray]:
    """s^2 (J^T J)^+ in the unit cube and a (D,) mask of parameters with infinite variance
    (loading on a direction whose singular value is below numerical precision). ``J``: (N, D)
    Jacobian of the residuals (or regressor of a linear fit), ``s2``: residual variance. Shared
    by ``calibrate`` and ``identify`` (shadow_twin.identification.fit)."""
    _, sv, vt = np.linalg.svd(J, full_matrices=False)
    tol = (sv[0] if sv.size and sv[0] > 0 else 1.0) * max(J.shape) * np.finfo(float).eps
    keep = sv > tol
    inv = (vt[keep].T / sv[keep] ** 2) @ vt[keep]
    null = vt[~keep]
    infinite = (null ** 2).sum(axis=0) > 1e-12 if null.size else np.zeros(J.shape[1], dtype=bool)
    return s2 * inv, infinite


def normalised_svd(J: np.ndarray, norms: np.ndarray) -> tuple[np.ndarray, list[tuple[float, np.ndarray, str]]]:
    """``J``: (N, D), ``norms``: (D,) its column norms. Singular values of the column-normalised
    Jacobian of the parameters with an effect
    (descending, zeros for the others) and the unidentifiable directions: parameters without
    effect (least effect first), then directions below 1 / COLLINEARITY_LIMIT (smallest first)."""
    d = J.shape[1]
    scale = np.max(norms) if norms.size and np.max(norms) > 0 else 1.0
    active = norms > scale * NEGLIGIBLE_EFFECT
    directions: list[tuple[float, np.ndarray, str]] = []
    for k in sorted(np.flatnonzero(~active), key=lambda k: norms[k]):
        directions.append((float(norms[k] / scale), np.eye(d)[k], 'no effect'))
    singular = np.zeros(d)
    if active.any():
        S = J[:, active] / norms[active]
        _, sv, vt = np.linalg.svd(S, full_matrices=False)
        singular[:sv.size] = sv
        for value, row in sorted(zip(sv, vt), key=lambda item: item[0]):
            if value < 1.0 / COLLINEARITY_LIMIT:
                vector = np.zeros(d)
                vector[active] = row * (1 if row[np.argmax(np.abs(row))] > 0 else -1)  # largest term positive
                directions.append((float(value), vector, 'collinear'))
    return np.sort(singular)[::-1], directions


def combination(coefficients: dict[str, float], cutoff: float = NAME_CUTOFF) -> str:
    """'0.71 a - 0.70 b': the terms of at least ``cutoff`` in magnitude, largest first."""
    terms = sorted(((c, n) for n, c in coefficients.items() if abs(c) >= cutoff), key=lambda t: -abs(t[0]))
    if not terms:
        return '0'
    text = f'{terms[0][0]:.2f} {terms[0][1]}'
    for c, name in terms[1:]:
        text += f' {"-" if c < 0 else "+"} {abs(c):.2f} {name}'
    return text


def _from_unit(dim, u: float) -> float:
    """A unit-cube coordinate to the parameter's value, without clipping (intervals may leave the box)."""
    if not np.isfinite(u):
        return float(np.sign(u) * np.inf)
    if dim.log:
        with np.errstate(over='ignore'):  # an interval far beyond the range: inf
            return float(np.exp(np.log(dim.low) + u * (np.log(dim.high) - np.log(dim.low))))
    return float(dim.low + u * (dim.high - dim.low))


def _json_safe(value):
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def of_result(result, evaluator, space: SearchSpace, nthread: int = 1, step: float = 1e-2) -> Identifiability:
    """Identifiability at a calibration's best point.

    Reuses the least-squares phase's last finite-difference Jacobian when it was taken at
    the best point; otherwise computes one there (D + 1 rollouts in one batch, not part of
    the calibration's budget; reported as ``jacobian_rollouts``).

    Args:
        result: a :class:`~shadow_twin.calibration.engine.run.CalibrationResult`.
        evaluator: an Evaluator or EvaluatorSet (``evaluate_residuals``).
        space: its search space. nthread: threads of the rollout. step: finite-difference
        step, fraction of each range.
    """
    x = np.asarray(result.best.x, dtype=float)
    lsq = getattr(result, 'least_squares', None)
    if lsq is not None and lsq.jacobian is not None and np.array_equal(lsq.jacobian_at, x):
        return analyse(lsq.jacobian, lsq.residuals_at_jacobian, space, x)
    J, r = finite_difference_jacobian(lambda p: evaluator.evaluate_residuals(
        [space.values(v) for v in p], nthread), space, x, step)
    return analyse(J, r, space, x, jacobian_rollouts=len(space.dimensions) + 1)


def summary_lines(section: dict) -> list[str]:
    """Text lines of a report's ``identifiability`` section (:meth:`Identifiability.to_dict`)."""
    def fmt(v):
        return 'unbounded' if v is None else f'{v:.4g}'
    lines = [f'identifiability ({section["residuals"]} residuals, Gauss-Newton 95 % intervals; '
             f'optimistic: model errors are correlated in time):']
    width = max(len(n) for n in section['parameters'])
    for name, p in section['parameters'].items():
        bound = f'  on the {p["on_bound"]} bound' if p['on_bound'] else ''
        lines.append(f'  {name:{width}s} {p["value"]:.4g}  sd {fmt(p["sd"])}  '
                     f'95 % [{fmt(p["low"])}, {fmt(p["high"])}]{bound}')
    directions = section['unidentifiable']
    if directions:
        lines.append(f'  not identifiable from this recording (no effect, or collinearity index > '
                     f'{section["collinearity_limit"]:g} in the sensitivity-normalised scale):')
        for d in directions:
            if d['kind'] == 'no effect':
                what = 'no effect' if not d['singular_value'] else \
                    f'no effect: {d["singular_value"]:.1g} of the largest'
            else:
                what = f'collinearity index {d["collinearity_index"]:.3g}'
            lines.append(f'    {d["combination"]}  ({what})')
    else:
        lines.append('  every direction is identifiable (collinearity index <= '
                     f'{section["collinearity_limit"]:g})')
    if section['on_bound']:
        lines.append(f'  on a bound: {", ".join(section["on_bound"])} (widen the search range?)')
    return lines
