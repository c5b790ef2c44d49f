"""Time keeping of the live loop, without ROS: wall clock <-> sim time, and rate meters.

The bridge steps physics so that sim time tracks the wall clock times the
real-time factor. :class:`SimClock` holds one anchor (a monotonic wall time, the
ROS time at that moment and the sim time then); from it follow the sim time to
step to now and the ROS time a sim state refers to (its stamp). Whenever the
relation breaks (pause/resume, reset, reload, a dropped catch-up, a new
real-time factor) the clock is re-anchored at the present state, so stamps stay
monotonic and the simulation does not try to make up for lost time.
"""

from __future__ import annotations

import collections
import math
import threading
from dataclasses import dataclass

from shadow_twin.common.stamps import from_nanoseconds, to_nanoseconds


class SimClock:
    """Maps monotonic wall time and ROS time to sim time at a real-time factor.

    Args:
        real_time_factor: sim seconds per wall second (> 0).
    Raises:
        ValueError: real_time_factor not finite and > 0.
    """

    def __init__(self, real_time_factor: float = 1.0) -> None:
        self._lock = threading.Lock()
        self._rtf = self._check(real_time_factor)
        self._mono0 = 0.0
        self._ros0_ns = 0
        self._sim0 = 0.0

    @staticmethod
    def _check(rtf: float) -> float:
        rtf = float(rtf)
        if not (math.isfinite(rtf) and rtf > 0):
            raise ValueError(f'real_time_factor must be finite and > 0, got {rtf}')
        return rtf

    @property
    def real_time_factor(self) -> float:
        """Target sim seconds per wall second."""
        return self._rtf

    def anchor(self, mono: float, ros_ns: int, sim_time: float, real_time_factor: float | None = None) -> None:
        """Declare that sim time ``sim_time`` (s) is now: monotonic ``mono`` (s), ROS time ``ros_ns`` (ns).

        ``real_time_factor`` (optional) changes the factor from here on.
        """
        with self._lock:
            if real_time_factor is not None:
                self._rtf = self._check(real_time_factor)
            self._mono0, self._ros0_ns, self._sim0 = float(mono), int(ros_ns), float(sim_time)

    def target(self, mono: float) -> float:
        """Sim time (s) the simulation should have reached at monotonic time ``mono`` (s)."""
        with self._lock:
            return self._sim0 + (mono - self._mono0) * self._rtf

    def stamp_ns(self, sim_time: float) -> int:
        """ROS time (ns) at which the simulation is at ``sim_time`` (s): the stamp of that state."""
        with self._lock:
            return self._ros0_ns + to_nanoseconds((sim_time - self._sim0) / self._rtf)

    def sim_time_at(self, ros_ns: int) -> float:
        """Sim time (s) corresponding to ROS time ``ros_ns`` (ns), e.g. a goal's header stamp."""
        with self._lock:
            return self._sim0 + from_nanoseconds(ros_ns - self._ros0_ns) * self._rtf


@dataclass(frozen=True)
class RateReport:
    """What a :class:`RateMeter` measured over its window.

    real_time_factor: sim s per wall s; rate: ticks per wall s (Hz);
    window: wall s covered; ticks: ticks in the window.
    """

    real_time_factor: float
    rate: float
    window: float
    ticks: int


class RateMeter:
    """Achieved real-time factor and tick rate over a sliding wall-clock window.

    Args:
        window: seconds of wall time to average over (> 0).
    """

    def __init__(self, window: float = 2.0) -> None:
        if not window > 0:
            raise ValueError(f'window must be > 0, got {window}')
        self.window = float(window)
        self._samples: collections.deque[tuple[float, float]] = collections.deque()
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forget all samples (e.g. after a pause, so the pause does not count)."""
        with self._lock:
            self._samples.clear()

    def tick(self, mono: float, sim_time: float) -> None:
        """Record one loop iteration at monotonic ``mono`` (s) with the sim at ``sim_time`` (s)."""
        with self._lock:
            self._samples.append((float(mono), float(sim_time)))
            while len(self._samples) > 2 and mono - self._samples[0][0] > self.window:
                self._samples.popleft()

    def report(self) -> RateReport | None:
        """The measurement, or None with fewer than two samples."""
        with self._lock:
            if len(self._samples) < 2:
                return None
            (m0, s0), (m1, s1) = self._samples[0], self._samples[-1]
            ticks = len(self._samples) - 1
        span = m1 - m0
        if span <= 0:
            return None
        return RateReport((s1 - s0) / span, ticks / span, span, ticks)
