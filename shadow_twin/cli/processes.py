"""Child processes of the command-line tools (``shadow-twin up``, ``shadow-twin demo``): start,
watch, stop in order.

Each child runs in its own session, so a Ctrl-C in the terminal reaches only the parent,
which then stops the children in the order it chooses (the twin server before the bridges,
so that it can cancel its controller goals). None is left behind when the parent dies,
however it dies (SIGKILL included): each child holds the parent's lifeline
(:mod:`shadow_twin.common.lifeline`, a pipe whose end-of-file tells it the parent is gone;
the nodes then stop within 1.5 s, ``shadow_twin.ros.spinning.stop_with_parent``); on Linux
it also gets SIGTERM when the thread that started it ends (``PR_SET_PDEATHSIG``).

:meth:`ChildProcesses.supervise` keeps the healthy children running when one dies (as
``ros2 launch`` does): the death is reported, and a child named ``respawn`` is started again
after :data:`RESPAWN_DELAY` s (``shadow-twin up`` respawns the nodes it starts: mock hardware
and the twin's own; it never starts a real driver). A child that ends within
:data:`STARTUP_WINDOW` s of its first start cannot start (a bad configuration), and one that
died :data:`MAX_RESPAWNS` times within :data:`RESPAWN_WINDOW` s is crash-looping: both end the
supervision.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from shadow_twin.common import lifeline
from shadow_twin.common.errors import ShadowTwinError

#: Seconds a child waits after its death before it is started again. A new DDS participant
#: stalls the others' traffic for a moment while they discover it: a respawn 1 s after a death
#: delayed the twin's abort (0.55 s after the death) to the client to 1.38 s once in 6
#: (benchmarks/faults.py); after 2 s the abort has reached the clients.
RESPAWN_DELAY = 2.0
#: A child ending within this many s of its first start could not start, s.
STARTUP_WINDOW = 10.0
#: A child that died this many times within :data:`RESPAWN_WINDOW` s is not started again.
MAX_RESPAWNS = 3
RESPAWN_WINDOW = 60.0


class ChildProcesses:
    """Named child processes.

    Args:
        log_dir: each child's stdout and stderr go to ``<log_dir>/<name>.log``; None: they
            share the parent's.
    """

    def __init__(self, log_dir: Path | None = None) -> None:
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen] = {}
        self.commands: dict[str, list[str]] = {}
        self._first_start: dict[str, float] = {}
        self._deaths: dict[str, list[float]] = {}
        self._ended: set[str] = set()       # children that ended and are not watched any more

    def start(self, name: str, command: list[str]) -> subprocess.Popen:
        """Start ``command`` as child ``name`` (environment inherited)."""
        out = None
        if self.log_dir is not None:
            out = open(self.log_dir / f'{name}.log', 'a' if name in self.procs else 'w')
        try:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT if out else None,
                                    **lifeline.child_options(), start_new_session=True,
                                    preexec_fn=lifeline.death_signal())
        finally:
            if out is not None:
                out.close()
        self.procs[name] = proc
        self.commands[name] = list(command)
        self._first_start.setdefault(name, time.monotonic())
        return proc

    def exited(self) -> tuple[str, int] | None:
        """(name, exit status) of a child that has ended, or None while all run."""
        for name, proc in self.procs.items():
            if name not in self._ended and proc.poll() is not None:
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

    def supervise(self, stop_requested, respawn: set[str], report, interval: float = 0.1
                  ) -> tuple[str, int, str] | None:
        """Watch the children until ``stop_requested()`` (returns None) or until one ends that
        ends the supervision (returns its name, exit status and why): it could not start, it is
        crash-looping, or it was the last one running. A child not in ``respawn`` that dies is
        left dead while the others run on. Each death and respawn is told to ``report(line)``."""
        while not stop_requested():
            ended = self.exited()
            if ended is None:
                time.sleep(interval)
                continue
            name, status = ended
            now = time.monotonic()
            deaths = [t for t in self._deaths.get(name, []) if now - t < RESPAWN_WINDOW] + [now]
            self._deaths[name] = deaths
            if now - self._first_start[name] < STARTUP_WINDOW:
                return name, status, f'it ended within {STARTUP_WINDOW:g} s of its start: it cannot start'
            if name not in respawn:
                report(f'{name} exited with status {status}; the other nodes run on (it is not respawned)')
                self._ended.add(name)
                if self._ended >= set(self.procs):
                    return name, status, 'every node has ended'
                continue
            if len(deaths) > MAX_RESPAWNS:
                return name, status, f'it died {len(deaths)} times within {RESPAWN_WINDOW:g} s'
            report(f'{name} exited with status {status}; the other nodes run on; starting it again in '
                   f'{RESPAWN_DELAY:g} s')
            if _wait(stop_requested, RESPAWN_DELAY, interval):
                return None
            proc = self.start(name, self.commands[name])
            report(f'{name} started again (pid {proc.pid})')
        return None


def _wait(stop_requested, seconds: float, interval: float) -> bool:
    """Sleep ``seconds`` s unless ``stop_requested()`` becomes true first (then True)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if stop_requested():
            return True
        time.sleep(interval)
    return stop_requested()
