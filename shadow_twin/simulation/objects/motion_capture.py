"""A motion-capture system's view of objects: what the mock hardware publishes as the real objects' poses
(issue 36: "100 Hz, 5 ms latency, 0.5 mm noise"), and what the benchmarks offer the twin. ROS-free.

A capture system measures a body's pose at its frame rate, stamps each measurement with the time
it was true (``header.stamp`` of the ``geometry_msgs/PoseStamped`` it publishes: Vicon, OptiTrack
and the ``apriltag_ros`` detections do) and delivers it some time later (the processing and
transport latency). Each effect the real system has and the model lacks is named, with its size, in
:class:`CaptureConfig`:

* ``rate`` (Hz): frames on the multiples of ``1 / rate`` s of sim time;
* ``latency`` (s): a frame is delivered that long after its stamp;
* ``position_noise`` (m): the standard deviation of each coordinate's zero-mean Gaussian error,
  independent per frame and axis;
* ``angle_noise`` (rad): the standard deviation of each component of a random rotation vector that
  turns the measured orientation (world axes). Default: the position noise over a marker baseline of
  0.1 m (a rigid body's orientation comes from its markers' positions), 0.005 rad (0.29 deg).

Use (under the simulation's lock, once per physics step or bridge tick)::

    capture = MotionCapture(['can'], CaptureConfig(), seed=1)
    capture.measure(data.time, {'can': (data.xpos[body], data.xquat[body])})
    for name, sample in capture.delivered(data.time):    # the frames whose latency has passed
        publish(name, sample)
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np

from shadow_twin.common.config_values import non_negative, positive
from shadow_twin.simulation.objects.poses import PoseSample, rotate

#: Hz, s, m, rad: the issue's motion capture (module doc gives the angle's reason).
DEFAULT_RATE = 100.0
DEFAULT_LATENCY = 0.005
DEFAULT_POSITION_NOISE = 0.0005
DEFAULT_ANGLE_NOISE = 0.005


@dataclass(frozen=True)
class CaptureConfig:
    """The effects of a motion-capture system (module doc): ``rate`` Hz (> 0), ``latency`` s,
    ``position_noise`` m and ``angle_noise`` rad (standard deviations, >= 0).
    Raises ConfigError (one line) on a value out of range or not a number."""

    rate: float = DEFAULT_RATE
    latency: float = DEFAULT_LATENCY
    position_noise: float = DEFAULT_POSITION_NOISE
    angle_noise: float = DEFAULT_ANGLE_NOISE

    def __post_init__(self) -> None:
        positive(self.rate, 'motion capture rate')
        for name in ('latency', 'position_noise', 'angle_noise'):
            non_negative(getattr(self, name), f'motion capture {name}')


class MotionCapture:
    """Frames of the named objects' poses, with the effects of ``config`` (module doc); ``seed`` fixes
    the noise. Not thread-safe: one caller (the bridge's stepping thread)."""

    def __init__(self, names: Iterable[str], config: CaptureConfig | None = None, seed: int | None = None) -> None:
        self.names = list(names)
        self.config = config or CaptureConfig()
        self._rng = np.random.default_rng(seed)
        self._next_frame: float | None = None
        self._pending: deque[tuple[str, PoseSample]] = deque()

    @property
    def period(self) -> float:
        """s between frames."""
        return 1.0 / self.config.rate

    def due(self, now: float) -> bool:
        """True when a frame falls on or before ``now`` (s, sim time): call :meth:`measure` then."""
        return self._next_frame is None or now >= self._next_frame - 1e-9

    def measure(self, now: float, poses: Mapping[str, tuple]) -> bool:
        """Take a frame at ``now`` (s, sim time) if one is due: ``poses`` {name: (position (3,) m, quat (4,)
        w x y z)} the true world poses now (names not in ``poses`` are not seen this frame: occluded).
        Returns True when a frame was taken. The next frame is the next multiple of the period after
        ``now``, so a caller ticking slower than the rate gets a frame per tick, stamped when taken."""
        if not self.due(now):
            return False
        period = self.period
        self._next_frame = (math.floor(now / period + 1e-9) + 1) * period
        c = self.config
        for name in self.names:
            if name not in poses:
                continue
            position, quat = (np.asarray(v, dtype=float) for v in poses[name])
            if c.position_noise > 0.0:
                position = position + self._rng.normal(0.0, c.position_noise, 3)
            if c.angle_noise > 0.0:
                quat = rotate(quat, self._rng.normal(0.0, c.angle_noise, 3))
            self._pending.append((name, PoseSample(float(now), position, quat / np.linalg.norm(quat))))
        return True

    def delivered(self, now: float) -> list[tuple[str, PoseSample]]:
        """The frames whose latency has passed by ``now`` (s, sim time), oldest first, each once:
        [(name, sample stamped when it was measured)]."""
        out = []
        latency = self.config.latency
        while self._pending and self._pending[0][1].stamp + latency <= now + 1e-9:
            out.append(self._pending.popleft())
        return out

    def reset(self) -> None:
        """Forget the frames not yet delivered and restart the frame clock (after a sim reset: time went back)."""
        self._pending.clear()
        self._next_frame = None
