"""Execute one FollowJointTrajectory goal through an action, with a known start time.

Used from a worker thread while the node's executor spins elsewhere: every wait
polls a future. The goal is stamped ``now + lead`` (the JTC starts a
stamped goal at its stamp; the twin starts all parts of a goal, arm, hand and
base, at that stamp), so the recording knows exactly when the trajectory
started. The lead is a number of seconds or a
:class:`~calibration_node.twin_lead.StartLead` (what the twin needs for the goal's points).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Sequence

from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory
from rclpy.node import Node

from calibration_node.twin_lead import StartLead, goal_points
from shadow_twin.calibration.recordings.recording import TRAJECTORY, trajectory_cdr
from shadow_twin.common.errors import GoalRejectedError, TrajectoryError
from shadow_twin.common.stamps import from_nanoseconds, to_nanoseconds, to_seconds
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.ros.action_client import LockedActionClient
from shadow_twin.ros.conversions import time_msg_ns, trajectory_msg
from shadow_twin.ros.spinning import result_within

#: Seconds to wait, before a recording, for every recorded topic to deliver (a process that
#: has just started may take seconds to be matched by DDS discovery).
FLOWING_TIMEOUT = 10.0
#: Seconds a recording waits, after its window, for the messages stamped within it that are still on
#: their way (each flowing topic delivers one stamped after the window; one that does not is not waited
#: for longer).
STAMPED_TAIL_TIMEOUT = 1.0
#: Topic of the commanded trajectory in recorded bags (a JointTrajectory stamped with its start).
TRAJECTORY_TOPIC = '/calibration_node/commanded_trajectory'
STATUS_NAMES = {GoalStatus.STATUS_SUCCEEDED: 'succeeded', GoalStatus.STATUS_ABORTED: 'aborted',
                GoalStatus.STATUS_CANCELED: 'canceled'}


def goal_duration(goal: FollowJointTrajectory.Goal) -> float:
    """The longest ``time_from_start`` of the goal's joint and base (multi-DOF) parts, s."""
    ends = [to_seconds(part.points[-1].time_from_start)
            for part in (goal.trajectory, goal.multi_dof_trajectory) if part.points]
    if not ends:
        raise TrajectoryError('the goal has no points (neither trajectory nor multi_dof_trajectory)')
    return max(ends)


class TrajectoryExecutor:
    """Send goals to ``action_name`` and wait for them.

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

    def send(self, goal: FollowJointTrajectory.Goal, start_lead: float | StartLead, tail: float,
             on_sent: Callable[[int], None] | None = None) -> int:
        """Run a prepared ``goal``, then wait ``tail`` s more.

        Args:
            goal: the goal; the header stamps of its ``trajectory`` and (when it has points) its
                ``multi_dof_trajectory`` are set to now + the lead.
            start_lead: s between sending and the start, or a StartLead giving them for the goal's points
                (the lead used is logged).
            tail: s to wait after the goal's end (its longest part; the recording's settling part).
            on_sent: called with the start stamp (ns) once the goal is sent (so that what it does, e.g.
                serialising the commanded trajectory for a bag, does not eat into the lead).
        Returns:
            The start stamp, ns (node clock).
        Raises:
            TrajectoryError: no action server, or not succeeded (one line naming the reason);
            GoalRejectedError (a TrajectoryError) when the server rejected the goal.
        """
        duration = goal_duration(goal)
        if not self.client.wait_for_server(timeout_sec=self.server_timeout):
            raise TrajectoryError(f'action server {self.action_name} is not available')
        rule = start_lead if isinstance(start_lead, StartLead) else None
        if rule is not None:
            start_lead = rule.for_goal(goal)
        start_ns = self.node.get_clock().now().nanoseconds + to_nanoseconds(start_lead)
        if rule is not None:
            self.node.get_logger().info(f'goal of {goal_points(goal)} point(s) to {self.action_name}: start stamped '
                                        f'{start_lead:.3f} s ahead ({from_nanoseconds(start_ns):.6f} s) = '
                                        f'{rule.describe()}')
        goal.trajectory.header.stamp = time_msg_ns(start_ns)
        if goal.multi_dof_trajectory.points:
            goal.multi_dof_trajectory.header.stamp = time_msg_ns(start_ns)
        sent = self.client.send_goal_async(goal)
        if on_sent is not None:
            on_sent(start_ns)
        handle = self._wait(sent, 10.0, self.action_name)
        if not handle.accepted:
            raise GoalRejectedError(f'{self.action_name} rejected the goal (see its log for the reason)')
        answer = self._wait(handle.get_result_async(), start_lead + duration + 60.0, self.action_name)
        if answer.status != GoalStatus.STATUS_SUCCEEDED:
            result = answer.result
            reason = ' '.join(str(result.error_string).split())     # one line
            raise TrajectoryError(f'goal {STATUS_NAMES.get(answer.status, answer.status)} on '
                                  f'{self.action_name}: error_code {result.error_code} {reason}')
        end_ns = start_ns + to_nanoseconds(duration + tail)
        while self.node.get_clock().now().nanoseconds < end_ns:
            time.sleep(0.01)
        return start_ns

    def execute(self, trajectory, start_lead: float | StartLead, tail: float,
                on_sent: Callable[[int], None] | None = None) -> int:
        """Run ``trajectory`` (``trajectory_msgs/JointTrajectory``) alone: :meth:`send` of a goal
        holding it. Returns the start stamp, ns; raises TrajectoryError as :meth:`send`."""
        return self.send(FollowJointTrajectory.Goal(trajectory=trajectory), start_lead, tail, on_sent)

    def record_goal(self, recorder, goal: FollowJointTrajectory.Goal, commanded: JointTrajectory, bag: Path,
                    start_lead: float | StartLead, tail: float, wait_for: Sequence[str] | None = None,
                    topics: Sequence[str] | None = None) -> tuple[int, dict[str, int]]:
        """:meth:`send` ``goal`` while ``recorder`` (a BagRecorder) records, with ``commanded`` (the
        goal's joint trajectory) stamped with its start on ``TRAJECTORY_TOPIC``; write the bag ``bag``.

        Args:
            wait_for: topics that must be flowing before anything is sent (default: every topic
                the recorder subscribes to); topics that carry messages only while something
                moves (velocity commands) do not belong here.
            topics: the topics recorded (default: every subscribed one).
        Returns:
            (start stamp ns, messages recorded per topic).
        Raises:
            TrajectoryError: as :meth:`send`, or a ``wait_for`` topic that does not flow within
            ``FLOWING_TIMEOUT`` s (nothing is sent then); RecordingError if ``bag`` exists.
            Whatever fails, the recorder stops buffering (nothing is written).
        """
        wait_for = recorder.subscribed if wait_for is None else list(wait_for)
        silent = recorder.wait_flowing(wait_for, FLOWING_TIMEOUT)
        if silent:
            raise TrajectoryError(f'no messages on {silent} for {FLOWING_TIMEOUT:g} s: not recording '
                                  f'{commanded.name} (are the robot and the bridge running?)')
        recorder.start(topics)
        try:
            start_ns = self.send(goal, start_lead, tail,
                                 on_sent=lambda ns: recorder.add(TRAJECTORY_TOPIC, TRAJECTORY,
                                                                 trajectory_cdr(commanded, from_nanoseconds(ns))))
            # the window ends on the messages' stamps, not on when this process took them: the
            # messages stamped before now may still be on their way on a loaded PC
            recorder.wait_stamped(wait_for, self.node.get_clock().now().nanoseconds, STAMPED_TAIL_TIMEOUT)
        except BaseException:
            recorder.discard()
            raise
        counts = recorder.counts()
        recorder.stop(bag)
        return start_ns, counts

    def record(self, recorder, trajectory: JointTrajectory, bag: Path, start_lead: float | StartLead,
               tail: float, topics: Sequence[str] | None = None) -> tuple[int, dict[str, int]]:
        """:meth:`record_goal` of a goal holding ``trajectory`` alone, recording ``topics`` (default:
        every subscribed one) once they all flow. Returns (start stamp ns, messages recorded per
        topic); raises as :meth:`record_goal`."""
        goal = FollowJointTrajectory.Goal(trajectory=trajectory_msg(trajectory))
        return self.record_goal(recorder, goal, trajectory, bag, start_lead, tail, wait_for=topics, topics=topics)
