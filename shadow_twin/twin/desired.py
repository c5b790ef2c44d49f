"""The desired state of a running twin goal, ROS-free: :class:`DesiredSampler` (as the JTC interpolates
it, from the state at acceptance to the first point; the speed-scaled (UR) joints on the scaled clock)
and :func:`state_arrays` (the actual state in goal joint order; sim minus real per joint is
``shadow_twin.monitoring.joint.error.joint_error``, published by the twin monitor).

Units: positions rad, velocities rad/s, accelerations rad/s^2, times s."""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from shadow_twin.control.scaled_time import ScaledClock
from shadow_twin.control.trajectory import JointTrajectory


class DesiredSampler:
    """Desired state of a goal trajectory over time; the trajectory time of its speed-scaled
    joints runs at the arm's speed scaling, as on the UR's scaled JTC (:class:`ScaledClock`).

    Args:
        trajectory: the goal (JointTrajectory, times from its start).
        start_positions: (J,) positions at acceptance, rad; prepended at t = 0
            (as the JTC does) when the first point is later; NaN entries take
            the first point's value.
        start_s: start time, s (same clock as the ``now`` passed to :meth:`at`).
        scaled: (J,) bool, the joints whose trajectory time runs at the speed scaling
            (:func:`~shadow_twin.control.scaled_time.scaled_mask`); None: none.
        scaling: the speed scaling at acceptance, fraction 0..1 (:meth:`set_scaling` for changes).
        now_s: the time of acceptance, s (a start in the past is joined mid-way); None: ``start_s``.
    """

    def __init__(self, trajectory: JointTrajectory, start_positions: Sequence[float], start_s: float,
                 scaled: Sequence[bool] | None = None, scaling: float = 1.0, now_s: float | None = None) -> None:
        start = np.asarray(start_positions, dtype=float).reshape(-1)
        start = np.where(np.isfinite(start), start, trajectory.positions[0])
        self.trajectory = trajectory.with_start(start)
        self.start_s = float(start_s)
        self.duration = trajectory.duration
        self.scaled = (np.zeros(len(trajectory.joint_names), dtype=bool) if scaled is None
                       else np.asarray(scaled, dtype=bool).reshape(-1))
        self.clock = ScaledClock(self.start_s, scaling, since=now_s)
        self._end_s: float | None = None          # the scaled end, once passed

    @property
    def scaling(self) -> float:
        """The speed scaling the scaled joints run at now, fraction 0..1."""
        return self.clock.scaling

    @property
    def end_s(self) -> float:
        """When the trajectory ends, s: its last point's time, for the scaled joints on their
        clock at the current scaling (``inf`` while it is 0 short of the end)."""
        if self._end_s is not None:
            return self._end_s
        if not self.scaled.any():
            return self.start_s + self.duration
        return max(self.start_s + self.duration, self.clock.reaches(self.duration))

    def set_scaling(self, now_s: float, scaling: float) -> None:
        """The speed scaling (fraction 0..1) is ``scaling`` from ``now_s`` (s) on; the scaled
        joints' lag so far is integrated at the old one; an end already passed stays."""
        if self._end_s is None and self.scaled.any() and now_s >= self.end_s:
            self._end_s = self.end_s
        self.clock.set_scaling(now_s, scaling)

    def _state(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(J,) positions, velocities, accelerations at trajectory time ``t`` (s): before the start
        the start state at rest, after the end the last point."""
        pos, vel, acc = self.trajectory.sample(min(max(t, 0.0), self.duration))
        if t < 0 or t > self.duration:
            vel, acc = np.zeros_like(vel), np.zeros_like(acc)
            if t > self.duration and self.trajectory.velocities is not None:
                vel = np.array(self.trajectory.velocities[-1], dtype=float)
        return pos, vel, acc

    def at(self, now_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """(positions, velocities, accelerations, s since start) at ``now_s``; before the
        start the start state (at rest) is desired, after the end the last point. The scaled
        joints are sampled at their own trajectory time, velocities times the scaling s and
        accelerations times s^2 (as the scaled JTC commands them); the s since start is the
        unscaled one."""
        t = now_s - self.start_s
        pos, vel, acc = self._state(t)
        if self.scaled.any():
            s, k = self.clock.scaling, self.scaled
            slow = self._state(float(self.clock.trajectory_time(np.array([now_s]))[0]))
            pos[k], vel[k], acc[k] = slow[0][k], s * slow[1][k], s * s * slow[2][k]
        return pos, vel, acc, t


def state_arrays(joint_names: Sequence[str], state: Mapping[str, tuple[float, float]]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(positions, velocities) of ``joint_names`` from ``{joint: (position, velocity)}``;
    NaN where a joint has no state (a NaN counts as a tolerance violation)."""
    pos = np.array([state[j][0] if j in state else math.nan for j in joint_names], dtype=float)
    vel = np.array([state[j][1] if j in state else math.nan for j in joint_names], dtype=float)
    return pos, vel
