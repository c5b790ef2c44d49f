"""One mobile base's topics as the twin's base driver uses them (:mod:`shadow_twin.ros.twin.base.driver`).

:class:`BaseEndpoint`: ``geometry_msgs/TwistStamped`` commands out on ``cmd_vel_topic`` (the MiR
takes TwistStamped from software 2.7 on; the sim bridge on ``/sim/cmd_vel``), each recorded in an
:class:`~shadow_twin.ros.twin.base.cmd_vel_watch.OwnWrites` so that the twin knows its own messages when
it hears them (:mod:`shadow_twin.ros.twin.base.cmd_vel_watch`); ``nav_msgs/Odometry`` in on ``odom_topic``
(pose in its odom frame, twist in the base frame, REP 105), kept as the newest
:class:`OdomSample` with when it arrived (monotonic s).

Units: m, rad, m/s, rad/s, s.
"""

from __future__ import annotations

import math
import threading
import time
from typing import NamedTuple

from geometry_msgs.msg import TwistStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node

from shadow_twin.common.stamps import to_seconds
from shadow_twin.control.base.trajectory import yaw_from_quaternion
from shadow_twin.control.diff_drive import BodyTwist, Pose2D
from shadow_twin.ros.twin.base.settings import BaseTopics
from shadow_twin.ros.twin.base.cmd_vel_watch import OwnWrites
from shadow_twin.ros.conversions import time_msg
from shadow_twin.ros.guard import guarded_subscription
from shadow_twin.ros.message_checks import check_odometry


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
        #: The twin's messages on the cmd_vel topic (sequence numbers and send times).
        self.own = OwnWrites()
        #: Subscriptions of the twin's own matched to the publisher (the cmd_vel watch's, in this
        #: participant: Fast DDS matches them when they are made), not counted as the base bridge.
        self.own_readers = 0
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

    @property
    def cmd_vel(self) -> str:
        """The cmd_vel topic as resolved (namespace, remappings)."""
        return self._pub.topic_name

    def subscribers(self) -> int:
        """Subscriptions matched to the cmd_vel topic besides the twin's own (the base bridge's)."""
        return max(0, self._pub.get_subscription_count() - self.own_readers)

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
        self.own.publish(self._pub, msg)

    def describe(self) -> str:
        """E.g. ``real base (TwistStamped on /cmd_vel, odometry on /odom)``, for messages."""
        return f'{self.side} base (TwistStamped on {self.topics.cmd_vel}, odometry on {self.topics.odom})'
