"""Integration test of the bridge's mobile base: a bridge process running the MiR250 model
takes TwistStamped on /sim/cmd_vel and publishes nav_msgs/Odometry on /sim/odom and the
sim/odom -> sim/base_footprint transform on /tf (real processes over DDS, private domain).
Skipped without rclpy."""

from __future__ import annotations

import math
import time
from pathlib import Path

from support import cell as cell_helpers
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
    cell_helpers.wait_started([proc], [odom], START_TIMEOUT, 'the bridge on the MiR250 (/sim/odom)')
    yield proc, odom, tf
    cell_helpers.stop_all({'bridge': proc})


def test_velocity_commands_move_the_base_and_odometry_follows(ros, base_bridge):
    from geometry_msgs.msg import TwistStamped
    helpers, client = ros
    proc, odom, tf = base_bridge
    start = odom.last()
    pub = client.node.create_publisher(TwistStamped, '/sim/cmd_vel', 10)
    command = TwistStamped()
    command.twist.linear.x, command.twist.angular.z = 0.4, 0.3
    first = helpers.ros_now()
    t0 = time.monotonic()
    while time.monotonic() - t0 < 2.0:                 # 20 Hz, as a base controller sends
        pub.publish(command)
        time.sleep(0.05)
    moving = helpers.current(odom)                      # the odometry stamped as the commands end
    span = helpers.stamp_s(moving) - first              # s the base had commands for, at most
    assert moving.header.frame_id == 'sim/odom' and moving.child_frame_id == 'sim/base_footprint'
    assert moving.twist.twist.linear.x == pytest.approx(0.4, rel=0.05)
    assert moving.twist.twist.angular.z == pytest.approx(0.3, rel=0.05)
    travelled = math.hypot(moving.pose.pose.position.x - start.pose.pose.position.x,
                           moving.pose.pose.position.y - start.pose.pose.position.y)
    assert 0.5 < travelled < 0.4 * span + 0.05, (travelled, span)     # about 2 s at 0.4 m/s
    q = moving.pose.pose.orientation
    assert 2 * math.atan2(q.z, q.w) > 0.4              # turned left
    # TF carries the same pose; the body tree on /tf too (sim/<body>) leaves the base's frame to the odometry
    transforms = [t for _, m in tf.snapshot() for t in m.transforms]
    parents = {t.header.frame_id for t in transforms if t.child_frame_id == 'sim/base_footprint'}
    assert parents == {'sim/odom'} and any(t.child_frame_id == 'sim/base_link' for t in transforms)
    transform = [t for t in transforms if t.child_frame_id == 'sim/base_footprint'][-1]
    assert abs(transform.transform.translation.x - moving.pose.pose.position.x) < 0.05
    # commands stop: the base stops within the timeout (0.5 s) and some braking
    assert helpers.wait_until(lambda: abs(odom.last().twist.twist.linear.x) < 0.01, 10.0)
    assert abs(odom.since(time.monotonic() - 0.5)[-1][1].twist.twist.linear.x) < 0.01
    end = helpers.ros_now()
    helpers.stamped_at(odom, end)
    rate = sum(end - 2.0 <= helpers.stamp_s(m) < end for _, m in odom.snapshot()) / 2.0
    assert 40 < rate < 60, rate                        # odom_rate 50 Hz, on the odometry's stamps
