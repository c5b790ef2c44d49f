"""The simulated joint trajectory controller: a ``control_msgs/action/FollowJointTrajectory``
server that drives a :class:`shadow_twin.simulation.live.simulation.LiveSimulation`.

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
code the JTC gives a preempted goal), **at its start**: a goal stamped ahead waits in
the simulation's queue (``shadow_twin.simulation.trajectory_queue``) while the running
one goes on, and a cancel before its start leaves the running one untouched (the twin
takes back the parts of a goal another controller did not accept, and the running
goal must not notice). ``late_start_limit`` >= 0 rejects a stamped goal whose start
passed more than that long ago when it arrives (the twin stamps its parts ahead and
gives up on those not accepted ``accept_margin`` before the start: such a part must
not start; -1 joins any late goal mid-way, the JTC's rule). An aborted goal (tolerance
violation, a reset, shutdown) holds the current position, as the JTC does, unless a
newer goal has the simulation. Intake, cancel and results are
:class:`shadow_twin.ros.action_server.FollowJointTrajectoryServer`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from builtin_interfaces.msg import Time as TimeMsg
from rclpy.node import Node

from mujoco_bridge.parameters import BridgeSettings
from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.control import jtc
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.ros.action_server import PREEMPTED, AcceptedGoal, FollowJointTrajectoryServer
from shadow_twin.simulation import trajectory_queue
from shadow_twin.simulation.live.simulation import LiveSimulation

#: Seconds a new goal waits for the one it preempted to stop (holding is immediate).
HANDOVER_TIMEOUT = 1.0


@dataclass
class SimGoalState:
    """The goal state of the simulated controller for an accepted goal.

    Attributes:
        trajectory: the goal (ROS joint names; times s from its start).
        tolerances: its path/goal tolerances.
        start_time: sim time of its start, s.
        stamped: the goal had a header stamp (else it starts when it is accepted).
        token: the simulation's token of the trajectory (reserved at validation: its order).
    """

    trajectory: JointTrajectory
    tolerances: jtc.Tolerances
    start_time: float
    token: int = 0
    stamped: bool = True


class SimulatedTrajectoryController(FollowJointTrajectoryServer):
    """FollowJointTrajectory action server on a live simulation.

    Args:
        node: the owning node (its logger is used).
        sim: the simulation to drive.
        action_name: action name, e.g. ``/sim/follow_joint_trajectory``.
        settings: callable returning the bridge's current
            :class:`~mujoco_bridge.parameters.BridgeSettings`: its ``constraints`` (for
            ``jtc.default_tolerances``), ``velocity_limits`` ({joint: rad/s}),
            ``allow_partial_joints_goal`` (bool), ``feedback_rate`` (Hz) and ``late_start_limit``
            (s, -1: none) are read for each goal.
        now_s: callable giving "now" on the clock of goal header stamps, s.
        to_sim_time: callable mapping a non-zero header stamp (``builtin_interfaces/Time``)
            to sim time, s.
        stamp_of: callable mapping a sim time (s) to a ``builtin_interfaces/Time``.
    """

    preempts_on_accept = False      # a goal preempts at its start (the simulation's queue)

    def __init__(self, node: Node, sim: LiveSimulation, action_name: str,
                 settings: Callable[[], BridgeSettings], now_s: Callable[[], float],
                 to_sim_time: Callable[[TimeMsg], float], stamp_of: Callable[[float], TimeMsg]) -> None:
        self.sim = sim
        self._settings = settings
        self._now_s = now_s
        self._to_sim_time = to_sim_time
        self._stamp_of = stamp_of
        super().__init__(node, action_name, HANDOVER_TIMEOUT)

    # -- hooks --------------------------------------------------------------------------------------
    def validate(self, request) -> SimGoalState:
        settings = self._settings()
        joints = list(self.sim.controlled_joints)
        try:
            limits = jtc.joint_limits_from_model(self.sim.model, [self.sim.joint_map.to_mjcf(j) for j in joints],
                                                 settings.velocity_limits, joint_map=self.sim.joint_map)
        except ShadowTwinError as exc:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'velocity_limits parameter is invalid: {exc}') from None
        names = list(request.trajectory.joint_names)
        current = None
        if all(j in joints for j in names):
            current = dict(zip(names, self.sim.positions(names)))
        trajectory = jtc.validate_goal_msg(request.trajectory, joints, limits, self._now_s(),
                                           settings.allow_partial_joints_goal, current_positions=current)
        tolerances = jtc.tolerances_for_goal(settings.constraints, request, joints)
        stamp = request.trajectory.header.stamp
        unstamped = stamp.sec == 0 and stamp.nanosec == 0
        # a stamp in the past (the goal arrived late) is joined mid-way, as the JTC does
        start = self.sim.time if unstamped else self._to_sim_time(stamp)
        late, limit = self.sim.time - start, settings.late_start_limit
        if not unstamped and 0.0 <= limit < late:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'its stamped start passed {late:.3f} s ago '
                                                     f'(late_start_limit {limit:g} s): not started')
        # its place among the goals is its acceptance, whenever its execution starts
        return SimGoalState(trajectory, tolerances, start, self.sim.reserve_token(), not unstamped)

    def start(self, goal: AcceptedGoal) -> str | None:
        plan: SimGoalState = goal.plan
        try:
            self.sim.set_trajectory(plan.trajectory, plan.start_time, plan.token)
        except ShadowTwinError as exc:   # the model was reloaded in between without these joints
            return f'cannot start the trajectory: {exc}'
        delay = plan.start_time - self.sim.time
        self.log.info(f'accepted goal: {len(plan.trajectory.joint_names)} joints, '
                      f'{len(plan.trajectory.times)} points, {plan.trajectory.duration:.3f} s'
                      + (f', starting in {delay:.3f} s (header stamp)' if delay > 1e-6 else
                         f', joined {-delay:.3f} s after its stamped start (arrived late)'
                         if delay < -1e-6 and plan.stamped else ''))
        return None

    def step(self, goal: AcceptedGoal) -> jtc.Verdict | None:
        plan: SimGoalState = goal.plan
        sample = self.sim.tracking(plan.token)
        if sample is None:
            if self.sim.trajectory_state(plan.token) == trajectory_queue.PREEMPTED:
                return jtc.Verdict.aborted(PREEMPTED)
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
        """Hold the current position, unless a newer goal has the simulation; a queued goal never starts."""
        self._cancel_trajectory(goal)

    def cancel(self, goal: AcceptedGoal) -> str:
        if self.sim.trajectory_state(goal.plan.token) == trajectory_queue.QUEUED:
            self._cancel_trajectory(goal)
            return 'goal canceled before its start; nothing moved'
        self._cancel_trajectory(goal)
        return 'goal canceled; holding position'

    def period(self) -> float:
        return 1.0 / self._settings().feedback_rate

    def _cancel_trajectory(self, goal: AcceptedGoal) -> None:
        token = goal.plan.token if goal.plan is not None else 0
        if token:
            self.sim.cancel(token)

    def destroy(self) -> None:
        """Abort a running goal and destroy the action server."""
        self.stop_active('the simulation node is shutting down', wait=1.0)
        self.server.destroy()
