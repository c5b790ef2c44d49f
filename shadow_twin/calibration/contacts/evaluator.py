"""Scores contact parameter sets against recorded tilt runs: each set is replayed in the sim
(:func:`~shadow_twin.calibration.contacts.tilt.record_runs` on the bridge's live simulation of the hand
with its scene) and compared with the recording, sample by sample: the object's position in the palm's
frame (m). The interface is the calibration engine's (``evaluate``, ``evaluate_scored_residuals``), so the
default optimiser (:class:`~shadow_twin.calibration.engine.run.Calibration`) fits contact parameters as
it fits the hand's.

A batch runs on ``nthread`` worker processes (the live simulation's controller is Python: threads would
share one interpreter), each building the simulation once and resetting the searched parameters to the
model's values before each set; a set's grip runs and open-hand runs go to workers apart (a least-squares
step replays one set: both workers busy).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from shadow_twin.calibration.contacts.protocol import ContactProtocol, TiltRun
from shadow_twin.calibration.contacts.live import LiveTilt, record_runs_on_robots
from shadow_twin.calibration.contacts.tilt import TiltRecord, record_runs, residuals
from shadow_twin.calibration.scoring.evaluation import Score
from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.model.calibratable import ParameterTarget, apply_parameters, get_parameter
from shadow_twin.model.scene import SceneConfig
from shadow_twin.simulation.live.simulation import LiveSimulation
from shadow_twin.simulation.overrides import ParameterOverrides


@dataclass(frozen=True)
class HandModel:
    """The sim the runs are replayed on: the hand's MJCF (``model_path``; None: the built-in Shadow Hand
    E), best the hand's calibrated one, or its ``overrides`` (the hand calibration's values), with ``scene``.
    With ``plans`` ({run name: :class:`~shadow_twin.calibration.contacts.live.LiveTilt`}) the runs are
    replayed as the robots make them (:func:`~shadow_twin.calibration.contacts.live.record_runs_on_robots`):
    ``model_path`` is then the robots' model (the cell reduced to arm and hand: its physics options too, the
    cell's elliptic friction cone and impratio 10 against the hand's pyramidal cone and 1), ``gains`` its
    drive gains file and ``scene`` the protocol's live scene."""

    scene: SceneConfig
    model_path: str | None = None
    overrides: ParameterOverrides | None = None
    plans: Mapping[str, LiveTilt] | None = None
    gains: str | None = None


#: The body arrays a body parameter changes beside its own value (a mass scales the inertia; a centre of
#: mass clears the frame flags): restored from the model's before each set.
_BODY_ARRAYS = ('body_mass', 'body_inertia', 'body_ipos', 'body_sameframe', 'body_simple')


class _Replayer:
    """The sim of one process: the hand with the scene, its searched parameters' model values.

    Each set starts from the model as built, whatever sets this process replayed before: the
    searched values are set back, and so are the body arrays (:data:`_BODY_ARRAYS`: a mass scaled
    back and forth is not the same float), so that a set's records do not depend on which worker
    process replays it."""

    def __init__(self, hand: HandModel, protocol: ContactProtocol, targets: Sequence[ParameterTarget]) -> None:
        self.sim = LiveSimulation(hand.model_path, gains=hand.gains, scene=hand.scene, overrides=hand.overrides)
        self.plans = hand.plans
        self.protocol = protocol
        self.defaults = {t: get_parameter(self.sim.model, t) for t in targets}
        self.bodies = {name: getattr(self.sim.model, name).copy() for name in _BODY_ARRAYS}

    def replay(self, values: Mapping[ParameterTarget, float], runs) -> list[TiltRecord]:
        model = self.sim.model
        for name, array in self.bodies.items():
            getattr(model, name)[:] = array
        apply_parameters(model, {**self.defaults, **values})
        if self.plans:
            return record_runs_on_robots(self.sim, self.protocol, list(runs), self.plans)
        return record_runs(self.sim, self.protocol, runs)


def _key(values: Mapping[ParameterTarget, float]) -> tuple:
    """A parameter set as a dictionary key (its targets in a fixed order, the values as they are)."""
    return tuple(sorted(((t.kind, t.name, t.attribute), float(v)) for t, v in values.items()))


def settle_groups(runs: Sequence[TiltRun]) -> list[tuple[TiltRun, ...]]:
    """``runs`` grouped by the start they share: the grip's runs first (their settle is the longer: the grip
    closes and holds ``settle_s``), then the open hand's; each group in the order given."""
    return [group for group in (tuple(r for r in runs if r.grip), tuple(r for r in runs if not r.grip)) if group]


_WORKER: _Replayer | None = None


def _start_worker(hand: HandModel, protocol: ContactProtocol, targets: Sequence[ParameterTarget]) -> None:
    global _WORKER
    _WORKER = _Replayer(hand, protocol, targets)


def _replay_in_worker(values: Mapping[ParameterTarget, float], runs) -> list[TiltRecord]:
    return _WORKER.replay(values, runs)


class ContactEvaluator:
    """Replays parameter sets and scores them against ``recordings`` (one :class:`TiltRecord` per run of
    ``protocol.runs``, by name).

    Args:
        protocol: the runs and how they are made.
        recordings: {run name: record} of the robot (the mock, or a bag's).
        space: the searched parameters (every set names a subset of its targets).
        hand: the sim's hand and scene (default: the built-in hand with the protocol's scene file).
    Raises:
        ValueError: a run of the protocol without a recording.
    """

    def __init__(self, protocol: ContactProtocol, recordings: Mapping[str, TiltRecord], space: SearchSpace,
                 hand: HandModel | None = None) -> None:
        missing = [run.name for run in protocol.runs if run.name not in recordings]
        if missing:
            raise ValueError(f'no recording of run(s) {missing}')
        self.protocol, self.space = protocol, space
        self.hand = hand or HandModel(SceneConfig.from_yaml(protocol.scene))
        self.recordings = dict(recordings)
        #: {run: recorded onset, rad} of the recordings whose object slid (a finite onset).
        self.onsets = self._onsets(self.recordings)
        self.targets = [t for d in space.dimensions for t in d.targets]
        #: The engine's report names: one "joint" per run (its MSE, m^2), weight 1.
        self.objective_joints = [run.name for run in protocol.runs]
        self.weights = {name: 1.0 for name in self.objective_joints}
        self._local: _Replayer | None = None
        self._replayed: dict[tuple, dict[str, TiltRecord]] = {}     # {parameter set: {run: record}}
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._pool_size = 0

    # -- replays -----------------------------------------------------------------------------------
    def replay(self, parameter_sets: Sequence[Mapping[ParameterTarget, float]], runs=None,
               nthread: int = 1) -> list[list[TiltRecord]]:
        """The records of ``runs`` (default: the protocol's fitted runs) for each parameter set, in order. A
        run replayed before with the same set is not replayed again (the replays are deterministic: the records
        of the model as given and of the best set, which the fit's end replays for its figure and hold-outs).

        On ``nthread`` > 1 worker processes a set's runs are split by the start they share (:func:`settle_groups`:
        the grip's runs and the open hand's), so that one set alone (a least-squares step) keeps two workers
        busy too; each group settles once, as the whole set does in one process."""
        runs = tuple(runs or self.protocol.runs)
        records = [self._replayed.setdefault(_key(values), {}) for values in parameter_sets]
        missing = [tuple(run for run in runs if run.name not in found) for found in records]
        tasks = [(k, group) for k, todo in enumerate(missing) for group in settle_groups(todo)]
        if nthread <= 1 or len(tasks) <= 1:
            if tasks and self._local is None:
                self._local = _Replayer(self.hand, self.protocol, self.targets)
            for found, values, todo in zip(records, parameter_sets, missing):
                if todo:
                    found.update((record.name, record) for record in self._local.replay(values, todo))
        else:
            pool = self._workers(min(nthread, len(tasks)))
            done = pool.map(_replay_in_worker, [parameter_sets[k] for k, _ in tasks], [group for _, group in tasks])
            for (k, _), group in zip(tasks, done):
                records[k].update((record.name, record) for record in group)
        return [[found[run.name] for run in runs] for found in records]

    def _workers(self, size: int) -> concurrent.futures.ProcessPoolExecutor:
        if self._pool is None or self._pool_size < size:
            self.close()
            self._pool = concurrent.futures.ProcessPoolExecutor(
                size, mp_context=multiprocessing.get_context('fork'), initializer=_start_worker,
                initargs=(self.hand, self.protocol, self.targets))
            self._pool_size = size
        return self._pool

    def close(self) -> None:
        """Stop the worker processes (a later batch starts them again)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool, self._pool_size = None, 0

    # -- the engine's interface ------------------------------------------------------------------
    def evaluate_scored_residuals(self, parameter_sets, nthread: int = 1) -> tuple[list[Score], np.ndarray]:
        """Scores (objective: the mean squared residual, m^2; per run its MSE) and the residual
        vectors (S, R), each residual over sqrt(R) (m): their squares sum to the objective, as the
        engine's least squares expects (its cost and the objective are then one figure)."""
        scores, rows = [], []
        for records in self.replay(parameter_sets, nthread=nthread):
            parts = [self.residuals(record) for record in records]
            row = np.concatenate(parts)
            scores.append(Score(float(np.mean(row ** 2)), {r.name: float(np.mean(p ** 2)) for r, p in zip(records, parts)}))
            rows.append(row / np.sqrt(row.size))
        return scores, np.stack(rows)

    def _onsets(self, recordings: Mapping[str, TiltRecord]) -> dict[str, float]:
        p = self.protocol
        found = {name: r.onset(p.onset, p.onset_window) for name, r in recordings.items()}
        return {name: onset for name, onset in found.items() if np.isfinite(onset)}

    def add_recordings(self, recordings: Mapping[str, TiltRecord]) -> None:
        """Add (or replace) recordings, e.g. the hold-out runs', with their onsets."""
        self.recordings.update(recordings)
        self.onsets.update(self._onsets(recordings))

    def residuals(self, record: TiltRecord) -> np.ndarray:
        """(R,) m: a replayed run's residuals against its recording (:func:`~.tilt.residuals` with the protocol's
        clip, effort weight and effort changes), and, for a recording whose object slid, its onset angle's error
        (the replay's onset less the recording's, rad; the replay's last tilt if it never slid) x the protocol's
        ``onset_weight`` x sqrt(R - 1): one degree off weighs as the path one mm off throughout. Why: a slide
        ends at the stop or has not begun, a step in the path that least squares cannot follow away from the
        right friction; its angle moves smoothly with the friction. Raises KeyError: a run without a recording."""
        protocol = self.protocol
        path = residuals(record, self.recordings[record.name], protocol.clip, protocol.effort_weight,
                         protocol.onset_window if protocol.effort_change else 0)
        recorded = self.onsets.get(record.name)
        if recorded is None or not protocol.onset_weight:
            return path
        onset = record.onset(protocol.onset, protocol.onset_window)
        error = (onset if np.isfinite(onset) else float(record.tilt[-1])) - recorded
        return np.append(path, protocol.onset_weight * error * np.sqrt(path.size))

    def evaluate(self, parameter_sets, nthread: int = 1, keep_positions: bool = False) -> list[Score]:
        """Scores of the parameter sets (see :meth:`evaluate_scored_residuals`)."""
        return self.evaluate_scored_residuals(parameter_sets, nthread)[0]

    def evaluate_residuals(self, parameter_sets, nthread: int = 1) -> np.ndarray:
        """(S, R) residual vectors, m."""
        return self.evaluate_scored_residuals(parameter_sets, nthread)[1]
