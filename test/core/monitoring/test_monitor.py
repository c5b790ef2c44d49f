"""ROS-free tests of the twin monitor's core (shadow_twin.monitoring.joint.error): history and
interpolation, sim minus real, the RMS window, thresholds and levels, the monitor, several real
streams (the cell's arm and hand topics) each compared on its own stamps and merged; and of its
rqt perspectives, the hand's and the cell's (shadow_twin.plots.perspective, window layout from
shadow_twin.plots.qt_layout). The base's pose error: test_base_error.py."""

from __future__ import annotations

import ast
import json
import math
import re
import struct
from pathlib import Path

import numpy as np
import pytest

from shadow_twin.cli import perspective as persp_cli
from shadow_twin.common.errors import ConfigError
from shadow_twin.monitoring.joint import error as m
from shadow_twin.plots import perspective as persp

NAMES = ('a', 'b')


def sample(t, pos, vel=None, names=NAMES, stamp=None):
    return m.JointSample.make(t, names, pos, vel, stamp=stamp)


# ------------------------------------------------------------------------------------ samples
def test_sample_checks_sizes_and_fills_missing_velocities_with_nan():
    s = sample(1.0, [0.1, 0.2])
    assert s.names == NAMES and s.position.tolist() == [0.1, 0.2]
    assert all(math.isnan(v) for v in s.velocity)
    with pytest.raises(ValueError, match='2 names has 1 positions'):
        sample(1.0, [0.1])
    with pytest.raises(ValueError, match='3 velocities'):
        sample(1.0, [0.1, 0.2], [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match='finite'):
        sample(math.nan, [0.1, 0.2])


# ------------------------------------------------------------------------------------ history
def test_history_interpolates_positions_and_velocities_linearly():
    h = m.JointStateHistory(max_age=10.0)
    h.add(sample(1.0, [0.0, 1.0], [0.0, -2.0]))
    h.add(sample(2.0, [1.0, 3.0], [4.0, 2.0]))
    at = h.at(1.25)
    assert at.t == 1.25 and at.names == NAMES
    np.testing.assert_allclose(at.position, [0.25, 1.5])
    np.testing.assert_allclose(at.velocity, [1.0, -1.0])
    np.testing.assert_allclose(h.at(1.75).position, [0.75, 2.5])
    assert h.at(2.0).position.tolist() == [1.0, 3.0]       # exact stamps: the sample itself
    assert h.at(1.0).t == 1.0


def test_history_holds_the_nearest_sample_only_within_max_gap():
    h = m.JointStateHistory(max_age=10.0)
    first, last = sample(1.0, [0.0, 0.0], stamp='s1'), sample(2.0, [1.0, 1.0], stamp='s2')
    h.add(first)
    h.add(last)
    assert h.at(2.03, max_gap=0.05) is last                # just after the newest: held
    assert h.at(0.97, max_gap=0.05) is first               # just before the oldest
    assert h.at(2.06, max_gap=0.05) is None                # too far out
    assert h.at(2.01) is None                              # default: no extrapolation at all
    assert m.JointStateHistory().at(1.0, max_gap=10.0) is None


def test_history_is_bounded_in_age_and_length():
    h = m.JointStateHistory(max_age=1.0, max_samples=1000)
    for k in range(300):                                   # 250 Hz for 1.2 s
        h.add(sample(k * 0.004, [k, k]))
    oldest, newest = h.span()
    assert newest == pytest.approx(299 * 0.004)
    assert newest - oldest <= 1.0 and newest - oldest > 0.99
    assert h.at(0.1, max_gap=0.05) is None                 # dropped
    short = m.JointStateHistory(max_age=100.0, max_samples=5)
    for k in range(10):
        short.add(sample(float(k), [k, k]))
    assert len(short) == 5 and short.span() == (5.0, 9.0)
    with pytest.raises(ValueError):
        m.JointStateHistory(max_age=0.0)


def test_history_repeated_stamp_replaces_and_older_stamp_restarts():
    h = m.JointStateHistory()
    h.add(sample(1.0, [0.0, 0.0]))
    h.add(sample(1.1, [1.0, 1.0]))
    h.add(sample(1.1, [2.0, 2.0]))                         # same stamp: the newer state wins
    assert len(h) == 2 and h.latest().position.tolist() == [2.0, 2.0]
    h.add(sample(0.5, [5.0, 5.0]))                         # back in time: the stream restarted
    assert len(h) == 1 and h.span() == (0.5, 0.5)


def test_history_newest_not_after():
    h = m.JointStateHistory()
    for t in (1.0, 1.004, 1.008):
        h.add(sample(t, [t, t]))
    assert h.newest_not_after(1.006).t == 1.004
    assert h.newest_not_after(1.008).t == 1.008
    assert h.newest_not_after(0.9) is None


def test_history_across_a_joint_set_change_takes_the_nearer_sample():
    h = m.JointStateHistory()
    h.add(sample(1.0, [0.0, 0.0]))
    h.add(sample(2.0, [1.0], names=('a',)))
    assert h.at(1.2).names == NAMES and h.at(1.8).names == ('a',)


# ------------------------------------------------------------------------------------- errors
def test_joint_error_is_sim_minus_real_in_real_order_for_common_joints():
    real = sample(5.0, [1.0, 2.0, 3.0], [0.1, 0.0, 0.3], names=('c', 'a', 'b'), stamp='real stamp')
    sim = sample(5.0, [0.75, 2.5, 9.0], [0.1, 0.2, 0.0], names=('a', 'b', 'x'))
    err = m.joint_error(sim, real)
    assert err.names == ('a', 'b')                        # real order; c and x are in one only
    np.testing.assert_allclose(err.position, [0.75 - 2.0, 2.5 - 3.0])
    np.testing.assert_allclose(err.velocity, [0.1 - 0.0, 0.2 - 0.3])
    assert err.t == 5.0 and err.stamp == 'real stamp'
    none = m.joint_error(sample(5.0, [1.0], names=('x',)), real)
    assert none.names == () and none.position.shape == (0,)


# ------------------------------------------------------------------------------------- window
def error(t, dpos, dvel=(0.0, 0.0), names=NAMES):
    return m.JointError(t, names, np.asarray(dpos, float), np.asarray(dvel, float))


def test_window_rms_max_and_count_over_known_errors():
    w = m.ErrorWindow(window=2.0)
    w.add(error(0.5, [0.3, -0.1], [1.0, 0.0]))
    w.add(error(1.0, [-0.4, -0.1], [math.nan, 0.0]))      # an unknown velocity is left out of its RMS
    stats = w.stats()
    a = stats['a']
    assert a.rms_position == pytest.approx(math.sqrt((0.09 + 0.16) / 2))
    assert a.max_abs_position == pytest.approx(0.4)
    assert a.rms_velocity == pytest.approx(1.0)
    assert a.samples == 2 and a.window == 2.0
    assert stats['b'].rms_position == pytest.approx(0.1)
    assert list(stats) == ['a', 'b']


def test_window_forgets_errors_older_than_the_window():
    w = m.ErrorWindow(window=0.5)
    w.add(error(0.0, [1.0, 1.0]))
    w.add(error(0.3, [1.0, 1.0]))
    assert w.stats()['a'].rms_position == pytest.approx(1.0)
    w.add(error(0.6, [0.0, 0.0]))                          # t = 0.0 has left (0.6 - 0.5 >= 0.0)
    assert w.stats()['a'].samples == 2
    assert w.stats()['a'].rms_position == pytest.approx(math.sqrt(0.5))
    w.add(error(0.85, [0.0, 0.0]))                         # and t = 0.3 too
    st = w.stats()['a']
    assert st.samples == 2 and st.rms_position == 0.0 and st.max_abs_position == 0.0
    assert w.stats(now=2.0) == {}                          # nothing in (1.5, 2.0]
    with pytest.raises(ValueError):
        m.ErrorWindow(0.0)


def test_window_restarts_when_stamps_go_back():
    w = m.ErrorWindow(window=10.0)
    w.add(error(5.0, [1.0, 1.0]))
    w.add(error(1.0, [0.0, 0.0]))
    assert w.stats()['a'].samples == 1 and w.stats()['a'].rms_position == 0.0


# --------------------------------------------------------------------------------- thresholds
def test_threshold_level_boundaries():
    t = m.Threshold(warn=0.05, error=0.2)
    assert t.level(0.0) == m.OK
    assert t.level(0.0499) == m.OK
    assert t.level(0.05) == m.WARN                        # warn is inclusive
    assert t.level(0.1999) == m.WARN
    assert t.level(0.2) == m.ERROR                        # error is inclusive
    assert t.level(math.inf) == m.ERROR
    assert t.level(math.nan) == m.STALE


def test_thresholds_overrides_first_matching_glob_and_defaults_for_missing_keys():
    th = m.Thresholds.from_config(0.05, 0.2, 'rh_TH*: {warn: 0.1, error: 0.3}\n'
                                             'rh_THJ5: {warn: 0.01}\n'
                                             'rh_[FM]FJ1: {error: 0.5}\n')
    assert th.for_joint('rh_THJ5') == m.Threshold(0.1, 0.3)        # first glob wins
    assert th.for_joint('rh_FFJ1') == m.Threshold(0.05, 0.5)       # warn from the default
    assert th.for_joint('rh_RFJ1') == m.Threshold(0.05, 0.2)
    assert th.for_joint('RH_THJ1') == m.Threshold(0.05, 0.2)       # case-sensitive
    assert th.level('rh_THJ4', 0.25) == m.WARN and th.level('rh_FFJ3', 0.25) == m.ERROR
    assert th.unused_globs(['rh_FFJ1', 'rh_THJ5']) == ['rh_THJ5']           # shadowed by rh_TH*
    assert th.unused_globs(['rh_FFJ1']) == ['rh_TH*', 'rh_THJ5']
    assert th.unused_globs(['rh_MFJ1', 'rh_THJ1']) == ['rh_THJ5']
    assert m.Thresholds.from_config(0.05, 0.2, '').overrides == []


@pytest.mark.parametrize('warn, error, overrides, match', [
    (0.3, 0.2, '', r'default .*error \(0.2 rad\) must be >= warn \(0.3 rad\)'),
    (0.0, 0.2, '', r'warn threshold of the default .* must be > 0'),
    (-0.1, 0.2, '', r'must be > 0'),
    (0.05, 0.2, 'rh_TH*: {error: 0.01}', r"joints 'rh_TH\*'.*error \(0.01 rad\) must be >= warn \(0.05 rad\)"),
    (0.05, 0.2, 'rh_FFJ3: {warn: 0.5}', r"joints 'rh_FFJ3'.*error \(0.2 rad\) must be >= warn \(0.5 rad\)"),
    (0.05, 0.2, 'rh_FFJ3: {warn: fast}', r"warn threshold of joints 'rh_FFJ3'.* finite number.*'fast'"),
    (0.05, 0.2, 'rh_FFJ3: {wran: 0.1}', r"joints 'rh_FFJ3'.*unknown key.*wran"),
    (0.05, 0.2, 'rh_FFJ3: 0.1', r"joints 'rh_FFJ3'.*must be \{warn"),
    (0.05, 0.2, '[rh_FFJ3]', r'must map joint globs'),
    (0.05, 0.2, 'rh_FFJ3: {warn: [', r'threshold_overrides is not valid YAML'),
    (0.05, math.inf, '', r'finite number'),
])
def test_bad_thresholds_are_refused_naming_the_joint_glob(warn, error, overrides, match):
    with pytest.raises(ConfigError, match=match):
        m.Thresholds.from_config(warn, error, overrides)


# ------------------------------------------------------------------------------------ monitor
def stream(mon, which, t0, n, positions, rate=250.0, arrival=0.0):
    add = mon.add_real if which == 'real' else mon.add_sim
    for k in range(n):
        add(sample(t0 + k / rate, positions(t0 + k / rate), [0.0, 0.0]), arrival)


def test_monitor_aligns_the_sim_to_the_real_stamp():
    mon = m.SimRealMonitor(m.Thresholds(), window=2.0)
    # sim a(t) = t; real a(t) = t - 0.5 sampled 2 ms later: latest-vs-latest would be off by 0.002
    stream(mon, 'sim', 10.0, 100, lambda t: [t, 0.0])
    stream(mon, 'real', 10.002, 99, lambda t: [t - 0.5, 0.1])
    err = mon.update()
    assert err.t == pytest.approx(10.002 + 98 / 250)
    np.testing.assert_allclose(err.position, [0.5, -0.1], atol=1e-9)
    assert mon.update() is None                            # nothing new: nothing published twice


def test_monitor_uses_the_newest_real_sample_the_sim_has_reached():
    mon = m.SimRealMonitor(m.Thresholds(), max_gap=0.0)
    stream(mon, 'sim', 0.0, 10, lambda t: [t, 0.0])        # up to 0.036
    stream(mon, 'real', 0.001, 12, lambda t: [0.0, 0.0])   # up to 0.045: ahead of the sim
    err = mon.update()
    assert err.t == pytest.approx(0.033)                   # newest real <= 0.036
    np.testing.assert_allclose(err.position[0], 0.033)
    stream(mon, 'sim', 0.040, 3, lambda t: [t, 0.0])       # the sim catches up to 0.048
    assert mon.update().t == pytest.approx(0.045)


def test_monitor_holds_the_newest_sim_sample_within_max_gap_only():
    mon = m.SimRealMonitor(m.Thresholds(), max_gap=0.05)
    mon.add_sim(sample(1.0, [0.2, 0.0]), 0.0)
    mon.add_real(sample(1.03, [0.0, 0.0]), 0.0)
    assert mon.update().position[0] == pytest.approx(0.2)
    mon.add_real(sample(1.2, [0.0, 0.0]), 0.0)
    assert mon.update() is None


def test_monitor_report_levels_worst_joint_and_staleness():
    th = m.Thresholds(0.05, 0.2, {'b': {'warn': 0.01, 'error': 0.5}})
    mon = m.SimRealMonitor(th, window=1.0, stale_after=0.5, real_label='/joint_states', sim_label='/sim/js')
    report = mon.report(now=0.0)
    assert report.level == m.STALE and '/joint_states' in report.message and '/sim/js' in report.message
    for k in range(50):
        t = 1.0 + k * 0.02
        mon.add_sim(sample(t, [0.0, 0.0]), arrival=t)
        mon.add_real(sample(t, [0.3, 0.03]), arrival=t)
        mon.update()
    report = mon.report(now=2.0)
    by_name = {j.name: j for j in report.joints}
    assert [j.name for j in report.joints] == ['a', 'b']
    assert by_name['a'].level == m.ERROR and by_name['a'].stats.rms_position == pytest.approx(0.3)
    assert by_name['a'].message == 'RMS error 0.300 rad over 1.0 s'
    assert by_name['b'].level == m.WARN and by_name['b'].threshold == m.Threshold(0.01, 0.5)
    assert report.level == m.ERROR and report.worst == 'a'
    assert report.message.startswith('worst joint a: RMS error 0.300 rad (ERROR)')
    assert '1 ERROR, 1 WARN of 2 joints' in report.message
    late = mon.report(now=2.0 + 0.6)                       # both streams silent for 0.62 s
    assert {j.level for j in late.joints} == {m.STALE} and late.level == m.STALE
    assert 'nothing received on /joint_states for 0.6 s' in late.message and late.worst == 'a'
    assert 'last: RMS error 0.300 rad' in late.joints[0].message


def test_monitor_ok_when_streams_agree():
    mon = m.SimRealMonitor(m.Thresholds(), window=1.0)
    for k in range(20):
        t = k * 0.01
        mon.add_sim(sample(t, [0.01, -0.02]), t)
        mon.add_real(sample(t, [0.0, 0.0]), t)
        mon.update()
    report = mon.report(now=0.2)
    assert report.level == m.OK and [j.level for j in report.joints] == [m.OK, m.OK]
    assert report.worst == 'b'                             # highest RMS among equals


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


# -------------------------------------------------------------------------------- perspectives
# The rqt perspectives of shadow_twin.plots.perspective (ROS-free: JSON files).
CONFIG = Path(__file__).resolve().parents[3] / 'config'
PLOTS, MONITOR = CONFIG / persp.PLOTS_FILE, CONFIG / persp.MONITOR_FILE
TOPIC = re.compile(r'^(?P<topic>/.+)/position\[(?P<index>\d+)\]$')


def model_joint_order() -> list[str]:
    """The built-in model's hinge/slide joints in model order, read with MuJoCo directly."""
    import mujoco

    from shadow_twin.model.mjcf import builtin_model_path
    model = mujoco.MjModel.from_xml_path(str(builtin_model_path()))
    kinds = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    return [model.joint(j).name for j in range(model.njnt) if int(model.jnt_type[j]) in kinds and model.joint(j).name]


def imported_value(value):
    """One value as qt_gui's PerspectiveManager imports it: repr evaluated; a QByteArray as bytes."""
    if value['type'] == 'repr':
        return ast.literal_eval(value['repr'])
    assert value['type'] == 'repr(QByteArray.hex)'
    text = value['repr(QByteArray.hex)']
    assert text.startswith("QtCore.QByteArray(b'") and text.endswith("')"), text
    return bytes.fromhex(text[len("QtCore.QByteArray(b'"):-2])


def imported(node):
    """The perspective as rqt imports it: every value evaluated."""
    return {'keys': {k: imported_value(v) for k, v in node['keys'].items()},
            'groups': {k: imported(g) for k, g in node['groups'].items()}}


def plots(data) -> list[tuple[str, list[tuple[str, int]]]]:
    """[(dock title, [(topic, index), ...])] of the rqt_plot instances, by serial number."""
    manager = imported(data['groups']['pluginmanager'])
    out = []
    for serial in manager['keys']['running-plugins']['rqt_plot/Plot']:
        group = manager['groups'][f'plugin__rqt_plot__Plot__{serial}']
        topics = group['groups']['plugin']['keys']['topics']
        topics = [topics] if isinstance(topics, str) else topics          # rqt_py_common's unpack()
        parsed = [TOPIC.match(t) for t in topics]
        assert all(parsed), topics
        title = group['groups']['dock_widget__DataPlotWidget']['keys']['dock_widget_title']
        out.append((title, [(p['topic'], int(p['index'])) for p in parsed]))
    return out


class QtStream:
    """Reads the QDataStream (Qt 5, big-endian) of a window's geometry and state, independently
    of shadow_twin.plots.qt_layout (formats: Qt 5.15 qwidget.cpp, qdockarealayout.cpp)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str):
        values = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return values if len(values) > 1 else values[0]

    def string(self) -> str:
        n = self.take('>I')
        self.at += n
        return self.data[self.at - n:self.at].decode('utf-16-be')

    def geometry(self) -> dict:
        assert self.take('>IHH') == (0x1D9D0CB, 3, 0)
        frame, normal = self.take('>4i'), self.take('>4i')
        screen, maximized, full_screen, screen_width = self.take('>iBBi')
        return {'frame': frame, 'normal': normal, 'screen': screen, 'maximized': maximized,
                'full_screen': full_screen, 'screen_width': screen_width, 'geometry': self.take('>4i')}

    def sequence(self):
        """A dock area's layout: ('h' or 'v', [dock name or nested sequence, ...])."""
        assert self.take('>B') == 0xfc                                 # a sequence (not tabbed)
        orientation, count = self.take('>Bi')
        items = []
        for _ in range(count):
            kind = self.take('>B')
            if kind == 0xfb:                                           # a dock widget
                name, flags = self.string(), self.take('>B')
                pos, size, _, _ = self.take('>4i')
                assert flags == 1 and size > 0, (name, flags, size)   # docked and visible
                items.append(name)
            else:
                assert kind == 0xfc
                self.take('>4i')
                items.append(self.sequence())
        return {1: 'h', 2: 'v'}[orientation], items

    def state(self) -> dict:
        assert self.take('>iiB') == (0xff, 0, 0xfd)
        areas = {}
        for _ in range(self.take('>i')):
            area, width, height = self.take('>3i')
            areas[area] = (width, height, self.sequence())
        self.take('>2i')                                               # central widget size
        corners = self.take('>4i')
        assert self.take('>Bi') == (0xfc, 1)                           # one line of tool bars
        area, count = self.take('>2i')
        toolbar = self.string()
        visible, pos, size, geom0, geom1 = self.take('>BiiII')
        assert self.at == len(self.data)
        return {'areas': areas, 'corners': corners, 'toolbar': (area, count, toolbar, visible)}


def main_window(data) -> dict:
    keys = imported(data['groups']['mainwindow'])['keys']
    return {'geometry': QtStream(keys['geometry']).geometry(), 'state': QtStream(keys['state']).state()}


def test_shipped_perspectives_are_what_the_generator_writes():
    shipped = persp.shipped_perspectives()
    assert sorted(p.name for p in CONFIG.glob('*.perspective')) == sorted(shipped)
    for name, data in shipped.items():
        assert (CONFIG / name).read_text() == persp.perspective_text(data), name


def test_perspectives_have_the_rqt_export_structure():
    data = json.loads(PLOTS.read_text())
    assert set(data) == {'keys', 'groups'} and set(data['groups']) == {'mainwindow', 'pluginmanager'}
    manager = imported(data['groups']['pluginmanager'])
    assert manager['keys']['running-plugins'] == {'rqt_plot/Plot': [1, 2, 3, 4, 5]}   # no robot monitor here
    assert set(manager['groups']) == {f'plugin__rqt_plot__Plot__{k}' for k in range(1, 6)}
    settings = manager['groups']['plugin__rqt_plot__Plot__1']['groups']['plugin']['keys']
    assert settings['autoscroll'] is True and settings['x_limits'] == [0.0, 10.0]
    assert settings['y_limits'] == pytest.approx([-0.05, 1.5708 + 0.05])          # rh_FFJ3's range + margin
    data = json.loads(MONITOR.read_text())
    manager = imported(data['groups']['pluginmanager'])
    assert manager['keys']['running-plugins'] == {'rqt_robot_monitor/RobotMonitor': [1]}
    group = manager['groups']['plugin__rqt_robot_monitor__RobotMonitor__1']['groups']
    assert group['dock_widget__Robot Monitor']['keys']['dock_widget_title'] == 'Robot Monitor: /diagnostics_agg'
    splitter = QtStream(group['plugin']['keys']['splitter'])         # what RobotMonitorWidget restores
    assert splitter.take('>iii') == (0xff, 1, 3)
    errors, warnings, devices = splitter.take('>3i')
    assert devices >= 27 * 17 and devices > errors + warnings          # every joint's row in view
    assert splitter.take('>BiBiB') == (1, 9, 1, 2, 0) and splitter.at == len(splitter.data)
    assert persp.needed_topics(data) == ['/diagnostics_agg']


def test_windows_fit_1920x1080_side_by_side_with_the_plots_in_a_grid():
    windows = {}
    for path in (PLOTS, MONITOR):
        window = main_window(json.loads(path.read_text()))
        geometry = window['geometry']
        assert geometry['frame'] == geometry['normal'] == geometry['geometry']
        x1, y1, x2, y2 = geometry['geometry']
        assert 0 <= x1 < x2 < 1920 and 0 <= y1 < y2 < 1080 - 40           # room for a panel and a title bar
        assert (geometry['screen_width'], geometry['maximized'], geometry['full_screen']) == (1920, 0, 0)
        windows[path.name] = (x1, x2)
        state = window['state']
        assert state['corners'] == (4, 4, 8, 8) and state['toolbar'] == (3, 1, 'MinimizedDockWidgetsToolbar', 0)
        (area,) = state['areas']
        assert area == 3                                                  # the bottom dock area, as rqt adds docks
        width, height, _ = state['areas'][3]
        assert width == x2 - x1 + 1 and 0 < height < y2 - y1 + 1
    assert windows[persp.PLOTS_FILE][1] < windows[persp.MONITOR_FILE][0]  # side by side, no overlap
    assert main_window(json.loads(PLOTS.read_text()))['state']['areas'][3][2] == ('h', [('v', [
        ('h', ['rqt_plot__Plot__1__DataPlotWidget', 'rqt_plot__Plot__2__DataPlotWidget']),
        ('h', ['rqt_plot__Plot__3__DataPlotWidget', 'rqt_plot__Plot__4__DataPlotWidget']),
        'rqt_plot__Plot__5__DataPlotWidget'])])
    assert main_window(json.loads(MONITOR.read_text()))['state']['areas'][3][2] == (
        'h', ['rqt_robot_monitor__RobotMonitor__1__Robot Monitor'])
    # an odd number of joints: the last one alone in its row
    layout = main_window(persp.build_plots_perspective(['rh_FFJ3', 'rh_MFJ3', 'rh_RFJ3']))['state']['areas'][3][2]
    assert layout[1][0][1][1] == ('h', ['rqt_plot__Plot__3__DataPlotWidget'])


def test_perspective_indices_name_the_right_joints():
    order = model_joint_order()
    assert order == persp.published_joints()[0]            # what mujoco_bridge publishes
    found = plots(json.loads(PLOTS.read_text()))
    for (title, topics), joint in zip(found, persp.DEFAULT_JOINTS):
        assert title.startswith(joint)
        assert [t for t, _ in topics] == ['/joint_states', '/sim/joint_states']
        assert [order[i] for _, i in topics] == [joint, joint]
    title, topics = found[-1]
    assert len(found) == len(persp.DEFAULT_JOINTS) + 1 and title.startswith('sim - real')
    assert {t for t, _ in topics} == {'/twin/joint_error'}
    assert [order[k] for _, k in topics] == list(persp.DEFAULT_JOINTS)       # error order = real = model order
    assert [k for _, k in topics] == [3, 4, 7, 20]
    assert persp.needed_topics(json.loads(PLOTS.read_text())) == [
        f'{topic}/position[{k}]' for _, fields in found for topic, k in fields]


def test_perspective_with_another_real_joint_order():
    sim_order = model_joint_order()
    real_order = ['lh_EXTRA'] + sim_order[::-1]           # the robot publishes an extra joint, reversed
    data = persp.build_plots_perspective(['rh_THJ4', 'rh_FFJ3'], real_joints=real_order, real_topic='/robot/joints')
    found = plots(data)
    (_, thj4), (_, ffj3), (_, error) = found
    assert thj4 == [('/robot/joints', real_order.index('rh_THJ4')), ('/sim/joint_states', 20)]
    assert ffj3 == [('/robot/joints', real_order.index('rh_FFJ3')), ('/sim/joint_states', 3)]
    # /twin/joint_error: the real joints the sim has, in the real order (lh_EXTRA left out)
    common = sim_order[::-1]
    assert error == [('/twin/joint_error', common.index('rh_THJ4')), ('/twin/joint_error', common.index('rh_FFJ3'))]


def test_perspective_main_writes_the_file_and_refuses_bad_joints(tmp_path, capsys):
    out = tmp_path / 'sub' / 'twin.perspective'
    assert persp_cli.main(['--joints', 'rh_MFJ3', '--out', str(out)]) == 0
    assert f'open with: shadow-twin rqt --perspective {out}' in capsys.readouterr().out
    (title, topics), _ = plots(json.loads(out.read_text()))
    assert title.startswith('rh_MFJ3') and topics == [('/joint_states', 7), ('/sim/joint_states', 7)]
    before = out.read_text()
    for args, message in [(['--joints', 'rh_FFJ3,rh_XXJ9,rh_FFJ0'], "unknown joint(s) ['rh_XXJ9', 'rh_FFJ0']"),
                          (['--joints', 'rh_FFJ3,rh_FFJ3'], "joint(s) ['rh_FFJ3'] given more than once"),
                          (['--joints', ''], 'give one or more joint names'),
                          (['--joints', 'rh_FFJ3', '--real-order', 'rh_FFJ2,rh_FFJ4'],
                           "joint(s) ['rh_FFJ3'] are not in the real joint order")]:
        capsys.readouterr()
        assert persp_cli.main([*args, '--out', str(out)]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith('shadow-twin perspective: error: ') and message in err, err
        assert out.read_text() == before                    # nothing written
    with pytest.raises(SystemExit) as info:
        persp_cli.main(['--joints', 'rh_FFJ3'])                 # --out is required
    assert info.value.code == 2
    monitor = tmp_path / 'monitor.perspective'
    assert persp_cli.main(['--monitor', '--out', str(monitor)]) == 0
    assert monitor.read_text() == MONITOR.read_text()


def test_read_perspective_names_the_problem(tmp_path):
    with pytest.raises(ConfigError, match='none.perspective does not exist'):
        persp.read_perspective(tmp_path / 'none.perspective')
    (tmp_path / 'text.perspective').write_text('not json')
    with pytest.raises(ConfigError, match='is not readable JSON'):
        persp.read_perspective(tmp_path / 'text.perspective')
    (tmp_path / 'other.perspective').write_text('{"keys": {}, "groups": {}}')
    with pytest.raises(ConfigError, match='is not an rqt perspective'):
        persp.read_perspective(tmp_path / 'other.perspective')
    assert persp.read_perspective(PLOTS) == json.loads(PLOTS.read_text())


# --------------------------------------------------------------------------- cell perspectives
CELL_PLOTS, CELL_MONITOR = CONFIG / persp.CELL_PLOTS_FILE, CONFIG / persp.CELL_MONITOR_FILE
FIELD = re.compile(r'^(?P<topic>/.+?)/(?P<field>position\[\d+\]|vector/[xyz])$')


def cell_joint_order() -> list[str]:
    """The cell's hinge/slide joints in model order (what the sim bridge publishes), read with MuJoCo."""
    import mujoco

    from shadow_twin.model.cell.assembly import CellConfig, build_cell_spec, compile_cell
    model = compile_cell(build_cell_spec(CellConfig.from_yaml(CONFIG / 'cell.yaml')))
    kinds = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    return [model.joint(j).name for j in range(model.njnt) if int(model.jnt_type[j]) in kinds and model.joint(j).name]


def all_plot_fields(data) -> list[tuple[str, list[str]]]:
    """[(dock title, [field, ...])] of every rqt_plot, by serial number."""
    manager = imported(data['groups']['pluginmanager'])
    out = []
    for serial in manager['keys']['running-plugins']['rqt_plot/Plot']:
        group = manager['groups'][f'plugin__rqt_plot__Plot__{serial}']
        topics = group['groups']['plugin']['keys']['topics']
        topics = [topics] if isinstance(topics, str) else topics
        assert all(FIELD.match(t) for t in topics), topics
        out.append((group['groups']['dock_widget__DataPlotWidget']['keys']['dock_widget_title'], topics))
    return out


def index_of(field: str) -> int:
    return int(field.rsplit('[', 1)[1].rstrip(']'))


def test_cell_perspective_plots_arm_joints_from_their_topics_and_the_base_error():
    cell = cell_joint_order()
    assert cell == persp.cell_published_joints()[0]
    ur5 = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint', 'wrist_2_joint',
           'wrist_3_joint']                                              # what mock_ur publishes
    hand = model_joint_order()                                          # what the mock hand publishes
    found = all_plot_fields(json.loads(CELL_PLOTS.read_text()))
    assert len(found) == len(persp.DEFAULT_CELL_JOINTS) + 2
    for (title, (real, sim)), joint in zip(found, persp.DEFAULT_CELL_JOINTS):
        assert title == f'{joint}: real vs sim (rad)'
        assert real.startswith('/joint_states/') and ur5[index_of(real)] == joint
        assert sim.startswith('/sim/joint_states/') and cell[index_of(sim)] == joint
    title, errors = found[-2]
    error_order = ur5 + hand                      # the monitor's message: /joint_states, then /rh/joint_states
    assert title.startswith('sim - real (rad): shoulder_pan_joint')
    assert [error_order[index_of(f)] for f in errors] == list(persp.DEFAULT_CELL_JOINTS)
    assert all(f.startswith('/twin/joint_error/position[') for f in errors)
    title, base = found[-1]
    assert title == 'base: sim - real (x, y m; yaw rad)'
    assert base == ['/twin/base_error/vector/x', '/twin/base_error/vector/y', '/twin/base_error/vector/z']
    settings = imported(json.loads(CELL_PLOTS.read_text())['groups']['pluginmanager'])['groups']
    limits = {k: g['groups']['plugin']['keys']['y_limits'] for k, g in settings.items()}
    assert limits['plugin__rqt_plot__Plot__1'] == pytest.approx([-math.pi - 0.05, math.pi + 0.05])  # +-2 pi clipped
    assert limits['plugin__rqt_plot__Plot__6'] == pytest.approx(list(persp.BASE_Y_LIMITS))
    # a hand joint comes from /rh/joint_states, after the arm's joints in the error message
    (_, (real, sim)), (_, err), _ = all_plot_fields(persp.build_cell_plots_perspective(['rh_FFJ3']))
    assert real == f'/rh/joint_states/position[{hand.index("rh_FFJ3")}]' and cell[index_of(sim)] == 'rh_FFJ3'
    assert err == [f'/twin/joint_error/position[{6 + hand.index("rh_FFJ3")}]']
    # a UR driver publishing another order
    (_, (real, _)), (_, err), _ = all_plot_fields(persp.build_cell_plots_perspective(
        ['elbow_joint'], arm_joints=['wrist_3_joint', 'elbow_joint']))
    assert (real, err) == ('/joint_states/position[1]', ['/twin/joint_error/position[1]'])
    with pytest.raises(ConfigError, match=r"joint\(s\) \['shoulder_pan_joint'\] are not in the real joint order"):
        persp.build_cell_plots_perspective(['shoulder_pan_joint'], arm_joints=['elbow_joint'])
    with pytest.raises(ConfigError, match=r"unknown joint\(s\) \['rh_XXJ1'\]"):
        persp.build_cell_plots_perspective(['rh_XXJ1'])


def test_cell_windows_fit_the_screen_with_the_error_plots_side_by_side():
    for path in (CELL_PLOTS, CELL_MONITOR):
        geometry = main_window(json.loads(path.read_text()))['geometry']
        reference = main_window(json.loads((PLOTS if path == CELL_PLOTS else MONITOR).read_text()))['geometry']
        assert geometry == reference                                     # the hand's windows' places
    assert main_window(json.loads(CELL_PLOTS.read_text()))['state']['areas'][3][2] == ('h', [('v', [
        ('h', ['rqt_plot__Plot__1__DataPlotWidget', 'rqt_plot__Plot__2__DataPlotWidget']),
        ('h', ['rqt_plot__Plot__3__DataPlotWidget', 'rqt_plot__Plot__4__DataPlotWidget']),
        ('h', ['rqt_plot__Plot__5__DataPlotWidget', 'rqt_plot__Plot__6__DataPlotWidget'])])])
    data = json.loads(CELL_MONITOR.read_text())
    group = imported(data['groups']['pluginmanager'])['groups']['plugin__rqt_robot_monitor__RobotMonitor__1']
    splitter = QtStream(group['groups']['plugin']['keys']['splitter'])
    assert splitter.take('>iii') == (0xff, 1, 3)
    panes = splitter.take('>3i')
    assert panes[2] >= (30 + 1 + 3) * 17 and sum(panes) == sum(persp.MONITOR_PANES)   # 30 joints, base, 3 more
    assert persp.needed_topics(data) == ['/diagnostics_agg']


def test_perspective_main_writes_the_cell_files(tmp_path, capsys):
    out = tmp_path / 'cell.perspective'
    assert persp_cli.main(['--cell', '--out', str(out)]) == 0
    assert out.read_text() == CELL_PLOTS.read_text() and 'base pose error plot' in capsys.readouterr().out
    assert persp_cli.main(['--cell', '--monitor', '--out', str(out)]) == 0
    assert out.read_text() == CELL_MONITOR.read_text()
    for args, message in [(['--cell', '--real-order', 'a,b'], '--real-order do(es) not apply to --cell'),
                          (['--arm-order', 'elbow_joint'], '--arm-order need(s) --cell'),
                          (['--cell', '--joints', 'rh_XXJ9'], "unknown joint(s) ['rh_XXJ9']")]:
        capsys.readouterr()
        assert persp_cli.main([*args, '--out', str(tmp_path / 'x.perspective')]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith('shadow-twin perspective: error: ') and message in err, err
    assert not (tmp_path / 'x.perspective').exists()
