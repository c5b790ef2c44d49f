"""shadow_twin.calibration.alignment: motion onset, delay fit, resampling and nearest-timestamp matching."""

import numpy as np
import pytest

from shadow_twin.calibration import alignment
from shadow_twin.common.errors import RecordingError

from conftest import README_JOINTS

DT = 0.008  # 125 Hz, as the real recording


def ramp_stream(onset_index=600, n=1500, slope=0.5, noise=3e-4, seed=0):
    """Three joints at rest with sensor noise; joint 1 starts a ramp at ``times[onset_index]``."""
    rng = np.random.default_rng(seed)
    times = 1000.0 + np.arange(n) * DT
    positions = rng.normal(0.0, noise, (n, 3)) + [0.2, -0.1, 0.4]
    t0 = times[onset_index]
    positions[:, 1] += np.where(times > t0, slope * (times - t0), 0.0)
    return times, positions, t0


@pytest.mark.parametrize('onset_index, slope, seed', [(600, 0.5, 0), (250, 0.6, 1), (1100, 0.3, 2)])
def test_onset_of_a_noisy_synthetic_stream(onset_index, slope, seed):
    """Speeds like the real hand_closing (1.57 rad in 3 s): onset within one sample."""
    times, positions, t0 = ramp_stream(onset_index, slope=slope, seed=seed)
    onset = alignment.detect_motion_onset(times, positions)
    assert abs(onset - t0) <= DT + 1e-9


@pytest.mark.parametrize('slope', [1.5, 5.0])
def test_onset_of_a_fast_ramp_is_within_the_smoothing_window(slope):
    """The centred moving average lets a fast motion show up to half a window early."""
    times, positions, t0 = ramp_stream(400, slope=slope, seed=4)
    onset = alignment.detect_motion_onset(times, positions, smoothing=0.05)
    assert t0 - 0.025 - DT <= onset <= t0 + DT
    unsmoothed = alignment.detect_motion_onset(times, positions, smoothing=DT)
    assert abs(unsmoothed - t0) <= DT + 1e-9


def test_onset_threshold_is_on_speed():
    times, positions, t0 = ramp_stream(slope=0.5)
    with pytest.raises(RecordingError, match='never move faster than 0.8 rad/s'):
        alignment.detect_motion_onset(times, positions, velocity_threshold=0.8)


def test_onset_on_the_real_recording(real_recording):
    times = real_recording.times
    onset = alignment.detect_motion_onset(times, real_recording.values(README_JOINTS))
    assert onset - times[0] == pytest.approx(9.5, abs=0.3)  # README: the hand rests about 9.5 s


def test_no_motion_raises():
    rng = np.random.default_rng(3)
    times = np.arange(500) * DT
    with pytest.raises(RecordingError, match='no motion onset'):
        alignment.detect_motion_onset(times, 0.5 + rng.normal(0, 3e-4, (500, 2)))
    with pytest.raises(RecordingError, match='too few samples'):
        alignment.detect_motion_onset(times[:2], np.zeros((2, 1)))


def smooth_signal(t):
    return np.stack([np.sin(2.0 * t) + 0.3 * np.sin(5.0 * t), np.cos(1.3 * t)], axis=1)


@pytest.mark.parametrize('delay', [0.123, -0.0715, 0.0])
def test_fit_delay_recovers_a_known_shift(delay):
    ref_times = np.arange(0.0, 5.0, 0.004)
    times = np.arange(-1.0, 6.0, DT)  # another, coarser clock
    values = smooth_signal(times - delay)  # values(t + delay) == reference(t)
    shift, cost = alignment.fit_delay(ref_times, smooth_signal(ref_times), times, values,
                                      max_shift=0.3, resolution=0.001)
    assert abs(shift - delay) <= 0.001
    assert cost < 1e-5
    coarse, _ = alignment.fit_delay(ref_times, smooth_signal(ref_times), times, values,
                                    max_shift=0.3, resolution=0.01)
    assert abs(coarse - delay) <= 0.01


def test_fit_delay_needs_overlap():
    t = np.arange(0.0, 1.0, 0.01)
    with pytest.raises(RecordingError, match='do not overlap'):
        alignment.fit_delay(t, smooth_signal(t), t + 5.0, smooth_signal(t), max_shift=0.2)


def test_resample_is_linear_interpolation():
    times = np.array([0.0, 0.5, 1.5, 2.0])
    values = np.stack([3.0 * times - 1.0, -2.0 * times], axis=1)
    mid = 0.5 * (times[1:] + times[:-1])
    np.testing.assert_allclose(alignment.resample(times, values, mid),
                               np.stack([3.0 * mid - 1.0, -2.0 * mid], axis=1), atol=1e-12)
    zigzag = np.array([0.0, 1.0, 0.0, 2.0])
    np.testing.assert_allclose(alignment.resample(times, zigzag, [0.25, 1.0, 1.75]), [[0.5], [0.5], [1.0]])
    np.testing.assert_allclose(alignment.resample(times, zigzag, times), zigzag[:, None])  # end points included
    for outside in ([-0.01, 1.0], [1.0, 2.01]):
        with pytest.raises(RecordingError, match='cannot resample'):
            alignment.resample(times, zigzag, outside)


def test_interpolation_weights_reproduce_interpolation():
    rng = np.random.default_rng(4)
    times = np.cumsum(rng.uniform(0.001, 0.01, 300))
    values = rng.normal(size=300)
    new = np.sort(rng.uniform(times[0], times[-1], 100))
    idx, w = alignment.interpolation_weights(times, new)
    np.testing.assert_allclose(values[idx] * (1 - w) + values[idx + 1] * w, np.interp(new, times, values),
                               atol=1e-12)


def test_nearest_indices():
    rng = np.random.default_rng(5)
    times = np.cumsum(rng.uniform(0.001, 0.01, 200))
    new = rng.uniform(times[0] - 0.05, times[-1] + 0.05, 300)
    brute = np.abs(times[None, :] - new[:, None]).argmin(axis=1)
    np.testing.assert_array_equal(alignment.nearest_indices(times, new), brute)
    np.testing.assert_array_equal(alignment.nearest_indices(np.array([0.0, 1.0, 2.0]), [-5.0, 0.4, 0.6, 9.0]),
                                  [0, 0, 1, 2])


def test_uniform_time_base():
    base = alignment.uniform_time_base(1.0, 2.0, 4.0)
    np.testing.assert_allclose(base, [1.0, 1.25, 1.5, 1.75, 2.0])
    assert alignment.uniform_time_base(0.0, 0.9, 4.0)[-1] == 0.75
    with pytest.raises(ValueError):
        alignment.uniform_time_base(0.0, 1.0, 0.0)
