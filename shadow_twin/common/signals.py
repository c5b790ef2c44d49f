"""A stop request that a signal handler can make safely.

Python runs a signal handler in the main thread between two bytecodes, wherever that thread
is: also inside ``threading.Event.wait``, holding the event's lock (the moment after its
timed wait ends and before it returns). A handler that calls ``Event.set()`` there takes
the same lock again and the process hangs for good, SIGTERM included (CPython issue 126434;
it hung the mock hardware bridge on SIGINT in CI, 29 Nov 2026). The chance is small per
signal and larger on a busy machine, where the main thread more often waits for the GIL at
that point.

:class:`StopRequest` takes no lock: its handler sets an attribute, and :meth:`StopRequest.wait`
polls it while sleeping (a signal interrupts the sleep; PEP 475 resumes it).
"""

from __future__ import annotations

import signal
import time
from contextlib import contextmanager
from typing import Iterator

#: s between two looks at the request in :meth:`StopRequest.wait`: the longest a signal waits
#: to be noticed.
POLL_INTERVAL = 0.02

#: The signals that stop the project's processes.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequest:
    """A one-way flag: set by a signal handler, another thread, or a callback; never cleared.

    The subset of ``threading.Event`` the project's supervisors used (``set``, ``is_set``,
    ``wait``), without its lock. ``signum`` is the first signal that set it (None: set by a
    call, or not set).
    """

    def __init__(self) -> None:
        self._set = False
        self.signum: int | None = None

    def set(self) -> None:
        """Request the stop (safe from a signal handler and from any thread)."""
        self._set = True

    def is_set(self) -> bool:
        """True once the stop was requested."""
        return self._set

    def handle(self, signum: int, frame=None) -> None:
        """A signal handler (``signal.signal(sig, request.handle)``): remembers the first signal
        and requests the stop."""
        if self.signum is None:
            self.signum = signum
        self._set = True

    def wait(self, timeout: float) -> bool:
        """Sleep until the stop is requested or ``timeout`` s pass; returns :meth:`is_set`.
        Notices a request within :data:`POLL_INTERVAL` s."""
        deadline = time.monotonic() + timeout
        while not self._set:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, POLL_INTERVAL))
        return self._set

    @contextmanager
    def installed(self, signals: tuple[int, ...] = STOP_SIGNALS) -> Iterator['StopRequest']:
        """Handle ``signals`` with :meth:`handle` inside the ``with`` block, then restore the
        handlers there were (call from the main thread: ``signal.signal`` raises ValueError
        elsewhere)."""
        previous = {sig: signal.signal(sig, self.handle) for sig in signals}
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
