"""Time alignment of real and simulated joint streams.

Steps (see :class:`shadow_twin.calibration.evaluation.Evaluator`): detect the motion onset in
the real stream; place the commanded trajectory's start there; refine the
offset by fitting a delay (the shift that minimises the mean squared
difference between the two streams); resample both streams onto one uniform
time base by linear interpolation and keep only their overlap.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from shadow_twin.common.errors import RecordingError


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
    positions = np.asarray(positions, dtype=float).reshape(times.size, -1)
    if times.size < 3:
        raise RecordingError('too few samples to detect motion')
    window = max(1, int(round(smoothing / np.median(np.diff(times)))))
    smooth = pd.DataFrame(positions).rolling(window, center=True, min_periods=1).mean().to_numpy()
    speed = np.abs(np.gradient(smooth, times, axis=0)).max(axis=1)
    moving = speed > velocity_threshold
    if not moving.any():
        raise RecordingError(f'the recorded joints never move faster than {velocity_threshold} rad/s '
                             f'(peak {speed.max():.3g} rad/s): no motion onset')
    return float(times[int(np.argmax(moving))])


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
    return np.stack([np.interp(new_times, times, values[:, k]) for k in range(values.shape[1])], axis=1)


def interpolation_weights(times: np.ndarray, new_times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices and weights so that ``v[i] * (1 - w) + v[i + 1] * w`` interpolates ``v`` at ``new_times``.

    Precomputed once when many series share both time bases (the simulated
    rollouts of one calibration). Returns (M,) int indices and (M,) weights.
    """
    times = np.asarray(times, dtype=float)
    idx = np.clip(np.searchsorted(times, new_times, side='right') - 1, 0, times.size - 2)
    w = np.clip((new_times - times[idx]) / (times[idx + 1] - times[idx]), 0.0, 1.0)
    return idx, w


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
