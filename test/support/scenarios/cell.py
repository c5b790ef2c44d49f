"""Goals and waits for the cell's integration tests and benchmarks (test/ros/twin/test_twin_cell.py,
test/ros/twin/test_cell_faults.py, benchmarks/faults.py): arm, hand and base goals as MoveIt sends
them (the base as the planar ``virtual_joint`` in ``multi_dof_trajectory``), base paths with a
quintic time law, odometry poses, and waits for rest. Import with rclpy available."""

from __future__ import annotations

import math
import time

import numpy as np

TWIN_ACTION = '/twin/follow_joint_trajectory'
UR_ACTION = '/scaled_joint_trajectory_controller/follow_joint_trajectory'
HAND_ACTION = '/rh_trajectory_controller/follow_joint_trajectory'
START_TIMEOUT = 60.0
ARM = {'shoulder_pan_joint': 0.4, 'shoulder_lift_joint': -0.4, 'elbow_joint': 0.5, 'wrist_1_joint': -0.3,
       'wrist_2_joint': 0.3, 'wrist_3_joint': 0.5}
HAND = {'rh_FFJ3': 1.0, 'rh_MFJ3': 0.8, 'rh_WRJ1': -0.3}
JOINT_TOLERANCE = 0.05     # rad
BASE_POSITION_TOLERANCE = 0.05    # m
BASE_YAW_TOLERANCE = 0.05         # rad


def send(client, goal, feedback=None):
    from control_msgs.action import FollowJointTrajectory
    return client.send_goal(FollowJointTrajectory, TWIN_ACTION, goal, feedback=feedback, timeout=15.0)


def result_of(client, handle, timeout: float = 30.0):
    response = client.wait_future(handle.get_result_async(), timeout)
    return response.status, response.result


def positions(msg, names) -> np.ndarray:
    index = {n: k for k, n in enumerate(msg.name)}
    return np.array([msg.position[index[n]] for n in names])


def pose_of(odom) -> tuple[float, float, float]:
    """(x m, y m, yaw rad) of a nav_msgs/Odometry."""
    p, q = odom.pose.pose.position, odom.pose.pose.orientation
    return (p.x, p.y, math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z)))


def pose_error(pose, target) -> tuple[float, float]:
    """(position error m, |yaw error| rad)."""
    yaw = (pose[2] - target[2] + math.pi) % (2 * math.pi) - math.pi
    return math.hypot(pose[0] - target[0], pose[1] - target[1]), abs(yaw)


def smooth(tau: float) -> tuple[float, float]:
    """Quintic blend s(tau) = 10 tau^3 - 15 tau^4 + 6 tau^5 and ds/dtau (0 and 1 at rest)."""
    return 10 * tau ** 3 - 15 * tau ** 4 + 6 * tau ** 5, 30 * tau ** 2 - 60 * tau ** 3 + 30 * tau ** 4


def straight(length: float):
    """Relative path: ``length`` m ahead. f(s, ds) -> (x, y, yaw, dx, dy, dyaw) per unit of s."""
    return lambda s, ds: (length * s, 0.0, 0.0, length * ds, 0.0, 0.0)


def left_arc(radius: float, angle: float):
    """Relative path: a left arc of ``radius`` m turning ``angle`` rad."""
    def f(s, ds):
        th, dth = angle * s, angle * ds
        return (radius * math.sin(th), radius * (1 - math.cos(th)), th,
                radius * math.cos(th) * dth, radius * math.sin(th) * dth, dth)
    return f


def base_points(start, path, duration: float, dt: float = 0.1) -> list[tuple]:
    """Points (t, x, y, yaw, x_dot, y_dot, yaw_rate) in odom of ``path`` driven from ``start``
    (x, y, yaw) in ``duration`` s with a quintic time law, every ``dt`` s from t = 0."""
    x0, y0, yaw0 = start
    c, s_ = math.cos(yaw0), math.sin(yaw0)
    out = []
    for t in np.linspace(0.0, duration, int(round(duration / dt)) + 1):
        s, ds = smooth(t / duration)
        x, y, yaw, dx, dy, dyaw = path(s, ds / duration)
        out.append((float(t), x0 + c * x - s_ * y, y0 + s_ * x + c * y, yaw0 + yaw, c * dx - s_ * dy,
                    s_ * dx + c * dy, dyaw))
    return out


def make_goal(joints: dict[str, float] | None = None, joint_seconds: float = 2.0, base: list[tuple] | None = None,
              frame: str = 'odom', base_joint: str = 'virtual_joint'):
    """A FollowJointTrajectory goal: ``joints`` {name: rad} reached in ``joint_seconds`` (goal
    tolerance 0.05 rad each) and/or the base ``points`` (see :func:`base_points`; 4 or 7 values)."""
    from control_msgs.action import FollowJointTrajectory
    from control_msgs.msg import JointTolerance
    from geometry_msgs.msg import Transform, Twist
    from trajectory_msgs.msg import JointTrajectoryPoint, MultiDOFJointTrajectoryPoint

    from shadow_twin.ros.conversions import duration_msg
    goal = FollowJointTrajectory.Goal()
    if joints:
        goal.trajectory.joint_names = list(joints)
        goal.trajectory.points = [JointTrajectoryPoint(positions=[float(v) for v in joints.values()],
                                                       time_from_start=duration_msg(joint_seconds))]
        goal.goal_tolerance = [JointTolerance(name=j, position=JOINT_TOLERANCE) for j in joints]
    if base:
        goal.multi_dof_trajectory.header.frame_id = frame
        goal.multi_dof_trajectory.joint_names = [base_joint]
        for point in base:
            t, x, y, yaw = point[:4]
            transform = Transform()
            transform.translation.x, transform.translation.y = float(x), float(y)
            transform.rotation.z, transform.rotation.w = math.sin(yaw / 2), math.cos(yaw / 2)
            msg = MultiDOFJointTrajectoryPoint(transforms=[transform], time_from_start=duration_msg(t))
            if len(point) == 7:
                twist = Twist()
                twist.linear.x, twist.linear.y, twist.angular.z = (float(v) for v in point[4:])
                msg.velocities = [twist]
            goal.multi_dof_trajectory.points.append(msg)
    return goal


def wait_quiet(helpers, recorders, quiet: float = 0.5, timeout: float = 10.0) -> None:
    """Wait until none of ``recorders`` has received anything for ``quiet`` s."""
    def silent():
        return all(not r.since(time.monotonic() - quiet) for r in recorders)
    assert helpers.wait_until(silent, timeout, interval=0.05), 'commands still flowing'


def wait_joints_rest(helpers, recorders, names, timeout: float = 10.0, speed: float = 2e-3) -> None:
    """Wait until the joints ``names`` (those each recorder has) move slower than ``speed`` rad/s."""
    def resting():
        for r in recorders:
            msg = r.last()
            if any(abs(v) >= speed for n, v in zip(msg.name, msg.velocity) if n in names):
                return False
        return True
    assert helpers.wait_until(resting, timeout), 'the joints did not come to rest'


def wait_base_rest(helpers, odoms, timeout: float = 10.0, speed: float = 0.01) -> None:
    def resting():
        return all(abs(o.last().twist.twist.linear.x) < speed and abs(o.last().twist.twist.angular.z) < speed
                   for o in odoms)
    assert helpers.wait_until(resting, timeout), 'the bases did not come to rest'


# ------------------------------------------------------------------------------------ fixtures
