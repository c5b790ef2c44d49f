"""Box-constrained nonlinear least squares on the residual vector, with a rollout budget.

The objective of a calibration is a sum of squares (``Evaluator.residuals``: ``sum(r**2)``
is the weighted mean of per-joint MSE, rad^2), so a Gauss-Newton type method uses far
more of each simulation than a method that only sees the objective: every rollout gives
R residuals. This is the method of MuJoCo's own system identification toolbox
(``mujoco.sysid``: ``mujoco.minimize.least_squares`` or ``scipy.optimize.least_squares``
with a finite-difference Jacobian from batched rollouts).

:func:`fit_least_squares` works in the search space's unit cube (bounds [0, 1], log
dimensions on a log scale: ``SearchSpace.to_unit``/``from_unit``); the D columns of a
forward-difference Jacobian are simulated in one batched call. The budget counts rollouts
(residual evaluations plus Jacobian columns); when the next request does not fit in what
is left the fit stops cleanly and returns the best point seen. Two methods:

* ``scipy`` (default): ``scipy.optimize.least_squares``, trust-region reflective
  (``method='trf'``), forward differences with a step of 1 % of each range (then 0.1 %),
  and between full finite-difference Jacobians Broyden's rank-one secant update from the
  accepted steps (no rollouts; Madsen, Nielsen & Tingleff, *Methods for non-linear least
  squares problems*, 2nd ed., IMM DTU 2004, section 3.4, eq. 3.34): a full Jacobian costs
  D rollouts, a secant update none.
* ``mujoco``: ``mujoco.minimize.least_squares`` (Levenberg-Marquardt, the default backend of
  ``mujoco.sysid.optimize``) with its own finite differences (step sqrt(machine epsilon)).
  On the real recording (fingers_j123.yaml, 150 rollouts from the model defaults) it ends
  about 1 % lower than ``scipy`` (0.000429 against 0.000433 rad^2: different local minima
  of a landscape made rugged by frictionloss), but it raises its regulariser by only a factor
  1.26 per rejected step, one rollout each: from a poor start it spends its budget on
  rejections (test_least_squares.py: Rosenbrock, 20 rollouts without progress where
  ``scipy`` needs 80 in all; the synthetic hand: damping 40 % off after 24 rollouts). The default
  optimiser (``auto``) runs it from the model as given and ``scipy`` from its global phase's best
  (``optimisers.AUTO_LEAST_SQUARES``).

When scipy stops on its tolerances with budget left, the fit restarts from the best point
with a fresh finite-difference Jacobian (and the next step size when a restart does not help).
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass, field
from typing import Callable, Sequence

import mujoco.minimize
import numpy as np

from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.common.errors import ConfigError

log = logging.getLogger(__name__)

#: Forward-difference steps of each method, fraction of each search range, tried in turn
#: when a restart stops improving. 'mujoco': ``mujoco.minimize``'s own sqrt(machine epsilon);
#: 'scipy': a coarse step first (it averages over the kinks that frictionloss and contacts put
#: into the residuals), then a fine one (measured on the real recording,
#: benchmarks/calibrate_real_hand.py).
DIFF_STEPS = {'mujoco': (float(np.sqrt(np.finfo(float).eps)),), 'scipy': (1e-2, 1e-3)}
#: Least-squares method of a calibration (the measurements behind the choice: module doc).
DEFAULT_METHOD = 'scipy'
#: 'scipy': a full finite-difference Jacobian every this many Jacobian requests, Broyden updates between.
JACOBIAN_REFRESH = 3
#: Batched residuals: (M, D) points in parameter units -> (M, R) residuals (rad).
ResidualFunction = Callable[[np.ndarray], np.ndarray]


class _BudgetSpent(Exception):
    """Raised inside scipy's callbacks to stop the fit when the rollout budget is spent."""


@dataclass
class LeastSquaresResult:
    """Outcome of :func:`fit_least_squares`.

    Attributes:
        x: (D,) best point seen, parameter units.
        cost: its sum of squared residuals (the objective, rad^2).
        rollouts: rollouts used (residual evaluations + Jacobian columns).
        status: why the fit stopped ('budget spent' or scipy's message).
        jacobian: (R, D) last finite-difference Jacobian, d r / d u in the unit cube
            (rad per unit range), or None if none was computed.
        jacobian_at: (D,) the point (parameter units) where ``jacobian`` was taken.
        residuals_at_jacobian: (R,) the residuals at ``jacobian_at``.
        history: [(rollouts used, best cost)] after each request, for plots and tests.
        ended: 'converged' (the method stopped on its tolerances and restarts no longer improved),
            'budget' (the next request did not fit in the rollouts left) or 'stopped' (the
            ``stop`` callback of :func:`fit_least_squares` ended it; ``status`` says why).
    """

    x: np.ndarray
    cost: float
    rollouts: int
    status: str
    jacobian: np.ndarray | None = None
    jacobian_at: np.ndarray | None = None
    residuals_at_jacobian: np.ndarray | None = None
    history: list[tuple[int, float]] = field(default_factory=list)
    ended: str = 'converged'


class _Stopped(Exception):
    """Raised inside scipy's callbacks when the ``stop`` callback ends the fit (its reason)."""


class _Budgeted:
    """Counts rollouts, remembers every residual vector and the best point (unit cube)."""

    def __init__(self, residuals: ResidualFunction, space: SearchSpace, budget: int,
                 stop: Callable[[int, float], str | None] | None = None) -> None:
        self.residuals, self.space, self.budget, self.stop = residuals, space, int(budget), stop
        self.used = 0
        self.best_u: np.ndarray | None = None
        self.best_cost = np.inf
        self.best_r: np.ndarray | None = None
        self.cache: dict[bytes, np.ndarray] = {}
        self.history: list[tuple[int, float]] = []

    @property
    def left(self) -> int:
        return self.budget - self.used

    def __call__(self, units: np.ndarray) -> np.ndarray:
        """(M, D) unit points -> (M, R) residuals; _BudgetSpent if M rollouts do not fit.
        A batch evaluated before is answered from the cache."""
        units = np.atleast_2d(units)
        cached = [self.cache.get(u.tobytes()) for u in units]
        if all(row is not None for row in cached):  # asked again: no rollout
            return np.stack(cached)
        if len(units) > self.left:
            raise _BudgetSpent
        r = np.asarray(self.residuals(self.space.from_unit(units)), dtype=float)
        self.used += len(units)
        for u, row in zip(units, r):
            self.cache[u.tobytes()] = row
            cost = float(row @ row)
            if not np.isfinite(cost):
                continue
            if cost < self.best_cost:
                self.best_u, self.best_cost, self.best_r = u.copy(), cost, row
        self.history.append((self.used, self.best_cost))
        reason = self.stop(self.used, self.best_cost) if self.stop else None
        if reason:
            raise _Stopped(reason)
        return r

    def at(self, u: np.ndarray) -> np.ndarray:
        """Residuals at ``u`` (from the cache when it was evaluated)."""
        return self(np.asarray(u, dtype=float)[None])[0]


class _Jacobian:
    """Forward-difference Jacobian in the unit cube, optionally refreshed only every
    ``refresh`` calls with Broyden secant updates in between."""

    def __init__(self, f: _Budgeted, step: float, refresh: int) -> None:
        self.f, self.step, self.refresh = f, float(step), max(1, int(refresh))
        self.J: np.ndarray | None = None
        self.u: np.ndarray | None = None
        self.r: np.ndarray | None = None
        self.since = 0
        self.fd_J: np.ndarray | None = None
        self.fd_u: np.ndarray | None = None
        self.fd_r: np.ndarray | None = None

    def reset(self) -> None:
        """Next request: a full finite-difference Jacobian."""
        self.J = None

    def __call__(self, u: np.ndarray) -> np.ndarray:
        u = np.asarray(u, dtype=float)
        r = self.f.at(u)
        secant = self.J is not None and self.since < self.refresh - 1
        if not secant and len(u) > self.f.left and self.J is not None:
            secant = True  # a full Jacobian no longer fits: keep going on secant updates
        if secant:
            s = u - self.u
            if s @ s > 0:
                self.J = self.J + np.outer(r - self.r - self.J @ s, s) / (s @ s)
            self.since += 1
        else:
            self.J = self._finite_difference(u, r)
            self.fd_J, self.fd_u, self.fd_r = self.J, u.copy(), r
            self.since = 0
        self.u, self.r = u.copy(), r
        return self.J

    def _finite_difference(self, u: np.ndarray, r: np.ndarray) -> np.ndarray:
        h = np.where(u + self.step <= 1.0, self.step, -self.step)  # backward at the upper bound
        shifted = u[None] + np.diag(h)
        return ((self.f(shifted) - r[None]) / h[:, None]).T


def _mujoco_least_squares(f: _Budgeted, jac: _Jacobian, start: np.ndarray, max_iter: int,
                          scale: float = 1.0) -> str:
    """``mujoco.minimize.least_squares`` (Levenberg-Marquardt with box bounds) in the unit cube,
    with its own finite-difference Jacobian (``mujoco.minimize.jacobian_fd``: D points in one
    residual call, backward steps in the upper half of a range), recorded in ``jac``; the method
    sees the residuals divided by ``scale``."""
    d = start.size
    bounds = [np.zeros((d, 1)), np.ones((d, 1))]

    def residual(z: np.ndarray) -> np.ndarray:  # (D, k) -> (R, k)
        return f(np.clip(np.asarray(z, dtype=float).reshape(d, -1).T, 0.0, 1.0)).T / scale

    def jacobian(z: np.ndarray, r: np.ndarray) -> np.ndarray:
        J = mujoco.minimize.jacobian_fd(residual, z, r, jac.step, 0, bounds)[0]
        jac.fd_J, jac.fd_u, jac.fd_r = J * scale, np.clip(z.ravel(), 0.0, 1.0), r.ravel() * scale
        return J
    mujoco.minimize.least_squares(start, residual, bounds=[b.ravel() for b in bounds], jacobian=jacobian,
                                  eps=jac.step, max_iter=max_iter, verbose=0, output=io.StringIO())
    return 'mujoco.minimize converged'


def finite_difference_jacobian(residuals: ResidualFunction, space: SearchSpace, x: np.ndarray,
                               step: float = 1e-2) -> tuple[np.ndarray, np.ndarray]:
    """Forward-difference Jacobian of ``residuals`` at ``x`` in the unit cube, in one batch of
    D + 1 rollouts (``x`` and ``x`` moved by ``step`` of each range; backwards at the upper bound).

    Returns ((R, D) d r / d u, rad per unit range; (R,) residuals at ``x``).
    """
    u = space.to_unit(np.asarray(x, dtype=float))[0]
    h = np.where(u + step <= 1.0, step, -step)
    r = np.asarray(residuals(space.from_unit(np.vstack([u, u[None] + np.diag(h)]))), dtype=float)
    return ((r[1:] - r[0]) / h[:, None]).T, r[0]


def fit_least_squares(residuals: ResidualFunction, space: SearchSpace, x0: np.ndarray, budget: int,
                      method: str = DEFAULT_METHOD, diff_step: float | Sequence[float] | None = None,
                      jacobian_refresh: int = JACOBIAN_REFRESH, x_scale: str | float = 1.0,
                      restarts: bool = True,
                      stop: Callable[[int, float], str | None] | None = None,
                      xtol: float | None = None) -> LeastSquaresResult:
    """Minimise ``sum(residuals(x)**2)`` over ``space`` from ``x0`` within ``budget`` rollouts.

    The methods see the residuals scaled to a unit objective at the start, so their absolute
    tolerances do not stop a fit that starts close (a tiny objective) at once.

    Args:
        residuals: batched residual function, (M, D) parameter values -> (M, R) (see
            ``Evaluator.evaluate_residuals``); called once per residual evaluation and once
            per Jacobian (D points, one batched rollout).
        space: search space (bounds, log dimensions).
        x0: (D,) start, parameter units (clipped into the bounds).
        budget: rollouts allowed (residual evaluations + Jacobian columns), >= 1.
        method: 'mujoco' (``mujoco.minimize.least_squares``) or 'scipy'
            (``scipy.optimize.least_squares``, trust-region reflective); see the module doc.
        diff_step: forward-difference step in the unit cube (fraction of each range), or
            steps to go through: the next one when a restart with the current one does not
            improve the best point (default: the method's, ``DIFF_STEPS[method]``).
        jacobian_refresh: 'scipy' only: full finite-difference Jacobian every this many
            Jacobian requests, Broyden secant updates in between (1: always finite differences).
        x_scale: 'scipy' only: ``scipy.optimize.least_squares``'s ``x_scale`` (1.0 or 'jac').
        restarts: when scipy stops on its tolerances with budget left, start again from the
            best point with a fresh finite-difference Jacobian, as long as that improves it
            (or a finer step is left to try).
        stop: called after every request with (rollouts used, best objective so far, rad^2);
            a non-empty string ends the fit there (``ended`` 'stopped', the string its ``status``),
            e.g. a caller that gives up on a fit that stalls.
        xtol: 'scipy' only: the step (unit cube, relative: scipy's ``xtol``) below which a fit has converged
            (None: scipy's 1e-8). An objective that is noisy below some scale cannot tell steps shorter
            than that apart: the calibration engine gives its coarsest finite-difference step's finest
            (``CalibrationSettings.diff_step``).
    Returns:
        the best point seen and the last Jacobian (:class:`LeastSquaresResult`).
    Raises:
        ConfigError: budget below 1, unknown method, diff_step outside (0, 0.5).
    """
    if budget < 1:
        raise ConfigError(f'least squares needs a budget of at least 1 rollout, got {budget}')
    if method not in DIFF_STEPS:
        raise ConfigError(f'unknown least-squares method {method!r}; use one of {tuple(DIFF_STEPS)}')
    steps = [float(h) for h in np.atleast_1d(DIFF_STEPS[method] if diff_step is None else diff_step)]
    if not steps or not all(0 < h < 0.5 for h in steps):
        raise ConfigError(f'diff_step must be in (0, 0.5) of the unit range, got {diff_step}')
    f = _Budgeted(residuals, space, budget, stop)
    jac = _Jacobian(f, steps[0], jacobian_refresh)
    u0 = space.to_unit(np.clip(np.asarray(x0, dtype=float), space.lows, space.highs))[0]
    u0 = np.clip(u0, 0.0, 1.0)
    status, start, level, ended = 'budget spent', u0, 0, 'converged'
    try:
        r0 = f.at(u0)
        if not np.all(np.isfinite(r0)):
            raise _BudgetSpent('the residuals are not finite at the start')
        # Both methods see the residuals over their norm at the start (objective 1 there): their
        # gradient tolerance (gtol, 1e-8) is absolute and the gradient J^T r scales with the objective,
        # so a start already close (objective ~1e-8 rad^2) stopped at once.
        scale = float(np.sqrt(r0 @ r0)) or 1.0
        while True:
            before = f.best_cost
            jac.reset()  # a fresh finite-difference Jacobian at each (re)start
            jac.step = steps[level]
            if method == 'scipy':
                import scipy.optimize   # lazy: 0.2 s of imports the default engine (mujoco) does without
                status = scipy.optimize.least_squares(lambda u: f.at(u) / scale, start, jac=lambda u: jac(u) / scale,
                                                      bounds=(0.0, 1.0), method='trf', x_scale=x_scale,
                                                      max_nfev=10 * budget + 10, xtol=xtol or 1e-8).message
            else:
                status = _mujoco_least_squares(f, jac, start, 10 * budget + 10, scale)
            if not f.best_cost < before:
                level += 1
            if not restarts or f.left <= 0 or level >= len(steps):
                break
            start = f.best_u  # converged: restart from the best point with a fresh Jacobian
    except _BudgetSpent as spent:
        status, ended = str(spent) or 'budget spent', 'budget'
    except _Stopped as stopped:
        status, ended = str(stopped), 'stopped'
    if f.best_u is None:  # nothing evaluated (budget too small for anything): the start
        return LeastSquaresResult(space.from_unit(u0[None])[0], np.inf, f.used, status, history=f.history,
                                  ended=ended)
    out = LeastSquaresResult(space.from_unit(f.best_u[None])[0], f.best_cost, f.used, status, history=f.history,
                             ended=ended)
    if jac.fd_J is not None:
        out.jacobian, out.residuals_at_jacobian = jac.fd_J, jac.fd_r
        out.jacobian_at = space.from_unit(jac.fd_u[None])[0]
    log.info('least squares: cost %.6g after %d rollouts (%s)', out.cost, out.rollouts, status)
    return out
