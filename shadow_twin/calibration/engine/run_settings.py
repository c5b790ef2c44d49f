"""The settings and the outcome of a calibration run (:mod:`~shadow_twin.calibration.engine.run`):
:class:`CalibrationSettings`, one scored point (:class:`Evaluation`), :class:`CalibrationResult`,
and the default optimiser and global budget."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from shadow_twin.calibration.scoring.evaluation import Score
from shadow_twin.calibration.search.least_squares import LeastSquaresResult
from shadow_twin.calibration.search.optimisers import AUTO, OPTIMISERS
from shadow_twin.common.errors import ConfigError

#: Default optimiser: ``auto``, least squares from the model as given, a global phase only when
#: needed (``optimisers`` and ``run`` module docs). Chosen on the real recording
#: (benchmarks/calibrate_real_hand.py, fingers_j123.yaml, 150 rollouts, whole command, this 2-core
#: PC): ``auto`` 0.000430 rad^2 in 97 rollouts, 7.4 s; least squares alone (trf) 0.000434, 11.5 s;
#: 'bo+lsq' (the default before) 0.000435, 12.4 s, its global phase spending rollouts that least
#: squares from the model as given needed (0.000432-0.000450 over seeds 0-7).
DEFAULT_OPTIMIZER = AUTO


@dataclass
class CalibrationSettings:
    """Optimiser settings.

    Attributes:
        optimizer: one of ``optimisers.OPTIMISERS``: 'auto' (the default rule, ``run`` module doc),
            'bo', 'random', 'pso', 'cmaes' (ask/tell),
            'lsq' (least squares from the model defaults) or '<ask/tell>+lsq' (global phase,
            then least squares from its best point).
        budget: number of evaluations (rollouts) of all phases together, Jacobian columns
            included (the default model's is extra).
        workers: evaluations simulated in parallel (threads in ``mujoco.rollout``).
        batch_size: points asked per batch of an ask/tell phase (default: ``workers``).
        seed: random seed.
        n_initial_points: BO Latin-hypercube design size (default max(10, 2 D)).
        acq_func: BO acquisition ('gp_hedge' or 'EI', ...).
        log_objective: BO models log(objective) (see ``optimisers.BayesianOptimiser``).
        global_budget: evaluations of the global phase of a '<global>+lsq' optimiser, and of
            'auto''s when it runs one (default: :func:`default_global_budget`).
        diff_step: the forward-difference steps of the least-squares phases on scipy's engine (trf:
            '<global>+lsq', 'lsq', and 'auto''s phase after its global one), fractions of each search range,
            tried in turn (``least_squares.fit_least_squares``'s ``diff_step``; None: its own 1 % then 0.1 %,
            ``least_squares.DIFF_STEPS``). 'auto''s phases on ``mujoco.minimize`` keep that engine's own.
            Coarse steps for an objective that is noisy at small scales: a contact fit's replays part at
            parameter changes of 1e-5 (the contact protocol's ``diff_step``). With them least squares also
            stops when its step falls below the finest (scipy's ``xtol``): shorter steps cannot be told from
            the noise (the live contact fit spent its last 24 of 45 rollouts within 2e-4 of one point). Why
            not the first phase too: with coarse steps it stopped the live contact fit at 9 % of its start's
            objective, which ``auto`` takes for converged (the mass -10.5 %, the hold-out onset 2.0 deg off;
            29 Nov).
    Raises:
        ConfigError: an unknown optimiser; budget, workers or batch size below 1; a negative global
            budget; a step outside (0, 0.5).
    """

    optimizer: str = DEFAULT_OPTIMIZER
    budget: int = 150
    workers: int = 2
    batch_size: int | None = None
    seed: int = 0
    n_initial_points: int | None = None
    acq_func: str = 'gp_hedge'
    log_objective: bool = False
    global_budget: int | None = None
    diff_step: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMISERS:
            raise ConfigError(f'unknown optimizer {self.optimizer!r}; use one of {OPTIMISERS}')
        if self.budget < 1 or self.workers < 1 or (self.batch_size is not None and self.batch_size < 1):
            raise ConfigError(f'budget, workers and batch size must be at least 1, got budget {self.budget}, '
                              f'workers {self.workers}, batch size {self.batch_size}')
        if self.global_budget is not None and self.global_budget < 0:
            raise ConfigError(f'global budget must be at least 0, got {self.global_budget}')
        if self.diff_step is not None:
            steps = np.atleast_1d(np.asarray(self.diff_step, dtype=float))
            if steps.ndim != 1 or not steps.size or not np.all((steps > 0) & (steps < 0.5)):
                raise ConfigError(f'diff_step must be steps in (0, 0.5) of each range, got {self.diff_step}')
            self.diff_step = tuple(float(h) for h in steps)

    @property
    def batch(self) -> int:
        return self.batch_size or self.workers


def default_global_budget(budget: int, dimensions: int) -> int:
    """Evaluations of the global phase of a '<global>+lsq' run with ``budget`` in all.

    2 (4 + floor(3 ln D)) (two CMA-ES generations; 24 for D = 15), at most a fifth of the
    budget: least squares needs D + 1 rollouts per iteration, and on the real recording its
    iterations, not many global samples, bring the error down (fingers_j123.yaml, 150
    rollouts: 12, 24 and 36 global evaluations measured; benchmarks/calibrate_real_hand.py).
    When what is left is too little for one least-squares iteration (D + 2), the global phase
    gets the whole budget (``Calibration.run``).
    """
    return int(min(2 * (4 + np.floor(3 * np.log(max(dimensions, 1)))), budget // 5))


@dataclass
class Evaluation:
    """One scored point: index, batch, values (D,), objective (rad^2), per-joint MSE,
    wall time (s), phase (the optimiser that asked for it: e.g. 'random', 'lsq') and the number
    of points of its batch."""

    index: int
    batch: int
    x: list[float]
    objective: float
    per_joint_mse: dict[str, float]
    wall_time: float
    phase: str = ''
    batch_size: int = 0


@dataclass
class CalibrationResult:
    """Outcome: the default model's score, every evaluation, the best one, timings (s).

    ``least_squares``: the local phase's result (its last Jacobian serves the
    identifiability analysis; of two, the lower), None without one or when a finished run was resumed.
    ``phase_log``: the phases in run order, each {'phase', 'why', 'ran', 'evaluations', 'first'
    (index of its first evaluation), 'best' (rad^2, None when it ran none), and for least squares
    'ended' ('converged', 'budget' or 'stopped') and 'status'}: which phases ran and why.
    """

    initial: Score
    evaluations: list[Evaluation]
    best: Evaluation
    wall_time: float
    optimiser_time: float
    simulation_time: float
    resumed_evaluations: int = 0
    settings: dict = field(default_factory=dict)
    least_squares: LeastSquaresResult | None = None
    phase_log: list[dict] = field(default_factory=list)

    def phase_summary(self) -> dict[str, dict]:
        """{phase: {'evaluations': n, 'best': lowest objective (rad^2)}} in run order."""
        out: dict[str, dict] = {}
        for ev in self.evaluations:
            entry = out.setdefault(ev.phase or 'unknown', {'evaluations': 0, 'best': float('inf')})
            entry['evaluations'] += 1
            entry['best'] = min(entry['best'], ev.objective)
        return out
