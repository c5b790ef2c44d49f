"""shadow_twin.ros.conversions: core values to ROS messages, with normalised stamps."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip('rclpy')
pytest.importorskip('trajectory_msgs.msg')

from shadow_twin.common.stamps import to_sec_nanosec, to_seconds  # noqa: E402
from shadow_twin.control.trajectory import JointTrajectory  # noqa: E402
from shadow_twin.ros.conversions import doubles, duration_msg, time_msg, time_msg_ns, trajectory_msg  # noqa: E402

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

EDGES = [0.9999999999, 0.99999999951, 1.9999999996, 1686653565.9999999999, 2.0 - 1e-12]
EPOCH = 1_686_653_565
POS = np.array([[0.0, 1.0], [1.0, -1.0], [0.5, 0.5]])
VEL = np.array([[0.0, 0.5], [1.0, -2.0], [-0.5, 0.0]])
ACC = np.array([[0.0, 1.0], [2.0, 0.0], [-1.0, 3.0]])


def test_time_and_duration_messages_never_write_nanosec_of_a_second():
    for seconds in EDGES:
        for msg in (time_msg(seconds), duration_msg(seconds)):
            assert (msg.sec, msg.nanosec) == to_sec_nanosec(seconds)
    assert (time_msg_ns(EPOCH * 10**9 + 999_999_999).sec, time_msg_ns(10**9).nanosec) == (EPOCH, 0)
    assert (duration_msg(-0.5).sec, duration_msg(-0.5).nanosec) == (0, 0)       # clamped to 0
    assert to_seconds(time_msg(EPOCH + 0.719353)) == EPOCH + 0.719353


def test_trajectory_msg_round_trip_keeps_every_field():
    traj = JointTrajectory(['a', 'b'], [0.1, 3.1, 6.25], POS, VEL, ACC, name='x')
    msg = trajectory_msg(traj)
    assert list(msg.joint_names) == ['a', 'b'] and len(msg.points) == 3
    assert (msg.points[1].time_from_start.sec, msg.points[1].time_from_start.nanosec) == (3, 100_000_000)
    back = JointTrajectory.from_msg(msg, name='x')
    np.testing.assert_allclose(back.times, traj.times, atol=1e-9)
    np.testing.assert_allclose(back.positions, traj.positions)
    np.testing.assert_allclose(back.velocities, traj.velocities)
    np.testing.assert_allclose(back.accelerations, traj.accelerations)
    positions_only = JointTrajectory.from_msg(trajectory_msg(JointTrajectory(['a'], [1.0], [[0.5]])))
    assert positions_only.velocities is None and positions_only.accelerations is None


def test_trajectory_msg_never_writes_nanosec_of_a_second():
    traj = JointTrajectory(['a'], [0.4999999999, 0.9999999999, 1.9999999997, 2.5], [[0.0], [0.1], [0.2], [0.3]])
    msg = trajectory_msg(traj)
    assert [(p.time_from_start.sec, p.time_from_start.nanosec) for p in msg.points] == [
        (0, 500_000_000), (1, 0), (2, 0), (2, 500_000_000)]


def test_doubles_converts_any_numeric_array_to_float64():
    out = doubles(np.array([1, 2, 3], dtype=np.int32))
    assert out.typecode == 'd' and list(out) == [1.0, 2.0, 3.0]
