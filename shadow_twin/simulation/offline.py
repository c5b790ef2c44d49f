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

from shadow_twin.common.errors import TrajectoryError
from shadow_twin.control.controller import SimController
from shadow_twin.control.trajectory import JointTrajectory

FULL_STATE = mujoco.mjtState.mjSTATE_FULLPHYSICS


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

    Args:
        model: compiled model already converted by ``controller``.
        controller: the simulated controller.
        trajectory: trajectory in ROS joint names.
        duration: simulated time, s (>= trajectory duration is typical), from ``time_offset``.
        initial_positions: {ROS joint: rad}; others from ``model.qpos0``.
        interpolation: trajectory sampling (see ``JointTrajectory.sample``).
        initial_velocities: {ROS joint: rad/s} at the start (others 0); for a start during a motion.
        time_offset: ``time_from_start`` at which the simulation starts, s (>= 0).
    Raises:
        TrajectoryError: trajectory joints the controller does not drive.
        ValueError: negative or non-finite ``time_offset``.
    """

    def __init__(self, model: mujoco.MjModel, controller: SimController, trajectory: JointTrajectory,
                 duration: float, initial_positions: Mapping[str, float] | None = None,
                 interpolation: str = 'auto', initial_velocities: Mapping[str, float] | None = None,
                 time_offset: float = 0.0) -> None:
        unknown = [j for j in trajectory.joint_names if j not in controller.joint_names]
        if unknown:
            raise TrajectoryError(f'trajectory joint(s) {unknown} are not driven by the model '
                                  f'(driven: {controller.joint_names})')
        if not (np.isfinite(time_offset) and time_offset >= 0):
            raise ValueError(f'time_offset must be finite and >= 0, got {time_offset}')
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
        mujoco.mj_forward(model, data)
        self.initial_state = np.empty(mujoco.mj_stateSize(model, FULL_STATE))
        mujoco.mj_getState(model, data, self.initial_state, FULL_STATE)
        start = data.qpos[controller.qpos_adr].copy()
        #: (J,) initial positions of ``controller.joint_names`` (at ``time_offset``), rad.
        self.start_positions = start
        columns = [controller.joint_names.index(j) for j in trajectory.joint_names]
        self.desired_positions = np.repeat(start[None], self.nstep, axis=0)
        self.desired_velocities = np.zeros_like(self.desired_positions)
        traj = trajectory.with_start(start[columns])
        pos, vel, _ = traj.sample(self.time_offset + np.arange(self.nstep) * self.dt, interpolation)
        self.desired_positions[:, columns] = pos
        self.desired_velocities[:, columns] = vel
        self._datas: list[mujoco.MjData] = []

    def control(self, model: mujoco.MjModel) -> np.ndarray:
        """(nstep, nu) control sequence for ``model`` (its current gains)."""
        return self.controller.ctrl(model, self.desired_positions, self.desired_velocities)

    def run(self, models: Sequence[mujoco.MjModel], nthread: int = 1) -> np.ndarray:
        """Simulate every model; returns (len(models), nstep, J) joint positions (rad).

        J follows ``controller.joint_names``; row k is the state at ``times[k]``.
        """
        nthread = max(1, min(nthread, len(models)))
        while len(self._datas) < nthread:
            self._datas.append(mujoco.MjData(self.model))
        controls = np.stack([self.control(m) for m in models])
        state, _ = mujoco.rollout.rollout(list(models), self._datas[:nthread], self.initial_state,
                                          controls)
        qpos_columns = 1 + self.controller.qpos_adr  # state = [time, qpos, qvel, act, ...]
        return state[:, :, qpos_columns]

    def model_copies(self, count: int) -> list[mujoco.MjModel]:
        """``count`` independent copies of the model, to set parameters on in place."""
        return [copy.copy(self.model) for _ in range(count)]
