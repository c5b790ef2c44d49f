"""Placing a recording against the trajectory that produced it, before a model is scored on it
(ROS-free): how the streams are aligned and compared (:class:`AlignmentSettings`), the executions of
the trajectory the recording holds (:func:`list_occurrences`), and the joints it holds still that the
trajectory leaves out (:func:`held_joints`). :class:`~shadow_twin.calibration.scoring.evaluation.Evaluator`
places and scores with them; the alignment steps are :mod:`shadow_twin.calibration.recordings.alignment`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from shadow_twin.calibration.recordings import alignment
from shadow_twin.calibration.recordings.recording import JointStateRecording
from shadow_twin.common.errors import RecordingError
from shadow_twin.control.trajectory import START_TOLERANCE, JointTrajectory

#: How simulated positions are matched to the real samples (:attr:`AlignmentSettings.matching`).
MATCHING = ('interpolate', 'nearest')


@dataclass
class AlignmentSettings:
    """How real and simulated streams are aligned and compared.

    Attributes:
        onset_threshold: joint speed that marks the motion onset, rad/s.
        smoothing: moving-average window for onset detection, s.
        max_delay: largest sim-to-real delay the fit may find, s (0 disables the fit),
            for recordings aligned by their motion onset.
        stamped_max_delay: the same for recordings whose trajectory start time is known
            (a stamped goal): default 0, since a fitted delay would absorb part of the
            slower or faster response the calibration is there to find.
        settle_time: time compared after the trajectory ends, s. The default
            3.0 s covers the motion settling; with it the default Shadow model
            scores 0.057 rad^2, the published figure.
        matching: 'interpolate' (both streams resampled onto one time base) or
            'nearest' (the published method: sim sampled at ``sim_rate`` and
            matched to each real sample by nearest timestamp).
        rate: time-base rate for 'interpolate', Hz (default: the recording's).
        sim_rate: simulated joint_states rate for 'nearest', Hz.
        interpolation: trajectory sampling (auto/linear/cubic/quintic).
        occurrence: which execution of the trajectory to compare when the recording holds
            several (1-based, in time order; default None: the first complete one). Only for
            recordings aligned by their motion onset.
        min_rest: rest that separates two executions, s (shorter pauses, e.g. a reversal,
            belong to one; an episode starting before the previous execution's trajectory
            has ended continues it).
        start_tolerance: difference between the rest state before the onset and the
            trajectory's point 0 above which the motion starts at t = 0 (the JTC moves to
            point 0 first), rad; see :meth:`JointTrajectory.motion_start`.
    """

    onset_threshold: float = 0.1
    smoothing: float = 0.05
    max_delay: float = 0.3
    stamped_max_delay: float = 0.0
    settle_time: float = 3.0
    matching: str = 'interpolate'
    rate: float | None = None
    sim_rate: float = 250.0
    interpolation: str = 'auto'
    occurrence: int | None = None
    min_rest: float = 0.5
    start_tolerance: float = START_TOLERANCE

    def __post_init__(self) -> None:
        if self.matching not in MATCHING:
            raise ValueError(f'matching must be one of {MATCHING}')
        if self.occurrence is not None and self.occurrence < 1:
            raise ValueError(f'occurrence numbers start at 1, got {self.occurrence}')


def held_joints(recording: JointStateRecording, simulated: Sequence[str],
                named: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Joints of ``simulated`` that ``named`` (the trajectory's) leaves out and ``recording`` holds in
    every message with finite positions, and their (N, H) positions (rad); ((), (N, 0)) when none."""
    candidates = [j for j in simulated if j not in named and j in recording.joint_names and j not in recording.absent]
    if not candidates:
        return [], np.empty((len(recording.frame), 0))
    data = recording.frame['position'][candidates].to_numpy(dtype=float)
    keep = np.isfinite(data).all(axis=0)
    return [j for j, k in zip(candidates, keep) if k], data[:, keep]


def list_occurrences(recording: JointStateRecording, trajectory: JointTrajectory,
                     settings: AlignmentSettings | None = None,
                     joints: Sequence[str] | None = None) -> list[alignment.Occurrence]:
    """The executions of ``trajectory`` in ``recording``, as :class:`Evaluator` finds them.

    Each has its onset, end and trajectory start (s, recording clock), its motion duration
    (s), whether it is complete and what it lacks (see :class:`alignment.Occurrence`;
    ``describe(recording.times[0])`` gives a printable line).

    Args:
        recording: real joint states.
        trajectory: the commanded trajectory.
        settings: onset threshold, smoothing, ``min_rest``, ``start_tolerance``, settle time.
        joints: joints to look at (default: the trajectory's recorded joints).
    Returns:
        Occurrences in time order, numbered from 1.
    Raises:
        RecordingError: joints not recorded or NaN, no motion ("no motion onset").
    """
    s = settings or AlignmentSettings()
    if joints is None:
        joints = [j for j in trajectory.joint_names if j in recording.joint_names]
    if not joints:
        raise RecordingError(f'{recording.label}: none of the trajectory\'s joints is recorded')
    positions = recording.values(joints)
    try:
        return alignment.find_occurrences(recording.times, positions, trajectory.subset(joints),
                                          s.onset_threshold, s.smoothing, s.min_rest, s.start_tolerance,
                                          s.settle_time)
    except RecordingError as exc:
        raise RecordingError(f'{recording.label}: {exc}') from None
