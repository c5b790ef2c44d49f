"""Malformed messages on every topic the cell's nodes subscribe to (joint states, odometry, velocity
commands, speed scaling): :func:`flood_malformed`, a scenario of ``cell_faults`` (``test/ros/twin/
test_cell_faults.py``, ``benchmarks/faults.py``). Import with rclpy available."""

from __future__ import annotations

import math
import time

from support.ros import wait_until

SPEED_SCALING_TOPIC = '/speed_scaling_state_broadcaster/speed_scaling'
JOINT_STATE_TOPICS = ('/joint_states', '/rh/joint_states', '/sim/joint_states')
ODOM_TOPICS = ('/odom', '/sim/odom')
CMD_VEL_TOPICS = ('/cmd_vel', '/sim/cmd_vel')


def _malformed_joint_states(now) -> list:
    from sensor_msgs.msg import JointState
    names = ['shoulder_pan_joint', 'rh_FFJ3']
    out = [JointState(name=names, position=[math.nan, 0.1]), JointState(name=names, position=[0.1, math.inf]),
           JointState(name=names, position=[0.1]), JointState(name=names, position=[0.1, 0.2], velocity=[1.0]),
           JointState(name=['shoulder_pan_joint', 'shoulder_pan_joint'], position=[0.0, 1.0]),
           JointState(name=['no_such_joint'], position=[math.nan])]
    negative = JointState(name=names, position=[0.1, 0.2])
    negative.header.stamp.sec = -1
    out.append(negative)
    for msg in out[:-1]:
        msg.header.stamp = now
    return out


def _malformed_odometry(now) -> list:
    from nav_msgs.msg import Odometry
    out = []
    for field_, value in (('x', math.nan), ('y', math.inf)):
        msg = Odometry()
        msg.header.stamp = now
        msg.pose.pose.orientation.w = 1.0
        setattr(msg.pose.pose.position, field_, value)
        out.append(msg)
    zero_quaternion = Odometry()
    zero_quaternion.header.stamp = now
    negative = Odometry()
    negative.pose.pose.orientation.w = 1.0
    negative.header.stamp.sec = -1
    return out + [zero_quaternion, negative]


def _malformed_commands(now_s: float) -> list:
    from geometry_msgs.msg import TwistStamped

    from shadow_twin.ros.conversions import time_msg
    out = []
    for linear, angular, stamp in ((math.nan, 0.0, now_s), (0.0, math.inf, now_s), (0.5, 0.0, now_s - 10.0),
                                   (0.5, 0.3, None)):
        msg = TwistStamped()
        msg.twist.linear.x, msg.twist.angular.z = linear, angular
        if stamp is None:
            msg.header.stamp.sec = -1
        else:
            msg.header.stamp = time_msg(stamp)
        out.append(msg)
    return out


def flood_malformed(client, repeats: int = 3, until=None, timeout: float = 30.0) -> int:
    """Publish malformed messages on every topic the cell's nodes subscribe to (joint states,
    odometry, velocity commands, speed scaling), ``repeats`` rounds, then more rounds until
    ``until()`` is true or ``timeout`` s have passed; returns how many were sent.

    A publisher matched with a subscription is not yet known to that subscription (DDS discovery
    completes on the two sides apart): rounds sent before it are lost to it, which ``until`` (e.g.
    "the node logged the drop") covers. Each publisher waits for its messages to be acknowledged
    (1 s at most) before it is destroyed."""
    from geometry_msgs.msg import TwistStamped
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import JointState
    from rclpy.duration import Duration
    from std_msgs.msg import Float64
    node = client.node
    pubs = {t: node.create_publisher(JointState, t, 10) for t in JOINT_STATE_TOPICS}
    pubs.update({t: node.create_publisher(Odometry, t, 10) for t in ODOM_TOPICS})
    pubs.update({t: node.create_publisher(TwistStamped, t, 10) for t in CMD_VEL_TOPICS})
    pubs[SPEED_SCALING_TOPIC] = node.create_publisher(Float64, SPEED_SCALING_TOPIC, 10)
    # discovery: each publisher matched with every subscriber of its type this node sees on its topic
    # (the twin also watches /cmd_vel for geometry_msgs/Twist, which a TwistStamped publisher never matches)
    def subscribers(topic, pub) -> int:
        kind = pub.msg_type.__module__.split('.')[0] + '/msg/' + pub.msg_type.__name__
        return sum(info.topic_type == kind for info in node.get_subscriptions_info_by_topic(topic))
    assert wait_until(lambda: all(pub.get_subscription_count() >= max(1, subscribers(t, pub))
                                  for t, pub in pubs.items()), 30.0), \
        {t: (pub.get_subscription_count(), subscribers(t, pub)) for t, pub in pubs.items()}
    sent, rounds, deadline = 0, 0, time.monotonic() + timeout
    while rounds < repeats or (until is not None and not until() and time.monotonic() < deadline):
        rounds += 1
        now = node.get_clock().now()
        batches = {t: _malformed_joint_states(now.to_msg()) for t in JOINT_STATE_TOPICS}
        batches.update({t: _malformed_odometry(now.to_msg()) for t in ODOM_TOPICS})
        batches.update({t: _malformed_commands(now.nanoseconds * 1e-9) for t in CMD_VEL_TOPICS})
        batches[SPEED_SCALING_TOPIC] = [Float64(data=v) for v in (math.nan, math.inf, -5.0, 150.0)]
        for topic, messages in batches.items():
            for msg in messages:
                pubs[topic].publish(msg)
                sent += 1
        time.sleep(0.2)     # the rounds' own pace
    pubs[SPEED_SCALING_TOPIC].publish(Float64(data=100.0))      # leave the arm at full speed
    for pub in pubs.values():
        pub.wait_for_all_acked(Duration(seconds=1.0))
        node.destroy_publisher(pub)
    return sent
