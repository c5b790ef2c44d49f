"""Goal validation of the joint trajectory controller (``validate_trajectory_msg``) plus the twin's
rules (duplicate joints, NaN/inf, joint position and velocity limits; the limits themselves, and
those of a model, are in :mod:`.joint_limits`).

Part of :mod:`shadow_twin.control.jtc` (ROS-free; see its overview for the upstream references).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from shadow_twin.common.errors import TrajectoryError
from shadow_twin.common.stamps import to_seconds
from shadow_twin.control.jtc.joint_limits import LIMIT_SLACK, JointLimits
from shadow_twin.control.jtc.result_codes import INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP, GoalRejected
from shadow_twin.control.trajectory import JointTrajectory

# The JTC compares "-1" and "zero end velocity" with float's epsilon
# (tolerances.hpp resolve_tolerance_source; validate_trajectory_msg).
FLOAT32_EPS = float(np.finfo(np.float32).eps)


@dataclass
class _Point:
    """One trajectory point as given (empty lists for absent fields)."""

    time: float
    positions: list
    velocities: list
    accelerations: list
    effort: list


def format_value(value: float) -> str:
    return f'{value:.6g}'


def check_time_from_start(k: int, t: float, previous: float | None) -> None:
    """The JTC's rule for point ``k``'s time_from_start ``t`` (s) after the previous point's
    ``previous`` (None for point 0): finite, not negative, strictly increasing. Raises
    GoalRejected(INVALID_GOAL) naming the point."""
    if not math.isfinite(t):
        raise GoalRejected(INVALID_GOAL, f'point {k}: time_from_start is {t} (NaN or inf)')
    if previous is None and t < 0:
        raise GoalRejected(INVALID_GOAL, f'point 0: time_from_start {format_value(t)} s is negative')
    if previous is not None and t <= previous:
        raise GoalRejected(INVALID_GOAL, f'time_from_start is not strictly increasing: point {k - 1} at '
                                         f'{format_value(previous)} s, point {k} at {format_value(t)} s')


def _validate(joint_names: Sequence[str], points: Sequence[_Point], known_joints: Sequence[str],
              limits: Mapping[str, JointLimits] | None, now: float, start_time: float | None,
              allow_partial_joints_goal: bool, allow_nonzero_velocity_at_trajectory_end: bool,
              allow_effort: bool, current_positions: Mapping[str, float] | None) -> None:
    """All rejection rules, in the order documented in :func:`validate_goal`."""
    now = to_seconds(now)
    start_time = None if start_time is None else to_seconds(start_time)
    names = [str(j) for j in joint_names]
    _check_joint_names(names, known_joints, allow_partial_joints_goal)
    _check_points(names, points, allow_effort)
    _check_start_time(points, now, start_time)
    _check_end_at_rest(names, points, allow_nonzero_velocity_at_trajectory_end)
    _check_limits(names, points, limits, current_positions)


def _check_joint_names(names: list[str], known_joints: Sequence[str], allow_partial_joints_goal: bool) -> None:
    """The joint-name rules of :func:`_validate` (INVALID_JOINTS)."""
    known = [str(j) for j in known_joints]
    known_set = set(known)
    # Joint names (validate_trajectory_msg: empty names, incoming joint not a controller
    # joint; partial goals "joint_names.size() != dof_"). Duplicates: twin rule.
    if not names:
        raise GoalRejected(INVALID_JOINTS, 'goal trajectory has no joint names')
    unknown = [j for j in names if j not in known_set]
    if unknown:
        raise GoalRejected(INVALID_JOINTS, f'goal names joint(s) {unknown} that this controller does not '
                                           f'control (its joints: {known})')
    duplicates = [j for j in dict.fromkeys(names) if names.count(j) > 1]
    if duplicates:
        raise GoalRejected(INVALID_JOINTS, f'goal names joint(s) {duplicates} more than once')
    if not allow_partial_joints_goal:
        missing = [j for j in known if j not in names]
        if missing:
            raise GoalRejected(INVALID_JOINTS, f'goal lacks joint(s) {missing} and partial joint goals are '
                                               f'not allowed (allow_partial_joints_goal is false)')


def _check_points(names: list[str], points: Sequence[_Point], allow_effort: bool) -> None:
    """The point rules of :func:`_validate` (INVALID_GOAL): times, field sizes, finite values, effort."""
    n_joints = len(names)
    # Points (validate_trajectory_msg: empty trajectory; time_from_start strictly
    # increasing; validate_trajectory_point_field: positions required, velocities and
    # accelerations empty or one per joint; effort rejected).
    if len(points) == 0:
        raise GoalRejected(INVALID_GOAL, 'goal trajectory has no points')
    previous = None
    # Well-formed points (the usual case) are checked in bulk; otherwise point by point,
    # which finds and names the first problem.
    for k, point in enumerate(() if _points_well_formed(points, n_joints) else points):
        t = point.time
        check_time_from_start(k, t, previous)
        previous = t
        fields = [('positions', point.positions, False), ('velocities', point.velocities, True),
                  ('accelerations', point.accelerations, True)]
        if len(point.effort):
            if not allow_effort:
                raise GoalRejected(INVALID_GOAL, f'point {k} carries effort values; the joint trajectory '
                                                 f'controller does not accept effort in trajectories')
            fields.append(('effort', point.effort, True))
        for label, values, may_be_empty in fields:
            if may_be_empty and len(values) == 0:
                continue
            if len(values) != n_joints:
                raise GoalRejected(INVALID_GOAL, f'point {k}: {len(values)} {label} for {n_joints} joints '
                                                 f'{names}')
            for j, value in enumerate(values):
                try:
                    value = float(value)
                except (TypeError, ValueError):
                    raise GoalRejected(INVALID_GOAL, f'point {k}: {label} of joint {names[j]!r} is not a '
                                                     f'number ({value!r})') from None
                if not math.isfinite(value):
                    raise GoalRejected(INVALID_GOAL, f'point {k}: {label} of joint {names[j]!r} is {value} '
                                                     f'(NaN or inf)')


def _check_start_time(points: Sequence[_Point], now: float, start_time: float | None) -> None:
    """The header.stamp rule of :func:`_validate` (OLD_HEADER_TIMESTAMP; INVALID_GOAL for NaN/inf)."""
    # Stamped start time (validate_trajectory_msg: a non-zero header.stamp whose
    # trajectory ends before now is rejected; a start in the past that still ends in the
    # future is accepted and joined mid-way).
    if start_time is not None and start_time != 0.0:
        if not math.isfinite(start_time):
            raise GoalRejected(INVALID_GOAL, f'header.stamp is {start_time} (NaN or inf)')
        end = start_time + points[-1].time
        if end < now:
            raise GoalRejected(OLD_HEADER_TIMESTAMP, f'trajectory stamped to start at {start_time:.9f} s ends at '
                                                     f'{end:.9f} s, before now ({now:.9f} s)')


def _check_end_at_rest(names: list[str], points: Sequence[_Point],
                       allow_nonzero_velocity_at_trajectory_end: bool) -> None:
    """The last-point-at-rest rule of :func:`_validate` (INVALID_GOAL)."""
    # Last point at rest (validate_trajectory_msg with
    # allow_nonzero_velocity_at_trajectory_end, false by default since Jazzy).
    last = points[-1]
    if not allow_nonzero_velocity_at_trajectory_end:
        for j, value in enumerate(last.velocities):
            if abs(float(value)) > FLOAT32_EPS:
                raise GoalRejected(INVALID_GOAL, f'last point ({len(points) - 1}): velocity of joint {names[j]!r} '
                                                 f'is {format_value(float(value))} rad/s, not 0 '
                                                 f'(allow_nonzero_velocity_at_trajectory_end is false)')


def _check_limits(names: list[str], points: Sequence[_Point], limits: Mapping[str, JointLimits] | None,
                  current_positions: Mapping[str, float] | None) -> None:
    """The position and velocity limit rules of :func:`_validate` (INVALID_GOAL)."""
    # Joint limits (twin rule), in bulk; the first violation (lowest point) is named.
    limits = limits or {}
    if not any(limits.get(name) is not None for name in names):
        return
    times = np.array([p.time for p in points], dtype=float)
    positions = np.array([p.positions for p in points], dtype=float)
    for j, name in enumerate(names):
        lim = limits.get(name)
        if lim is None:
            continue
        q = positions[:, j]
        outside = np.zeros(len(points), dtype=bool)
        if lim.lower is not None:
            outside |= q < lim.lower - LIMIT_SLACK
        if lim.upper is not None:
            outside |= q > lim.upper + LIMIT_SLACK
        if outside.any():
            k = int(np.argmax(outside))
            raise GoalRejected(INVALID_GOAL, f'point {k}: position {format_value(q[k])} rad of joint {name!r} is outside '
                                             f'its limits [{_fmt_limit(lim.lower)}, {_fmt_limit(lim.upper)}] rad')
        if lim.max_velocity is None:
            continue
        vmax = lim.max_velocity
        velocity = np.array([float(p.velocities[j]) if len(p.velocities) else 0.0 for p in points])
        fast = np.abs(velocity) > vmax + LIMIT_SLACK
        if fast.any():
            k = int(np.argmax(fast))
            raise GoalRejected(INVALID_GOAL, f'point {k}: velocity {format_value(velocity[k])} rad/s '
                                             f'of joint {name!r} exceeds its limit {format_value(vmax)} rad/s')
        start_q = None
        if current_positions is not None and name in current_positions and points[0].time > 0:
            start_q = float(current_positions[name])
        seg_t0 = np.concatenate([[0.0], times[:-1]]) if start_q is not None else times[:-1]
        seg_q0 = np.concatenate([[start_q], q[:-1]]) if start_q is not None else q[:-1]
        seg_end = np.arange(0 if start_q is not None else 1, len(points))
        dt = times[seg_end] - seg_t0
        dq = q[seg_end] - seg_q0
        too_fast = np.abs(dq) / dt > vmax + LIMIT_SLACK
        if too_fast.any():
            i = int(np.argmax(too_fast))
            k = int(seg_end[i])
            origin = 'the current state' if start_q is not None and i == 0 else f'point {k - 1}'
            speed = abs(dq[i]) / dt[i]
            raise GoalRejected(INVALID_GOAL, f'segment from {origin} to point {k}: joint {name!r} moves '
                                             f'{format_value(dq[i])} rad in {format_value(dt[i])} s ({format_value(speed)} rad/s on '
                                             f'average), above its velocity limit {format_value(vmax)} rad/s')


def _points_well_formed(points: Sequence[_Point], n_joints: int) -> bool:
    """True if every point is valid: finite, non-negative, strictly increasing times; one finite
    position per joint; velocities and accelerations empty or one finite value per joint; no
    effort. Checked with numpy over all points at once (a 10,000-point goal in a few ms)."""
    times = np.array([p.time for p in points], dtype=float)
    if not (np.all(np.isfinite(times)) and times[0] >= 0 and np.all(np.diff(times) > 0)):
        return False
    for attr, may_be_empty in (('positions', False), ('velocities', True), ('accelerations', True)):
        rows = [getattr(p, attr) for p in points]
        lengths = {len(r) for r in rows}
        if not lengths <= ({n_joints, 0} if may_be_empty else {n_joints}):
            return False
        given = [r for r in rows if len(r)] if 0 in lengths else rows
        if given:
            try:
                values = np.array(given, dtype=float)
            except (TypeError, ValueError):
                return False
            if not np.all(np.isfinite(values)):
                return False
    return not any(len(p.effort) for p in points)


def _fmt_limit(value: float | None) -> str:
    return '-inf' if value is None else format_value(value)


def validate_goal(trajectory: JointTrajectory, known_joints: Sequence[str], limits: Mapping[str, JointLimits],
                  now: float, start_time: float | None = None, allow_partial_joints_goal: bool = True, *,
                  allow_nonzero_velocity_at_trajectory_end: bool = False,
                  current_positions: Mapping[str, float] | None = None) -> None:
    """Check a goal trajectory as the JTC's ``validate_trajectory_msg`` does, plus the twin's limits.

    Args:
        trajectory: the goal (ROS joint names).
        known_joints: the controller's joints.
        limits: {ROS joint name: JointLimits}; joints not in it are unlimited.
        now: current time, s, on the clock of ``start_time`` (a float, or a
            ``builtin_interfaces/Time``-like object with sec/nanosec).
        start_time: the goal's ``header.stamp``, s (float or Time-like); None
            or 0 = start now.
        allow_partial_joints_goal: the JTC parameter of that name (True: the goal
            may name a subset of ``known_joints``).
        allow_nonzero_velocity_at_trajectory_end: the JTC parameter of that name
            (False by default since Jazzy): with False a last point whose
            velocities are not 0 (within float32 epsilon) is rejected.
        current_positions: optional {joint: rad} at the time of the goal; if given
            (and the first point's ``time_from_start`` is > 0) the segment from
            the current state to the first point is velocity-checked too. A first
            point at t = 0 is a jump in the JTC and is not checked.
    Raises:
        GoalRejected, checked in this order:

        * INVALID_JOINTS: no joint names; a joint not in ``known_joints``
          (joint_trajectory_controller.cpp ``validate_trajectory_msg``); a joint
          named twice (twin rule); joints missing while partial goals are not
          allowed (``validate_trajectory_msg``, ``allow_partial_joints_goal``).
        * INVALID_GOAL: no points; ``time_from_start`` NaN/inf, negative (first
          point) or not strictly increasing (``validate_trajectory_msg``);
          positions missing or not one per joint, velocities/accelerations neither
          empty nor one per joint (``validate_trajectory_point_field``); NaN/inf
          values (twin rule).
        * OLD_HEADER_TIMESTAMP: ``start_time`` non-zero and ``start_time`` +
          last ``time_from_start`` < ``now`` (``validate_trajectory_msg``: only a
          trajectory that would already be over is rejected).
        * INVALID_GOAL: non-zero last-point velocity (see above); a position
          outside [lower, upper]; an explicit point velocity above
          ``max_velocity``; the average velocity |dq|/dt of a segment between
          consecutive points (or from ``current_positions``) above
          ``max_velocity`` (twin rules; the spline may peak higher between
          points, which is not checked).
    """
    times = np.asarray(trajectory.times, dtype=float).reshape(-1)
    positions = np.asarray(trajectory.positions, dtype=float)
    if positions.ndim != 2 or positions.shape[0] != times.size:
        raise GoalRejected(INVALID_GOAL, f'positions have shape {positions.shape} for {times.size} points')

    def rows(arr):
        if arr is None:
            return [[] for _ in range(times.size)]
        arr = np.asarray(arr, dtype=float)
        if arr.ndim != 2 or arr.shape[0] != times.size:
            raise GoalRejected(INVALID_GOAL, f'array of shape {arr.shape} for {times.size} points')
        return arr.tolist()
    points = [_Point(float(t), p, v, a, []) for t, p, v, a in
              zip(times, positions.tolist(), rows(trajectory.velocities), rows(trajectory.accelerations))]
    _validate(list(trajectory.joint_names), points, known_joints, limits, now, start_time,
              allow_partial_joints_goal, allow_nonzero_velocity_at_trajectory_end, False, current_positions)


def validate_goal_msg(msg, known_joints: Sequence[str], limits: Mapping[str, JointLimits], now: float,
                      allow_partial_joints_goal: bool = True, *,
                      allow_nonzero_velocity_at_trajectory_end: bool = False, allow_effort: bool = False,
                      current_positions: Mapping[str, float] | None = None,
                      name: str = 'goal') -> JointTrajectory:
    """Validate a raw ``trajectory_msgs/JointTrajectory`` and convert it.

    The message is read duck-typed: ``joint_names``, ``points[*].positions /
    velocities / accelerations / effort`` (sequences, empty when absent),
    ``points[*].time_from_start.sec/.nanosec`` and ``header.stamp.sec/.nanosec``
    (a missing header counts as stamp 0 = start now). The rules and their order
    are those of :func:`validate_goal` (start time from ``header.stamp``), run on
    the raw fields so that codes and point numbers refer to the message.

    Args:
        allow_effort: False (the JTC: "trajectories with effort fields are not
            supported", ``validate_trajectory_msg``) rejects any point with
            effort values; True accepts them if they are one per joint (they are
            then validated but not kept).
        name: name of the returned trajectory.
        Others: see :func:`validate_goal`.
    Returns:
        The goal as a :class:`JointTrajectory` (as ``JointTrajectory.from_msg`` converts it:
        velocities/accelerations kept only when every point has them).
    Raises:
        GoalRejected: see :func:`validate_goal`; a ``TrajectoryError`` of the
        conversion (e.g. velocities given at some points but not at others,
        which the JTC accepts but :class:`JointTrajectory` does not) becomes
        INVALID_GOAL with the same text.
    """
    joint_names = list(getattr(msg, 'joint_names', None) or [])
    raw_points = list(getattr(msg, 'points', None) or [])
    points = []
    for k, p in enumerate(raw_points):
        try:
            t = to_seconds(p.time_from_start)
        except (AttributeError, TypeError, ValueError):
            raise GoalRejected(INVALID_GOAL, f'point {k}: unreadable time_from_start') from None
        points.append(_Point(t, list(getattr(p, 'positions', None) or []),
                             list(getattr(p, 'velocities', None) or []),
                             list(getattr(p, 'accelerations', None) or []),
                             list(getattr(p, 'effort', None) or [])))
    stamp = getattr(getattr(msg, 'header', None), 'stamp', None)
    start_time = 0.0 if stamp is None else to_seconds(stamp)
    _validate(joint_names, points, known_joints, limits, now, start_time, allow_partial_joints_goal,
              allow_nonzero_velocity_at_trajectory_end, allow_effort, current_positions)

    def field(attr: str):   # as JointTrajectory.from_msg: kept only if every point has it
        rows = [getattr(p, attr) for p in points]
        return np.array(rows, dtype=float) if all(len(r) for r in rows) else None
    try:
        return JointTrajectory(joint_names, np.array([p.time for p in points]), field('positions'),
                               field('velocities'), field('accelerations'), name=name)
    except TrajectoryError as exc:
        raise GoalRejected(INVALID_GOAL, str(exc)) from None
