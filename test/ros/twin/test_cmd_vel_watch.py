"""The twin's own velocity commands are recognised by their writer's sequence number and send
time (shadow_twin/ros/twin/base/cmd_vel_watch.py), not by content: a message of another writer with the
same content, the same sequence number or a time inside a publish window is not the twin's."""

from __future__ import annotations

import time

import pytest

pytest.importorskip('rclpy')

from shadow_twin.ros.twin.base.cmd_vel_watch import ForeignMessage, OwnWrites  # noqa: E402

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)


class StampingPublisher:
    """Stands in for a DDS writer: stamps each sample inside ``publish`` and numbers it."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    def publish(self, msg) -> None:
        self.sent.append({'publication_sequence_number': len(self.sent) + 1, 'source_timestamp': time.time_ns()})


def test_own_writes_are_recognised_and_another_writers_are_not():
    own, writer = OwnWrites(kept=100), StampingPublisher()
    for _ in range(150):
        own.publish(writer, object())
    assert all(own.is_own(info) for info in writer.sent[-100:])
    assert not own.is_own(writer.sent[0])               # forgotten: older than the kept writes
    newest = writer.sent[-1]
    # another writer: its own numbering (same number, other time), or a time inside a window
    assert not own.is_own({**newest, 'source_timestamp': newest['source_timestamp'] + 10**9})
    assert not own.is_own({**newest, 'publication_sequence_number': 3})
    assert not own.is_own({**newest, 'source_timestamp': 0})
    # an RMW without sequence numbers: the time alone
    assert own.is_own({**newest, 'publication_sequence_number': None})
    assert not own.is_own({'publication_sequence_number': None, 'source_timestamp': time.time_ns() + 10**9})


def test_a_foreign_message_names_its_sender_or_the_candidates():
    def message(senders):
        return ForeignMessage('real', '/cmd_vel', 'geometry_msgs/msg/Twist', 1.0, 1.01, senders).describe()
    assert message(('/teleop',)) == 'a geometry_msgs/msg/Twist on /cmd_vel from /teleop'
    assert message(('/a', '/b')).endswith('from one of /a, /b')
    assert 'no longer in the ROS graph' in message(())
