"""Tolerances of the joint trajectory controller (tolerances.hpp): the defaults from the ``constraints``
parameters and a goal's own path, goal and goal-time tolerances over them.

Part of :mod:`shadow_twin.control.jtc` (ROS-free; see its overview).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping, Sequence

from shadow_twin.common.errors import ConfigError, ShadowTwinError
from shadow_twin.common.stamps import to_seconds
from shadow_twin.control.jtc.goal_validation import FLOAT32_EPS, format_value
from shadow_twin.control.jtc.result_codes import INVALID_GOAL, GoalRejected

#: control_msgs/JointTolerance special value: remove ("erase") the default check.
ERASE_TOLERANCE = -1.0
#: Default ``constraints.stopped_velocity_tolerance`` of the JTC, rad/s.
DEFAULT_STOPPED_VELOCITY = 0.01


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
    if abs(value - ERASE_TOLERANCE) < FLOAT32_EPS:
        return 0.0
    if value < 0:
        raise GoalRejected(INVALID_GOAL, f'{what} is {format_value(value)}; use > 0 to set it, 0 for the default or -1 '
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
