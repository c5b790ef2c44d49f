"""The external-force watch (shadow_twin.monitoring.effort_watch) on synthetic UR5 recordings whose
efforts the model itself predicts, plus a known residual: a step is flagged after the debounce,
noise at 1 sigma never is, bad samples are dropped with one warning each, and the offline run
flags exactly what the live path does."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.model.cell.names import UR5_JOINTS
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.monitoring.effort_settings import NOMINAL_UR_DRIVE_GAINS, EffortSettings, nominal_drive
from shadow_twin.monitoring.effort_watch import EffortWatch, detection_delay
from shadow_twin.monitoring.thresholds import ERROR, OK, WARN
from shadow_twin.simulation.effort import DriveParameters, InverseDynamics

DT = 0.008                  # s, the UR driver's 125 Hz
RATES = np.array([1.0, 1.3, 1.7, 2.0, 2.3, 2.9])   # rad/s of each joint's sine
SIGMA = 0.05                # A


@pytest.fixture(scope='module')
def inverse():
    return InverseDynamics(TwinModel('package://shadow_twin/models/ur5.xml').model, UR5_JOINTS)


def recording(inverse, seconds: float = 4.0, drive: DriveParameters | None = None):
    """(t, q, qd, effort): every joint on a sine, effort = the model's prediction in A."""
    t = np.arange(0.0, seconds, DT)
    q = 0.5 * np.sin(np.outer(t, RATES))
    qd = 0.5 * np.cos(np.outer(t, RATES)) * RATES
    qdd = -q * RATES ** 2
    drive = drive or nominal_drive(UR5_JOINTS)
    return t, q, qd, drive.to_effort(inverse.torques(q, qd, qdd), UR5_JOINTS)


def watch(inverse, warnings=None, **settings) -> EffortWatch:
    base = dict(fallback_sigma=SIGMA, debounce_samples=3, hold_time=0.2, k_warn=3.0, k_error=5.0)
    base.update(settings)
    return EffortWatch(inverse, nominal_drive(UR5_JOINTS), EffortSettings(**base),
                       on_warning=None if warnings is None else warnings.append)


def test_the_model_predicts_its_own_efforts_within_a_thousandth_of_sigma(inverse):
    t, q, qd, effort = recording(inverse)
    run = watch(inverse).run(t, q, qd, effort)
    assert len(run.t) == len(t) - 2                  # window 3: the first and last samples have no centre
    assert np.allclose(run.t, t[1:-1]) and np.allclose(run.known_at, t[2:])   # known one sample late
    assert np.abs(run.residual).max() < 1e-3 * SIGMA
    assert not run.intervals() and (run.levels == OK).all()


def test_without_velocities_the_positions_give_them(inverse):
    t, q, qd, effort = recording(inverse)
    run = watch(inverse).run(t, q, None, effort)
    assert np.abs(run.residual).max() < 0.05 * SIGMA


@pytest.mark.parametrize('samples', [1, 3, 5])
def test_a_residual_step_is_flagged_after_the_debounce(inverse, samples):
    t, q, qd, effort = recording(inverse)
    onset = int(2.0 / DT)
    effort[onset:, 1] += 10 * SIGMA                  # shoulder lift: 10 sigma from stamp t[onset]
    run = watch(inverse, debounce_samples=samples).run(t, q, qd, effort)
    first = [tr for tr in run.transitions if tr.level >= WARN]
    assert first and first[0].joint == 'shoulder_lift_joint' and first[0].level == ERROR
    # the step's sample is the samples-th over the threshold; known one sample (the window's half) later
    assert first[0].t == pytest.approx(t[onset + samples - 1])
    assert detection_delay(run, t[onset]) == pytest.approx(samples * DT)
    assert [(iv.joint, iv.worst) for iv in run.intervals()] == [('shoulder_lift_joint', ERROR)]
    assert run.levels[-1, 1] == ERROR and (run.levels[:, [0, 2, 3, 4, 5]] == OK).all()


def test_debounce_time_enters_before_the_sample_count(inverse):
    t, q, qd, effort = recording(inverse)
    onset = int(2.0 / DT)
    effort[onset:, 2] -= 4 * SIGMA                   # elbow: WARN (3..5 sigma)
    run = watch(inverse, debounce_samples=100, debounce_time=0.02).run(t, q, qd, effort)
    warn = next(tr for tr in run.transitions if tr.level >= WARN)
    assert warn.level == WARN and warn.t == pytest.approx(t[onset] + 0.024)   # first stamp >= 20 ms over


def test_recovery_waits_for_the_hold_time(inverse):
    t, q, qd, effort = recording(inverse)
    a, b = int(1.0 / DT), int(1.5 / DT)
    effort[a:b, 0] += 10 * SIGMA
    run = watch(inverse, hold_time=0.2).run(t, q, qd, effort)
    (iv,) = run.intervals()
    assert iv.start == pytest.approx(t[a + 2]) and iv.end == pytest.approx(t[b] + 0.2 - DT, abs=1e-9)
    back = run.transitions[-1]
    assert back.level == OK and back.t == pytest.approx(t[b] + 0.2)


def test_noise_at_one_sigma_is_never_flagged(inverse):
    t, q, qd, effort = recording(inverse, seconds=40.0)
    rng = np.random.default_rng(7)
    effort += rng.normal(0.0, SIGMA, effort.shape)
    run = watch(inverse).run(t, q, qd, effort)
    assert np.std(run.residual) == pytest.approx(SIGMA, rel=0.05)
    assert run.transitions == [] and detection_delay(run, 0.0) == math.inf


def test_identified_sigma_wins_over_the_globs_and_the_fallback(inverse):
    drive = DriveParameters('A', {j: 10.0 for j in UR5_JOINTS}, residual_sigma={'elbow_joint': 0.2})
    w = EffortWatch(inverse, drive, EffortSettings(k_warn=3.0, k_error=5.0, fallback_sigma=0.1,
                                                   sigma_overrides={'wrist_*': 0.03}))
    assert w.sigma.tolist() == [0.1, 0.1, 0.2, 0.03, 0.03, 0.03]
    warn, error = w.thresholds
    assert warn.tolist() == pytest.approx([0.3, 0.3, 0.6, 0.09, 0.09, 0.09])
    assert error.tolist() == pytest.approx([0.5, 0.5, 1.0, 0.15, 0.15, 0.15])


def test_bad_samples_are_dropped_with_one_warning_each_and_never_raise(inverse):
    t, q, qd, effort = recording(inverse, seconds=1.0)
    warnings: list[str] = []
    w = watch(inverse, warnings)
    names = list(UR5_JOINTS)
    out = [w.add(t[k], names, q[k], qd[k], effort[k]) for k in range(20)]
    assert out[:2] == [None, None] and all(o is not None for o in out[2:])
    bad_q = q[20].copy()
    bad_q[3] = math.nan
    assert w.add(t[20], names, bad_q, qd[20], effort[20]) is None
    assert w.add(t[21], names, q[21], qd[21], [math.inf] * 6) is None
    assert w.add(t[10], names, q[10], qd[10], effort[10]) is None           # a stamp going back
    assert w.add(t[19], names, q[19], qd[19], effort[19]) is None           # the same stamp again
    assert w.add(t[22], names, q[22], qd[22], []) is None                   # no effort field
    assert w.add(t[22], names, q[22], qd[22], effort[22][:3]) is None       # effort cut short
    assert w.add(t[22], names, q[22][:4], qd[22], effort[22]) is None       # positions cut short
    assert w.add(t[22], ['rh_FFJ1'], [0.1], [0.0], [0.0]) is None           # another driver's: silent
    assert w.dropped == {'NaN or infinite values': 2, 'stamps not after the previous one': 2,
                         'no effort field': 2, 'fields that do not match the names': 1}
    assert len(warnings) == 4 and all(line.count('\n') == 0 for line in warnings)
    assert w.add(t[22], names, q[22], qd[22], effort[22]) is not None       # goes on
    assert w.levels() == (OK,) * 6


def test_a_stamp_gap_restarts_the_window(inverse):
    t, q, qd, effort = recording(inverse, seconds=1.0)
    w = watch(inverse, max_gap=0.05)
    names = list(UR5_JOINTS)
    for k in range(5):
        w.add(t[k], names, q[k], qd[k], effort[k])
    assert w.add(t[5] + 0.1, names, q[5], qd[5], effort[5]) is None         # a new window
    assert w.add(t[6] + 0.1, names, q[6], qd[6], effort[6]) is None
    assert w.add(t[7] + 0.1, names, q[7], qd[7], effort[7]) is not None


def test_live_and_offline_flag_the_same_samples(inverse):
    t, q, qd, effort = recording(inverse)
    rng = np.random.default_rng(3)
    effort += rng.normal(0.0, 0.5 * SIGMA, effort.shape)
    effort[200:260, 4] += 4 * SIGMA
    effort[300:330, 1] -= 8 * SIGMA
    offline = watch(inverse).run(t, q, qd, effort)
    live = watch(inverse)
    # live messages name the joints in another order, with a hand joint among them
    order = [5, 0, 3, 1, 4, 2]
    names = ['rh_WRJ1'] + [UR5_JOINTS[j] for j in order]
    levels = []
    for k in range(len(t)):
        pick = lambda a: np.concatenate([[0.0], a[k][order]])   # noqa: E731
        sample = live.add(t[k], names, pick(q), pick(qd), pick(effort))
        if sample is not None:
            levels.append(sample.levels)
    assert np.array_equal(np.array(levels), offline.levels)
    assert live.transitions == offline.transitions
    assert {iv.joint for iv in offline.intervals()} == {'wrist_2_joint', 'shoulder_lift_joint'}


def test_nominal_drive_gains_and_units():
    drive = nominal_drive(['ra_shoulder_pan_joint', 'wrist_2_joint', 'rh_FFJ1'])
    assert drive.effort_unit == 'A'
    assert drive.drive_gains == {'ra_shoulder_pan_joint': NOMINAL_UR_DRIVE_GAINS['*shoulder_pan_joint'],
                                 'wrist_2_joint': NOMINAL_UR_DRIVE_GAINS['*wrist_2_joint'], 'rh_FFJ1': 1.0}
    assert nominal_drive(['elbow_joint'], 'Nm').gains(['elbow_joint']).tolist() == [1.0]
    with pytest.raises(ConfigError, match='effort_unit'):
        nominal_drive(['elbow_joint'], 'mA')


@pytest.mark.parametrize('settings, message', [
    ({'k_warn': 0.0}, 'k_warn'), ({'k_warn': 5.0, 'k_error': 3.0}, 'k_error'), ({'fallback_sigma': -1.0},
                                                                                'fallback_sigma'),
    ({'window': 4}, 'window'), ({'debounce_samples': 0}, 'debounce_samples'), ({'hold_time': math.nan}, 'hold_time'),
    ({'sigma_overrides': {'wrist_*': 0.0}}, "wrist_"),
])
def test_bad_settings_are_refused_in_one_line(settings, message):
    with pytest.raises(ConfigError, match=message) as err:
        EffortSettings(**settings)
    assert '\n' not in str(err.value)


def test_a_joint_standing_since_the_start_holds_a_friction_the_watch_cannot_know(inverse):
    """Standing since the watch began, a joint's current holds whatever static friction its last
    move left: its thresholds widen by frictionloss / drive gain, and a residual inside that band
    is not flagged. Once the joint has moved ten presliding distances the band is gone, and the same
    residual, standing again, is flagged."""
    from shadow_twin.simulation.friction import PRESLIDING_DISTANCE
    model = TwinModel('package://shadow_twin/models/ur5.xml').model
    dofs = [model.jnt_dofadr[model.joint(j).id] for j in UR5_JOINTS]
    model.dof_frictionloss[dofs] = 6.0                                  # N m
    rough = InverseDynamics(model, UR5_JOINTS)
    drive = nominal_drive(UR5_JOINTS)
    band = 6.0 / drive.gains(UR5_JOINTS)
    t = np.arange(0.0, 5.0, DT)
    q = np.zeros((t.size, 6))
    ramp = np.clip((t - 2.0) / 0.5, 0.0, 1.0)
    q[:, 1] = 10 * PRESLIDING_DISTANCE * ramp * ramp * (3 - 2 * ramp)    # 10 mrad, 2.0-2.5 s, then still
    qd, qdd = np.gradient(q, t, axis=0), np.gradient(np.gradient(q, t, axis=0), t, axis=0)
    effort = drive.to_effort(rough.torques(q, qd, qdd), UR5_JOINTS)
    residual = 3.0 * SIGMA + 0.8 * band[1]                              # over k_warn sigma, inside the band
    effort[(t < 1.5) | (t > 3.5), 1] += residual
    watch = EffortWatch(rough, drive, EffortSettings(fallback_sigma=SIGMA, k_warn=3.0, k_error=5.0))
    samples = [s for s in (watch.add(tk, UR5_JOINTS, qk, qdk, ek) for tk, qk, qdk, ek in zip(t, q, qd, effort))
               if s is not None]
    first, later = samples[0], next(s for s in samples if s.t > 3.5)
    assert first.band == pytest.approx(band)                            # nothing moved yet: the whole band
    assert later.band[1] < 1e-3 * band[1] and later.band[0] == pytest.approx(band[0])
    flagged = [tr for tr in watch.transitions if tr.level >= WARN]
    assert flagged and {tr.joint for tr in flagged} == {'shoulder_lift_joint'}, flagged
    assert min(tr.t for tr in flagged) > 3.5                            # the same residual: flagged only then
