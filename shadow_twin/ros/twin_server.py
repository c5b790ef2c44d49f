"""The ``shadow_twin`` node: one FollowJointTrajectory action for robot and twin together.

Serves ``control_msgs/action/FollowJointTrajectory`` at ``action_name``
(``/twin/follow_joint_trajectory``) and forwards each goal, split by joint group,
to the real trajectory controllers named in the config and/or to the simulated
controller of the ``mujoco_bridge`` (``sim_action``), by ``mode``:

* ``sim``: the sim gets the goal; "actual" is the sim (``sim_joint_states_topic``).
* ``real``: the real controllers get their joints; "actual" is the robot
  (``real_joint_states_topic``).
* ``both`` (default): both; "actual" is the robot.

Goal handling, as ros2_controllers' joint_trajectory_controller where it applies
(rules and codes from ``shadow_twin.control.jtc``):

* Validation (``jtc.validate_goal_msg`` against the model's joints and position
  limits, ``velocity_limits``), goal tolerances (``jtc.tolerances_from_goal``
  over the ``constraints`` parameters: > 0 overrides, 0 keeps, -1 erases), the
  split (every joint must belong to a real controller in real/both mode) and,
  in real/both mode, the availability of every needed action server
  (``wait_for_server`` up to ``server_timeout`` s) happen in the goal callback: a
  goal failing any of them is rejected before anything moves (the reason is logged).
  A goal also needs the actual state of its joints (waited for up to
  ``server_timeout`` s after a start).
* All controllers get the same ``header.stamp``: now + ``start_lead`` for an
  unstamped goal, else the goal's stamp, so they start together. Each gets its
  joints' tolerances from the goal and its ``goal_time_tolerance``.
* Feedback at ``feedback_rate``: ``desired`` sampled from the goal trajectory
  (from the state at acceptance to the first point, as the JTC), ``actual`` and
  ``error`` = desired - actual.
* The twin checks path tolerance while the trajectory runs and goal tolerance
  after it on "actual" (PATH_TOLERANCE_VIOLATED / GOAL_TOLERANCE_VIOLATED); it
  succeeds when that check has passed and every controller goal succeeded. A
  controller goal that aborts, is canceled or whose server disappears (gone
  for 0.5 s) cancels the others and aborts the twin goal with that reason.
* Cancel: every controller goal is canceled, then the twin goal. A new goal
  preempts the running one (aborted, INVALID_GOAL "preempted by a new goal", as
  the sim does); the old controller goals are canceled before the new ones are sent.

Intake, preemption, cancel and results are
:class:`shadow_twin.ros.action_server.FollowJointTrajectoryServer`'s;
:class:`TwinTrajectoryServer` adds the forwarding, :class:`TwinServer` is the node
(parameters, joint states).

How far the sim is from the robot (sim minus real per joint, RMS levels on
/diagnostics) is the ``twin_monitor`` node's job (``shadow_twin.ros.twin_monitor``).

Run: ``twin_server --ros-args --params-file config/twin.yaml`` (or
``python -m shadow_twin.ros.twin_server ...``); all together: ``shadow-twin up``.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from control_msgs.action import FollowJointTrajectory
from rclpy.action.client import ClientGoalHandle
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.task import Future
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectoryPoint

from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.common.stamps import from_nanoseconds, to_seconds
from shadow_twin.control import jtc
from shadow_twin.control import twin_split as split
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.ros import parameters as bridge_params
from shadow_twin.ros.action_client import LockedActionClient
from shadow_twin.ros.action_server import AcceptedGoal, FollowJointTrajectoryServer, outcome_of_status
from shadow_twin.ros.conversions import time_msg, time_msg_ns
from shadow_twin.ros.spinning import BackgroundSpinner, all_done_within, run_node

NODE_NAME = 'shadow_twin'
#: Seconds a controller's action server may be unseen during a goal before it counts as gone.
LOST_AFTER = 0.5
#: Seconds to wait for the controllers to answer a goal / a cancel.
ANSWER_TIMEOUT = 3.0
#: Seconds a new goal waits for the goal it preempted to cancel its controller goals, so
#: that those cancels cannot reach a controller after (and so cancel) the new goal's.
HANDOVER_TIMEOUT = 2 * ANSWER_TIMEOUT
EXECUTOR_THREADS = 6
UR5_JOINTS = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint', 'wrist_2_joint',
              'wrist_3_joint']
DEFAULT_CONTROLLERS = {
    'hand': {'action': '/rh_trajectory_controller/follow_joint_trajectory', 'joints': ['rh_*']},
    'arm': {'action': '/scaled_joint_trajectory_controller/follow_joint_trajectory', 'joints': UR5_JOINTS},
}
_NAMES = {'model_path', 'velocity_limits', 'allow_partial_joints_goal', 'feedback_rate', 'constraints_file'}
Spec = bridge_params.Spec
SPECS = tuple(s for s in bridge_params.SPECS if s.name in _NAMES) + (
    Spec('mode', 'both', 'sim | real | both: where goals go.', read_only=True),
    Spec('action_name', '/twin/follow_joint_trajectory', 'FollowJointTrajectory action served.', read_only=True),
    Spec('sim_action', '/sim/follow_joint_trajectory', 'Action of the simulated controller.', read_only=True),
    Spec('real_joint_states_topic', '/joint_states', 'JointState of the robot.', read_only=True),
    Spec('sim_joint_states_topic', '/sim/joint_states', 'JointState of the sim.', read_only=True),
    Spec('server_timeout', 1.0, 'Wait for a controller action server at goal time, s.', bounds=(0.0, 60.0)),
    Spec('start_lead', 0.1, 'Start an unstamped goal this long after acceptance, s.', bounds=(0.0, 10.0)),
)


@dataclass
class SubGoal:
    """A goal sent to one controller (real or sim)."""

    name: str
    client: LockedActionClient
    joints: list[str]
    handle: ClientGoalHandle | None = None
    result_future: Future | None = None
    result: split.ControllerResult | None = None      # once its goal has ended (or its server is gone)
    unseen_since: float | None = None                  # monotonic s since its server was last seen


@dataclass
class TwinPlan:
    """An accepted twin goal.

    Attributes:
        trajectory: the goal (ROS joint names; times s from its start).
        goal_split: which controllers get which joints.
        tolerances: its path/goal tolerances.
        subs: the controller goals, once started.
        sampler: the desired state over time, once started.
        reached: the goal tolerance has held once after the end.
    """

    trajectory: JointTrajectory
    goal_split: split.GoalSplit
    tolerances: jtc.Tolerances
    subs: list[SubGoal] = field(default_factory=list)
    sampler: split.DesiredSampler | None = None
    reached: bool = False


class TwinTrajectoryServer(FollowJointTrajectoryServer):
    """The twin's FollowJointTrajectory server: forwards each goal, split by joint group,
    to the controllers in ``action_names`` and checks it on the actual state (see module doc).

    Args:
        node: the owning node (logger, clock; the action clients are created on it).
        action_name: the action served, e.g. ``/twin/follow_joint_trajectory``.
        mode: ``sim``, ``real`` or ``both``.
        controllers: the real controllers (joint globs).
        limits: {joint: JointLimits} of the model's joints (position limits, rad).
        action_names: {controller name (``split.SIM`` for the sim): its action}.
        settings: callable returning the current settings: ``feedback_rate`` (Hz),
            ``allow_partial_joints_goal``, ``velocity_limits`` ({joint: rad/s}),
            ``constraints``, ``server_timeout`` (s), ``start_lead`` (s).
        joint_states: callable mapping 'real' or 'sim' to {joint: (position rad, velocity rad/s)}.
    """

    def __init__(self, node: Node, action_name: str, mode: str, controllers: list[split.ControllerSpec],
                 limits: dict[str, jtc.JointLimits], action_names: dict[str, str],
                 settings: Callable[[], dict], joint_states: Callable[[str], dict]) -> None:
        self.mode = mode
        self.controllers = controllers
        self.limits = limits
        self.joints = list(limits)
        self.action_names = action_names
        self._settings = settings
        self._joint_states = joint_states
        #: Where "actual" comes from: the sim in sim mode, else the robot.
        self.actual_source = 'sim' if mode == 'sim' else 'real'
        super().__init__(node, action_name, HANDOVER_TIMEOUT)
        self.clients = {name: LockedActionClient(node, FollowJointTrajectory, action, callback_group=self.group)
                        for name, action in action_names.items()}

    def _actual(self) -> dict:
        return self._joint_states(self.actual_source)

    # -- hooks --------------------------------------------------------------------------------------
    def validate(self, request) -> TwinPlan:
        settings = self._settings()
        try:
            limits = {j: jtc.JointLimits(lim.lower, lim.upper, settings['velocity_limits'].get(j))
                      for j, lim in self.limits.items()}
        except ShadowTwinError as exc:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'velocity_limits parameter is invalid: {exc}') from None
        names = list(request.trajectory.joint_names)
        known = set(self.joints)
        deadline = time.monotonic() + settings['server_timeout']
        actual = self._actual()
        # just started: give the joint states a moment to arrive
        while any(j in known and j not in actual for j in names) and time.monotonic() < deadline:
            time.sleep(0.01)
            actual = self._actual()
        current = {j: actual[j][0] for j in names if j in actual} or None
        trajectory = jtc.validate_goal_msg(request.trajectory, self.joints, limits, self._now_s(),
                                           settings['allow_partial_joints_goal'], current_positions=current)
        tolerances = jtc.tolerances_for_goal(settings['constraints'], request, self.joints)
        goal_split = split.split_goal(names, self.controllers, self.mode)
        for name in goal_split.groups:
            if not self.clients[name].wait_for_server(timeout_sec=settings['server_timeout']):
                what = 'sim' if name == split.SIM else f'real controller {name!r}'
                raise jtc.GoalRejected(jtc.INVALID_GOAL, f'{what} action server {self.action_names[name]} is not '
                                                         f'available (waited {settings["server_timeout"]:g} s)')
        missing = [j for j in names if j not in actual]
        if missing:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'no {self.actual_source} joint state for {missing} yet')
        return TwinPlan(trajectory, goal_split, tolerances)

    def start(self, goal: AcceptedGoal) -> str | None:
        """Send the controller goals, all stamped with one start time; None, or why they
        could not all start."""
        plan: TwinPlan = goal.plan
        request = goal.handle.request
        start_s = split.start_stamp(to_seconds(request.trajectory.header.stamp), self._now_s(),
                                    self._settings()['start_lead'])
        names = list(plan.trajectory.joint_names)
        actual0, _ = split.state_arrays(names, self._actual())
        plan.sampler = split.DesiredSampler(plan.trajectory, actual0, start_s)
        sends = []
        for name in plan.goal_split.groups:
            sub = SubGoal(name, self.clients[name], plan.goal_split.joints_of(name))
            plan.subs.append(sub)
            sends.append((sub, sub.client.send_goal_async(self._sub_goal(request, plan.goal_split, name, start_s))))
        all_done_within([f for _, f in sends], ANSWER_TIMEOUT)
        problems = []
        for sub, future in sends:
            if not future.done():
                problems.append(f'{sub.name} controller did not answer the goal within {ANSWER_TIMEOUT:g} s')
                continue
            sub.handle = future.result()
            if not sub.handle.accepted:
                sub.handle = None
                problems.append(f'{sub.name} controller ({self.action_names[sub.name]}) rejected its part of the goal')
            else:
                sub.result_future = sub.handle.get_result_async()
        if problems:
            return '; '.join(problems)
        self.log.info(f'accepted goal: {len(names)} joints, {len(request.trajectory.points)} points, '
                      f'{plan.trajectory.duration:.3f} s; sent to {", ".join(plan.goal_split.groups)}')
        return None

    def step(self, goal: AcceptedGoal) -> jtc.Verdict | None:
        plan: TwinPlan = goal.plan
        self._update_results(plan)
        now_ns = self.node.get_clock().now().nanoseconds
        now = from_nanoseconds(now_ns)
        desired, desired_vel, desired_acc, t = plan.sampler.at(now)
        names = list(plan.trajectory.joint_names)
        pos, vel = split.state_arrays(names, self._actual())
        self.publish_feedback(goal, time_msg_ns(now_ns), names, t, (desired, desired_vel, desired_acc), (pos, vel))
        if now < plan.sampler.end_s:
            check = jtc.RUNNING_VERDICT
            if t >= 0:
                check = jtc.check_path(names, desired, desired_vel, pos, vel, plan.tolerances)
        else:
            target_vel = None if plan.trajectory.velocities is None else plan.trajectory.velocities[-1]
            check = jtc.check_goal(names, plan.trajectory.positions[-1], pos, vel, plan.tolerances,
                                   now - plan.sampler.end_s, target_vel=target_vel)
            if check.outcome is jtc.GoalOutcome.SUCCEEDED:
                plan.reached = True
            elif plan.reached and check.outcome is jtc.GoalOutcome.ABORTED:
                check = jtc.Verdict(jtc.GoalOutcome.RUNNING, jtc.SUCCESSFUL, check.message)   # wait for the controllers
        verdict = split.decide(check, plan.reached, {s.name: s.result for s in plan.subs})
        return None if verdict.outcome is jtc.GoalOutcome.RUNNING else verdict

    def stop(self, goal: AcceptedGoal) -> None:
        """Cancel the controller goals still running (waits for their answers)."""
        all_done_within(self._cancel_subs(goal.plan), ANSWER_TIMEOUT)

    def cancel(self, goal: AcceptedGoal) -> str:
        """Cancel the controller goals and wait until they have ended."""
        plan: TwinPlan = goal.plan
        all_done_within(self._cancel_subs(plan), ANSWER_TIMEOUT)
        all_done_within([s.result_future for s in plan.subs if s.result_future is not None], ANSWER_TIMEOUT)
        return f'goal canceled; controller goals canceled: {", ".join(plan.goal_split.groups)}'

    def period(self) -> float:
        return 1.0 / self._settings()['feedback_rate']

    # -- controller goals -----------------------------------------------------------------------
    def _now_s(self) -> float:
        return from_nanoseconds(self.node.get_clock().now().nanoseconds)

    @staticmethod
    def _sub_goal(request, goal_split: split.GoalSplit, name: str, start_s: float) -> FollowJointTrajectory.Goal:
        """The part of ``request`` for controller ``name``, stamped to start at ``start_s`` (s)."""
        idx = goal_split.groups[name]
        joints = goal_split.joints_of(name)
        out = FollowJointTrajectory.Goal()
        out.trajectory.header.frame_id = request.trajectory.header.frame_id
        out.trajectory.header.stamp = time_msg(start_s)
        out.trajectory.joint_names = joints
        out.trajectory.points = [
            JointTrajectoryPoint(positions=split.pick(pt.positions, idx), velocities=split.pick(pt.velocities, idx),
                                 accelerations=split.pick(pt.accelerations, idx), time_from_start=pt.time_from_start)
            for pt in request.trajectory.points]
        out.path_tolerance = split.filter_tolerances(request.path_tolerance, joints)
        out.goal_tolerance = split.filter_tolerances(request.goal_tolerance, joints)
        out.goal_time_tolerance = request.goal_time_tolerance
        return out

    @staticmethod
    def _cancel_subs(plan: TwinPlan) -> list[Future]:
        return [sub.handle.cancel_goal_async() for sub in plan.subs if sub.handle is not None and sub.result is None]

    def _update_results(self, plan: TwinPlan) -> None:
        now = time.monotonic()
        for sub in plan.subs:
            if sub.result is not None:
                continue
            if sub.result_future is not None and sub.result_future.done():
                response = sub.result_future.result()
                sub.result = split.ControllerResult(outcome_of_status(response.status),
                                                    int(response.result.error_code), response.result.error_string)
                continue
            if sub.client.server_is_ready():
                sub.unseen_since = None
            elif sub.unseen_since is None:
                sub.unseen_since = now
            elif now - sub.unseen_since > LOST_AFTER:
                sub.result = split.ControllerResult(jtc.GoalOutcome.ABORTED, jtc.INVALID_GOAL,
                                                    f'action server {self.action_names[sub.name]} disappeared')


class TwinServer(Node):
    """The twin's trajectory action server (see module doc). Raises ShadowTwinError/ConfigError
    for a bad configuration (mode, controllers, model, constraints)."""

    def __init__(self, node_name: str = NODE_NAME, **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        bridge_params.declare(self, SPECS)
        p = self._param
        self.mode = split.parse_mode(p('mode'))
        self.controllers = self._read_controllers()
        self.limits = jtc.joint_limits_from_model(TwinModel(p('model_path') or None).model)
        self.joints = list(self.limits)
        bridge_params.declare(self, bridge_params.constraint_specs(
            self.joints, bridge_params.load_constraints(p('constraints_file'))))
        self._settings = self._read_settings()
        self.add_post_set_parameters_callback(lambda _: self._refresh())

        self._lock = threading.Lock()
        self._states: dict[str, dict[str, tuple[float, float]]] = {'real': {}, 'sim': {}}
        # Joint states arrive at 2 x 250 Hz: a MultiThreadedExecutor spends most of a core on
        # them (and delays the action traffic), so a helper node on its own single-threaded
        # executor takes them.
        self._listener = Node(f'{self.get_name()}_states', namespace=self.get_namespace(), context=self.context,
                              use_global_arguments=False, start_parameter_services=False)
        qos = QoSProfile(depth=10)
        self._listener.create_subscription(JointState, p('real_joint_states_topic'),
                                           lambda m: self._on_state('real', m), qos)
        self._listener.create_subscription(JointState, p('sim_joint_states_topic'),
                                           lambda m: self._on_state('sim', m), qos)
        self._listener_spinner = BackgroundSpinner([self._listener], 'joint state listener')
        action_names: dict[str, str] = {}
        if self.mode in ('sim', 'both'):
            action_names[split.SIM] = p('sim_action')
        if self.mode in ('real', 'both'):
            action_names.update((c.name, c.action) for c in self.controllers)
        self.trajectories = TwinTrajectoryServer(self, p('action_name'), self.mode, self.controllers, self.limits,
                                                 action_names, settings=lambda: self._settings,
                                                 joint_states=self._state)
        real = ', '.join(f'{c.name}: {c.action} {list(c.joints)}' for c in self.controllers)
        self.get_logger().info(f'serving {p("action_name")}, mode {self.mode}; real controllers: {real or "none"}; '
                               f'sim: {p("sim_action")}')

    def destroy_node(self) -> None:
        self._listener_spinner.shutdown()
        self._listener.destroy_node()
        super().destroy_node()

    # -- parameters ----------------------------------------------------------------------------
    def _param(self, name: str):
        return self.get_parameter(name).value

    def _read_controllers(self) -> list[split.ControllerSpec]:
        names = self.declare_parameter('real_controllers', ['hand', 'arm']).value or []
        entries = {}
        for name in names:
            default = DEFAULT_CONTROLLERS.get(name, {'action': '', 'joints': ['']})
            action = self.declare_parameter(f'controllers.{name}.action', default['action']).value
            joints = self.declare_parameter(f'controllers.{name}.joints', list(default['joints'])).value
            entries[name] = {'action': action, 'joints': list(joints or [])}
        return split.controllers_from_config(list(names), entries)

    def _read_settings(self) -> dict:
        p = self._param
        return {
            'feedback_rate': float(p('feedback_rate')),
            'allow_partial_joints_goal': bool(p('allow_partial_joints_goal')),
            'velocity_limits': bridge_params.parse_velocity_limits(p('velocity_limits')),
            'constraints': bridge_params.constraints_config(self, self.joints),
            'server_timeout': float(p('server_timeout')),
            'start_lead': float(p('start_lead')),
        }

    def _refresh(self) -> None:
        try:
            self._settings = self._read_settings()
        except ShadowTwinError as exc:
            self.get_logger().error(f'parameters not applied: {exc}')

    # -- states -----------------------------------------------------------------------------------
    def _on_state(self, which: str, msg: JointState) -> None:
        vel = list(msg.velocity)
        state = {n: (float(q), float(vel[i]) if i < len(vel) else float('nan'))
                 for i, (n, q) in enumerate(zip(msg.name, msg.position))}
        with self._lock:
            self._states[which].update(state)

    def _state(self, which: str) -> dict:
        with self._lock:
            return dict(self._states[which])

    def shutdown(self, timeout: float = ANSWER_TIMEOUT + 1.0) -> None:
        """Abort a running goal and cancel its controller goals (call while the executor
        still spins, so that the cancels go out); waits up to ``timeout`` s."""
        self.trajectories.stop_active('the twin server is shutting down', wait=timeout)


def main(args: list[str] | None = None) -> int:
    """Console entry point ``twin_server``: run the node until shutdown; returns the exit status."""
    return run_node(TwinServer, NODE_NAME, lambda: MultiThreadedExecutor(num_threads=EXECUTOR_THREADS), args,
                    on_stop=lambda node: node.shutdown())


if __name__ == '__main__':
    sys.exit(main())
