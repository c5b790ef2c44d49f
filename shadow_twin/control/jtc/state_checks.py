"""Checking states against tolerances as the joint trajectory controller's ``update`` does: one state
(:func:`check_state`), the path while a trajectory runs (:func:`check_path`) and the goal after its
end (:func:`check_goal`).

Part of :mod:`shadow_twin.control.jtc` (ROS-free; see its overview).
"""

from __future__ import annotations

import math
from typing import Collection, Mapping, Sequence

import numpy as np

from shadow_twin.control.jtc.result_codes import (GOAL_TOLERANCE_VIOLATED, PATH_TOLERANCE_VIOLATED, RUNNING_VERDICT,
                                                  SUCCESSFUL, GoalOutcome, Verdict)
from shadow_twin.control.jtc.tolerances import StateTolerance, Tolerances


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
