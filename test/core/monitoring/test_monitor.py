"""ROS-free tests of the twin monitor's core (shadow_twin.monitoring.joint.error) on one real
stream: history and interpolation, sim minus real, the RMS window, thresholds and levels, the
monitor. Several real streams (the cell's arm and hand topics): test_monitor_streams.py; the rqt
perspectives: test_perspectives.py; the base's pose error: test_base_error.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.monitoring.joint import error as m


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
