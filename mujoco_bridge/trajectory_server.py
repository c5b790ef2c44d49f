"""The simulated joint trajectory controller: a ``control_msgs/action/FollowJointTrajectory``
server that drives a :class:`shadow_twin.simulation.live.LiveSimulation`.

Semantics follow ros2_controllers' joint_trajectory_controller (through
``shadow_twin.control.jtc``): goals are validated (joint names, points, stamps, model
position limits, optional velocity limits) and rejected when invalid; an
accepted goal starts at ``header.stamp`` if that is in the future, else now, from
the current joint positions; feedback (desired, actual, error) is published at
``feedback_rate``; a path tolerance violation aborts with PATH_TOLERANCE_VIOLATED,
after the last point the goal succeeds when every joint is within its goal
tolerance, or aborts with GOAL_TOLERANCE_VIOLATED once ``goal_time`` has passed.
A cancel holds the current position and ends the goal as canceled. A new goal
preempts the running one, which is aborted (INVALID_GOAL, "preempted", the
code the JTC gives a preempted goal). Aborts on tolerance violations hold the
current position, as the JTC does.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from trajectory_msgs.msg import JointTrajectoryPoint

from shadow_twin.control import jtc
from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.simulation.live import LiveSimulation, TrackingSample
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.ros.action_server import screen_goal
from shadow_twin.ros.conversions import doubles, duration_msg as duration

Result = FollowJointTrajectory.Result


@dataclass
class ActiveGoal:
    """A goal being executed: its handle, trajectory token in the simulation and tolerances."""

    handle: object
    trajectory: JointTrajectory
    tolerances: jtc.Tolerances
    start_time: float                    # sim s
    token: int = 0
    wake: threading.Event = field(default_factory=threading.Event)
    stop_reason: str | None = None       # set when preempted / reset / dropped
    cancelling: bool = False             # cancel accepted by us; the handle may not show it yet


@dataclass
class PendingGoal:
    trajectory: JointTrajectory
    tolerances: jtc.Tolerances
    start_time: float


class SimulatedTrajectoryController:
    """FollowJointTrajectory action server on a live simulation.

    Args:
        node: the owning node (its logger and clock are used).
        sim: the simulation to drive.
        action_name: action name, e.g. ``/sim/follow_joint_trajectory``.
        settings: callable returning the current settings, a dict with
            ``constraints`` (for ``jtc.default_tolerances``),
            ``velocity_limits`` ({joint: rad/s}), ``allow_partial_joints_goal``
            (bool) and ``feedback_rate`` (Hz); read for each goal.
        now_s: callable giving "now" on the clock of goal header stamps, s.
        to_sim_time: callable mapping a header stamp (s on that clock) to sim time, s.
        stamp_of: callable mapping a sim time (s) to a ``builtin_interfaces/Time``.
    """

    def __init__(self, node: Node, sim: LiveSimulation, action_name: str,
                 settings: Callable[[], dict], now_s: Callable[[], float],
                 to_sim_time: Callable[[float], float], stamp_of: Callable[[float], object]) -> None:
        self.node = node
        self.sim = sim
        self.log = node.get_logger()
        self._settings = settings
        self._now_s = now_s
        self._to_sim_time = to_sim_time
        self._stamp_of = stamp_of
        self._lock = threading.Lock()
        self._active: ActiveGoal | None = None
        self._pending: dict[int, PendingGoal] = {}
        self._failed: dict[int, str] = {}       # accepted goals that could not start: reason
        self.group = ReentrantCallbackGroup()
        self.server = ActionServer(
            node, FollowJointTrajectory, action_name, execute_callback=self._execute,
            goal_callback=self._on_goal, handle_accepted_callback=self._on_accepted,
            cancel_callback=self._on_cancel, callback_group=self.group)

    # -- goal intake --------------------------------------------------------------------------
    def _validate(self, goal) -> PendingGoal:
        settings = self._settings()
        joints = list(self.sim.controlled_joints)
        try:
            limits = jtc.joint_limits_from_model(self.sim.model, [self.sim.joint_map.to_mjcf(j) for j in joints],
                                                 settings['velocity_limits'], joint_map=self.sim.joint_map)
        except ShadowTwinError as exc:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'velocity_limits parameter is invalid: {exc}') from None
        names = list(goal.trajectory.joint_names)
        current = None
        if all(j in joints for j in names):
            current = dict(zip(names, self.sim.positions(names)))
        trajectory = jtc.validate_goal_msg(goal.trajectory, joints, limits, self._now_s(),
                                           settings['allow_partial_joints_goal'], current_positions=current)
        try:
            defaults = jtc.default_tolerances(settings['constraints'], joints)
        except ShadowTwinError as exc:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'constraints parameters are invalid: {exc}') from None
        tolerances = jtc.tolerances_from_goal(defaults, goal, joints=joints)
        stamp = goal.trajectory.header.stamp
        stamp_s = stamp.sec + stamp.nanosec * 1e-9
        start = self.sim.time if stamp_s == 0.0 else max(self.sim.time, self._to_sim_time(stamp_s))
        return PendingGoal(trajectory, tolerances, start)

    def _on_goal(self, goal) -> GoalResponse:
        return screen_goal(self._validate, goal, self.log, self._lock, self._pending)

    def _on_accepted(self, handle) -> None:
        with self._lock:
            pending = self._pending.pop(id(handle.request), None)
        if pending is None:  # should not happen; validate again
            try:
                pending = self._validate(handle.request)
            except jtc.GoalRejected as exc:
                self._fail(handle, f'accepted goal failed validation: {exc}')
                return
        goal = ActiveGoal(handle, pending.trajectory, pending.tolerances, pending.start_time)
        with self._lock:
            try:
                goal.token = self.sim.set_trajectory(pending.trajectory, pending.start_time)
            except ShadowTwinError as exc:   # the model was reloaded in between without these joints
                self._failed[id(handle)] = f'cannot start the trajectory: {exc}'
                goal = None
            else:
                previous, self._active = self._active, goal
                if previous is not None:
                    previous.stop_reason = 'preempted by a new goal'
                    previous.wake.set()
        if goal is None:
            handle.execute()
            return
        delay = pending.start_time - self.sim.time
        self.log.info(f'accepted goal: {len(pending.trajectory.joint_names)} joints, '
                      f'{len(pending.trajectory.times)} points, {pending.trajectory.duration:.3f} s'
                      + (f', starting in {delay:.3f} s (header stamp)' if delay > 1e-6 else ''))
        handle.execute()

    def _fail(self, handle, reason: str) -> None:
        """Execute an accepted goal only to abort it with ``reason`` (in the execute callback)."""
        with self._lock:
            self._failed[id(handle)] = reason
        handle.execute()

    def _on_cancel(self, handle) -> CancelResponse:
        with self._lock:
            goal = self._active
            if goal is not None and goal.handle is handle:
                goal.cancelling = True
                self.sim.cancel()
                goal.wake.set()
        self.log.info('cancel requested: holding the current position')
        return CancelResponse.ACCEPT

    # -- external events -------------------------------------------------------------------------
    def stop_active(self, reason: str) -> None:
        """Abort the running goal (if any) because of ``reason`` (e.g. a simulation reset)."""
        with self._lock:
            goal = self._active
            if goal is not None:
                goal.stop_reason = reason
                goal.wake.set()

    @property
    def active(self) -> bool:
        """True while a goal executes."""
        with self._lock:
            return self._active is not None

    # -- execution --------------------------------------------------------------------------------
    def _finish(self, goal: ActiveGoal, state: str, code: int, message: str) -> Result:
        with self._lock:
            if self._active is goal:
                self._active = None
        handle = goal.handle
        result = Result(error_code=code, error_string=message)
        if state == 'canceled':
            handle.canceled()
            self.log.info(f'goal canceled: {message}')
        elif state == jtc.SUCCEEDED:
            handle.succeed()
            self.log.info(f'goal succeeded: {message}')
        else:
            handle.abort()
            self.log.warning(f'goal aborted ({jtc.RESULT_NAMES.get(code, code)}): {message}')
        return result

    def _feedback(self, goal: ActiveGoal, sample: TrackingSample) -> None:
        fb = FollowJointTrajectory.Feedback()
        fb.header.stamp = self._stamp_of(sample.sim_time)
        fb.joint_names = list(sample.joint_names)
        since_start = duration(sample.sim_time - sample.start_time)
        fb.desired = JointTrajectoryPoint(positions=doubles(sample.desired_position),
                                          velocities=doubles(sample.desired_velocity),
                                          accelerations=doubles(sample.desired_acceleration),
                                          time_from_start=since_start)
        fb.actual = JointTrajectoryPoint(positions=doubles(sample.actual_position),
                                         velocities=doubles(sample.actual_velocity), time_from_start=since_start)
        fb.error = JointTrajectoryPoint(positions=doubles(sample.desired_position - sample.actual_position),
                                        velocities=doubles(sample.desired_velocity - sample.actual_velocity),
                                        time_from_start=since_start)
        goal.handle.publish_feedback(fb)

    def _execute(self, handle) -> Result:
        with self._lock:
            failed = self._failed.pop(id(handle), None)
            goal = self._active if self._active is not None and self._active.handle is handle else None
        if failed is not None:
            handle.abort()
            self.log.error(f'goal aborted (INVALID_GOAL): {failed}')
            return Result(error_code=jtc.INVALID_GOAL, error_string=failed)
        if goal is None:  # preempted before it started
            handle.abort()
            return Result(error_code=jtc.INVALID_GOAL, error_string='preempted by a new goal')
        names = list(goal.trajectory.joint_names)
        target = goal.trajectory.positions[-1]
        while True:
            goal.wake.clear()
            if goal.stop_reason is not None:
                return self._finish(goal, jtc.ABORTED, jtc.INVALID_GOAL, goal.stop_reason)
            if goal.cancelling or handle.is_cancel_requested:
                with self._lock:
                    if self._active is goal:
                        self.sim.cancel()
                # the server marks the goal CANCELING only after our cancel callback returned
                deadline = time.monotonic() + 2.0
                while not handle.is_cancel_requested and time.monotonic() < deadline:
                    time.sleep(0.001)
                if handle.is_cancel_requested:
                    return self._finish(goal, 'canceled', jtc.SUCCESSFUL, 'goal canceled; holding position')
                return self._finish(goal, jtc.ABORTED, jtc.INVALID_GOAL, 'goal canceled; holding position')
            sample = self.sim.tracking(goal.token)
            if sample is None:
                return self._finish(goal, jtc.ABORTED, jtc.INVALID_GOAL,
                                    'trajectory stopped by the simulation (reset or model reload)')
            self._feedback(goal, sample)
            time_since_end = sample.sim_time - sample.end_time
            if time_since_end < 0:
                if sample.sim_time >= sample.start_time:
                    state, code, message = jtc.check_path(
                        names, sample.desired_position, sample.desired_velocity, sample.actual_position,
                        sample.actual_velocity, goal.tolerances)
                    if state == jtc.ABORTED:
                        self._hold_if_active(goal)
                        return self._finish(goal, state, code, message)
            else:
                state, code, message = jtc.check_goal(names, target, sample.actual_position,
                                                      sample.actual_velocity, goal.tolerances, time_since_end)
                if state == jtc.ABORTED:
                    self._hold_if_active(goal)
                if state != jtc.RUNNING:
                    return self._finish(goal, state, code, message)
            goal.wake.wait(1.0 / float(self._settings()['feedback_rate']))

    def _hold_if_active(self, goal: ActiveGoal) -> None:
        with self._lock:
            if self._active is goal:
                self.sim.cancel()

    def destroy(self) -> None:
        """Abort a running goal and destroy the action server."""
        self.stop_active('the simulation node is shutting down')
        deadline = time.monotonic() + 1.0
        while self.active and time.monotonic() < deadline:
            time.sleep(0.01)
        self.server.destroy()
