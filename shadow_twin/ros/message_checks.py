"""Checks of incoming messages: what every subscription of the project's nodes refuses.

A message from the lab network can carry anything: NaN or inf values, a negative stamp,
arrays whose lengths do not match their names. Each check raises :class:`BadMessage`
with one line naming the field and the value; :mod:`shadow_twin.ros.guard` drops such a
message and logs that line (rate-limited), so a bad message never moves anything and
never stops a node. The checks read fields duck-typed (ROS messages or any object
with the same attributes).
"""

from __future__ import annotations

import math
from typing import Iterable

from shadow_twin.common.errors import BadMessage
from shadow_twin.control.scaled_time import SpeedScalingError, checked_speed_scaling

__all__ = ['BadMessage', 'check_stamp', 'check_finite', 'check_joint_state', 'check_twist_stamped', 'check_pose',
           'check_odometry', 'check_speed_scaling']

#: ``builtin_interfaces/Time.nanosec`` lies in [0, 1e9).
NANOSEC_LIMIT = 1_000_000_000


def check_stamp(stamp, field: str = 'header.stamp') -> None:
    """A ``builtin_interfaces/Time`` that is a time: ``sec`` >= 0 and ``nanosec`` in [0, 1e9)
    (0 / 0, "unset", passes). Raises BadMessage."""
    sec, nanosec = int(stamp.sec), int(stamp.nanosec)
    if sec < 0:
        raise BadMessage(f'{field}.sec is {sec}: a stamp cannot be negative')
    if not 0 <= nanosec < NANOSEC_LIMIT:
        raise BadMessage(f'{field}.nanosec is {nanosec}, outside [0, 1e9)')


def check_finite(values: Iterable[float], field: str) -> None:
    """Every value finite. Raises BadMessage naming ``field`` (with the index of an array's entry)."""
    values = list(values)
    for k, value in enumerate(values):
        if not math.isfinite(float(value)):
            where = field if len(values) == 1 else f'{field}[{k}]'
            raise BadMessage(f'{where} is {float(value)} (NaN or inf)')


def check_joint_state(msg) -> None:
    """A ``sensor_msgs/JointState`` a node can use: stamp (:func:`check_stamp`), unique names,
    ``position`` of one value per name, ``velocity`` and ``effort`` empty or one per name,
    every value finite. Raises BadMessage."""
    check_stamp(msg.header.stamp)
    names = list(msg.name)
    if len(set(names)) != len(names):
        repeated = sorted({n for n in names if names.count(n) > 1})
        raise BadMessage(f'name lists {repeated} more than once')
    for field, values, optional in (('position', msg.position, False), ('velocity', msg.velocity, True),
                                    ('effort', msg.effort, True)):
        if len(values) != len(names) and not (optional and len(values) == 0):
            raise BadMessage(f'{field} has {len(values)} values for {len(names)} names')
        check_finite(values, field)


def check_twist_stamped(msg) -> None:
    """A ``geometry_msgs/TwistStamped`` command: stamp, finite linear and angular components.
    Raises BadMessage."""
    check_stamp(msg.header.stamp)
    twist = msg.twist
    check_finite((twist.linear.x, twist.linear.y, twist.linear.z), 'twist.linear')
    check_finite((twist.angular.x, twist.angular.y, twist.angular.z), 'twist.angular')


def check_pose(pose, field: str) -> None:
    """A ``geometry_msgs/Pose``: finite position, a finite orientation of non-zero norm.
    Raises BadMessage."""
    p, q = pose.position, pose.orientation
    check_finite((p.x, p.y, p.z), f'{field}.position')
    check_finite((q.x, q.y, q.z, q.w), f'{field}.orientation')
    if math.hypot(q.x, q.y, q.z, q.w) < 1e-6:
        raise BadMessage(f'{field}.orientation is a zero quaternion')


def check_odometry(msg) -> None:
    """A ``nav_msgs/Odometry``: stamp, pose (:func:`check_pose`), finite twist. Raises BadMessage."""
    check_stamp(msg.header.stamp)
    check_pose(msg.pose.pose, 'pose.pose')
    twist = msg.twist.twist
    check_finite((twist.linear.x, twist.linear.y, twist.linear.z), 'twist.twist.linear')
    check_finite((twist.angular.x, twist.angular.y, twist.angular.z), 'twist.twist.angular')


def check_speed_scaling(msg) -> float:
    """The percent of a ``std_msgs/Float64`` speed scaling (the UR's), checked by
    :func:`~shadow_twin.control.scaled_time.checked_speed_scaling`. Raises BadMessage naming
    ``data``."""
    try:
        return checked_speed_scaling(msg.data)
    except SpeedScalingError as exc:
        raise BadMessage(f'data: {exc}') from None
