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
import os
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

    real_time_factor: sim s advanced per wall s (sim time dropped after a stall is
    sim time that did not advance, so a stall lowers it); rate: ticks per wall s (Hz);
    window: wall s covered; ticks: ticks in the window; max_lateness: the latest tick
    of the window, s after its scheduled time; dropped: sim s dropped in the window;
    max_lateness_cpu: CPU time (s) the whole process used while that latest tick was
    waiting (see :func:`stall_cause`).
    """

    real_time_factor: float
    rate: float
    window: float
    ticks: int
    max_lateness: float = 0.0
    dropped: float = 0.0
    max_lateness_cpu: float = 0.0


#: A tick this late (s) is a stall worth a warning in the log.
STALL_WARNING = 0.020
#: Below this share of the stall spent on the CPU by the process, the process was not running.
STALL_CPU_SHARE = 0.25


def stall_cause(lateness: float, waited: float, process_cpu: float) -> str:
    """Who held a tick that started ``lateness`` s late, from the CPU time (s) the whole
    process used over the ``waited`` s since the previous tick began.

    When the process used the CPU for most of the stall, one of its own threads held
    the stepping thread (the Python GIL: a garbage collection, a long callback); when
    it hardly ran at all, the operating system or the hypervisor did not schedule it
    (another process took the cores, or a virtual machine's vCPU was paused), which
    no code in the node can prevent. Returns a sentence for the log.
    """
    share = process_cpu / waited if waited > 0 else 0.0
    where = (f'the process used {process_cpu * 1e3:.1f} ms of CPU in the {waited * 1e3:.0f} ms since the '
             f'previous tick')
    if share >= STALL_CPU_SHARE:
        return f'{where}: another thread of this node held it (the Python GIL: garbage collection or a long callback)'
    return (f'{where}: the process was not running, the operating system or hypervisor did not schedule it '
            f'(other processes on the cores, or a paused virtual CPU)')


class RateMeter:
    """Achieved real-time factor, tick rate, worst tick lateness and dropped sim time over a
    sliding wall-clock window.

    Each tick is recorded at its scheduled monotonic time with the sim time reached. A
    stall shows twice: the ticks after it are late (``lateness``), and when the lag was
    too large to catch up (``dropped`` sim time given up) the sim time advanced over the
    window falls short of the wall time, so the real-time factor drops below target.
    Only :meth:`reset` (pause, new target factor) forgets: a re-anchor after a drop must
    not, or the window would restart after the stall and read 1.0 again.

    Args:
        window: seconds of wall time to average over (> 0).
    """

    def __init__(self, window: float = 2.0) -> None:
        if not window > 0:
            raise ValueError(f'window must be > 0, got {window}')
        self.window = float(window)
        # (mono, sim_time, lateness, dropped, process_cpu) per tick
        self._samples: collections.deque[tuple[float, float, float, float, float]] = collections.deque()
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forget all samples (e.g. after a pause, so the pause does not count)."""
        with self._lock:
            self._samples.clear()

    def tick(self, mono: float, sim_time: float, lateness: float = 0.0, dropped: float = 0.0,
             process_cpu: float = 0.0) -> None:
        """Record one loop iteration scheduled at monotonic ``mono`` (s) with the sim at
        ``sim_time`` (s), that started ``lateness`` s after its schedule and gave up
        ``dropped`` s of sim time (a lag beyond the catch-up limit); ``process_cpu``: CPU
        s the process used since the previous tick began (who held a late tick)."""
        with self._lock:
            self._samples.append((float(mono), float(sim_time), max(0.0, float(lateness)), float(dropped),
                                  float(process_cpu)))
            while len(self._samples) > 2 and mono - self._samples[0][0] > self.window:
                self._samples.popleft()

    def report(self) -> RateReport | None:
        """The measurement, or None with fewer than two samples. Lateness and drops count
        from the ticks after the window's first one (the span the rates cover)."""
        with self._lock:
            if len(self._samples) < 2:
                return None
            (m0, s0, *_), (m1, s1, *_) = self._samples[0], self._samples[-1]
            ticks = len(self._samples) - 1
            later = list(self._samples)[1:]
        span = m1 - m0
        if span <= 0:
            return None
        latest = max(later, key=lambda sample: sample[2])
        return RateReport((s1 - s0) / span, ticks / span, span, ticks, latest[2],
                          sum(sample[3] for sample in later), latest[4])


#: Highest SCHED_FIFO priority Linux accepts.
MAX_REALTIME_PRIORITY = 99


def set_realtime_priority(priority: int) -> str | None:
    """Run the calling thread under ``SCHED_FIFO`` at ``priority`` (1-99), as ros2_control's
    controller manager does for its loop (its ``thread_priority``, default 50: "Determinism",
    controller_manager user documentation, Jazzy); 0 leaves the thread's scheduling alone.

    A real-time thread is run as soon as it wakes, ahead of every normal thread and process
    (the subscriber of its messages, the node's executor threads); Linux's real-time
    throttling (``sched_rt_runtime_us``, 95 % by default) keeps a runaway loop from taking
    the whole core.

    Returns None when done (or 0), else why it could not be (the thread then keeps normal
    scheduling): an unprivileged user needs an ``rtprio`` limit, e.g. the ``realtime`` group
    with ``@realtime - rtprio 99`` in /etc/security/limits.conf, or ``--cap-add=sys_nice``
    in a container. Raises ValueError for a priority outside 0-99.
    """
    if not 0 <= int(priority) <= MAX_REALTIME_PRIORITY:
        raise ValueError(f'thread priority must be 0 (normal scheduling) to {MAX_REALTIME_PRIORITY}, got {priority}')
    if priority == 0:
        return None
    if not hasattr(os, 'sched_setscheduler'):
        return 'this platform has no SCHED_FIFO (os.sched_setscheduler)'
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(priority)))
    except OSError as exc:
        return (f'SCHED_FIFO priority {priority} refused ({exc.strerror or exc}): give the user an rtprio limit '
                '(the realtime group in /etc/security/limits.conf, as for ros2_control) or set thread_priority '
                'to 0')
    return None
