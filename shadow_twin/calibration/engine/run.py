"""A calibration run: optimiser phases, checkpoint after every evaluation, resume.

An optimiser (``CalibrationSettings.optimizer``) runs in phases that share one budget of
rollouts (one rollout = one simulated parameter set = one evaluation):

* a global phase with an ask/tell optimiser (``bo``, ``random``, ``pso``, ``cmaes``);
* a local phase, box-constrained least squares on the residual vector
  (:func:`~shadow_twin.calibration.search.least_squares.fit_least_squares`), from the model
  defaults (``lsq``) or from the best point of the global phase (``<global>+lsq``).
  When least squares has converged with budget left, the global optimiser gets the rest.
* ``auto`` (the default): least squares from the model as given first, then the global
  phase only when :func:`~shadow_twin.calibration.search.optimisers.global_phase_reasons` gives a
  reason (on a bound, stalled, the model outside the space) and least squares again from its
  best point; least squares gives up at half the budget when it has stalled, and the run ends
  when least squares has converged, with the rest of the budget unspent.

Which phases ran and why is in ``CalibrationResult.phase_log`` (report.json ``phase_log``).

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
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from shadow_twin.calibration.scoring.evaluation import Evaluator
from shadow_twin.calibration.engine.executor import LocalExecutor
from shadow_twin.calibration.search.least_squares import DEFAULT_METHOD, LeastSquaresResult, fit_least_squares
from shadow_twin.calibration.search.optimisers import (AUTO, AUTO_LEAST_SQUARES, CONVERGED_GAIN, STALL_FRACTION,
                                                       global_phase_reasons, make_optimiser, phases, share_of, stalled)
from shadow_twin.calibration.engine.run_settings import (DEFAULT_OPTIMIZER, CalibrationResult, CalibrationSettings,
                                                         Evaluation, default_global_budget)
from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.common.errors import ConfigError
from shadow_twin.common.files import write_text_atomic

__all__ = ['CHECKPOINT', 'DEFAULT_OPTIMIZER', 'Calibration', 'CalibrationResult', 'CalibrationSettings', 'Evaluation',
           'default_global_budget']   # the settings and results live in run_settings.py
log = logging.getLogger(__name__)
CHECKPOINT = 'checkpoint.jsonl'
#: The least-squares engines by ``fit_least_squares`` method, as the phase log names them.
ENGINES = {'mujoco': 'mujoco.minimize', 'scipy': "scipy's trf"}


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
        executor: evaluates the batches (:mod:`~shadow_twin.calibration.engine.executor`; default:
            ``LocalExecutor(settings.workers)``, this process's threads).
    Raises:
        ConfigError: a checkpoint exists and ``resume`` is False; ``resume`` with
        a checkpoint of a different run; least squares with an evaluator without residuals.
    """

    def __init__(self, evaluator: Evaluator, space: SearchSpace, settings: CalibrationSettings,
                 out_dir: str | Path, run_info: dict | None = None, resume: bool = False, executor=None) -> None:
        self.evaluator, self.space, self.settings = evaluator, space, settings
        self.executor = executor if executor is not None else LocalExecutor(settings.workers)
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
        if settings.diff_step is None:          # as the header was before the setting: older checkpoints resume
            self.header['settings'].pop('diff_step')
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
        except (IndexError, json.JSONDecodeError, RecursionError):
            raise ConfigError(f'{self.checkpoint}: unreadable checkpoint header') from None
        if header != json.loads(json.dumps(self.header)):
            raise ConfigError(f'{self.checkpoint}: belongs to a run with other inputs or settings; '
                              f'use another --out')
        evaluations = []
        for line in lines[1:]:
            try:
                evaluations.append(Evaluation(**json.loads(line)))
            except (json.JSONDecodeError, TypeError, RecursionError):
                break  # a line cut by a crash (or garbled): everything after it is redone
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
        self._initial = initial.objective
        self._evaluations: list[Evaluation] = []
        self._optimiser_time = self._simulation_time = 0.0
        self._resumed = 0
        self._batch_index = 0
        self._replay = list(self.previous)
        if not self.resume or not self.checkpoint.exists() or not self._replay:
            self._write_header()
        else:
            self._rewrite(self._replay)
        lsq, self._optimiser, self._phase_log = None, None, []
        if len(self._replay) >= s.budget:  # a finished run: nothing to simulate or optimise
            self._evaluations, self._resumed = self._replay[:s.budget], s.budget
        elif s.optimizer == AUTO:
            lsq = self._auto()
        else:
            d = len(self.space.dimensions)
            if self.global_name:
                n_global = s.budget if not self.local else (
                    s.global_budget if s.global_budget is not None else default_global_budget(s.budget, d))
                if s.budget - n_global < d + 2:  # too little for one least-squares iteration
                    n_global = s.budget
                self._ask_tell(n_global, f'optimizer {s.optimizer}: the global phase' +
                               (' first' if self.local else ''))
            if self.local and len(self._evaluations) < s.budget:
                lsq = self._least_squares(s.budget - len(self._evaluations),
                                          f'optimizer {s.optimizer}: least squares from ' +
                                          ('the global phase\'s best point' if self.global_name else
                                           'the model as given (clipped into the space)'))
            if self.global_name and len(self._evaluations) < s.budget:
                self._ask_tell(s.budget - len(self._evaluations), 'least squares converged with budget left')
        best = min(self._evaluations, key=lambda e: e.objective)
        return CalibrationResult(initial, self._evaluations, best, time.perf_counter() - self._started,
                                 self._optimiser_time, self._simulation_time, self._resumed, asdict(s), lsq,
                                 self._phase_log)

    # -- phases ------------------------------------------------------------------------------
    def _auto(self) -> LeastSquaresResult | None:
        """The default rule (module doc); returns the better least-squares result (None without one)."""
        s, d = self.settings, len(self.space.dimensions)
        if s.budget < d + 2:
            self._ask_tell(s.budget, f'a budget of {s.budget} rollouts is too small for one least-squares '
                                     f'iteration ({d + 2}): the global phase alone')
            return None
        start, seen, stopped_stalled = self._initial, [], []   # start: the model as given's objective

        def watch(used: int, best: float) -> str | None:
            """Stop least squares when it has converged for auto's purpose, or stalled at half the budget."""
            before = [b for u, b in seen if u <= used - (d + 1)]
            seen.append((used, best))
            if before and not best < (1 - CONVERGED_GAIN) * before[-1]:
                return (f'converged: the last {d + 1} rollouts lowered the objective by less than '
                        f'{100 * CONVERGED_GAIN:g} %')
            if used >= s.budget // 2 and stalled(best, start):
                stopped_stalled.append(used)
                return (f'stalled: {share_of(best, start)} of the model as given\'s objective after {used} '
                        f'rollouts (above {100 * STALL_FRACTION:g} % at half the budget)')
            return None
        first = self._least_squares(s.budget, 'least squares first, from the model as given (clipped into the space)',
                                    self.space.defaults, stop=watch, method=AUTO_LEAST_SQUARES[0])
        left = s.budget - len(self._evaluations)
        if first.ended == 'budget':
            self._skip(f'least squares spent the budget ({len(self._evaluations)} of {s.budget} rollouts)')
            return first
        reasons = global_phase_reasons(self.space, first.x, start, first.cost)
        if not reasons:
            if left > 0:
                self._skip(f'least squares converged ({first.cost:.4g} rad^2, {share_of(first.cost, start)} of '
                           f'the model as given\'s, inside the bounds): the {left} rollouts left are not spent')
            return first
        n_global = s.global_budget if s.global_budget is not None else default_global_budget(s.budget, d)
        if n_global < 1 or left < n_global + 2 * (d + 1):   # least squares again needs two iterations after it
            self._skip(f'{"; ".join(reasons)}; but the {left} rollouts left are too few for a global phase of '
                       f'{n_global} and two least-squares iterations after it ({n_global + 2 * (d + 1)})')
            if stopped_stalled and left >= d + 1:       # stopped for a global phase that cannot run: go on instead
                more = self._least_squares(left, 'least squares on from where it stalled (no room for a global '
                                           'phase)', np.array(first.x), method=AUTO_LEAST_SQUARES[0])
                return more if more.cost <= first.cost else first
            return first
        began = len(self._evaluations)
        self._ask_tell(n_global, '; '.join(reasons))
        x0 = np.array(min(self._evaluations[began:], key=lambda e: e.objective).x)
        second = self._least_squares(s.budget - len(self._evaluations), 'least squares again, from the global '
                                     'phase\'s best point', x0, method=AUTO_LEAST_SQUARES[1])
        return second if second.cost <= first.cost else first

    def _skip(self, why: str) -> None:
        """Log a global phase that does not run."""
        self._begin(self.global_name, why, ran=False)

    def _begin(self, phase: str, why: str, ran: bool = True) -> dict:
        """Append ``phase``'s entry to the phase log (see ``CalibrationResult.phase_log``) and log it."""
        entry = {'phase': phase, 'why': why, 'ran': ran, 'evaluations': 0, 'first': len(self._evaluations),
                 'best': None}
        self._phase_log.append(entry)
        log.info('%s phase%s: %s', phase, '' if ran else ' not run', why)
        return entry

    def _end(self, entry: dict) -> None:
        done = self._evaluations[entry['first']:]
        entry['evaluations'] = len(done)
        entry['best'] = min(e.objective for e in done) if done else None

    def _ask_tell(self, budget: int, why: str = '') -> None:
        """``budget`` evaluations of the ask/tell optimiser, in batches (it keeps its state
        between calls: the global phase, then what least squares left)."""
        s = self.settings
        entry = self._begin(self.global_name, why)
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
        self._end(entry)

    def _least_squares(self, budget: int, why: str = '', x0: np.ndarray | None = None,
                       stop: Callable[[int, float], str | None] | None = None,
                       method: str = DEFAULT_METHOD) -> LeastSquaresResult:
        """The local phase: least squares from ``x0`` (default: the best point so far; the model
        defaults, clipped into the bounds, when there is none); ``stop`` and ``method`` (its engine)
        as in ``fit_least_squares``."""
        if x0 is None:
            x0 = np.array(min(self._evaluations, key=lambda e: e.objective).x) if self._evaluations \
                else self.space.defaults
        entry = self._begin('lsq', f'{why}; engine {ENGINES[method]}')
        t0 = time.perf_counter()
        simulated = self._simulation_time
        result = fit_least_squares(lambda points: self._evaluate(points, 'lsq', residuals=True)[1],
                                   self.space, x0, budget, method=method, stop=stop,
                                   diff_step=self.settings.diff_step if method == 'scipy' else None,
                                   xtol=min(self.settings.diff_step) if self.settings.diff_step else None)
        self._optimiser_time += time.perf_counter() - t0 - (self._simulation_time - simulated)
        self._end(entry)
        entry.update(ended=result.ended, status=result.status)
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
        scores, res = self.executor.evaluate(self.evaluator, values, residuals)
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
            scores, res = self.executor.evaluate(self.evaluator, [self.space.values(e.x) for e in done], True)
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
