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
code the JTC gives a preempted goal). An aborted goal (tolerance violation, a
reset, shutdown) holds the current position, as the JTC does, unless a newer
goal has the simulation. Intake, preemption, cancel and results are
:class:`shadow_twin.ros.action_server.FollowJointTrajectoryServer`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from builtin_interfaces.msg import Time as TimeMsg
from rclpy.node import Node

from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.control import jtc
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.ros.action_server import AcceptedGoal, FollowJointTrajectoryServer
from shadow_twin.simulation.live import LiveSimulation

#: Seconds a new goal waits for the one it preempted to stop (holding is immediate).
HANDOVER_TIMEOUT = 1.0


@dataclass
class SimPlan:
    """An accepted goal of the simulated controller.

    Attributes:
        trajectory: the goal (ROS joint names; times s from its start).
        tolerances: its path/goal tolerances.
        start_time: sim time of its start, s.
        token: the simulation's token of the trajectory once started.
    """

    trajectory: JointTrajectory
    tolerances: jtc.Tolerances
    start_time: float
    token: int = 0


class SimulatedTrajectoryController(FollowJointTrajectoryServer):
    """FollowJointTrajectory action server on a live simulation.

    Args:
        node: the owning node (its logger is used).
        sim: the simulation to drive.
        action_name: action name, e.g. ``/sim/follow_joint_trajectory``.
        settings: callable returning the current settings, a dict with
            ``constraints`` (for ``jtc.default_tolerances``),
            ``velocity_limits`` ({joint: rad/s}), ``allow_partial_joints_goal``
            (bool) and ``feedback_rate`` (Hz); read for each goal.
        now_s: callable giving "now" on the clock of goal header stamps, s.
        to_sim_time: callable mapping a non-zero header stamp (``builtin_interfaces/Time``)
            to sim time, s.
        stamp_of: callable mapping a sim time (s) to a ``builtin_interfaces/Time``.
    """

    def __init__(self, node: Node, sim: LiveSimulation, action_name: str,
                 settings: Callable[[], dict], now_s: Callable[[], float],
                 to_sim_time: Callable[[TimeMsg], float], stamp_of: Callable[[float], TimeMsg]) -> None:
        self.sim = sim
        self._settings = settings
        self._now_s = now_s
        self._to_sim_time = to_sim_time
        self._stamp_of = stamp_of
        super().__init__(node, action_name, HANDOVER_TIMEOUT)

    # -- hooks --------------------------------------------------------------------------------------
    def validate(self, request) -> SimPlan:
        settings = self._settings()
        joints = list(self.sim.controlled_joints)
        try:
            limits = jtc.joint_limits_from_model(self.sim.model, [self.sim.joint_map.to_mjcf(j) for j in joints],
                                                 settings['velocity_limits'], joint_map=self.sim.joint_map)
        except ShadowTwinError as exc:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'velocity_limits parameter is invalid: {exc}') from None
        names = list(request.trajectory.joint_names)
        current = None
        if all(j in joints for j in names):
            current = dict(zip(names, self.sim.positions(names)))
        trajectory = jtc.validate_goal_msg(request.trajectory, joints, limits, self._now_s(),
                                           settings['allow_partial_joints_goal'], current_positions=current)
        tolerances = jtc.tolerances_for_goal(settings['constraints'], request, joints)
        stamp = request.trajectory.header.stamp
        unstamped = stamp.sec == 0 and stamp.nanosec == 0
        # a stamp in the past (the goal arrived late) is joined mid-way, as the JTC does
        start = self.sim.time if unstamped else self._to_sim_time(stamp)
        return SimPlan(trajectory, tolerances, start)

    def start(self, goal: AcceptedGoal) -> str | None:
        plan: SimPlan = goal.plan
        with self.lock:
            try:
                plan.token = self.sim.set_trajectory(plan.trajectory, plan.start_time)
            except ShadowTwinError as exc:   # the model was reloaded in between without these joints
                return f'cannot start the trajectory: {exc}'
        delay = plan.start_time - self.sim.time
        self.log.info(f'accepted goal: {len(plan.trajectory.joint_names)} joints, '
                      f'{len(plan.trajectory.times)} points, {plan.trajectory.duration:.3f} s'
                      + (f', starting in {delay:.3f} s (header stamp)' if delay > 1e-6 else
                         f', joined {-delay:.3f} s after its stamped start (arrived late)' if delay < -1e-6 else ''))
        return None

    def step(self, goal: AcceptedGoal) -> jtc.Verdict | None:
        plan: SimPlan = goal.plan
        sample = self.sim.tracking(plan.token)
        if sample is None:
            return jtc.Verdict.aborted('trajectory stopped by the simulation (reset or model reload)')
        self.publish_feedback(goal, self._stamp_of(sample.sim_time), sample.joint_names,
                              sample.sim_time - sample.start_time,
                              (sample.desired_position, sample.desired_velocity, sample.desired_acceleration),
                              (sample.actual_position, sample.actual_velocity))
        names = list(sample.joint_names)
        time_since_end = sample.sim_time - sample.end_time
        if time_since_end >= 0:
            verdict = jtc.check_goal(names, plan.trajectory.positions[-1], sample.actual_position,
                                     sample.actual_velocity, plan.tolerances, time_since_end)
        elif sample.sim_time >= sample.start_time:
            verdict = jtc.check_path(names, sample.desired_position, sample.desired_velocity,
                                     sample.actual_position, sample.actual_velocity, plan.tolerances)
        else:
            return None
        return None if verdict.outcome is jtc.GoalOutcome.RUNNING else verdict

    def stop(self, goal: AcceptedGoal) -> None:
        """Hold the current position, unless a newer goal has the simulation."""
        self._hold_if_active(goal)

    def cancel(self, goal: AcceptedGoal) -> str:
        self._hold_if_active(goal)
        return 'goal canceled; holding position'

    def period(self) -> float:
        return 1.0 / float(self._settings()['feedback_rate'])

    def _hold_if_active(self, goal: AcceptedGoal) -> None:
        with self.lock:
            if self.is_active(goal):
                self.sim.cancel()

    def destroy(self) -> None:
        """Abort a running goal and destroy the action server."""
        self.stop_active('the simulation node is shutting down', wait=1.0)
        self.server.destroy()
