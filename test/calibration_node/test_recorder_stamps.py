"""The calibration node's recorder ends a recording on the messages' stamps: it reads
``header.stamp`` from the serialized message and waits for a message stamped after the window."""

from __future__ import annotations

import pytest

pytest.importorskip('rclpy')

from rclpy.serialization import serialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64  # noqa: E402

from calibration_node.recorder import BagRecorder, header_stamp_ns  # noqa: E402

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)


def stamped(ns: int) -> JointState:
    msg = JointState(name=['j'], position=[0.1])
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(ns, 1_000_000_000)
    return msg


def test_the_stamp_is_read_from_little_endian_cdr_only():
    data = serialize_message(stamped(1_795_734_052_629_958_600))
    assert header_stamp_ns(data) == 1_795_734_052_629_958_600
    assert header_stamp_ns(b'\x00\x00' + data[2:]) is None          # big-endian CDR: not read
    assert header_stamp_ns(data[:8]) is None                         # too short


def test_wait_stamped_returns_once_a_message_stamped_after_the_window_arrived(ros):
    helpers, client = ros
    recorder = BagRecorder(client.node, {'/stamps/js': JointState, '/stamps/f': Float64})
    publisher = client.node.create_publisher(JointState, '/stamps/js', 10)
    try:
        now = client.node.get_clock().now().nanoseconds
        assert helpers.wait_until(lambda: publisher.get_subscription_count() > 0, 10.0)
        publisher.publish(stamped(now - 10**9))
        # only an older stamp has come: the topic is behind (Float64 has no header: not waited for)
        assert recorder.wait_stamped(['/stamps/js', '/stamps/f'], now, 0.3) == ['/stamps/js']
        publisher.publish(stamped(now + 10**6))
        assert recorder.wait_stamped(['/stamps/js', '/stamps/f'], now, 10.0) == []
    finally:
        client.node.destroy_publisher(publisher)
        recorder.destroy()
