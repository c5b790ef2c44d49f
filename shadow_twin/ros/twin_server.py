"""The ``shadow_twin`` node: one FollowJointTrajectory action for robot and twin together.

Serves ``control_msgs/action/FollowJointTrajectory`` at ``action_name``
(``/twin/follow_joint_trajectory``) and forwards each goal, split by joint group,
to the real trajectory controllers named in the config and/or to the simulated
controller of the ``mujoco_bridge`` (``sim_action``), by ``mode``:

* ``sim``: the sim gets the goal; "actual" is the sim (``sim_joint_states_topic``).
* ``real``: the real controllers get their joints; "actual" is the robot
  (``real_joint_states_topics``: the joint states of several drivers, e.g. the UR's on
  ``/joint_states`` and the hand's on ``/rh/joint_states``, merged per joint; the older
  single ``real_joint_states_topic``, when set, replaces the list).
* ``both`` (default): both; "actual" is the robot.

**The mobile base** (``base.enabled``; the cell, ``config/twin_cell.yaml``): a goal may
carry the base as MoveIt carries a planar joint, in ``multi_dof_trajectory`` (joint
``base.joint_name``, default ``virtual_joint``; poses in ``odom``), beside the arm and
hand joints in ``trajectory`` or alone. ``shadow_twin.ros.base_driver`` follows it with
one :class:`~shadow_twin.control.base_follower.BaseTrajectoryFollower` per base (mode
``real``/``both``: the MiR, TwistStamped on ``base.real.cmd_vel_topic`` closing the loop
on ``base.real.odom_topic``; ``sim``/``both``: the sim's base on ``/sim/cmd_vel`` and
``/sim/odom``), started at the same stamped time as the controllers' parts. The base
goal is validated as the JTC validates joints (``base_trajectory_from_msg``: NaN,
time order, stamp, speed over ``base.limits``, frame not ``odom``, unknown joint) and
has its tolerances from ``base.tolerances`` and the goal's ``component_*_tolerance``.
A base is needed like a controller: no fresh odometry within ``base.odom_timeout`` or
nobody subscribed to its cmd_vel topic rejects the goal, and nothing moves. Each base's
run ends like a controller goal (its verdict is the follower's: path/goal tolerance,
odometry lost); cancel, preemption and any abort send the bases zero velocity.
Feedback carries the base as MoveIt reads it (``multi_dof_joint_names``,
``multi_dof_desired/actual/error``; actual is the base of the "actual" side).
With ``base.enabled`` false (the hand-only twin) a goal with a ``multi_dof_trajectory``
is rejected (INVALID_JOINTS).

The joints goals are checked against are those of ``model_path`` (an MJCF), or, when it
is empty and ``cell_config`` is set, of the cell built from that cell YAML
(``shadow_twin.model.cell``, as ``shadow-twin model --cell --config`` writes it), else of
the built-in hand.

**Speed scaling.** With ``speed_scaling_topic`` set (the UR driver's
``/speed_scaling_state_broadcaster/speed_scaling``, std_msgs/Float64, percent) the twin
follows the arm's speed scaling and logs it (each change, and with every accepted goal);
:attr:`TwinServer.speed_scaling` holds it; a NaN, infinite or out-of-range value is dropped
with a warning. The UR's scaled controller runs its trajectory's time at that rate, and so do
the sim bridge (``speed_scaling_input_topic``) and the twin: the desired state of the goal
joints matching ``speed_scaled_joints`` (globs, the bridge's parameter) runs on the scaled
clock (``shadow_twin.control.scaled_time.ScaledClock``), and the goal tolerance window
(``goal_time``) opens at their scaled end.

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
  (0.25 s; the cell's config: 0.5 s) plus ``start_lead_per_point`` (200 us) per point, since every controller
  parses and checks all points before it answers; it is chosen from the acceptance times measured by ``benchmarks/faults.py`` on this
  2-core PC under load (see README). Each part carries its joints' tolerances
  from the goal and the goal's ``goal_time_tolerance``.
* **Liveness from data.** A controller counts as gone when the newest joint state
  of one of its goal joints (``real_joint_states_topics``; the sim's on
  ``sim_joint_states_topic``) is older than ``joint_state_timeout`` (0.2 s: the UR
  publishes at 125 Hz, the hand at 125-250 Hz), or, while it runs a part, when
  it sent no feedback for ``feedback_timeout`` (1 s; checked again after
  ``FEEDBACK_GRACE``, so that feedback queued while this process did not run counts;
  past the trajectory's end ``ANSWER_TIMEOUT`` more, as a controller that reached its goal
  stops its feedback and its result may be on its way). A gone controller rejects a
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
* **One goal at a time is handed out.** A goal that arrives while another is
  being sent to the controllers (its ``start_lead``) is rejected at once
  (INVALID_GOAL, "another goal is being accepted"): under a burst of simultaneous
  goals one runs everywhere, or none does, and every controller gets the parts in
  the same order. (Waiting instead would hold the executor threads that take the
  controllers' answers.)
* Cancel: every controller goal is canceled, then the twin goal. A new goal
  preempts the running one (aborted, INVALID_GOAL "preempted by a new goal", as
  the sim does) once all its parts are accepted. The running goal's parts on the
  controllers the new goal uses are left to them: each controller preempts its part
  when it starts the new one (the sim and mock hardware at the new start: a
  rejected goal's parts, canceled before their start, never touch the running goal;
  ros2_controllers' JTC when it accepts the new part). Its parts on other
  controllers are canceled.

Intake, preemption, cancel and results are
:class:`shadow_twin.ros.action_server.FollowJointTrajectoryServer`'s;
:class:`TwinTrajectoryServer` adds the forwarding, :class:`TwinServer` is the node
(parameters, joint states, speed scaling); the base part is
:class:`shadow_twin.ros.base_driver.BaseDriver`'s.

How far the sim is from the robot (sim minus real per joint, RMS levels on
/diagnostics) is the ``twin_monitor`` node's job (``shadow_twin.ros.twin_monitor``).

Run: ``twin_server --ros-args --params-file config/twin.yaml`` (or
``python -m shadow_twin.ros.twin_server ...``; the cell: ``config/twin_cell.yaml``); all
together: ``shadow-twin up``.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from control_msgs.action import FollowJointTrajectory
from rclpy.action.client import ClientGoalHandle
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectoryPoint

from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.common.stamps import from_nanoseconds, to_seconds
from shadow_twin.control import jtc
from shadow_twin.control import twin_split as split
from shadow_twin.control.scaled_time import scaled_mask
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.cell import UR5_JOINTS
from shadow_twin.ros import parameters as ros_params
from shadow_twin.ros.action_client import LockedActionClient
from shadow_twin.ros.action_server import (PREEMPTED, AcceptedGoal, FollowJointTrajectoryServer, feedback_message,
                                           outcome_of_status)
from shadow_twin.ros.base_anchor import AnchorError
from shadow_twin.ros.base_driver import BaseDriver, BaseGoal, BaseRun, base_goal_from_request, has_base_part
from shadow_twin.ros.base_settings import read_base_settings, read_base_topics
from shadow_twin.ros.conversions import time_msg, time_msg_ns
from shadow_twin.ros.guard import guarded_service, guarded_subscription, guarded_timer
from shadow_twin.ros.message_checks import check_joint_state
from shadow_twin.ros.spinning import BackgroundSpinner, all_done_within, run_node
from shadow_twin.ros.twin_inputs import JointStateCache, SpeedScaling, load_limits
from shadow_twin.ros.twin_parameters import ACCEPT_MARGIN, SPECS

NODE_NAME = 'shadow_twin'
#: Period of the joint-state listener's turn timer, s (see JointStateCache.wait_for_turn).
LISTENER_TURN_PERIOD = 0.02
#: Seconds after the start within which a goal waits for joint states or odometry that have not
#: arrived yet (discovery), s.
STARTUP_GRACE = 10.0
#: Seconds a controller silent for longer than ``feedback_timeout`` gets before it counts as gone:
#: feedback that came while this process was not running waits in the executor's queue, and the
#: other executor threads take it meanwhile (as ``wait_for_turn`` for the joint states).
FEEDBACK_GRACE = 0.1
#: Seconds to wait for the controllers to answer a goal / a cancel.
ANSWER_TIMEOUT = 3.0
#: Seconds a new goal waits for the goal it preempted to cancel its controller goals, so
#: that those cancels cannot reach a controller after (and so cancel) the new goal's.
HANDOVER_TIMEOUT = 2 * ANSWER_TIMEOUT
EXECUTOR_THREADS = 6
UR_ACTION = '/scaled_joint_trajectory_controller/follow_joint_trajectory'
DEFAULT_CONTROLLERS = {
    'hand': {'action': '/rh_trajectory_controller/follow_joint_trajectory', 'joints': ['rh_*']},
    'arm': {'action': UR_ACTION, 'joints': list(UR5_JOINTS)},
    'ur_arm': {'action': UR_ACTION, 'joints': list(UR5_JOINTS)},
}


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
        stamp_s: the goal's ``header.stamp``, s (0: start when accepted).
        trajectory: the joint part (ROS joint names; times s from its start), None for a
            base-only goal.
        goal_split: which controllers get which joints.
        tolerances: its path/goal tolerances (None without joints).
        base_goal: the base part (``multi_dof_trajectory``), None without one.
        subs: the controller goals, accepted by every controller.
        base_runs: the base followers started for it (real and/or sim).
        start_s: the common start, s.
        sampler: the desired joint state over time (None without joints).
        order: its place among the goals handed out (1, 2, ...; 0 until all parts are accepted).
        taken_over: the controllers a goal that preempted this one took over (their parts
            end there; the others are canceled).
        reached: the goal tolerance of the joints has held once after the end (true from
            the start for a goal without joints).
    """

    stamp_s: float = 0.0
    trajectory: JointTrajectory | None = None
    goal_split: split.GoalSplit = field(default_factory=lambda: split.GoalSplit([], {}))
    tolerances: jtc.Tolerances | None = None
    base_goal: BaseGoal | None = None
    subs: list[SubGoal] = field(default_factory=list)
    base_runs: list[BaseRun] = field(default_factory=list)
    start_s: float = 0.0
    sampler: split.DesiredSampler | None = None
    reached: bool = False
    order: int = 0
    taken_over: frozenset = frozenset()

    @property
    def reached_text(self) -> str:
        """What the goal's success reached (for its result message)."""
        if self.base_goal is None:
            return split.REACHED_JOINTS
        base = 'the base within its goal tolerances'
        return base if self.trajectory is None else f'{split.REACHED_JOINTS}, {base}'

    @property
    def parts(self) -> list[str]:
        """Names of everything that takes part: the controllers, then the bases."""
        return list(self.goal_split.groups) + [run.name for run in self.base_runs]


class TwinTrajectoryServer(FollowJointTrajectoryServer):
    """The twin's FollowJointTrajectory server: forwards each goal, split by joint group,
    to the controllers in ``action_names`` and its base part to ``base``, and checks it on
    the actual state (see module doc).

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
            ``joint_state_timeout`` (s), ``feedback_timeout`` (s), ``speed_scaled_joints`` (globs),
            ``base``
            (:class:`~shadow_twin.ros.base_settings.BaseSettings` or None).
        joint_states: the node's :class:`JointStateCache`.
        base: the base driver, None without a base.
        speed_scaling: the node's :class:`SpeedScaling`, None when not followed.
    """

    def __init__(self, node: Node, action_name: str, mode: str, controllers: list[split.ControllerSpec],
                 limits: dict[str, jtc.JointLimits], action_names: dict[str, str],
                 settings: Callable[[], dict], joint_states: 'JointStateCache', base: BaseDriver | None = None,
                 speed_scaling: 'SpeedScaling | None' = None) -> None:
        self.mode = mode
        self.controllers = controllers
        self.limits = limits
        self.joints = list(limits)
        self.action_names = action_names
        self._settings = settings
        self.states = joint_states
        self.base = base
        self.speed_scaling = speed_scaling
        #: Where "actual" comes from: the sim in sim mode, else the robot.
        self.actual_source = 'sim' if mode == 'sim' else 'real'
        #: The bases a base goal drives.
        self.base_sides = split.base_sides(mode)
        self._dispatching = 0        # goals being sent to the controllers (guarded by self.lock)
        self._handing_out = threading.Lock()      # one goal at a time is sent to the controllers
        self._handed_out = 0                       # goals whose parts were all accepted
        self._started = time.monotonic()
        super().__init__(node, action_name, HANDOVER_TIMEOUT)
        self.clients = {name: LockedActionClient(node, FollowJointTrajectory, action, callback_group=self.group)
                        for name, action in action_names.items()}

    def _actual(self) -> dict:
        return self.states.get(self.actual_source)

    def _describe(self, name: str) -> str:
        return 'sim' if name == split.SIM else f'{name} controller ({self.action_names[name]})'

    # -- hooks --------------------------------------------------------------------------------------
    def validate(self, request) -> TwinPlan:
        """Check the goal (joints, base), then the liveness of every part it needs, then send
        every part to its controller; returns the plan once all have accepted (see
        :meth:`_dispatch`). Raises ``jtc.GoalRejected`` with the reason."""
        settings = self._settings()
        with_base = has_base_part(request)
        with_joints = not with_base or bool(len(request.trajectory.joint_names) or len(request.trajectory.points))
        if with_base and self.base is None:
            raise jtc.GoalRejected(jtc.INVALID_JOINTS, (
                f'the goal has a multi_dof_trajectory (joints {list(request.multi_dof_trajectory.joint_names)}) '
                f'but this twin drives no base (base.enabled is false)'))
        plan = TwinPlan(split.goal_stamp(to_seconds(request.trajectory.header.stamp) if with_joints else None,
                                         to_seconds(request.multi_dof_trajectory.header.stamp) if with_base else None))
        if with_joints:
            self._validate_joints(request, plan, settings)
        else:
            plan.reached = True
        if with_base:
            self._validate_base(request, plan, settings)
        self._check_alive(plan, settings)
        if not self._handing_out.acquire(blocking=False):
            raise jtc.GoalRejected(jtc.INVALID_GOAL, 'another goal is being accepted (its parts are being sent to '
                                                     'the controllers): send goals one at a time')
        try:
            self._dispatch(request, plan, settings)
        finally:
            self._handing_out.release()
        return plan

    def start(self, goal: AcceptedGoal) -> str | None:
        """The controllers have their parts already (sent and accepted in :meth:`validate`)."""
        plan: TwinPlan = goal.plan
        parts = []
        if plan.trajectory is not None:
            parts.append(f'{len(plan.trajectory.joint_names)} joints, {len(goal.handle.request.trajectory.points)} '
                         f'points, {plan.trajectory.duration:.3f} s')
        if plan.base_goal is not None:
            parts.append(f'base {len(plan.base_goal.trajectory.times)} points, '
                         f'{plan.base_goal.trajectory.duration:.3f} s')
        scaling = ''
        if self.speed_scaling is not None:
            scaling = f'; arm speed scaling {self.speed_scaling.describe()}'
            if plan.sampler is not None and plan.sampler.scaled.any():
                scaling += f' (the time of {int(plan.sampler.scaled.sum())} speed-scaled joints runs at it)'
        self.log.info(f'accepted goal: {"; ".join(parts)}; accepted by {", ".join(plan.parts)}, starting at '
                      f'{plan.start_s:.3f} s{scaling}')
        return None

    def step(self, goal: AcceptedGoal) -> jtc.Verdict | None:
        plan: TwinPlan = goal.plan
        with self.lock:
            if self._dispatching:        # a new goal is being accepted: it will preempt this one
                return None
        self._update_results(plan)
        now_ns = self.node.get_clock().now().nanoseconds
        now = from_nanoseconds(now_ns)
        check = jtc.RUNNING_VERDICT
        if plan.trajectory is None:
            empty = np.zeros(0)
            fb = feedback_message(time_msg_ns(now_ns), [], now - plan.start_s, (empty, empty, empty), (empty, empty))
        else:
            scaling = plan.sampler.scaling if self.speed_scaling is None else self.speed_scaling.fraction
            if scaling != plan.sampler.scaling:
                plan.sampler.set_scaling(now, scaling)        # the lag so far is integrated at the old one
            desired, desired_vel, desired_acc, t = plan.sampler.at(now)
            names = list(plan.trajectory.joint_names)
            pos, vel = split.state_arrays(names, self._actual())
            fb = feedback_message(time_msg_ns(now_ns), names, t, (desired, desired_vel, desired_acc), (pos, vel))
            check = self._check_joints(plan, now, t, names, (desired, desired_vel), (pos, vel))
        actual_run = next((r for r in plan.base_runs if r.endpoint.side == self.actual_source), None)
        if actual_run is not None:
            self.base.fill_feedback(fb, actual_run, now, plan.base_goal.trajectory.joint_name)
        goal.handle.publish_feedback(fb)
        results = {s.name: s.result for s in plan.subs}
        results.update((run.name, run.result()) for run in plan.base_runs)
        verdict = split.decide(check, plan.reached, results, plan.reached_text)
        return None if verdict.outcome is jtc.GoalOutcome.RUNNING else verdict

    def supersedes(self, plan: TwinPlan, running: TwinPlan) -> bool:
        """A goal preempts the running one if its parts were handed out after the running one's."""
        return plan.order > running.order

    def preempt(self, goal: AcceptedGoal, by_plan: TwinPlan) -> None:
        """Note the controllers the new goal takes over (``stop`` leaves those parts to them)."""
        goal.plan.taken_over = frozenset(by_plan.goal_split.groups)
        super().preempt(goal, by_plan)

    def stop(self, goal: AcceptedGoal) -> None:
        """Stop the bases (zero velocity), cancel the controller goals still running (waits for
        the answers of those not gone), except those on controllers a preempting goal took over."""
        plan: TwinPlan = goal.plan
        stopped = []
        if plan.base_runs:
            reason = goal.verdict.message if goal.verdict is not None else 'the twin goal was aborted'
            stopped = self.base.abort(plan.base_runs, f'twin goal aborted: {reason}')
        canceled = self._cancel_and_wait([s for s in plan.subs if s.name not in plan.taken_over], results=False)
        if canceled or stopped:
            self.log.info(f'canceled the parts of: {", ".join(canceled + stopped)}')

    def cancel(self, goal: AcceptedGoal) -> str:
        """Stop the bases (zero velocity), cancel the controller goals and wait until they have ended."""
        plan: TwinPlan = goal.plan
        if plan.base_runs:
            self.base.cancel(plan.base_runs)
        self._cancel_and_wait(plan.subs, results=True)
        return f'goal canceled; controller goals canceled: {", ".join(plan.parts)}'

    def period(self) -> float:
        return 1.0 / self._settings()['feedback_rate']

    # -- goal checks ----------------------------------------------------------------------------
    def _validate_joints(self, request, plan: TwinPlan, settings: dict) -> None:
        """The joint part: JTC rules against the model, tolerances, the split by controller."""
        try:
            limits = {j: jtc.JointLimits(lim.lower, lim.upper, settings['velocity_limits'].get(j))
                      for j, lim in self.limits.items()}
        except ShadowTwinError as exc:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'velocity_limits parameter is invalid: {exc}') from None
        names = list(request.trajectory.joint_names)
        known = set(self.joints)
        # just started: give the joint states a moment to arrive
        self._wait_for_first_states(self.actual_source, [j for j in names if j in known], settings)
        actual = self._actual()
        current = {j: actual[j][0] for j in names if j in actual} or None
        plan.trajectory = jtc.validate_goal_msg(request.trajectory, self.joints, limits, self._now_s(),
                                                settings['allow_partial_joints_goal'], current_positions=current)
        plan.tolerances = jtc.tolerances_for_goal(settings['constraints'], request, self.joints)
        plan.goal_split = split.split_goal(names, self.controllers, self.mode)
        missing = [j for j in names if j not in actual]
        if missing:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'no {self.actual_source} joint state for {missing} yet')

    def _validate_base(self, request, plan: TwinPlan, settings: dict) -> None:
        """The base part: re-anchor the sim base first when the bases stand apart (mode both,
        :class:`~shadow_twin.ros.base_anchor.BaseAnchor`), then ``base_goal_from_request`` from the
        actual base's pose."""
        if self.base.anchor is not None and not self.base.busy():
            try:
                self.base.anchor.anchor_if_apart(*settings['base'].anchor_offsets)
            except AnchorError as exc:
                raise jtc.GoalRejected(jtc.INVALID_GOAL, f'the sim base stands apart from the real base and could '
                                                         f'not be re-anchored: {exc}') from None
        pose = self.base.current_pose(self.actual_source,
                                      wait_s=max(0.0, self._first_data_deadline(settings) - time.monotonic()))
        plan.base_goal = base_goal_from_request(request, settings['base'], self._now_s(), pose)

    def _first_data_deadline(self, settings: dict) -> float:
        """Until when (monotonic s) a goal waits for data that has never arrived: ``server_timeout``
        s from now, and within ``STARTUP_GRACE`` s of this server's start (DDS discovery of every
        publisher takes seconds on a loaded machine; a goal sent as soon as the twin answers would
        otherwise be rejected for data that is on its way)."""
        return max(time.monotonic() + settings['server_timeout'], self._started + STARTUP_GRACE)

    def _wait_for_first_states(self, source: str, joints: list[str], settings: dict) -> None:
        """Wait, until :meth:`_first_data_deadline`, while a joint of ``joints`` has never had a
        ``source`` state."""
        deadline = self._first_data_deadline(settings)
        while joints and self.states.oldest(source, joints)[1] == float('inf') and time.monotonic() < deadline:
            time.sleep(0.01)

    def _check_alive(self, plan: TwinPlan, settings: dict) -> None:
        """Every controller and base the goal needs is there (data fresh, action server found).
        Just after a start, a source whose joint states have not arrived yet (DDS discovery of a
        publisher takes a moment) is waited for, up to ``server_timeout`` s."""
        for name in plan.goal_split.groups:
            self._wait_for_first_states(self._source(name), plan.goal_split.joints_of(name), settings)
        for name in plan.goal_split.groups:
            gone = self._staleness(self._source(name), plan.goal_split.joints_of(name), settings)
            if gone is not None:
                raise jtc.GoalRejected(jtc.INVALID_GOAL, f'{self._describe(name)} is gone: {gone}')
            if not self.clients[name].wait_for_server(timeout_sec=settings['server_timeout']):
                raise jtc.GoalRejected(jtc.INVALID_GOAL, f'{self._describe(name)}: action server is not '
                                                         f'available (waited {settings["server_timeout"]:g} s)')
        if plan.base_goal is not None:
            for side in self.base_sides:
                why = self.base.missing(side)
                if why is not None:
                    raise jtc.GoalRejected(jtc.INVALID_GOAL, f'{self.base.describe(side)} is missing: {why}')

    def _check_joints(self, plan: TwinPlan, now: float, t: float, names: list[str], desired: tuple,
                      actual: tuple) -> jtc.Verdict:
        """The twin's own path/goal tolerance check of the joints on the actual state."""
        (desired_pos, desired_vel), (pos, vel) = desired, actual
        if now < plan.sampler.end_s:
            if t >= 0:
                return jtc.check_path(names, desired_pos, desired_vel, pos, vel, plan.tolerances)
            return jtc.RUNNING_VERDICT
        target_vel = None if plan.trajectory.velocities is None else plan.trajectory.velocities[-1]
        check = jtc.check_goal(names, plan.trajectory.positions[-1], pos, vel, plan.tolerances,
                               now - plan.sampler.end_s, target_vel=target_vel)
        if check.outcome is jtc.GoalOutcome.SUCCEEDED:
            plan.reached = True
        elif plan.reached and check.outcome is jtc.GoalOutcome.ABORTED:
            check = jtc.Verdict(jtc.GoalOutcome.RUNNING, jtc.SUCCESSFUL, check.message)   # wait for the controllers
        return check

    # -- controller goals -----------------------------------------------------------------------
    def _now_s(self) -> float:
        return from_nanoseconds(self.node.get_clock().now().nanoseconds)

    def _source(self, name: str) -> str:
        return 'sim' if name == split.SIM else 'real'

    def _dispatch(self, request, plan: TwinPlan, settings: dict) -> None:
        """Send each controller its part, stamped with one start time, and wait until all have
        accepted, by :func:`split.acceptance_deadline` (``ACCEPT_MARGIN`` before the start);
        then start the base followers at that time.

        A part rejected or not accepted in time: the parts accepted so far are canceled
        (before the start, so nothing moves) and the goal is rejected with the reason. Once
        all have accepted, this goal preempts the running one. Runs holding ``_handing_out``.
        Raises ``jtc.GoalRejected``.
        """
        goals = {name: self._sub_goal(request, plan.goal_split, name) for name in plan.goal_split.groups}
        plan.subs = [SubGoal(name, self.clients[name], plan.goal_split.joints_of(name), self._source(name))
                     for name in plan.goal_split.groups]
        now_s, now_mono = self._now_s(), time.monotonic()
        points = len(request.trajectory.points) + len(request.multi_dof_trajectory.points)
        lead = settings['start_lead'] + settings['start_lead_per_point'] * points
        start_s = plan.start_s = split.start_stamp(plan.stamp_s, now_s, lead)
        accept_by = split.acceptance_deadline(start_s, now_s, lead, ACCEPT_MARGIN, ANSWER_TIMEOUT)
        if plan.trajectory is not None:
            names = list(plan.trajectory.joint_names)
            scaled = scaled_mask(names, settings['speed_scaled_joints'])
            scaling = 1.0 if self.speed_scaling is None else self.speed_scaling.fraction
            plan.sampler = split.DesiredSampler(plan.trajectory, split.state_arrays(names, self._actual())[0],
                                                start_s, scaled, scaling, now_s)
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
            if plan.base_goal is not None:
                plan.base_runs = self.base.start(plan.base_goal, start_s, self.base_sides, PREEMPTED)
            self._handed_out += 1
            plan.order = self._handed_out
            self.preempt_running(plan)
        except jtc.GoalRejected:
            raise
        except BaseException:
            self._cancel_and_wait([s for s in plan.subs if s.handle is not None], results=False, timeout=0.0)
            for _, future in sends:
                future.add_done_callback(_cancel_when_accepted)
            if plan.base_runs:
                self.base.abort(plan.base_runs, 'the goal failed to start')
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
                f'from {self.states.topic_of(source, joint)})')

    def _update_results(self, plan: TwinPlan) -> None:
        settings = self._settings()
        quiet_limit = settings['feedback_timeout']
        if plan.trajectory is not None and self._now_s() >= plan.start_s + plan.trajectory.duration:
            # past the trajectory's end a controller that reached its goal sends no more feedback,
            # and its result may still be on its way: give it ANSWER_TIMEOUT more (its joint states
            # still show whether it is there)
            quiet_limit += ANSWER_TIMEOUT
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
            if why is None and silent > quiet_limit:
                time.sleep(FEEDBACK_GRACE)
                silent = time.monotonic() - sub.last_heard
            if why is None and silent > quiet_limit + FEEDBACK_GRACE:
                after_end = '' if quiet_limit == settings['feedback_timeout'] else \
                    f' + {ANSWER_TIMEOUT:g} s for its result after the trajectory end'
                why = (f'its action server stopped answering: no feedback for {silent:.2f} s '
                       f'(feedback_timeout {settings["feedback_timeout"]:g} s{after_end})')
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


class TwinServer(Node):
    """The twin's trajectory action server (see module doc). Raises ShadowTwinError/ConfigError
    for a bad configuration (mode, controllers, model, constraints, base)."""

    def __init__(self, node_name: str = NODE_NAME, **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        ros_params.declare(self, SPECS)
        p = self._param
        self.mode = split.parse_mode(p('mode'))
        self.controllers = self._read_controllers()
        self.limits = load_limits(p('model_path'), p('cell_config'))
        self.joints = list(self.limits)
        ros_params.declare(self, ros_params.constraint_specs(
            self.joints, ros_params.load_constraints(p('constraints_file'))))
        self.base_enabled = bool(p('base.enabled'))
        self._settings = self._read_settings()
        self.add_post_set_parameters_callback(lambda _: self._refresh())

        self.joint_states = JointStateCache({'real': ros_params.real_joint_state_topics(self),
                                             'sim': [p('sim_joint_states_topic')]})
        # Joint states arrive at 2 x 250 Hz: a MultiThreadedExecutor spends most of a core on
        # them (and delays the action traffic), so a helper node on its own single-threaded
        # executor takes them.
        self._listener = Node(f'{self.get_name()}_states', namespace=self.get_namespace(), context=self.context,
                              use_global_arguments=False, start_parameter_services=False)
        qos = QoSProfile(depth=10)
        for source, topics in self.joint_states.topics.items():
            for topic in topics:
                guarded_subscription(
                    self._listener, JointState, topic, lambda m, source=source, topic=topic:
                    self.joint_states.on_message(source, m, topic), qos, check=check_joint_state)
        guarded_timer(self._listener, LISTENER_TURN_PERIOD, self.joint_states.on_turn, 'listener turn')
        self.speed_scaling = None
        if p('speed_scaling_topic'):
            self.speed_scaling = SpeedScaling(p('speed_scaling_topic'), self.get_logger())
            guarded_subscription(self._listener, Float64, p('speed_scaling_topic'), self.speed_scaling.on_message, qos)
        self._listener_spinner = BackgroundSpinner([self._listener], 'joint state listener')
        self.base = None
        if self.base_enabled:
            topics = {side: read_base_topics(p, side) for side in split.base_sides(self.mode)}
            anchor = p('base.anchor.service') if p('base.anchor.enabled') else ''
            self.base = BaseDriver(self.context, f'{self.get_name()}_base', self.get_namespace(), topics,
                                   settings=lambda: self._settings['base'],
                                   now=lambda: from_nanoseconds(self.get_clock().now().nanoseconds),
                                   anchor_service=anchor, answer_timeout=lambda: self._settings['server_timeout'])
            if self.base.anchor is not None:
                guarded_service(self, Trigger, '~/anchor_base', self._on_anchor_base)
        action_names: dict[str, str] = {}
        if self.mode in ('sim', 'both'):
            action_names[split.SIM] = p('sim_action')
        if self.mode in ('real', 'both'):
            action_names.update((c.name, c.action) for c in self.controllers)
        self.trajectories = TwinTrajectoryServer(self, p('action_name'), self.mode, self.controllers, self.limits,
                                                 action_names, settings=lambda: self._settings,
                                                 joint_states=self.joint_states, base=self.base,
                                                 speed_scaling=self.speed_scaling)
        real = ', '.join(f'{c.name}: {c.action} {list(c.joints)}' for c in self.controllers)
        base = 'none'
        if self.base is not None:
            base = (f'joint {self._settings["base"].joint_name} in {self._settings["base"].frame}: '
                    + '; '.join(self.base.describe(side) for side in self.base.endpoints))
        self.get_logger().info(f'serving {p("action_name")}, mode {self.mode}; real controllers: {real or "none"}; '
                               f'sim: {p("sim_action")}; real joint states: '
                               f'{", ".join(self.joint_states.topics["real"])}; base: {base}')

    def _on_anchor_base(self, request, response):
        """``~/anchor_base``: put the sim base on the real one now (refused while a goal drives them)."""
        if self.base.busy():
            response.success, response.message = False, 'a goal drives the bases: re-anchor when it has ended'
            return response
        try:
            response.success, response.message = True, self.base.anchor.anchor('requested on ~/anchor_base')
        except AnchorError as exc:
            response.success, response.message = False, f'could not re-anchor the sim base: {exc}'
        return response

    @property
    def speed_scaling_percent(self) -> float | None:
        """The arm's newest speed scaling, percent (None when not followed or not heard yet)."""
        return None if self.speed_scaling is None else self.speed_scaling.value

    def destroy_node(self) -> None:
        if self.base is not None:
            self.base.shutdown()
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
            'velocity_limits': ros_params.parse_velocity_limits(p('velocity_limits')),
            'constraints': ros_params.constraints_config(self, self.joints),
            'server_timeout': float(p('server_timeout')),
            'start_lead': float(p('start_lead')),
            'start_lead_per_point': float(p('start_lead_per_point')),
            'joint_state_timeout': float(p('joint_state_timeout')),
            'feedback_timeout': float(p('feedback_timeout')),
            'speed_scaled_joints': list(p('speed_scaled_joints') or []),
            'base': read_base_settings(p) if self.base_enabled else None,
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
