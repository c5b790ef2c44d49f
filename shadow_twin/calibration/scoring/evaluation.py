"""Score a model against a real recording: align, simulate, compare.

:class:`Evaluator` does the set-up once (onset detection, initial state, delay
fit, time base) and then scores batches of parameter sets; each evaluation only
writes numbers into a compiled model copy and runs ``mujoco.rollout``. How it places the
recording (settings, occurrences, held joints) is :mod:`~shadow_twin.calibration.scoring.placement`'s.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import mujoco
import numpy as np

from shadow_twin.calibration.recordings import alignment
from shadow_twin.calibration.recordings.recording import JointStateRecording
from shadow_twin.calibration.scoring import metrics, stability
from shadow_twin.calibration.scoring.placement import AlignmentSettings, held_joints, list_occurrences
from shadow_twin.common.errors import ConfigError, RecordingError, TrajectoryError
from shadow_twin.control.controller import SimController
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.calibratable import ParameterTarget, apply_parameters
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.simulation.offline import TrajectorySimulator
from shadow_twin.simulation.warp_rollout import BACKENDS, warp_unavailable

log = logging.getLogger(__name__)


@dataclass
class Score:
    """Errors of one simulated run: per-joint MSE (rad^2) and the objective (rad^2)."""

    objective: float
    per_joint_mse: dict[str, float]
    positions: np.ndarray | None = field(default=None, repr=False)
    #: the run went unstable: :func:`~shadow_twin.calibration.scoring.stability.unstable_message`
    #: (the objective is then UNSTABLE_OBJECTIVE, a penalty, not an error).
    unstable: str | None = None


class Evaluator:
    """Compare simulated and real motion for one recording and trajectory.

    Placement (without ``trajectory_start``): the executions of the trajectory in
    the recording are listed (:func:`list_occurrences`, logged at INFO) and
    ``settings.occurrence`` is chosen (default: the first complete one); its
    trajectory start is its motion onset minus the trajectory's motion start with
    the rest state before the onset (:meth:`JointTrajectory.motion_start`: 0 when
    that state is away from point 0, as the JTC moves to point 0 from t = 0), then
    refined by the delay fit (the simulation then starts from the state recorded at the refined
    start). Simulated joints the trajectory does not name start, and hold, at their recorded state
    (``held_joints``), not at the model's ``qpos0``. The window compared is the trajectory plus
    ``settle_time``, cut at the end of the recording and before the next execution.

    A recording that begins after the trajectory start (trimmed at the motion onset,
    or a stamped start before its first sample) is simulated from its first sample:
    the simulation starts that far into the trajectory (``time_offset``) from the
    recorded positions and velocities there (velocities from a line fitted to the
    positions over ``smoothing`` s: the velocities a hand reports can be another
    joint's, e.g. the Shadow hand's J1 and J2 report their J0's), and the trajectory's
    point at t = 0 is that first recorded state (the true rest state is unknown; a
    recording that begins at the onset has hardly left it). The time base is then the
    part of the window the recording covers, so the objective stays a mean squared
    error over the compared samples. A recording whose first sample already moves is
    taken to begin at the motion onset (logged as a warning): if it was cut later in
    the motion, pass ``trajectory_start``.

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
    Attributes (set by the alignment):
        onset: motion onset, s (recording clock); start: trajectory start after the delay fit, s;
        delay: fitted delay, s; window: end of the compared span, s from the start;
        time_offset: its beginning, s from the start (0 unless the recording begins later);
        occurrences: the executions found (empty with ``trajectory_start``); occurrence: the
        1-based one compared (None with ``trajectory_start``).
    Raises:
        RecordingError: joints missing, NaN samples, no motion, the chosen occurrence
        absent or incomplete (the message names what is missing), a stamped trajectory
        that ends before the recording begins.
        TrajectoryError: trajectory joints not driven by the model.
        ConfigError: ``settings.occurrence`` together with ``trajectory_start``.
    """

    def __init__(self, twin: TwinModel, controller: SimController, recording: JointStateRecording,
                 trajectory: JointTrajectory, objective_joints: Sequence[str],
                 weights: Mapping[str, float] | None = None,
                 settings: AlignmentSettings | None = None, trajectory_start: float | None = None,
                 label: str | None = None) -> None:
        self.twin = twin
        self.label = label or recording.label
        #: The model the rollouts run on: ``twin.model`` (another with :meth:`on_model`).
        self.model = twin.model
        #: (backend, device) of the rollouts (:meth:`use_backend`).
        self.backend: tuple[str, str | None] = ('cpu', None)
        self.controller = controller
        self.trajectory = trajectory
        self.settings = settings or AlignmentSettings()
        if trajectory_start is not None:
            if self.settings.occurrence is not None:
                raise ConfigError(f'{self.label}: occurrence {self.settings.occurrence} was chosen but the '
                                  f'trajectory start is known (a stamped goal); occurrences apply to '
                                  f'recordings aligned by their motion onset')
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
        self._real_times, self._real = real_times, real
        #: Simulated joints the trajectory does not name but the recording holds (in every message,
        #: finite): they start, and hold, at their recorded state, not at the model's ``qpos0``.
        self.held_joints, self._held = held_joints(recording, controller.joint_names, trajectory.joint_names)
        self.occurrences: list[alignment.Occurrence] = []
        self.occurrence: int | None = None
        if trajectory_start is None:
            start, compare_until = self._place_by_onset(recording)
        else:
            start, compare_until = self._place_by_stamp(float(trajectory_start)), float(real_times[-1])
        self.window = trajectory.duration + s.settle_time
        self.window = min(self.window, compare_until - start - s.max_delay)
        if self.window <= 0:
            raise RecordingError(f'{self.label}: max_delay {s.max_delay:g} s leaves nothing to compare: the '
                                 f'recording ends {compare_until - start:.3f} s after the trajectory start')
        self._columns = [controller.joint_names.index(j) for j in self.joints]
        self.delay = 0.0
        self.start = start
        self._margin = s.max_delay   # simulated beyond the window, s: the delay fit shifts by up to max_delay
        self.simulator = self._simulator(start)
        if s.max_delay > 0:
            self._fit_delay()
            # Every rollout from here on covers the compared window only (3 % fewer steps on the real
            # hand); the initial state (and any offset) is read where the start now is.
            self._margin = 0.0
            self.simulator = self._simulator(self.start)
        #: ``time_from_start`` of the first compared instant, s (> 0 when the recording begins later).
        self.time_offset = self.simulator.time_offset
        self._set_time_base()
        log.info('%s aligned: onset %.3f s, trajectory start %.3f s, delay %+.3f s, window %.2f s%s',
                 self.label, self.onset, self.start, self.delay, self.window,
                 f' from {self.time_offset:.3f} s (the recording begins after the trajectory start)'
                 if self.time_offset > 0 else '')

    def _place_by_onset(self, recording: JointStateRecording) -> tuple[float, float]:
        """Choose the occurrence and place the trajectory start from its onset.

        Sets ``occurrences``, ``occurrence`` and ``onset``; returns (trajectory start, end of
        the compared span), s on the recording clock."""
        s = self.settings
        origin = float(self._real_times[0])
        self.occurrences = list_occurrences(recording, self.trajectory, s, self.joints)
        for found in self.occurrences:
            log.info('%s: %s', self.label, found.describe(origin))
        chosen = alignment.select_occurrence(self.occurrences, s.occurrence, origin, self.label)
        self.occurrence = chosen.number
        self.onset = chosen.onset
        if chosen.begins_in_motion:
            log.warning('%s: the recording moves from its first sample: it is taken to begin at the motion '
                        'onset (if it was cut later in the motion, give the trajectory start)', self.label)
        if len(self.occurrences) > 1:
            log.info('%s: comparing occurrence %d of %d', self.label, chosen.number, len(self.occurrences))
        end = float(self._real_times[-1])
        following = [o.start for o in self.occurrences if o.number > chosen.number]
        return chosen.start, min(following[0], end) if following else end

    def _place_by_stamp(self, start: float) -> float:
        """Check a known trajectory start against the recording and set ``onset``; returns ``start``."""
        times, trajectory, s = self._real_times, self.trajectory, self.settings
        missing = alignment.missing_end(times[-1] - start, trajectory.duration, s.settle_time)
        if missing:
            raise RecordingError(f'{self.label}: {missing}')
        if times[0] - start >= trajectory.duration:
            raise RecordingError(f'{self.label}: the recording begins {times[0] - start:.2f} s after the trajectory '
                                 f'start, after its end ({trajectory.duration:.2f} s): the motion is missing')
        at = alignment.resample(times, self._real, [min(max(start, times[0]), times[-1])])[0]
        rest = np.full(len(trajectory.joint_names), np.nan)
        rest[[trajectory.joint_names.index(j) for j in self.joints]] = at
        self.onset = start + trajectory.motion_start(rest, start_tolerance=s.start_tolerance)
        return start

    def _simulator(self, start: float) -> TrajectorySimulator:
        """The simulator for a trajectory started at ``start`` (s, recording clock): from the
        recorded state there, or from the first sample, ``time_offset`` into the trajectory,
        when the recording begins later; it simulates the compared window plus ``_margin`` s."""
        s, times = self.settings, self._real_times
        offset = max(0.0, times[0] - start)
        velocities = None
        if offset > 0:
            at = times[0]
            near = max(2, int(np.count_nonzero(times <= times[0] + s.smoothing)))
            slope = np.polyfit(times[:near] - times[0], self._real[:near], 1)[0]
            velocities = dict(zip(self.joints, slope))
        else:
            at = start
        initial = dict(zip(self.joints, alignment.resample(times, self._real, [at])[0]))
        if self.held_joints:
            initial.update(zip(self.held_joints, alignment.resample(times, self._held, [at])[0]))
        simulator = TrajectorySimulator(self.model, self.controller, self.trajectory,
                                        self.window + self._margin + 0.01 - offset, initial, s.interpolation,
                                        velocities, offset)
        simulator.backend, simulator.device = self.backend
        return simulator

    def use_backend(self, backend: str, device: str | None = None) -> None:
        """Run the rollouts on ``backend``: 'cpu' (``mujoco.rollout``, the default) or 'warp' (MuJoCo Warp on
        ``device``, default Warp's preferred; :mod:`~shadow_twin.simulation.warp_rollout`).

        Raises:
            ConfigError: an unknown backend, or 'warp' where MuJoCo Warp is not installed.
        """
        if backend not in BACKENDS:
            raise ConfigError(f'backend {backend!r}: expected one of {", ".join(BACKENDS)}')
        if backend == 'warp':
            why = warp_unavailable()
            if why:
                raise ConfigError(f'--backend warp: {why}')
        self.backend = (backend, device)
        self.simulator.backend, self.simulator.device = self.backend

    def _fit_delay(self) -> None:
        """Refine the trajectory start by the delay that best fits the default model."""
        sim = self.simulator.run([self.model])[0][:, self._columns]
        ref_times = self.simulator.times[self.simulator.times <= self.window]
        ref = sim[: ref_times.size]
        shift, _ = alignment.fit_delay(ref_times, ref, self._real_times - self.start, self._real,
                                       max_shift=self.settings.max_delay)
        self.delay = shift
        self.start += shift

    def _set_time_base(self) -> None:
        s = self.settings
        rel = self._real_times - self.start
        offset = self.simulator.time_offset
        if offset >= self.window:
            raise RecordingError(f'{self.label}: the recording begins {offset:.2f} s after the trajectory start, '
                                 f'after the {self.window:.2f} s it can compare')
        if s.matching == 'interpolate':
            rate = s.rate or 1.0 / float(np.median(np.diff(self._real_times)))
            self.time_base = alignment.uniform_time_base(offset, self.window, rate)
            self.real = alignment.resample(rel, self._real, self.time_base)
            self._sim_index, self._sim_weight = alignment.interpolation_weights(
                np.concatenate([[offset], self.simulator.times]), self.time_base)
        else:
            keep = (rel >= offset) & (rel <= self.window)
            self.time_base = rel[keep]
            self.real = self._real[keep]
            stride = max(1, int(round(1.0 / (s.sim_rate * self.simulator.dt))))
            published = np.arange(stride - 1, self.simulator.nstep, stride)  # states at k*stride*dt
            nearest = alignment.nearest_indices(self.simulator.times[published], self.time_base)
            self._sim_index, self._sim_weight = published[nearest] + 1, np.zeros(self.time_base.size)

    def on_model(self, model: mujoco.MjModel, controller: SimController) -> 'Evaluator':
        """This evaluator with its rollouts on ``model`` (converted by ``controller``), e.g. a reduced model
        (:mod:`~shadow_twin.calibration.scoring.reduced`): the same placement, delay, initial state and
        time base; the compared joints are those ``model`` still drives (the objective joints must be among
        them), and parameters of parts ``model`` lacks are skipped.

        Raises:
            TrajectoryError: an objective joint ``model`` does not drive.
        """
        missing = [j for j in self.objective_joints if j not in controller.joint_names]
        if missing:
            raise TrajectoryError(f'{self.label}: objective joint(s) {missing} are not in the reduced model')
        out = copy.copy(self)
        out.model, out.controller = model, controller
        kept = [k for k, j in enumerate(self.joints) if j in controller.joint_names]
        out.joints = [self.joints[k] for k in kept]
        out._real, out.real = self._real[:, kept], self.real[:, kept]
        out._columns = [controller.joint_names.index(j) for j in out.joints]
        out.simulator = self.simulator.on_model(model, controller)
        return out

    def sim_on_time_base(self, positions: np.ndarray) -> np.ndarray:
        """Map (nstep, J_controller) simulated positions onto the time base -> (N, J_compared)."""
        sim = positions[:, self._columns]
        sim = np.vstack([self.simulator.start_positions[self._columns], sim])
        i, w = self._sim_index, self._sim_weight[:, None]
        return sim[i] * (1 - w) + sim[np.minimum(i + 1, len(sim) - 1)] * w

    def score(self, positions: np.ndarray, keep_positions: bool = False) -> Score:
        """Score one simulated run ((nstep, J_controller) positions, rad)."""
        return self._score_on_time_base(self.sim_on_time_base(positions), keep_positions)

    def _score_on_time_base(self, sim: np.ndarray, keep_positions: bool = False) -> Score:
        mse = metrics.per_joint_mse(self.real, sim, self.joints)
        return Score(metrics.weighted_objective(mse, self.weights), mse, sim if keep_positions else None)

    def _simulate(self, parameter_sets: Sequence[Mapping[ParameterTarget, float]],
                  nthread: int) -> tuple[np.ndarray, list[str | None]]:
        """(M, nstep, J_controller) positions (rad) of each parameter set, one batched rollout, and
        per set None or why its run went unstable (:mod:`~shadow_twin.calibration.scoring.stability`)."""
        models = self.simulator.model_copies(len(parameter_sets))
        for model, values in zip(models, parameter_sets):
            apply_parameters(model, values, missing_ok=self.model is not self.twin.model)
        sim = self.simulator
        with stability.mujoco_warnings() as warnings:
            positions, clock = sim.run_with_clock(models, nthread)
        at = stability.unstable_times(clock, float(sim.initial_state[0]), sim.times)
        return positions, [None if t is None else stability.unstable_message(self.label, t, warnings) for t in at]

    def _failed(self, unstable: str) -> Score:
        return Score(stability.UNSTABLE_OBJECTIVE, {j: stability.UNSTABLE_OBJECTIVE for j in self.joints},
                     unstable=unstable)

    def evaluate(self, parameter_sets: Sequence[Mapping[ParameterTarget, float]], nthread: int = 1,
                 keep_positions: bool = False) -> list[Score]:
        """Simulate and score each parameter set (in parallel threads, ``nthread``); a run that went
        unstable scores UNSTABLE_OBJECTIVE with ``unstable`` set (``shadow-twin evaluate`` reports
        no score then)."""
        positions, unstable = self._simulate(parameter_sets, nthread)
        return [self._failed(u) if u else self.score(p, keep_positions) for p, u in zip(positions, unstable)]

    def residuals(self, positions: np.ndarray) -> np.ndarray:
        """Scaled residual vector of one simulated run ((nstep, J_controller) positions, rad).

        Returns (R,) = (N * J_w,), rad: for every time-base sample t and weighted joint j
        (the keys of ``weights``, in order; row-major over (N, J_w)),
        ``sqrt(w_j / (sum(w) * N)) * (sim_tj - real_tj)``, so that ``sum(r**2)`` is the
        objective of :meth:`score` (the weighted mean of per-joint MSE, rad^2).
        """
        return self._residuals_on_time_base(self.sim_on_time_base(positions))

    def _residuals_on_time_base(self, sim: np.ndarray) -> np.ndarray:
        columns = [self.joints.index(j) for j in self.weights]
        w = np.array([self.weights[j] for j in self.weights], dtype=float)
        scale = np.sqrt(w / (w.sum() * sim.shape[0]))
        return ((sim[:, columns] - self.real[:, columns]) * scale).ravel()

    def evaluate_scored_residuals(self, parameter_sets: Sequence[Mapping[ParameterTarget, float]],
                                  nthread: int = 1) -> tuple[list[Score], np.ndarray]:
        """Simulate every parameter set in one batched ``mujoco.rollout`` call over ``nthread``
        threads; returns (M scores, (M, R) residuals as in :meth:`residuals`)."""
        scores, residuals = [], []
        for p, unstable in zip(*self._simulate(parameter_sets, nthread)):
            sim = self.sim_on_time_base(p)
            r = self._residuals_on_time_base(sim)
            if unstable:    # residuals whose sum of squares is the penalty
                scores.append(self._failed(unstable))
                r = np.full(r.shape, np.sqrt(stability.UNSTABLE_OBJECTIVE / r.size))
            else:
                scores.append(self._score_on_time_base(sim))
            residuals.append(r)
        return scores, np.stack(residuals)

    def evaluate_residuals(self, parameter_sets: Sequence[Mapping[ParameterTarget, float]],
                           nthread: int = 1) -> np.ndarray:
        """(M, R) residual vectors (see :meth:`residuals`), one batched rollout; rows sum(r**2) = objective."""
        return self.evaluate_scored_residuals(parameter_sets, nthread)[1]
