"""Simulate only what is compared (issue 39): the search's evaluator on the smallest model that gives the
objective joints (:mod:`shadow_twin.model.reduction`), built once per calibration.

Modes (``shadow-twin calibrate --reduce``, the node's ``reduce``):

* ``exact``: subtrees with no coupling to the objective joints are removed; the rollouts give the same
  objective as the whole model's (the equality is tested, to 1e-9). Any coupling keeps its subtree, and where
  everything couples the whole model runs (said in the log).
* ``auto`` (the default): also subtrees whose only coupling is their load, when that changes the objective of
  the model as given by at most :data:`LOAD_TOLERANCE` of it (measured here, one rollout each way, and said in
  the log); more, and the whole model runs. On the Shadow hand the other fingers hang from the wrist: without
  them the first finger's objective moves by 0.05 % of itself, each rollout costs a third.
* ``off``: the whole model.

Contact, equality and tendon couplings always keep their subtree (fingers in contact with an object or with
each other: nothing is removed between them). The report always scores the model as given and the best
parameters on the whole model; :func:`gap_line` compares the reduced search's best with that.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from shadow_twin.calibration.scoring.evaluation import Evaluator
from shadow_twin.calibration.scoring.evaluator_set import EvaluatorSet
from shadow_twin.common.errors import ConfigError
from shadow_twin.control.controller import SimController
from shadow_twin.model.reduction import Reduction, plan_reduction, reduced_spec

log = logging.getLogger(__name__)
MODES = ('auto', 'exact', 'off')
DEFAULT_MODE = 'auto'
#: ``auto`` keeps a load-coupled reduction when it moves the objective of the model as given by at most this
#: share of it.
LOAD_TOLERANCE = 0.005


@dataclass
class SearchModel:
    """What the search simulates: its evaluator (reduced, or the given one) and why.

    Attributes:
        evaluator: the search's evaluator (an :class:`Evaluator` or :class:`EvaluatorSet`).
        reduced: whether it runs on a reduced model.
        lines: one log line per recording: what was removed and kept, or why the whole model runs.
        rollout_s: {'full': s, 'reduced': s} per rollout of the model as given (measured on the first
            recording when a load coupling was checked; empty otherwise).
        objective_gap: (reduced - full) / full of the model as given's objective (load couplings only).
    """

    evaluator: Evaluator | EvaluatorSet
    reduced: bool
    lines: list[str]
    rollout_s: dict[str, float]
    objective_gap: float | None = None

    def short(self) -> str:
        """A few words for a progress bar: the search model's degrees of freedom against the whole model's."""
        parts = self.evaluator.parts if isinstance(self.evaluator, EvaluatorSet) else [self.evaluator]
        whole = parts[0].twin.model.nv
        if not self.reduced:
            return f'whole model, {whole} dofs'
        return f'reduced model, {"/".join(str(p.model.nv) for p in parts)} of {whole} dofs'

    def report(self) -> dict:
        """The report's ``search_model`` section (the caller adds the bests on each model)."""
        return {'reduced': self.reduced, 'models': self.lines, 'rollout_s': self.rollout_s,
                'objective_gap': self.objective_gap}


def _mjcf(evaluator: Evaluator, joints) -> list[str]:
    return [evaluator.controller.joint_map.to_mjcf(j) for j in joints]


def measure_gap(whole, small, nthread: int = 1) -> tuple[float, dict[str, float]]:
    """The model as given scored by ``whole`` and by ``small`` (an evaluator on a reduced or frozen model), one
    batch each: ((small - whole) / whole of the objective, {'full': s, 'reduced': s} each batch's wall time)."""
    t0 = time.perf_counter()
    full = whole.evaluate([{}], nthread)[0].objective
    t1 = time.perf_counter()
    reduced = small.evaluate([{}], nthread)[0].objective
    costs = {'full': t1 - t0, 'reduced': time.perf_counter() - t1}
    return ((reduced - full) / full if full > 0 else 0.0), costs


def _reduce_one(evaluator: Evaluator, mode: str) -> tuple[Evaluator, str, dict, float | None]:
    """(the evaluator for the search, its log line, rollout costs, objective gap) for one recording."""
    plan: Reduction = plan_reduction(evaluator.model, _mjcf(evaluator, evaluator.objective_joints),
                                     allow_load=mode == 'auto')
    if not plan.removed:
        return evaluator, f'{evaluator.label}: {plan.describe()}', {}, None
    model = reduced_spec(evaluator.twin.spec, plan).compile()
    controller = SimController(model, evaluator.controller.gains, evaluator.controller.joint_map)
    reduced = evaluator.on_model(model, controller)
    if plan.exact:
        return reduced, f'{evaluator.label}: {plan.describe()}', {}, None
    gap, costs = measure_gap(evaluator, reduced)
    if abs(gap) > LOAD_TOLERANCE:
        return evaluator, (f'{evaluator.label}: the whole model: removing {", ".join(plan.approximate)} (their '
                           f'load) moves the objective of the model as given by {100 * gap:+.2f} % '
                           f'(more than {100 * LOAD_TOLERANCE:g} %)'), costs, gap
    return reduced, (f'{evaluator.label}: {plan.describe()}; the objective of the model as given moves by '
                     f'{100 * gap:+.3f} % (within {100 * LOAD_TOLERANCE:g} %)'), costs, gap


def search_model(evaluator: Evaluator | EvaluatorSet, mode: str = DEFAULT_MODE) -> SearchModel:
    """The evaluator the search uses under ``mode`` (module doc); each decision is logged at INFO.

    Raises:
        ConfigError: an unknown mode.
    """
    if mode not in MODES:
        raise ConfigError(f'reduce {mode!r}: expected one of {", ".join(MODES)}')
    if mode == 'off':
        return SearchModel(evaluator, False, ['the whole model (reduce off)'], {})
    parts = evaluator.parts if isinstance(evaluator, EvaluatorSet) else [evaluator]
    results = [_reduce_one(p, mode) for p in parts]
    for _, line, _, _ in results:
        log.info('search model: %s', line)
    reduced = [r[0] for r in results]
    changed = any(r is not p for r, p in zip(reduced, parts))
    if isinstance(evaluator, EvaluatorSet):
        search = EvaluatorSet(reduced, evaluator.recording_weights) if changed else evaluator
    else:
        search = reduced[0]
    gaps = [r[3] for r in results if r[3] is not None]
    return SearchModel(search, changed, [r[1] for r in results], next((r[2] for r in results if r[2]), {}),
                       max(gaps, key=abs) if gaps else None)


def gap_line(search_best: float, full_best: float) -> str:
    """One line comparing the search's best objective with the whole model's at the same parameters (rad^2)."""
    return (f'the search\'s best {search_best:.6g} rad^2 on the reduced model, {full_best:.6g} rad^2 on the whole '
            f'model ({100 * (search_best - full_best) / full_best:+.3f} %)')
