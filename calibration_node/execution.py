"""Execute one trajectory through a FollowJointTrajectory action, with a known start time.

Used from a worker thread while the node's executor spins elsewhere: every wait
polls a future. The goal is stamped ``now + start_lead`` (the JTC starts a
stamped goal at its stamp), so the recording knows exactly when the trajectory
started.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory
from rclpy.node import Node

from shadow_twin.calibration.recording import TRAJECTORY, trajectory_cdr
from shadow_twin.common.errors import TrajectoryError
from shadow_twin.common.stamps import from_nanoseconds, to_nanoseconds, to_seconds

#: Seconds to wait, before a recording, for every recorded topic to deliver (a process that
#: has just started may take seconds to be matched by DDS discovery).
FLOWING_TIMEOUT = 10.0
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.ros.action_client import LockedActionClient
from shadow_twin.ros.conversions import time_msg_ns, trajectory_msg
from shadow_twin.ros.spinning import result_within

#: Topic of the commanded trajectory in recorded bags (a JointTrajectory stamped with its start).
TRAJECTORY_TOPIC = '/calibration_node/commanded_trajectory'
STATUS_NAMES = {GoalStatus.STATUS_SUCCEEDED: 'succeeded', GoalStatus.STATUS_ABORTED: 'aborted',
                GoalStatus.STATUS_CANCELED: 'canceled'}


class TrajectoryExecutor:
    """Send trajectories to ``action_name`` and wait for them.

    Args:
        node: the node owning the action client.
        action_name: FollowJointTrajectory action (the twin's, to move robot and sim together).
        callback_group: callback group of the client.
        server_timeout: wait for the action server, s.
    """

    def __init__(self, node: Node, action_name: str, callback_group=None, server_timeout: float = 10.0) -> None:
        self.node = node
        self.action_name = action_name
        self.server_timeout = server_timeout
        self.client = LockedActionClient(node, FollowJointTrajectory, action_name, callback_group=callback_group)

    @staticmethod
    def _wait(future, timeout: float, what: str):
        answer = result_within(future, timeout)
        if answer is None:
            raise TrajectoryError(f'no answer from {what} within {timeout:g} s')
        return answer

    def execute(self, trajectory, start_lead: float, tail: float,
                on_sent: Callable[[int], None] | None = None) -> int:
        """Run ``trajectory`` (``trajectory_msgs/JointTrajectory``), then wait ``tail`` s more.

        Args:
            trajectory: the message; its header.stamp is set to now + ``start_lead``.
            start_lead: s between sending and the start.
            tail: s to wait after the trajectory's end (the recording's settling part).
            on_sent: called with the start stamp (ns) before the goal is sent.
        Returns:
            The start stamp, ns (node clock).
        Raises:
            TrajectoryError: no action server, goal rejected, or not succeeded (names the reason).
        """
        if not self.client.wait_for_server(timeout_sec=self.server_timeout):
            raise TrajectoryError(f'action server {self.action_name} is not available')
        start_ns = self.node.get_clock().now().nanoseconds + to_nanoseconds(start_lead)
        trajectory.header.stamp = time_msg_ns(start_ns)
        duration = to_seconds(trajectory.points[-1].time_from_start)
        if on_sent is not None:
            on_sent(start_ns)
        goal = FollowJointTrajectory.Goal(trajectory=trajectory)
        handle = self._wait(self.client.send_goal_async(goal), 10.0, self.action_name)
        if not handle.accepted:
            raise TrajectoryError(f'{self.action_name} rejected the trajectory (see its log for the reason)')
        answer = self._wait(handle.get_result_async(), start_lead + duration + 60.0, self.action_name)
        if answer.status != GoalStatus.STATUS_SUCCEEDED:
            result = answer.result
            raise TrajectoryError(f'trajectory {STATUS_NAMES.get(answer.status, answer.status)} on '
                                  f'{self.action_name}: error_code {result.error_code} {result.error_string}')
        end_ns = start_ns + to_nanoseconds(duration + tail)
        while self.node.get_clock().now().nanoseconds < end_ns:
            time.sleep(0.01)
        return start_ns

    def record(self, recorder, trajectory: JointTrajectory, bag: Path, start_lead: float,
               tail: float) -> tuple[int, dict[str, int]]:
        """:meth:`execute` ``trajectory`` while ``recorder`` (a BagRecorder) records, with the
        commanded trajectory stamped with its start on ``TRAJECTORY_TOPIC``; write the bag ``bag``.

        Returns (start stamp ns, messages recorded per topic). Raises TrajectoryError as
        :meth:`execute` or when a recorded topic does not flow within ``FLOWING_TIMEOUT`` s
        (nothing is sent then), RecordingError if ``bag`` exists.
        """
        silent = recorder.wait_flowing(recorder.subscribed, FLOWING_TIMEOUT)
        if silent:
            raise TrajectoryError(f'no messages on {silent} for {FLOWING_TIMEOUT:g} s: not recording '
                                  f'{trajectory.name} (are the robot and the bridge running?)')
        recorder.start()
        start_ns = self.execute(trajectory_msg(trajectory), start_lead, tail,
                                on_sent=lambda ns: recorder.add(TRAJECTORY_TOPIC, TRAJECTORY,
                                                                trajectory_cdr(trajectory, from_nanoseconds(ns))))
        counts = recorder.counts()
        recorder.stop(bag)
        return start_ns, counts
