"""The drift watch's core (shadow_twin.monitoring.drift): buckets over moving time only, the
baseline after the first full window, drift by ratio and floor, restarts, persistence."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.monitoring.drift import DriftSettings, DriftTrend, load_state, save_state

NAMES = ('rh_FFJ3', 'rh_MFJ3', 'rh_LFJ3')
RATE = 50.0            # Hz, the monitor's comparisons
SETTINGS = DriftSettings(window=10.0, bucket=1.0, ratio=2.0, min_error=0.01, min_motion=0.05)


def feed(trend: DriftTrend, t0: float, t1: float, error, moving=(True, True, True)) -> list[float]:
    """Comparisons from t0 to t1 s: constant-magnitude errors (rad, alternating sign) of NAMES;
    a moving joint sweeps 0.3 rad per second, a still one stays. Returns the stamps at which a
    bucket closed."""
    closed = []
    for k, t in enumerate(np.arange(t0, t1, 1.0 / RATE)):
        position = np.array([0.3 * math.sin(t) if m else 0.2 for m in moving])
        sign = 1.0 if k % 2 else -1.0
        if trend.add(float(t), NAMES, sign * np.asarray(error, dtype=float), position):
            closed.append(float(t))
    return closed


def verdict(trend: DriftTrend) -> dict:
    return {j.name: j for j in trend.report()}


def test_settings_are_checked():
    with pytest.raises(ConfigError, match='must be >= drift.bucket'):
        DriftSettings(window=1.0, bucket=2.0)
    with pytest.raises(ConfigError, match='drift.ratio must be > 1'):
        DriftSettings(ratio=1.0)
    with pytest.raises(ConfigError, match='>= 0 rad'):
        DriftSettings(min_error=-0.1)


def test_buckets_close_on_stamps_and_the_trend_is_the_rms_of_moving_time():
    trend = DriftTrend(SETTINGS)
    closed = feed(trend, 100.0, 104.0, [0.02, 0.04, 0.0])
    assert closed == pytest.approx([101.0, 102.0, 103.0], abs=1.5 / RATE)   # one per second, as stamps cross
    assert trend.trend() == pytest.approx({'rh_FFJ3': 0.02, 'rh_MFJ3': 0.04, 'rh_LFJ3': 0.0})
    # standing still with a large error (a steady offset) does not dilute nor raise the trend
    feed(trend, 104.0, 108.0, [0.5, 0.5, 0.5], moving=(False, False, False))
    assert trend.trend() == pytest.approx({'rh_FFJ3': 0.02, 'rh_MFJ3': 0.04, 'rh_LFJ3': 0.0})
    assert verdict(trend)['rh_FFJ3'].buckets == 4               # 100..104: the moving ones


def test_the_baseline_is_the_first_full_window_and_drift_needs_ratio_and_floor():
    trend = DriftTrend(SETTINGS)
    feed(trend, 0.0, 9.5, [0.01, 0.002, 0.02])
    assert trend.baseline == {} and trend.pending() == pytest.approx(0.5, abs=0.05)
    feed(trend, 9.5, 11.5, [0.01, 0.002, 0.02])
    assert trend.baseline == pytest.approx({'rh_FFJ3': 0.01, 'rh_MFJ3': 0.002, 'rh_LFJ3': 0.02})
    assert trend.pending() == 0.0
    assert not any(j.drifted for j in trend.report())
    # wear: FF's error triples; MF's grows 4x but stays under the 0.01 rad floor; LF unchanged
    feed(trend, 11.5, 30.0, [0.03, 0.008, 0.02])
    joints = verdict(trend)
    assert joints['rh_FFJ3'].drifted and joints['rh_FFJ3'].ratio == pytest.approx(3.0, rel=0.01)
    assert not joints['rh_MFJ3'].drifted and joints['rh_MFJ3'].ratio == pytest.approx(4.0, rel=0.01)
    assert not joints['rh_LFJ3'].drifted
    assert trend.baseline['rh_FFJ3'] == pytest.approx(0.01)     # the baseline stays
    # only the last window counts: buckets older than 10 s are gone
    assert min(start for start, _ in trend.buckets) >= 29.0 - SETTINGS.window - 1e-9


def test_a_joint_that_did_not_move_gets_its_baseline_when_it_does():
    trend = DriftTrend(SETTINGS)
    assert trend.pending() is None
    feed(trend, 0.0, 11.0, [0.01, 0.01, 0.01], moving=(True, True, False))
    assert set(trend.baseline) == {'rh_FFJ3', 'rh_MFJ3'} and trend.pending() == 0.0
    feed(trend, 11.0, 13.0, [0.01, 0.01, 0.03])                 # LF starts moving at 11 s
    assert 'rh_LFJ3' not in trend.baseline and trend.pending() == pytest.approx(8.0, abs=0.05)
    feed(trend, 13.0, 21.5, [0.01, 0.01, 0.03])                 # its full window: 11..21 s
    assert trend.baseline['rh_LFJ3'] == pytest.approx(0.03)


def test_a_calibration_restarts_trend_and_baseline_and_by_hand_it_is_set_now():
    trend = DriftTrend(SETTINGS)
    feed(trend, 0.0, 12.0, [0.01, 0.01, 0.01])
    feed(trend, 12.0, 25.0, [0.05, 0.01, 0.01])
    assert verdict(trend)['rh_FFJ3'].drifted
    trend.restart_baseline('calibration installed: /m/v2.xml', '/m/v2.xml')
    assert trend.report() == [] and trend.model == '/m/v2.xml' and trend.pending() is None
    feed(trend, 25.0, 30.0, [0.004, 0.01, 0.01])
    assert trend.baseline == {}                                 # half a window after the install
    feed(trend, 30.0, 37.0, [0.004, 0.01, 0.01])
    assert trend.baseline['rh_FFJ3'] == pytest.approx(0.004)
    assert trend.baseline_source == 'calibration installed: /m/v2.xml'
    feed(trend, 37.0, 50.0, [0.02, 0.01, 0.01])
    assert verdict(trend)['rh_FFJ3'].drifted
    assert trend.set_baseline_now() == list(sorted(NAMES))
    assert trend.baseline['rh_FFJ3'] == pytest.approx(0.02) and not verdict(trend)['rh_FFJ3'].drifted


def test_a_stamp_going_back_drops_only_the_open_bucket():
    trend = DriftTrend(SETTINGS)
    feed(trend, 100.0, 103.5, [0.01, 0.01, 0.01])
    buckets = len(trend.buckets)
    feed(trend, 50.0, 50.5, [0.5, 0.5, 0.5])                    # restarted clock: half a bucket
    assert len(trend.buckets) == buckets and trend.trend()['rh_FFJ3'] == pytest.approx(0.01)


def test_the_state_survives_a_restart(tmp_path):
    trend = DriftTrend(SETTINGS)
    trend.model = '/models/hand_v1.xml'
    feed(trend, 1000.0, 1012.0, [0.01, 0.02, 0.03])
    path = save_state(trend, tmp_path / 'sub' / 'drift.json')
    assert not list(path.parent.glob('.*.tmp'))                 # written atomically, nothing left over
    again = load_state(path, SETTINGS, fail)
    assert again.baseline == pytest.approx(trend.baseline) and again.model == '/models/hand_v1.xml'
    assert again.trend() == pytest.approx(trend.trend())
    assert again.baseline_source == trend.baseline_source
    feed(again, 1012.0, 1030.0, [0.05, 0.02, 0.03])             # goes on where it stopped
    assert [j.name for j in again.report() if j.drifted] == ['rh_FFJ3']
    # other bucket length: the buckets are dropped, the baseline stays
    other = load_state(path, DriftSettings(window=10.0, bucket=2.0), fail)
    assert other.buckets == [] and other.baseline == pytest.approx(trend.baseline)
    assert load_state(tmp_path / 'none.json', None, fail) is None


def fail(line: str) -> None:
    raise AssertionError(f'unexpected report: {line}')


@pytest.mark.parametrize('text, message', [
    ('{not json', 'Expecting property name'),
    ('[1, 2]', 'not a JSON object'),
    (json.dumps({'version': 99}), 'version 99'),
    (json.dumps({'version': 1, 'bucket_s': 1.0, 'buckets': [[0.0, {'a': 'x'}]]}), 'malformed'),
    ('{"version": 1, "baseline": {"rh_FFJ3": NaN}}', 'baseline nan'),
    (json.dumps({'version': 1, 'baseline': {'rh_FFJ3': -1.0}}), 'baseline -1.0'),
    (json.dumps({'version': 1, 'model': ['a']}), "model ['a'] is not text"),
    (json.dumps({'version': 1, 'bucket_s': 1.0, 'buckets': [[1e400, {}]]}), 'bucket start inf'),
    ('[' * 200_000, 'RecursionError'),
])
def test_a_bad_state_file_is_named_moved_aside_and_the_trend_starts_fresh(tmp_path, text, message):
    """One line naming the file and the problem; the file kept aside, never overwritten; a fresh
    trend (None) instead."""
    path = tmp_path / 'drift.json'
    path.write_text(text)
    lines: list[str] = []
    assert load_state(path, SETTINGS, lines.append) is None
    assert len(lines) == 1 and str(path) in lines[0] and message in lines[0], lines
    aside = list(tmp_path.glob('drift.json.corrupt-*'))
    assert not path.exists() and len(aside) == 1 and aside[0].read_text() == text
    assert f'moved aside to {aside[0]}' in lines[0]
    path.write_text(text)                                       # again in the same second: a new name
    assert load_state(path, SETTINGS, lines.append) is None
    assert len(list(tmp_path.glob('drift.json.corrupt-*'))) == 2 and aside[0].read_text() == text


def test_idle_means_robot_and_sim_still_for_the_idle_time():
    from shadow_twin.monitoring.drift import IdleWatch
    idle = IdleWatch(idle_time=1.0, still=0.01)
    assert not idle.idle()
    for t in np.arange(0.0, 2.0, 0.02):                           # moving: never idle
        idle.add(0, t, NAMES, [0.3 * t, 0.0, 0.0], [0.3 * t, 0.0, 0.0])
        assert not idle.idle()
    for t in np.arange(2.0, 2.9, 0.02):                           # still, with noise below 0.01 rad
        idle.add(0, t, NAMES, [0.6, 0.005, 0.0], [0.6, 0.0, -0.005])
    assert not idle.idle()
    idle.add(0, 3.05, NAMES, [0.6, 0.0, 0.0], [0.6, 0.0, 0.0])
    assert idle.idle()
    idle.add(0, 3.1, NAMES, [0.6, 0.0, 0.0], [0.65, 0.0, 0.0])     # the sim moves: not idle
    assert not idle.idle()
    with pytest.raises(ValueError):
        IdleWatch(idle_time=0.0)


def test_a_model_is_known_by_its_content_and_a_new_one_restarts_the_baseline(tmp_path):
    from shadow_twin.monitoring.drift import model_identity
    a, b, c = tmp_path / 'a.xml', tmp_path / 'copy' / 'a.xml', tmp_path / 'calibrated.xml'
    b.parent.mkdir()
    a.write_text('<mujoco/>')
    b.write_text('<mujoco/>')
    c.write_text('<mujoco model="calibrated"/>')
    assert model_identity(str(a)) == model_identity(str(b)) != model_identity(str(c))
    assert model_identity(str(a)).startswith('sha256:')
    assert model_identity('/not/here.xml') == '/not/here.xml'
    trend = DriftTrend(SETTINGS)
    feed(trend, 0.0, 12.0, [0.01, 0.01, 0.01])
    trend.restart_baseline(f'calibration installed: {c}', str(c), model_identity(str(c)))
    again = load_state(save_state(trend, tmp_path / 'drift.json'), SETTINGS, fail)
    assert (again.model, again.model_id) == (str(c), model_identity(str(c))) and again.baseline == {}
