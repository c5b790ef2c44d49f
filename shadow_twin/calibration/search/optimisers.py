"""Optimisers with one ask/tell interface, for batches evaluated in parallel.

* ``bo``: Bayesian optimisation, scikit-optimize ``Optimizer`` (Gaussian
  process, ``gp_hedge`` or ``EI``, Latin-hypercube initial design, batches by
  the constant-liar strategy). To keep the GP's own cost small next to the
  simulation, the acquisition is maximised over random samples
  (``acq_optimizer='sampling'``) instead of skopt's default 10 000 samples plus
  L-BFGS restarts.
* ``random``: uniform random search.
* ``cmaes``: CMA-ES (the ``cma`` package), in the unit cube with bounds.
* ``pso``: particle swarm (``pyswarms`` backend, global-best topology).
* ``lsq``: box-constrained nonlinear least squares on the residual vector
  (:mod:`~shadow_twin.calibration.search.least_squares`), from the model defaults; not an
  ask/tell optimiser: :class:`~shadow_twin.calibration.engine.run.Calibration` drives it.
* ``<global>+lsq`` (e.g. ``random+lsq``, ``bo+lsq``): a global phase with one of the
  ask/tell optimisers above, then a least-squares polish from the best point found;
  the budget counts the rollouts of both phases.
* ``auto`` (the default): least squares from the model as given first (``mujoco.minimize``;
  converged when an iteration's D + 1 rollouts gain under ``CONVERGED_GAIN``, given up at half the
  budget when still above ``STALL_FRACTION`` of the model as given's objective); a global phase
  (``AUTO_GLOBAL``) only when :func:`global_phase_reasons` finds a reason (least squares ended on a
  bound, stalled, or the model as given lies outside the space) and the budget left holds it and two
  least-squares iterations, then least squares again (trf) from the global phase's best point; the
  run stops when least squares has converged, budget left or not (``run.Calibration``).

Every optimiser is seeded, so a fixed seed and the same evaluations reproduce
a run; :func:`replay` rebuilds an optimiser's state from a checkpoint by
asking and telling the recorded batches again.
"""

from __future__ import annotations

import contextlib
import copy
import os
import tempfile
from typing import Protocol, Sequence

import numpy as np

from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.common.errors import ConfigError

#: Optimisers with an ask/tell interface (:func:`make_optimiser`).
ASK_TELL = ('bo', 'random', 'pso', 'cmaes')
#: The local least-squares method.
LEAST_SQUARES = 'lsq'
#: The default rule: least squares first, a global phase only when needed (module doc).
AUTO = 'auto'
#: The global optimiser of ``auto``'s global phase.
AUTO_GLOBAL = 'bo'
#: ``auto``'s least-squares engines (``least_squares.fit_least_squares`` methods): from the model as
#: given ``mujoco.minimize`` (on the real hand recording, 150 rollouts: 0.000429 rad^2 against trf's
#: 0.000434, and below trf's end after 100 rollouts; benchmarks/calibrate_real_hand.py); from the global
#: phase's best, a poorer start, scipy's trf (its trust region adapts faster than mujoco.minimize's
#: regulariser, which spends a rollout per rejected step: test_least_squares.py).
AUTO_LEAST_SQUARES = ('mujoco', 'scipy')
#: ``auto``: least squares has stalled when its best objective is still above this fraction of
#: the objective at its start (10 %: less than 90 % lower), when it converged or has spent half
#: the budget. On the real hand recording least squares ends at 0.8 % of its start.
STALL_FRACTION = 0.1
#: ``auto``: a value within this fraction of its range from a bound is on the bound.
BOUND_TOLERANCE = 1e-3
#: ``auto``: least squares from the model as given has converged when the last D + 1 rollouts (an
#: iteration: a Jacobian and a step) lowered its best objective by less than this fraction. On the
#: real hand recording (mujoco.minimize, fingers_j123.yaml) it stops after 97 rollouts at 0.0004303
#: rad^2: the next 53 lowered it by 0.35 % more, where least squares alone with trf ends at 0.000434.
CONVERGED_GAIN = 1e-3
#: Every optimiser a calibration accepts: the default rule, the ask/tell ones, least squares
#: alone, and each ask/tell optimiser as the global phase before a least-squares polish.
OPTIMISERS = (AUTO,) + ASK_TELL + (LEAST_SQUARES,) + tuple(f'{name}+{LEAST_SQUARES}' for name in ASK_TELL)


class Optimiser(Protocol):
    """ask(n) -> (m, D) points in parameter units, 1 <= m <= n; tell(points, objectives)."""

    def ask(self, n: int) -> np.ndarray: ...

    def tell(self, points: np.ndarray, objectives: Sequence[float]) -> None: ...


class BayesianOptimiser:
    """scikit-optimize GP optimiser (see module doc).

    The GP's kernel hyperparameters are re-optimised (L-BFGS with restarts, the
    expensive part of a fit) only every ``refit_every`` evaluations; in between,
    and for the constant-liar fits inside a batch, the GP is refitted to the new
    data with the last hyperparameters kept (a Cholesky solve). Measured on the
    real hand recording this cuts the optimiser's share of a 150-evaluation run
    from over 90 % of the wall time to a small fraction (benchmarks/calibrate_real_hand.py).

    Args:
        space: search space. seed: random seed. n_initial_points: size of the
        Latin-hypercube initial design. acq_func: 'gp_hedge', 'EI', 'PI' or 'LCB'.
        acq_points: random samples on which the acquisition is maximised.
        refit_every: evaluations between hyperparameter optimisations (1: always).
        log_objective: model log(objective) instead of the objective. A mean squared error
            spans orders of magnitude across a wide search space; its logarithm is far closer
            to the smooth, stationary function a GP assumes, so EI stops chasing the
            worst corners (on the live mock-hardware recordings: 4 % -> under 1 % of the
            default error in 30 evaluations). Objectives must then be positive.
    """

    def __init__(self, space: SearchSpace, seed: int = 0, n_initial_points: int = 20,
                 acq_func: str = 'EI', acq_points: int = 1000, refit_every: int = 25,
                 log_objective: bool = False) -> None:
        from skopt import Optimizer  # lazy: scikit-optimize (and scikit-learn) take ~1 s to import; only BO needs them
        from skopt.sampler import Lhs
        self.space = space
        self.refit_every = max(1, int(refit_every))
        self._opt = Optimizer([d.skopt_dimension() for d in space.dimensions], base_estimator='GP',
                              acq_func=acq_func, n_initial_points=n_initial_points,
                              initial_point_generator=Lhs(lhs_type='classic', criterion=None),
                              acq_optimizer='sampling', acq_optimizer_kwargs={'n_points': acq_points},
                              random_state=seed)
        self._gp = self._opt.base_estimator_
        self._free_kernel = self._gp.kernel
        self._told = 0
        self._last_refit = None
        self.log_objective = log_objective

    def ask(self, n: int) -> np.ndarray:
        points = self._opt.ask(n_points=n, strategy='cl_min') if n > 1 else [self._opt.ask()]
        return np.array(points, dtype=float)

    def tell(self, points: np.ndarray, objectives: Sequence[float]) -> None:
        self._told += len(points)
        refit = self._last_refit is None or self._told - self._last_refit >= self.refit_every
        if refit:  # re-optimise hyperparameters from the default kernel
            self._gp.set_params(kernel=self._free_kernel, optimizer='fmin_l_bfgs_b')
        values = [float(y) for y in objectives]
        if self.log_objective:
            values = [float(np.log(max(y, 1e-300))) for y in values]
        self._opt.tell([list(map(float, p)) for p in points], values)
        if refit and self._opt.models:
            self._last_refit = self._told
            self._freeze(self._opt.models[-1])

    def _freeze(self, fitted) -> None:
        """Keep ``fitted``'s hyperparameters (and its noise level) for the next fits."""
        from sklearn.gaussian_process.kernels import WhiteKernel  # lazy: only BO needs scikit-learn (~1 s)
        from skopt.learning.gaussian_process.gpr import _param_for_white_kernel_in_Sum
        kernel = copy.deepcopy(fitted.kernel_)
        present, param = _param_for_white_kernel_in_Sum(kernel)
        if present and fitted.noise_ is not None:
            kernel.set_params(**{param: WhiteKernel(noise_level=max(fitted.noise_, 1e-10),
                                                     noise_level_bounds='fixed')})
        self._gp.set_params(kernel=kernel, optimizer=None)


class RandomSearch:
    """Uniform random search (log-uniform on log dimensions)."""

    def __init__(self, space: SearchSpace, seed: int = 0) -> None:
        self.space = space
        self._rng = np.random.default_rng(seed)

    def ask(self, n: int) -> np.ndarray:
        return self.space.from_unit(self._rng.random((n, len(self.space.dimensions))))

    def tell(self, points: np.ndarray, objectives: Sequence[float]) -> None:
        pass


class _Generational:
    """Adapts a population method (one generation per step) to ask(n)/tell."""

    def __init__(self, space: SearchSpace) -> None:
        self.space = space
        self._pending: list[np.ndarray] = []   # unit-cube points not yet asked
        self._asked: list[np.ndarray] = []     # asked, waiting for objectives
        self._told: list[tuple[np.ndarray, float]] = []

    def ask(self, n: int) -> np.ndarray:
        """Up to ``n`` points of the current generation (fewer at its end: the next
        generation needs this one's objectives first)."""
        if not self._pending:
            if self._told:
                raise RuntimeError('tell the outstanding points before asking for a new generation')
            self._pending = list(self._generation())
        out, self._pending = self._pending[:n], self._pending[n:]
        self._asked.extend(out)
        return self.space.from_unit(np.array(out))

    def tell(self, points: np.ndarray, objectives: Sequence[float]) -> None:
        for u, y in zip(self.space.to_unit(points), objectives):
            self._told.append((u, float(y)))
        size = self._size()
        while len(self._told) >= size:
            batch, self._told = self._told[:size], self._told[size:]
            self._update(np.array([u for u, _ in batch]), np.array([y for _, y in batch]))


class CMAES(_Generational):
    """CMA-ES from the ``cma`` package, started at the model defaults, sigma0 of the range (default 0.25)."""

    def __init__(self, space: SearchSpace, seed: int = 0, popsize: int | None = None, sigma0: float = 0.25) -> None:
        import cma  # lazy: optional heavy dependency, only the cmaes optimiser needs it
        super().__init__(space)
        options = {'bounds': [0.0, 1.0], 'seed': seed + 1, 'verbose': -9}
        if popsize:
            options['popsize'] = popsize
        start = space.to_unit(space.defaults[None])[0]
        self._es = cma.CMAEvolutionStrategy(start.tolist(), sigma0, options)
        self._solutions: list[np.ndarray] = []

    def _generation(self):
        self._solutions = [np.clip(s, 0.0, 1.0) for s in self._es.ask()]
        return list(self._solutions)

    def _size(self) -> int:
        return self._es.popsize

    def _update(self, units, objectives) -> None:
        self._es.tell(list(units), list(objectives))


class ParticleSwarm(_Generational):
    """Global-best PSO (``pyswarms.backend``; c1 0.5, c2 0.3, w 0.9 as its examples), in the unit cube."""

    def __init__(self, space: SearchSpace, seed: int = 0, particles: int = 10) -> None:
        with _quiet_pyswarms():
            import pyswarms.backend as backend  # lazy: only pso needs it (and it configures logging on import)
            from pyswarms.backend.topology import Star
            topology = Star()
        super().__init__(space)
        self._backend, self._topology = backend, topology
        self._rng_state = np.random.RandomState(seed)
        dims = len(space.dimensions)
        with self._seeded():
            self._swarm = backend.create_swarm(particles, dims, options={'c1': 0.5, 'c2': 0.3, 'w': 0.9},
                                               bounds=(np.zeros(dims), np.ones(dims)))
        self._swarm.pbest_cost = np.full(particles, np.inf)
        self._first = True

    @contextlib.contextmanager
    def _seeded(self):
        """pyswarms draws from numpy's global RNG: run it on our own seeded state."""
        saved = np.random.get_state()
        np.random.set_state(self._rng_state.get_state())
        try:
            with _quiet_pyswarms():
                yield
        finally:
            self._rng_state.set_state(np.random.get_state())
            np.random.set_state(saved)

    def _generation(self):
        if not self._first:
            bounds = (np.zeros(self._swarm.dimensions), np.ones(self._swarm.dimensions))
            with self._seeded():
                self._swarm.velocity = self._topology.compute_velocity(self._swarm, bounds=bounds)
                self._swarm.position = self._topology.compute_position(self._swarm, bounds=bounds)
        self._first = False
        return list(self._swarm.position.copy())

    def _size(self) -> int:
        return self._swarm.n_particles

    def _update(self, units, objectives) -> None:
        swarm = self._swarm
        swarm.position = units
        swarm.current_cost = objectives
        with _quiet_pyswarms():
            swarm.pbest_pos, swarm.pbest_cost = self._backend.compute_pbest(swarm)
            swarm.best_pos, swarm.best_cost = self._topology.compute_gbest(swarm)


@contextlib.contextmanager
def _quiet_pyswarms():
    """pyswarms' Reporter, created on import and by its handlers, configures the root
    logger and opens ``report.log`` in the working directory unless ``LOG_CFG`` names
    a logging config: point it at an empty one while pyswarms runs."""
    saved = os.environ.get('LOG_CFG')
    with tempfile.NamedTemporaryFile('w', suffix='.yaml') as config:
        config.write('version: 1\ndisable_existing_loggers: false\n')
        config.flush()
        os.environ['LOG_CFG'] = config.name
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop('LOG_CFG', None)
            else:
                os.environ['LOG_CFG'] = saved


def phases(name: str) -> tuple[str | None, bool]:
    """(global ask/tell optimiser or None, whether a least-squares phase follows) of ``name``
    (``auto``: its global optimiser, which runs only when needed, and True).

    Raises ConfigError for a name not in OPTIMISERS.
    """
    if name not in OPTIMISERS:
        raise ConfigError(f'unknown optimizer {name!r}; use one of {OPTIMISERS}')
    if name == AUTO:
        return AUTO_GLOBAL, True
    if name == LEAST_SQUARES:
        return None, True
    first, _, second = name.partition('+')
    return first, bool(second)


def outside_space(space: SearchSpace) -> list[str]:
    """The dimensions whose model value (``Dimension.default``) lies outside their bounds, each as
    'name value (bounds low..high)'; empty when the model as given lies inside the space."""
    return [f'{d.name} {d.default:.4g} (bounds {d.low:.4g}..{d.high:.4g})' for d in space.dimensions
            if not d.low <= d.default <= d.high]


def on_bounds(space: SearchSpace, x: np.ndarray, tolerance: float = BOUND_TOLERANCE) -> list[str]:
    """The dimensions of point ``x`` ((D,), parameter units) within ``tolerance`` of their range
    (unit cube) from a bound, each as 'name (lower)' or 'name (upper)'."""
    u = space.to_unit(np.asarray(x, dtype=float))[0]
    return [f'{d.name} ({"lower" if v <= tolerance else "upper"})' for d, v in zip(space.dimensions, u)
            if v <= tolerance or v >= 1.0 - tolerance]


def share_of(value: float, of: float) -> str:
    """``value`` as a percentage of ``of`` ('inf %' when ``of`` is not positive or ``value`` not finite)."""
    return f'{100 * value / of:.3g} %' if of > 0 and np.isfinite(value) else 'inf %'


def stalled(best: float, start: float, stall_fraction: float = STALL_FRACTION) -> bool:
    """Whether least squares has stalled: its best objective ``best`` is still above ``stall_fraction``
    of ``start``, the model as given's (rad^2; a NaN best counts as stalled)."""
    return not best <= stall_fraction * start


def global_phase_reasons(space: SearchSpace, x: np.ndarray, start: float, best: float,
                         stall_fraction: float = STALL_FRACTION) -> list[str]:
    """Why ``auto`` runs a global phase after least squares ended at ``x`` ((D,), parameter units)
    with objective ``best``, where the model as given scores ``start`` (rad^2); empty: it does not.

    Reasons, in this order: least squares ended on a bound (:func:`on_bounds`); it stalled, its
    best still above ``stall_fraction`` of ``start``; the model as given lies outside the space
    (:func:`outside_space`: least squares started from it clipped into the bounds).
    """
    reasons = []
    bound = on_bounds(space, x)
    if bound:
        reasons.append(f'least squares ended on a bound: {", ".join(bound)}')
    if stalled(best, start, stall_fraction):
        reasons.append(f'least squares stalled at {share_of(best, start)} of the model as given\'s objective '
                       f'(above {100 * stall_fraction:g} %)')
    outside = outside_space(space)
    if outside:
        reasons.append(f'the model as given lies outside the space: {", ".join(outside)}')
    return reasons


def make_optimiser(name: str, space: SearchSpace, seed: int = 0, **options) -> Optimiser:
    """Build ask/tell optimiser ``name`` (one of ASK_TELL); ConfigError otherwise."""
    if name == 'bo':
        return BayesianOptimiser(space, seed, **options)
    if name == 'random':
        return RandomSearch(space, seed)
    if name == 'cmaes':
        return CMAES(space, seed, **options)
    if name == 'pso':
        return ParticleSwarm(space, seed)
    if name in OPTIMISERS:
        raise ConfigError(f'optimizer {name!r} has no ask/tell interface; a Calibration runs it')
    raise ConfigError(f'unknown optimizer {name!r}; use one of {OPTIMISERS}')
