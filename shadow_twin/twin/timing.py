"""When a twin goal's parts start and how old their data may be, ROS-free: :func:`goal_stamp` (a goal
whose joints and base may both carry a stamp), :func:`start_stamp` (the one stamped start every
controller and base follower gets), :func:`acceptance_deadline` (when they must all have accepted it),
:func:`oldest_state` (the liveness rule: how old a controller's newest data for its joints is).

Times in s."""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from shadow_twin.control import jtc

#: Largest difference between the stamps of a goal's joint and base trajectories, s.
STAMP_MATCH = 1e-6


def goal_stamp(joint_stamp_s: float | None, base_stamp_s: float | None) -> float:
    """The ``header.stamp`` (s; 0 = start when accepted) of a goal whose ``trajectory`` and
    ``multi_dof_trajectory`` may each be given (None: that part is absent). Both parts start
    together, so two non-zero stamps must agree (within :data:`STAMP_MATCH`); a zero stamp
    takes the other's. Raises GoalRejected(INVALID_GOAL) for two different stamps."""
    stamps = [s for s in (joint_stamp_s, base_stamp_s) if s is not None and s != 0.0]
    if len(stamps) == 2 and abs(stamps[0] - stamps[1]) > STAMP_MATCH:
        raise jtc.GoalRejected(jtc.INVALID_GOAL, f'trajectory and multi_dof_trajectory are stamped to start at '
                                                 f'different times ({stamps[0]:.9f} s and {stamps[1]:.9f} s); '
                                                 f'the twin starts all parts at one time')
    return stamps[0] if stamps else 0.0


def start_stamp(goal_stamp_s: float, now_s: float, lead_s: float) -> float:
    """The common start time, s: ``now + lead`` for an unstamped goal (stamp 0),
    else the goal's own stamp (a future one delays the start; a past one, already
    validated to end in the future, is joined mid-way as the JTC does)."""
    if goal_stamp_s == 0.0:
        return now_s + lead_s
    return goal_stamp_s


def acceptance_deadline(start_s: float, now_s: float, lead_s: float, margin_s: float, longest_s: float) -> float:
    """The time (s, the clock of ``now_s``) by which every controller must have accepted its
    part of a goal starting at ``start_s``: ``margin_s`` before the start, so that cancels
    still reach the controllers before anything moves; for a start less than ``lead_s``
    ahead (a stamped goal sent late) ``now + lead - margin``; at most ``longest_s`` from now."""
    return min(max(start_s, now_s + lead_s) - margin_s, now_s + longest_s)


def oldest_state(received: Mapping[str, float], joints: Sequence[str], now: float) -> tuple[str, float]:
    """The joint of ``joints`` whose last state arrived longest ago, and how long ago (s).

    Args:
        received: {joint: monotonic time its last state arrived, s}.
        joints: the joints a controller drives in a goal (non-empty).
        now: monotonic time, s.
    Returns:
        (joint, age s); age is ``inf`` for a joint never received.
    Raises:
        ValueError: ``joints`` is empty.
    """
    if not joints:
        raise ValueError('oldest_state needs at least one joint')
    ages = [(now - received[j]) if j in received else math.inf for j in joints]
    k = int(np.argmax(ages))
    return joints[k], float(ages[k])
