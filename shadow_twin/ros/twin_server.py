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
  split (every joint must belong to a real controller in real/both mode), the
  actual state of the goal's joints (waited for up to ``server_timeout`` s after a
  start), the liveness of every needed controller (below) and its action server
  (``wait_for_server`` up to ``server_timeout`` s) happen in the goal callback.
* **Nothing moves unless every part is accepted.** Still in the goal callback,
  each controller gets its part, all with one ``header.stamp``: now +
  ``start_lead`` for an unstamped goal, else the goal's stamp. Every part must be
  accepted ``ACCEPT_MARGIN`` (0.03 s) before that start; if one is rejected or not
  accepted in time, the parts already accepted are canceled (before the start:
  nothing moves) and the goal is rejected with the reason. The lead is ``start_lead``
  (0.25 s) plus ``start_lead_per_point`` (50 us) per point, since every controller
  parses and checks all points before it answers; it is chosen from the acceptance times measured by ``benchmarks/faults.py`` on this
  2-core PC under load (see README). Each part carries its joints' tolerances
  from the goal and the goal's ``goal_time_tolerance``.
* **Liveness from data.** A controller counts as gone when the newest joint state
  of one of its goal joints (``real_joint_states_topic``; the sim's on
  ``sim_joint_states_topic``) is older than ``joint_state_timeout`` (0.2 s: the UR
  publishes at 125 Hz, the hand at 125-250 Hz), or, while it runs a part, when
  it sent no feedback for ``feedback_timeout`` (1 s). A gone controller rejects a
  new goal at once; during a goal it aborts the goal (INVALID_GOAL, the message
  names the controller, the joint and the age of its last state), every other
  part is canceled (the sim holds position), and the gone controller gets a
  cancel too (not waited for; a stalled process takes it when DDS delivers it after
  it resumes, about 1.5 s later here, so it may move on until then).
  Discovery (``server_is_ready``) is not used for this: it stays true for seconds
  after a process is killed.
* Feedback at ``feedback_rate``: ``desired`` sampled from the goal trajectory
  (from the state at acceptance to the first point, as the JTC), ``actual`` and
  ``error`` = desired - actual.
* The twin checks path tolerance while the trajectory runs and goal tolerance
  after it on "actual" (PATH_TOLERANCE_VIOLATED / GOAL_TOLERANCE_VIOLATED); it
  succeeds when that check has passed and every controller goal succeeded. A
  controller goal that aborts or is canceled cancels the others and aborts the
  twin goal with that reason.
* Cancel: every controller goal is canceled, then the twin goal. A new goal
  preempts the running one (aborted, INVALID_GOAL "preempted by a new goal", as
  the sim does) once all its parts are accepted (the controllers preempt their
  own parts as they accept the new ones).

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
from shadow_twin.ros.action_server import PREEMPTED, AcceptedGoal, FollowJointTrajectoryServer, outcome_of_status
from shadow_twin.ros.conversions import time_msg, time_msg_ns
from shadow_twin.ros.spinning import BackgroundSpinner, all_done_within, run_node

NODE_NAME = 'shadow_twin'
#: Seconds before the common start by which every controller must have accepted its part
#: (the cancels of a goal that fails this reach the controllers before anything moves).
ACCEPT_MARGIN = 0.03
#: Period of the joint-state listener's turn timer, s (see JointStateCache.wait_for_turn).
LISTENER_TURN_PERIOD = 0.02
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
    Spec('start_lead', 0.25, 'Start an unstamped goal this long after it arrives, s; every controller must '
         f'accept its part by {ACCEPT_MARGIN:g} s before that start, or the goal is rejected and nothing moves.',
         bounds=(0.05, 10.0)),
    Spec('start_lead_per_point', 5e-5, 'Added to start_lead per trajectory point, s: each controller parses and '
         'checks every point before it accepts (10,000 points: +0.5 s).', bounds=(0.0, 0.01)),
    Spec('joint_state_timeout', 0.2, 'A controller whose joint states (of the goal joints) are older than this '
         'counts as gone: a running goal aborts, a new goal is rejected, s.', bounds=(0.01, 10.0)),
    Spec('feedback_timeout', 1.0, 'A controller that sends no feedback on its running goal for this long '
         'counts as gone, s.', bounds=(0.05, 60.0)),
)


@dataclass
class SubGoal:
    """A goal sent to one controller (real or sim).

    Attributes:
        source: whose joint states show this controller's joints: 'real' or 'sim'.
        last_heard: monotonic s of its last answer or feedback.
        gone: the twin gave up on the controller (its data stopped): cancels to it
            are sent but not waited for.
    """

    name: str
    client: LockedActionClient
    joints: list[str]
    source: str
    handle: ClientGoalHandle | None = None
    result_future: Future | None = None
    result: split.ControllerResult | None = None      # once its goal has ended (or the controller is gone)
    last_heard: float = field(default_factory=time.monotonic)
    gone: bool = False

    def heard(self, _feedback=None) -> None:
        """Feedback callback: the controller is answering."""
        self.last_heard = time.monotonic()


@dataclass
class TwinPlan:
    """An accepted twin goal.

    Attributes:
        trajectory: the goal (ROS joint names; times s from its start).
        goal_split: which controllers get which joints.
        tolerances: its path/goal tolerances.
        subs: the controller goals, accepted by every controller.
        sampler: the desired state over time.
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
            ``constraints``, ``server_timeout`` (s), ``start_lead`` (s),
            ``joint_state_timeout`` (s), ``feedback_timeout`` (s).
        joint_states: the node's :class:`JointStateCache`.
    """

    def __init__(self, node: Node, action_name: str, mode: str, controllers: list[split.ControllerSpec],
                 limits: dict[str, jtc.JointLimits], action_names: dict[str, str],
                 settings: Callable[[], dict], joint_states: 'JointStateCache') -> None:
        self.mode = mode
        self.controllers = controllers
        self.limits = limits
        self.joints = list(limits)
        self.action_names = action_names
        self._settings = settings
        self.states = joint_states
        #: Where "actual" comes from: the sim in sim mode, else the robot.
        self.actual_source = 'sim' if mode == 'sim' else 'real'
        self._dispatching = 0        # goals being sent to the controllers (guarded by self.lock)
        super().__init__(node, action_name, HANDOVER_TIMEOUT)
        self.clients = {name: LockedActionClient(node, FollowJointTrajectory, action, callback_group=self.group)
                        for name, action in action_names.items()}

    def _actual(self) -> dict:
        return self.states.get(self.actual_source)

    def _describe(self, name: str) -> str:
        return 'sim' if name == split.SIM else f'{name} controller ({self.action_names[name]})'

    # -- hooks --------------------------------------------------------------------------------------
    def validate(self, request) -> TwinPlan:
        """Check the goal, then send every part to its controller; returns the plan once all
        have accepted (see :meth:`_dispatch`). Raises ``jtc.GoalRejected`` with the reason."""
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
        missing = [j for j in names if j not in actual]
        if missing:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'no {self.actual_source} joint state for {missing} yet')
        for name in goal_split.groups:
            gone = self._staleness(self._source(name), goal_split.joints_of(name), settings)
            if gone is not None:
                raise jtc.GoalRejected(jtc.INVALID_GOAL, f'{self._describe(name)} is gone: {gone}')
            if not self.clients[name].wait_for_server(timeout_sec=settings['server_timeout']):
                raise jtc.GoalRejected(jtc.INVALID_GOAL, f'{self._describe(name)}: action server is not '
                                                         f'available (waited {settings["server_timeout"]:g} s)')
        plan = TwinPlan(trajectory, goal_split, tolerances)
        self._dispatch(request, plan, settings)
        return plan

    def start(self, goal: AcceptedGoal) -> str | None:
        """The controllers have their parts already (sent and accepted in :meth:`validate`)."""
        plan: TwinPlan = goal.plan
        self.log.info(f'accepted goal: {len(plan.trajectory.joint_names)} joints, '
                      f'{len(goal.handle.request.trajectory.points)} points, {plan.trajectory.duration:.3f} s; '
                      f'accepted by {", ".join(plan.goal_split.groups)}, starting at '
                      f'{plan.sampler.start_s:.3f} s')
        return None

    def step(self, goal: AcceptedGoal) -> jtc.Verdict | None:
        plan: TwinPlan = goal.plan
        with self.lock:
            if self._dispatching:        # a new goal is being accepted: it will preempt this one
                return None
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
        """Cancel the controller goals still running (waits for the answers of those not gone)."""
        canceled = self._cancel_and_wait(goal.plan.subs, results=False)
        if canceled:
            self.log.info(f'canceled the parts of: {", ".join(canceled)}')

    def cancel(self, goal: AcceptedGoal) -> str:
        """Cancel the controller goals and wait until they have ended."""
        plan: TwinPlan = goal.plan
        self._cancel_and_wait(plan.subs, results=True)
        return f'goal canceled; controller goals canceled: {", ".join(plan.goal_split.groups)}'

    def period(self) -> float:
        return 1.0 / self._settings()['feedback_rate']

    # -- controller goals -----------------------------------------------------------------------
    def _now_s(self) -> float:
        return from_nanoseconds(self.node.get_clock().now().nanoseconds)

    def _source(self, name: str) -> str:
        return 'sim' if name == split.SIM else 'real'

    def _dispatch(self, request, plan: TwinPlan, settings: dict) -> None:
        """Send each controller its part, stamped with one start time, and wait until all have
        accepted, by :func:`split.acceptance_deadline` (``ACCEPT_MARGIN`` before the start).

        A part rejected or not accepted in time: the parts accepted so far are canceled
        (before the start, so nothing moves) and the goal is rejected with the reason. Once
        all have accepted, this goal preempts the running one.
        Raises ``jtc.GoalRejected``.
        """
        goals = {name: self._sub_goal(request, plan.goal_split, name) for name in plan.goal_split.groups}
        plan.subs = [SubGoal(name, self.clients[name], plan.goal_split.joints_of(name), self._source(name))
                     for name in plan.goal_split.groups]
        now_s, now_mono = self._now_s(), time.monotonic()
        lead = settings['start_lead'] + settings['start_lead_per_point'] * len(request.trajectory.points)
        start_s = split.start_stamp(to_seconds(request.trajectory.header.stamp), now_s, lead)
        accept_by = split.acceptance_deadline(start_s, now_s, lead, ACCEPT_MARGIN, ANSWER_TIMEOUT)
        names = list(plan.trajectory.joint_names)
        plan.sampler = split.DesiredSampler(plan.trajectory, split.state_arrays(names, self._actual())[0], start_s)
        with self.lock:
            self._dispatching += 1
        sends = []
        try:
            for sub in plan.subs:
                goal = goals[sub.name]
                goal.trajectory.header.stamp = time_msg(start_s)
                sends.append((sub, sub.client.send_goal_async(goal, feedback_callback=sub.heard)))
            all_done_within([f for _, f in sends], max(0.0, accept_by - now_s) - (time.monotonic() - now_mono))
            problems = []
            for sub, future in sends:
                if not future.done():
                    problems.append(f'{self._describe(sub.name)} did not accept its part within '
                                    f'{accept_by - now_s:.3f} s (start_lead {settings["start_lead"]:g} s + '
                                    f'{settings["start_lead_per_point"]:g} s per point)')
                    future.add_done_callback(_cancel_when_accepted)     # it may still accept: undo that
                    continue
                sub.handle = future.result()
                if not sub.handle.accepted:
                    sub.handle = None
                    problems.append(f'{self._describe(sub.name)} rejected its part of the goal')
            if problems:
                accepted = [s for s in plan.subs if s.handle is not None]
                self._cancel_and_wait(accepted, results=False, timeout=ACCEPT_MARGIN)
                undone = f'; canceled before the start: {", ".join(s.name for s in accepted)}' if accepted else ''
                raise jtc.GoalRejected(jtc.INVALID_GOAL, '; '.join(problems) + undone)
            for sub in plan.subs:
                sub.result_future = sub.handle.get_result_async()
                sub.heard()
            self.stop_active(PREEMPTED)
        except jtc.GoalRejected:
            raise
        except BaseException:
            self._cancel_and_wait([s for s in plan.subs if s.handle is not None], results=False, timeout=0.0)
            for _, future in sends:
                future.add_done_callback(_cancel_when_accepted)
            raise
        finally:
            with self.lock:
                self._dispatching -= 1

    @staticmethod
    def _sub_goal(request, goal_split: split.GoalSplit, name: str) -> FollowJointTrajectory.Goal:
        """The part of ``request`` for controller ``name`` (its stamp is set when it is sent)."""
        idx = goal_split.groups[name]
        joints = goal_split.joints_of(name)
        out = FollowJointTrajectory.Goal()
        out.trajectory.header.frame_id = request.trajectory.header.frame_id
        out.trajectory.joint_names = joints
        if len(idx) == len(goal_split.joint_names):
            out.trajectory.points = request.trajectory.points       # all joints: the points as they are
        else:
            out.trajectory.points = [
                JointTrajectoryPoint(positions=split.pick(pt.positions, idx), velocities=split.pick(pt.velocities, idx),
                                     accelerations=split.pick(pt.accelerations, idx),
                                     time_from_start=pt.time_from_start)
                for pt in request.trajectory.points]
        out.path_tolerance = split.filter_tolerances(request.path_tolerance, joints)
        out.goal_tolerance = split.filter_tolerances(request.goal_tolerance, joints)
        out.goal_time_tolerance = request.goal_time_tolerance
        return out

    def _cancel_and_wait(self, subs: list[SubGoal], results: bool, timeout: float = ANSWER_TIMEOUT) -> list[str]:
        """Cancel the goals of ``subs`` still running (gone controllers included: a stalled one
        takes the cancel when it resumes); wait up to ``timeout`` s for the cancel answers (and
        with ``results`` for the goals to end) of the controllers not gone. Returns the names
        of the controllers sent a cancel (gone ones marked so)."""
        running = [sub for sub in subs if sub.handle is not None and (sub.result is None or sub.gone)]
        answers = [(sub, sub.handle.cancel_goal_async()) for sub in running]
        all_done_within([f for sub, f in answers if not sub.gone], timeout)
        if results:
            all_done_within([s.result_future for s in running if not s.gone and s.result_future is not None],
                            timeout)
        return [f'{sub.name} (gone: not waited for)' if sub.gone else sub.name for sub in running]

    def _staleness(self, source: str, joints: list[str], settings: dict) -> str | None:
        """Why the ``source`` joint states of ``joints`` count as stopped, or None.

        Judged only on data the listener had the chance to take: when the newest state is
        older than ``joint_state_timeout``, the listener is given one more turn (up to
        0.1 s) and the age is read again, so that a stall of this process is not blamed
        on the controller."""
        timeout = settings['joint_state_timeout']
        joint, age = self.states.oldest(source, joints)
        if age <= timeout:
            return None
        self.states.wait_for_turn(0.1)
        joint, age = self.states.oldest(source, joints)
        if age <= timeout:
            return None
        since = 'never received' if age == float('inf') else f'last one {age:.3f} s ago'
        return (f'its joint states stopped: {joint} {since} (joint_state_timeout {timeout:g} s, '
                f'from {self.states.topics[source]})')

    def _update_results(self, plan: TwinPlan) -> None:
        settings = self._settings()
        for sub in plan.subs:
            if sub.result is not None:
                continue
            if sub.result_future is not None and sub.result_future.done():
                response = sub.result_future.result()
                sub.result = split.ControllerResult(outcome_of_status(response.status),
                                                    int(response.result.error_code), response.result.error_string)
                continue
            why = self._staleness(sub.source, sub.joints, settings)
            silent = time.monotonic() - sub.last_heard
            if why is None and silent > settings['feedback_timeout']:
                why = (f'its action server stopped answering: no feedback for {silent:.2f} s '
                       f'(feedback_timeout {settings["feedback_timeout"]:g} s)')
            if why is not None:
                sub.gone = True
                sub.result = split.ControllerResult(jtc.GoalOutcome.ABORTED, jtc.INVALID_GOAL,
                                                    f'{self._describe(sub.name)} is gone: {why}', gone=True)
                self.log.error(sub.result.message)


def _cancel_when_accepted(future: Future) -> None:
    """Done callback of a goal request given up on: cancel the goal if it was accepted late."""
    try:
        handle = future.result()
    except Exception:      # the request failed: nothing runs
        return
    if handle is not None and handle.accepted:
        handle.cancel_goal_async()


class JointStateCache:
    """The latest joint states of the robot ('real') and the sim ('sim'), and when each
    joint's last state arrived (monotonic s), filled by a listener node on its own thread.

    Args:
        topics: {'real': topic, 'sim': topic}, for messages.
    """

    def __init__(self, topics: dict[str, str]) -> None:
        self.topics = dict(topics)
        self._lock = threading.Lock()
        self._states: dict[str, dict[str, tuple[float, float]]] = {'real': {}, 'sim': {}}
        self._received: dict[str, dict[str, float]] = {'real': {}, 'sim': {}}
        self._turn = threading.Condition(self._lock)
        self._turns = 0

    def on_message(self, source: str, msg: JointState) -> None:
        """Subscription callback: store {joint: (position rad, velocity rad/s)} of ``msg``."""
        now = time.monotonic()
        vel = list(msg.velocity)
        state = {n: (float(q), float(vel[i]) if i < len(vel) else float('nan'))
                 for i, (n, q) in enumerate(zip(msg.name, msg.position))}
        with self._lock:
            self._states[source].update(state)
            self._received[source].update(dict.fromkeys(state, now))

    def on_turn(self) -> None:
        """Timer callback of the listener: it is running (see :meth:`wait_for_turn`)."""
        with self._turn:
            self._turns += 1
            self._turn.notify_all()

    def wait_for_turn(self, timeout: float) -> bool:
        """Wait until the listener has been through two more rounds of its executor (so it has
        taken what had arrived before the call); True if it did within ``timeout`` s."""
        with self._turn:
            seen = self._turns
            return self._turn.wait_for(lambda: self._turns > seen + 1, timeout)

    def get(self, source: str) -> dict[str, tuple[float, float]]:
        """{joint: (position rad, velocity rad/s)} of ``source`` ('real' or 'sim')."""
        with self._lock:
            return dict(self._states[source])

    def oldest(self, source: str, joints: list[str]) -> tuple[str, float]:
        """The joint of ``joints`` with the oldest ``source`` state and its age, s (inf if never)."""
        with self._lock:
            return split.oldest_state(self._received[source], joints, time.monotonic())


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

        self.joint_states = JointStateCache({'real': p('real_joint_states_topic'),
                                             'sim': p('sim_joint_states_topic')})
        # Joint states arrive at 2 x 250 Hz: a MultiThreadedExecutor spends most of a core on
        # them (and delays the action traffic), so a helper node on its own single-threaded
        # executor takes them.
        self._listener = Node(f'{self.get_name()}_states', namespace=self.get_namespace(), context=self.context,
                              use_global_arguments=False, start_parameter_services=False)
        qos = QoSProfile(depth=10)
        for source, topic in self.joint_states.topics.items():
            self._listener.create_subscription(JointState, topic,
                                               lambda m, source=source: self.joint_states.on_message(source, m), qos)
        self._listener.create_timer(LISTENER_TURN_PERIOD, self.joint_states.on_turn)
        self._listener_spinner = BackgroundSpinner([self._listener], 'joint state listener')
        action_names: dict[str, str] = {}
        if self.mode in ('sim', 'both'):
            action_names[split.SIM] = p('sim_action')
        if self.mode in ('real', 'both'):
            action_names.update((c.name, c.action) for c in self.controllers)
        self.trajectories = TwinTrajectoryServer(self, p('action_name'), self.mode, self.controllers, self.limits,
                                                 action_names, settings=lambda: self._settings,
                                                 joint_states=self.joint_states)
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
            'start_lead_per_point': float(p('start_lead_per_point')),
            'joint_state_timeout': float(p('joint_state_timeout')),
            'feedback_timeout': float(p('feedback_timeout')),
        }

    def _refresh(self) -> None:
        try:
            self._settings = self._read_settings()
        except ShadowTwinError as exc:
            self.get_logger().error(f'parameters not applied: {exc}')

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
