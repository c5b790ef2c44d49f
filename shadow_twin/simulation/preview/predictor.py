"""Goal preview: simulate a goal in a copy of the live model before anything moves (ROS-free).

:class:`GoalPredictor` holds a copy of the MJCF the sim bridge runs (the hand, or the whole cell),
converted by the same :class:`~shadow_twin.control.controller.SimController` with the same drive
gains file, plus one ``jointactuatorfrc`` sensor per driven joint (sensors do not change the
dynamics; they give the predicted effort at every step). :meth:`GoalPredictor.predict` runs a
:class:`PreviewGoal` from a given start state (the sim's joint states and odometry):

* the joints through the offline simulator
  (:class:`~shadow_twin.simulation.offline.TrajectorySimulator`: the control sequence of the live
  bridge, replayed by ``mujoco.rollout`` in C), at the arm's speed scaling for the speed-scaled
  joints, as the live run;
* a base part closed-loop, as the twin drives it: the twin's
  :class:`~shadow_twin.control.base.follower.BaseTrajectoryFollower` ticks at ``control_rate`` on
  the predicted odometry, its twist goes through the sim's
  :class:`~shadow_twin.simulation.mobile_base.SimMobileBase` (saturation, command latency) to the
  wheel drives, and the physics runs ``mujoco.rollout`` between ticks.

The goal and the result (:class:`~shadow_twin.simulation.preview.goal.PreviewGoal`,
:class:`~shadow_twin.simulation.preview.goal.PredictedRun`) are :mod:`shadow_twin.simulation.preview.goal`'s;
the result is judged by :mod:`shadow_twin.simulation.preview.checks`.
Typical cost on a 2-core PC (simulation and checks): a 5 s goal of the hand 70-120 ms, of the cell with
a base part 200 ms (``benchmarks/preview.py``, ``docs/preview.md``).

Units: rad, rad/s, N m, m, m/s, s.
"""

from __future__ import annotations

import copy
import math
import threading
from typing import Sequence

import mujoco
import mujoco.rollout
import numpy as np

from shadow_twin.common.errors import ModelError
from shadow_twin.control.base.follower import BaseTrajectoryFollower
from shadow_twin.control.base.trajectory import yaw_from_quaternion
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.model.scene import free_joint_name
from shadow_twin.simulation.offline import FULL_STATE, TrajectorySimulator
from shadow_twin.simulation.preview.base_rest import rest_base
from shadow_twin.simulation.preview.base_slip import WheelSlip
from shadow_twin.simulation.preview.config import PreviewConfig
from shadow_twin.simulation.preview.contacts import ContactChecker
from shadow_twin.simulation.preview.goal import BasePart, PredictedRun, PreviewGoal, StartState
from shadow_twin.simulation.preview.grasp import GraspWatch

#: Prefix of the effort sensors added to the preview copy.
EFFORT_SENSOR_PREFIX = 'preview_effort_'


def add_effort_sensors(spec: mujoco.MjSpec, joints: Sequence[str]) -> None:
    """Add a ``jointactuatorfrc`` sensor (N m: the net actuator force on the joint) per MJCF joint
    in ``joints`` to ``spec``, named :data:`EFFORT_SENSOR_PREFIX` + joint."""
    for name in joints:
        spec.add_sensor(name=EFFORT_SENSOR_PREFIX + name, type=mujoco.mjtSensor.mjSENS_JOINTACTFRC,
                        objtype=mujoco.mjtObj.mjOBJ_JOINT, objname=name)


class GoalPredictor:
    """Predicts goals on a copy of the live model (module doc). Thread-safe: predictions on several
    threads at once each use their own scratch data (the model is only read).

    Args:
        spec: the MJCF the sim runs, uncompiled (``TwinModel(path).spec`` or ``build_cell_spec()``);
            it is copied, the original is not changed.
        gains: the drive gains the sim bridge uses (its ``gains_file``).
        config: the checks' figures (also ``settle_time``).
        joint_map: ROS <-> MJCF joint names (identity by default).
        interpolation: trajectory sampling of the sim bridge ('auto' as the JTC).
    Raises:
        ModelError: the spec does not compile. ConfigError: bad gains.
    """

    def __init__(self, spec: mujoco.MjSpec, gains: ControllerGains | None = None,
                 config: PreviewConfig | None = None, joint_map: JointNameMap | None = None,
                 interpolation: str = 'auto') -> None:
        self.config = config or PreviewConfig()
        self.interpolation = interpolation
        spec = spec.copy()
        try:
            probe = spec.compile()
        except Exception as exc:
            raise ModelError(f'the preview model does not compile: {exc}') from None
        driven = SimController(copy.copy(probe), gains, joint_map)
        mjcf_joints = [probe.joint(int(j)).name for j in driven.joint_ids]
        add_effort_sensors(spec, mjcf_joints)
        try:
            self.model = spec.compile()
        except Exception as exc:
            raise ModelError(f'the preview model does not compile with its effort sensors: {exc}') from None
        #: The driven model (the same conversion as the live sim's).
        self.controller = SimController(self.model, gains, joint_map)
        rest_base(self.model, self.controller)     # a start places the base where it rests on its wheels
        self.sensor_adr = np.array([self.model.sensor_adr[self.model.sensor(EFFORT_SENSOR_PREFIX + n).id]
                                    for n in mjcf_joints], dtype=int)
        #: The contact check's copy of the model (every collision geom colliding).
        self.contacts = ContactChecker(self.model, self.config)
        #: The grasp check (held scene objects; inactive without any).
        self.grasps = GraspWatch(self.model, self.config)
        #: The base's wheel slip (inactive without a mobile base).
        self.slips = WheelSlip(self.model)
        self._scratch = threading.local()     # each thread its own MjData: the watch and requests run at once

    @property
    def data(self) -> mujoco.MjData:
        """This thread's scratch MjData of the rollouts."""
        return self._thread_data('data')

    @property
    def _probe(self) -> mujoco.MjData:
        """This thread's MjData for setting up a start state."""
        return self._thread_data('probe')

    def _thread_data(self, name: str) -> mujoco.MjData:
        data = getattr(self._scratch, name, None)
        if data is None:
            data = mujoco.MjData(self.model)
            setattr(self._scratch, name, data)
        return data

    @property
    def joint_names(self) -> list[str]:
        """ROS names of the driven joints."""
        return list(self.controller.joint_names)

    def predict(self, goal: PreviewGoal) -> PredictedRun:
        """Simulate ``goal`` (module doc) for its duration plus the goal-tolerance window (the goal's
        ``goal_time``, at most ``config.settle_time``; ``config.settle_time`` when it has none), or
        the window of it that ``goal.time_offset`` and ``goal.horizon`` name.

        Raises:
            TrajectoryError: trajectory joints the model does not drive.
            ValueError: a speed scaling outside (0, 1], a negative or non-finite offset or horizon.
        """
        if not 0.0 < goal.speed_scaling <= 1.0:
            raise ValueError(f'speed scaling must be in (0, 1], got {goal.speed_scaling}')
        offset = float(goal.time_offset)
        if not (math.isfinite(offset) and offset >= 0.0):
            raise ValueError(f'time_offset must be finite and >= 0, got {goal.time_offset}')
        if goal.horizon is not None and not (math.isfinite(goal.horizon) and goal.horizon > 0):
            raise ValueError(f'horizon must be finite and > 0, got {goal.horizon}')
        traj = goal.trajectory
        scaled = [] if traj is None else [j for j in traj.joint_names if j in set(goal.scaled_joints)]
        scaled_offset = offset if goal.scaled_offset is None else float(goal.scaled_offset)
        end = 0.0
        if traj is not None:
            end = (offset + max(0.0, traj.duration - scaled_offset) / goal.speed_scaling) if scaled else traj.duration
        if goal.base is not None:
            end = max(end, goal.base.trajectory.duration)
        goal_time = 0.0 if goal.tolerances is None else goal.tolerances.goal_time
        if goal.base is not None:
            goal_time = max(goal_time, goal.base.tolerances.goal_time)
        window = self.config.settle_time if goal_time <= 0 else min(goal_time, self.config.settle_time)
        dt = self.model.opt.timestep
        goal_end = end + window + dt
        duration = max(goal_end - offset, dt)
        if goal.horizon is not None:
            duration = min(duration, goal.horizon)
        if traj is not None and goal.trajectory_start is not None:
            given = {**goal.start.positions, **goal.trajectory_start}
            traj = traj.with_start([float(given.get(j, traj.positions[0][k])) for k, j in enumerate(traj.joint_names)])
        sim = TrajectorySimulator(self.model, self.controller, traj, duration, goal.start.positions,
                                  self.interpolation, goal.start.velocities, time_offset=offset)
        if scaled and (goal.speed_scaling != 1.0 or scaled_offset != offset):
            self._scale(sim, traj, scaled, goal.speed_scaling, scaled_offset)
        self._hold(sim, traj, goal.start.holds)
        if goal.start.full_state is not None:
            sim.initial_state[:] = goal.start.full_state
        else:
            self._place_base(sim, goal.start)
            self._place_objects(sim, goal.start)
        if goal.base is None:
            state, sensors = mujoco.rollout.rollout(self.model, self.data, sim.initial_state,
                                                    sim.control(self.model))
            state, sensors = state[0], sensors[0]
            base = None
        else:
            state, sensors, base = self._run_base(sim, goal.base, offset)
        nq, nv = self.model.nq, self.model.nv
        qpos = state[:, 1:1 + nq]
        qvel = state[:, 1 + nq:1 + nq + nv]
        c = self.controller
        run = PredictedRun(times=sim.times.copy(), joint_names=list(c.joint_names),
                           positions=qpos[:, c.qpos_adr], velocities=qvel[:, c.dof_adr],
                           efforts=sensors[:, self.sensor_adr], desired_positions=sim.desired_positions,
                           desired_velocities=sim.desired_velocities, qpos=qpos,
                           goal_joints=[] if traj is None else list(traj.joint_names), end_time=end,
                           final_state=state[-1].copy() if len(state) else None, goal_end=goal_end)
        if sim.base is not None:
            adr = int(self.model.jnt_qposadr[sim.base.free_joint])
            dof = int(self.model.jnt_dofadr[sim.base.free_joint])
            quat = qpos[:, adr + 3:adr + 7]
            yaw = np.unwrap(yaw_from_quaternion(quat[:, 1], quat[:, 2], quat[:, 3], quat[:, 0]))
            run.base_poses = np.column_stack([qpos[:, adr], qpos[:, adr + 1], yaw])
            run.base_speeds = qvel[:, dof] * np.cos(yaw) + qvel[:, dof + 1] * np.sin(yaw)
        if base is not None:
            run.base_commands, run.base_verdict, run.base_reference, run.base_done_at = base
        return run

    def hold_run(self, goal: PreviewGoal, nstep: int) -> np.ndarray:
        """(nstep, J) predicted positions of the driven joints, rad, when every joint holds where it
        starts (no goal: what the start state's own motion does, e.g. a finger still swinging into
        its stop), from the same start as :meth:`predict` of ``goal``; the base's wheels hold."""
        duration = max(1, int(nstep)) * self.model.opt.timestep
        sim = TrajectorySimulator(self.model, self.controller, None, duration, goal.start.positions,
                                  self.interpolation, goal.start.velocities, time_offset=goal.time_offset)
        if goal.start.full_state is not None:
            sim.initial_state[:] = goal.start.full_state
        else:
            self._place_base(sim, goal.start)
            self._place_objects(sim, goal.start)
        state, _ = mujoco.rollout.rollout(self.model, self.data, sim.initial_state, sim.control(self.model))
        return state[0][:, 1:1 + self.model.nq][:, self.controller.qpos_adr]

    def _scale(self, sim: TrajectorySimulator, traj: JointTrajectory, scaled: list[str], scaling: float,
               scaled_offset: float) -> None:
        """Run the time of the ``scaled`` joints at ``scaling`` (the live sampler's ScaledClock at a
        constant scaling) from their trajectory time ``scaled_offset`` s at the simulation's start:
        their desired state at t is the trajectory's at ``scaled_offset + scaling * t``."""
        columns = [self.controller.joint_names.index(j) for j in scaled]
        own = [traj.joint_names.index(j) for j in scaled]
        part = JointTrajectory(scaled, traj.times, traj.positions[:, own],
                               None if traj.velocities is None else traj.velocities[:, own],
                               None if traj.accelerations is None else traj.accelerations[:, own])
        part = part.with_start(sim.start_positions[columns])
        t = scaled_offset + np.arange(sim.nstep) * sim.dt * scaling
        pos, vel, _ = part.sample(t, self.interpolation)
        sim.desired_positions[:, columns] = pos
        sim.desired_velocities[:, columns] = vel * scaling

    def _place_base(self, sim: TrajectorySimulator, start: StartState) -> None:
        """Put the base at the start state's pose and twist in ``sim.initial_state``."""
        if sim.base is None or start.base_pose is None:
            return
        data = self._probe
        mujoco.mj_setState(self.model, data, sim.initial_state, FULL_STATE)
        pose = [float(v) for v in start.base_pose]
        adr = int(self.model.jnt_qposadr[sim.base.free_joint])
        dof = int(self.model.jnt_dofadr[sim.base.free_joint])
        if len(pose) == 7:
            data.qpos[adr:adr + 7] = pose
        elif len(pose) == 3:
            sim.base.place(data, *pose)
        else:
            raise ValueError(f'base_pose needs 3 (x, y, yaw) or 7 (x, y, z, qw, qx, qy, qz) values, got {len(pose)}')
        if start.base_twist is not None:
            forward, lateral, omega = (float(v) for v in start.base_twist)
            w, x, y, z = data.qpos[adr + 3:adr + 7]
            yaw = yaw_from_quaternion(x, y, z, w)
            data.qvel[dof:dof + 6] = 0.0
            data.qvel[dof] = forward * math.cos(yaw) - lateral * math.sin(yaw)
            data.qvel[dof + 1] = forward * math.sin(yaw) + lateral * math.cos(yaw)
            data.qvel[dof + 5] = omega            # body-frame angular velocity; the base stands level
        sim.base.stop()
        self.controller.hold_integrators(self.model, data)
        mujoco.mj_forward(self.model, data)
        mujoco.mj_getState(self.model, data, sim.initial_state, FULL_STATE)

    def _hold(self, sim: TrajectorySimulator, traj: JointTrajectory | None, holds) -> None:
        """Command the driven joints in ``holds`` ({ROS joint: rad}) that ``traj`` does not name to their
        setpoints through the whole run (:attr:`StartState.holds`). Raises ValueError: a setpoint that is
        not finite."""
        named = set() if traj is None else set(traj.joint_names)
        for joint, value in holds.items():
            if joint in named or joint not in self.controller.joint_names:
                continue
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f'the hold setpoint of {joint} is not finite: {value}')
            sim.desired_positions[:, self.controller.joint_names.index(joint)] = value

    def _place_objects(self, sim: TrajectorySimulator, start: StartState) -> None:
        """Put the start state's objects (free scene objects) at their poses and velocities (at rest when
        none is given) in ``sim.initial_state``. Raises ValueError: an object the model has no free joint
        for, or a pose that is not 7 or 13 finite numbers with a non-zero quaternion."""
        if not start.objects:
            return
        data = self._probe
        mujoco.mj_setState(self.model, data, sim.initial_state, FULL_STATE)
        for name, pose in start.objects.items():
            joint = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, free_joint_name(str(name)))
            if joint < 0:
                raise ValueError(f'start object {name!r} is not a free object of the preview model')
            values = np.asarray(pose, dtype=float).reshape(-1)
            if values.shape not in ((7,), (13,)) or not np.all(np.isfinite(values)) or \
                    not np.linalg.norm(values[3:7]) > 0:
                raise ValueError(f'start object {name!r}: a pose is 7 finite numbers (x, y, z, qw, qx, qy, qz), '
                                 f'or 13 with its velocity (vx, vy, vz, wx, wy, wz), got {list(values)}')
            adr, dof = int(self.model.jnt_qposadr[joint]), int(self.model.jnt_dofadr[joint])
            quat = values[3:7] / np.linalg.norm(values[3:7])
            data.qpos[adr:adr + 3], data.qpos[adr + 3:adr + 7] = values[:3], quat
            data.qvel[dof:dof + 6] = 0.0
            if len(values) == 13:          # a free joint's angular velocity is in the body's frame
                rotation = np.empty(9)
                mujoco.mju_quat2Mat(rotation, quat)
                data.qvel[dof:dof + 3] = values[7:10]
                data.qvel[dof + 3:dof + 6] = rotation.reshape(3, 3).T @ values[10:13]
        mujoco.mj_forward(self.model, data)
        mujoco.mj_getState(self.model, data, sim.initial_state, FULL_STATE)

    def _run_base(self, sim: TrajectorySimulator, part: BasePart, offset: float = 0.0):
        """Closed-loop run: the follower ticks on the predicted odometry (module doc), its trajectory
        ``offset`` s in at the simulation's start. Returns ((N, state) states, (N, nsensor) sensor
        data, (commands, verdict, reference, done_at)); times of the commands and ``done_at`` from
        the goal's start, s."""
        if sim.base is None:
            raise ModelError('the goal has a base part but the preview model has no mobile base')
        model, base, probe = self.model, sim.base, self._probe
        wheels = [self.controller.joint_names.index(self.controller.joint_map.to_ros(n)) for n in base.wheel_names]
        mujoco.mj_setState(model, probe, sim.initial_state, FULL_STATE)
        start = base.odometry(probe).pose
        start = start if part.start_pose is None else tuple(part.start_pose)
        follower = BaseTrajectoryFollower(part.trajectory, -offset, start_pose=start, gains=part.gains,
                                          limits=part.limits, tolerances=part.tolerances, geometry=part.geometry,
                                          command_latency=part.command_latency)
        base.stop()
        tick = max(1, int(round(1.0 / (part.control_rate * sim.dt))))
        states, sensors, commands, done_at = [], [], [], None
        state = sim.initial_state.copy()
        for first in range(0, sim.nstep, tick):
            last = min(first + tick, sim.nstep)
            t = first * sim.dt
            mujoco.mj_setState(model, probe, state, FULL_STATE)
            odometry = base.odometry(probe)
            step = follower.update(t, odometry.pose, (odometry.twist.v, odometry.twist.omega))
            if follower.done and done_at is None:
                done_at = offset + t
            base.command(step.command, t)
            commands.append((offset + t, step.command.v, step.command.omega))
            step_times = np.arange(first, last) * sim.dt
            sim.desired_velocities[first:last, wheels] = [base.wheel_rates(float(s)) for s in step_times]
            ctrl = self.controller.ctrl(model, sim.desired_positions[first:last], sim.desired_velocities[first:last])
            chunk, sens = mujoco.rollout.rollout(model, self.data, state, ctrl)
            states.append(chunk[0])
            sensors.append(sens[0])
            state = chunk[0, -1]
        return (np.concatenate(states), np.concatenate(sensors),
                (np.array(commands), follower.verdict, follower.trajectory, done_at))
