"""Integration test of the bridge's mobile base: a bridge process running the MiR250 model
takes TwistStamped on /sim/cmd_vel and publishes nav_msgs/Odometry on /sim/odom and the
sim/odom -> sim/base_footprint transform on /tf (real processes over DDS, private domain).
Skipped without rclpy."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from shadow_twin.model.mjcf import builtin_model_path

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0


@pytest.fixture(scope='module')
def base_bridge(ros, tmp_path_factory):
    """A bridge on the built-in MiR250 model; yields (process, odometry recorder, TF recorder)."""
    from nav_msgs.msg import Odometry
    from tf2_msgs.msg import TFMessage
    helpers, client = ros
    odom = client.record(Odometry, '/sim/odom')
    tf = client.record(TFMessage, '/tf')
    log = tmp_path_factory.mktemp('base') / 'bridge.log'
    proc = helpers.NodeProcess('mujoco_bridge.main', ['--params-file', str(REPO / 'config' / 'mujoco_bridge.yaml'),
                                                      '-p', f'model_path:={builtin_model_path("mir250")}'], log)
    if not helpers.wait_until(lambda: odom.count() > 0 or not proc.alive(), START_TIMEOUT):
        proc.stop()
        pytest.fail(f'no /sim/odom within {START_TIMEOUT} s:\n{proc.output()}')
    yield proc, odom, tf
    assert proc.stop() == 0, proc.output()


def test_velocity_commands_move_the_base_and_odometry_follows(ros, base_bridge):
    from geometry_msgs.msg import TwistStamped
    helpers, client = ros
    proc, odom, tf = base_bridge
    start = odom.last()
    pub = client.node.create_publisher(TwistStamped, '/sim/cmd_vel', 10)
    command = TwistStamped()
    command.twist.linear.x, command.twist.angular.z = 0.4, 0.3
    t0 = time.monotonic()
    while time.monotonic() - t0 < 2.0:                 # 20 Hz, as a base controller sends
        pub.publish(command)
        time.sleep(0.05)
    moving = odom.last()
    assert moving.header.frame_id == 'sim/odom' and moving.child_frame_id == 'sim/base_footprint'
    assert moving.twist.twist.linear.x == pytest.approx(0.4, rel=0.05)
    assert moving.twist.twist.angular.z == pytest.approx(0.3, rel=0.05)
    travelled = math.hypot(moving.pose.pose.position.x - start.pose.pose.position.x,
                           moving.pose.pose.position.y - start.pose.pose.position.y)
    assert 0.5 < travelled < 0.85, travelled           # about 2 s at 0.4 m/s
    q = moving.pose.pose.orientation
    assert 2 * math.atan2(q.z, q.w) > 0.4              # turned left
    # TF carries the same pose
    transform = tf.last().transforms[0]
    assert (transform.header.frame_id, transform.child_frame_id) == ('sim/odom', 'sim/base_footprint')
    assert abs(transform.transform.translation.x - moving.pose.pose.position.x) < 0.05
    # commands stop: the base stops within the timeout (0.5 s) and some braking
    assert helpers.wait_until(lambda: abs(odom.last().twist.twist.linear.x) < 0.01, 3.0)
    assert abs(odom.since(time.monotonic() - 0.5)[-1][1].twist.twist.linear.x) < 0.01
    rate = len(odom.since(time.monotonic() - 2.0)) / 2.0
    assert 40 < rate < 60, rate                        # odom_rate 50 Hz
