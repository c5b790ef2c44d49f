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
  the sim does); the old controller goals are canceled.

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

from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Time
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionClient, ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectoryPoint

from shadow_twin.ros import parameters as bridge_params
from shadow_twin.ros.action_server import screen_goal
from shadow_twin.ros.conversions import doubles, duration_msg as duration

from shadow_twin.control import jtc
from shadow_twin.control import twin_split as split
from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.model.mjcf import builtin_model_path
from shadow_twin.ros.spinning import BackgroundSpinner, run_node

NODE_NAME = 'shadow_twin'
Result = FollowJointTrajectory.Result
#: Seconds a controller's action server may be unseen during a goal before it counts as gone.
LOST_AFTER = 0.5
#: Seconds to wait for the controllers to answer a goal / a cancel.
ANSWER_TIMEOUT = 3.0
EXECUTOR_THREADS = 6
UR5_JOINTS = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint', 'wrist_2_joint',
              'wrist_3_joint']
DEFAULT_CONTROLLERS = {
    'hand': {'action': '/rh_trajectory_controller/follow_joint_trajectory', 'joints': ['rh_*']},
    'arm': {'action': '/scaled_joint_trajectory_controller/follow_joint_trajectory', 'joints': UR5_JOINTS},
}
_NAMES = {'model_path', 'velocity_limits', 'allow_partial_joints_goal', 'feedback_rate', 'constraints.goal_time',
          'constraints.stopped_velocity_tolerance'}
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


def ros_time(seconds: float) -> Time:
    ns = max(0, int(round(seconds * 1e9)))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def stamp_seconds(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


@dataclass
class SubGoal:
    """A goal sent to one controller (real or sim)."""

    name: str
    client: ActionClient
    joints: list[str]
    handle: object = None
    result_future: object = None
    outcome: split.Outcome | None = None
    unseen_since: float | None = None


@dataclass
class TwinGoal:
    handle: object
    trajectory: object                  # JointTrajectory
    split: split.GoalSplit
    tolerances: jtc.Tolerances
    request: object
    subs: list[SubGoal] = field(default_factory=list)
    wake: threading.Event = field(default_factory=threading.Event)
    stop_reason: str | None = None
    cancelling: bool = False
    previous: 'TwinGoal | None' = None    # the goal this one preempted
    done: threading.Event = field(default_factory=threading.Event)


class TwinServer(Node):
    """The twin's trajectory action server (see module doc). Raises ShadowTwinError/ConfigError
    for a bad configuration (mode, controllers, model, constraints)."""

    def __init__(self, node_name: str = NODE_NAME, **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        bridge_params.declare(self, SPECS)
        p = self._param
        self.mode = split.parse_mode(p('mode'))
        self.controllers = self._read_controllers()
        import mujoco
        model = mujoco.MjModel.from_xml_path(str(p('model_path') or builtin_model_path()))
        self.limits = jtc.joint_limits_from_model(model)
        self.joints = list(self.limits)
        bridge_params.declare(self, bridge_params.joint_specs(self.joints))
        self._settings = self._read_settings()
        self.add_post_set_parameters_callback(lambda _: self._refresh())

        self._lock = threading.Lock()
        self._states: dict[str, dict[str, tuple[float, float]]] = {'real': {}, 'sim': {}}
        self._active: TwinGoal | None = None
        self._pending: dict[int, tuple] = {}
        self._accepted: dict[int, TwinGoal] = {}
        self.group = ReentrantCallbackGroup()
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
        self.clients_by_name: dict[str, ActionClient] = {}
        self.action_names: dict[str, str] = {}
        if self.mode in ('sim', 'both'):
            self.action_names[split.SIM] = p('sim_action')
        if self.mode in ('real', 'both'):
            self.action_names.update((c.name, c.action) for c in self.controllers)
        for name, action in self.action_names.items():
            self.clients_by_name[name] = ActionClient(self, FollowJointTrajectory, action, callback_group=self.group)
        self.server = ActionServer(self, FollowJointTrajectory, p('action_name'), execute_callback=self._execute,
                                   goal_callback=self._on_goal, handle_accepted_callback=self._on_accepted,
                                   cancel_callback=self._on_cancel, callback_group=self.group)
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

    @property
    def _actual_source(self) -> str:
        return 'sim' if self.mode == 'sim' else 'real'

    def _now_s(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    # -- goal intake --------------------------------------------------------------------------
    def _validate(self, goal) -> tuple:
        settings = self._settings
        try:
            limits = {j: jtc.JointLimits(lim.lower, lim.upper, settings['velocity_limits'].get(j))
                      for j, lim in self.limits.items()}
        except ShadowTwinError as exc:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'velocity_limits parameter is invalid: {exc}') from None
        names = list(goal.trajectory.joint_names)
        known = set(self.joints)
        deadline = time.monotonic() + settings['server_timeout']
        actual = self._state(self._actual_source)
        # just started: give the joint states a moment to arrive
        while any(j in known and j not in actual for j in names) and time.monotonic() < deadline:
            time.sleep(0.01)
            actual = self._state(self._actual_source)
        current = {j: actual[j][0] for j in names if j in actual} or None
        trajectory = jtc.validate_goal_msg(goal.trajectory, self.joints, limits, self._now_s(),
                                           settings['allow_partial_joints_goal'], current_positions=current)
        try:
            defaults = jtc.default_tolerances(settings['constraints'], self.joints)
        except ShadowTwinError as exc:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'constraints parameters are invalid: {exc}') from None
        tolerances = jtc.tolerances_from_goal(defaults, goal, joints=self.joints)
        goal_split = split.split_goal(names, self.controllers, self.mode)
        for name in goal_split.groups:
            client = self.clients_by_name[name]
            if not client.wait_for_server(timeout_sec=settings['server_timeout']):
                what = 'sim' if name == split.SIM else f'real controller {name!r}'
                raise jtc.GoalRejected(jtc.INVALID_GOAL, f'{what} action server {self.action_names[name]} is not '
                                                         f'available (waited {settings["server_timeout"]:g} s)')
        missing = [j for j in names if j not in actual]
        if missing:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'no {self._actual_source} joint state for {missing} yet')
        return trajectory, goal_split, tolerances

    def _on_goal(self, goal) -> GoalResponse:
        return screen_goal(self._validate, goal, self.get_logger(), self._lock, self._pending)

    def _on_accepted(self, handle) -> None:
        with self._lock:
            pending = self._pending.pop(id(handle.request), None)
        if pending is None:
            try:
                pending = self._validate(handle.request)
            except jtc.GoalRejected as exc:
                pending = str(exc)
        if isinstance(pending, str):
            with self._lock:
                self._accepted[id(handle)] = pending
            handle.execute()        # aborted there
            return
        trajectory, goal_split, tolerances = pending
        goal = TwinGoal(handle, trajectory, goal_split, tolerances, handle.request)
        with self._lock:
            previous, self._active = self._active, goal
            self._accepted[id(handle)] = goal
        if previous is not None:
            previous.stop_reason = 'preempted by a new goal'
            previous.wake.set()
            goal.previous = previous
        handle.execute()

    def _on_cancel(self, handle) -> CancelResponse:
        with self._lock:
            goal = self._active
        if goal is not None and goal.handle is handle:
            goal.cancelling = True
            goal.wake.set()
        self.get_logger().info('cancel requested: canceling the controller goals')
        return CancelResponse.ACCEPT

    # -- execution --------------------------------------------------------------------------------
    def _sub_goal(self, goal: TwinGoal, name: str, start_s: float) -> FollowJointTrajectory.Goal:
        idx = goal.split.groups[name]
        joints = goal.split.joints_of(name)
        req = goal.request
        out = FollowJointTrajectory.Goal()
        out.trajectory.header.frame_id = req.trajectory.header.frame_id
        out.trajectory.header.stamp = ros_time(start_s)
        out.trajectory.joint_names = joints
        out.trajectory.points = [
            JointTrajectoryPoint(positions=split.pick(pt.positions, idx), velocities=split.pick(pt.velocities, idx),
                                 accelerations=split.pick(pt.accelerations, idx), time_from_start=pt.time_from_start)
            for pt in req.trajectory.points]
        out.path_tolerance = split.filter_tolerances(req.path_tolerance, joints)
        out.goal_tolerance = split.filter_tolerances(req.goal_tolerance, joints)
        out.goal_time_tolerance = req.goal_time_tolerance
        return out

    def _cancel_subs(self, goal: TwinGoal) -> list:
        futures = []
        for sub in goal.subs:
            if sub.handle is not None and sub.outcome is None:
                futures.append(sub.handle.cancel_goal_async())
        return futures

    def _update_outcomes(self, goal: TwinGoal) -> None:
        now = time.monotonic()
        for sub in goal.subs:
            if sub.outcome is not None:
                continue
            if sub.result_future is not None and sub.result_future.done():
                response = sub.result_future.result()
                status = {GoalStatus.STATUS_SUCCEEDED: 'succeeded', GoalStatus.STATUS_CANCELED: 'canceled'}.get(
                    response.status, 'aborted')
                sub.outcome = split.Outcome(status, int(response.result.error_code), response.result.error_string)
                continue
            if sub.client.server_is_ready():
                sub.unseen_since = None
            elif sub.unseen_since is None:
                sub.unseen_since = now
            elif now - sub.unseen_since > LOST_AFTER:
                sub.outcome = split.Outcome('lost', jtc.INVALID_GOAL,
                                            f'action server {self.action_names[sub.name]} disappeared')

    def _finish(self, goal: TwinGoal, state: str, code: int, message: str) -> Result:
        with self._lock:
            if self._active is goal:
                self._active = None
        goal.done.set()
        try:
            if state == 'canceled':
                goal.handle.canceled()
                self.get_logger().info(f'goal canceled: {message}')
            elif state == jtc.SUCCEEDED:
                goal.handle.succeed()
                self.get_logger().info(f'goal succeeded: {message}')
            else:
                goal.handle.abort()
                self.get_logger().warning(f'goal aborted ({jtc.RESULT_NAMES.get(code, code)}): {message}')
        except Exception as exc:   # ROS is shutting down under us
            if self.context.ok():
                raise
            del exc
        return Result(error_code=code, error_string=message)

    def _abort_all(self, goal: TwinGoal, code: int, message: str) -> Result:
        self._wait_all(self._cancel_subs(goal), ANSWER_TIMEOUT)
        return self._finish(goal, jtc.ABORTED, code, message)

    @staticmethod
    def _wait_all(futures, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not all(f.done() for f in futures):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def _start(self, goal: TwinGoal, start_s: float) -> str | None:
        """Send the controller goals; None, or why they could not all start."""
        sends = []
        for name in goal.split.groups:
            sub = SubGoal(name, self.clients_by_name[name], goal.split.joints_of(name))
            goal.subs.append(sub)
            sends.append((sub, sub.client.send_goal_async(self._sub_goal(goal, name, start_s))))
        self._wait_all([f for _, f in sends], ANSWER_TIMEOUT)
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
        return '; '.join(problems) or None

    def _execute(self, handle) -> Result:
        with self._lock:
            goal = self._accepted.pop(id(handle), None)
        if not isinstance(goal, TwinGoal):   # accepted, but failed validation on the second try
            reason = f'goal failed validation after acceptance: {goal}'
            handle.abort()
            self.get_logger().error(reason)
            return Result(error_code=jtc.INVALID_GOAL, error_string=reason)
        if goal.previous is not None:
            # let the preempted goal cancel its controller goals first, so that they cannot
            # reach a controller after (and so preempt) this goal's
            goal.previous.done.wait(2 * ANSWER_TIMEOUT)
            goal.previous = None
        if goal.stop_reason is not None:   # preempted before it started
            return self._finish(goal, jtc.ABORTED, jtc.INVALID_GOAL, goal.stop_reason)
        req = goal.request
        start_s = split.start_stamp(stamp_seconds(req.trajectory.header.stamp), self._now_s(),
                                    self._settings['start_lead'])
        names = list(goal.trajectory.joint_names)
        actual0, _ = split.state_arrays(names, self._state(self._actual_source))
        sampler = split.DesiredSampler(goal.trajectory, actual0, start_s)
        problem = self._start(goal, start_s)
        if problem is not None:
            return self._abort_all(goal, jtc.INVALID_GOAL, problem)
        self.get_logger().info(f'accepted goal: {len(names)} joints, {len(req.trajectory.points)} points, '
                               f'{goal.trajectory.duration:.3f} s; sent to {", ".join(goal.split.groups)}')
        target = goal.trajectory.positions[-1]
        target_vel = None if goal.trajectory.velocities is None else goal.trajectory.velocities[-1]
        reached = False
        while True:
            goal.wake.clear()
            if goal.stop_reason is not None:
                return self._abort_all(goal, jtc.INVALID_GOAL, goal.stop_reason)
            if goal.cancelling or handle.is_cancel_requested:
                self._wait_all(self._cancel_subs(goal), ANSWER_TIMEOUT)
                deadline = time.monotonic() + ANSWER_TIMEOUT
                while time.monotonic() < deadline and not all(
                        s.result_future is None or s.result_future.done() for s in goal.subs):
                    time.sleep(0.005)
                deadline = time.monotonic() + 2.0
                while not handle.is_cancel_requested and time.monotonic() < deadline:
                    time.sleep(0.001)
                message = f'goal canceled; controller goals canceled: {", ".join(goal.split.groups)}'
                if handle.is_cancel_requested:
                    return self._finish(goal, 'canceled', jtc.SUCCESSFUL, message)
                return self._finish(goal, jtc.ABORTED, jtc.INVALID_GOAL, message)
            self._update_outcomes(goal)
            now = self._now_s()
            desired, desired_vel, desired_acc, t = sampler.at(now)
            pos, vel = split.state_arrays(names, self._state(self._actual_source))
            self._feedback(goal, names, desired, desired_vel, desired_acc, pos, vel, t)
            if now < sampler.end_s:
                check = (jtc.RUNNING, jtc.SUCCESSFUL, '')
                if t >= 0:
                    check = jtc.check_path(names, desired, desired_vel, pos, vel, goal.tolerances)
            else:
                check = jtc.check_goal(names, target, pos, vel, goal.tolerances, now - sampler.end_s,
                                       target_vel=target_vel)
                if check[0] == jtc.SUCCEEDED:
                    reached = True
                elif reached and check[0] == jtc.ABORTED:
                    check = (jtc.RUNNING, jtc.SUCCESSFUL, check[2])   # reached once: wait for the controllers
            state, code, message = split.decide(check, reached, {s.name: s.outcome for s in goal.subs})
            if state == jtc.ABORTED:
                return self._abort_all(goal, code, message)
            if state == jtc.SUCCEEDED:
                return self._finish(goal, state, code, message)
            goal.wake.wait(1.0 / self._settings['feedback_rate'])

    def _feedback(self, goal, names, desired, desired_vel, desired_acc, pos, vel, t) -> None:
        fb = FollowJointTrajectory.Feedback()
        fb.header.stamp = self.get_clock().now().to_msg()
        fb.joint_names = names
        since = duration(max(0.0, t))
        fb.desired = JointTrajectoryPoint(positions=doubles(desired), velocities=doubles(desired_vel),
                                          accelerations=doubles(desired_acc), time_from_start=since)
        fb.actual = JointTrajectoryPoint(positions=doubles(pos), velocities=doubles(vel), time_from_start=since)
        fb.error = JointTrajectoryPoint(positions=doubles(desired - pos), velocities=doubles(desired_vel - vel),
                                        time_from_start=since)
        goal.handle.publish_feedback(fb)

    def shutdown(self, timeout: float = ANSWER_TIMEOUT + 1.0) -> None:
        """Abort a running goal and cancel its controller goals (call while the executor
        still spins, so that the cancels go out); waits up to ``timeout`` s."""
        with self._lock:
            goal = self._active
        if goal is not None:
            goal.stop_reason = 'the twin server is shutting down'
            goal.wake.set()
            goal.done.wait(timeout)


def main(args: list[str] | None = None) -> int:
    """Console entry point ``twin_server``: run the node until shutdown; returns the exit status."""
    return run_node(TwinServer, NODE_NAME, lambda: MultiThreadedExecutor(num_threads=EXECUTOR_THREADS), args,
                    on_stop=lambda node: node.shutdown())


if __name__ == '__main__':
    sys.exit(main())
