"""An rclpy action client safe to call from any thread (for nodes that forward goals)."""

from __future__ import annotations

import threading

from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from rclpy.task import Future
from unique_identifier_msgs.msg import UUID

from shadow_twin.ros.action_qos import action_services_qos


class LockedActionClient(ActionClient):
    """rclpy's ``ActionClient`` with its request/response race closed (ros2/rclpy#1123, the
    fix proposed upstream in ros2/rclpy#1308).

    rclpy records a request's sequence number only after sending it; an executor thread
    that takes a fast response in between drops it ("Ignoring unexpected goal response")
    and the future never completes. Here sending a goal, cancel or result request and
    handling responses share one lock. Feedback callbacks must be plain functions (the
    lock is held while they run). Its goal, result and cancel services keep 100 responses
    unless told otherwise (``shadow_twin.ros.action_qos``).
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **{**action_services_qos(), **kwargs})
        self._request_lock = threading.RLock()

    def send_goal_async(self, goal, feedback_callback=None, goal_uuid=None):
        """rclpy's ``send_goal_async`` under the lock. ``goal_uuid`` (``unique_identifier_msgs/UUID``;
        default a new one, :meth:`new_goal_id`) lets the caller cancel the goal before it has taken the
        goal response (:meth:`cancel_by_id`)."""
        with self._request_lock:
            return super().send_goal_async(goal, feedback_callback=feedback_callback, goal_uuid=goal_uuid)

    def new_goal_id(self) -> UUID:
        """A new random goal id (``unique_identifier_msgs/UUID``) for :meth:`send_goal_async`."""
        return self._generate_random_uuid()

    def cancel_by_id(self, goal_id: UUID) -> Future:
        """Request the cancel of the goal sent with ``goal_id``, whether or not this client has taken its
        goal response (a response still queued behind a busy executor): a server that has accepted the goal
        cancels it; one that has not heard of it yet answers "unknown goal" (then cancel its acceptance when
        it comes). Returns the future of the cancel response."""
        response = self._action_type.Impl.SendGoalService.Response(accepted=True)
        return self._cancel_goal_async(ClientGoalHandle(self, goal_id, response))

    def _cancel_goal_async(self, goal_handle):
        with self._request_lock:
            return super()._cancel_goal_async(goal_handle)

    def _get_result_async(self, goal_handle):
        with self._request_lock:
            return super()._get_result_async(goal_handle)

    async def execute(self, taken_data):
        with self._request_lock:
            await super().execute(taken_data)
