"""Score a model's mobile base against a base recording: replay the commands, compare the path.

:class:`BaseEvaluator` replays a recording's velocity commands (``cmd_vel``) through the
simulated base, the wheels driven exactly as in the live bridge (``SimMobileBase``: the
differential-drive inverse kinematics, saturation, command timeout), optionally with the
arm following its commanded trajectory (the study's runs CY and IY move the arm while the
base drives), and compares the simulated path with the recorded one, both relative to their
start pose (:meth:`BaseRecording.relative_poses`).

The objective is the MiR250 + UR5 twin study's (IMECE 2023): the squared errors of x and y
(m) and of yaw (rad, times ``yaw_weight``) summed, here averaged over the recording's pose
samples so that runs of different length weigh alike::

    objective = mean_t (ex^2 + ey^2 + yaw_weight * eyaw^2)      [m^2]

It has the interface of :class:`~shadow_twin.calibration.scoring.evaluation.Evaluator` that
:class:`~shadow_twin.calibration.engine.run.Calibration`, the sensitivity screening and
``EvaluatorSet`` use: the "joints" of its scores are the coordinates ``base_x``,
``base_y`` (MSE, m^2) and ``base_yaw`` (MSE, rad^2).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Mapping, Sequence

import mujoco
import numpy as np

from shadow_twin.calibration.recordings.base_recording import BaseRecording, poses_relative_to
from shadow_twin.calibration.scoring.evaluation import Score
from shadow_twin.calibration.recordings.recording import JointStateRecording
from shadow_twin.common.errors import ConfigError, RecordingError
from shadow_twin.control.controller import SimController
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.calibratable import ParameterTarget, apply_parameters
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.simulation.mobile_base import TwistCommands
from shadow_twin.simulation.offline import TrajectorySimulator

#: The coordinates compared, in the order of the residual vector.
COORDINATES = ('base_x', 'base_y', 'base_yaw')


@dataclass(frozen=True)
class BaseObjectiveSettings:
    """How a base recording is replayed and compared.

    Attributes:
        yaw_weight: weight of the squared yaw error (rad^2) against the squared position
            errors (m^2), m^2/rad^2; 1 by default (the study adds them unweighted).
        settle_time: simulated rest before the replay, s (the base settles on its wheels, the
            arm under the command that rests at its recorded start: ``TrajectorySimulator``'s
            ``hold_at_rest_command``; 0: no rest, the arm holds its recorded positions).
        after_last_command: time compared after the last command, s (the base coasts to a
            stop; the command timeout stops the wheels).
        max_start_gap: largest gap between the first command and the first pose, s.
        lead_in: commands (times from 0, s) the simulated base drives before its settling rest,
            as the real base drove before the recording (:meth:`CellProtocol.lead_in_commands
            <shadow_twin.calibration.jobs.protocol.CellProtocol.lead_in_commands>`: its casters then
            trail); None: the replay starts from the model's initial caster angles.
    Raises:
        ConfigError: a negative or non-finite value.
    """

    yaw_weight: float = 1.0
    settle_time: float = 0.5
    after_last_command: float = 1.0
    max_start_gap: float = 0.5
    lead_in: TwistCommands | None = None

    def __post_init__(self) -> None:
        for name in ('yaw_weight', 'settle_time', 'after_last_command', 'max_start_gap'):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise ConfigError(f'base objective: {name} must be finite and >= 0, got {value}')


class BaseEvaluator:
    """Scores parameter sets by the base path they give on one recording (see module doc).

    Args:
        twin: the model (with a mobile base), already converted by ``controller``.
        controller: the simulated controller (the same as the live bridge's).
        recording: the base recording.
        settings: replay and objective settings.
        arm_trajectory: trajectory the arm (and hand) followed during the run, or None (they hold).
        arm_start: recording time at which ``arm_trajectory`` started (its ``header.stamp``), s;
            before or after the first command (the arm holds until then).
        initial_positions: {ROS joint: rad} the arm and hand held at the first command (default qpos0).
        arm_recording: the arm's recorded joint states, to compare the arm too
            (:meth:`simulate_with_arm`, :attr:`arm_real`); not part of the objective.
        arm_joints: the arm joints compared (default: those of ``arm_trajectory``).
    Raises:
        RecordingError: the recording starts its poses too long after its first command, or
            its commanded part is shorter than one physics step.
        ModelError: the model has no mobile base.
    """

    def __init__(self, twin: TwinModel, controller: SimController, recording: BaseRecording,
                 settings: BaseObjectiveSettings | None = None, arm_trajectory: JointTrajectory | None = None,
                 arm_start: float = 0.0, initial_positions: Mapping[str, float] | None = None,
                 arm_recording: JointStateRecording | None = None, arm_joints: Sequence[str] | None = None) -> None:
        self.twin, self.controller, self.recording = twin, controller, recording
        self.settings = settings or BaseObjectiveSettings()
        start = float(recording.command_times[0])
        if recording.pose_times[0] > start + self.settings.max_start_gap:
            raise RecordingError(f'{recording.label}: the first pose comes {recording.pose_times[0] - start:.2f} s '
                                 f'after the first command (more than {self.settings.max_start_gap:g} s)')
        end = min(float(recording.command_times[-1]) + self.settings.after_last_command,
                  float(recording.pose_times[-1]))
        if end - start < twin.model.opt.timestep:
            raise RecordingError(f'{recording.label}: commands and poses overlap for {end - start:.3f} s only')
        self.start = start
        trajectory, offset = None, 0.0
        if arm_trajectory is not None:
            trajectory, offset = arm_trajectory, start - arm_start     # < 0: the arm starts later
        self.simulator = TrajectorySimulator(twin.model, controller, trajectory, end - start,
                                             initial_positions=initial_positions, time_offset=offset,
                                             base_commands=recording.twist_commands(start),
                                             settle_time=self.settings.settle_time,
                                             base_lead_in=self.settings.lead_in,
                                             hold_at_rest_command=self.settings.settle_time > 0)
        # the recorded path from the start pose (interpolated at the first command), on its own samples
        inside = (recording.pose_times >= start) & (recording.pose_times <= end)
        rel = poses_relative_to(_pose_at(recording, start), recording.poses[inside])
        #: (N,) compared sample times from the start, s; (N, 3) recorded path relative to its start.
        self.times, self.real = recording.pose_times[inside] - start, rel
        self.objective_joints = list(COORDINATES)
        self.joints = list(COORDINATES)
        self.weights = {'base_x': 1.0, 'base_y': 1.0, 'base_yaw': self.settings.yaw_weight}
        #: Arm joints compared, (T,) their sample times from the start (s) and (T, J) recorded positions (rad).
        self.arm_joints: list[str] = []
        self.arm_times, self.arm_real = np.zeros(0), np.zeros((0, 0))
        if arm_recording is not None:
            self.arm_joints = list(arm_joints or (arm_trajectory.joint_names if arm_trajectory is not None else []))
            rel = arm_recording.times - start
            keep = (rel >= 0.0) & (rel <= end - start)
            self.arm_times = rel[keep]
            self.arm_real = arm_recording.values(self.arm_joints)[keep]
            self._arm_columns = [controller.joint_names.index(j) for j in self.arm_joints]

    def on_model(self, model: mujoco.MjModel, controller: SimController) -> 'BaseEvaluator':
        """This evaluator with its rollouts on ``model`` (converted by ``controller``; e.g. the arm frozen:
        :func:`shadow_twin.model.reduction.frozen_spec`): the same run and path; the arm joints ``model`` does
        not drive are no longer compared, and parameters of parts it lacks are skipped."""
        out = copy.copy(self)
        out.controller = controller
        out.simulator = self.simulator.on_model(model, controller)
        kept = [k for k, j in enumerate(self.arm_joints) if j in controller.joint_names]
        out.arm_joints = [self.arm_joints[k] for k in kept]
        if self.arm_joints:
            out.arm_real = self.arm_real[:, kept]
            out._arm_columns = [controller.joint_names.index(j) for j in out.arm_joints]
        return out

    # -- simulation --------------------------------------------------------------------------
    def simulate(self, parameter_sets: Sequence[Mapping[ParameterTarget, float]], nthread: int = 1) -> np.ndarray:
        """(M, N, 3) simulated paths (x, y m; yaw rad) relative to the sim's start pose, at
        :attr:`times`, one batched rollout."""
        return self.simulate_with_arm(parameter_sets, nthread)[0]

    def simulate_with_arm(self, parameter_sets: Sequence[Mapping[ParameterTarget, float]],
                          nthread: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """((M, N, 3) paths as :meth:`simulate`, (M, T, J) arm positions at :attr:`arm_times`, rad;
        J = 0 without an arm recording), one batched rollout."""
        models = self.simulator.model_copies(len(parameter_sets))
        for model, values in zip(models, parameter_sets):
            apply_parameters(model, values, missing_ok=self.simulator.model is not self.twin.model)
        positions, poses = self.simulator.run_base(models, nthread)
        step_times = np.concatenate([[0.0], self.simulator.times - self.simulator.time_offset])
        start_pose = self.simulator.initial_base_pose
        out = np.empty((len(models), len(self.times), 3))
        arm = np.empty((len(models), len(self.arm_times), len(self.arm_joints)))
        for m, path in enumerate(poses):
            full = np.vstack([start_pose, path])
            sampled = np.column_stack([np.interp(self.times, step_times, full[:, k]) for k in range(3)])
            out[m] = poses_relative_to(start_pose, sampled)
            if self.arm_joints:
                joints = np.vstack([self.simulator.start_positions[self._arm_columns],
                                    positions[m][:, self._arm_columns]])
                arm[m] = np.column_stack([np.interp(self.arm_times, step_times, joints[:, k])
                                          for k in range(len(self.arm_joints))])
        return out, arm

    def arm_mse(self, arm: np.ndarray) -> dict[str, float]:
        """{arm joint: MSE (rad^2)} of one simulated arm ((T, J) from :meth:`simulate_with_arm`)."""
        return dict(zip(self.arm_joints, (float(v) for v in np.mean((arm - self.arm_real) ** 2, axis=0))))

    # -- scores --------------------------------------------------------------------------------
    def score_path(self, path: np.ndarray) -> Score:
        """Score of one simulated path ((N, 3), relative to its start)."""
        error = path - self.real
        mse = dict(zip(COORDINATES, (float(v) for v in np.mean(error ** 2, axis=0))))
        objective = mse['base_x'] + mse['base_y'] + self.settings.yaw_weight * mse['base_yaw']
        return Score(objective, mse, path)

    def residuals_of(self, path: np.ndarray) -> np.ndarray:
        """(3 N,) residuals whose squares sum to the objective: ex, ey and sqrt(yaw_weight) eyaw,
        each over sqrt(N), coordinate by coordinate (m)."""
        scale = np.sqrt(np.array([1.0, 1.0, self.settings.yaw_weight]) / len(self.times))
        return ((path - self.real) * scale).T.ravel()

    def evaluate(self, parameter_sets: Sequence[Mapping[ParameterTarget, float]], nthread: int = 1,
                 keep_positions: bool = False) -> list[Score]:
        """Simulate and score each parameter set (``keep_positions``: keep each path on its score)."""
        scores = [self.score_path(p) for p in self.simulate(parameter_sets, nthread)]
        if not keep_positions:
            for score in scores:
                score.positions = None
        return scores

    def evaluate_scored_residuals(self, parameter_sets: Sequence[Mapping[ParameterTarget, float]],
                                  nthread: int = 1) -> tuple[list[Score], np.ndarray]:
        """(M scores, (M, 3 N) residuals as in :meth:`residuals_of`), one batched rollout."""
        paths = self.simulate(parameter_sets, nthread)
        scores = [self.score_path(p) for p in paths]
        for score in scores:
            score.positions = None
        return scores, np.stack([self.residuals_of(p) for p in paths])

    def evaluate_residuals(self, parameter_sets: Sequence[Mapping[ParameterTarget, float]],
                           nthread: int = 1) -> np.ndarray:
        """(M, 3 N) residual vectors (see :meth:`residuals_of`)."""
        return self.evaluate_scored_residuals(parameter_sets, nthread)[1]

    def path_rmse(self, path: np.ndarray) -> dict[str, float]:
        """RMSE of x, y (m) and yaw (rad) of one simulated path: the figures a report gives."""
        return {name: float(np.sqrt(v)) for name, v in self.score_path(path).per_joint_mse.items()}


def _pose_at(recording: BaseRecording, t: float) -> np.ndarray:
    """(3,) the recorded pose at time ``t`` (s), linearly interpolated (held before the first sample)."""
    return np.array([np.interp(t, recording.pose_times, recording.poses[:, k]) for k in range(3)])

