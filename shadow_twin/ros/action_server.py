"""Shared FollowJointTrajectory action-server pieces (goal screening)."""

from __future__ import annotations

import threading
from typing import Callable

from rclpy.action import GoalResponse

from shadow_twin.control import jtc


def screen_goal(validate: Callable, goal, logger, lock: threading.Lock, pending: dict) -> GoalResponse:
    """Goal callback shared by the action servers: ``validate(goal)`` either returns
    what the accepted goal needs (kept in ``pending`` under ``id(goal)``) or raises
    ``jtc.GoalRejected``; the goal is then rejected, the reason logged, nothing moves.
    Any other exception rejects the goal too, so a bug cannot take the server down."""
    try:
        result = validate(goal)
    except jtc.GoalRejected as exc:
        logger.warning(f'rejected goal ({exc.error_name}): {exc}')
        return GoalResponse.REJECT
    except Exception as exc:
        logger.error(f'rejected goal: validation failed unexpectedly: {exc!r}')
        return GoalResponse.REJECT
    with lock:
        pending[id(goal)] = result
    return GoalResponse.ACCEPT
