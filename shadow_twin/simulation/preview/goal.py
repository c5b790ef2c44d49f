"""What a goal preview runs and what it gives (ROS-free): :class:`PreviewGoal` (the joint part, the
base part :class:`BasePart` and the :class:`StartState` it starts from, or a window of it) and
:class:`PredictedRun` (the predicted motion, one row per physics step). The simulation is
:mod:`shadow_twin.simulation.preview.predictor`'s; the checks, :mod:`shadow_twin.simulation.preview.checks`'.

Units: rad, rad/s, N m, m, m/s, s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from shadow_twin.control import jtc
from shadow_twin.control.base.follower import BaseTolerances
from shadow_twin.control.base.tracking import TrackingGains
from shadow_twin.control.base.trajectory import BaseLimits, BaseTrajectory
from shadow_twin.control.diff_drive import DiffDriveGeometry
from shadow_twin.control.trajectory import JointTrajectory


@dataclass
class StartState:
    """Where the preview starts: the sim's current state.

    Attributes:
        positions: {ROS joint: rad}; driven joints not given start at ``qpos0``.
        velocities: {ROS joint: rad/s}; others 0.
        base_pose: the base's pose in the world (the sim's ``odom``): (x, y, yaw) m, m, rad, or
            (x, y, z, qw, qx, qy, qz); None: the model's.
        base_twist: (forward m/s, lateral m/s, yaw rate rad/s) in the base frame; None: at rest.
        holds: {ROS joint: rad} the setpoints of driven joints the goal does not name (the controller's
            desired positions: fingers closed past a held object squeeze it); others hold their start
            positions, as the offline simulator's joints do.
        objects: {scene object: (7,) pose x, y, z m, qw, qx, qy, qz in the world, or (13,) that and its
            velocity vx, vy, vz m/s, wx, wy, wz rad/s (world axes)} of free objects (the sim's, e.g. one
            held in a moving hand); without a velocity at rest; others start where the scene puts them.
        full_state: (mj_stateSize(mjSTATE_FULLPHYSICS),) the preview model's whole state to start
            from (a window that continues the previous one: :attr:`PredictedRun.final_state`); it
            replaces the positions, velocities, base pose and objects given above. None: build the
            state from them.
    """

    positions: Mapping[str, float] = field(default_factory=dict)
    velocities: Mapping[str, float] = field(default_factory=dict)
    base_pose: Sequence[float] | None = None
    base_twist: Sequence[float] | None = None
    holds: Mapping[str, float] = field(default_factory=dict)
    objects: Mapping[str, Sequence[float]] = field(default_factory=dict)
    full_state: np.ndarray | None = None


@dataclass
class BasePart:
    """The base part of a goal and how the twin follows it (``config/twin_cell.yaml`` ``base.*``).

    Attributes:
        trajectory: poses in the odometry frame, times from the common start, s.
        tolerances: path/goal tolerances of the base.
        gains, limits, geometry, command_latency: the follower's (see ``BaseTrajectoryFollower``).
        control_rate: follower ticks per s (Hz, > 0).
        start_pose: (x m, y m, yaw rad) of the base when the goal arrived, for a window that starts
            later (:attr:`PreviewGoal.time_offset` > 0); None: the window's start pose.
    """

    trajectory: BaseTrajectory
    tolerances: BaseTolerances = field(default_factory=BaseTolerances)
    gains: TrackingGains = field(default_factory=TrackingGains)
    limits: BaseLimits = field(default_factory=BaseLimits)
    geometry: DiffDriveGeometry = field(default_factory=DiffDriveGeometry)
    command_latency: float = 0.0
    control_rate: float = 50.0
    start_pose: Sequence[float] | None = None


@dataclass
class PreviewGoal:
    """A goal to preview.

    Attributes:
        trajectory: the joint part (ROS names, times from the start), None for a base-only goal.
        tolerances: its path/goal tolerances (``jtc.tolerances_for_goal``), None: the JTC defaults.
        base: the base part, None without one.
        start: the start state.
        speed_scaling: fraction 0..1 at which the time of ``scaled_joints`` runs (the arm's).
        scaled_joints: the goal joints whose time runs at ``speed_scaling``.
        time_offset: s since the goal's start at which this prediction starts (a window of the goal
            ahead of its execution, ``shadow_twin.simulation.preview.windows``); 0: at the start.
        scaled_offset: the speed-scaled joints' trajectory time at ``time_offset``, s (their scaled
            clock); None: ``time_offset``.
        trajectory_start: {ROS joint: rad} the goal joints' positions when the goal started (the
            point the JTC prepends at t = 0); None: the start state's (right for ``time_offset`` 0).
        horizon: s simulated at most from ``time_offset``; None: to the goal's end and its goal-time
            window.
    """

    trajectory: JointTrajectory | None
    tolerances: jtc.Tolerances | None = None
    base: BasePart | None = None
    start: StartState = field(default_factory=StartState)
    speed_scaling: float = 1.0
    scaled_joints: Sequence[str] = ()
    time_offset: float = 0.0
    scaled_offset: float | None = None
    trajectory_start: Mapping[str, float] | None = None
    horizon: float | None = None


@dataclass
class PredictedRun:
    """The predicted motion, one row per physics step.

    Attributes:
        times: (N,) s from the goal's start (the state after each step; a window's begin at its
            ``time_offset``).
        joint_names: the J driven joints (ROS names, the controller's order).
        positions, velocities: (N, J) rad, rad/s.
        efforts: (N, J) actuator effort on each joint, N m (unclamped where the model is).
        desired_positions, desired_velocities: (N, J) what the controller was commanded.
        qpos: (N, nq) the model's full positions (for the contact check).
        goal_joints: the goal's joints (a subset of ``joint_names``).
        end_time: s at which the last goal joint's trajectory ends (speed scaling included).
        base_poses: (N, 3) x, y m, yaw rad (unwrapped) of the base, None without a base.
        base_speeds: (N,) forward speed of the base, m/s, None without a base.
        base_commands: (T, 3) follower ticks: t s, v m/s, omega rad/s; None without a base part.
        base_verdict: the follower's verdict at the end, None without a base part.
        base_reference: the base trajectory as the follower ran it, None without a base part.
        base_done_at: s at which the follower's verdict was decided, None while it ran.
        final_state: the model's whole state after the last step (mjSTATE_FULLPHYSICS), the start of
            a next window; None when nothing was simulated.
        goal_end: s from the goal's start at which the simulated span of the whole goal ends (its
            end plus the goal-time window): a run whose ``times[-1]`` reaches it covers the goal.
    """

    times: np.ndarray
    joint_names: list[str]
    positions: np.ndarray
    velocities: np.ndarray
    efforts: np.ndarray
    desired_positions: np.ndarray
    desired_velocities: np.ndarray
    qpos: np.ndarray
    goal_joints: list[str]
    end_time: float
    base_poses: np.ndarray | None = None
    base_speeds: np.ndarray | None = None
    base_commands: np.ndarray | None = None
    base_verdict: jtc.Verdict | None = None
    base_reference: BaseTrajectory | None = None
    base_done_at: float | None = None
    final_state: np.ndarray | None = None
    goal_end: float = 0.0
