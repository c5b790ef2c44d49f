"""Several recordings scored as one: :class:`EvaluatorSet`, the weighted mean of their scores.

A calibration of several recordings (``--bag a,b``, the cell protocol's runs) fits one set of
parameters to all of them; the set has the batch interface of one
:class:`~shadow_twin.calibration.scoring.evaluation.Evaluator`.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from shadow_twin.calibration.scoring.evaluation import Evaluator, Score
from shadow_twin.model.calibratable import ParameterTarget


class EvaluatorSet:
    """Several recordings scored together: the objective is the weighted mean of their objectives.

    Has the interface of :class:`Evaluator` that a :class:`~shadow_twin.calibration.engine.run.Calibration`
    and the report use (``evaluate``, ``objective_joints``, ``weights``, ``settings``,
    ``parts``). Per-joint MSE (rad^2) is the weighted mean over the recordings that compare
    the joint. ``weights`` stays the per-joint weights of that interface; the recordings'
    weights are ``recording_weights``.

    Args:
        parts: evaluators of the same model and controller (at least one).
        recording_weights: (len(parts),) weight of each recording's objective, finite and > 0
            (default: equal). Only their ratios matter: objective = sum(w_k f_k) / sum(w_k).
    Raises:
        ValueError: no parts; weights of another length, not finite or not positive.
    """

    def __init__(self, parts: Sequence[Evaluator], recording_weights: Sequence[float] | None = None) -> None:
        if not parts:
            raise ValueError('an EvaluatorSet needs at least one recording')
        self.parts = list(parts)
        w = np.ones(len(self.parts)) if recording_weights is None else np.asarray(recording_weights, dtype=float)
        if w.shape != (len(self.parts),) or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ValueError(f'recording weights must be {len(self.parts)} finite numbers > 0, got {recording_weights}')
        self.recording_weights = [float(v) for v in w]
        first = self.parts[0]
        self.twin, self.controller, self.settings = first.twin, first.controller, first.settings
        self.objective_joints = list(dict.fromkeys(j for p in self.parts for j in p.objective_joints))
        self.weights = {j: 1.0 for j in self.objective_joints}
        self.joints = list(dict.fromkeys(j for p in self.parts for j in p.joints))

    def evaluate(self, parameter_sets: Sequence[Mapping[ParameterTarget, float]], nthread: int = 1,
                 keep_positions: bool = False) -> list[Score]:
        """Score each parameter set on every recording; objective = weighted mean over recordings (rad^2)."""
        per_part = [p.evaluate(parameter_sets, nthread) for p in self.parts]
        return [combine_scores([scores[k] for scores in per_part], self.recording_weights)
                for k in range(len(parameter_sets))]

    def use_backend(self, backend: str, device: str | None = None) -> None:
        """Every recording's rollouts on ``backend`` (:meth:`Evaluator.use_backend`)."""
        for part in self.parts:
            part.use_backend(backend, device)

    def _recording_shares(self) -> np.ndarray:
        """(K,) share of each recording in the objective: its weight over the sum (equal by default)."""
        w = np.asarray(self.recording_weights, dtype=float)
        return w / w.sum()

    def evaluate_scored_residuals(self, parameter_sets: Sequence[Mapping[ParameterTarget, float]],
                                  nthread: int = 1) -> tuple[list[Score], np.ndarray]:
        """Scores as :meth:`evaluate` and (M, R) residuals: every recording's residual vector
        (:meth:`Evaluator.residuals`) scaled by the square root of its share of the objective,
        concatenated, so that each row's sum(r**2) is the objective (rad^2). One batched rollout
        per recording."""
        per_part = [p.evaluate_scored_residuals(parameter_sets, nthread) for p in self.parts]
        scores = [combine_scores([part[0][k] for part in per_part], self.recording_weights)
                  for k in range(len(parameter_sets))]
        shares = self._recording_shares()
        residuals = np.hstack([np.sqrt(share) * res for share, (_, res) in zip(shares, per_part)])
        return scores, residuals

    def evaluate_residuals(self, parameter_sets: Sequence[Mapping[ParameterTarget, float]],
                           nthread: int = 1) -> np.ndarray:
        """(M, R) residual vectors (see :meth:`evaluate_scored_residuals`)."""
        return self.evaluate_scored_residuals(parameter_sets, nthread)[1]


def combine_scores(scores: Sequence[Score], weights: Sequence[float] | None = None) -> Score:
    """Weighted mean objective and per-joint weighted mean MSE (over the scores that have the joint)
    of several scores; ``weights`` (one per score, > 0) default to equal."""
    w = [1.0] * len(scores) if weights is None else [float(v) for v in weights]
    joints = list(dict.fromkeys(j for sc in scores for j in sc.per_joint_mse))
    mse = {j: float(np.average([sc.per_joint_mse[j] for sc in scores if j in sc.per_joint_mse],
                               weights=[wk for sc, wk in zip(scores, w) if j in sc.per_joint_mse])) for j in joints}
    return Score(float(np.average([sc.objective for sc in scores], weights=w)), mse)


def parts_of(evaluator: 'Evaluator | EvaluatorSet') -> list[Evaluator]:
    """The single-recording evaluators behind ``evaluator``."""
    return list(getattr(evaluator, 'parts', [evaluator]))
