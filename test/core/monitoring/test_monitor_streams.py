"""ROS-free tests of the twin monitor's core (shadow_twin.monitoring.joint.error) with several
real streams (the cell's arm and hand topics): each compared on its own stamps, its own RMS window
and staleness, and the merged error message (merge_errors). One stream: test_monitor.py."""

from __future__ import annotations

import numpy as np
import pytest

from shadow_twin.monitoring.joint import error as m


# ------------------------------------------------------------------------ several real streams
ARM, HAND = ('s', 'e'), ('h1', 'h2')


def cell_monitor(**kwargs) -> m.SimRealMonitor:
    return m.SimRealMonitor(m.Thresholds(), real_labels=['/joint_states', '/rh/joint_states'], **kwargs)


def cell_sim(mon, t0, n, rate=500.0, arrival=0.0):
    """The sim at ``rate`` Hz: every joint moves at 1 rad/s (q = t + offset), so any error in the
    time alignment shows."""
    for k in range(n):
        t = t0 + k / rate
        mon.add_sim(m.JointSample.make(t, ARM + HAND + ('wheel',), [t, t + 1, t + 2, t + 3, 0.0], [1.0] * 5), arrival)


def arm(t, offset=0.1):
    return m.JointSample.make(t, ARM, [t - offset, t + 1 - offset], [1.0, 1.0], stamp=f'arm {t:.4f}')


def hand(t, offset=0.25):
    return m.JointSample.make(t, HAND, [t + 2 - offset, t + 3 - offset], [1.0, 1.0], stamp=f'hand {t:.4f}')


def test_each_real_stream_is_compared_on_its_own_stamps():
    """Arm at 125 Hz and hand at 250 Hz, out of phase with each other and with the sim: each joint's
    error is exact (sim interpolated at that stream's stamp); one message holds both streams, stamped
    with the newer comparison."""
    mon = cell_monitor()
    cell_sim(mon, 1.0, 250)                                      # up to 1.498 s
    for k in range(60):
        mon.add_real(arm(1.0013 + k / 125), 0.0, 0)              # up to 1.4733 s
    for k in range(120):
        mon.add_real(hand(1.0031 + k / 250), 0.0, 1)             # up to 1.4791 s
    err = mon.update()
    assert err.names == ARM + HAND and err.names[:2] == ARM     # stream by stream, in the list's order
    np.testing.assert_allclose(err.position, [0.1, 0.1, 0.25, 0.25], atol=1e-9)
    np.testing.assert_allclose(err.velocity, [0.0] * 4, atol=1e-9)
    assert err.t == pytest.approx(1.4791) and err.stamp == 'hand 1.4791'
    assert mon.update() is None
    mon.add_real(hand(1.4831), 0.0, 1)                           # only the hand has something new
    err = mon.update()
    assert err.t == pytest.approx(1.4831) and err.names == ARM + HAND
    np.testing.assert_allclose(err.position, [0.1, 0.1, 0.25, 0.25], atol=1e-9)
    # an arm sample newer than its last one but older than the last message: no message (stamps
    # increase); its error enters the window and the next message
    mon.add_real(arm(1.4813), 0.0, 0)
    assert mon.update() is None
    mon.add_real(hand(1.4871), 0.0, 1)
    assert mon.update().stamp == 'hand 1.4871'
    stats = mon.streams[0].errors.stats()                        # the arm's window: both its comparisons
    assert stats['s'].samples == 2 and stats['s'].rms_position == pytest.approx(0.1, abs=1e-9)


def test_interleaved_streams_keep_their_windows():
    """Comparisons of the two streams alternate in time, each window only sees its own stream's
    (one shared window would restart whenever a stream's stamp is older than the other's)."""
    mon = cell_monitor(window=1.0)
    for k in range(1, 101):                                      # the reals one 4 ms period behind the sim
        cell_sim(mon, k / 250, 2)
        mon.add_real(hand(0.0031 + (k - 1) / 250), 0.0, 1)
        if k % 2 == 0:
            mon.add_real(arm(0.0013 + (k - 1) / 250), 0.0, 0)
        mon.update()
    report = mon.report(now=0.0)
    by_name = {j.name: j for j in report.joints}
    assert [j.name for j in report.joints] == list(ARM + HAND)
    assert by_name['s'].stats.samples == 50 and by_name['h1'].stats.samples == 100
    assert by_name['s'].level == m.WARN and by_name['h1'].level == m.ERROR     # 0.1 and 0.25 rad RMS
    assert report.level == m.ERROR and report.worst in HAND


def test_a_joint_in_two_streams_is_taken_from_the_first():
    mon = m.SimRealMonitor(m.Thresholds(), real_labels=['a', 'b'])
    cell_sim(mon, 0.0, 100)
    mon.add_real(m.JointSample.make(0.05, ('s', 'h1'), [0.05 - 0.1, 2.05 - 0.3]), 0.0, 0)
    mon.add_real(m.JointSample.make(0.06, ('h1', 'h2'), [2.06 - 0.25, 3.06 - 0.25]), 0.0, 1)
    err = mon.update()
    assert err.names == ('s', 'h1', 'h2')
    np.testing.assert_allclose(err.position, [0.1, 0.3, 0.25], atol=1e-9)
    assert [j.name for j in mon.report(0.0).joints] == ['s', 'h1', 'h2']


def test_a_silent_stream_leaves_the_message_and_its_joints_go_stale():
    mon = cell_monitor(stale_after=0.5)
    cell_sim(mon, 0.0, 300)                                       # up to 0.598 s
    mon.add_real(arm(0.5), 0.5, 0)                                # the arm stops at 0.5 s
    assert mon.update().names == ARM
    cell_sim(mon, 0.6, 700, arrival=2.0)                          # up to 1.998 s
    for k in range(250):
        mon.add_real(hand(0.9 + k / 250), 2.0, 1)
    err = mon.update()
    assert err.names == HAND and err.t == pytest.approx(0.9 + 249 / 250)   # the arm's 0.5 s: 1.4 s older
    report = mon.report(now=2.0)
    levels = {j.name: j.level for j in report.joints}
    assert levels == {'s': m.STALE, 'e': m.STALE, 'h1': m.ERROR, 'h2': m.ERROR}
    arm_joint = next(j for j in report.joints if j.name == 's')
    assert arm_joint.message.startswith('nothing received on /joint_states for 1.5 s (last: RMS error 0.100')
    assert report.level == m.STALE and report.message.startswith('nothing received on /joint_states for 1.5 s; ')
    never = cell_monitor()
    cell_sim(never, 0.0, 10)
    never.add_real(hand(0.005), 0.0, 1)
    never.update()
    report = never.report(now=0.1)
    assert [j.name for j in report.joints] == list(HAND) and m.STALE not in [j.level for j in report.joints]
    assert report.level == m.STALE                               # the summary: a stream is silent
    assert 'nothing received on /joint_states yet' in report.message


def test_real_streams_must_be_distinct():
    with pytest.raises(ValueError, match='distinct'):
        m.SimRealMonitor(m.Thresholds(), real_labels=['/a', '/a'])
    with pytest.raises(ValueError, match='one or more'):
        m.SimRealMonitor(m.Thresholds(), real_labels=[])


def test_merge_errors_concatenates_and_takes_the_newest_stamp():
    a = m.JointError(1.0, ('a',), np.array([0.1]), np.array([0.0]), 'sa')
    b = m.JointError(1.2, ('b', 'c'), np.array([0.2, 0.3]), np.array([0.0, 1.0]), 'sb')
    merged = m.merge_errors([a, b])
    assert merged.names == ('a', 'b', 'c') and (merged.t, merged.stamp) == (1.2, 'sb')
    np.testing.assert_allclose(merged.position, [0.1, 0.2, 0.3])
    assert m.merge_errors([a]) is a
    with pytest.raises(ValueError):
        m.merge_errors([])
