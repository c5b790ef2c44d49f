"""ROS-free tests of the twin monitor's base pose error (shadow_twin.monitoring.base_error): planar
poses from odometry, yaw interpolation across +-pi, sim minus real with wrapped yaw, time alignment,
the RMS window, thresholds, levels and staleness."""

from __future__ import annotations

import math

import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.monitoring import base_error as b
from shadow_twin.monitoring.joint.error import ERROR, OK, STALE, WARN, Threshold


def pose(t, x=0.0, y=0.0, yaw=0.0, stamp=None):
    return b.PlanarPose(t, x, y, yaw, stamp)


def quaternion(yaw):
    """(x, y, z, w) of a rotation by ``yaw`` about z."""
    return 0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2)


# ------------------------------------------------------------------------------------- poses
def test_planar_pose_takes_the_yaw_of_the_odometry_quaternion():
    for yaw in (0.0, 0.3, -2.0, 3.1):
        p = b.planar_pose(1.5, 0.2, -0.1, *quaternion(yaw), stamp='s')
        assert (p.t, p.x, p.y, p.stamp) == (1.5, 0.2, -0.1, 's') and p.yaw == pytest.approx(yaw)
    with pytest.raises(ValueError, match='zero quaternion'):
        b.planar_pose(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match='finite'):
        b.planar_pose(math.nan, 0.0, 0.0, *quaternion(0.0))


def test_pose_history_interpolates_yaw_along_the_shorter_arc():
    h = b.PoseHistory(max_age=10.0)
    h.add(pose(0.0, 0.0, 0.0, 3.1))
    h.add(pose(0.02, 0.01, 0.0, -3.1))              # turned on by 0.083 rad through +-pi, not back by 6.2
    mid = h.at(0.01)
    assert mid.x == pytest.approx(0.005)
    assert math.cos(mid.yaw) == pytest.approx(math.cos(math.pi), abs=1e-3)     # about +-pi, not 0
    assert h.latest().yaw == pytest.approx(2 * math.pi - 3.1)                    # kept unwrapped
    assert h.at(0.05, max_gap=0.05).t == 0.02 and h.at(0.1, max_gap=0.05) is None
    h.add(pose(0.0, 5.0, 5.0, -3.1))                   # older: the stream restarted
    assert len(h) == 1 and h.latest().yaw == pytest.approx(-3.1)


def test_base_error_is_sim_minus_real_with_yaw_wrapped():
    err = b.base_error(pose(1.0, 1.0, 2.0, 3.1), pose(1.0, 0.7, 2.4, -3.1, stamp='real'))
    assert (err.t, err.stamp) == (1.0, 'real')
    assert (err.x, err.y) == (pytest.approx(0.3), pytest.approx(-0.4)) and err.position == pytest.approx(0.5)
    assert err.yaw == pytest.approx(6.2 - 2 * math.pi)          # -0.083 rad, not 6.2
    assert b.base_error(pose(0.0, yaw=-3.0), pose(0.0, yaw=3.0)).yaw == pytest.approx(2 * math.pi - 6.0)


# ----------------------------------------------------------------------------------- monitor
def drive(mon, which, t0, n, rate, x_of, yaw_of=lambda t: 0.0, arrival=None):
    add = mon.add_real if which == 'real' else mon.add_sim
    for k in range(n):
        t = t0 + k / rate
        add(pose(t, x_of(t), 0.5 * x_of(t), yaw_of(t)), t if arrival is None else arrival)


def test_monitor_compares_every_real_pose_with_the_sim_at_its_stamp():
    """50 Hz odometry 7 ms out of phase, both moving at 0.4 m/s along x and 0.2 m/s along y and
    turning at 3 rad/s through +-pi, the sim 0.03 m (x), 0.015 m (y) and 0.02 rad ahead: latest
    against latest would be off by 0.4 * 0.007 m; interpolated at each real stamp it is exact."""
    mon = b.BaseMonitor(window=2.0, max_gap=0.0)
    real_x, real_yaw = (lambda t: 0.4 * t - 0.03), (lambda t: 3.0 * t)
    drive(mon, 'sim', 10.0, 50, 50.0, lambda t: 0.4 * t, lambda t: 3.0 * t + 0.02)     # up to 10.98
    drive(mon, 'real', 10.007, 48, 50.0, real_x, real_yaw)                            # up to 10.947
    errors = mon.update()
    assert [e.t for e in errors] == pytest.approx([10.007 + k / 50 for k in range(48)])   # every one, in order
    for err in errors:
        assert (err.x, err.y, err.yaw) == (pytest.approx(0.03, abs=1e-9), pytest.approx(0.015, abs=1e-9),
                                           pytest.approx(0.02, abs=1e-9))
    assert mon.update() == []                               # nothing new
    drive(mon, 'real', 10.967, 2, 50.0, real_x, real_yaw)   # 10.967 within the sim, 10.987 beyond it (10.98)
    (err,) = mon.update()                                   # max_gap 0: 10.987 waits
    assert err.t == pytest.approx(10.967) and err.yaw == pytest.approx(0.02, abs=1e-9)
    assert mon.update() == []
    drive(mon, 'sim', 11.0, 1, 50.0, lambda t: 0.4 * t, lambda t: 3.0 * t + 0.02)
    (err,) = mon.update()
    assert err.t == pytest.approx(10.987) and err.x == pytest.approx(0.03, abs=1e-9)
    mon.max_gap = 0.05                                      # within max_gap: the newest sim pose is held
    drive(mon, 'real', 11.03, 1, 50.0, real_x, real_yaw)
    assert mon.update()[0].x == pytest.approx(0.4 * 11.0 - real_x(11.03))
    assert mon.stats().samples == 51


def test_real_poses_before_the_sim_history_are_skipped():
    mon = b.BaseMonitor(max_gap=0.0)
    drive(mon, 'real', 0.0, 10, 50.0, lambda t: 0.0)        # 0.0 .. 0.18
    drive(mon, 'sim', 0.1, 10, 50.0, lambda t: 0.1)         # 0.1 .. 0.28
    assert [e.t for e in mon.update()] == pytest.approx([0.1, 0.12, 0.14, 0.16, 0.18])


def test_report_rms_levels_and_the_worse_of_position_and_yaw():
    th = b.BaseThresholds.from_config(0.05, 0.2, 0.1, 0.3)
    mon = b.BaseMonitor(th, window=1.0, stale_after=0.5, real_label='/odom', sim_label='/sim/odom')
    report = mon.report(now=0.0)
    assert report.level == STALE and report.stats is None
    assert report.message == 'nothing received on /odom yet; nothing received on /sim/odom yet'
    # errors (x, y) = (0.03, 0.04) and (0.06, 0.08): hypot 0.05 and 0.1; yaw 0.0 and 0.1
    for k in range(50):
        t = 1.0 + k * 0.02
        big = k % 2
        mon.add_sim(pose(t, 0.03 * (1 + big), 0.04 * (1 + big), 0.1 * big), arrival=t)
        mon.add_real(pose(t), arrival=t)
        assert len(mon.update()) == 1
    st = mon.stats()
    assert st.rms_position == pytest.approx(math.sqrt((0.05 ** 2 + 0.1 ** 2) / 2))
    assert st.rms_yaw == pytest.approx(math.sqrt(0.01 / 2))
    assert (st.max_position, st.max_abs_yaw) == (pytest.approx(0.1), pytest.approx(0.1))
    assert (st.samples, st.window) == (50, 1.0)            # t in (1.98 - 1.0, 1.98]
    report = mon.report(now=2.0)
    assert th.levels(st) == (WARN, OK) and report.level == WARN
    assert report.message == f'RMS error {st.rms_position:.3f} m, {st.rms_yaw:.3f} rad over 1.0 s (position WARN)'
    mon.thresholds = b.BaseThresholds.from_config(0.01, 0.05, 0.01, 0.5)
    report = mon.report(now=2.0)
    assert report.level == ERROR and report.message.endswith('(position ERROR, yaw WARN)')
    late = mon.report(now=1.98 + 0.6)
    assert late.level == STALE and late.stats is not None
    assert late.message.startswith('nothing received on /odom for 0.6 s; nothing received on /sim/odom for 0.6 s')
    assert '(last: RMS error' in late.message


def test_report_ok_when_the_bases_agree_and_stale_without_comparisons():
    mon = b.BaseMonitor(window=0.5)
    drive(mon, 'sim', 0.0, 10, 50.0, lambda t: 0.2 * t)
    drive(mon, 'real', 0.0, 10, 50.0, lambda t: 0.2 * t + 0.001, arrival=0.2)
    mon.update()
    report = mon.report(now=0.2)
    assert report.level == OK and report.message == 'RMS error 0.001 m, 0.000 rad over 0.5 s'
    fresh = b.BaseMonitor()
    fresh.add_sim(pose(0.0), 0.0)
    fresh.add_real(pose(5.0), 0.0)                          # far ahead of the sim: no comparison
    assert fresh.update() == []
    assert fresh.report(now=0.1).level == STALE and 'no comparison in the last 2.0 s' in fresh.report(0.1).message


def test_a_real_stream_going_back_in_time_restarts_the_comparison():
    mon = b.BaseMonitor(window=10.0, max_gap=0.0)
    drive(mon, 'sim', 0.0, 20, 50.0, lambda t: 0.0)
    drive(mon, 'real', 0.1, 10, 50.0, lambda t: 0.0)
    assert mon.update()[-1].t == pytest.approx(0.28)
    mon.add_real(pose(0.05), 0.0)                            # restarted (e.g. sim time reset)
    assert [e.t for e in mon.update()] == [0.05]


@pytest.mark.parametrize('values, match', [
    ((0.3, 0.2, 0.1, 0.3), r'base position .*error \(0.2 m\) must be >= warn \(0.3 m\)'),
    ((0.05, 0.2, 0.0, 0.3), r'warn threshold of the base yaw .* must be > 0 rad'),
    ((0.05, math.inf, 0.1, 0.3), r'finite number \(m\)'),
    ((0.05, 0.2, 0.1, 'x'), r'error threshold of the base yaw .* finite number \(rad\)'),
])
def test_bad_base_thresholds_are_refused_naming_them(values, match):
    with pytest.raises(ConfigError, match=match):
        b.BaseThresholds.from_config(*values)


def test_default_thresholds():
    th = b.BaseThresholds()
    assert th.position == Threshold(b.DEFAULT_POSITION_WARN, b.DEFAULT_POSITION_ERROR) == Threshold(0.05, 0.2)
    assert th.yaw == Threshold(0.1, 0.3)
    with pytest.raises(ValueError):
        b.BaseMonitor(window=0.0)
    with pytest.raises(ValueError):
        b.BaseMonitor(stale_after=0.0)
