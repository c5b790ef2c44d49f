"""Conversions between the core's numpy/seconds values and ROS messages.

Times go through rclpy's ``Time`` / ``Duration`` on top of the core's one
seconds -> nanoseconds rounding (``shadow_twin.common.stamps``), so every
``nanosec`` field is normalised to ``[0, 1e9)``.
"""

from __future__ import annotations

import array

from builtin_interfaces.msg import Duration as DurationMsg
from builtin_interfaces.msg import Time as TimeMsg
from rclpy.duration import Duration
from rclpy.time import Time
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg
from trajectory_msgs.msg import JointTrajectoryPoint

from shadow_twin.common.stamps import to_nanoseconds
from shadow_twin.control.trajectory import JointTrajectory


def doubles(values) -> array.array:
    """A float64 ``array.array`` of a numpy array (what rclpy accepts fastest for ``float64[]`` fields)."""
    out = array.array('d')
    out.frombytes(memoryview(values.astype('float64', copy=False).tobytes()))
    return out


def time_msg(seconds: float) -> TimeMsg:
    """``builtin_interfaces/Time`` of ``seconds`` (s since the clock's epoch, >= 0)."""
    return Time(nanoseconds=max(0, to_nanoseconds(seconds))).to_msg()


def time_msg_ns(nanoseconds: int) -> TimeMsg:
    """``builtin_interfaces/Time`` of integer ``nanoseconds`` (>= 0)."""
    return Time(nanoseconds=max(0, int(nanoseconds))).to_msg()


def duration_msg(seconds: float) -> DurationMsg:
    """``builtin_interfaces/Duration`` of ``seconds`` (s; negative values are clamped to 0)."""
    return Duration(nanoseconds=max(0, to_nanoseconds(seconds))).to_msg()


def trajectory_msg(trajectory: JointTrajectory) -> JointTrajectoryMsg:
    """``trajectory_msgs/JointTrajectory`` of a core trajectory: joint names, and per point
    positions (rad), velocities (rad/s) and accelerations (rad/s^2) where the trajectory has
    them, ``time_from_start`` (normalised); the header is left empty (stamp 0 = start now).
    The inverse is ``JointTrajectory.from_msg``."""
    msg = JointTrajectoryMsg(joint_names=list(trajectory.joint_names))
    for k, t in enumerate(trajectory.times):
        point = JointTrajectoryPoint(positions=doubles(trajectory.positions[k]), time_from_start=duration_msg(t))
        if trajectory.velocities is not None:
            point.velocities = doubles(trajectory.velocities[k])
        if trajectory.accelerations is not None:
            point.accelerations = doubles(trajectory.accelerations[k])
        msg.points.append(point)
    return msg
