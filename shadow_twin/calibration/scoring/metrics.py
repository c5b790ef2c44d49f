"""Error metrics between aligned real and simulated joint positions.

All errors are in rad (RMSE) or rad^2 (MSE), per joint over the aligned time
base. The objective of a calibration is a weighted mean of per-joint MSE; the
``published`` setting (mean of the per-joint MSE of rh_FFJ1..rh_FFJ4) is the
figure of the study whose numbers ship with the real recording
(default model 0.056890 rad^2).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from shadow_twin.calibration.recordings.alignment import resample, uniform_time_base
from shadow_twin.common.errors import RecordingError

PUBLISHED_JOINTS = ('rh_FFJ1', 'rh_FFJ2', 'rh_FFJ3', 'rh_FFJ4')
PUBLISHED_DEFAULT_MSE = 0.056890  # rad^2, default model, ../shared/data/shadow_hand_e/README.md
FINGER_GROUPS = {finger: tuple(f'rh_{finger}J{k}' for k in (1, 2, 3, 4)) for finger in ('FF', 'MF', 'RF', 'LF')}


def per_joint_mse(real: np.ndarray, sim: np.ndarray, joints: Sequence[str]) -> dict[str, float]:
    """MSE per joint, rad^2. ``real``/``sim``: (N, J) on the same time base."""
    real = np.asarray(real, dtype=float)
    sim = np.asarray(sim, dtype=float)
    if real.shape != sim.shape or real.shape[1] != len(joints):
        raise ValueError(f'shape mismatch: real {real.shape}, sim {sim.shape}, {len(joints)} joints')
    err = np.mean((sim - real) ** 2, axis=0)
    return {j: float(e) for j, e in zip(joints, err)}


def rmse(mse: Mapping[str, float]) -> dict[str, float]:
    """RMSE (rad) from per-joint MSE (rad^2)."""
    return {j: float(np.sqrt(v)) for j, v in mse.items()}


def group_means(mse: Mapping[str, float], groups: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """Mean MSE of each group's joints that are present (groups with none are left out)."""
    out = {}
    for name, joints in groups.items():
        present = [mse[j] for j in joints if j in mse]
        if present:
            out[name] = float(np.mean(present))
    return out


def weighted_objective(mse: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """Sum(w_j * MSE_j) / sum(w_j), rad^2. Raises KeyError for a weighted joint without MSE."""
    total = sum(weights.values())
    if total <= 0:
        raise ValueError('objective weights must sum to a positive number')
    return float(sum(w * mse[j] for j, w in weights.items()) / total)


def reduction_percent(before: float, after: float) -> float:
    """How much lower ``after`` is than ``before``, in % (negative: higher); 0 when ``before`` <= 0."""
    return 100.0 * (1.0 - after / before) if before > 0 else 0.0


def recording_mse(real, sim, joints: Sequence[str], start: float, end: float,
                  rate: float = 125.0) -> dict[str, float]:
    """Per-joint MSE (rad^2) between two recorded streams over [start, end] s of their common clock.

    Both streams (``JointStateRecording``, e.g. /joint_states and /sim/joint_states of one
    bag, stamped by the same clock) are resampled by linear interpolation onto a uniform
    time base at ``rate`` Hz covering the part of [start, end] that both cover.

    Raises:
        RecordingError: the streams do not overlap [start, end] or lack a joint.
    """
    lo = max(start, real.times[0], sim.times[0])
    hi = min(end, real.times[-1], sim.times[-1])
    if hi - lo < 2.0 / rate:
        raise RecordingError(f'{real.label} and {sim.label} do not overlap in [{start:.3f}, {end:.3f}] s')
    base = uniform_time_base(lo, hi, rate)
    joints = list(joints)
    return per_joint_mse(resample(real.times, real.values(joints), base),
                         resample(sim.times, sim.values(joints), base), joints)
