"""Goal validation and tolerance semantics of ros2_controllers' joint trajectory controller.

ROS-free: nothing here imports ROS. Messages are read duck-typed (attributes of
``trajectory_msgs/JointTrajectory``, ``control_msgs/JointTolerance`` and
``control_msgs/action/FollowJointTrajectory`` goals), so the MuJoCo bridge's
simulated trajectory controller and the twin's ``FollowJointTrajectory`` action
server share one implementation, and the tests run without ROS.

Upstream reference (ros-controls/ros2_controllers, Jazzy, 4.x):

* ``joint_trajectory_controller/src/joint_trajectory_controller.cpp``:
  ``validate_trajectory_msg`` and ``validate_trajectory_point_field`` (which
  goals are rejected), ``update`` (path tolerance while moving, goal tolerance
  and ``goal_time`` after the last point, result codes and strings),
  ``compute_error_for_joint`` (error = desired - actual, shortest angular
  distance for continuous joints).
* ``joint_trajectory_controller/include/joint_trajectory_controller/tolerances.hpp``:
  ``StateTolerances``/``SegmentTolerances`` (a tolerance of 0 is not checked),
  ``get_segment_tolerances(logger, params)`` (defaults from the ``constraints``
  parameters), ``resolve_tolerance_source`` and
  ``get_segment_tolerances(logger, defaults, goal, joints)`` (goal tolerances:
  > 0 overrides, 0 keeps the default, -1 erases), and
  ``check_state_tolerance_per_joint``.
* ``control_msgs/action/FollowJointTrajectory.action``: result codes.

Rules added by the twin, not in the Jazzy JTC (which rejects none of these in
``validate_trajectory_msg``): duplicate joint names, NaN/inf values, a negative
first ``time_from_start``, position limits and velocity limits (explicit point
velocities and the average velocity a segment implies). Result codes for a
rejected goal follow the ROS 1 joint_trajectory_controller (``goalCB``), which
answered joint-name problems with ``INVALID_JOINTS`` and everything else with
``INVALID_GOAL``; the ROS 2 JTC rejects goals without a result.

Units: positions rad (m for prismatic joints), velocities rad/s, accelerations
rad/s^2, times s.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, replace
from typing import Any, Collection, Iterable, Mapping, NamedTuple, Sequence

import mujoco
import numpy as np

from shadow_twin.common.errors import ConfigError, ModelError, ShadowTwinError, TrajectoryError
from shadow_twin.common.stamps import to_seconds
from shadow_twin.control.trajectory import JointTrajectory


class ResultCode(enum.IntEnum):
    """``control_msgs/action/FollowJointTrajectory`` ``Result.error_code`` values."""

    SUCCESSFUL = 0
    INVALID_GOAL = -1
    INVALID_JOINTS = -2
    OLD_HEADER_TIMESTAMP = -3
    PATH_TOLERANCE_VIOLATED = -4
    GOAL_TOLERANCE_VIOLATED = -5


# The codes by the names the message and the JTC give them (``Result::INVALID_GOAL``).
SUCCESSFUL, INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP, PATH_TOLERANCE_VIOLATED, \
    GOAL_TOLERANCE_VIOLATED = ResultCode


def result_name(code: int) -> str:
    """Name of a ``Result.error_code``, e.g. ``'INVALID_JOINTS'``; other values (a controller
    may send its own) as their number."""
    try:
        return ResultCode(code).name
    except ValueError:
        return str(code)


class GoalOutcome(enum.Enum):
    """Where a FollowJointTrajectory goal stands: still running, or how it ended (the
    terminal ``action_msgs/GoalStatus`` states the JTC uses)."""

    RUNNING = 'running'
    SUCCEEDED = 'succeeded'
    ABORTED = 'aborted'
    CANCELED = 'canceled'


class Verdict(NamedTuple):
    """A goal's state with the ``Result`` it ends with (while RUNNING: SUCCESSFUL and
    why it is not done yet, or '')."""

    outcome: GoalOutcome
    code: int
    message: str

    @classmethod
    def aborted(cls, message: str, code: int = INVALID_GOAL) -> Verdict:
        """An ABORTED verdict; INVALID_GOAL is what the JTC answers a goal that is stopped
        for other reasons than its tolerances (preempted, not executable)."""
        return cls(GoalOutcome.ABORTED, code, message)


#: The verdict of a goal that has not reached its end yet and violates nothing.
RUNNING_VERDICT = Verdict(GoalOutcome.RUNNING, SUCCESSFUL, '')

#: control_msgs/JointTolerance special value: remove ("erase") the default check.
ERASE_TOLERANCE = -1.0
#: Default ``constraints.stopped_velocity_tolerance`` of the JTC, rad/s.
DEFAULT_STOPPED_VELOCITY = 0.01
#: Slack on position/velocity limit comparisons (rad, rad/s), for float round-off.
LIMIT_SLACK = 1e-9
# The JTC compares "-1" and "zero end velocity" with float's epsilon
# (tolerances.hpp resolve_tolerance_source; validate_trajectory_msg).
_FLOAT32_EPS = float(np.finfo(np.float32).eps)


class GoalRejected(ShadowTwinError):
    """A goal the JTC would not execute.

    Attributes:
        error_code: ``FollowJointTrajectory.Result`` code: INVALID_GOAL (-1),
            INVALID_JOINTS (-2) or OLD_HEADER_TIMESTAMP (-3).
    ``str(exc)`` (also :attr:`error_string`) is a one-line reason naming the
    joint and/or point at fault; use it as ``Result.error_string``.
    """

    def __init__(self, error_code: int, message: str) -> None:
        if error_code not in set(ResultCode) - {SUCCESSFUL}:
            raise ValueError(f'GoalRejected needs a FollowJointTrajectory error code, got {error_code!r}')
        super().__init__(' '.join(str(message).split()))
        self.error_code = ResultCode(error_code)

    @property
    def error_string(self) -> str:
        """The one-line reason (same as ``str(self)``)."""
        return str(self)

    @property
    def error_name(self) -> str:
        """Name of :attr:`error_code`, e.g. ``'INVALID_JOINTS'``."""
        return self.error_code.name


# ---------------------------------------------------------------------------------------
# Goal validation
# ---------------------------------------------------------------------------------------
@dataclass
class JointLimits:
    """Limits of one joint; None = unlimited.

    Attributes:
        lower, upper: position range, rad (m for prismatic joints).
        max_velocity: largest |velocity|, rad/s (m/s), > 0.
    Raises:
        ConfigError: NaN, lower > upper, or max_velocity <= 0.
    """

    lower: float | None = None
    upper: float | None = None
    max_velocity: float | None = None

    def __post_init__(self) -> None:
        for name in ('lower', 'upper', 'max_velocity'):
            value = getattr(self, name)
            if value is None:
                continue
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise ConfigError(f'joint limit {name} must be a number, got {value!r}') from None
            if math.isnan(value):
                raise ConfigError(f'joint limit {name} is NaN')
            setattr(self, name, value)
        if self.lower is not None and self.upper is not None and self.lower > self.upper:
            raise ConfigError(f'joint limits: lower {self.lower} is above upper {self.upper}')
        if self.max_velocity is not None and not self.max_velocity > 0:
            raise ConfigError(f'joint limits: max_velocity must be > 0, got {self.max_velocity}')


@dataclass
class _Point:
    """One trajectory point as given (empty lists for absent fields)."""

    time: float
    positions: list
    velocities: list
    accelerations: list
    effort: list


def _fmt(value: float) -> str:
    return f'{value:.6g}'


def check_time_from_start(k: int, t: float, previous: float | None) -> None:
    """The JTC's rule for point ``k``'s time_from_start ``t`` (s) after the previous point's
    ``previous`` (None for point 0): finite, not negative, strictly increasing. Raises
    GoalRejected(INVALID_GOAL) naming the point."""
    if not math.isfinite(t):
        raise GoalRejected(INVALID_GOAL, f'point {k}: time_from_start is {t} (NaN or inf)')
    if previous is None and t < 0:
        raise GoalRejected(INVALID_GOAL, f'point 0: time_from_start {_fmt(t)} s is negative')
    if previous is not None and t <= previous:
        raise GoalRejected(INVALID_GOAL, f'time_from_start is not strictly increasing: point {k - 1} at '
                                         f'{_fmt(previous)} s, point {k} at {_fmt(t)} s')


def _validate(joint_names: Sequence[str], points: Sequence[_Point], known_joints: Sequence[str],
              limits: Mapping[str, JointLimits] | None, now: float, start_time: float | None,
              allow_partial_joints_goal: bool, allow_nonzero_velocity_at_trajectory_end: bool,
              allow_effort: bool, current_positions: Mapping[str, float] | None) -> None:
    """All rejection rules, in the order documented in :func:`validate_goal`."""
    now = to_seconds(now)
    start_time = None if start_time is None else to_seconds(start_time)
    names = [str(j) for j in joint_names]
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
    # Last point at rest (validate_trajectory_msg with
    # allow_nonzero_velocity_at_trajectory_end, false by default since Jazzy).
    last = points[-1]
    if not allow_nonzero_velocity_at_trajectory_end:
        for j, value in enumerate(last.velocities):
            if abs(float(value)) > _FLOAT32_EPS:
                raise GoalRejected(INVALID_GOAL, f'last point ({len(points) - 1}): velocity of joint {names[j]!r} '
                                                 f'is {_fmt(float(value))} rad/s, not 0 '
                                                 f'(allow_nonzero_velocity_at_trajectory_end is false)')
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
            raise GoalRejected(INVALID_GOAL, f'point {k}: position {_fmt(q[k])} rad of joint {name!r} is outside '
                                             f'its limits [{_fmt_limit(lim.lower)}, {_fmt_limit(lim.upper)}] rad')
        if lim.max_velocity is None:
            continue
        vmax = lim.max_velocity
        velocity = np.array([float(p.velocities[j]) if len(p.velocities) else 0.0 for p in points])
        fast = np.abs(velocity) > vmax + LIMIT_SLACK
        if fast.any():
            k = int(np.argmax(fast))
            raise GoalRejected(INVALID_GOAL, f'point {k}: velocity {_fmt(velocity[k])} rad/s '
                                             f'of joint {name!r} exceeds its limit {_fmt(vmax)} rad/s')
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
                                             f'{_fmt(dq[i])} rad in {_fmt(dt[i])} s ({_fmt(speed)} rad/s on '
                                             f'average), above its velocity limit {_fmt(vmax)} rad/s')


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
    return '-inf' if value is None else _fmt(value)


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


def joint_limits_from_model(model, joint_names: Sequence[str] | None = None,
                            velocity_limits: Mapping[str, float] | None = None, *,
                            joint_map=None) -> dict[str, JointLimits]:
    """Joint limits of an MJCF model.

    Args:
        model: compiled ``mujoco.MjModel``.
        joint_names: MJCF joint names; None = every hinge and slide joint.
        velocity_limits: {joint name: rad/s (m/s)}, keyed by ROS or MJCF name
            (MuJoCo has no joint velocity limit; take them from the URDF).
        joint_map: optional ``JointNameMap`` to key the result by ROS names
            (default: the MJCF names).
    Returns:
        {name: JointLimits}: limited joints get ``jnt_range``, unlimited ones
        lower = upper = None; max_velocity from ``velocity_limits`` or None.
    Raises:
        ModelError: unknown joint, or a free/ball joint (no scalar limits).
        ConfigError: a velocity limit for a joint not listed, or not > 0.
    """
    scalar_types = {int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)}
    if joint_names is None:
        joint_names = [model.joint(j).name for j in range(model.njnt) if int(model.jnt_type[j]) in scalar_types]
    velocity_limits = dict(velocity_limits or {})
    used: set[str] = set()
    out: dict[str, JointLimits] = {}
    for mjcf in joint_names:
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, mjcf)
        if jid < 0:
            raise ModelError(f'model has no joint {mjcf!r}')
        if int(model.jnt_type[jid]) not in scalar_types:
            raise ModelError(f'joint {mjcf!r} is a free or ball joint; only hinge and slide joints have limits')
        key = joint_map.to_ros(mjcf) if joint_map is not None else mjcf
        lower = upper = None
        if model.jnt_limited[jid]:
            lower, upper = (float(x) for x in model.jnt_range[jid])
        vmax = None
        for candidate in (key, mjcf):
            if candidate in velocity_limits:
                vmax = velocity_limits[candidate]
                used.update({key, mjcf} & set(velocity_limits))
                break
        try:
            out[key] = JointLimits(lower, upper, vmax)
        except ConfigError as exc:
            raise ConfigError(f'joint {key!r}: {exc}') from None
    unused = sorted(set(velocity_limits) - used)
    if unused:
        raise ConfigError(f'velocity limits given for joint(s) {unused} that are not among {list(joint_names)}')
    return out


# ---------------------------------------------------------------------------------------
# Tolerances
# ---------------------------------------------------------------------------------------
@dataclass
class StateTolerance:
    """Largest |desired - actual| of one joint; 0.0 = not checked (tolerances.hpp ``StateTolerances``).

    Attributes: position rad, velocity rad/s, acceleration rad/s^2 (all >= 0).
    """

    position: float = 0.0
    velocity: float = 0.0
    acceleration: float = 0.0


@dataclass
class Tolerances:
    """Tolerances of one goal (tolerances.hpp ``SegmentTolerances``).

    Attributes:
        path: {joint: StateTolerance} checked while the trajectory runs
            (``state_tolerance``); a joint not listed is not checked.
        goal: {joint: StateTolerance} checked after the last point
            (``goal_state_tolerance``); a joint not listed gets
            ``StateTolerance(velocity=stopped_velocity)``, the JTC's default.
            A velocity of 0 here means "not checked" (as after a -1 in the goal).
        goal_time: s the joints may take after the last point's time to get
            within ``goal``; 0 = no limit (wait until within, or until a new goal).
        stopped_velocity: ``constraints.stopped_velocity_tolerance``, rad/s: the
            default goal velocity tolerance of every joint.
    """

    path: dict[str, StateTolerance] = field(default_factory=dict)
    goal: dict[str, StateTolerance] = field(default_factory=dict)
    goal_time: float = 0.0
    stopped_velocity: float = DEFAULT_STOPPED_VELOCITY

    def path_for(self, joint: str) -> StateTolerance:
        """Path tolerance of ``joint`` (zeros = unchecked if not listed)."""
        return self.path.get(joint) or StateTolerance()

    def goal_for(self, joint: str) -> StateTolerance:
        """Goal tolerance of ``joint`` (velocity = stopped_velocity if not listed)."""
        return self.goal.get(joint) or StateTolerance(velocity=self.stopped_velocity)

    def copy(self) -> 'Tolerances':
        """A deep copy."""
        return Tolerances({j: replace(t) for j, t in self.path.items()},
                          {j: replace(t) for j, t in self.goal.items()},
                          self.goal_time, self.stopped_velocity)


def _config_number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f'constraints: {what} must be a number, got {value!r}')
    value = float(value)
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(f'constraints: {what} must be finite and >= 0, got {value}')
    return value


def default_tolerances(config: Mapping | None, joints: Sequence[str] | None = None) -> Tolerances:
    """Default tolerances from the JTC ``constraints`` parameters.

    Layout (tolerances.hpp ``get_segment_tolerances(logger, params)``; a
    ``{'constraints': {...}}`` wrapper is accepted)::

        goal_time: 0.5                     # s, default 0 (no limit)
        stopped_velocity_tolerance: 0.01   # rad/s, default 0.01
        rh_FFJ3: {trajectory: 0.2, goal: 0.02}   # rad, default 0 (not checked)

    Each joint gets path position = ``trajectory``, goal position = ``goal`` and
    goal velocity = ``stopped_velocity_tolerance``.

    Args:
        config: the mapping above (None or {} = all defaults).
        joints: the controller's joints; those without an entry get the defaults.
            Pass them so that :func:`goal_tolerances` knows every joint.
    Raises:
        ConfigError: non-numeric or negative values, unknown keys in a joint
        entry, or (with ``joints``) a joint that is not a controller joint.
    """
    data = dict(config or {})
    if isinstance(data.get('constraints'), Mapping):
        data = dict(data['constraints'])
    goal_time = _config_number(data.pop('goal_time', 0.0), 'goal_time')
    stopped = _config_number(data.pop('stopped_velocity_tolerance', DEFAULT_STOPPED_VELOCITY),
                             'stopped_velocity_tolerance')
    names = list(joints) if joints is not None else []
    for joint, entry in data.items():
        if not isinstance(entry, Mapping):
            raise ConfigError(f'constraints: {joint!r} must be a mapping with trajectory/goal, got {entry!r}')
        unknown = sorted(set(entry) - {'trajectory', 'goal'})
        if unknown:
            raise ConfigError(f'constraints: joint {joint!r} has unknown key(s) {unknown}; use trajectory, goal')
        if joints is not None and joint not in names:
            raise ConfigError(f'constraints name joint {joint!r}, which is not a controller joint {names}')
        if joint not in names:
            names.append(joint)
    path, goal = {}, {}
    for joint in names:
        entry = data.get(joint) or {}
        path[joint] = StateTolerance(position=_config_number(entry.get('trajectory', 0.0),
                                                             f'{joint}.trajectory'))
        goal[joint] = StateTolerance(position=_config_number(entry.get('goal', 0.0), f'{joint}.goal'),
                                     velocity=stopped)
    return Tolerances(path, goal, goal_time, stopped)


def resolve_tolerance(default: float, value: float, what: str = 'tolerance') -> float:
    """One goal tolerance over its default (tolerances.hpp ``resolve_tolerance_source``).

    ``value`` > 0 replaces the default; 0 keeps ``default``; -1 (within float32
    epsilon) erases it (returns 0 = not checked). Raises GoalRejected
    (INVALID_GOAL) for NaN or any other negative value.
    """
    value = float(value)
    if math.isnan(value):
        raise GoalRejected(INVALID_GOAL, f'{what} is NaN')
    if value > 0:
        return value
    if abs(value - ERASE_TOLERANCE) < _FLOAT32_EPS:
        return 0.0
    if value < 0:
        raise GoalRejected(INVALID_GOAL, f'{what} is {_fmt(value)}; use > 0 to set it, 0 for the default or -1 '
                                         f'to remove the check')
    return float(default)


def _get(obj: Any, key: str, default: Any = 0.0) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def goal_tolerances(defaults: Tolerances, path_tolerance_msgs: Iterable | None,
                    goal_tolerance_msgs: Iterable | None, goal_time_tolerance_s: Any = 0.0, *,
                    joints: Sequence[str] | None = None, strict: bool = True) -> Tolerances:
    """The tolerances of one goal: its JointTolerance lists merged over the defaults.

    Follows tolerances.hpp ``get_segment_tolerances(logger, defaults, goal, joints)``:
    for each ``control_msgs/JointTolerance`` (``name``, ``position``,
    ``velocity``, ``acceleration``; objects or mappings) every component is
    resolved against the joint's default by :func:`resolve_tolerance` (> 0
    overrides, 0 keeps the default, -1 removes the check). ``goal_time_tolerance``
    (s, or a Duration with sec/nanosec) is resolved the same way: 0 keeps
    ``defaults.goal_time``, -1 sets 0 (no time limit).

    Args:
        defaults: from :func:`default_tolerances`.
        path_tolerance_msgs, goal_tolerance_msgs: the goal's ``path_tolerance``
            and ``goal_tolerance`` (None = empty).
        joints: the controller's joints (default: the joints in ``defaults``).
        strict: True (the twin) raises GoalRejected; False does what the JTC
            does: log-free fallback to a copy of ``defaults`` when a joint is
            unknown or a value illegal.
    Returns:
        New Tolerances listing every controller joint; ``defaults`` is unchanged.
    Raises:
        GoalRejected(INVALID_GOAL) if ``strict``: a tolerance for a joint that
        is not a controller joint, a NaN or a negative value other than -1.
    """
    known = list(joints) if joints is not None else list(dict.fromkeys([*defaults.path, *defaults.goal]))
    known_set = set(known)
    out = Tolerances({j: replace(defaults.path_for(j)) for j in known},
                     {j: replace(defaults.goal_for(j)) for j in known},
                     defaults.goal_time, defaults.stopped_velocity)
    try:
        out.goal_time = resolve_tolerance(defaults.goal_time, to_seconds(goal_time_tolerance_s),
                                          'goal_time_tolerance')
        for kind, msgs, target, base in (('path_tolerance', path_tolerance_msgs, out.path, defaults.path_for),
                                         ('goal_tolerance', goal_tolerance_msgs, out.goal, defaults.goal_for)):
            for tol in msgs or ():
                joint = str(_get(tol, 'name', ''))
                if joint not in known_set:
                    raise GoalRejected(INVALID_GOAL, f'{kind} names joint {joint!r}, which is not a controller '
                                                     f'joint {known}')
                old = base(joint)
                target[joint] = StateTolerance(*(
                    resolve_tolerance(getattr(old, comp), _get(tol, comp), f'{kind} {comp} of joint {joint!r}')
                    for comp in ('position', 'velocity', 'acceleration')))
    except GoalRejected:
        if strict:
            raise
        return defaults.copy()
    return out


def tolerances_for_goal(constraints: Mapping | None, goal, joints: Sequence[str]) -> Tolerances:
    """The tolerances of a ``FollowJointTrajectory`` goal over ``joints``: the goal's own over the
    ``constraints`` defaults (:func:`default_tolerances`, :func:`tolerances_from_goal`).

    Raises GoalRejected: INVALID_GOAL when the constraints are invalid, or as
    :func:`tolerances_from_goal` for the goal's own tolerances.
    """
    try:
        defaults = default_tolerances(constraints, joints)
    except ShadowTwinError as exc:
        raise GoalRejected(INVALID_GOAL, f'constraints parameters are invalid: {exc}') from None
    return tolerances_from_goal(defaults, goal, joints=joints)


def tolerances_from_goal(defaults: Tolerances, goal, *, joints: Sequence[str] | None = None,
                         strict: bool = True) -> Tolerances:
    """:func:`goal_tolerances` for a ``FollowJointTrajectory`` goal (duck-typed:
    ``path_tolerance``, ``goal_tolerance``, ``goal_time_tolerance``). The
    component tolerances (multi-DOF joints) are not used, as in the JTC."""
    return goal_tolerances(defaults, getattr(goal, 'path_tolerance', None), getattr(goal, 'goal_tolerance', None),
                           getattr(goal, 'goal_time_tolerance', 0.0), joints=joints, strict=strict)


def _vector(values, n: int, what: str) -> np.ndarray | None:
    if values is None:
        return None
    arr = np.asarray(values, dtype=float).reshape(-1)
    if arr.size != n:
        raise ValueError(f'{what} has {arr.size} values for {n} joints')
    return arr


def check_state(joints: Sequence[str], desired_pos, desired_vel, actual_pos, actual_vel,
                tolerances: Mapping[str, StateTolerance], *, desired_acc=None, actual_acc=None,
                wraparound: Collection[str] = ()) -> str | None:
    """Compare one state with its tolerances (tolerances.hpp ``check_state_tolerance_per_joint``).

    The error is desired - actual (``compute_error_for_joint``); for joints in
    ``wraparound`` (continuous joints) the position error is the shortest angular
    distance. A component is checked only if its tolerance is > 0 and both its
    desired and actual values are given (None = not available, as the JTC skips
    velocity errors without velocity state/command interfaces). Unlike the JTC,
    a NaN error counts as a violation.

    Args:
        joints: J joint names; arrays are (J,) in this order (rad, rad/s, rad/s^2).
        tolerances: {joint: StateTolerance}; joints not in it are not checked.
    Returns:
        None if every joint is within tolerance, else one line naming the first
        violating joint, the component, the error and the tolerance.
    Raises:
        ValueError: an array whose size is not J.
    """
    n = len(joints)
    dp, ap = _vector(desired_pos, n, 'desired_pos'), _vector(actual_pos, n, 'actual_pos')
    dv, av = _vector(desired_vel, n, 'desired_vel'), _vector(actual_vel, n, 'actual_vel')
    da, aa = _vector(desired_acc, n, 'desired_acc'), _vector(actual_acc, n, 'actual_acc')
    units = {'position': 'rad', 'velocity': 'rad/s', 'acceleration': 'rad/s^2'}
    for i, joint in enumerate(joints):
        tol = tolerances.get(joint)
        if tol is None:
            continue
        for comp, desired, actual in (('position', dp, ap), ('velocity', dv, av), ('acceleration', da, aa)):
            limit = getattr(tol, comp)
            if not limit > 0 or desired is None or actual is None:
                continue
            error = desired[i] - actual[i]
            if comp == 'position' and joint in wraparound:
                error = (error + math.pi) % (2 * math.pi) - math.pi
            if not abs(error) <= limit:
                unit = units[comp]
                return (f'joint {joint!r}: {comp} error {error:+.4g} {unit} exceeds the tolerance {limit:.4g} '
                        f'{unit} (desired {desired[i]:.4g}, actual {actual[i]:.4g})')
    return None


def check_path(joints: Sequence[str], desired_pos, desired_vel, actual_pos, actual_vel,
               tolerances: Tolerances, **kwargs) -> Verdict:
    """Path tolerance while the trajectory runs (joint_trajectory_controller.cpp ``update``).

    The JTC checks ``state_tolerance`` before the last point (and on the first
    sample) and aborts the goal with PATH_TOLERANCE_VIOLATED on a violation.
    Returns :data:`RUNNING_VERDICT` or (ABORTED, PATH_TOLERANCE_VIOLATED,
    message naming the joint). ``kwargs`` go to :func:`check_state`.
    """
    message = check_state(joints, desired_pos, desired_vel, actual_pos, actual_vel,
                          {j: tolerances.path_for(j) for j in joints}, **kwargs)
    if message is None:
        return RUNNING_VERDICT
    return Verdict(GoalOutcome.ABORTED, PATH_TOLERANCE_VIOLATED, f'path tolerance violated: {message}')


def check_goal(joints: Sequence[str], target_pos, actual_pos, actual_vel, tolerances: Tolerances,
               time_since_end: float, *, target_vel=None,
               wraparound: Collection[str] = ()) -> Verdict:
    """Goal state after the last point (joint_trajectory_controller.cpp ``update``).

    Args:
        joints: J joint names; arrays (J,) in this order.
        target_pos: last point's positions, rad.
        actual_pos, actual_vel: measured state, rad and rad/s; ``actual_vel``
            None skips the velocity check (the Jazzy JTC computes velocity errors
            only with a velocity state interface and a velocity or effort command
            interface, so a position-commanded arm is never checked for
            "stopped").
        tolerances: goal tolerances (``Tolerances.goal_for``: stopped_velocity
            for unlisted joints) and ``goal_time``.
        time_since_end: now - (start time + last ``time_from_start``), s.
        target_vel: desired velocity after the end, rad/s (default 0).
    Returns:
        A :class:`Verdict` (outcome, error_code, error_string):

        * time_since_end < 0: :data:`RUNNING_VERDICT` - not at the end yet.
        * every joint within its goal tolerance (position and velocity error,
          tolerance 0 = unchecked): (SUCCEEDED, SUCCESSFUL, message).
        * else, if ``goal_time`` > 0 and time_since_end > goal_time:
          (ABORTED, GOAL_TOLERANCE_VIOLATED, message naming the joint).
        * else (RUNNING, SUCCESSFUL, message naming the joint not yet within
          tolerance). With ``goal_time`` 0 this lasts indefinitely, as in the
          JTC (``if (goal_time_tolerance != 0.0)``): the goal stays active until
          the joints settle, it is cancelled or a new goal preempts it.
    """
    if time_since_end < 0:
        return RUNNING_VERDICT
    if target_vel is None:
        target_vel = np.zeros(len(joints))
    message = check_state(joints, target_pos, target_vel if actual_vel is not None else None, actual_pos,
                          actual_vel, {j: tolerances.goal_for(j) for j in joints}, wraparound=wraparound)
    if message is None:
        return Verdict(GoalOutcome.SUCCEEDED, SUCCESSFUL, 'goal reached: all joints within their goal tolerances')
    if tolerances.goal_time > 0 and time_since_end > tolerances.goal_time:
        return Verdict(GoalOutcome.ABORTED, GOAL_TOLERANCE_VIOLATED, (
            f'goal tolerance violated {time_since_end:.3f} s after the trajectory end (goal_time tolerance '
            f'{tolerances.goal_time:.3f} s): {message}'))
    return Verdict(GoalOutcome.RUNNING, SUCCESSFUL, message)
