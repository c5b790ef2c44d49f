"""Conversions between the core's numpy/seconds values and ROS messages.

Times go through rclpy's ``Time`` / ``Duration`` on top of the core's one
seconds -> nanoseconds rounding (``shadow_twin.common.stamps``), so every
``nanosec`` field is normalised to ``[0, 1e9)``.
"""

from __future__ import annotations

import array
import math

from builtin_interfaces.msg import Duration as DurationMsg
from builtin_interfaces.msg import Time as TimeMsg
from geometry_msgs.msg import Transform, Twist
from rclpy.duration import Duration
from rclpy.time import Time
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg
from trajectory_msgs.msg import JointTrajectoryPoint, MultiDOFJointTrajectory, MultiDOFJointTrajectoryPoint

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


def planar_transform(x: float, y: float, yaw: float) -> Transform:
    """``geometry_msgs/Transform`` of a planar pose: translation (x, y, 0) m, rotation ``yaw`` rad
    about z (quaternion (0, 0, sin(yaw/2), cos(yaw/2)))."""
    t = Transform()
    t.translation.x, t.translation.y = float(x), float(y)
    t.rotation.z, t.rotation.w = math.sin(yaw / 2.0), math.cos(yaw / 2.0)
    return t


def planar_trajectory_msg(times, poses, velocities=None, frame_id: str = 'odom',
                          joint_name: str = 'virtual_joint') -> MultiDOFJointTrajectory:
    """``trajectory_msgs/MultiDOFJointTrajectory`` of a planar joint, as MoveIt carries a mobile base.

    Args:
        times: (K,) ``time_from_start``, s.
        poses: (K, 3) x, y (m) and yaw (rad) in ``frame_id``.
        velocities: (K, 3) their time derivatives in ``frame_id`` (m/s, m/s, rad/s), or None:
            each point's twist is ``linear.x/y`` = dx/dt, dy/dt and ``angular.z`` = dyaw/dt
            (MoveIt's planar joint velocities, not a body twist).
        frame_id, joint_name: the frame of the poses and the planar joint.
    The header's stamp is left 0 (the sender stamps it)."""
    msg = MultiDOFJointTrajectory(joint_names=[joint_name])
    msg.header.frame_id = frame_id
    for k, t in enumerate(times):
        point = MultiDOFJointTrajectoryPoint(transforms=[planar_transform(*poses[k])], time_from_start=duration_msg(t))
        if velocities is not None:
            twist = Twist()
            twist.linear.x, twist.linear.y, twist.angular.z = (float(v) for v in velocities[k])
            point.velocities = [twist]
        msg.points.append(point)
    return msg
