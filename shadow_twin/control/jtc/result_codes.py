"""Result codes of ``control_msgs/action/FollowJointTrajectory``, goal outcomes and verdicts, and
:class:`GoalRejected`, the error of a goal the joint trajectory controller would not execute.

Part of :mod:`shadow_twin.control.jtc` (ROS-free; see its overview).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from shadow_twin.common.errors import ShadowTwinError


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
