"""Building a model in the background with a deadline, without ROS.

A live reload must never stop the twin: :class:`BackgroundBuild` runs the build
(parse + compile + controller, :meth:`LiveSimulation.prepare_reload`) in a plain
daemon thread while the caller waits for it at most ``timeout`` seconds, or
until a ``cancel`` event is set (shutdown). MuJoCo's parser and compiler release
the GIL, so the caller's other threads (the physics loop) keep running.

* The thread is a daemon ``threading.Thread``, not an executor thread: process
  exit never waits for a compile that is still running.
* A build whose caller stopped waiting (timeout, cancel) runs to its end and
  its result is dropped: a result only ever reaches the caller that waited for
  it, so a late model is never swapped in.
* The build thread lowers its own scheduling priority (Linux: ``nice`` +10 for
  that thread only), so on a busy machine the compile yields the CPU to the
  physics loop rather than the other way round.
* One build at a time: while an abandoned build still runs, a new one is refused
  (:class:`BuildBusy`) rather than piling up threads and memory.

The size of an MJCF (with its includes) is limited before any parsing by
``max_bytes`` of :class:`~shadow_twin.model.mjcf.TwinModel` (raises
:class:`~shadow_twin.common.errors.ModelTooLarge`).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable, Generic, TypeVar

from shadow_twin.common.errors import ShadowTwinError

T = TypeVar('T')
#: Longest sleep between two looks at the cancel event, s.
POLL_S = 0.05
#: Niceness added to a build thread (lower priority than the thread that waits and the physics).
BUILD_NICE = 10


class BuildBusy(ShadowTwinError):
    """An earlier build is still running (``label``, started ``elapsed`` s ago); nothing was started."""

    def __init__(self, label: str, elapsed: float) -> None:
        super().__init__(f'{label} is still running (started {elapsed:.1f} s ago)')
        self.label, self.elapsed = label, elapsed


class BuildTimeout(ShadowTwinError):
    """The build took longer than ``timeout`` s; it goes on in the background, its result discarded."""

    def __init__(self, label: str, timeout: float) -> None:
        super().__init__(f'{label} took longer than {timeout:g} s')
        self.label, self.timeout = label, timeout


class BuildCancelled(ShadowTwinError):
    """The caller's cancel event was set (shutdown) before the build ended; its result is discarded."""


class _Job:
    def __init__(self, build: Callable, label: str) -> None:
        self.build, self.label = build, label
        self.started = time.monotonic()
        self.done = threading.Event()
        self.abandoned = False          # the caller stopped waiting: the result is dropped
        self.result = self.error = None


class BackgroundBuild(Generic[T]):
    """Runs one build at a time in a daemon thread; :meth:`run` waits for it with a deadline.

    Args:
        name: name of the build threads.
        on_late: called from the build thread as ``on_late(label, seconds, error)`` when an
            abandoned build ends (``seconds`` since it started; ``error`` None when it
            succeeded); its result is discarded.
    """

    def __init__(self, name: str = 'model_build',
                 on_late: Callable[[str, float, BaseException | None], None] | None = None) -> None:
        self.name = name
        self.on_late = on_late
        self._lock = threading.Lock()
        self._job: _Job | None = None

    @property
    def running(self) -> bool:
        """True while a build thread (awaited or abandoned) is running."""
        with self._lock:
            return self._job is not None and not self._job.done.is_set()

    def run(self, build: Callable[[], T], timeout: float, cancel: threading.Event | None = None,
            label: str = 'the build') -> T:
        """Run ``build()`` in a new daemon thread and wait for it up to ``timeout`` s.

        Args:
            build: the work; its exceptions are re-raised here.
            timeout: longest wait, s (> 0).
            cancel: stop waiting as soon as this event is set (checked every 50 ms).
            label: names the build in errors (e.g. 'compiling /path/model.xml').
        Returns:
            What ``build()`` returned.
        Raises:
            BuildBusy: an earlier build is still running (nothing started).
            BuildTimeout: ``timeout`` passed; the build goes on, its result is discarded.
            BuildCancelled: ``cancel`` was set; likewise.
            Whatever ``build()`` raised.
        """
        with self._lock:
            job = self._job
            if job is not None and not job.done.is_set():
                raise BuildBusy(job.label, time.monotonic() - job.started)
            job = self._job = _Job(build, label)
        threading.Thread(target=self._work, args=(job,), name=self.name, daemon=True).start()
        deadline = job.started + float(timeout)
        while not job.done.wait(max(0.0, min(POLL_S, deadline - time.monotonic()))):
            if cancel is not None and cancel.is_set() or time.monotonic() >= deadline:
                with self._lock:
                    if not job.done.is_set():
                        job.abandoned = True
                        if cancel is not None and cancel.is_set():
                            raise BuildCancelled(f'{label}: abandoned (shutting down)')
                        raise BuildTimeout(label, timeout)
                break
        result, job.result = job.result, None      # keep no reference to it here
        if job.error is not None:
            raise job.error
        return result

    def _work(self, job: _Job) -> None:
        try:        # Linux: PRIO_PROCESS with a thread id sets that thread's niceness only
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0)
                           + BUILD_NICE)
        except (AttributeError, OSError):   # not on this platform: run at normal priority
            pass
        try:
            job.result = job.build()
        except BaseException as exc:    # handed to the waiting caller
            job.error = exc
        with self._lock:
            job.done.set()
            late = job.abandoned
        if late:
            job.result = None           # discarded: never reaches anyone
            if self.on_late is not None:
                self.on_late(job.label, time.monotonic() - job.started, job.error)
