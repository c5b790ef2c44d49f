"""An rclpy action client safe to call from any thread (for nodes that forward goals)."""

from __future__ import annotations

import threading

from rclpy.action import ActionClient

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

    def send_goal_async(self, *args, **kwargs):
        with self._request_lock:
            return super().send_goal_async(*args, **kwargs)

    def _cancel_goal_async(self, goal_handle):
        with self._request_lock:
            return super()._cancel_goal_async(goal_handle)

    def _get_result_async(self, goal_handle):
        with self._request_lock:
            return super()._get_result_async(goal_handle)

    async def execute(self, taken_data):
        with self._request_lock:
            await super().execute(taken_data)
