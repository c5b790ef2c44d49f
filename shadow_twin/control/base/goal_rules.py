"""The rules a base goal must meet, and the follower's speed caps (ROS-free).

:mod:`shadow_twin.control.base.trajectory` checks a base goal as the JTC checks joints, with
these rules (and :class:`~shadow_twin.control.base.follower.BaseTrajectoryFollower` uses the caps):

* Structure (:func:`check_joint_and_frame`, :func:`check_point_values`): the one planar joint,
  the frame, ``time_from_start`` by the JTC's rule, finite values.
* Speed limits (:func:`check_speed_limits`): the last point at rest, point velocities and the
  segments' average speed and yaw rate within the base's limits.
* Start (:func:`check_start_pose`): the JTC's rule for point 0. The motion from the
  current pose to point 0 is a segment like any, speed-checked over the time left
  (point 0's ``time_from_start`` minus the time since a past stamp: :func:`elapsed_since`).
  When point 0 is due already (at ``time_from_start`` 0, or its time passed under a past
  stamp) the JTC would jump to the trajectory; a base cannot, so it must already be where
  the trajectory is now, within the start tolerance (:func:`start_tolerance`).
* Drivable (:func:`check_drivable`): a differential drive cannot move along its body y
  axis. Over each segment, sampled densely with the reference's own yaw, the sideways
  distance may exceed the distance along the heading by at most the start tolerance.
* Start delay (:func:`check_start_delay`): a goal stamped more than :data:`MAX_START_DELAY`
  ahead is rejected (the base would hold zero twists until then).
* Caps (:func:`profile_caps`, :func:`limit_to_profile`): the follower never commands more
  than the trajectory's own peak speed and yaw rate (plus a margin for the feedback), so a
  base joining late, or left behind, does not sprint to catch up.

Trajectories are duck-typed :class:`~shadow_twin.control.base.trajectory.BaseTrajectory`
(``times``, ``sample``). Units: m, rad, m/s, rad/s, s.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np

from shadow_twin.control.diff_drive import BodyTwist, wrap_angle
from shadow_twin.control.jtc import INVALID_GOAL, INVALID_JOINTS, GoalRejected, check_time_from_start

#: Start tolerance, m, where the goal's path position tolerance is 0 (unchecked): how far the
#: base may be from the pose a goal is due at once, and how much more a segment may move it
#: sideways than ahead. 0.1 m is twice the default goal tolerance (0.05 m): a base that ended
#: its last goal within that tolerance, given a goal planned from that goal's end, is accepted
#: with room for odometry drift at rest; a point 0 a metre away is not.
START_POSITION_TOLERANCE = 0.1
#: Start yaw tolerance, rad, where the goal's path yaw tolerance is 0 (as above: twice the
#: default goal yaw tolerance, 0.05 rad).
START_YAW_TOLERANCE = 0.1
#: Largest delay, s, from now to a goal's stamped start: the MiR's own goals start at once, and
#: a base goal stamped an hour ahead would hold the base (sending zero twists) for the hour.
MAX_START_DELAY = 60.0
#: Samples per segment for the reference's sideways motion and its peak speeds (the spline is
#: at most quintic between points: 20 samples resolve it to well under a percent).
SAMPLES_PER_SEGMENT = 20
#: Relative headroom of the follower's caps over the trajectory's peak speed and yaw rate: the
#: feedback's share on the way (wheel slip of a few %, an along-track lag of a few cm).
PROFILE_MARGIN = 0.1
#: Absolute headroom of the speed cap, m/s: the along-track gain (k_x = 2 1/s) on an error of
#: the default goal tolerance, 0.05 m. Lets a trajectory without translation (an in-place
#: turn, the hold after the end) still correct small position errors.
PROFILE_SPEED_FLOOR = 0.1
#: Absolute headroom of the yaw-rate cap, rad/s: the heading feedback on errors of the goal
#: tolerance's size (k_heading 1.5 1/s x 0.05 rad, plus the lateral term k_y v e_y = 9 x 0.4
#: m/s x 0.02 m). Lets a straight line (no yaw rate) still be steered back onto.
PROFILE_YAW_RATE_FLOOR = 0.2
_SLACK = 1e-9
#: Slack on limit comparisons (m/s, rad/s), for float round-off.
LIMIT_SLACK = 1e-9
#: The JTC compares "zero end velocity" with float's epsilon (validate_trajectory_msg).
FLOAT32_EPS = float(np.finfo(np.float32).eps)


def _fmt(value: float) -> str:
    return f'{value:.6g}'


def check_joint_and_frame(joint_names: Sequence[str], frame_id: str, joint_name: str, expected_frame: str) -> None:
    """The goal names the one planar joint ``joint_name`` once (else GoalRejected(INVALID_JOINTS)) and is
    in ``expected_frame`` (else GoalRejected(INVALID_GOAL))."""
    names = [str(j) for j in joint_names]
    if not names:
        raise GoalRejected(INVALID_JOINTS, 'base trajectory has no joint names')
    unknown = [j for j in names if j != joint_name]
    if unknown:
        raise GoalRejected(INVALID_JOINTS, f'base trajectory names joint(s) {unknown}; the base follows only the '
                                           f'planar joint {joint_name!r}')
    if len(names) > 1:
        raise GoalRejected(INVALID_JOINTS, f'base trajectory names joint {joint_name!r} {len(names)} times')
    if str(frame_id) != expected_frame:
        raise GoalRejected(INVALID_GOAL, f'base trajectory is in frame {str(frame_id)!r}; it must be in '
                                         f'{expected_frame!r}')


def check_point_values(k: int, t: float, values: Sequence[float], labels: Sequence[str],
                       previous_time: float | None) -> None:
    """Point ``k``: its ``time_from_start`` ``t`` (s) by the JTC's rule after ``previous_time`` (None
    for point 0), its ``values`` (named by ``labels``) finite; else GoalRejected(INVALID_GOAL)."""
    check_time_from_start(k, t, previous_time)
    for label, value in zip(labels, values):
        if not math.isfinite(value):
            raise GoalRejected(INVALID_GOAL, f'point {k}: {label} is {value} (NaN or inf)')


def check_speed_limits(trajectory, limits, current_pose: Sequence[float] | None, elapsed: float = 0.0) -> None:
    """Last point at rest, explicit velocities and segment average speeds of ``trajectory`` within
    ``limits`` (a :class:`~shadow_twin.control.base.trajectory.BaseLimits`: m/s, rad/s); the segment
    from ``current_pose`` (x m, y m, yaw rad) to point 0 over the time left after ``elapsed`` s.
    Raises GoalRejected(INVALID_GOAL) naming the point or segment."""
    last = len(trajectory.times) - 1
    if trajectory.velocities is not None:
        for label, value in zip(('x_dot', 'y_dot', 'yaw_rate'), trajectory.velocities[last]):
            if abs(value) > FLOAT32_EPS:
                raise GoalRejected(INVALID_GOAL, f'last point ({last}): {label} is {_fmt(value)}, not 0 (the base '
                                                 f'must end at rest)')
        speed = np.hypot(trajectory.velocities[:, 0], trajectory.velocities[:, 1])
        yaw_rate = np.abs(trajectory.velocities[:, 2])
        for values, limit, what, unit in ((speed, limits.max_speed, 'speed', 'm/s'),
                                          (yaw_rate, limits.max_yaw_rate, 'yaw rate', 'rad/s')):
            fast = values > limit + LIMIT_SLACK
            if fast.any():
                k = int(np.argmax(fast))
                raise GoalRejected(INVALID_GOAL, f'point {k}: {what} {_fmt(values[k])} {unit} exceeds the limit '
                                                 f'{_fmt(limit)} {unit}')
    times, poses, first = trajectory.times, trajectory.poses, 0
    if current_pose is not None and times[0] > elapsed:
        with_start = trajectory.with_start(current_pose, at=elapsed)
        times, poses, first = with_start.times, with_start.poses, -1
    dt = np.diff(times)
    distance = np.hypot(np.diff(poses[:, 0]), np.diff(poses[:, 1]))
    turn = np.abs(np.diff(poses[:, 2]))
    for change, limit, what, unit in ((distance, limits.max_speed, 'moves', 'm'),
                                      (turn, limits.max_yaw_rate, 'turns', 'rad')):
        fast = change / dt > limit + LIMIT_SLACK
        if fast.any():
            i = int(np.argmax(fast))
            end = i + 1 + first
            rate_unit = 'm/s' if unit == 'm' else 'rad/s'
            raise GoalRejected(INVALID_GOAL, f'segment from {segment_origin(end)} to point {end}: the base '
                                             f'{what} {_fmt(change[i])} {unit} in {_fmt(dt[i])} s '
                                             f'({_fmt(change[i] / dt[i])} {rate_unit} on average), above the limit '
                                             f'{_fmt(limit)} {rate_unit}')


def start_tolerance(path_position: float = 0.0, path_yaw: float = 0.0) -> tuple[float, float]:
    """(m, rad): the goal's path tolerance (position, yaw), each 0 (unchecked) replaced by
    :data:`START_POSITION_TOLERANCE` or :data:`START_YAW_TOLERANCE`."""
    return (float(path_position) or START_POSITION_TOLERANCE, float(path_yaw) or START_YAW_TOLERANCE)


def elapsed_since(stamp: float, now: float | None) -> float:
    """Seconds of the trajectory already elapsed when a goal stamped ``stamp`` (s; 0 = start
    when accepted) arrives at ``now`` (s, None = unknown): ``now - stamp`` for a past stamp,
    else 0 (an unstamped or future goal starts with its whole trajectory ahead)."""
    if now is None or stamp == 0.0:
        return 0.0
    return max(0.0, float(now) - float(stamp))


def segment_origin(end: int) -> str:
    """How messages name the start of the segment ending at point ``end`` (the goal's
    numbering: the segment ending at point 0 starts at the current pose)."""
    return 'the current pose' if end == 0 else f'point {end - 1}'


def check_start_delay(stamp: float, now: float) -> None:
    """Raises GoalRejected(INVALID_GOAL) for a ``stamp`` (s, not 0) more than
    :data:`MAX_START_DELAY` after ``now`` (s)."""
    delay = float(stamp) - float(now)
    if stamp != 0.0 and delay > MAX_START_DELAY:
        raise GoalRejected(INVALID_GOAL, f'base trajectory stamped to start {_fmt(delay)} s from now, more than the '
                                         f'largest start delay {_fmt(MAX_START_DELAY)} s')


def check_start_pose(trajectory, current_pose: Sequence[float] | None, elapsed: float,
                     tolerance: tuple[float, float]) -> None:
    """Where point 0 is due already (``times[0] <= elapsed``, s), the base at ``current_pose``
    (x m, y m, yaw rad; None: not checked) must be within ``tolerance`` (m, rad) of the
    trajectory's pose at ``elapsed``. Raises GoalRejected(INVALID_GOAL) naming point 0, the
    distance and the tolerance. A later point 0 is reached by a segment (speed-checked apart)."""
    t0 = float(trajectory.times[0])
    if current_pose is None or t0 > elapsed:
        return
    reference = trajectory.sample(float(elapsed))
    x, y, yaw = (float(v) for v in current_pose)
    distance = math.hypot(reference.x - x, reference.y - y)
    yaw_error = abs(wrap_angle(reference.yaw - yaw))
    if distance <= tolerance[0] + _SLACK and yaw_error <= tolerance[1] + _SLACK:
        return
    due = (f'point 0 is due at once (time_from_start {_fmt(t0)} s)' if elapsed <= t0 else
           f'point 0 was due {_fmt(elapsed - t0)} s ago (stamp in the past; the trajectory is now at '
           f'{_fmt(elapsed)} s)')
    raise GoalRejected(INVALID_GOAL, f'{due}: the base is {_fmt(distance)} m and {_fmt(yaw_error)} rad from it, '
                                     f'beyond the start tolerance {_fmt(tolerance[0])} m, {_fmt(tolerance[1])} rad '
                                     f'(the base must already be there)')


def _segment_times(times: np.ndarray, samples: int, midpoints: bool) -> np.ndarray:
    """(K-1, samples) times inside each segment (midpoints of equal parts), or (K-1, samples+1)
    from its start to its end."""
    u = (np.arange(samples) + 0.5) / samples if midpoints else np.linspace(0.0, 1.0, samples + 1)
    return times[:-1, None] + np.diff(times)[:, None] * u[None, :]


def sideways_motion(trajectory, samples: int = SAMPLES_PER_SEGMENT) -> tuple[np.ndarray, np.ndarray]:
    """(K-1,) distance each segment moves the reference sideways (along its body y axis, with
    its own yaw) and along its heading, m: the integrals of |lateral| and |forward| reference
    velocity, by the midpoint rule over ``samples`` parts."""
    times = np.asarray(trajectory.times, dtype=float)
    if times.size < 2:
        return np.zeros(0), np.zeros(0)
    t = _segment_times(times, samples, midpoints=True)
    s = trajectory.sample(t.ravel())
    cos_yaw, sin_yaw = np.cos(s.yaw), np.sin(s.yaw)
    dt = (np.diff(times) / samples)[:, None]
    lateral = np.abs(-sin_yaw * s.x_dot + cos_yaw * s.y_dot).reshape(t.shape)
    forward = np.abs(cos_yaw * s.x_dot + sin_yaw * s.y_dot).reshape(t.shape)
    return (lateral * dt).sum(axis=1), (forward * dt).sum(axis=1)


def check_drivable(trajectory, tolerance: float, first: int = 0) -> None:
    """A differential drive cannot move along its body y axis: reject a segment whose reference
    moves sideways more than ``tolerance`` (m) beyond what it moves along its heading
    (:func:`sideways_motion`). Paths whose velocity stays within 45 degrees of the heading on
    average pass (arcs, S-curves, turns in place, a turn interpolated along a corner); a
    sideways slide does not. ``first``: -1 when segment 0 starts at the current pose.
    Raises GoalRejected(INVALID_GOAL) naming the segment and the sideways distance."""
    lateral, forward = sideways_motion(trajectory)
    bad = lateral - forward > tolerance + _SLACK
    if bad.any():
        i = int(np.argmax(bad))
        end = i + 1 + first
        raise GoalRejected(INVALID_GOAL, f'segment from {segment_origin(end)} to point {end}: the base would move '
                                         f'{_fmt(lateral[i])} m sideways (lateral distance) and {_fmt(forward[i])} m '
                                         f'along its heading; a differential drive cannot move sideways (allowed: '
                                         f'{_fmt(tolerance)} m beyond the forward distance)')


class ProfileCaps(NamedTuple):
    """The follower's command caps: |v| <= ``speed`` (m/s), |omega| <= ``yaw_rate`` (rad/s)."""

    speed: float
    yaw_rate: float


def profile_caps(trajectory, samples: int = SAMPLES_PER_SEGMENT) -> ProfileCaps:
    """The caps of a trajectory: its peak reference speed hypot(x_dot, y_dot) and |yaw rate|,
    sampled at ``samples`` + 1 times over each segment (points included), times
    ``1 + PROFILE_MARGIN``, plus :data:`PROFILE_SPEED_FLOOR` / :data:`PROFILE_YAW_RATE_FLOOR`."""
    times = np.asarray(trajectory.times, dtype=float)
    t = _segment_times(times, samples, midpoints=False).ravel() if times.size > 1 else times
    s = trajectory.sample(t)
    speed = float(np.max(np.hypot(s.x_dot, s.y_dot)))
    yaw_rate = float(np.max(np.abs(s.yaw_rate)))
    return ProfileCaps(speed * (1.0 + PROFILE_MARGIN) + PROFILE_SPEED_FLOOR,
                       yaw_rate * (1.0 + PROFILE_MARGIN) + PROFILE_YAW_RATE_FLOOR)


def limit_to_profile(twist: Sequence[float], caps: ProfileCaps) -> BodyTwist:
    """``twist`` (v m/s, omega rad/s) scaled by one factor (keeping its curvature, as
    :func:`~shadow_twin.control.diff_drive.saturate_twist`) to within ``caps``."""
    v, omega = float(twist[0]), float(twist[1])
    scale = 1.0
    if abs(v) > caps.speed:
        scale = caps.speed / abs(v)
    if abs(omega) * scale > caps.yaw_rate:
        scale = caps.yaw_rate / abs(omega)
    return BodyTwist(v * scale, omega * scale)
