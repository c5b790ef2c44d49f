"""Time alignment of real and simulated joint streams.

Steps (see :class:`shadow_twin.calibration.scoring.evaluation.Evaluator`): find the
executions of the trajectory in the real stream (:func:`find_occurrences`:
motion episodes separated by rest) and detect the chosen one's motion onset;
place the commanded trajectory's start there (by the joint trajectory
controller's semantics, :meth:`JointTrajectory.motion_start`); refine the
offset by fitting a delay (the shift that minimises the mean squared
difference between the two streams); resample both streams onto one uniform
time base by linear interpolation and keep only their overlap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from shadow_twin.common.errors import RecordingError
from shadow_twin.control.trajectory import START_TOLERANCE, JointTrajectory


def detect_motion_onset(times: np.ndarray, positions: np.ndarray, velocity_threshold: float = 0.1,
                        smoothing: float = 0.05) -> float:
    """Time at which the stream starts to move.

    The positions are smoothed by a centred moving average over ``smoothing``
    seconds, differentiated, and the onset is the first sample where any
    joint's speed exceeds ``velocity_threshold``.

    Args:
        times: (N,) s, increasing.
        positions: (N, J) rad.
        velocity_threshold: rad/s (default 0.1: above the sensor noise of the
            Shadow Hand's joint states, about 0.03 rad/s after smoothing).
        smoothing: window, s.
    Returns:
        Onset time, s (same clock as ``times``).
    Raises:
        RecordingError: fewer than 3 samples, or the stream never moves.
    """
    times = np.asarray(times, dtype=float)
    speed = joint_speed(times, positions, smoothing)
    moving = speed > velocity_threshold
    if not moving.any():
        raise RecordingError(f'the recorded joints never move faster than {velocity_threshold} rad/s '
                             f'(peak {speed.max():.3g} rad/s): no motion onset')
    return float(times[int(np.argmax(moving))])


def joint_speed(times: np.ndarray, positions: np.ndarray, smoothing: float = 0.05) -> np.ndarray:
    """Fastest joint's speed at each sample, rad/s: (N,).

    The positions ((N, J) rad at (N,) increasing times, s) are smoothed by a
    centred moving average over ``smoothing`` s and differentiated by central
    differences (``numpy.gradient``). Raises RecordingError for fewer than 3 samples.
    """
    times = np.asarray(times, dtype=float)
    positions = np.asarray(positions, dtype=float).reshape(times.size, -1)
    if times.size < 3:
        raise RecordingError('too few samples to detect motion')
    window = max(1, int(round(smoothing / np.median(np.diff(times)))))
    smooth = pd.DataFrame(positions).rolling(window, center=True, min_periods=1).mean().to_numpy()
    return np.abs(np.gradient(smooth, times, axis=0)).max(axis=1)


def motion_episodes(times: np.ndarray, positions: np.ndarray, velocity_threshold: float = 0.1,
                    smoothing: float = 0.05, min_rest: float = 0.5) -> list[tuple[int, int]]:
    """Runs of motion in a stream, as (first, last) sample indices, in time order.

    A sample moves when :func:`joint_speed` exceeds ``velocity_threshold``
    (the rule of :func:`detect_motion_onset`, so the first run starts at its
    onset); runs separated by less than ``min_rest`` s of rest (a
    reversal, a short hold) are one episode.

    Args:
        times: (N,) s, increasing; positions: (N, J) rad.
        velocity_threshold: rad/s; smoothing: s; min_rest: s.
    Returns:
        [(first index, last index), ...]; empty when nothing moves.
    Raises:
        RecordingError: fewer than 3 samples.
    """
    times = np.asarray(times, dtype=float)
    return _merge_runs(times, joint_speed(times, positions, smoothing) > velocity_threshold, min_rest)


def _merge_runs(times: np.ndarray, moving: np.ndarray, min_rest: float) -> list[tuple[int, int]]:
    """(first, last) indices of the runs of True in ``moving``, gaps under ``min_rest`` s merged."""
    edges = np.diff(np.concatenate([[0], moving.astype(np.int8), [0]]))
    firsts, lasts = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    runs: list[tuple[int, int]] = []
    for first, last in zip(firsts, lasts):
        if runs and times[first] - times[runs[-1][1]] < min_rest:
            runs[-1] = (runs[-1][0], int(last))
        else:
            runs.append((int(first), int(last)))
    return runs


@dataclass
class Occurrence:
    """One execution of a trajectory found in a recording (see :func:`find_occurrences`).

    Attributes:
        number: 1-based, in time order.
        onset: motion onset, s (recording clock).
        end: last moving sample of the execution, s.
        start: trajectory start placed from the onset (onset - motion start), s.
        motion_start: ``time_from_start`` of the motion onset, s (0 when the rest state is
            away from point 0: the JTC moves to point 0 from t = 0).
        rest: (J,) rest state before the onset, rad (median of the rest samples up to
            ``smoothing`` s before it; the onset sample when none).
        begins_in_motion: the recording's first sample already moves (no rest before the
            onset was recorded: the true onset may be earlier; it is taken as the first sample).
        missing: what of the trajectory the recording lacks ('' when complete).
    """

    number: int
    onset: float
    end: float
    start: float
    motion_start: float
    rest: np.ndarray
    begins_in_motion: bool = False
    missing: str = ''

    @property
    def complete(self) -> bool:
        """The recording covers the trajectory up to its end."""
        return not self.missing

    @property
    def duration(self) -> float:
        """Time from the onset to the last moving sample, s."""
        return self.end - self.onset

    def describe(self, origin: float = 0.0) -> str:
        """One line: number, onset and end (s from ``origin``), duration, completeness."""
        state = 'complete' if self.complete else f'incomplete: {self.missing}'
        early = ' (moving at the first sample)' if self.begins_in_motion else ''
        return (f'occurrence {self.number}: onset {self.onset - origin:.2f} s{early}, motion until '
                f'{self.end - origin:.2f} s ({self.duration:.2f} s), {state}')


def find_occurrences(times: np.ndarray, positions: np.ndarray, trajectory: JointTrajectory,
                     velocity_threshold: float = 0.1, smoothing: float = 0.05, min_rest: float = 0.5,
                     start_tolerance: float = START_TOLERANCE, settle_time: float = 0.0,
                     onset_columns: list[int] | None = None) -> list[Occurrence]:
    """Executions of ``trajectory`` in a recorded stream.

    Motion episodes (:func:`motion_episodes`) are executions, except that an
    episode beginning before the previous execution's trajectory has ended
    (its start plus the trajectory duration) continues it (a trajectory can
    hold still between waypoints). Each execution's start is placed by the
    joint trajectory controller's semantics: ``onset - motion_start(rest)``
    (:meth:`JointTrajectory.motion_start` with the rest state before the onset).

    Args:
        times: (N,) s, increasing.
        positions: (N, J) rad, columns in ``trajectory.joint_names`` order.
        trajectory: the commanded trajectory (of those J joints).
        velocity_threshold, smoothing, min_rest: see :func:`motion_episodes` (rad/s, s, s).
        start_tolerance: rest-to-point-0 difference that is a motion, rad.
        settle_time: time compared after the trajectory's end, s (named when missing).
        onset_columns: columns whose speed marks motion; default: the joints the
            waypoints move and those resting away from point 0 at the first sample
            (all when none).
    Returns:
        Occurrences in time order (at least one).
    Raises:
        RecordingError: fewer than 3 samples; positions not (N, J); nothing moves ("no motion onset").
    """
    times = np.asarray(times, dtype=float)
    positions = np.asarray(positions, dtype=float)
    if positions.shape != (times.size, len(trajectory.joint_names)):
        raise RecordingError(f'positions have shape {positions.shape}, expected ({times.size} samples, '
                             f'{len(trajectory.joint_names)} trajectory joints)')
    if onset_columns is None:
        moves = (np.ptp(trajectory.positions, axis=0) > 0) | (
            np.abs(positions[0] - trajectory.positions[0]) > start_tolerance)
        onset_columns = [int(k) for k in np.flatnonzero(moves)]
    speed = joint_speed(times, positions[:, onset_columns or slice(None)], smoothing)
    runs = _merge_runs(times, speed > velocity_threshold, min_rest)
    if not runs:
        raise RecordingError(f'the recorded joints never move faster than {velocity_threshold} rad/s '
                             f'(peak {speed.max():.3g} rad/s): no motion onset')
    step = float(np.median(np.diff(times)))
    rest_samples = max(1, int(round(smoothing / step)))
    found: list[Occurrence] = []
    previous_last = -1
    for first, last in runs:
        if found and times[first] < found[-1].start + trajectory.duration:
            found[-1].end = float(times[last])
            previous_last = last
            continue
        before = positions[max(previous_last + 1, first - rest_samples):first + 1]
        rest = np.median(before, axis=0)
        motion_start = trajectory.motion_start(rest, start_tolerance=start_tolerance)
        onset = float(times[first])
        found.append(Occurrence(len(found) + 1, onset, float(times[last]), onset - motion_start,
                                motion_start, rest, begins_in_motion=first == 0))
        previous_last = last
    for occurrence in found:
        occurrence.missing = missing_end(times[-1] - occurrence.start, trajectory.duration, settle_time)
    return found


def missing_end(covered: float, duration: float, settle_time: float) -> str:
    """What a recording that covers ``covered`` s after the trajectory start lacks of a
    ``duration`` s trajectory and its ``settle_time`` s ('' when it reaches the trajectory's end)."""
    if covered >= duration:
        return ''
    if covered <= 0:
        return (f'the recording ends {-covered:.2f} s before the trajectory starts: the whole {duration:.2f} s '
                f'trajectory and the {settle_time:g} s settle time are missing')
    return (f'the recording ends {covered:.2f} s into the {duration:.2f} s trajectory: the last '
            f'{duration - covered:.2f} s and the {settle_time:g} s settle time are missing')


def select_occurrence(found: list[Occurrence], number: int | None = None, origin: float = 0.0,
                      label: str = 'recording') -> Occurrence:
    """The occurrence to compare: ``number`` (1-based), or by default the first complete one.

    Args:
        found: from :func:`find_occurrences`.
        number: 1-based occurrence, or None.
        origin: time the messages count from, s (the recording's first sample).
        label: the recording's name in messages.
    Raises:
        ValueError: ``number`` < 1; ``found`` empty.
        RecordingError: ``number`` beyond those found (listing them); the chosen occurrence
            incomplete, or none complete (naming what is missing).
    """
    if number is not None and number < 1:
        raise ValueError(f'occurrence numbers start at 1, got {number}')
    if not found:
        raise ValueError('no occurrences to select from')
    onsets = ' and '.join(f'{o.onset - origin:.2f} s' for o in found)
    if number is not None and number > len(found):
        raise RecordingError(f'{label}: occurrence {number} requested, the recording holds {len(found)}: '
                             f'at {onsets}')
    if number is None:
        chosen = next((o for o in found if o.complete), None)
        if chosen is None and len(found) == 1:
            raise RecordingError(f'{label}: {found[0].missing}')
        if chosen is None:
            last = found[-1]
            raise RecordingError(f'{label}: no complete execution of the trajectory among the {len(found)} '
                                 f'found (at {onsets}); occurrence {last.number}: {last.missing}')
        return chosen
    chosen = found[number - 1]
    if not chosen.complete:
        raise RecordingError(f'{label}: occurrence {number} at {chosen.onset - origin:.2f} s is incomplete: '
                             f'{chosen.missing}')
    return chosen


def resample(times: np.ndarray, values: np.ndarray, new_times: np.ndarray) -> np.ndarray:
    """Linear interpolation of (N, J) ``values`` at ``times`` onto ``new_times`` -> (M, J).

    Raises RecordingError if ``new_times`` leave [times[0], times[-1]].
    """
    times = np.asarray(times, dtype=float)
    new_times = np.asarray(new_times, dtype=float)
    eps = 1e-9
    if new_times.size and (new_times[0] < times[0] - eps or new_times[-1] > times[-1] + eps):
        raise RecordingError(f'cannot resample onto [{new_times[0]:.3f}, {new_times[-1]:.3f}] s: '
                             f'data cover [{times[0]:.3f}, {times[-1]:.3f}] s')
    values = np.asarray(values, dtype=float).reshape(times.size, -1)
    if times.size < 2:
        return np.repeat(values[:1], new_times.size, axis=0)
    idx, w = interpolation_weights(times, new_times)        # one search for every column
    return values[idx] * (1.0 - w)[:, None] + values[idx + 1] * w[:, None]


def interpolation_weights(times: np.ndarray, new_times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices and weights so that ``v[i] * (1 - w) + v[i + 1] * w`` interpolates ``v`` at ``new_times``.

    Precomputed once when many series share both time bases (the simulated
    rollouts of one calibration). Returns (M,) int indices and (M,) weights.
    """
    times = np.asarray(times, dtype=float)
    idx = np.clip(np.searchsorted(times, new_times, side='right') - 1, 0, times.size - 2)
    span = times[idx + 1] - times[idx]
    w = np.clip((new_times - times[idx]) / np.where(span > 0, span, 1.0), 0.0, 1.0)
    return idx, np.where(span > 0, w, 1.0)      # two samples at one stamp: the later one


def nearest_indices(times: np.ndarray, new_times: np.ndarray) -> np.ndarray:
    """Index of the sample of ``times`` nearest each of ``new_times`` (nearest-timestamp matching)."""
    times = np.asarray(times, dtype=float)
    right = np.clip(np.searchsorted(times, new_times), 1, times.size - 1)
    left = right - 1
    return np.where(np.abs(times[left] - new_times) <= np.abs(times[right] - new_times), left, right)


def uniform_time_base(start: float, end: float, rate: float) -> np.ndarray:
    """Times from ``start`` to ``end`` (inclusive where it falls on the grid) at ``rate`` Hz."""
    if rate <= 0:
        raise ValueError('rate must be positive')
    count = int(np.floor((end - start) * rate + 1e-9)) + 1
    return start + np.arange(count) / rate


def fit_delay(ref_times: np.ndarray, ref_values: np.ndarray, times: np.ndarray, values: np.ndarray,
              max_shift: float = 0.5, resolution: float = 0.002) -> tuple[float, float]:
    """Shift ``s`` (s) for which ``values(t + s)`` best matches ``ref_values(t)``.

    A brute-force fitted delay: every shift in [-max_shift, max_shift] at
    ``resolution`` is scored by the mean squared difference over the part of
    the reference that stays covered at every shift.

    Args:
        ref_times: (N,) s; ref_values: (N, J).
        times: (M,) s; values: (M, J), the stream to shift.
    Returns:
        (shift in s, mean squared difference at that shift in units^2).
    Raises:
        RecordingError: no overlap at some shift.
    """
    ref_times = np.asarray(ref_times, dtype=float)
    ref_values = np.asarray(ref_values, dtype=float).reshape(ref_times.size, -1)
    times = np.asarray(times, dtype=float)
    values = np.asarray(values, dtype=float).reshape(times.size, -1)
    keep = (ref_times - max_shift >= times[0]) & (ref_times + max_shift <= times[-1])
    if keep.sum() < 2:
        raise RecordingError('streams do not overlap enough to fit a delay')
    shifts = np.arange(-max_shift, max_shift + resolution / 2, resolution)
    costs = np.array([np.mean((resample(times, values, ref_times[keep] + s) - ref_values[keep]) ** 2)
                      for s in shifts])
    best = int(np.argmin(costs))
    return float(shifts[best]), float(costs[best])
