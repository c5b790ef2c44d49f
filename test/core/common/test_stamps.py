"""The one seconds <-> (sec, nanosec) conversion (shadow_twin.common.stamps) and the message
builders on top of it: every ``nanosec`` they write lies in [0, 1e9).

The builders that need ROS message packages (rclpy's ``Time``/``Duration`` in
shadow_twin.ros.conversions, ``JointTrajectory.to_msg``) skip without them.
"""

from __future__ import annotations

import math
from types import SimpleNamespace as NS

import numpy as np
import pytest

from shadow_twin.calibration.recordings.recording import (JointStateRecording, joint_state_messages, trajectory_cdr,
                                                          typestore)
from shadow_twin.common.stamps import (from_nanoseconds, split_nanoseconds, to_nanoseconds, to_sec_nanosec,
                                       to_seconds)
from shadow_twin.control.trajectory import JointTrajectory

#: Seconds whose fraction rounds up to a whole second, around 0 and at epoch times.
EDGES = [0.9999999999, 0.99999999951, 1.9999999996, 1686653565.9999999999, 2.0 - 1e-12]
EPOCH = 1_686_653_565


def test_edges_round_up_to_the_next_second():
    assert to_sec_nanosec(0.9999999999) == (1, 0)
    assert to_sec_nanosec(0.99999999949) == (0, 999_999_999)
    assert to_sec_nanosec(1.9999999996) == (2, 0)
    assert to_sec_nanosec(0.0) == (0, 0)
    assert to_sec_nanosec(1e-10) == (0, 0)
    assert to_sec_nanosec(3.25) == (3, 250_000_000)
    for seconds in EDGES:
        sec, nanosec = to_sec_nanosec(seconds)
        assert 0 <= nanosec < 1_000_000_000
        assert sec == round(seconds)


def test_negative_times_keep_nanosec_positive():
    assert to_sec_nanosec(-0.5) == (-1, 500_000_000)
    assert to_sec_nanosec(-1e-10) == (0, 0)
    assert to_sec_nanosec(-0.9999999999) == (-1, 0)
    assert to_sec_nanosec(-1.25) == (-2, 750_000_000)
    assert split_nanoseconds(-1) == (-1, 999_999_999)
    assert to_nanoseconds(-0.5) == -500_000_000
    assert to_seconds(NS(sec=-1, nanosec=500_000_000)) == -0.5


def test_round_trip_is_exact_at_epoch_times():
    rng = np.random.default_rng(0)
    for nanoseconds in [0, 1, 999_999_999, EPOCH * 10**9 + 719_353_000,
                        *(int(n) for n in rng.integers(0, 2 * 10**18, 2000))]:
        seconds = from_nanoseconds(nanoseconds)
        # below 2**31 s a double resolves 0.24 us: the nanoseconds come back within half of it ...
        assert abs(to_nanoseconds(seconds) - nanoseconds) <= 120
        # ... and seconds -> (sec, nanosec) -> seconds is exact
        sec, nanosec = to_sec_nanosec(seconds)
        assert to_seconds(NS(sec=sec, nanosec=nanosec)) == seconds
        assert from_nanoseconds(sec * 10**9 + nanosec) == seconds


def test_to_seconds_of_messages_numbers_and_nanoseconds_agree():
    assert to_seconds(NS(sec=3, nanosec=250_000_000)) == 3.25
    assert to_seconds(2) == 2.0 and to_seconds(np.int64(2)) == 2.0 and to_seconds(np.float64(0.5)) == 0.5
    assert from_nanoseconds(3_250_000_000) == 3.25
    assert from_nanoseconds(EPOCH * 10**9 + 1) == to_seconds(NS(sec=EPOCH, nanosec=1))


@pytest.mark.parametrize('bad', [math.nan, math.inf])
def test_nan_and_inf_are_refused(bad):
    with pytest.raises((ValueError, OverflowError)):
        to_nanoseconds(bad)


# -- message builders --------------------------------------------------------------------------
def nanosecs(msg) -> list[int]:
    """Every ``nanosec`` field of a (rosbags or rclpy) JointTrajectory / JointState message."""
    out = [msg.header.stamp.nanosec]
    for point in getattr(msg, 'points', ()):
        out.append(point.time_from_start.nanosec)
    return out


def trajectory_at(times) -> JointTrajectory:
    return JointTrajectory(['a'], list(times), [[0.1 * k] for k in range(len(times))])


EDGE_TIMES = [0.4999999999, 0.9999999999, 1.9999999997, 2.5]


def test_recording_writers_never_write_nanosec_of_a_second():
    store = typestore()
    for start in EDGES:
        msg = store.deserialize_cdr(trajectory_cdr(trajectory_at(EDGE_TIMES), start),
                                    'trajectory_msgs/msg/JointTrajectory')
        assert all(0 <= n < 1_000_000_000 for n in nanosecs(msg))
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == to_sec_nanosec(start)
        assert [(p.time_from_start.sec, p.time_from_start.nanosec) for p in msg.points] == [
            (0, 500_000_000), (1, 0), (2, 0), (2, 500_000_000)]
    recording = JointStateRecording.from_arrays(np.array(EDGES[:4]), ['a'], np.zeros((4, 1)))
    for topic, stamp_ns, data in joint_state_messages(recording):
        msg = store.deserialize_cdr(data, 'sensor_msgs/msg/JointState')
        assert 0 <= msg.header.stamp.nanosec < 1_000_000_000
        assert stamp_ns == msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
