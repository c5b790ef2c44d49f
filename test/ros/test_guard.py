"""Callbacks that cannot take a node down (shadow_twin.ros.guard, message_checks, spinning).

The checks are fed the malformed values an adversary would send (NaN, inf, negative stamps,
wrong array lengths, repeated names); a real node in this process gets a callback that raises
and must go on taking messages, with one rate-limited log line per topic.
"""

from __future__ import annotations

import math
import threading

import pytest

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

rclpy = pytest.importorskip('rclpy')

from builtin_interfaces.msg import Time  # noqa: E402
from geometry_msgs.msg import TwistStamped  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64  # noqa: E402

from support.ros import wait_until  # noqa: E402

from shadow_twin.ros import message_checks as checks  # noqa: E402
from shadow_twin.ros.guard import CallbackGuard, guarded_subscription  # noqa: E402
from shadow_twin.ros.spinning import spin_guarded  # noqa: E402


class ListLogger:
    def __init__(self):
        self.lines = []

    def warning(self, text, **_):
        self.lines.append(('warning', text))

    def error(self, text, **_):
        self.lines.append(('error', text))


def joint_state(**fields):
    msg = JointState(name=['a', 'b'], position=[0.1, 0.2], velocity=[0.0, 0.0])
    for key, value in fields.items():
        setattr(msg, key, value)
    return msg


@pytest.mark.parametrize('fields, field', [
    ({'position': [0.1, math.nan]}, 'position[1]'),
    ({'velocity': [math.inf, 0.0]}, 'velocity[0]'),
    ({'position': [0.1]}, 'position has 1 values for 2 names'),
    ({'velocity': [0.0, 0.0, 0.0]}, 'velocity has 3 values for 2 names'),
    ({'effort': [1.0]}, 'effort has 1 values'),
    ({'name': ['a', 'a']}, "name lists ['a'] more than once"),
])
def test_a_malformed_joint_state_is_refused_naming_the_field(fields, field):
    with pytest.raises(checks.BadMessage, match=field.replace('[', r'\[').replace(']', r'\]')):
        checks.check_joint_state(joint_state(**fields))


def test_a_good_joint_state_passes_and_unknown_names_are_not_the_checks_business():
    checks.check_joint_state(joint_state())
    checks.check_joint_state(joint_state(name=['x', 'y'], velocity=[]))


def test_a_negative_stamp_is_refused_everywhere():
    msg = joint_state()
    msg.header.stamp = Time(sec=-1)
    with pytest.raises(checks.BadMessage, match='header.stamp.sec is -1'):
        checks.check_joint_state(msg)
    twist = TwistStamped()
    twist.header.stamp = Time(sec=-1)
    with pytest.raises(checks.BadMessage, match='header.stamp.sec is -1'):
        checks.check_twist_stamped(twist)


def test_nan_twists_and_odometry_are_refused():
    twist = TwistStamped()
    twist.twist.angular.z = math.nan
    with pytest.raises(checks.BadMessage, match=r'twist.angular\[2\] is nan'):
        checks.check_twist_stamped(twist)
    odom = Odometry()
    odom.pose.pose.orientation.w = 1.0
    checks.check_odometry(odom)
    odom.pose.pose.position.x = math.inf
    with pytest.raises(checks.BadMessage, match=r'pose.pose.position\[0\] is inf'):
        checks.check_odometry(odom)
    odom.pose.pose.position.x = 0.0
    odom.pose.pose.orientation.w = 0.0
    with pytest.raises(checks.BadMessage, match='zero quaternion'):
        checks.check_odometry(odom)


def test_the_guard_drops_and_reports_once_per_period_with_the_count():
    log = ListLogger()
    guard = CallbackGuard(log, period=60.0)
    seen = []

    def callback(msg):
        if msg == 'boom':
            raise RuntimeError('boom')
        seen.append(msg)
    wrapped = guard.wrap('/topic', callback, check=lambda m: m != 'bad' or (_ for _ in ()).throw(
        checks.BadMessage('data is bad')))
    for msg in ('ok', 'bad', 'bad', 'boom', 'ok2'):
        assert wrapped(msg) is None
    assert seen == ['ok', 'ok2']
    assert log.lines == [('warning', 'dropped a message on /topic: data is bad')]
    assert guard.dropped == {'/topic': 3}


@pytest.fixture
def ros_domain():
    from support import ros as ros_helpers
    return ros_helpers.isolate_domain()


def test_a_node_whose_callback_raises_keeps_spinning(ros_domain):
    """A raising callback (no guard) and a guarded one on a real node: the executor loop of
    spin_guarded reports the unguarded failure and the node takes the next messages."""
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_domain)
    node = rclpy.create_node('guard_probe', context=context)
    executor = MultiThreadedExecutor(context=context)
    executor.add_node(node)
    log = ListLogger()
    received = []

    def raw(msg):
        received.append(msg.data)
        if math.isnan(msg.data):
            raise ValueError('unguarded NaN')
    node.create_subscription(Float64, '/guard_probe/raw', raw, 10)
    guarded_subscription(node, Float64, '/guard_probe/checked', lambda m: received.append(('checked', m.data)), 10,
                         check=lambda m: checks.check_finite([m.data], 'data'), guard=CallbackGuard(log))
    thread = threading.Thread(target=spin_guarded, args=(executor, CallbackGuard(log), 'probe executor'))
    thread.start()
    try:
        raw_pub = node.create_publisher(Float64, '/guard_probe/raw', 10)
        checked_pub = node.create_publisher(Float64, '/guard_probe/checked', 10)
        assert wait_until(lambda: raw_pub.get_subscription_count() and checked_pub.get_subscription_count(), 10.0)
        for value in (math.nan, 1.0):
            raw_pub.publish(Float64(data=value))
            checked_pub.publish(Float64(data=value))
            if math.isnan(value):       # the NaN taken (raised in one callback, dropped by the other) first
                assert wait_until(lambda: any(x != x for x in received if isinstance(x, float))
                                  and any('data is nan' in t for _, t in log.lines), 10.0), (received, log.lines)
        assert wait_until(lambda: 1.0 in received and ('checked', 1.0) in received, 10.0), received
        assert ('checked', math.nan) not in received
        assert thread.is_alive()
        texts = [text for _, text in log.lines]
        assert any('/guard_probe/checked' in t and 'data is nan' in t for t in texts), texts
        assert any('probe executor' in t and 'unguarded NaN' in t for t in texts), texts
    finally:
        executor.shutdown(timeout_sec=1.0)
        thread.join(timeout=3.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    assert not thread.is_alive()
