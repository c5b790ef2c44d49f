"""``/twin/preview``: a goal predicted whole, nothing moves (``docs/preview.md``).

:class:`PreviewServer` screens a goal as the twin does (a malformed goal gets the same rejection,
``shadow_twin/ros/twin/screening.py``), queues it on the twin's low-priority preview worker
(:meth:`~shadow_twin.ros.twin.preview.TwinPreview.request`: a full queue rejects it at once), and
ends it SUCCEEDED (``predicted to succeed after 2.004 s``) or ABORTED with the first predicted
failure's code and ``predicted to fail: ...``. A goal of any length is predicted, window after
window; a canceled request stops computing after the window under way. Its feedback carries the
goal's target (desired), the predicted end state (actual) and their difference (error). No executor
thread waits for a prediction: :meth:`PreviewServer.step` looks at the request at the server's period.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from rclpy.node import Node

from shadow_twin.control import jtc
from shadow_twin.ros.action_server import AcceptedGoal, FollowJointTrajectoryServer, feedback_message
from shadow_twin.ros.conversions import time_msg_ns
from shadow_twin.ros.twin.goal import TwinGoalState
from shadow_twin.ros.twin.preview import TwinPreview, describe_prediction
from shadow_twin.ros.twin.screening import GoalScreening
from shadow_twin.ros.twin.parameters import TwinSettings

#: s between two looks at a queued request.
POLL_PERIOD = 0.02


class PreviewServer(FollowJointTrajectoryServer):
    """``/twin/preview`` (module doc).

    Args:
        node: the twin's node.
        action_name: e.g. ``/twin/preview``.
        screening: the twin's :class:`~shadow_twin.ros.twin.screening.GoalScreening` (its checks of the
            goal itself, without the liveness of the controllers).
        preview: the :class:`TwinPreview`.
        settings: the twin's current settings.
    """

    preempts_on_accept = False

    def __init__(self, node: Node, action_name: str, screening: GoalScreening, preview: TwinPreview,
                 settings: Callable[[], TwinSettings]) -> None:
        self.screening, self.preview, self._settings = screening, preview, settings
        super().__init__(node, action_name, handover_timeout=0.0)

    def validate(self, request) -> TwinGoalState:
        """Screen and queue the request (its place is taken here, so a full queue rejects the goal)."""
        try:
            settings = self._settings()
            plan = self.screening.screen_goal(request, settings, preview=True)
            plan.preview_request = self.preview.request(plan, settings)
        except jtc.GoalRejected as exc:
            self.preview.publish_rejection('preview', exc)
            raise
        return plan

    def start(self, goal: AcceptedGoal) -> str | None:
        return None

    def step(self, goal: AcceptedGoal) -> jtc.Verdict | None:
        """None while the request is predicted; then its feedback and its verdict."""
        plan: TwinGoalState = goal.plan
        job = plan.preview_request
        if not job.future.done():
            return None
        try:
            prediction = job.future.result()
        except Exception as exc:             # the prediction raised: the client is told, nothing else
            return jtc.Verdict.aborted(f'the goal preview failed: {exc}')
        if prediction is None:
            return jtc.Verdict.aborted('preview canceled')
        if plan.trajectory is not None and prediction.final_errors:
            names = list(plan.trajectory.joint_names)
            target = plan.trajectory.positions[-1]
            error = np.array([prediction.final_errors[j] for j in names])
            zeros = np.zeros(len(names))
            fb = feedback_message(time_msg_ns(self.node.get_clock().now().nanoseconds), names,
                                  prediction.duration or prediction.simulated, (target, zeros, zeros),
                                  (target - error, zeros))
            goal.handle.publish_feedback(fb)
        self.log.info(f'preview: {describe_prediction(prediction)}')
        return prediction.verdict()

    def stop(self, goal: AcceptedGoal) -> None:
        """An aborted request stops computing after the window under way."""
        goal.plan.preview_request.cancel.set()

    def cancel(self, goal: AcceptedGoal) -> str:
        goal.plan.preview_request.cancel.set()
        return 'preview canceled'

    def period(self) -> float:
        return POLL_PERIOD
