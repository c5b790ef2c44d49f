"""The UR's speed scaling, without ROS: the trajectory clock of the speed-scaled joints and the
check of a speed scaling message.

ur_robot_driver's scaled joint trajectory controller (``ur_controllers``'
``ScaledJointTrajectoryController``) advances its trajectory time by ``scaling * period`` each
control cycle, ``scaling`` being the robot's speed scaling (the teach pendant's speed slider
times any slow-down the robot chooses itself; 0 when paused). At 10 % a 0.5 s move takes 5 s.
:class:`ScaledClock` is that clock: it integrates how far the scaled joints' trajectory time is
behind the (sim or wall) time since the start, its *lag*, across changes of the scaling. Both
the sim bridge's controller (``shadow_twin.simulation.live.simulation``) and the twin server's desired state
(``shadow_twin.twin.desired.DesiredSampler``) use it.

:func:`checked_speed_scaling` is the check every reader of a speed scaling message applies.

Units: times s, scaling a fraction 0..1 (:func:`checked_speed_scaling`: percent).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from shadow_twin.common.errors import BadMessage
from shadow_twin.common.globs import matches


class SpeedScalingError(BadMessage):
    """A speed scaling that is not a finite percentage within 0..100."""


def checked_speed_scaling(percent: float) -> float:
    """``percent`` (a speed scaling message's ``data``, %) as a float when it is finite and within
    0..100; raises :class:`SpeedScalingError` (one line, with the value) otherwise."""
    try:
        value = float(percent)
    except (TypeError, ValueError):
        raise SpeedScalingError(f'speed scaling must be a number, got {percent!r}') from None
    if not (math.isfinite(value) and 0.0 <= value <= 100.0):
        raise SpeedScalingError(f'speed scaling must be a finite percentage within 0..100, got {value!r}')
    return value


def scaled_mask(joints: Sequence[str], globs: Sequence[str]) -> np.ndarray:
    """(J,) bool: which of ``joints`` (ROS names) match one of ``globs`` (fnmatch, case-sensitive),
    the speed-scaled joints (ROS parameter ``speed_scaled_joints``)."""
    return np.array([matches(j, globs) for j in joints], dtype=bool)


class ScaledClock:
    """Trajectory time of the speed-scaled joints of a trajectory started at ``start``.

    From the start on, their trajectory time advances ``scaling`` s per s (ur_robot_driver's
    scaled JTC), so it is ``t - start - lag(t)``; ``lag`` grows ``1 - scaling`` s per s. The lag
    is integrated piecewise: :meth:`set_scaling` closes a stretch at the old scaling.

    Args:
        start: time of the trajectory's t = 0, s.
        scaling: the speed scaling now, fraction 0..1.
        since: the time the clock starts integrating from, s (a trajectory joined mid-way,
            its start in the past: now); None (or earlier than ``start``): ``start``.

    Attributes:
        lag: s of trajectory time the scaled joints are behind, at ``lag_time``.
        lag_time: the time up to which ``lag`` is integrated, s (>= ``start``).
    """

    def __init__(self, start: float, scaling: float = 1.0, since: float | None = None) -> None:
        self.start = float(start)
        self.scaling = float(scaling)
        self.lag = 0.0
        self.lag_time = self.start if since is None else max(self.start, float(since))

    def lags(self, times, scaling: float | None = None) -> np.ndarray:
        """(N,) lag (s) at ``times`` (N,) s, not before ``lag_time``, at ``scaling`` (None: the
        clock's own) since ``lag_time``; 0 growth before the start."""
        s = self.scaling if scaling is None else float(scaling)
        since = np.maximum(np.asarray(times, dtype=float), self.start) - self.lag_time
        return self.lag + (1.0 - s) * np.maximum(since, 0.0)

    def advance(self, now: float, scaling: float | None = None) -> None:
        """Integrate the lag up to ``now`` (s) at ``scaling`` (None: the clock's own)."""
        if now > self.lag_time:
            self.lag, self.lag_time = float(self.lags(np.array([now]), scaling)[0]), float(now)

    def set_scaling(self, now: float, scaling: float) -> None:
        """From ``now`` (s) on the scaling is ``scaling``: the lag so far is integrated at the old one."""
        self.advance(now)
        self.scaling = float(scaling)

    def trajectory_time(self, times) -> np.ndarray:
        """(N,) trajectory time (s) of the scaled joints at ``times`` (N,) s: negative before the
        start, as the unscaled ``times - start``."""
        times = np.asarray(times, dtype=float)
        return times - self.start - self.lags(times)

    def reaches(self, trajectory_time: float) -> float:
        """When (s) the scaled joints' trajectory time reaches ``trajectory_time`` (s) at the
        current scaling: ``inf`` while paused (scaling 0) short of it; a time already passed is
        exact only if the scaling has not changed since."""
        since = self.lag_time - self.start - self.lag          # trajectory time at lag_time
        ahead = float(trajectory_time) - since
        if self.scaling <= 0.0:
            return math.inf if ahead > 0.0 else self.lag_time + ahead
        return self.lag_time + ahead / self.scaling
