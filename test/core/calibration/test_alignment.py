"""shadow_twin.calibration.recordings.alignment: motion onset, delay fit, resampling and nearest-timestamp matching."""

import numpy as np
import pytest
from conftest import README_JOINTS

from shadow_twin.calibration.recordings import alignment
from shadow_twin.common.errors import RecordingError
from shadow_twin.control.trajectory import JointTrajectory

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


# -- executions of a trajectory (occurrences) --------------------------------------------------
def executions(starts, trajectory, rest, end, begin=0.0, seed=6):
    """(times, positions) of a joint stream at 125 Hz from ``begin`` to ``end`` s that rests at
    ``rest`` and follows ``trajectory`` exactly from each of ``starts`` (s), holding its last
    point afterwards (the JTC's hold), with sensor noise."""
    rng = np.random.default_rng(seed)
    times = np.arange(begin, end, DT)
    positions = np.repeat(np.asarray(rest, dtype=float)[None], times.size, axis=0)
    state = np.asarray(rest, dtype=float)
    for start in starts:
        after = times >= start
        positions[after] = trajectory.with_start(state).sample(times[after] - start)[0]
        state = trajectory.positions[-1]
    return times, positions + rng.normal(0.0, 3e-4, positions.shape)


CLOSE_OPEN = JointTrajectory(['a', 'b'], [0.5, 2.0, 3.5], [[0.0, 0.0], [0.8, 0.4], [0.0, 0.0]], name='close_open')


def test_motion_episodes_merge_short_pauses():
    """A reversal (speed through zero) or a 0.2 s hold is one episode; 1.5 s of rest separates two."""
    times, positions = executions([1.0, 6.0], CLOSE_OPEN, [0.0, 0.0], 10.0)
    runs = alignment.motion_episodes(times, positions)
    assert len(runs) == 2
    for (first, last), start in zip(runs, [1.0, 6.0]):
        assert abs(times[first] - (start + 0.5)) <= 0.025 + DT   # the motion begins at point 0
        assert abs(times[last] - (start + 3.5)) <= 0.025 + DT
    hold = JointTrajectory(['a'], [1.0, 1.2, 2.0], [[0.5], [0.5], [0.0]])
    times, positions = executions([0.5], hold, [0.0], 4.0)   # 0 -> 0.5, hold 0.2 s, -> 0
    assert len(alignment.motion_episodes(times, positions)) == 1
    assert len(alignment.motion_episodes(times, positions, min_rest=0.1)) == 2
    assert alignment.motion_episodes(times[:50], positions[:50]) == []  # at rest before 0.5 s


def test_occurrences_are_placed_by_the_jtc_rule():
    """The first execution starts from rest at point 0: its motion starts at point 0's time. The
    second starts from the end point of a trajectory that does not end at its point 0: the JTC
    moves to point 0 from t = 0."""
    there_and_back = JointTrajectory(['a', 'b'], [0.5, 2.0], [[0.0, 0.0], [0.8, 0.4]])
    times, positions = executions([2.0, 6.0], there_and_back, [0.0, 0.0], 10.0)
    found = alignment.find_occurrences(times, positions, there_and_back)
    assert [o.number for o in found] == [1, 2] and all(o.complete for o in found)
    first, second = found
    assert first.motion_start == pytest.approx(0.5) and second.motion_start == 0.0
    assert abs(first.start - 2.0) <= 0.025 + DT and abs(second.start - 6.0) <= 0.025 + DT
    np.testing.assert_allclose(second.rest, [0.8, 0.4], atol=2e-3)
    assert not first.begins_in_motion and first.duration == pytest.approx(1.5, abs=0.05)
    assert second.describe(origin=1.0) == (f'occurrence 2: onset {second.onset - 1.0:.2f} s, motion until '
                                          f'{second.end - 1.0:.2f} s ({second.duration:.2f} s), complete')
    blind = alignment.find_occurrences(times, positions, there_and_back, start_tolerance=np.inf)
    assert blind[1].start == pytest.approx(second.start - 0.5)   # without the start state: 0.5 s early


def test_an_execution_with_a_long_hold_is_one_occurrence():
    """Motion, 1 s still (a repeated waypoint), motion: the second burst begins before the
    trajectory ends, so it continues the execution."""
    hold = JointTrajectory(['a'], [0.5, 1.0, 2.0, 2.5], [[0.0], [0.6], [0.6], [0.0]])
    times, positions = executions([1.0], hold, [0.0], 6.0)
    assert len(alignment.motion_episodes(times, positions)) == 2
    found = alignment.find_occurrences(times, positions, hold)
    assert len(found) == 1 and found[0].end == pytest.approx(3.5, abs=0.05)


def test_incomplete_occurrences_name_what_is_missing():
    times, positions = executions([1.0, 6.0], CLOSE_OPEN, [0.0, 0.0], 8.0)  # ends 2.0 s into the second
    first, second = alignment.find_occurrences(times, positions, CLOSE_OPEN, settle_time=3.0)
    assert first.complete and not second.complete
    covered = times[-1] - second.start
    assert covered == pytest.approx(2.0, abs=0.05)
    assert second.missing == (f'the recording ends {covered:.2f} s into the 3.50 s trajectory: the last '
                              f'{3.5 - covered:.2f} s and the 3 s settle time are missing')
    late = alignment.find_occurrences(times[times >= 2.0], positions[times >= 2.0], CLOSE_OPEN)
    assert late[0].begins_in_motion and late[0].onset == times[times >= 2.0][0]
    with pytest.raises(RecordingError, match='no motion onset'):
        alignment.find_occurrences(times[:100], positions[:100], CLOSE_OPEN)


def test_select_occurrence():
    times, positions = executions([1.0, 6.0], CLOSE_OPEN, [0.0, 0.0], 8.0)
    found = alignment.find_occurrences(times, positions, CLOSE_OPEN)
    assert alignment.select_occurrence(found).number == 1   # the first complete one
    assert alignment.select_occurrence(found, 1) is found[0]
    with pytest.raises(RecordingError, match=r'rec: occurrence 3 requested, the recording holds 2: at 1\.5\d s '
                                             r'and 6\.5\d s'):
        alignment.select_occurrence(found, 3, label='rec')
    with pytest.raises(RecordingError, match=r'occurrence 2 at 6\.5\d s is incomplete: the recording ends'):
        alignment.select_occurrence(found, 2)
    with pytest.raises(RecordingError, match=r'^rec: the recording ends \d\.\d\d s into the 3\.50 s trajectory'):
        alignment.select_occurrence(found[1:], label='rec')
    with pytest.raises(ValueError, match='start at 1'):
        alignment.select_occurrence(found, 0)
