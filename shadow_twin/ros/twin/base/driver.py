"""The twin's mobile base part: one base trajectory follower per base, the real MiR and the sim's.

A ``FollowJointTrajectory`` goal carries the base as MoveIt carries a planar joint:
in ``multi_dof_trajectory``, one joint (``base.joint_name``, default ``virtual_joint``),
poses (x, y, yaw) in ``odom`` (``base.frame``). The rules for accepting it are
``shadow_twin.control.base.trajectory``'s (the JTC's, plus frame, planar transforms and
the speed limits ``base.limits``: 2 m/s, 1.5 rad/s); the tracking law, tolerances and
verdicts are ``shadow_twin.control.base.follower``'s. This module is the ROS around them:

* :class:`~shadow_twin.ros.twin.base.endpoint.BaseEndpoint`: one base's topics: TwistStamped
  commands out on ``cmd_vel_topic``, ``nav_msgs/Odometry`` in on ``odom_topic``.
* :class:`BaseRun`: one goal's following on one endpoint: a
  :class:`~shadow_twin.control.base.follower.BaseTrajectoryFollower` and how it ended.
* :class:`BaseDriver`: the endpoints of the twin's mode (``real``: the MiR, ``sim``: the
  sim's base) on a node of its own, spun by its own thread (as the twin's joint state
  listener), with a control timer at ``base.control_rate`` (50 Hz) that ticks every
  running follower on the newest odometry and sends its twist.

Frames: the sim's odometry frame (``sim/odom``) is the twin of the real ``odom``; both
start at the origin where their base starts. A goal pose in ``odom`` is followed by each
base in its own odometry frame, so each closes its loop on its own odometry.

Liveness (rejects a goal before anything moves, as a missing controller does): a base is
missing when its newest odometry is older than ``base.odom_timeout`` (0.5 s; the sim's base:
``base.sim_odom_timeout``, 1 s) or none came, or when nobody subscribes to its cmd_vel topic.
While a goal runs, odometry older than that timeout at two ticks in a row (so that a stall of this process is not blamed
on the base) aborts that base's run as gone.

Stopping: a run that ends (succeeded, aborted, canceled, preempted, its odometry lost)
sends a zero twist at once and at every tick until its base reports rest on an odometry
received after the stop (at least ``STOP_REPEAT`` s; at most ``base.stop_hold_timeout``:
a base bridge that stalled finds a zero command when it resumes), then nothing (the MiR
and the sim bridge stop by themselves when commands lapse, ``cmd_vel_timeout``). Nothing
is sent while no run is active: a rejected goal sends no TwistStamped.

Another driver: a velocity command on a base's cmd_vel topic that the twin did not send,
arriving while a run drives that base (a joystick, a navigation stack), is heard by
:class:`~shadow_twin.ros.twin.base.cmd_vel_watch.CmdVelWatch` in a subscription callback; with
``base.other_publishers`` ``abort`` (default) that run aborts at once (zero twist sent; the twin
then stops the goal and the other base), naming the topic, the type and the sender; ``warn``
logs it and the run goes on. A node that only holds a publisher there sends nothing and is
never judged.

Units: m, rad, m/s, rad/s, s.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from geometry_msgs.msg import Transform, Twist
from rclpy.context import Context
from rclpy.node import Node
from trajectory_msgs.msg import MultiDOFJointTrajectoryPoint

from shadow_twin.common.stamps import to_seconds
from shadow_twin.control import jtc
from shadow_twin.twin.timing import goal_stamp
from shadow_twin.twin.verdict import ControllerResult
from shadow_twin.control.base.follower import BaseTolerances, BaseTrajectoryFollower, base_tolerances_from_goal
from shadow_twin.control.base.trajectory import BaseSample, BaseTrajectory, base_trajectory_from_msg
from shadow_twin.control.diff_drive import ZERO_TWIST, Pose2D, wrap_angle
from shadow_twin.ros.twin.base.anchor import BaseAnchor
from shadow_twin.ros.twin.base.endpoint import BaseEndpoint, OdomSample  # noqa: F401  (OdomSample: re-exported)
from shadow_twin.ros.twin.base.settings import BaseSettings, BaseTopics
from shadow_twin.ros.twin.base.cmd_vel_watch import CmdVelWatch, ForeignMessage
from shadow_twin.ros.conversions import duration_msg
from shadow_twin.ros.guard import guarded_timer
from shadow_twin.ros.spinning import BackgroundSpinner

#: Shortest time zero twists are sent after a run ends, s (then until the base reports rest).
STOP_REPEAT = 0.3
#: Shortest interval between two warnings about another driver on one base (warn), s.
OTHER_WARN_PERIOD = 5.0
#: Seconds to wait for a fresher odometry message before calling a base missing (a stall of
#: this process must not be blamed on the base).
FRESH_WAIT = 0.1
#: Result names of the base runs (in the twin's results and messages), by side.
RUN_NAMES = {'real': 'base', 'sim': 'sim base'}


def _timeout_name(side: str) -> str:
    """The parameter that holds the odometry timeout of ``side``, for messages."""
    return 'base.sim_odom_timeout' if side == 'sim' else 'base.odom_timeout'

def has_base_part(request) -> bool:
    """True if a FollowJointTrajectory goal carries a ``multi_dof_trajectory`` (joints or points)."""
    multi = request.multi_dof_trajectory
    return bool(len(multi.joint_names) or len(multi.points))


@dataclass(frozen=True)
class BaseGoal:
    """The base part of an accepted goal: its trajectory (poses in ``odom``) and tolerances."""

    trajectory: BaseTrajectory
    tolerances: BaseTolerances


def base_goal_from_request(request, settings: BaseSettings, now_s: float, current_pose: Pose2D | None) -> BaseGoal:
    """Check the component tolerances and ``goal_time_tolerance`` of ``request``
    (``base_tolerances_from_goal``), then its ``multi_dof_trajectory`` (``base_trajectory_from_msg``:
    joint name, frame, NaN, time order, stamp, speed limits and point 0 from ``current_pose``
    within the path tolerance, drivable segments) under the goal's common stamp (the joint
    trajectory's when the base's is 0: the twin starts both at it). Raises GoalRejected."""
    tolerances = base_tolerances_from_goal(settings.tolerances, request, settings.joint_name)
    joints = request.trajectory
    stamp = goal_stamp(to_seconds(joints.header.stamp) if len(joints.joint_names) or len(joints.points)
                       else None, to_seconds(request.multi_dof_trajectory.header.stamp))
    trajectory = base_trajectory_from_msg(request.multi_dof_trajectory, joint_name=settings.joint_name,
                                          expected_frame=settings.frame, limits=settings.limits, now=now_s,
                                          current_pose=current_pose, stamp=stamp,
                                          path_tolerance=(tolerances.path_position, tolerances.path_yaw))
    return BaseGoal(trajectory, tolerances)


class BaseRun:
    """One goal's following on one base.

    Attributes:
        name: its result name (:data:`RUN_NAMES`).
        endpoint: the base.
        follower: the trajectory follower.
        gone: why the base was given up (its odometry stopped), or None.
        last_step: the follower's newest step (reference, error), None before the first tick.
        stopped_at: monotonic s when the run ended and zero twists began (None while running).
    """

    def __init__(self, endpoint: BaseEndpoint, follower: BaseTrajectoryFollower) -> None:
        self.name = RUN_NAMES[endpoint.side]
        self.endpoint = endpoint
        self.follower = follower
        self.gone: str | None = None
        self.last_step = None
        self.stopped_at: float | None = None
        #: Control ticks in a row that found the odometry older than ``base.odom_timeout``.
        self.stale_ticks = 0

    def result(self) -> ControllerResult | None:
        """How the run ended, as a controller result (None while it runs)."""
        verdict = self.follower.verdict
        if verdict.outcome is jtc.GoalOutcome.RUNNING:
            return None
        return ControllerResult(verdict.outcome, verdict.code, verdict.message, gone=self.gone is not None)

    def reference(self, now_s: float) -> BaseSample:
        """The desired state at ``now_s`` (s, the twin's clock)."""
        return self.follower.trajectory.sample(now_s - self.follower.start_time)


class BaseDriver:
    """The twin's base follower loop (see module doc).

    Args:
        context: the twin node's rclpy context.
        node_name: the driver's node name (e.g. ``shadow_twin_base``), in ``namespace``.
        topics: {side: :class:`BaseTopics`} of the bases it drives ('real', 'sim').
        settings: callable returning the current :class:`BaseSettings`.
        now: callable returning the twin's clock, s (goals' stamps are on it).
    """

    def __init__(self, context: Context, node_name: str, namespace: str, topics: dict[str, BaseTopics],
                 settings: Callable[[], BaseSettings], now: Callable[[], float], anchor_service: str = '',
                 answer_timeout: Callable[[], float] = lambda: 1.0) -> None:
        self._settings, self._now = settings, now
        self.node = Node(node_name, namespace=namespace, context=context, use_global_arguments=False,
                         start_parameter_services=False)
        self.log = self.node.get_logger()
        self.endpoints = {side: BaseEndpoint(self.node, side, t) for side, t in topics.items()}
        self._lock = threading.Lock()
        self._runs: dict[str, BaseRun] = {}
        self._warned: dict[str, float] = {}
        guarded_timer(self.node, 1.0 / settings().control_rate, self._tick, 'base control')
        #: Re-anchors the sim base to the real one (both bases driven and ``anchor_service`` set), else None.
        self.anchor = None
        if anchor_service and {'real', 'sim'} <= set(self.endpoints):
            self.anchor = BaseAnchor(self.node, anchor_service, self.endpoints['real'], self.endpoints['sim'],
                                     busy=self.busy, timeout=answer_timeout)
        self._spinner = BackgroundSpinner([self.node], 'base driver')
        self.watch = CmdVelWatch(context, node_name, namespace, {s: e.cmd_vel for s, e in self.endpoints.items()},
                                 {s: e.own for s, e in self.endpoints.items()},
                                 {f'{self.node.get_namespace().rstrip("/")}/{node_name}'}, self._on_foreign,
                                 wanted=self._driving)
        for endpoint in self.endpoints.values():
            endpoint.own_readers = 1         # the watch's TwistStamped subscription, in this participant
        if self.anchor is not None:
            self.anchor.start_watching(lambda: self._settings().anchor_offsets)

    def busy(self) -> bool:
        """True while a run drives a base or holds it with zero twists."""
        with self._lock:
            return bool(self._runs)

    # -- goal intake --------------------------------------------------------------------------
    def current_pose(self, side: str, wait_s: float = 0.0) -> Pose2D | None:
        """The newest pose of ``side`` (waiting up to ``wait_s`` for the first odometry), or None."""
        endpoint = self.endpoints[side]
        deadline = time.monotonic() + wait_s
        while endpoint.latest() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        latest = endpoint.latest()
        return None if latest is None else latest.pose

    def missing(self, side: str) -> str | None:
        """Why the base of ``side`` counts as missing (stale or no odometry, nobody takes its
        commands), or None. A stale odometry gets :data:`FRESH_WAIT` s to be renewed."""
        endpoint = self.endpoints[side]
        timeout = self._settings().odom_timeout_of(side)
        age = endpoint.age()
        if age > timeout:
            seen = endpoint.received()
            deadline = time.monotonic() + FRESH_WAIT
            while endpoint.received() == seen and time.monotonic() < deadline:
                time.sleep(0.005)
            age = endpoint.age()
        if age > timeout:
            since = 'none received' if age == math.inf else f'the newest is {age:.3f} s old'
            return (f'no fresh odometry on {endpoint.topics.odom}: {since} ({_timeout_name(side)} {timeout:g} s)')
        if endpoint.subscribers() < 1:
            return f'nobody subscribes to its velocity commands on {endpoint.topics.cmd_vel}'
        return None

    def describe(self, side: str) -> str:
        """The base of ``side`` and its topics, for messages."""
        return self.endpoints[side].describe()

    # -- runs -----------------------------------------------------------------------------------
    def start(self, goal: BaseGoal, start_s: float, sides: list[str], message: str) -> list[BaseRun]:
        """Start following ``goal`` from ``start_s`` (s, the twin's clock) on ``sides``, each from
        its current pose (as the JTC starts from the current state); a run still going on a side
        is aborted with ``message`` (preempted) and replaced without a stop."""
        settings = self._settings()
        runs = []
        with self._lock:
            for side in sides:
                endpoint = self.endpoints[side]
                latest = endpoint.latest()
                follower = BaseTrajectoryFollower(goal.trajectory, start_s,
                                                  start_pose=None if latest is None else latest.pose,
                                                  gains=settings.gains, limits=settings.limits,
                                                  tolerances=goal.tolerances, geometry=settings.geometry,
                                                  command_latency=settings.command_latency)
                previous = self._runs.get(side)
                if previous is not None:
                    previous.follower.abort(message)
                run = BaseRun(endpoint, follower)
                self._runs[side] = run
                runs.append(run)
        return runs

    def cancel(self, runs: list[BaseRun], message: str = 'goal canceled') -> list[str]:
        """Cancel ``runs`` (zero twist sent at once to each base a run still drives); returns their names."""
        return self._end(runs, lambda run: run.follower.cancel(message))

    def abort(self, runs: list[BaseRun], message: str) -> list[str]:
        """Abort ``runs`` (INVALID_GOAL ``message``; zero twist sent at once); returns their names."""
        return self._end(runs, lambda run: run.follower.abort(message))

    def _end(self, runs: list[BaseRun], how: Callable[[BaseRun], Any]) -> list[str]:
        now_s, names = self._now(), []
        with self._lock:
            for run in runs:
                how(run)
                if self._runs.get(run.endpoint.side) is run:      # still this goal's base: stop it now
                    run.stopped_at = time.monotonic()
                    run.endpoint.send(ZERO_TWIST, now_s)
                    names.append(run.name)
        return names

    def stop_all(self, message: str) -> None:
        """Abort every run and send zero twists (shutdown)."""
        with self._lock:
            runs = list(self._runs.values())
        self.abort(runs, message)

    def _tick(self) -> None:
        """Control timer: tick every run on its base's newest odometry and send the twist."""
        settings = self._settings()
        now_s, now_mono = self._now(), time.monotonic()
        with self._lock:
            for side, run in list(self._runs.items()):
                endpoint = run.endpoint
                if run.stopped_at is not None:
                    if self._stop_held(run, now_mono, settings):
                        endpoint.send(ZERO_TWIST, now_s)
                    else:
                        del self._runs[side]
                    continue
                latest = endpoint.latest()
                age = math.inf if latest is None else now_mono - latest.received
                timeout = settings.odom_timeout_of(side)
                run.stale_ticks = run.stale_ticks + 1 if age > timeout else 0
                if run.stale_ticks >= 2 and not run.follower.done:
                    since = 'none received' if latest is None else f'the newest is {age:.3f} s old'
                    run.gone = (f'{endpoint.describe()} is gone: no fresh odometry ({since}; {_timeout_name(side)} '
                                f'{timeout:g} s)')
                    run.follower.abort(run.gone)
                    self.log.error(run.gone)
                if latest is not None and not run.follower.done:
                    run.last_step = run.follower.update(
                        now_s, latest.pose, (latest.v, latest.omega),
                        pose_time=latest.measured_at(now_s, now_mono, timeout))
                    command = run.last_step.command
                else:
                    command = ZERO_TWIST
                endpoint.send(command, now_s)
                if run.follower.done:
                    run.stopped_at = now_mono

    def _stop_held(self, run: BaseRun, now_mono: float, settings: BaseSettings) -> bool:
        """True while an ended run still sends zero twists: for ``STOP_REPEAT`` s, then until its
        base reports rest on odometry received since, at most ``base.stop_hold_timeout`` s."""
        held = now_mono - run.stopped_at
        if held < STOP_REPEAT:
            return True
        stopped = max(run.follower.tolerances.stopped_velocity, settings.tolerances.stopped_velocity, 1e-3)
        if run.endpoint.at_rest(run.stopped_at, stopped):
            return False
        if held >= settings.stop_hold_timeout:
            self.log.warning(f'{run.endpoint.describe()}: no odometry showed it at rest {held:.1f} s after its run '
                             f'ended (base.stop_hold_timeout); zero twists stop')
            return False
        return True

    def _driving(self, side: str) -> bool:
        """True while a run drives the base of ``side`` (not ended, not holding zero twists)."""
        with self._lock:
            run = self._runs.get(side)
            return run is not None and run.stopped_at is None and not run.follower.done

    def _on_foreign(self, message: ForeignMessage) -> None:
        """A command the twin did not send on the cmd_vel topic of a base a run drives (a watch
        thread): with ``base.other_publishers`` ``abort`` the run aborts and its base gets a zero
        twist at once (the twin then stops the goal and the other base); ``warn``: a warning
        (at most one per :data:`OTHER_WARN_PERIOD` s per base) and the run goes on."""
        settings = self._settings()
        side = message.side
        why = (f'{message.describe()} (sent {max(0.0, message.received_s - message.sent_s) * 1e3:.0f} ms ago) while '
               f'the twin drives the {side} base: another driver (a joystick or a navigation stack?)')
        if settings.other_publishers != 'abort':
            now = time.monotonic()
            if now - self._warned.get(side, -math.inf) >= OTHER_WARN_PERIOD:
                self._warned[side] = now
                self.log.warning(f'{why}; the goal goes on (base.other_publishers warn)')
            return
        with self._lock:
            run = self._runs.get(side)
            if run is None or run.stopped_at is not None or run.follower.done:
                return
            run.follower.abort(f'{why}: aborted (base.other_publishers abort)')
            run.stopped_at = time.monotonic()
            run.endpoint.send(ZERO_TWIST, self._now())
        self.log.error(run.follower.verdict.message)

    # -- feedback -------------------------------------------------------------------------------
    def fill_feedback(self, feedback, run: BaseRun, now_s: float, joint_name: str) -> None:
        """Set the ``multi_dof_*`` fields of a FollowJointTrajectory feedback as MoveIt reads them:
        desired = the run's reference, actual = its base's odometry (velocities as d/dt in the
        odom frame), error = desired - actual (yaw wrapped)."""
        reference = run.reference(now_s)
        latest = run.endpoint.latest()
        since = duration_msg(now_s - run.follower.start_time)
        desired = (reference.x, reference.y, reference.yaw)
        desired_vel = (reference.x_dot, reference.y_dot, reference.yaw_rate)
        if latest is None:
            actual, actual_vel = (math.nan,) * 3, (math.nan,) * 3
        else:
            actual, actual_vel = tuple(latest.pose), latest.odom_velocity
        error = (desired[0] - actual[0], desired[1] - actual[1], wrap_angle(desired[2] - actual[2]))
        error_vel = tuple(d - a for d, a in zip(desired_vel, actual_vel))
        feedback.multi_dof_joint_names = [joint_name]
        feedback.multi_dof_desired = _multi_dof_point(desired, desired_vel, since)
        feedback.multi_dof_actual = _multi_dof_point(actual, actual_vel, since)
        feedback.multi_dof_error = _multi_dof_point(error, error_vel, since)

    def shutdown(self) -> None:
        """Stop the bases (zero twists) and the driver's thread; destroy its node."""
        self.stop_all('the twin server is shutting down')
        if self.anchor is not None:
            self.anchor.shutdown()
        self.watch.shutdown()
        self._spinner.shutdown()
        self.node.destroy_node()


def _multi_dof_point(pose, velocity, since) -> MultiDOFJointTrajectoryPoint:
    """A MultiDOFJointTrajectoryPoint with one planar transform (x, y, yaw) and one twist
    (x_dot, y_dot, yaw_rate)."""
    x, y, yaw = (float(v) for v in pose)
    transform = Transform()
    transform.translation.x, transform.translation.y = x, y
    transform.rotation.z, transform.rotation.w = math.sin(yaw / 2.0), math.cos(yaw / 2.0)
    twist = Twist()
    twist.linear.x, twist.linear.y, twist.angular.z = (float(v) for v in velocity)
    return MultiDOFJointTrajectoryPoint(transforms=[transform], velocities=[twist], time_from_start=since)
