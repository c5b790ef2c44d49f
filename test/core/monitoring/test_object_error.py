"""ROS-free tests of the twin monitor's object pose error (shadow_twin.monitoring.object_error): slerp
interpolation, the error of known geometry, time alignment (waiting for the sim), the RMS window, levels,
staleness, and bad input dropped and counted with one warning per kind per source."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation, Slerp

from shadow_twin.common.errors import ConfigError
from shadow_twin.monitoring import object_error as o
from shadow_twin.monitoring.thresholds import ERROR, OK, STALE, WARN


def quat(rotvec) -> np.ndarray:
    """Unit quaternion w x y z of a rotation vector (rad)."""
    x, y, z, w = Rotation.from_rotvec(rotvec).as_quat()
    return np.array([w, x, y, z])


def pose(t, position=(0.0, 0.0, 0.0), rotvec=(0.0, 0.0, 0.0)):
    return o.ObjectPose(t, np.asarray(position, dtype=float), quat(rotvec))


# ------------------------------------------------------------------------------- interpolation
def test_interpolation_is_linear_in_position_and_slerp_in_orientation():
    a, b = pose(1.0, (0.0, 0.1, 0.2), (0.1, -0.2, 0.3)), pose(1.02, (0.01, 0.1, 0.18), (0.4, 0.1, -0.5))
    slerp = Slerp([1.0, 1.02], Rotation.from_quat([np.roll(a.quat, -1), np.roll(b.quat, -1)]))
    for t in (1.0, 1.005, 1.01, 1.0173, 1.02):
        mid = o.interpolate(a, b, t)
        assert mid.t == t
        np.testing.assert_allclose(mid.position, a.position + (t - 1.0) / 0.02 * (b.position - a.position), atol=1e-12)
        expected = slerp([t])[0]
        assert (Rotation.from_quat(np.roll(mid.quat, -1)).inv() * expected).magnitude() < 1e-9
        assert np.linalg.norm(mid.quat) == pytest.approx(1.0)


def test_interpolation_takes_the_shorter_arc_whatever_the_quaternion_sign():
    a, b = pose(0.0, rotvec=(0.0, 0.0, 0.2)), pose(1.0, rotvec=(0.0, 0.0, 0.4))
    flipped = o.ObjectPose(1.0, b.position, -b.quat)           # the same orientation
    mid = o.interpolate(a, flipped, 0.5)
    assert o.object_error(mid, pose(0.5, rotvec=(0.0, 0.0, 0.3))).angle == pytest.approx(0.0, abs=1e-9)


def test_pose_buffer_interpolates_inside_its_span_only_and_forgets_old_poses():
    buf = o.PoseBuffer(max_age=0.1)
    assert buf.span() is None and buf.at(0.0) is None
    for k in range(20):
        buf.add(pose(k * 0.01, (k * 0.001, 0.0, 0.0)))
    assert buf.span() == pytest.approx((0.09, 0.19))                  # 0.1 s kept
    assert buf.at(0.125).position[0] == pytest.approx(0.0125)
    assert buf.at(0.19).t == 0.19 and buf.at(0.0895) is None and buf.at(0.1901) is None
    buf.add(pose(0.05))                                                # older: the stream restarted
    assert len(buf) == 1 and buf.span() == (0.05, 0.05)


# ------------------------------------------------------------------------------------- errors
def test_object_error_of_known_geometry():
    real = o.ObjectPose(2.0, np.array([0.5, 0.2, 0.9]), quat((0.0, 0.0, 1.0)), stamp='real')
    sim = o.ObjectPose(2.0, np.array([0.503, 0.204, 0.9]), quat((0.0, 0.0, 1.0 + 0.03)))
    err = o.object_error(sim, real)
    assert (err.t, err.stamp) == (2.0, 'real')
    assert err.position == pytest.approx(0.005)                        # a 3-4-5 mm triangle
    assert err.angle == pytest.approx(0.03)
    # a rotation about another axis: the angle of the relative rotation, not of the difference of angles
    tilted = o.ObjectPose(2.0, real.position, quat((0.04, 0.0, 0.0)))
    upright = o.ObjectPose(2.0, real.position, quat((0.0, 0.0, 0.0)))
    assert o.object_error(tilted, upright).angle == pytest.approx(0.04)


def offset_streams(mon, t0, duration, offset, turn, sim_rate=250.0, real_rate=100.0, arrival=0.0):
    """A moving, turning object: the sim exact, the real at ``offset`` (m, world) and turned by ``turn``
    (rotation vector, rad, about the object's moving orientation: applied on the right). Sim first."""
    def truth(t):
        return np.array([0.3 + 0.2 * (t - t0), -0.1 * (t - t0), 0.8]), np.array([0.0, 0.0, 0.5 * (t - t0)])
    for k in range(int(duration * sim_rate) + 1):
        t = t0 + k / sim_rate
        p, r = truth(t)
        assert mon.add_sim(t, p, quat(r), 'world', arrival) is None
    for k in range(int(duration * real_rate)):
        t = t0 + (k + 0.37) / real_rate                         # between sim stamps
        p, r = truth(t)
        q = (Rotation.from_rotvec(r) * Rotation.from_rotvec(turn)).as_quat()
        assert mon.add_real(t, p + offset, np.roll(q, 1), 'world', arrival) is None


def test_the_error_of_a_constant_offset_is_found_at_every_real_stamp():
    mon = o.ObjectErrorMonitor(window=2.0)
    offset, turn = np.array([0.0, 0.003, -0.004]), np.array([0.0, 0.01, 0.0])
    offset_streams(mon, 100.0, 0.5, offset, turn)
    errors = mon.update()
    assert len(errors) == 50                                  # every real pose, once
    assert mon.update() == []
    for e in errors:
        assert e.position == pytest.approx(0.005, abs=1e-9)  # linear motion: exact
        assert e.angle == pytest.approx(0.01, abs=1e-9)      # constant-rate turn about one axis: slerp exact
    st = mon.stats()
    assert (st.samples, st.rms_position, st.max_angle) == (50, pytest.approx(0.005), pytest.approx(0.01))


def test_a_real_pose_ahead_of_the_sim_waits_for_it_and_one_before_it_is_skipped():
    mon = o.ObjectErrorMonitor()
    mon.add_real(0.995, (0.0, 0.0, 0.0), quat((0, 0, 0)), 'world', 0.0)        # before any sim pose
    mon.add_sim(1.0, (0.0, 0.0, 0.0), quat((0, 0, 0)), 'world', 0.0)
    mon.add_real(1.005, (0.0, 0.0, 0.0), quat((0, 0, 0)), 'world', 0.0)
    assert mon.update() == []                                  # 0.995 skipped, 1.005 waits
    assert len(mon.pending) == 1
    mon.add_sim(1.01, (0.002, 0.0, 0.0), quat((0, 0, 0)), 'world', 0.0)
    (err,) = mon.update()
    assert err.t == 1.005 and err.position == pytest.approx(0.001)           # half way: 1 mm


def test_rms_and_max_over_the_window_of_stamps():
    mon = o.ObjectErrorMonitor(window=0.5)
    offset_streams(mon, 10.0, 1.0, np.array([0.001, 0.0, 0.0]), np.zeros(3))
    offset_streams(mon, 11.0 + 1e-6, 0.3, np.array([0.004, 0.0, 0.0]), np.zeros(3))
    mon.update()
    st = mon.stats()                                           # window (10.8..11.3]: 20 at 1 mm, 30 at 4 mm
    assert st.samples == 50 and st.window == 0.5
    assert st.rms_position == pytest.approx(math.sqrt((20 * 1e-6 + 30 * 16e-6) / 50))
    assert st.max_position == pytest.approx(0.004) and st.rms_angle == pytest.approx(0.0, abs=1e-9)


def test_levels_stale_and_thresholds():
    assert o.ObjectErrorMonitor().report(0.0).level == STALE                   # nothing yet
    cases = [(np.array([0.001, 0, 0]), np.zeros(3), OK), (np.array([0.006, 0, 0]), np.zeros(3), WARN),
             (np.array([0.0, 0, 0.03]), np.zeros(3), ERROR), (np.zeros(3), np.array([0.06, 0, 0]), WARN),
             (np.zeros(3), np.array([0, 0.3, 0]), ERROR)]
    for offset, turn, level in cases:
        mon = o.ObjectErrorMonitor(stale_after=0.5)
        offset_streams(mon, 0.0, 0.3, offset, turn, arrival=5.0)
        mon.update()
        report = mon.report(5.1)
        assert report.level == level, report.message
        assert report.message.startswith('RMS error')
        late = mon.report(5.6)                                 # both sources silent for 0.6 s
        assert late.level == STALE and len(late.stale) == 2 and '(last: RMS error' in late.message
    with pytest.raises(ConfigError, match='object angle'):
        o.ObjectThresholds.from_config(0.005, 0.02, 0.1, 0.05)
    with pytest.raises(ConfigError, match='object position'):
        o.ObjectThresholds.from_config(0.0, 0.02, 0.05, 0.1)


# ---------------------------------------------------------------------------------- bad input
def test_bad_samples_are_dropped_counted_and_said_once_per_kind_and_source():
    mon = o.ObjectErrorMonitor(stale_after=0.5, real_label='/mocap/can/pose', sim_label='/sim/can/pose')
    good = ((0.0, 0.0, 0.0), quat((0, 0, 0)))
    assert mon.add_sim(1.0, *good, 'world', 0.0) is None and mon.add_sim(1.1, *good, 'world', 0.0) is None
    assert mon.add_real(1.0, *good, 'world', 0.0) is None
    bad = [((math.nan, 0, 0), good[1], 'world', 1.05, o.NOT_FINITE),
           (good[0], (1.0, 0.0, 0.0, math.inf), 'world', 1.05, o.NOT_FINITE),
           (good[0], (0.9, 0.0, 0.0, 0.0), 'world', 1.05, o.NOT_UNIT),
           (good[0], (0.0, 0.0, 0.0, 0.0), 'world', 1.05, o.NOT_UNIT),
           ((0, 0), good[1], 'world', 1.05, o.NOT_FINITE),
           ('x', good[1], 'world', 1.05, o.NOT_FINITE),
           (good[0], good[1], 'mocap', 1.05, o.WRONG_FRAME),
           (good[0], good[1], '', 1.05, o.WRONG_FRAME),
           (good[0], good[1], 'world', 1.0, o.NOT_AFTER),
           (good[0], good[1], 'world', 0.9, o.NOT_AFTER)]
    said = []
    for position, q, frame, t, kind in bad:
        for add in (mon.add_real, mon.add_sim):
            warning = add(t, position, q, frame, 0.1)
            if warning is not None:
                said.append(warning)
    assert len(said) == 2 * len(o.KINDS)                           # one per kind per source
    assert sum('/mocap/can/pose' in w for w in said) == len(o.KINDS)
    assert any('norm 0.9' in w for w in said) and any("frame 'mocap', expected 'world'" in w for w in said)
    real, sim = mon.checks['real'], mon.checks['sim']
    assert real.counts == sim.counts == {o.NOT_FINITE: 4, o.NOT_UNIT: 2, o.WRONG_FRAME: 2, o.NOT_AFTER: 2}
    assert (real.accepted, sim.accepted) == (1, 2)
    # still comparing: a good sample after the bad ones; a slightly off-norm quaternion is normalised
    assert mon.add_real(1.05, good[0], (1.0005, 0.0, 0.0, 0.0), 'world', 0.2) is None
    assert [e.t for e in mon.update()] == [1.0, 1.05]
    assert 'dropped 10 real, 10 sim' in mon.report(0.3).message


def test_a_source_whose_stamps_went_back_for_good_is_taken_again_after_stale_after():
    mon = o.ObjectErrorMonitor(stale_after=0.5)
    good = ((0.0, 0.0, 0.0), quat((0, 0, 0)))
    mon.add_sim(100.0, *good, 'world', 0.0)
    assert mon.add_sim(5.0, *good, 'world', 0.3) is not None         # back in time: dropped
    assert mon.add_sim(5.01, *good, 'world', 0.4) is None            # dropped too, said once
    assert mon.checks['sim'].counts[o.NOT_AFTER] == 2
    assert mon.add_sim(5.02, *good, 'world', 0.6) is None            # 0.6 s without an accepted sample
    assert mon.sim.span() == (5.02, 5.02) and mon.checks['sim'].accepted == 2
