"""Closed-loop following of a base trajectory: body twist commands from odometry (ROS-free).

One follower drives the real MiR (its twist goes out as ``geometry_msgs/TwistStamped``,
the pose comes from the MiR's ``odom``) and the simulated base (twist -> wheel rates by
:func:`~shadow_twin.control.diff_drive.wheel_rates`, the pose from the sim's odometry).
It has no threads and no clock: the caller ticks :meth:`BaseTrajectoryFollower.update`.

Each tick runs the tracking law of :mod:`.tracking` (Kanayama et al. 1990; with a drive's dead
time, from the pose :class:`~shadow_twin.control.base.tracking.PosePredictor` predicts for when the
command acts: a Smith predictor). The command is then limited, keeping its curvature, to the
trajectory's own peak speed and yaw rate plus a margin
(:func:`~shadow_twin.control.base.goal_rules.profile_caps`: no sprint to catch up) and to the
limits (:func:`~shadow_twin.control.diff_drive.saturate_twist`).

Tolerances follow the joint trajectory controller (``shadow_twin.control.jtc``): a path
tolerance while the trajectory runs (PATH_TOLERANCE_VIOLATED), a goal tolerance after
its end, waited for up to ``goal_time`` (GOAL_TOLERANCE_VIOLATED), 0 = not checked;
verdicts are :class:`~shadow_twin.control.jtc.Verdict`. After any end (succeeded,
aborted, cancelled) the follower commands zero velocity. Units: m, rad, m/s, rad/s, s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Mapping, NamedTuple, Sequence

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.stamps import to_seconds
from shadow_twin.control.base.goal_rules import limit_to_profile, profile_caps
from shadow_twin.control.base.tracking import (PosePredictor, TrackingError, TrackingGains, check_non_negative,
                                               tracking_command, tracking_error)
from shadow_twin.control.base.trajectory import DEFAULT_BASE_JOINT, BaseLimits, BaseSample, BaseTrajectory
from shadow_twin.control.diff_drive import ZERO_TWIST, BodyTwist, DiffDriveGeometry, saturate_twist
from shadow_twin.control.jtc import (GOAL_TOLERANCE_VIOLATED, INVALID_GOAL, PATH_TOLERANCE_VIOLATED, RUNNING_VERDICT,
                                     SUCCESSFUL, GoalOutcome, GoalRejected, Verdict, resolve_tolerance)

#: ``control_msgs/JointComponentTolerance`` components the planar base uses.
COMPONENT_TRANSLATION = 4
COMPONENT_ROTATION = 5
_COMPONENT_NAMES = {1: 'X_AXIS', 2: 'Y_AXIS', 3: 'Z_AXIS', COMPONENT_TRANSLATION: 'TRANSLATION',
                    COMPONENT_ROTATION: 'ROTATION'}


@dataclass
class BaseTolerances:
    """Tracking tolerances of a base goal; 0 = not checked (as the JTC's).

    Attributes:
        path_position: largest position error (Euclidean, m) while the trajectory runs.
        path_yaw: largest |yaw error| (rad) while the trajectory runs.
        goal_position: largest position error (m) to count the goal reached
            (default 0.05 m).
        goal_yaw: largest |yaw error| (rad) to count the goal reached (default 0.05 rad).
        goal_time: s after the trajectory's end within which the goal tolerance must be
            met, else GOAL_TOLERANCE_VIOLATED; 0 = wait indefinitely (the JTC's
            meaning). Default 2 s, not the JTC's 0: a base left with a lateral error at
            rest cannot remove it and would otherwise never end.
        stopped_velocity: largest measured |v| (m/s) and |omega| (rad/s) that count as
            stopped for the goal (the JTC's ``stopped_velocity_tolerance``, 0.01);
            checked only when a measured velocity is given.
    Raises:
        ConfigError: a value that is not a finite number >= 0.
    """

    path_position: float = 0.0
    path_yaw: float = 0.0
    goal_position: float = 0.05
    goal_yaw: float = 0.05
    goal_time: float = 2.0
    stopped_velocity: float = 0.01

    def __post_init__(self) -> None:
        check_non_negative(self, 'base tolerance')


def config_from_mapping(cls, data: Mapping | None, what: str):
    """A config dataclass (:class:`TrackingGains`, :class:`BaseTolerances`,
    :class:`~shadow_twin.control.base.trajectory.BaseLimits`) from a mapping (e.g. a YAML
    section); missing keys keep their defaults. Raises ConfigError naming ``what`` for an
    unknown key or a bad value."""
    data = dict(data or {})
    known = [f.name for f in fields(cls) if f.init]
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(f'{what}: unknown key(s) {unknown}; known: {known}')
    try:
        return cls(**data)
    except ConfigError as exc:
        raise ConfigError(f'{what}: {exc}') from None


class FollowerStep(NamedTuple):
    """What one control tick gives: the ``command`` to send (body twist, m/s and rad/s), the
    ``reference`` it tracked (:class:`~shadow_twin.control.base.trajectory.BaseSample`),
    the tracking ``error`` and the goal's ``verdict``."""

    command: BodyTwist
    reference: BaseSample
    error: TrackingError
    verdict: Verdict


def check_base_path(error: TrackingError, tolerances: BaseTolerances) -> Verdict:
    """Path tolerance while the trajectory runs (as :func:`~shadow_twin.control.jtc.check_path`):
    :data:`~shadow_twin.control.jtc.RUNNING_VERDICT`, or ABORTED with
    PATH_TOLERANCE_VIOLATED naming the error and its tolerance."""
    message = _violation(error, tolerances.path_position, tolerances.path_yaw)
    if message is None:
        return RUNNING_VERDICT
    return Verdict(GoalOutcome.ABORTED, PATH_TOLERANCE_VIOLATED, f'path tolerance violated: {message}')


def check_base_goal(error: TrackingError, velocity: Sequence[float] | None, tolerances: BaseTolerances,
                    time_since_end: float) -> Verdict:
    """Goal state after the trajectory's end (as :func:`~shadow_twin.control.jtc.check_goal`).

    Args:
        error: against the last pose.
        velocity: measured (v m/s, omega rad/s), or None (stopped not checked).
        time_since_end: now - (start + duration), s.
    Returns:
        RUNNING_VERDICT before the end; (SUCCEEDED, SUCCESSFUL) within the goal
        tolerance and stopped; else (ABORTED, GOAL_TOLERANCE_VIOLATED) once
        ``goal_time`` > 0 has passed, or (RUNNING, SUCCESSFUL, what is still off).
    """
    if time_since_end < 0:
        return RUNNING_VERDICT
    message = _violation(error, tolerances.goal_position, tolerances.goal_yaw)
    if message is None and velocity is not None and tolerances.stopped_velocity > 0:
        v, omega = (float(x) for x in velocity)
        if not (abs(v) <= tolerances.stopped_velocity and abs(omega) <= tolerances.stopped_velocity):
            message = (f'base not stopped: v {v:+.4g} m/s, omega {omega:+.4g} rad/s (stopped velocity tolerance '
                       f'{tolerances.stopped_velocity:.4g})')
    if message is None:
        return Verdict(GoalOutcome.SUCCEEDED, SUCCESSFUL, (
            f'goal reached: base within its goal tolerances (position error {error.position:.4g} m, yaw error '
            f'{error.yaw:+.4g} rad)'))
    if tolerances.goal_time > 0 and time_since_end > tolerances.goal_time:
        return Verdict(GoalOutcome.ABORTED, GOAL_TOLERANCE_VIOLATED, (
            f'goal tolerance violated {time_since_end:.3f} s after the trajectory end (goal_time tolerance '
            f'{tolerances.goal_time:.3f} s): {message}'))
    return Verdict(GoalOutcome.RUNNING, SUCCESSFUL, message)


def _violation(error: TrackingError, position_tolerance: float, yaw_tolerance: float) -> str | None:
    """One line naming the first error above its tolerance (0 = unchecked; NaN counts as above)."""
    if position_tolerance > 0 and not error.position <= position_tolerance:
        return (f'base position error {error.position:.4g} m (along {error.along:+.4g} m, lateral '
                f'{error.lateral:+.4g} m) exceeds the tolerance {position_tolerance:.4g} m')
    if yaw_tolerance > 0 and not abs(error.yaw) <= yaw_tolerance:
        return f'base yaw error {error.yaw:+.4g} rad exceeds the tolerance {yaw_tolerance:.4g} rad'
    return None


def _get(obj: Any, key: str, default: Any = 0.0) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def base_tolerances_from_goal(defaults: BaseTolerances, goal, joint_name: str = DEFAULT_BASE_JOINT
                              ) -> BaseTolerances:
    """The tolerances of one ``FollowJointTrajectory`` goal for the base, over ``defaults``.

    Reads (duck-typed) ``component_path_tolerance`` and ``component_goal_tolerance``
    (``control_msgs/JointComponentTolerance``: ``joint_name``, ``component``,
    ``position``) and ``goal_time_tolerance`` (s or Duration). ``TRANSLATION`` (4)
    sets the position tolerance (m), ``ROTATION`` (5) the yaw tolerance (rad); each
    value is resolved as the JTC resolves a JointTolerance
    (:func:`~shadow_twin.control.jtc.resolve_tolerance`: > 0 overrides, 0 keeps the
    default, -1 removes the check). Velocity and acceleration components are not used.

    Raises:
        GoalRejected(INVALID_GOAL): an entry for another joint than ``joint_name``, a
        per-axis component (X_AXIS, Y_AXIS, Z_AXIS) or an unknown one, a NaN or a
        negative value other than -1.
    """
    out = {f.name: getattr(defaults, f.name) for f in fields(defaults)}
    out['goal_time'] = resolve_tolerance(defaults.goal_time, to_seconds(_get(goal, 'goal_time_tolerance', 0.0)),
                                         'goal_time_tolerance')
    for kind, prefix in (('component_path_tolerance', 'path'), ('component_goal_tolerance', 'goal')):
        for tolerance in _get(goal, kind, None) or ():
            joint = str(_get(tolerance, 'joint_name', ''))
            component = int(_get(tolerance, 'component', 0))
            if joint != joint_name:
                raise GoalRejected(INVALID_GOAL, f'{kind} names joint {joint!r}; the base follows only '
                                                 f'{joint_name!r}')
            if component not in (COMPONENT_TRANSLATION, COMPONENT_ROTATION):
                name = _COMPONENT_NAMES.get(component, str(component))
                raise GoalRejected(INVALID_GOAL, f'{kind} component {name} of joint {joint!r} is not supported for '
                                                 f'the planar base; use TRANSLATION (4) or ROTATION (5)')
            key = f'{prefix}_position' if component == COMPONENT_TRANSLATION else f'{prefix}_yaw'
            out[key] = resolve_tolerance(getattr(defaults, key), _get(tolerance, 'position'),
                                         f'{kind} {_COMPONENT_NAMES[component]} of joint {joint!r}')
    return BaseTolerances(**out)


class BaseTrajectoryFollower:
    """Follows one :class:`~shadow_twin.control.base.trajectory.BaseTrajectory` on odometry.

    Args:
        trajectory: the goal, poses in the odometry frame.
        start_time: when the trajectory's t = 0 is, s, on the clock of ``update``'s ``t``.
        start_pose: the pose (x m, y m, yaw rad) when the goal arrived; if given and
            point 0 is after the first tick (t = 0, or later under a past stamp) the base moves
            from it at that tick to point 0 (the JTC's :meth:`BaseTrajectory.with_start`), else
            the goal's points are the reference from the start.
        gains, limits, tolerances: defaults :class:`TrackingGains`,
            :class:`~shadow_twin.control.base.trajectory.BaseLimits` (2 m/s, 1.5 rad/s),
            :class:`BaseTolerances`.
        geometry: the drive (default the MiR250's), for the wheel speed limit.
        command_latency: s from a command's sending to its effect on the base (the drive's
            dead time); > 0 makes the follower a Smith predictor (module doc). Default 0.
    Raises:
        ConfigError: a negative command latency.
    """

    def __init__(self, trajectory: BaseTrajectory, start_time: float, *,
                 start_pose: Sequence[float] | None = None, gains: TrackingGains | None = None,
                 limits: BaseLimits | None = None, tolerances: BaseTolerances | None = None,
                 geometry: DiffDriveGeometry | None = None, command_latency: float = 0.0) -> None:
        self._goal, self._start_pose, self._joined = trajectory, start_pose, False
        self.trajectory = trajectory if start_pose is None else trajectory.with_start(start_pose)
        self.caps = profile_caps(self.trajectory)
        self.start_time = to_seconds(start_time)
        self.gains = gains or TrackingGains()
        self.limits = limits or BaseLimits()
        self.tolerances = tolerances or BaseTolerances()
        self.geometry = geometry or DiffDriveGeometry()
        self.predictor = PosePredictor(command_latency)
        self._verdict = RUNNING_VERDICT

    @property
    def verdict(self) -> Verdict:
        """The goal's state: RUNNING (SUCCESSFUL, '' or what is still off) until it ends."""
        return self._verdict

    @property
    def done(self) -> bool:
        """True once the goal succeeded, was aborted or cancelled (commands are then zero)."""
        return self._verdict.outcome is not GoalOutcome.RUNNING

    @property
    def end_time(self) -> float:
        """When the trajectory's last point is due, s (start_time + duration)."""
        return self.start_time + self.trajectory.duration

    def update(self, t: float, pose: Sequence[float], velocity: Sequence[float] | None = None,
               pose_time: float | None = None) -> FollowerStep:
        """One control tick.

        Args:
            t: now, s (the clock of ``start_time``).
            pose: measured (x m, y m, yaw rad) from odometry, in the trajectory's frame.
            velocity: measured body twist (v m/s, omega rad/s), or None; used for the
                "stopped" part of the goal check (and, with a command latency, to predict
                the pose before the first command).
            pose_time: when ``pose`` was measured (its stamp), s; default ``t``. Used only
                with a command latency.
        Returns:
            :class:`FollowerStep`. The error and the verdict are the measured pose's against
            the reference at ``t``. The command is zero before ``start_time`` (with a latency:
            before ``start_time - command_latency``, so that the base starts on time), after the
            goal ended (success, abort, cancel) and for a non-finite pose (which aborts the
            goal, INVALID_GOAL).
        """
        t = to_seconds(t)
        if not self._joined:
            self._join(t)
        reference = self.trajectory.sample(t - self.start_time)
        error = tracking_error(reference.pose, pose)
        if self.done:
            return FollowerStep(ZERO_TWIST, reference, error, self._verdict)
        if not all(math.isfinite(float(p)) for p in pose):
            self._verdict = Verdict.aborted(f'odometry pose is not finite: {tuple(float(p) for p in pose)}')
            return FollowerStep(ZERO_TWIST, reference, error, self._verdict)
        latency = self.predictor.latency
        if t + latency < self.start_time:
            return FollowerStep(ZERO_TWIST, reference, error, self._verdict)
        if t >= self.end_time:
            self._verdict = check_base_goal(error, velocity, self.tolerances, t - self.end_time)
        elif t >= self.start_time:
            self._verdict = check_base_path(error, self.tolerances)
        if self.done:
            return FollowerStep(ZERO_TWIST, reference, error, self._verdict)
        target, tracked = reference, error
        if latency > 0:                      # Smith predictor: where the base is when the command acts
            target = self.trajectory.sample(t + latency - self.start_time)
            tracked = tracking_error(target.pose, self.predictor.predict(
                pose, t if pose_time is None else min(float(pose_time), t), t + latency, velocity))
        command = saturate_twist(limit_to_profile(tracking_command(target, tracked, self.gains), self.caps),
                                 self.geometry, self.limits.max_speed, self.limits.max_yaw_rate)
        if latency > 0:
            self.predictor.sent(t, command)
        return FollowerStep(command, reference, error, self._verdict)

    def _join(self, t: float) -> None:
        """At the first tick (``t`` s), as the JTC at its first update: the start pose at ``t`` (a
        point 0 already due is not prepended: the goal rules put the base there); new caps."""
        self._joined = True
        at = t - self.start_time
        if self._start_pose is not None and at > 0:
            self.trajectory = self._goal.with_start(self._start_pose, at=at)
            self.caps = profile_caps(self.trajectory)

    def cancel(self, message: str = 'goal canceled') -> BodyTwist:
        """End the goal as CANCELED (result SUCCESSFUL, as the JTC answers a cancel); returns
        the zero twist, which every later :meth:`update` returns too. No effect on a goal
        that has ended already (its verdict stays)."""
        if not self.done:
            self._verdict = Verdict(GoalOutcome.CANCELED, SUCCESSFUL, message)
        return ZERO_TWIST

    def abort(self, message: str, code: int = INVALID_GOAL) -> BodyTwist:
        """End the goal as ABORTED with ``code`` (e.g. preempted by a new goal, an emergency
        stop); returns the zero twist, as every later :meth:`update` does. No effect on a
        goal that has ended already."""
        if not self.done:
            self._verdict = Verdict.aborted(message, code)
        return ZERO_TWIST
