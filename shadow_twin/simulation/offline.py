"""Offline simulation of a trajectory under the simulated controller, many models at once.

The control sequence is computed once by :meth:`SimController.ctrl` (the same
call the live bridge makes each step) and replayed with ``mujoco.rollout``,
which steps each model in C on its own thread without the GIL. Because the PD
law lives inside the actuators (see ``control.py``), an open-loop control
sequence gives exactly the closed-loop motion of the live twin.
"""

from __future__ import annotations

import copy
from typing import Mapping, Sequence

import mujoco
import mujoco.rollout
import numpy as np

from shadow_twin.common.errors import ModelError, TrajectoryError
from shadow_twin.control.base.trajectory import yaw_from_quaternion
from shadow_twin.control.controller import SimController
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.simulation.warp_rollout import warp_rollout
from shadow_twin.simulation.mobile_base import SimMobileBase, TwistCommands, wheel_rate_schedule

FULL_STATE = mujoco.mjtState.mjSTATE_FULLPHYSICS
#: Settling passes that look for the command resting at the initial positions (each adds the
#: remaining error to the command; a linear servo needs one, gravity's change with the pose a second).
REST_COMMAND_ITERATIONS = 4
#: Rest error below which that search stops, rad (1 urad: far below any encoder's resolution).
REST_COMMAND_TOLERANCE = 1e-6


class TrajectorySimulator:
    """Simulate ``trajectory`` for ``duration`` s from a given initial state.

    Joints the trajectory does not name hold their initial position (as the
    JTC's partial goals do). The trajectory starts from the initial positions
    (the JTC interpolates from the current state: they are the point prepended
    at t = 0 by :meth:`JointTrajectory.with_start`).

    With ``time_offset`` > 0 the simulation starts that far into the
    trajectory (a recording that begins after the trajectory started): the
    initial state is the state at ``time_offset``, the desired states are the
    trajectory's from ``time_offset`` on, and the point at t = 0 is still the
    initial positions (the true start state is unknown then; for a recording
    that begins at or just after the motion onset the hand has hardly left it).
    With ``time_offset`` < 0 the trajectory starts ``-time_offset`` s into the simulation
    (a recording that begins before the trajectory's stamped start, e.g. a base run whose
    first velocity command precedes the arm's goal): until then every joint holds its
    initial position, as a JTC does before a goal's ``header.stamp``.

    A model with a mobile base (``SimMobileBase``) drives its wheels from ``base_commands``
    (recorded velocity commands) exactly as the live simulation does; :meth:`run_base`
    gives the base's planar pose beside the joint positions. ``settle_time`` lets the model
    come to rest (on its wheels, the arm holding) before the initial state is taken;
    ``base_lead_in`` (commands, times from 0) is driven before that rest, e.g. a short straight
    drive that leaves the casters trailing, as the calibration protocol does before each base
    run (a caster's angle at the start changes a slipping base's path by centimetres).

    With ``hold_at_rest_command`` the settling rest holds the *command* under which the
    controlled joints named in ``initial_positions`` come to rest there (found by settling again
    with the remaining error added to the command, up to :data:`REST_COMMAND_ITERATIONS` times;
    other joints are commanded to their initial positions), and joints the trajectory does not
    name keep that command, as a controller holds its last command: a position servo rests below
    its command by its static error (gravity / kp), so a recording's measured positions are the
    command minus that error, and holding them as the command counts the error twice. The
    trajectory's joints hold their start positions until it starts (a trajectory controller takes
    the measured state as the start of a new goal). Measured on the cell: holding the recorded
    positions left the UR5's shoulder lift, elbow and wrist 1 1.7, 3.8 and 3.3 mrad below them,
    their servos (kp up to 90,000 N m/rad) jolted the slipping base when the run started, and a
    replay of run IY with the mock robot's own values missed its recording by 16 mm RMS in y; with the
    rest command 0.6 mm.

    Args:
        model: compiled model already converted by ``controller``.
        controller: the simulated controller.
        trajectory: trajectory in ROS joint names; None: every joint holds.
        duration: simulated time, s (>= trajectory duration is typical), from ``time_offset``.
        initial_positions: {ROS joint: rad}; others from ``model.qpos0``.
        interpolation: trajectory sampling (see ``JointTrajectory.sample``).
        initial_velocities: {ROS joint: rad/s} at the start (others 0); for a start during a motion.
        time_offset: ``time_from_start`` at which the simulation starts, s (< 0: the
            trajectory starts that much later).
        base_commands: the base's velocity commands, times in s of this simulation (0 = its start).
        settle_time: s simulated with every joint holding before the start (its time is not counted).
        base_lead_in: commands driven (the other joints holding) before the settling rest; their
            time is not counted either. Needs ``settle_time`` > 0 (the base stops in it).
        hold_at_rest_command: settle under the command that rests at ``initial_positions`` and
            keep it on the joints the trajectory does not name (see above); False: hold the
            settled positions themselves. Needs ``settle_time`` > 0.
    Raises:
        TrajectoryError: trajectory joints the controller does not drive.
        ModelError: base commands or a lead-in for a model without a mobile base.
        ValueError: non-finite ``time_offset``, negative or non-finite ``settle_time``, a lead-in
            or ``hold_at_rest_command`` without ``settle_time``.
    """

    def __init__(self, model: mujoco.MjModel, controller: SimController, trajectory: JointTrajectory | None,
                 duration: float, initial_positions: Mapping[str, float] | None = None,
                 interpolation: str = 'auto', initial_velocities: Mapping[str, float] | None = None,
                 time_offset: float = 0.0, base_commands: TwistCommands | None = None,
                 settle_time: float = 0.0, base_lead_in: TwistCommands | None = None,
                 hold_at_rest_command: bool = False) -> None:
        #: The arguments of this run, for :meth:`on_model`.
        self._arguments = dict(trajectory=trajectory, duration=duration, initial_positions=initial_positions,
                               interpolation=interpolation, initial_velocities=initial_velocities,
                               time_offset=time_offset, base_commands=base_commands, settle_time=settle_time,
                               base_lead_in=base_lead_in, hold_at_rest_command=hold_at_rest_command)
        unknown = [] if trajectory is None else [j for j in trajectory.joint_names if j not in controller.joint_names]
        if unknown:
            raise TrajectoryError(f'trajectory joint(s) {unknown} are not driven by the model '
                                  f'(driven: {controller.joint_names})')
        if not np.isfinite(time_offset):
            raise ValueError(f'time_offset must be finite, got {time_offset}')
        if not (np.isfinite(settle_time) and settle_time >= 0):
            raise ValueError(f'settle_time must be finite and >= 0, got {settle_time}')
        if base_lead_in is not None and len(base_lead_in.times) and not settle_time > 0:
            raise ValueError('a base lead-in needs settle_time > 0 for the base to stop after it')
        if hold_at_rest_command and not settle_time > 0:
            raise ValueError('hold_at_rest_command needs settle_time > 0 to find the command')
        self.model = model
        self.controller = controller
        self.dt = float(model.opt.timestep)
        self.nstep = int(np.ceil(duration / self.dt - 1e-9))
        #: ``time_from_start`` of the initial state, s.
        self.time_offset = float(time_offset)
        #: (nstep,) ``time_from_start`` of each state returned by :meth:`run`, s
        #: (sim time plus ``time_offset``).
        self.times = self.time_offset + (np.arange(self.nstep) + 1) * self.dt
        data = mujoco.MjData(model)
        for joint, value in (initial_positions or {}).items():
            if joint in controller.joint_names:
                k = controller.joint_names.index(joint)
                lo, hi = model.jnt_range[controller.joint_ids[k]]
                limited = model.jnt_limited[controller.joint_ids[k]]
                data.qpos[controller.qpos_adr[k]] = np.clip(value, lo, hi) if limited else value
        for joint, value in (initial_velocities or {}).items():
            if joint in controller.joint_names:
                data.qvel[controller.dof_adr[controller.joint_names.index(joint)]] = value
        controller.hold_integrators(model, data)
        mujoco.mj_forward(model, data)
        target = data.qpos[controller.qpos_adr].copy()
        if base_lead_in is not None and len(base_lead_in.times):
            self._settle(model, controller, data, settle_time)      # on its wheels first
            self._drive_lead_in(model, controller, data, base_lead_in)
        #: The model's mobile base, None when it has none.
        self.base = SimMobileBase.find(model)
        hold = None
        if hold_at_rest_command:
            given = [controller.joint_names.index(j) for j in (initial_positions or {}) if j in controller.joint_names]
            wheels = _wheel_columns(controller, self.base) if self.base is not None else []
            hold = self._settle_at(model, controller, data, settle_time, target, given, wheels)
        elif settle_time > 0:
            self._settle(model, controller, data, settle_time)
        self.initial_state = np.empty(mujoco.mj_stateSize(model, FULL_STATE))
        mujoco.mj_getState(model, data, self.initial_state, FULL_STATE)
        start = data.qpos[controller.qpos_adr].copy()
        #: (J,) initial positions of ``controller.joint_names`` (at ``time_offset``), rad.
        self.start_positions = start
        #: (J,) the command the joints rest under at the start, rad (the rest command, or
        #: ``start_positions``); joints the trajectory does not name keep it.
        self.hold_positions = start if hold is None else hold
        self.desired_positions = np.repeat(self.hold_positions[None], self.nstep, axis=0)
        self.desired_velocities = np.zeros_like(self.desired_positions)
        step_times = np.arange(self.nstep) * self.dt
        if trajectory is not None:
            columns = [controller.joint_names.index(j) for j in trajectory.joint_names]
            traj = trajectory.with_start(start[columns])
            trajectory_times = self.time_offset + step_times
            pos, vel, _ = traj.sample(trajectory_times, interpolation)
            waiting = trajectory_times < 0.0             # before the stamped start: hold
            pos[waiting], vel[waiting] = start[columns], 0.0
            self.desired_positions[:, columns] = pos
            self.desired_velocities[:, columns] = vel
        if base_commands is not None:
            if self.base is None:
                raise ModelError('base commands given for a model without a mobile base (no drive wheel joints)')
            self.desired_velocities[:, _wheel_columns(controller, self.base)] = wheel_rate_schedule(
                self.base, base_commands, step_times)
        self._datas: list[mujoco.MjData] = []
        #: Where the rollouts run: 'cpu' (``mujoco.rollout`` on threads) or 'warp' (MuJoCo Warp, on ``device``).
        self.backend, self.device = 'cpu', None

    @staticmethod
    def _settle(model: mujoco.MjModel, controller: SimController, data: mujoco.MjData, seconds: float) -> None:
        """Step ``seconds`` with every controlled joint holding where it is (wheels still), then
        restart the clock at 0: the state a live twin at rest would be in."""
        TrajectorySimulator._hold(model, controller, data, data.qpos[controller.qpos_adr].copy(), seconds)

    @staticmethod
    def _hold(model: mujoco.MjModel, controller: SimController, data: mujoco.MjData, hold: np.ndarray,
              seconds: float) -> None:
        """Step ``seconds`` under the command ``hold`` ((J,) rad, still), then restart the clock at 0
        at rest."""
        data.ctrl[:] = controller.ctrl(model, hold, np.zeros_like(hold))
        for _ in range(int(np.ceil(seconds / model.opt.timestep))):
            mujoco.mj_step(model, data)
        data.qvel[:] = 0.0
        data.time = 0.0
        mujoco.mj_forward(model, data)

    @classmethod
    def _settle_at(cls, model: mujoco.MjModel, controller: SimController, data: mujoco.MjData, seconds: float,
                   target: np.ndarray, given: Sequence[int], wheels: Sequence[int]) -> np.ndarray:
        """Settle ``seconds`` under the command that rests the ``given`` columns of the controlled
        joints at ``target`` ((J,) rad); the others are commanded to ``target`` itself (as a live
        twin holds its start), the drive ``wheels`` (columns) where they are. Returns that command."""
        saved = np.empty(mujoco.mj_stateSize(model, FULL_STATE))
        mujoco.mj_getState(model, data, saved, FULL_STATE)
        wheels = list(wheels)
        fitted = np.zeros(len(controller.joint_names), dtype=bool)
        fitted[list(given)] = True
        fitted[wheels] = False
        hold = target.copy()
        hold[wheels] = data.qpos[controller.qpos_adr[wheels]]
        for attempt in range(REST_COMMAND_ITERATIONS):
            if attempt:
                mujoco.mj_setState(model, data, saved, FULL_STATE)
            cls._hold(model, controller, data, hold, seconds)
            error = (target - data.qpos[controller.qpos_adr])[fitted]
            if attempt == REST_COMMAND_ITERATIONS - 1 or np.max(np.abs(error), initial=0.0) < REST_COMMAND_TOLERANCE:
                break
            hold[fitted] += error
        return hold

    @staticmethod
    def _drive_lead_in(model: mujoco.MjModel, controller: SimController, data: mujoco.MjData,
                       commands: TwistCommands) -> None:
        """Drive the base through ``commands`` (to their last time plus the command timeout) with
        every other controlled joint holding where it is."""
        base = SimMobileBase.find(model)
        if base is None:
            raise ModelError('a base lead-in given for a model without a mobile base (no drive wheel joints)')
        steps = np.arange(int(np.ceil((commands.times[-1] + base.command_timeout) / model.opt.timestep)))
        qd = np.zeros((len(steps), len(controller.joint_names)))
        qd[:, _wheel_columns(controller, base)] = wheel_rate_schedule(base, commands, steps * model.opt.timestep)
        ctrl = controller.ctrl(model, np.repeat(data.qpos[controller.qpos_adr][None], len(steps), axis=0), qd)
        for row in ctrl:
            data.ctrl[:] = row
            mujoco.mj_step(model, data)

    def control(self, model: mujoco.MjModel) -> np.ndarray:
        """(nstep, nu) control sequence for ``model`` (its current gains)."""
        return self.controller.ctrl(model, self.desired_positions, self.desired_velocities)

    def run(self, models: Sequence[mujoco.MjModel], nthread: int = 1) -> np.ndarray:
        """Simulate every model; returns (len(models), nstep, J) joint positions (rad).

        J follows ``controller.joint_names``; row k is the state at ``times[k]``.
        """
        return self.run_with_clock(models, nthread)[0]

    def run_with_clock(self, models: Sequence[mujoco.MjModel], nthread: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`run`, with each state's simulation clock: ((M, nstep, J) positions, rad,
        (M, nstep) clock, s). A clock that stops advancing marks a run MuJoCo reset as unstable
        (:func:`shadow_twin.calibration.scoring.stability.unstable_times`)."""
        state = self._rollout(models, nthread)          # state = [time, qpos, ...]
        return state[:, :, 1 + self.controller.qpos_adr], state[:, :, 0]

    def run_base(self, models: Sequence[mujoco.MjModel], nthread: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """Simulate every model; returns ((M, nstep, J) joint positions as :meth:`run`, rad,
        (M, nstep, 3) the base's planar pose: x, y (m) in the world (the sim's ``odom``) and
        yaw (rad, unwrapped over time)). Raises ModelError for a model without a mobile base."""
        if self.base is None:
            raise ModelError('the model has no mobile base (no drive wheel joints)')
        state = self._rollout(models, nthread)
        poses = self._base_poses(state)
        poses[..., 2] = np.unwrap(poses[..., 2], axis=1)
        return state[:, :, 1 + self.controller.qpos_adr], poses

    @property
    def initial_base_pose(self) -> np.ndarray:
        """(3,) the base's planar pose (x, y m; yaw rad) in the initial state (after settling).
        Raises ModelError for a model without a mobile base."""
        if self.base is None:
            raise ModelError('the model has no mobile base (no drive wheel joints)')
        return self._base_poses(self.initial_state[None])[0]

    def _base_poses(self, states: np.ndarray) -> np.ndarray:
        """(..., 3) planar pose (x, y m; yaw rad in (-pi, pi]) of the base in full physics
        states (..., state size) whose element 0 is the time."""
        adr = 1 + int(self.model.jnt_qposadr[self.base.free_joint])
        quat = states[..., adr + 3:adr + 7]                    # w, x, y, z
        yaw = yaw_from_quaternion(quat[..., 1], quat[..., 2], quat[..., 3], quat[..., 0])
        return np.concatenate([states[..., adr:adr + 2], np.asarray(yaw)[..., None]], axis=-1)

    def _rollout(self, models: Sequence[mujoco.MjModel], nthread: int) -> np.ndarray:
        """(M, nstep, state size) full physics states of one batched ``mujoco.rollout``; on ``backend`` 'warp'
        (M, nstep, 1 + nq): time and ``qpos``, all the callers read
        (:func:`~shadow_twin.simulation.warp_rollout.warp_rollout`, on ``device``)."""
        if self.backend == 'warp':
            return warp_rollout(models, self.initial_state, np.stack([self.control(m) for m in models]), self.device)
        nthread = max(1, min(nthread, len(models)))
        while len(self._datas) < nthread:
            self._datas.append(mujoco.MjData(self.model))
        controls = np.stack([self.control(m) for m in models])
        state, _ = mujoco.rollout.rollout(list(models), self._datas[:nthread], self.initial_state, controls)
        return state

    def on_model(self, model: mujoco.MjModel, controller: SimController) -> 'TrajectorySimulator':
        """The same run on ``model`` (converted by ``controller``), e.g. one with parts frozen
        (:func:`shadow_twin.model.reduction.frozen_spec`): the trajectory's joints and initial positions that
        ``controller`` does not drive are left out; the backend is kept."""
        arguments = dict(self._arguments)
        trajectory = arguments['trajectory']
        if trajectory is not None:
            driven = [j for j in trajectory.joint_names if j in controller.joint_names]
            arguments['trajectory'] = trajectory.subset(driven) if driven else None
        out = TrajectorySimulator(model, controller, **arguments)
        out.backend, out.device = self.backend, self.device
        return out

    def model_copies(self, count: int) -> list[mujoco.MjModel]:
        """``count`` independent copies of the model, to set model parameters on in place."""
        return [copy.copy(self.model) for _ in range(count)]


def _wheel_columns(controller: SimController, base: SimMobileBase) -> list[int]:
    """Columns of ``base``'s drive wheels (left, right) among ``controller``'s joints."""
    return [controller.joint_names.index(controller.joint_map.to_ros(n)) for n in base.wheel_names]
