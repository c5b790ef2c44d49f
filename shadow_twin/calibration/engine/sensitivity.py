"""Sensitivity screening: which parameters of a search space move the objective.

The method of the published MiR250 + UR5 digital-twin study: draw N parameter sets
uniformly in the search space, score each against the real recording(s), and take
as each parameter's *influence index* the Pearson correlation coefficient between the
parameter and the objective over the N samples,

    r_d = sum_i (u_id - mean(u_d)) (f_i - mean(f)) / sqrt(sum_i (u_id - mean(u_d))^2 sum_i (f_i - mean(f))^2),

in [-1, 1] (numpy ``corrcoef``). ``u_id`` is sample i of parameter d in its search scale
(the unit-cube coordinate of :meth:`SearchSpace.to_unit`, linear in the value, or in its
logarithm for a log-scale dimension; Pearson's r does not change under that affine map),
``f_i`` the objective (rad^2). Positive: raising the parameter raises the error. Near 0:
no linear effect over the space (a parameter with a U-shaped effect also scores near 0,
a limit of the method).

Rules: samples whose objective is not finite (a simulation that diverged) are left out of
the correlation (counted in the summary). A constant objective over the remaining samples
(no parameter changes it), or fewer than 3 of them, gives every parameter the index 0,
with a warning. Samples are drawn as the ``random`` optimiser draws them (``RandomSearch``:
``numpy.random.default_rng(seed)`` in the unit cube, mapped with :meth:`SearchSpace.from_unit`), so
a seed reproduces them.

Library use: :func:`screen`, then :func:`write_sensitivity` (``sensitivity.json`` and
``tornado.png``). Command line: ``shadow-twin sensitivity`` and ``calibrate --screen K``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from shadow_twin.calibration.engine.executor import LocalExecutor
from shadow_twin.calibration.search.optimisers import RandomSearch
from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.common.errors import ConfigError
from shadow_twin.common.files import write_text_atomic
from shadow_twin.plots.sensitivity import plot_tornado

log = logging.getLogger(__name__)
SENSITIVITY_JSON = 'sensitivity.json'
TORNADO_PNG = 'tornado.png'
#: Fewest samples a screening takes (a correlation of 2 points is always +/-1).
MIN_SAMPLES = 3


def draw_samples(space: SearchSpace, n: int, seed: int = 0) -> np.ndarray:
    """(n, D) parameter sets drawn uniformly in ``space`` (uniform in the log for log-scale
    dimensions), seeded. Raises ConfigError for n < :data:`MIN_SAMPLES`."""
    if n < MIN_SAMPLES:
        raise ConfigError(f'a sensitivity screening needs at least {MIN_SAMPLES} samples, got {n}')
    return RandomSearch(space, seed).ask(n)


def influence_indices(unit: np.ndarray, objectives: np.ndarray) -> np.ndarray:
    """(D,) Pearson correlation of each column of ``unit`` (N, D) with ``objectives`` (N,).

    Non-finite objectives are left out; a constant objective (or fewer than 3 finite
    samples) gives zeros, with a warning, and so does a constant column for its parameter.
    """
    unit, objectives = np.atleast_2d(np.asarray(unit, dtype=float)), np.asarray(objectives, dtype=float)
    keep = np.isfinite(objectives)
    u, f = unit[keep], objectives[keep]
    out = np.zeros(unit.shape[1])
    if f.size < MIN_SAMPLES:
        log.warning('sensitivity: only %d of %d samples have a finite objective; every influence index is 0',
                    f.size, objectives.size)
        return out
    if np.ptp(f) == 0:
        log.warning('sensitivity: the objective is the same (%.6g rad^2) for every sample: no parameter moves '
                    'it; every influence index is 0', f[0])
        return out
    for d in range(unit.shape[1]):
        if np.ptp(u[:, d]) > 0:
            out[d] = float(np.corrcoef(u[:, d], f)[0, 1])
    return np.clip(out, -1.0, 1.0)


@dataclass
class SensitivityResult:
    """Outcome of a screening.

    Attributes:
        space: the screened search space.
        samples: (N, D) parameter sets, the attributes' units.
        objectives: (N,) objective of each, rad^2 (NaN/inf where a simulation failed).
        influence: {parameter: Pearson r in [-1, 1]}, in the space's order.
        seed: random seed of the draw.
        objective_joints: joints the objective averages.
        wall_time: s spent simulating and scoring.
    """

    space: SearchSpace
    samples: np.ndarray
    objectives: np.ndarray
    influence: dict[str, float]
    seed: int = 0
    objective_joints: list[str] = field(default_factory=list)
    wall_time: float = 0.0

    def ranking(self) -> list[str]:
        """Parameter names by decreasing |influence index| (ties keep the space's order)."""
        return ranking(self.influence)

    def most_influential(self, k: int) -> list[str]:
        """See :func:`most_influential`."""
        return most_influential(self.influence, k)

    def summary(self) -> dict:
        """Objective statistics over the finite samples (rad^2) and the count of the others."""
        finite = self.objectives[np.isfinite(self.objectives)]
        stats = ({'min': float(finite.min()), 'median': float(np.median(finite)), 'mean': float(finite.mean()),
                  'max': float(finite.max()), 'std': float(finite.std())} if finite.size else {})
        return {'unit': 'rad^2', 'joints': list(self.objective_joints), **stats,
                'non_finite': int(self.objectives.size - finite.size),
                'constant': bool(finite.size > 0 and np.ptp(finite) == 0)}

    def to_dict(self) -> dict:
        """JSON-ready document: influence (sorted by |index|), ranking, samples, objective summary."""
        return {
            'influence': {name: self.influence[name] for name in self.ranking()},
            'ranking': self.ranking(),
            'method': 'Pearson correlation of each parameter (search scale) with the objective over '
                      'uniform samples',
            'samples': int(self.objectives.size),
            'seed': self.seed,
            'objective': self.summary(),
            'search_space': self.space.to_dict(),
            'draws': [{**self.space.named(x), 'objective': _json_number(f)}
                      for x, f in zip(self.samples, self.objectives)],
            'wall_time_s': self.wall_time,
        }


def ranking(influence: Mapping[str, float]) -> list[str]:
    """Names of ``influence`` by decreasing |index| (ties keep the given order)."""
    return sorted(influence, key=lambda name: -abs(influence[name]))


def most_influential(influence: Mapping[str, float], k: int, order: Sequence[str] | None = None) -> list[str]:
    """The ``k`` names with the largest |influence index|, in ``order`` (default: ``influence``'s).
    Raises ConfigError unless 1 <= k <= the number of parameters."""
    if not 1 <= k <= len(influence):
        raise ConfigError(f'--screen {k}: choose between 1 and the {len(influence)} parameters of the space')
    top = set(ranking(influence)[:k])
    return [name for name in (order or list(influence)) if name in top]


def _json_number(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def screen(evaluator, space: SearchSpace, samples: int, workers: int = 1, seed: int = 0,
           batch_size: int | None = None,
           progress: Callable[[int, int], None] | None = None, executor=None) -> SensitivityResult:
    """Draw ``samples`` parameter sets uniformly in ``space`` and score them with ``evaluator``
    (an Evaluator or EvaluatorSet: ``evaluate(list of {target: value}, nthread)``), in batches of
    ``batch_size`` (default ``workers``) simulated on ``workers`` threads.

    ``executor`` evaluates the batches (:mod:`~shadow_twin.calibration.engine.executor`; default:
    ``LocalExecutor(workers)``, this process's threads).
    ``progress(done, samples)`` is called after each batch. Raises ConfigError for fewer than
    :data:`MIN_SAMPLES` samples or fewer than 1 worker.
    """
    if workers < 1 or (batch_size is not None and batch_size < 1):
        raise ConfigError(f'workers and batch size must be at least 1, got {workers} and {batch_size}')
    executor = executor if executor is not None else LocalExecutor(workers)
    points = draw_samples(space, samples, seed)
    batch = batch_size or workers
    objectives = np.empty(samples)
    started = time.perf_counter()
    for start in range(0, samples, batch):
        chunk = points[start:start + batch]
        scores, _ = executor.evaluate(evaluator, [space.values(x) for x in chunk])
        objectives[start:start + len(chunk)] = [s.objective for s in scores]
        if progress:
            progress(start + len(chunk), samples)
    index = influence_indices(space.to_unit(points), objectives)
    return SensitivityResult(space, points, objectives, dict(zip(space.names, map(float, index))), seed,
                             list(getattr(evaluator, 'objective_joints', [])), time.perf_counter() - started)


def write_sensitivity(out_dir: str | Path, result: SensitivityResult,
                      extra: Mapping | None = None, title: str = '') -> dict:
    """Write ``sensitivity.json`` (:meth:`SensitivityResult.to_dict` plus ``extra``, e.g. the
    inputs) and ``tornado.png`` into ``out_dir``, atomically; returns the JSON document."""
    out_dir = Path(out_dir)
    doc = {**result.to_dict(), **dict(extra or {})}
    doc['outputs'] = {'tornado': TORNADO_PNG}
    plot_tornado(out_dir / TORNADO_PNG, result.influence,
                 title or f'Influence on the objective ({result.objectives.size} samples)')
    write_text_atomic(out_dir / SENSITIVITY_JSON, json.dumps(doc, indent=2) + '\n')
    return doc


def ranking_lines(influence: Mapping[str, float], kept: Sequence[str] = ()) -> list[str]:
    """Printable ranking: one line per parameter, by decreasing |index| (``*`` marks ``kept``)."""
    names = ranking(influence)
    width = max(len(n) for n in names)
    return [f'{k:3d}. {name:{width}s} {influence[name]:+.3f}{"  *" if name in kept else ""}'
            for k, name in enumerate(names, 1)]
