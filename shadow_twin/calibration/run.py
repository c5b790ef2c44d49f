"""A calibration run: ask/tell loop, checkpoint after every evaluation, resume.

The checkpoint (``checkpoint.jsonl`` in the output directory) holds one JSON
line per evaluation, appended and fsync'ed as soon as it is scored, after a
header line naming the run's inputs and settings. ``resume`` rebuilds the
optimiser by replaying the recorded batches (ask, compare, tell), so a run
interrupted at any point continues exactly where it stopped, with the same
result as an uninterrupted run with the same seed.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from shadow_twin.calibration.evaluation import Evaluator, Score
from shadow_twin.calibration.optimisers import OPTIMISERS, make_optimiser
from shadow_twin.calibration.search_space import SearchSpace
from shadow_twin.common.errors import ConfigError
from shadow_twin.common.files import write_text_atomic

log = logging.getLogger(__name__)
CHECKPOINT = 'checkpoint.jsonl'


@dataclass
class CalibrationSettings:
    """Optimiser settings.

    Attributes:
        optimizer: 'bo', 'random', 'pso' or 'cmaes'.
        budget: number of evaluations (the default model's is extra).
        workers: evaluations simulated in parallel (threads in ``mujoco.rollout``).
        batch_size: points asked per batch (default: ``workers``).
        seed: random seed.
        n_initial_points: BO Latin-hypercube design size (default max(10, 2 D)).
        acq_func: BO acquisition ('gp_hedge' or 'EI', ...).
        log_objective: BO models log(objective) (see ``optimisers.BayesianOptimiser``).
    """

    optimizer: str = 'bo'
    budget: int = 150
    workers: int = 2
    batch_size: int | None = None
    seed: int = 0
    n_initial_points: int | None = None
    acq_func: str = 'gp_hedge'
    log_objective: bool = False

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMISERS:
            raise ConfigError(f'unknown optimizer {self.optimizer!r}; use one of {OPTIMISERS}')
        if self.budget < 1 or self.workers < 1 or (self.batch_size is not None and self.batch_size < 1):
            raise ConfigError(f'budget, workers and batch size must be at least 1, got budget {self.budget}, '
                              f'workers {self.workers}, batch size {self.batch_size}')

    @property
    def batch(self) -> int:
        return self.batch_size or self.workers


@dataclass
class Evaluation:
    """One scored point: index, batch, values (D,), objective (rad^2), per-joint MSE."""

    index: int
    batch: int
    x: list[float]
    objective: float
    per_joint_mse: dict[str, float]
    wall_time: float


@dataclass
class CalibrationResult:
    """Outcome: the default model's score, every evaluation, the best one, timings (s)."""

    initial: Score
    evaluations: list[Evaluation]
    best: Evaluation
    wall_time: float
    optimiser_time: float
    simulation_time: float
    resumed_evaluations: int = 0
    settings: dict = field(default_factory=dict)


class Calibration:
    """Run an optimiser over ``space`` against ``evaluator``, checkpointing into ``out_dir``.

    Args:
        evaluator: scores parameter sets.
        space: the search space.
        settings: optimiser settings.
        out_dir: output directory (the checkpoint lives here).
        run_info: JSON-able description of the inputs (hashes, paths); a resumed
            run must match it.
        resume: continue from an existing checkpoint.
    Raises:
        ConfigError: a checkpoint exists and ``resume`` is False; ``resume`` with
        a checkpoint of a different run.
    """

    def __init__(self, evaluator: Evaluator, space: SearchSpace, settings: CalibrationSettings,
                 out_dir: str | Path, run_info: dict | None = None, resume: bool = False) -> None:
        self.evaluator, self.space, self.settings = evaluator, space, settings
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
        lines = self.checkpoint.read_text().splitlines()
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
        if last is not None and sizes[last] < self.settings.batch:
            evaluations = [ev for ev in evaluations if ev.batch != last]
        return evaluations

    def run(self, progress: Callable[[int, int, float], None] | None = None) -> CalibrationResult:
        """Evaluate the model as given, then ``budget`` points; returns the result.

        ``progress(done, budget, best_objective)`` is called after each batch.
        """
        s = self.settings
        started = time.perf_counter()
        initial = self.evaluator.evaluate([{}])[0]  # the model as given
        n_init = s.n_initial_points or max(10, 2 * len(self.space.dimensions))
        options = ({'n_initial_points': n_init, 'acq_func': s.acq_func, 'log_objective': s.log_objective}
                   if s.optimizer == 'bo' else {})
        optimiser = make_optimiser(s.optimizer, self.space, s.seed, **options)
        evaluations: list[Evaluation] = []
        optimiser_time = simulation_time = 0.0
        replay = list(self.previous)
        if not self.resume or not self.checkpoint.exists() or not replay:
            self._write_header()
        else:
            self._rewrite(replay)
        batch_index = 0
        while len(evaluations) < s.budget:
            n = min(s.batch, s.budget - len(evaluations))
            t0 = time.perf_counter()
            points = optimiser.ask(n)
            n = len(points)  # a population method may end its generation early
            optimiser_time += time.perf_counter() - t0
            if replay:
                done, replay = replay[:n], replay[n:]
                if len(done) == n:
                    points = np.array([e.x for e in done])
                    self._tell(optimiser, points, [e.objective for e in done])
                    evaluations.extend(done)
                    batch_index += 1
                    continue
                replay = []  # a partial batch: re-evaluate it whole
            t0 = time.perf_counter()
            scores = self.evaluator.evaluate([self.space.values(p) for p in points], nthread=s.workers)
            simulation_time += time.perf_counter() - t0
            now = time.perf_counter() - started
            for p, score in zip(points, scores):
                ev = Evaluation(len(evaluations), batch_index, [float(v) for v in p],
                                score.objective, score.per_joint_mse, now)
                evaluations.append(ev)
                self._append(ev)
            t0 = time.perf_counter()
            self._tell(optimiser, points, [sc.objective for sc in scores])
            optimiser_time += time.perf_counter() - t0
            batch_index += 1
            if progress:
                progress(len(evaluations), s.budget, min(e.objective for e in evaluations))
        best = min(evaluations, key=lambda e: e.objective)
        return CalibrationResult(initial, evaluations, best, time.perf_counter() - started,
                                 optimiser_time, simulation_time, len(self.previous), asdict(s))

    @staticmethod
    def _tell(optimiser, points, objectives) -> None:
        optimiser.tell(np.asarray(points), objectives)

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
