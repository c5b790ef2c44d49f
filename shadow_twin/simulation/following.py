"""Following another robot (:meth:`~shadow_twin.simulation.live.LiveSimulation.follow`): the
followed state, moved on at its velocity and acceleration for a short while, and the next target
from a newly received state, approached at a capped speed; or a trajectory the other robot's
controller was sent (:class:`FollowedTrajectory`), sampled on its own clock. Either gives the
desired state of its joints at the sim's step times (``at``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

#: Longest a followed state is moved on at its velocity, s: past it the joints hold (e.g. the
#: followed robot's ``joint_states`` stopped). Five periods of a 50 Hz stream.
FOLLOW_EXTRAPOLATION = 0.1
#: Fastest a followed target moves, rad/s: the UR5's joint speed limit (pi rad/s). A followed
#: state far from the joints' (the first message, a stream that resumes after a stall) is
#: approached at this speed instead of being jumped to: a mock MiR250 whose 30 kg arm jumped
#: from the rest pose to the mock UR5's start tipped over (2 benchmark runs of 7).
FOLLOW_MAX_SPEED = math.pi
#: A followed state's acceleration comes from the velocities of consecutive states at least this
#: far apart (s), and is clipped to :data:`FOLLOW_MAX_ACCELERATION` (rad/s^2): a mock robot whose
#: process is not scheduled for 40 ms moves its followed arm on that long from the last state it
#: got, and without the acceleration term a swinging elbow's target was 7 mrad off when the next
#: state arrived, a jerk that made a slipping base's path diverge from its replay.
FOLLOW_MIN_INTERVAL = 0.002
FOLLOW_MAX_ACCELERATION = 50.0


@dataclass(frozen=True)
class _Followed:
    """The state :meth:`LiveSimulation.follow` tracks: (K,) controller columns, positions (rad),
    velocities (rad/s), accelerations (rad/s^2), and the sim time it is of (s)."""

    columns: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray
    accelerations: np.ndarray
    since: float

    def at(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(N, K) positions and velocities moved on (or back) to sim ``times`` (N,), s, at most
        :data:`FOLLOW_EXTRAPOLATION` s from ``since``."""
        ahead = np.clip(np.asarray(times, dtype=float) - self.since, -FOLLOW_EXTRAPOLATION,
                        FOLLOW_EXTRAPOLATION)[:, None]
        return (self.positions + (self.velocities + 0.5 * self.accelerations * ahead) * ahead,
                self.velocities + self.accelerations * ahead)


@dataclass(frozen=True)
class FollowedTrajectory:
    """A trajectory another robot's controller runs (e.g. one sent on its ``~/joint_trajectory``
    topic), followed on its own clock: (K,) controller ``columns`` of its joints, the
    ``trajectory`` (its ``joint_names`` in the order of ``columns``, its first point at
    ``time_from_start`` 0 where the joints were) and the sim time it started, s. Before the start
    the joints hold its first point, after the end its last, as the JTC holds them."""

    columns: np.ndarray
    trajectory: object              # shadow_twin.control.trajectory.JointTrajectory
    start: float

    def at(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(N, K) positions (rad) and velocities (rad/s) at sim ``times`` (N,), s."""
        rel = np.clip(np.asarray(times, dtype=float) - self.start, 0.0, float(self.trajectory.times[-1]))
        positions, velocities, _ = self.trajectory.sample(rel)
        ended = (np.asarray(times, dtype=float) - self.start) >= float(self.trajectory.times[-1])
        velocities[ended] = 0.0
        return positions, velocities


def follow_target(previous: _Followed | None, names: Sequence[str], columns: np.ndarray,
                  positions: Mapping[str, float], velocities: Mapping[str, float] | None, at: float,
                  hold: np.ndarray) -> _Followed:
    """The state to follow after a new one arrives (see :meth:`LiveSimulation.follow`).

    Args:
        previous: the state followed so far, None for none.
        names: the followed ROS joints, (K,); ``columns``: their (K,) controller columns.
        positions: {joint: rad} of the new state; ``velocities``: {joint: rad/s} (None: 0).
        at: the sim time the new state is of, s (its stamp, already mapped to sim time).
        hold: (J,) held positions of the controlled joints, rad: the start when ``previous``
            is None or of other columns.
    Returns:
        The new followed state: its target moved at most :data:`FOLLOW_MAX_SPEED` from where
        ``previous`` (or ``hold``) was at ``at``.
    """
    rates = velocities or {}
    given = np.clip(np.array([float(rates.get(n, 0.0)) for n in names]), -FOLLOW_MAX_SPEED, FOLLOW_MAX_SPEED)
    acceleration = np.zeros(len(names))
    if previous is not None and np.array_equal(previous.columns, columns):
        elapsed = max(0.0, at - previous.since)
        start = previous.at(np.array([at]))[0][0]
        if FOLLOW_MIN_INTERVAL <= elapsed <= FOLLOW_EXTRAPOLATION:   # from consecutive states
            acceleration = np.clip((given - previous.velocities) / elapsed, -FOLLOW_MAX_ACCELERATION,
                                   FOLLOW_MAX_ACCELERATION)
    else:
        elapsed, start = 0.0, hold[columns].copy()
    step = FOLLOW_MAX_SPEED * elapsed
    target = start + np.clip(np.array([float(positions[n]) for n in names]) - start, -step, step)
    return _Followed(columns, target, given, acceleration, at)
