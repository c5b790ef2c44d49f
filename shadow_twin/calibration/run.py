"""A calibration run: optimiser phases, checkpoint after every evaluation, resume.

An optimiser (``CalibrationSettings.optimizer``) runs in up to two phases that share one
budget of rollouts (one rollout = one simulated parameter set = one evaluation):

* a global phase with an ask/tell optimiser (``bo``, ``random``, ``pso``, ``cmaes``);
* a local phase, box-constrained least squares on the residual vector
  (:func:`~shadow_twin.calibration.least_squares.fit_least_squares`), from the model
  defaults (``lsq``) or from the best point of the global phase (``<global>+lsq``).
  When least squares has converged with budget left, the global optimiser gets the rest.

The checkpoint (``checkpoint.jsonl`` in the output directory) holds one JSON
line per evaluation (global phase and least squares alike, Jacobian columns included),
appended and fsync'ed as soon as its batch is scored, after a header line naming the
run's inputs and settings. ``resume`` replays the recorded batches: an ask/tell optimiser
is told them again; least squares, which needs whole residual vectors, asks for the same
points again (it is deterministic) and gets their residuals by simulating them again,
which must reproduce the recorded objectives. A run interrupted at any point so continues
exactly where it stopped, with the same result as an uninterrupted run with the same seed.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from shadow_twin.calibration.evaluation import Evaluator, Score
from shadow_twin.calibration.least_squares import LeastSquaresResult, fit_least_squares
from shadow_twin.calibration.optimisers import OPTIMISERS, make_optimiser, phases
from shadow_twin.calibration.search_space import SearchSpace
from shadow_twin.common.errors import ConfigError
from shadow_twin.common.files import write_text_atomic

log = logging.getLogger(__name__)
CHECKPOINT = 'checkpoint.jsonl'
#: Default optimiser: a global phase (with the default split: BO's Latin-hypercube design),
#: then a least-squares polish from its best point. Chosen on the real recording
#: (benchmarks/calibrate_real_hand.py, fingers_j123.yaml, 150 rollouts, seeds 0-7): bo+lsq
#: ended at 0.000432-0.000450 rad^2; cmaes+lsq lower on half the seeds (0.000429-0.000489) but
#: at 0.000813 on one (its best global point had lowered J1's upper range limit to 1.51 rad, and
#: least squares stalled there); random+lsq at 0.000432-0.000467. Least squares alone (from the
#: model defaults) ends at 0.000433 there: on this recording the defaults are the better start.
DEFAULT_OPTIMIZER = 'bo+lsq'


@dataclass
class CalibrationSettings:
    """Optimiser settings.

    Attributes:
        optimizer: one of ``optimisers.OPTIMISERS``: 'bo', 'random', 'pso', 'cmaes' (ask/tell),
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
        global_budget: evaluations of the global phase of a '<global>+lsq' optimiser
            (default: :func:`default_global_budget`).
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

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMISERS:
            raise ConfigError(f'unknown optimizer {self.optimizer!r}; use one of {OPTIMISERS}')
        if self.budget < 1 or self.workers < 1 or (self.batch_size is not None and self.batch_size < 1):
            raise ConfigError(f'budget, workers and batch size must be at least 1, got budget {self.budget}, '
                              f'workers {self.workers}, batch size {self.batch_size}')
        if self.global_budget is not None and self.global_budget < 0:
            raise ConfigError(f'global budget must be at least 0, got {self.global_budget}')

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
    identifiability analysis), None without one or when a finished run was resumed.
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

    def phase_summary(self) -> dict[str, dict]:
        """{phase: {'evaluations': n, 'best': lowest objective (rad^2)}} in run order."""
        out: dict[str, dict] = {}
        for ev in self.evaluations:
            entry = out.setdefault(ev.phase or 'unknown', {'evaluations': 0, 'best': float('inf')})
            entry['evaluations'] += 1
            entry['best'] = min(entry['best'], ev.objective)
        return out


class Calibration:
    """Run an optimiser over ``space`` against ``evaluator``, checkpointing into ``out_dir``.

    Args:
        evaluator: scores parameter sets (least squares also needs its
            ``evaluate_scored_residuals``).
        space: the search space.
        settings: optimiser settings.
        out_dir: output directory (the checkpoint lives here).
        run_info: JSON-able description of the inputs (hashes, paths); a resumed
            run must match it.
        resume: continue from an existing checkpoint.
    Raises:
        ConfigError: a checkpoint exists and ``resume`` is False; ``resume`` with
        a checkpoint of a different run; least squares with an evaluator without residuals.
    """

    def __init__(self, evaluator: Evaluator, space: SearchSpace, settings: CalibrationSettings,
                 out_dir: str | Path, run_info: dict | None = None, resume: bool = False) -> None:
        self.evaluator, self.space, self.settings = evaluator, space, settings
        self.global_name, self.local = phases(settings.optimizer)
        if self.local and not hasattr(evaluator, 'evaluate_scored_residuals'):
            raise ConfigError(f'optimizer {settings.optimizer!r} needs residual vectors, which '
                              f'{type(evaluator).__name__} does not give')
        self.out_dir = Path(out_dir)
        self.checkpoint = self.out_dir / CHECKPOINT
        self.header = {'run': run_info or {}, 'settings': asdict(settings), 'space': space.to_dict()}
        self.header['settings'].pop('workers')  # may change between resumes, and so may
        self.header['settings'].pop('budget')   # the budget; the batch size may not:
        self.header['settings']['batch_size'] = settings.batch
        self.resume = resume
        self.previous = self._load() if resume else []
        if not resume and self.checkpoint.exists():
            raise ConfigError(f'{self.out_dir} holds an earlier calibration ({CHECKPOINT}); '
                              f'pass --resume to continue it or choose another --out')

    def _load(self) -> list[Evaluation]:
        if not self.checkpoint.exists():
            return []
        try:
            lines = self.checkpoint.read_bytes().decode('utf-8').splitlines()
        except UnicodeDecodeError as exc:
            raise ConfigError(f'{self.checkpoint}: not a calibration checkpoint (byte {exc.start} is not '
                              f'UTF-8 text); use another --out') from None
        except OSError as exc:
            raise ConfigError(f'{self.checkpoint}: cannot read it ({exc.strerror or exc})') from None
        try:
            header = json.loads(lines[0])
        except (IndexError, json.JSONDecodeError):
            raise ConfigError(f'{self.checkpoint}: unreadable checkpoint header') from None
        if header != json.loads(json.dumps(self.header)):
            raise ConfigError(f'{self.checkpoint}: belongs to a run with other inputs or settings; '
                              f'use another --out')
        evaluations = []
        for line in lines[1:]:
            try:
                evaluations.append(Evaluation(**json.loads(line)))
            except (json.JSONDecodeError, TypeError):
                break  # a line cut by a crash: everything after it is redone
        # Keep whole batches only: a batch cut short by a crash is evaluated again.
        sizes: dict[int, int] = {}
        for ev in evaluations:
            sizes[ev.batch] = sizes.get(ev.batch, 0) + 1
        last = max(sizes) if sizes else None
        if last is not None:
            expected = evaluations[-1].batch_size or self.settings.batch
            if sizes[last] < expected:
                evaluations = [ev for ev in evaluations if ev.batch != last]
        return evaluations

    def run(self, progress: Callable[[int, int, float], None] | None = None) -> CalibrationResult:
        """Evaluate the model as given, then ``budget`` points; returns the result.

        ``progress(done, budget, best_objective)`` is called after each batch.
        """
        s = self.settings
        self._started = time.perf_counter()
        self._progress = progress
        initial = self.evaluator.evaluate([{}])[0]  # the model as given
        self._evaluations: list[Evaluation] = []
        self._optimiser_time = self._simulation_time = 0.0
        self._resumed = 0
        self._batch_index = 0
        self._replay = list(self.previous)
        if not self.resume or not self.checkpoint.exists() or not self._replay:
            self._write_header()
        else:
            self._rewrite(self._replay)
        lsq, self._optimiser = None, None
        if len(self._replay) >= s.budget:  # a finished run: nothing to simulate or optimise
            self._evaluations, self._resumed = self._replay[:s.budget], s.budget
        else:
            d = len(self.space.dimensions)
            if self.global_name:
                n_global = s.budget if not self.local else (
                    s.global_budget if s.global_budget is not None else default_global_budget(s.budget, d))
                if s.budget - n_global < d + 2:  # too little for one least-squares iteration
                    n_global = s.budget
                self._ask_tell(n_global)
            if self.local and len(self._evaluations) < s.budget:
                lsq = self._least_squares(s.budget - len(self._evaluations))
            if self.global_name and len(self._evaluations) < s.budget:
                # least squares converged early: the global optimiser explores with what is left
                self._ask_tell(s.budget - len(self._evaluations))
        best = min(self._evaluations, key=lambda e: e.objective)
        return CalibrationResult(initial, self._evaluations, best, time.perf_counter() - self._started,
                                 self._optimiser_time, self._simulation_time, self._resumed, asdict(s), lsq)

    # -- phases ------------------------------------------------------------------------------
    def _ask_tell(self, budget: int) -> None:
        """``budget`` evaluations of the ask/tell optimiser, in batches (it keeps its state
        between calls: the global phase, then what least squares left)."""
        s = self.settings
        if self._optimiser is None:
            options = {}
            if self.global_name == 'bo':
                n_init = s.n_initial_points or max(10, 2 * len(self.space.dimensions))
                options = {'n_initial_points': n_init, 'acq_func': s.acq_func, 'log_objective': s.log_objective}
            self._optimiser = make_optimiser(self.global_name, self.space, s.seed, **options)
        optimiser, done = self._optimiser, 0
        while done < budget:
            t0 = time.perf_counter()
            points = optimiser.ask(min(s.batch, budget - done))  # a population method may end
            self._optimiser_time += time.perf_counter() - t0      # its generation early
            batch, _ = self._evaluate(points, self.global_name, residuals=False)
            t0 = time.perf_counter()
            optimiser.tell(np.array([e.x for e in batch]), [e.objective for e in batch])
            self._optimiser_time += time.perf_counter() - t0
            done += len(batch)

    def _least_squares(self, budget: int) -> LeastSquaresResult:
        """The local phase: least squares from the best point so far (the model defaults,
        clipped into the bounds, when there is none)."""
        if self._evaluations:
            x0 = np.array(min(self._evaluations, key=lambda e: e.objective).x)
        else:
            x0 = self.space.defaults
        t0 = time.perf_counter()
        simulated = self._simulation_time
        result = fit_least_squares(lambda points: self._evaluate(points, 'lsq', residuals=True)[1],
                                   self.space, x0, budget)
        self._optimiser_time += time.perf_counter() - t0 - (self._simulation_time - simulated)
        return result

    # -- evaluations, checkpoint and replay --------------------------------------------------
    def _evaluate(self, points: np.ndarray, phase: str,
                  residuals: bool) -> tuple[list[Evaluation], np.ndarray | None]:
        """Score one batch: from the checkpoint when it holds it, else by simulation.

        Returns the batch's evaluations and, with ``residuals``, their (M, R) residuals.
        An ask/tell phase takes the recorded points of a replayed batch; least squares
        must ask for exactly the recorded points, else the rest of the checkpoint is dropped.
        """
        points = np.atleast_2d(np.asarray(points, dtype=float))
        n = len(points)
        if self._replay:
            done = self._replay[:n]
            same = len(done) == n and (not residuals or all(
                np.array_equal(np.asarray(e.x), p) for e, p in zip(done, points)))
            if same:
                self._replay = self._replay[n:]
                return done, self._replayed(done, residuals)
            log.info('the checkpoint diverges from the run after %d evaluations; going on from there',
                     len(self._evaluations))
            self._replay = []
            self._rewrite(self._evaluations)
        values = [self.space.values(p) for p in points]
        t0 = time.perf_counter()
        if residuals:
            scores, res = self.evaluator.evaluate_scored_residuals(values, nthread=self.settings.workers)
        else:
            scores, res = self.evaluator.evaluate(values, nthread=self.settings.workers), None
        self._simulation_time += time.perf_counter() - t0
        now = time.perf_counter() - self._started
        batch = []
        for p, score in zip(points, scores):
            ev = Evaluation(len(self._evaluations), self._batch_index, [float(v) for v in p],
                            score.objective, score.per_joint_mse, now, phase, n)
            self._evaluations.append(ev)
            self._append(ev)
            batch.append(ev)
        self._batch_done()
        return batch, res

    def _replayed(self, done: Sequence[Evaluation], residuals: bool) -> np.ndarray | None:
        """Take a recorded batch; with ``residuals``, simulate it again for its residual vectors."""
        self._evaluations.extend(done)
        self._resumed += len(done)
        res = None
        if residuals:
            t0 = time.perf_counter()
            scores, res = self.evaluator.evaluate_scored_residuals([self.space.values(e.x) for e in done],
                                                                   nthread=self.settings.workers)
            self._simulation_time += time.perf_counter() - t0
            for e, score in zip(done, scores):
                if not np.isclose(e.objective, score.objective, rtol=1e-9, atol=0.0):
                    log.warning('evaluation %d scores %.9g again, %.9g in the checkpoint: the resumed run may '
                                'differ from an uninterrupted one', e.index, score.objective, e.objective)
        self._batch_done()
        return res

    def _batch_done(self) -> None:
        self._batch_index += 1
        if self._progress:
            self._progress(len(self._evaluations), self.settings.budget,
                           min(e.objective for e in self._evaluations))

    def _write_header(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with open(self.checkpoint, 'w') as handle:
            handle.write(json.dumps(self.header) + '\n')
            handle.flush()
            os.fsync(handle.fileno())

    def _rewrite(self, evaluations: list[Evaluation]) -> None:
        """Drop a line cut by a crash: rewrite header + complete evaluations atomically."""
        lines = [json.dumps(self.header)] + [json.dumps(asdict(e)) for e in evaluations]
        write_text_atomic(self.checkpoint, '\n'.join(lines) + '\n')

    def _append(self, evaluation: Evaluation) -> None:
        with open(self.checkpoint, 'a') as handle:
            handle.write(json.dumps(asdict(evaluation)) + '\n')
            handle.flush()
            os.fsync(handle.fileno())
