"""Score a model against a real recording: align, simulate, compare.

:class:`Evaluator` does the set-up once (onset detection, initial state, delay
fit, time base) and then scores batches of parameter sets; each evaluation only
writes numbers into a compiled model copy and runs ``mujoco.rollout``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np

from shadow_twin.calibration import alignment, metrics
from shadow_twin.calibration.recording import JointStateRecording
from shadow_twin.common.errors import RecordingError, TrajectoryError
from shadow_twin.control.controller import SimController
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.mjcf import ParameterTarget, TwinModel, apply_parameters
from shadow_twin.simulation.offline import TrajectorySimulator

log = logging.getLogger(__name__)
MATCHING = ('interpolate', 'nearest')


@dataclass
class AlignmentSettings:
    """How real and simulated streams are aligned and compared.

    Attributes:
        onset_threshold: joint speed that marks the motion onset, rad/s.
        smoothing: moving-average window for onset detection, s.
        max_delay: largest sim-to-real delay the fit may find, s (0 disables the fit),
            for recordings aligned by their motion onset.
        stamped_max_delay: the same for recordings whose trajectory start time is known
            (a stamped goal): default 0, since a fitted delay would absorb part of the
            slower or faster response the calibration is there to find.
        settle_time: time compared after the trajectory ends, s. The default
            3.0 s covers the motion settling; with it the default Shadow model
            scores 0.057 rad^2, the published figure.
        matching: 'interpolate' (both streams resampled onto one time base) or
            'nearest' (the published method: sim sampled at ``sim_rate`` and
            matched to each real sample by nearest timestamp).
        rate: time-base rate for 'interpolate', Hz (default: the recording's).
        sim_rate: simulated joint_states rate for 'nearest', Hz.
        interpolation: trajectory sampling (auto/linear/cubic/quintic).
    """

    onset_threshold: float = 0.1
    smoothing: float = 0.05
    max_delay: float = 0.3
    stamped_max_delay: float = 0.0
    settle_time: float = 3.0
    matching: str = 'interpolate'
    rate: float | None = None
    sim_rate: float = 250.0
    interpolation: str = 'auto'

    def __post_init__(self) -> None:
        if self.matching not in MATCHING:
            raise ValueError(f'matching must be one of {MATCHING}')


@dataclass
class Score:
    """Errors of one simulated run: per-joint MSE (rad^2) and the objective (rad^2)."""

    objective: float
    per_joint_mse: dict[str, float]
    positions: np.ndarray | None = field(default=None, repr=False)


class Evaluator:
    """Compare simulated and real motion for one recording and trajectory.

    Args:
        twin: the model (its compiled model is converted by ``controller``).
        controller: simulated controller built on ``twin.model``.
        recording: real joint states.
        trajectory: commanded trajectory (ROS names) that produced the recording.
        objective_joints: joints whose MSE the objective averages.
        weights: optional {joint: weight} (default: equal).
        settings: alignment settings.
        trajectory_start: when the trajectory started, s on the recording's
            clock (e.g. the goal's ``header.stamp`` for a live recording); the
            default (None) finds it from the motion onset, for recordings whose
            start time was not recorded.
        label: name of the recording in reports (default: the recording's label).
    Raises:
        RecordingError: joints missing, NaN samples, no motion, recording
        shorter than the trajectory after the onset.
        TrajectoryError: trajectory joints not driven by the model.
    """

    def __init__(self, twin: TwinModel, controller: SimController, recording: JointStateRecording,
                 trajectory: JointTrajectory, objective_joints: Sequence[str],
                 weights: Mapping[str, float] | None = None,
                 settings: AlignmentSettings | None = None, trajectory_start: float | None = None,
                 label: str | None = None) -> None:
        self.twin = twin
        self.label = label or recording.label
        self.controller = controller
        self.settings = settings or AlignmentSettings()
        if trajectory_start is not None:
            self.settings = replace(self.settings, max_delay=self.settings.stamped_max_delay)
        s = self.settings
        missing = [j for j in objective_joints if j not in trajectory.joint_names]
        if missing:
            raise TrajectoryError(f'objective joint(s) {missing} are not in trajectory {trajectory.name!r}')
        self.objective_joints = list(objective_joints)
        self.weights = dict(weights) if weights else {j: 1.0 for j in self.objective_joints}
        # Compared joints: the trajectory's joints that were recorded and are simulated.
        self.joints = [j for j in trajectory.joint_names
                       if j in recording.joint_names and j in controller.joint_names]
        recording.values(self.objective_joints)  # absent joints / NaN -> RecordingError
        real_times = recording.times
        real = recording.values(self.joints)
        if trajectory_start is None:
            moving = [self.joints.index(j) for j in trajectory.joint_names
                      if j in self.joints and np.ptp(trajectory.positions[:, trajectory.joint_names.index(j)]) > 0]
            self.onset = alignment.detect_motion_onset(real_times, real[:, moving or slice(None)],
                                                       s.onset_threshold, s.smoothing)
            start = self.onset - trajectory.motion_start()
        else:
            start = float(trajectory_start)
            self.onset = start + trajectory.motion_start()
        self.window = trajectory.duration + s.settle_time
        available = real_times[-1] - start
        if available < trajectory.duration:
            raise RecordingError(f'{recording.label}: recording ends {available:.2f} s after the trajectory '
                                 f'start, shorter than the trajectory ({trajectory.duration:.2f} s)')
        if start < real_times[0]:
            raise RecordingError(f'{recording.label}: the trajectory starts {start - real_times[0]:+.2f} s from the '
                                 f'start of the recording, before it')
        self.window = min(self.window, available - s.max_delay)
        initial = dict(zip(self.joints, alignment.resample(real_times, real, [start])[0]))
        self.simulator = TrajectorySimulator(twin.model, controller, trajectory,
                                             self.window + s.max_delay + 0.01, initial, s.interpolation)
        self._columns = [controller.joint_names.index(j) for j in self.joints]
        self._real_times, self._real = real_times, real
        self.delay = 0.0
        self.start = start
        if s.max_delay > 0:
            self._fit_delay()
        self._set_time_base()
        log.info('%s aligned: onset %.3f s, trajectory start %.3f s, delay %+.3f s, window %.2f s',
                 self.label, self.onset, self.start, self.delay, self.window)

    def _fit_delay(self) -> None:
        """Refine the trajectory start by the delay that best fits the default model."""
        sim = self.simulator.run([self.twin.model])[0][:, self._columns]
        ref_times = self.simulator.times[self.simulator.times <= self.window]
        ref = sim[: ref_times.size]
        shift, _ = alignment.fit_delay(ref_times, ref, self._real_times - self.start, self._real,
                                       max_shift=self.settings.max_delay)
        self.delay = shift
        self.start += shift

    def _set_time_base(self) -> None:
        s = self.settings
        rel = self._real_times - self.start
        if s.matching == 'interpolate':
            rate = s.rate or 1.0 / float(np.median(np.diff(self._real_times)))
            self.time_base = alignment.uniform_time_base(0.0, self.window, rate)
            self.real = alignment.resample(rel, self._real, self.time_base)
            self._sim_index, self._sim_weight = alignment.interpolation_weights(
                np.concatenate([[0.0], self.simulator.times]), self.time_base)
        else:
            keep = (rel >= 0) & (rel <= self.window)
            self.time_base = rel[keep]
            self.real = self._real[keep]
            stride = max(1, int(round(1.0 / (s.sim_rate * self.simulator.dt))))
            published = np.arange(stride - 1, self.simulator.nstep, stride)  # states at k*stride*dt
            nearest = alignment.nearest_indices(self.simulator.times[published], self.time_base)
            self._sim_index, self._sim_weight = published[nearest] + 1, np.zeros(self.time_base.size)

    def sim_on_time_base(self, positions: np.ndarray) -> np.ndarray:
        """Map (nstep, J_controller) simulated positions onto the time base -> (N, J_compared)."""
        sim = positions[:, self._columns]
        sim = np.vstack([self.simulator.start_positions[self._columns], sim])
        i, w = self._sim_index, self._sim_weight[:, None]
        return sim[i] * (1 - w) + sim[np.minimum(i + 1, len(sim) - 1)] * w

    def score(self, positions: np.ndarray, keep_positions: bool = False) -> Score:
        """Score one simulated run ((nstep, J_controller) positions, rad)."""
        sim = self.sim_on_time_base(positions)
        mse = metrics.per_joint_mse(self.real, sim, self.joints)
        return Score(metrics.weighted_objective(mse, self.weights), mse, sim if keep_positions else None)

    def evaluate(self, parameter_sets: Sequence[Mapping[ParameterTarget, float]], nthread: int = 1,
                 keep_positions: bool = False) -> list[Score]:
        """Simulate and score each parameter set (in parallel threads, ``nthread``)."""
        models = self.simulator.model_copies(len(parameter_sets))
        for model, values in zip(models, parameter_sets):
            apply_parameters(model, values)
        positions = self.simulator.run(models, nthread)
        return [self.score(p, keep_positions) for p in positions]


class EvaluatorSet:
    """Several recordings scored together: the objective is the mean of their objectives.

    Has the interface of :class:`Evaluator` that a :class:`~shadow_twin.calibration.run.Calibration`
    and the report use (``evaluate``, ``objective_joints``, ``weights``, ``settings``,
    ``parts``). Per-joint MSE (rad^2) is averaged over the recordings that compare the joint.

    Args:
        parts: evaluators of the same model and controller (at least one).
    Raises:
        ValueError: no parts.
    """

    def __init__(self, parts: Sequence[Evaluator]) -> None:
        if not parts:
            raise ValueError('an EvaluatorSet needs at least one recording')
        self.parts = list(parts)
        first = self.parts[0]
        self.twin, self.controller, self.settings = first.twin, first.controller, first.settings
        self.objective_joints = list(dict.fromkeys(j for p in self.parts for j in p.objective_joints))
        self.weights = {j: 1.0 for j in self.objective_joints}
        self.joints = list(dict.fromkeys(j for p in self.parts for j in p.joints))

    def evaluate(self, parameter_sets: Sequence[Mapping[ParameterTarget, float]], nthread: int = 1,
                 keep_positions: bool = False) -> list[Score]:
        """Score each parameter set on every recording; objective = mean over recordings (rad^2)."""
        per_part = [p.evaluate(parameter_sets, nthread) for p in self.parts]
        return [combine_scores([scores[k] for scores in per_part]) for k in range(len(parameter_sets))]


def combine_scores(scores: Sequence[Score]) -> Score:
    """Mean objective and per-joint mean MSE (over the scores that have the joint) of several scores."""
    joints = list(dict.fromkeys(j for sc in scores for j in sc.per_joint_mse))
    mse = {j: float(np.mean([sc.per_joint_mse[j] for sc in scores if j in sc.per_joint_mse])) for j in joints}
    return Score(float(np.mean([sc.objective for sc in scores])), mse)


def parts_of(evaluator: 'Evaluator | EvaluatorSet') -> list[Evaluator]:
    """The single-recording evaluators behind ``evaluator``."""
    return list(getattr(evaluator, 'parts', [evaluator]))
