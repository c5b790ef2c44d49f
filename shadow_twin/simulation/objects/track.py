"""The track of an object's pose source: its accepted samples (:mod:`.gate`), the motion they show
(velocity, acceleration) and the pose they give at a sim time, moved on from the newest sample.

**Extrapolated, not held.** The follower needs the object's pose *now*, at each physics step, while
the newest sample is some milliseconds old: a motion-capture system's latency (5 ms for the mock
hardware) plus up to one period (10 ms at 100 Hz). Held, a pose carried at 0.5 m/s would be
2.5 to 7.5 mm behind, beyond the 2 mm the twin is to hold a carried object to. So the pose is moved
on (or back, for a stamp still ahead of the sim) at its velocity and acceleration for at most
:data:`MAX_EXTRAPOLATION` s from its stamp, then held at rest (a source that falls silent leaves its
target standing until the gate calls it silent), as the robots' followed states are
(``simulation.following.FOLLOW_EXTRAPOLATION``).

**The motion** is a least-squares parabola through the samples of the last :data:`VELOCITY_WINDOW` s
(positions, and the rotation vectors, world axes, of each orientation from the newest's), its
velocity and acceleration taken at the newest sample. A straight line would give the velocity of
the window's middle, some 50 ms old, and the follower puts its target ahead by the weld's lead times
the velocity (:func:`~.weld.leads`: 0.02 s): an object swinging at 1 Hz over 0.1 m (3.9 m/s^2)
would be off by 0.02 s x 3.9 m/s^2 x 0.05 s = 3.9 mm. The parabola's end values are noisier: over 11
samples 10 ms apart with 0.5 mm of noise each (the mock motion capture's), standard errors of 18
mm/s and 0.34 m/s^2 (a line's slope: 4.8 mm/s; from the fit's design matrix). So that an object at
rest is not dithered by that noise, each component of the velocity and of the acceleration is
shrunk towards 0 by the positive-part James-Stein factor ``max(0, 1 - (SIGNIFICANCE se / |x|)^2)``,
``se`` its standard error estimated from the fit's residuals (:data:`SIGNIFICANCE` 2): one within
two standard errors of 0 is 0, one well beyond is kept. Measured on a box followed from a source
with that noise: at rest on a table 0.59 mm (p95) from its true pose, 1.34 mm without the shrinking;
carried on a tray swinging 0.1 m at 0.5 Hz, 1.02 against 1.40 mm. The position is the newest
sample's (a parabola's end value has almost its noise: 0.95 of it over 11 samples). With 2 or 3
samples the motion is a line (velocity only, not shrunk with 2), with 1 it is at rest.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from shadow_twin.simulation.objects.poses import PoseSample, relative_rotvec, rotate

#: s: the samples within this of the newest give the motion (ten or eleven at 100 Hz).
VELOCITY_WINDOW = 0.1
#: s: longest a pose is moved on from its stamp at its velocity (then held): the robots' figure,
#: five periods of a 50 Hz stream, ten of the 100 Hz of a motion-capture system.
MAX_EXTRAPOLATION = 0.1
#: The most samples kept (a source far faster than 100 Hz gives its velocity from its newest ones).
MAX_SAMPLES = 64
#: Standard errors within which a fitted velocity or acceleration is taken as 0 (module doc).
SIGNIFICANCE = 2.0


@dataclass(frozen=True)
class Motion:
    """A pose and its rates at one time, world frame: ``position`` (3,) m, ``quat`` (4,) w x y z, ``linear``
    (3,) m/s, ``angular`` (3,) rad/s (world axes), ``linear_acceleration`` (3,) m/s^2 and
    ``angular_acceleration`` (3,) rad/s^2."""

    position: np.ndarray
    quat: np.ndarray
    linear: np.ndarray
    angular: np.ndarray
    linear_acceleration: np.ndarray
    angular_acceleration: np.ndarray


class PoseTrack:
    """The accepted samples of one source and what they give (module doc).

    Args:
        window: s, the span of the samples the motion is fitted to (:data:`VELOCITY_WINDOW`).
        max_extrapolation: s (:data:`MAX_EXTRAPOLATION`).
    """

    def __init__(self, window: float = VELOCITY_WINDOW, max_extrapolation: float = MAX_EXTRAPOLATION) -> None:
        self.window = float(window)
        self.max_extrapolation = float(max_extrapolation)
        self._samples: deque[PoseSample] = deque(maxlen=MAX_SAMPLES)
        #: (6,) velocity (m/s, then rad/s, world axes) and acceleration (m/s^2, rad/s^2) at the newest sample.
        self.velocity = np.zeros(6)
        self.acceleration = np.zeros(6)

    @property
    def latest(self) -> PoseSample | None:
        """The newest sample, None before the first."""
        return self._samples[-1] if self._samples else None

    def reset(self) -> None:
        """Forget every sample (a restarted source: its motion starts from its new samples)."""
        self._samples.clear()
        self.velocity, self.acceleration = np.zeros(6), np.zeros(6)

    def add(self, sample: PoseSample) -> None:
        """Add an accepted sample (stamped after the newest: the gate's rule) and refit the motion."""
        self._samples.append(sample)
        newest = sample.stamp
        recent = [s for s in self._samples if newest - s.stamp <= self.window]
        self.velocity, self.acceleration = np.zeros(6), np.zeros(6)
        count = len(recent)
        if count < 2:
            return
        times = np.array([s.stamp - newest for s in recent])
        values = np.hstack([np.array([s.position for s in recent]),
                            relative_rotvec(np.array([s.quat for s in recent]), sample.quat)])   # (N, 6)
        order = 2 if count >= 4 else 1
        scale = float(np.abs(times).max())                  # fit in t / scale: a well-conditioned design
        design = np.stack([np.ones_like(times), times / scale, 0.5 * (times / scale) ** 2][:order + 1], axis=1)
        coefficients, _, _, _ = np.linalg.lstsq(design, values, rcond=None)
        rates = [coefficients[k] / scale ** k for k in range(1, order + 1)]
        if count > order + 1:                                # residuals left to judge the noise by
            variance = ((values - design @ coefficients) ** 2).sum(axis=0) / (count - order - 1)
            inverse = np.linalg.inv(design.T @ design)
            for k in range(1, order + 1):
                error = np.sqrt(variance * inverse[k, k]) / scale ** k
                size = np.maximum(np.abs(rates[k - 1]), 1e-300)
                rates[k - 1] = rates[k - 1] * np.clip(1.0 - (SIGNIFICANCE * error / size) ** 2, 0.0, 1.0)
        self.velocity = rates[0]
        if order == 2:
            self.acceleration = rates[1]

    def at(self, time: float) -> Motion:
        """The :class:`Motion` at sim ``time`` (s): the newest sample moved on (or back) at its velocity and
        acceleration for at most ``max_extrapolation`` s, at rest beyond. Raises ValueError before the
        first sample."""
        newest = self.latest
        if newest is None:
            raise ValueError('no pose yet')
        ahead = float(time) - newest.stamp
        moved = float(np.clip(ahead, -self.max_extrapolation, self.max_extrapolation))
        shift = self.velocity * moved + 0.5 * self.acceleration * moved * moved
        position, quat = newest.position + shift[:3], rotate(newest.quat, shift[3:])
        if abs(ahead) > self.max_extrapolation:
            return Motion(position, quat, np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(3))
        velocity = self.velocity + self.acceleration * moved
        return Motion(position, quat, velocity[:3], velocity[3:], self.acceleration[:3].copy(),
                      self.acceleration[3:].copy())
