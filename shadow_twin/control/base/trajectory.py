"""Planar trajectories of the mobile base and the rules for accepting them as goals (ROS-free).

A ``FollowJointTrajectory`` goal carries the base as MoveIt carries a planar
joint: in ``multi_dof_trajectory`` (``trajectory_msgs/MultiDOFJointTrajectory``),
one joint (default ``virtual_joint``), each point a transform (x, y, yaw) in the
``odom`` frame with its ``time_from_start`` and, optionally, velocities. MoveIt
fills those velocities with the planar joint's variable velocities
(``RobotTrajectory::getRobotTrajectoryMsg``: ``linear.x/y`` = d x/dt, d y/dt in the
parent frame, ``angular.z`` = d yaw/dt), so here too velocities are time
derivatives in the ``odom`` frame, not body twists.

Sampling is that of :class:`~shadow_twin.control.trajectory.JointTrajectory` (the
joint trajectory controller's, run on x, y and yaw as three joints): linear
between points that carry only poses, cubic Hermite with velocities, quintic with
accelerations too; the last pose is held after the end. Yaw is unwrapped point to
point, so a segment turns the short way (at most pi).

Goal rules (:func:`validate_base_goal`, :func:`base_trajectory_from_msg`) follow
the JTC's (``shadow_twin.control.jtc``: :class:`~shadow_twin.control.jtc.GoalRejected`
and its result codes), with the base's own additions: the frame, planar
transforms, the speed and yaw-rate limits, point 0 by the JTC's rule, drivable segments and
the start delay; each rule is in :mod:`~shadow_twin.control.base.goal_rules`, this module runs
them in order and reads the message. Units: m, rad, m/s, rad/s, s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Sequence

import numpy as np

from shadow_twin.common.errors import ConfigError, TrajectoryError
from shadow_twin.common.stamps import to_seconds
from shadow_twin.control.base import goal_rules as rules
from shadow_twin.control.diff_drive import MIR250_TOP_SPEED, Pose2D, wrap_angle
from shadow_twin.control.jtc import INVALID_GOAL, OLD_HEADER_TIMESTAMP, GoalRejected
from shadow_twin.control.trajectory import JointTrajectory

#: MoveIt's default name of the joint between the ``odom`` frame and the base.
DEFAULT_BASE_JOINT = 'virtual_joint'
#: The frame base trajectories are given in (the MiR's odometry frame).
DEFAULT_BASE_FRAME = 'odom'
#: Yaw-rate limit, rad/s. The study gives none for the MiR250; this is the
#: ``angular.z.max_velocity`` of the MiR diff_drive_controller configuration of
#: DFKI-NI/mir_robot (``mir_description/config/diffdrive_controller.yaml``).
DEFAULT_MAX_YAW_RATE = 1.5
#: Largest z translation (m), roll/pitch (rad) and quaternion norm error that still count as planar.
PLANAR_TOLERANCE = 1e-3
_AXES = ('x', 'y', 'yaw')


@dataclass
class BaseLimits:
    """Speed limits of the base.

    Attributes:
        max_speed: largest translational speed, m/s (default 2 m/s, the MiR250's top
            speed, study table 1).
        max_yaw_rate: largest |yaw rate|, rad/s (default :data:`DEFAULT_MAX_YAW_RATE`).
    Raises:
        ConfigError: a value that is not a finite number > 0.
    """

    max_speed: float = MIR250_TOP_SPEED
    max_yaw_rate: float = DEFAULT_MAX_YAW_RATE

    def __post_init__(self) -> None:
        for name, unit in (('max_speed', 'm/s'), ('max_yaw_rate', 'rad/s')):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f'base limit {name} must be a number in {unit}, got {value!r}')
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f'base limit {name} must be finite and > 0 {unit}, got {value}')
            setattr(self, name, float(value))


class BaseSample(NamedTuple):
    """Desired state of the base at one time (or arrays of them, all of one shape).

    ``x``, ``y`` m and ``yaw`` rad (unwrapped) in the trajectory's frame; ``x_dot``,
    ``y_dot`` m/s and ``yaw_rate`` rad/s, their time derivatives in that frame.
    """

    x: Any
    y: Any
    yaw: Any
    x_dot: Any
    y_dot: Any
    yaw_rate: Any

    @property
    def pose(self) -> Pose2D:
        """(x, y, yaw): m, m, rad."""
        return Pose2D(self.x, self.y, self.yaw)

    @property
    def forward_speed(self) -> Any:
        """Velocity along the desired heading, m/s: ``x_dot cos(yaw) + y_dot sin(yaw)``
        (the feed-forward speed of a differential drive; the study's Eq. 1 projection)."""
        return self.x_dot * np.cos(self.yaw) + self.y_dot * np.sin(self.yaw)


@dataclass(eq=False)
class BaseTrajectory:
    """A planar trajectory of the base.

    Attributes:
        times: (K,) strictly increasing ``time_from_start``, s, the first >= 0.
        poses: (K, 3) x m, y m, yaw rad per point; yaw unwrapped (consecutive
            points differ by less than pi: see :func:`unwrap_yaw`).
        velocities: (K, 3) x_dot m/s, y_dot m/s, yaw_rate rad/s in ``frame_id``,
            or None when not given.
        accelerations: (K, 3) m/s^2, m/s^2, rad/s^2, or None when not given.
        frame_id: frame of the poses (default ``odom``).
        joint_name: the planar joint (default ``virtual_joint``).
    Raises:
        TrajectoryError: empty, shapes that do not match, NaN/inf, times not
            strictly increasing (:func:`~shadow_twin.control.trajectory.validate_arrays`).
    """

    times: np.ndarray
    poses: np.ndarray
    velocities: np.ndarray | None = None
    accelerations: np.ndarray | None = None
    frame_id: str = DEFAULT_BASE_FRAME
    joint_name: str = DEFAULT_BASE_JOINT
    _joints: JointTrajectory = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._joints = JointTrajectory(list(_AXES), self.times, self.poses, self.velocities, self.accelerations,
                                       name=self.joint_name)
        self.times, self.poses = self._joints.times, self._joints.positions
        self.velocities, self.accelerations = self._joints.velocities, self._joints.accelerations

    @classmethod
    def from_points(cls, points: Sequence[Sequence[float]], *, frame_id: str = DEFAULT_BASE_FRAME,
                    joint_name: str = DEFAULT_BASE_JOINT) -> 'BaseTrajectory':
        """Build from points ``(time_from_start, x, y, yaw)`` or ``(t, x, y, yaw, x_dot, y_dot,
        yaw_rate)`` (s, m, m, rad, m/s, m/s, rad/s; all points of one length). Yaw is
        unwrapped (:func:`unwrap_yaw`). No limits are checked: use
        :func:`validate_base_goal` for goals. Raises TrajectoryError (see the class)."""
        if len(points) == 0:
            raise TrajectoryError('base trajectory has no points')
        rows = np.array([[float(v) for v in p] for p in points], dtype=float).reshape(len(points), -1)
        if rows.shape[1] not in (4, 7):
            raise TrajectoryError(f'base points need 4 (t, x, y, yaw) or 7 values (with x_dot, y_dot, yaw_rate), '
                                  f'got {rows.shape[1]}')
        poses = rows[:, 1:4].copy()
        poses[:, 2] = unwrap_yaw(poses[:, 2])
        return cls(rows[:, 0], poses, rows[:, 4:7] if rows.shape[1] == 7 else None,
                   frame_id=frame_id, joint_name=joint_name)

    @property
    def duration(self) -> float:
        """``time_from_start`` of the last point, s."""
        return float(self.times[-1])

    @property
    def end_pose(self) -> Pose2D:
        """The last point's pose (x m, y m, yaw rad)."""
        return Pose2D(*(float(v) for v in self.poses[-1]))

    def sample(self, t: float | np.ndarray) -> BaseSample:
        """Desired state at ``t`` (s from the trajectory start; scalar or (N,)).

        Interpolation as the JTC's (see the module doc); before the first point the
        first pose is held, after the last the last, with zero velocity.
        """
        pos, vel, _ = self._joints.sample(t)
        if np.ndim(t) == 0:
            return BaseSample(*(float(v) for v in pos), *(float(v) for v in vel))
        return BaseSample(pos[:, 0], pos[:, 1], pos[:, 2], vel[:, 0], vel[:, 1], vel[:, 2])

    def with_start(self, pose: Pose2D | Sequence[float], at: float = 0.0) -> 'BaseTrajectory':
        """A copy starting at ``pose`` (x m, y m, yaw rad) at t = ``at`` (s, default 0), at rest,
        as the JTC interpolates from the current state to point 0 (``at`` > 0: a goal joined
        that long after its stamped start). The yaws are shifted by whole turns so that the
        first segment turns the short way. Unchanged if point 0 is at or before ``at``."""
        at = max(0.0, float(at))
        if self.times[0] <= at:
            return self
        start = np.array([float(v) for v in pose], dtype=float)
        yaws = np.concatenate([[start[2]], self.poses[:, 2]])
        poses = np.vstack([start, self.poses])
        poses[:, 2] = unwrap_yaw(yaws)

        def stack(rest):
            return None if rest is None else np.vstack([np.zeros(3), rest])
        return BaseTrajectory(np.concatenate([[at], self.times]), poses, stack(self.velocities),
                              stack(self.accelerations), frame_id=self.frame_id, joint_name=self.joint_name)


def unwrap_yaw(yaws: Sequence[float]) -> np.ndarray:
    """(K,) yaws, rad, shifted by whole turns so that consecutive values differ by at most pi
    (the first is kept): interpolation between them then turns the short way."""
    yaws = np.asarray(yaws, dtype=float).reshape(-1)
    if yaws.size < 2:
        return yaws.copy()
    steps = np.array([wrap_angle(d) for d in np.diff(yaws)])
    return yaws[0] + np.concatenate([[0.0], np.cumsum(steps)])


# ---------------------------------------------------------------------------------------
# Goals (the rules are goal_rules')
# ---------------------------------------------------------------------------------------
def _fmt(value: float) -> str:
    return f'{value:.6g}'


def validate_base_goal(points: Sequence[Sequence[float]], *, joint_names: Sequence[str] = (DEFAULT_BASE_JOINT,),
                       frame_id: str = DEFAULT_BASE_FRAME, joint_name: str = DEFAULT_BASE_JOINT,
                       expected_frame: str = DEFAULT_BASE_FRAME, limits: BaseLimits | None = None,
                       current_pose: Sequence[float] | None = None,
                       path_tolerance: tuple[float, float] = (0.0, 0.0)) -> BaseTrajectory:
    """Check a base goal and build its trajectory.

    Args:
        points: each ``(time_from_start, x, y, yaw)`` or ``(t, x, y, yaw, x_dot, y_dot,
            yaw_rate)`` (s, m, m, rad, m/s, m/s, rad/s), all of one length.
        joint_names: the goal's joint names (one: the planar joint).
        frame_id: the goal's frame (``header.frame_id``).
        joint_name: the planar joint this base follows (default ``virtual_joint``).
        expected_frame: the frame goals must be in (default ``odom``).
        limits: speed limits (default :class:`BaseLimits`: 2 m/s, 1.5 rad/s).
        current_pose: optional (x, y, yaw) now; if given, the segment from it to point 0 is
            checked as any, or a point 0 at t = 0 must be there (``base_goal_rules``).
        path_tolerance: the goal's (m, rad; 0 = unchecked: ``base_goal_rules.start_tolerance``,
            0.1 m, 0.1 rad), for point 0 at t = 0 and the sideways motion of segments.
    Returns:
        The :class:`BaseTrajectory` (yaw unwrapped).
    Raises:
        GoalRejected, checked in this order:

        * INVALID_JOINTS: no joint names; a name other than ``joint_name``; the
          joint named more than once.
        * INVALID_GOAL: ``frame_id`` is not ``expected_frame``; no points; a point
          not of 4 or 7 values; ``time_from_start`` NaN/inf, negative (point 0) or
          not strictly increasing; a NaN/inf value (the message names point and value).
        * INVALID_GOAL: velocities at the last point not 0 (as the JTC with
          ``allow_nonzero_velocity_at_trajectory_end`` false); a point's speed
          hypot(x_dot, y_dot) or |yaw_rate| above the limit; a segment's average
          speed (distance / dt) or yaw rate (|dyaw| / dt) above the limit (the spline
          may peak higher between points, which is not checked).
        * INVALID_GOAL: point 0 at t = 0 farther from the base than the path tolerance; a
          segment moving the base sideways more than the path position tolerance beyond its
          forward motion (undrivable for a differential drive: ``check_drivable``).
    """
    trajectory = _checked_trajectory(points, joint_names, frame_id, joint_name, expected_frame)
    _check_goal(trajectory, limits or BaseLimits(), current_pose, path_tolerance, 0.0)
    return trajectory


def _check_goal(trajectory: BaseTrajectory, limits: BaseLimits, current_pose: Sequence[float] | None,
                path_tolerance: tuple[float, float], elapsed: float) -> None:
    """The limits, start and drivable rules of a goal that has run ``elapsed`` s on arrival."""
    rules.check_speed_limits(trajectory, limits, current_pose, elapsed)
    tolerance = rules.start_tolerance(*path_tolerance)
    rules.check_start_pose(trajectory, current_pose, elapsed, tolerance)
    started = trajectory if current_pose is None else trajectory.with_start(current_pose, at=elapsed)
    rules.check_drivable(started, tolerance[0], first=-1 if started is not trajectory else 0)


def _checked_trajectory(points: Sequence[Sequence[float]], joint_names: Sequence[str], frame_id: str,
                        joint_name: str, expected_frame: str) -> BaseTrajectory:
    """The structural rules of :func:`validate_base_goal` (joints, frame, points, values), then the
    trajectory; the limits are checked apart."""
    rules.check_joint_and_frame(joint_names, frame_id, joint_name, expected_frame)
    if len(points) == 0:
        raise GoalRejected(INVALID_GOAL, 'base trajectory has no points')
    width = len(points[0])
    labels = ('x', 'y', 'yaw', 'x_dot', 'y_dot', 'yaw_rate')
    previous = None
    for k, point in enumerate(points):
        if len(point) not in (4, 7) or len(point) != width:
            raise GoalRejected(INVALID_GOAL, f'point {k} has {len(point)} values; every point needs 4 (t, x, y, yaw) '
                                             f'or every point 7 (with x_dot, y_dot, yaw_rate)')
        try:
            values = [float(v) for v in point]
        except (TypeError, ValueError):
            raise GoalRejected(INVALID_GOAL, f'point {k}: a value is not a number ({list(point)!r})') from None
        rules.check_point_values(k, values[0], values[1:], labels, previous)
        previous = values[0]
    return BaseTrajectory.from_points(points, frame_id=str(frame_id), joint_name=joint_name)


def yaw_from_quaternion(x, y, z, w):
    """Yaw (rad, in (-pi, pi]) of a quaternion: ``atan2(2 (w z + x y), 1 - 2 (y^2 + z^2))``
    (the z-y-x Euler angle). Scalars give a float; arrays (any shape, elementwise) an array."""
    yaw = np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    return float(yaw) if np.ndim(yaw) == 0 else yaw


def _planar_point(k: int, transform, label: str) -> tuple[float, float, float]:
    """(x, y, yaw) of a ``geometry_msgs/Transform`` that must be planar."""
    translation, rotation = transform.translation, transform.rotation
    tx, ty, tz = (float(translation.x), float(translation.y), float(translation.z))
    qx, qy, qz, qw = (float(rotation.x), float(rotation.y), float(rotation.z), float(rotation.w))
    for name, value in (('x', tx), ('y', ty), ('z', tz), ('rotation.x', qx), ('rotation.y', qy),
                        ('rotation.z', qz), ('rotation.w', qw)):
        if not math.isfinite(value):
            raise GoalRejected(INVALID_GOAL, f'point {k}: {label} {name} is {value} (NaN or inf)')
    norm = math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw)
    if abs(norm - 1.0) > PLANAR_TOLERANCE:
        raise GoalRejected(INVALID_GOAL, f'point {k}: {label} rotation is not a unit quaternion (norm {_fmt(norm)})')
    tilt = 2.0 * math.asin(min(1.0, math.hypot(qx, qy)))
    if abs(tz) > PLANAR_TOLERANCE or tilt > PLANAR_TOLERANCE:
        raise GoalRejected(INVALID_GOAL, f'point {k}: {label} is not planar (z {_fmt(tz)} m, roll/pitch '
                                         f'{_fmt(tilt)} rad); the base moves in x, y and yaw only')
    return tx, ty, yaw_from_quaternion(qx, qy, qz, qw)


def base_trajectory_from_msg(msg, *, joint_name: str = DEFAULT_BASE_JOINT,
                             expected_frame: str = DEFAULT_BASE_FRAME, limits: BaseLimits | None = None,
                             now: float | None = None, current_pose: Sequence[float] | None = None,
                             path_tolerance: tuple[float, float] = (0.0, 0.0), stamp: float | None = None
                             ) -> BaseTrajectory:
    """Validate a ``trajectory_msgs/MultiDOFJointTrajectory`` for the base and convert it.

    Read duck-typed: ``header.frame_id``, ``header.stamp``, ``joint_names``,
    ``points[*].transforms[0]`` (``translation.x/y/z``, ``rotation.x/y/z/w``),
    ``points[*].velocities[0]`` (``linear.x/y``, ``angular.z``; used only if every
    point has one; d/dt in the ``odom`` frame, as MoveIt fills them) and
    ``points[*].time_from_start`` (sec/nanosec). Accelerations are not used.

    Args:
        now: current time, s (float or Time-like), on the clock of ``header.stamp``;
            None skips the stamp checks.
        stamp: the goal's start stamp, s (0 = when accepted), in place of ``header.stamp``
            (the twin starts every part of a goal at one stamp); None: ``header.stamp``.
        Others: see :func:`validate_base_goal`. Under a past stamp the segment from
            ``current_pose`` to point 0 is checked over the time left, a point 0 already due
            against the trajectory's pose now (``base_goal_rules.check_start_pose``).
    Raises:
        GoalRejected: the rules of :func:`validate_base_goal`, and: INVALID_GOAL for
        a point without exactly one transform, a velocity list that is neither empty
        nor one twist, a transform that is not planar (|z| or roll/pitch above
        :data:`PLANAR_TOLERANCE`) or whose rotation is not a unit quaternion; then,
        before the limits (as in the JTC), OLD_HEADER_TIMESTAMP when ``now`` is given,
        ``header.stamp`` is not 0 and the trajectory would end before ``now``; INVALID_GOAL
        when ``now`` is given and the stamp is more than
        :data:`~shadow_twin.control.base.goal_rules.MAX_START_DELAY` (60 s) after it.
    """
    header = getattr(msg, 'header', None)
    frame_id = str(getattr(header, 'frame_id', '') or '')
    joint_names = list(getattr(msg, 'joint_names', None) or [])
    rules.check_joint_and_frame(joint_names, frame_id, joint_name, expected_frame)
    raw_points = list(getattr(msg, 'points', None) or [])
    if not raw_points:
        raise GoalRejected(INVALID_GOAL, 'base trajectory has no points')
    rows, with_velocity = [], all(len(getattr(p, 'velocities', None) or []) for p in raw_points)
    previous = None
    for k, p in enumerate(raw_points):
        try:
            t = to_seconds(p.time_from_start)
        except (AttributeError, TypeError, ValueError):
            raise GoalRejected(INVALID_GOAL, f'point {k}: unreadable time_from_start') from None
        rules.check_point_values(k, t, (), (), previous)
        previous = t
        transforms = list(getattr(p, 'transforms', None) or [])
        velocities = list(getattr(p, 'velocities', None) or [])
        if len(transforms) != 1:
            raise GoalRejected(INVALID_GOAL, f'point {k} has {len(transforms)} transforms for the one joint '
                                             f'{joint_name!r}')
        if len(velocities) > 1:
            raise GoalRejected(INVALID_GOAL, f'point {k} has {len(velocities)} velocities for the one joint '
                                             f'{joint_name!r}')
        row = [t, *_planar_point(k, transforms[0], 'transform')]
        if with_velocity:
            twist = velocities[0]
            row += [float(twist.linear.x), float(twist.linear.y), float(twist.angular.z)]
        rows.append(row)
    trajectory = _checked_trajectory(rows, joint_names, frame_id, joint_name, expected_frame)
    if stamp is None:
        stamp = getattr(header, 'stamp', None)
    start_time = 0.0 if stamp is None else to_seconds(stamp)
    now = None if now is None else to_seconds(now)
    if now is not None and start_time != 0.0:
        end = start_time + trajectory.duration
        if end < now:
            raise GoalRejected(OLD_HEADER_TIMESTAMP, f'base trajectory stamped to start at {start_time:.9f} s ends '
                                                     f'at {end:.9f} s, before now ({now:.9f} s)')
        rules.check_start_delay(start_time, now)
    _check_goal(trajectory, limits or BaseLimits(), current_pose, path_tolerance,
                rules.elapsed_since(start_time, now))
    return trajectory
