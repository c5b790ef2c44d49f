"""The twin's mobile base part: one base trajectory follower per base, the real MiR and the sim's.

A ``FollowJointTrajectory`` goal carries the base as MoveIt carries a planar joint:
in ``multi_dof_trajectory``, one joint (``base.joint_name``, default ``virtual_joint``),
poses (x, y, yaw) in ``odom`` (``base.frame``). The rules for accepting it are
``shadow_twin.control.base_trajectory``'s (the JTC's, plus frame, planar transforms and
the speed limits ``base.limits``: 2 m/s, 1.5 rad/s); the tracking law, tolerances and
verdicts are ``shadow_twin.control.base_follower``'s. This module is the ROS around them:

* :class:`BaseEndpoint`: one base's topics: ``geometry_msgs/TwistStamped`` commands out
  on ``cmd_vel_topic`` (the MiR takes TwistStamped from software 2.7 on; the sim bridge on
  ``/sim/cmd_vel``), ``nav_msgs/Odometry`` in on ``odom_topic`` (pose in its odom frame,
  twist in the base frame, REP 105). It keeps the newest pose and twist and when they
  arrived (monotonic s).
* :class:`BaseRun`: one goal's following on one endpoint: a
  :class:`~shadow_twin.control.base_follower.BaseTrajectoryFollower` and how it ended.
* :class:`BaseDriver`: the endpoints of the twin's mode (``real``: the MiR, ``sim``: the
  sim's base) on a node of its own, spun by its own thread (as the twin's joint state
  listener), with a control timer at ``base.control_rate`` (50 Hz) that ticks every
  running follower on the newest odometry and sends its twist.

Frames: the sim's odometry frame (``sim/odom``) is the twin of the real ``odom``; both
start at the origin where their base starts. A goal pose in ``odom`` is followed by each
base in its own odometry frame, so each closes its loop on its own odometry.

Liveness (rejects a goal before anything moves, as a missing controller does): a base is
missing when its newest odometry is older than ``base.odom_timeout`` (0.5 s) or none came,
or when nobody subscribes to its cmd_vel topic. While a goal runs, odometry older than
``base.odom_timeout`` at two ticks in a row (so that a stall of this process is not blamed
on the base) aborts that base's run as gone.

Stopping: a run that ends (succeeded, aborted, canceled, preempted, its odometry lost)
sends a zero twist at once and at every tick until its base reports rest on an odometry
received after the stop (at least ``STOP_REPEAT`` s; at most ``base.stop_hold_timeout``:
a base bridge that stalled finds a zero command when it resumes), then nothing (the MiR
and the sim bridge stop by themselves when commands lapse, ``cmd_vel_timeout``). Nothing
is sent while no run is active: a rejected goal sends no TwistStamped.

Another driver: a node besides the twin publishing on a base's cmd_vel topic while a run
drives it (a joystick, a navigation stack; checked every ``PUBLISHER_CHECK_PERIOD`` s from
the ROS graph) is logged, and with ``base.other_publishers`` ``abort`` (default) the run
aborts naming the topic and the count: two drivers fight over one base.

Units: m, rad, m/s, rad/s, s.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from geometry_msgs.msg import Transform, Twist, TwistStamped
from nav_msgs.msg import Odometry
from rclpy.context import Context
from rclpy.node import Node
from trajectory_msgs.msg import MultiDOFJointTrajectoryPoint

from shadow_twin.common.stamps import to_seconds
from shadow_twin.control import jtc
from shadow_twin.control import twin_split as split
from shadow_twin.control.base_follower import BaseTolerances, BaseTrajectoryFollower, base_tolerances_from_goal
from shadow_twin.control.base_trajectory import BaseSample, BaseTrajectory, base_trajectory_from_msg, yaw_from_quaternion
from shadow_twin.control.diff_drive import ZERO_TWIST, BodyTwist, Pose2D, wrap_angle
from shadow_twin.ros.base_anchor import BaseAnchor
from shadow_twin.ros.base_settings import BaseSettings, BaseTopics
from shadow_twin.ros.conversions import duration_msg, time_msg
from shadow_twin.ros.guard import guarded_subscription, guarded_timer
from shadow_twin.ros.message_checks import check_odometry
from shadow_twin.ros.spinning import BackgroundSpinner

#: Shortest time zero twists are sent after a run ends, s (then until the base reports rest).
STOP_REPEAT = 0.3
#: Seconds between two looks at the publishers of the cmd_vel topics (a ROS graph query).
PUBLISHER_CHECK_PERIOD = 0.2
#: Seconds to wait for a fresher odometry message before calling a base missing (a stall of
#: this process must not be blamed on the base).
FRESH_WAIT = 0.1
#: Result names of the base runs (in the twin's results and messages), by side.
RUN_NAMES = {'real': 'base', 'sim': 'sim base'}

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
    stamp = split.goal_stamp(to_seconds(joints.header.stamp) if len(joints.joint_names) or len(joints.points)
                             else None, to_seconds(request.multi_dof_trajectory.header.stamp))
    trajectory = base_trajectory_from_msg(request.multi_dof_trajectory, joint_name=settings.joint_name,
                                          expected_frame=settings.frame, limits=settings.limits, now=now_s,
                                          current_pose=current_pose, stamp=stamp,
                                          path_tolerance=(tolerances.path_position, tolerances.path_yaw))
    return BaseGoal(trajectory, tolerances)


class OdomSample(NamedTuple):
    """One odometry message: ``pose`` (x m, y m, yaw rad) in its odom frame, the body twist
    ``v`` (m/s), ``lateral`` (m/s) and ``omega`` (rad/s) in the base frame, ``received``
    (monotonic s) and ``stamp`` (its header stamp, s; 0 when unset)."""

    pose: Pose2D
    v: float
    lateral: float
    omega: float
    received: float
    stamp: float = 0.0

    def measured_at(self, now_s: float, now_mono: float, max_age: float) -> float:
        """When the pose was measured, s on the clock of ``now_s``: the stamp, unless it is
        unset, in the future or older than ``max_age`` s (a clock that does not match: a robot
        PC without time synchronisation); then when it arrived."""
        if 0.0 < self.stamp and now_s - max_age <= self.stamp <= now_s:
            return self.stamp
        return now_s - (now_mono - self.received)

    @property
    def odom_velocity(self) -> tuple[float, float, float]:
        """(x_dot m/s, y_dot m/s, yaw_rate rad/s) in the odom frame (the body twist rotated by yaw)."""
        c, s = math.cos(self.pose.yaw), math.sin(self.pose.yaw)
        return (self.v * c - self.lateral * s, self.v * s + self.lateral * c, self.omega)


class BaseEndpoint:
    """One base's command publisher and odometry subscription (see module doc).

    Args:
        node: the node holding them (spun by one thread).
        side: 'real' or 'sim'.
        topics: its topics.
    """

    def __init__(self, node: Node, side: str, topics: BaseTopics) -> None:
        self.side, self.topics = side, topics
        self._pub = node.create_publisher(TwistStamped, topics.cmd_vel, 10)
        self._node = node
        guarded_subscription(node, Odometry, topics.odom, self._on_odom, 10, check=check_odometry)
        self._lock = threading.Lock()
        self._latest: OdomSample | None = None
        self._count = 0

    def _on_odom(self, msg: Odometry) -> None:
        p, q, t = msg.pose.pose.position, msg.pose.pose.orientation, msg.twist.twist
        sample = OdomSample(Pose2D(float(p.x), float(p.y), yaw_from_quaternion(q.x, q.y, q.z, q.w)),
                            float(t.linear.x), float(t.linear.y), float(t.angular.z), time.monotonic(),
                            to_seconds(msg.header.stamp))
        with self._lock:
            self._latest = sample
            self._count += 1

    def latest(self) -> OdomSample | None:
        """The newest odometry, or None before the first."""
        with self._lock:
            return self._latest

    def received(self) -> int:
        """How many odometry messages have arrived."""
        with self._lock:
            return self._count

    def age(self) -> float:
        """Seconds since the newest odometry arrived (inf if none did)."""
        latest = self.latest()
        return math.inf if latest is None else time.monotonic() - latest.received

    def subscribers(self) -> int:
        """Subscriptions matched to the cmd_vel topic (the base bridge's)."""
        return self._pub.get_subscription_count()

    def other_publishers(self) -> int:
        """Publishers on the cmd_vel topic besides this one (a joystick, a navigation stack)."""
        return max(0, self._node.count_publishers(self.topics.cmd_vel) - 1)

    def at_rest(self, since: float, stopped_velocity: float) -> bool:
        """True when an odometry received after monotonic ``since`` (s) shows the base stopped:
        |v|, |lateral| (m/s) and |omega| (rad/s) at most ``stopped_velocity``."""
        latest = self.latest()
        return (latest is not None and latest.received > since
                and max(abs(latest.v), abs(latest.lateral), abs(latest.omega)) <= stopped_velocity)

    def send(self, twist: BodyTwist, stamp_s: float) -> None:
        """Publish ``twist`` (v m/s, omega rad/s) as TwistStamped, stamped ``stamp_s``."""
        msg = TwistStamped()
        msg.header.stamp = time_msg(stamp_s)
        msg.header.frame_id = self.topics.base_frame
        msg.twist.linear.x, msg.twist.angular.z = float(twist.v), float(twist.omega)
        self._pub.publish(msg)

    def describe(self) -> str:
        """E.g. ``real base (TwistStamped on /cmd_vel, odometry on /odom)``, for messages."""
        return f'{self.side} base (TwistStamped on {self.topics.cmd_vel}, odometry on {self.topics.odom})'


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

    def result(self) -> split.ControllerResult | None:
        """How the run ended, as a controller result (None while it runs)."""
        verdict = self.follower.verdict
        if verdict.outcome is jtc.GoalOutcome.RUNNING:
            return None
        return split.ControllerResult(verdict.outcome, verdict.code, verdict.message, gone=self.gone is not None)

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
        self._publishers_checked = -math.inf
        guarded_timer(self.node, 1.0 / settings().control_rate, self._tick, 'base control')
        #: Re-anchors the sim base to the real one (both bases driven and ``anchor_service`` set), else None.
        self.anchor = None
        if anchor_service and {'real', 'sim'} <= set(self.endpoints):
            self.anchor = BaseAnchor(self.node, anchor_service, self.endpoints['real'], self.endpoints['sim'],
                                     busy=self.busy, timeout=answer_timeout)
        self._spinner = BackgroundSpinner([self.node], 'base driver')
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
        timeout = self._settings().odom_timeout
        age = endpoint.age()
        if age > timeout:
            seen = endpoint.received()
            deadline = time.monotonic() + FRESH_WAIT
            while endpoint.received() == seen and time.monotonic() < deadline:
                time.sleep(0.005)
            age = endpoint.age()
        if age > timeout:
            since = 'none received' if age == math.inf else f'the newest is {age:.3f} s old'
            return (f'no fresh odometry on {endpoint.topics.odom}: {since} (base.odom_timeout {timeout:g} s)')
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
        check_publishers = now_mono - self._publishers_checked >= PUBLISHER_CHECK_PERIOD
        if check_publishers:
            self._publishers_checked = now_mono
        with self._lock:
            for side, run in list(self._runs.items()):
                endpoint = run.endpoint
                if run.stopped_at is not None:
                    if self._stop_held(run, now_mono, settings):
                        endpoint.send(ZERO_TWIST, now_s)
                    else:
                        del self._runs[side]
                    continue
                if check_publishers and not run.follower.done:
                    self._check_other_publishers(run, settings)
                latest = endpoint.latest()
                age = math.inf if latest is None else now_mono - latest.received
                run.stale_ticks = run.stale_ticks + 1 if age > settings.odom_timeout else 0
                if run.stale_ticks >= 2 and not run.follower.done:
                    since = 'none received' if latest is None else f'the newest is {age:.3f} s old'
                    run.gone = (f'{endpoint.describe()} is gone: no fresh odometry ({since}; base.odom_timeout '
                                f'{settings.odom_timeout:g} s)')
                    run.follower.abort(run.gone)
                    self.log.error(run.gone)
                if latest is not None and not run.follower.done:
                    run.last_step = run.follower.update(
                        now_s, latest.pose, (latest.v, latest.omega),
                        pose_time=latest.measured_at(now_s, now_mono, settings.odom_timeout))
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

    def _check_other_publishers(self, run: BaseRun, settings: BaseSettings) -> None:
        """Another node publishing on the run's cmd_vel topic: log it; with ``base.other_publishers``
        ``abort`` the run aborts (and so the twin goal)."""
        others = run.endpoint.other_publishers()
        if not others:
            return
        why = (f'{others} other publisher{"s" if others > 1 else ""} on {run.endpoint.topics.cmd_vel} while the twin '
               f'drives the {run.endpoint.side} base (a joystick or a navigation stack?)')
        if settings.other_publishers == 'abort':
            run.follower.abort(f'{why}: aborted (base.other_publishers abort)')
            self.log.error(run.follower.verdict.message)
        else:
            self.log.warning(why, throttle_duration_sec=5.0)

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
