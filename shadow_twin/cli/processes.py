"""Child processes of the command-line tools (``shadow-twin up``, ``shadow-twin demo``): start,
watch, stop in order.

Each child runs in its own session, so a Ctrl-C in the terminal reaches only the parent,
which then stops the children in the order it chooses (the twin server before the bridges,
so that it can cancel its controller goals). On Linux each child also gets SIGTERM if the
parent dies (``PR_SET_PDEATHSIG``), so none is left behind.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from shadow_twin.common.errors import ShadowTwinError

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:    # runs in the child between fork and exec
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


class ChildProcesses:
    """Named child processes.

    Args:
        log_dir: each child's stdout and stderr go to ``<log_dir>/<name>.log``; None: they
            share the parent's.
    """

    def __init__(self, log_dir: Path | None = None) -> None:
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str, command: list[str]) -> subprocess.Popen:
        """Start ``command`` as child ``name`` (environment inherited)."""
        out = None
        if self.log_dir is not None:
            out = open(self.log_dir / f'{name}.log', 'w')
        try:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT if out else None,
                                    env=os.environ.copy(), start_new_session=True,
                                    preexec_fn=_die_with_parent if sys.platform.startswith('linux') else None)
        finally:
            if out is not None:
                out.close()
        self.procs[name] = proc
        return proc

    def exited(self) -> tuple[str, int] | None:
        """(name, exit status) of a child that has ended, or None while all run."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                return name, proc.returncode
        return None

    def check(self) -> None:
        """Raise ShadowTwinError naming a child that has ended, with the end of its log."""
        ended = self.exited()
        if ended is not None:
            name, status = ended
            raise ShadowTwinError(f'{name} exited with status {status}:\n{self.log_tail(name)}')

    def log_tail(self, name: str, chars: int = 1500) -> str:
        """The end of child ``name``'s log ('' without a log directory)."""
        if self.log_dir is None:
            return ''
        return (self.log_dir / f'{name}.log').read_text(errors='replace')[-chars:]

    def stop(self, order: list[str] | None = None, timeout: float = 10.0) -> dict[str, int]:
        """Stop the children, one after the other in ``order`` (default: start order; names of
        children not started are skipped), each with SIGINT, then SIGTERM after ``timeout`` s, then
        SIGKILL; returns their exit statuses."""
        first = [n for n in (order or ()) if n in self.procs]
        names = first + [n for n in self.procs if n not in first]
        for name in names:
            proc = self.procs[name]
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
                if proc.poll() is not None:
                    break
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    continue
        return {name: proc.wait() for name, proc in self.procs.items()}

    def wait_any(self, stop_requested, interval: float = 0.1) -> tuple[str, int] | None:
        """Wait until a child ends (returns its name and status) or ``stop_requested()`` is true (None)."""
        while not stop_requested():
            ended = self.exited()
            if ended is not None:
                return ended
            time.sleep(interval)
        return None
