"""Child processes of the command-line tools (``shadow-twin up``, ``shadow-twin demo``): start,
watch, stop in order.

Each child runs in its own session, so a Ctrl-C in the terminal reaches only the parent,
which then stops the children in the order it chooses (the twin server before the bridges,
so that it can cancel its controller goals). None is left behind when the parent dies,
however it dies (SIGKILL included): each child holds the parent's lifeline
(:mod:`shadow_twin.common.lifeline`, a pipe whose end-of-file tells it the parent is gone;
the nodes then stop within 1.5 s, ``shadow_twin.ros.spinning.stop_with_parent``); on Linux
it also gets SIGTERM when the thread that started it ends (``PR_SET_PDEATHSIG``).

Readiness: a child started with a ``ready_line`` (a regular expression) is *ready* once a line
of its output (stdout or stderr) matches it: each node logs one such line when it serves its
topics and actions (``shadow_twin.cli.up.READY_LINES``). Its output then goes through a pipe
that a thread of this process copies, line by line, to where it went before (the log file, or
this process's stdout and stderr) while it watches for that line. A child started without one
is ready from its start (nothing tells otherwise).

:meth:`ChildProcesses.supervise` keeps the healthy children running when one dies (as
``ros2 launch`` does): the death is reported, and a child named ``respawn`` is started again
after :data:`RESPAWN_DELAY` s (``shadow-twin up`` respawns the nodes it starts: mock hardware
and the twin's own; it never starts a real driver), whatever its age. Two deaths end the
supervision: a child that ends before it was ever ready cannot start (a bad configuration, a
missing file), and one that died :data:`MAX_RESPAWNS` times within :data:`RESPAWN_WINDOW` s is
crash-looping. A child still not ready :data:`STARTUP_WINDOW` s after its start is reported in
one line (it runs on; the supervision waits for it).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from shadow_twin.common import lifeline
from shadow_twin.common.errors import ShadowTwinError

#: Seconds a child waits after its death before it is started again. A new DDS participant
#: stalls the others' traffic for a moment while they discover it: a respawn 1 s after a death
#: delayed the twin's abort (0.55 s after the death) to the client to 1.38 s once in 6
#: (benchmarks/faults.py); after 2 s the abort has reached the clients.
RESPAWN_DELAY = 2.0
#: A child not ready this many s after its start is reported (once per start), s. The cell's six
#: nodes are all ready within about 5 s of ``up``'s start here; two busy processes beside it slow
#: that 2-3 fold.
STARTUP_WINDOW = 10.0
#: A child that died this many times within :data:`RESPAWN_WINDOW` s is not started again.
MAX_RESPAWNS = 3
RESPAWN_WINDOW = 60.0
#: Longest piece of a child's output line copied at once, bytes (a longer line is copied in pieces).
LINE_BYTES = 1 << 16
#: How long to wait for the rest of a dead child's output (its ready line may still be in the pipe), s.
DRAIN_TIMEOUT = 1.0


@dataclass
class _Run:
    """One start of a child: its process, monotonic start and ready times (s), output threads."""

    proc: subprocess.Popen
    started: float
    ready: float | None = None
    respawn: bool = False
    late_reported: bool = False
    announced: bool = False             # its readiness has been noted
    relays: list[threading.Thread] = field(default_factory=list)


class ChildProcesses:
    """Named child processes.

    Args:
        log_dir: each child's stdout and stderr go to ``<log_dir>/<name>.log``; None: they
            go to this process's stdout and stderr.
    """

    def __init__(self, log_dir: Path | None = None) -> None:
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen] = {}
        self.commands: dict[str, list[str]] = {}
        self.ready_lines: dict[str, re.Pattern | None] = {}
        self._runs: dict[str, _Run] = {}
        self._first_start: dict[str, float] = {}
        self._ever_ready: set[str] = set()
        self._all_ready_reported = False
        self._deaths: dict[str, list[float]] = {}
        self._ended: set[str] = set()       # children that ended and are not watched any more

    def start(self, name: str, command: list[str], ready_line: str | None = None) -> subprocess.Popen:
        """Start ``command`` as child ``name`` (environment inherited); ``ready_line``: a regular
        expression (``re.search``) a line of its output matches once it is ready (None: it is
        ready from its start). A respawn (the same name again) keeps the name's ready line when
        ``ready_line`` is None. Raises OSError when the command cannot be run."""
        if ready_line is not None or name not in self.ready_lines:
            self.ready_lines[name] = None if ready_line is None else re.compile(ready_line)
        pattern = self.ready_lines[name]
        log = None
        if self.log_dir is not None:
            log = open(self.log_dir / f'{name}.log', 'ab' if name in self.procs else 'wb')
        options = lifeline.child_options()
        if pattern is not None:
            options['env'].setdefault('PYTHONUNBUFFERED', '1')       # print() lines arrive as printed
            if log is None and _isatty(sys.stderr):                   # the colours a terminal had before
                options['env'].setdefault('RCUTILS_COLORIZED_OUTPUT', '1')
        if pattern is None:
            outputs = {'stdout': log, 'stderr': subprocess.STDOUT if log else None}
        else:
            outputs = {'stdout': subprocess.PIPE, 'stderr': subprocess.STDOUT if log else subprocess.PIPE}
        try:
            proc = subprocess.Popen(command, **outputs, **options, start_new_session=True,
                                    preexec_fn=lifeline.death_signal())
        except BaseException:
            if log is not None:
                log.close()
            raise
        now = time.monotonic()
        run = _Run(proc, now, ready=None if pattern is not None else now, respawn=name in self.procs)
        if pattern is not None:
            sinks = [(proc.stdout, log)] if log else [(proc.stdout, _binary(sys.stdout)),
                                                      (proc.stderr, _binary(sys.stderr))]
            for stream, sink in sinks:
                thread = threading.Thread(target=self._relay, args=(run, stream, sink, pattern, log is not None),
                                          name=f'{name} output', daemon=True)
                run.relays.append(thread)
        elif log is not None:
            log.close()
        self._runs[name] = run
        self.procs[name] = proc
        self.commands[name] = list(command)
        self._first_start.setdefault(name, run.started)
        if run.ready is not None:
            self._ever_ready.add(name)
        for thread in run.relays:
            thread.start()
        return proc

    def _relay(self, run: _Run, stream, sink, pattern: re.Pattern, close_sink: bool) -> None:
        """Copy ``stream`` to ``sink`` line by line (at most :data:`LINE_BYTES` at a time) until
        end-of-file; mark ``run`` ready at the first line matching ``pattern``. Our own output
        gone (a closed pipe) stops the copying, not the reading: the child never blocks on it."""
        owned = sink if close_sink else None
        try:
            for line in iter(lambda: stream.readline(LINE_BYTES), b''):
                if sink is not None:
                    try:
                        sink.write(line)
                        sink.flush()
                    except (OSError, ValueError):
                        sink = None
                if run.ready is None and pattern.search(line.decode('utf-8', errors='replace')):
                    run.ready = time.monotonic()
        finally:
            stream.close()
            if owned is not None:
                owned.close()

    def ready(self, name: str) -> bool:
        """Whether child ``name``'s current process has sent its ready line."""
        run = self._runs.get(name)
        return run is not None and run.ready is not None

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

    def stop(self, order: list[str] | None = None, timeout: float = 10.0,
             report: Callable[[str], None] | None = None) -> dict[str, int]:
        """Stop the children, one after the other in ``order`` (default: start order; names of
        children not started are skipped), each with SIGINT, then SIGTERM after ``timeout`` s, then
        SIGKILL; returns their exit statuses (their last output copied first). ``report(line)``
        (if given) is told how long each child took to stop and each signal that had to follow."""
        first = [n for n in (order or ()) if n in self.procs]
        names = first + [n for n in self.procs if n not in first]
        for name in names:
            proc = self.procs[name]
            started = time.monotonic()
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
                if proc.poll() is not None:
                    break
                if sig != signal.SIGINT and report is not None:
                    report(f'{name} did not stop within {timeout:.0f} s: sending {sig.name}')
                try:
                    proc.send_signal(sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    continue
                if report is not None:
                    report(f'{name} stopped {time.monotonic() - started:.1f} s after {sig.name} '
                           f'(status {proc.returncode})')
        statuses = {name: proc.wait() for name, proc in self.procs.items()}
        for name in names:
            self._drain(name)
        return statuses

    def _drain(self, name: str) -> None:
        """Wait (up to :data:`DRAIN_TIMEOUT` s) until child ``name``'s output has been copied."""
        deadline = time.monotonic() + DRAIN_TIMEOUT
        for thread in self._runs[name].relays:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _watch_readiness(self, report) -> None:
        """Note the children that got ready; report one not ready :data:`STARTUP_WINDOW` s after its
        start, one ready after such a report or after a respawn, and once when every child is ready."""
        now = time.monotonic()
        for name, run in list(self._runs.items()):
            if run.ready is not None:
                self._ever_ready.add(name)
            if name in self._ended or run.proc.poll() is not None:
                continue
            if run.ready is None:
                if not run.late_reported and now - run.started >= STARTUP_WINDOW:
                    run.late_reported = True
                    report(f'{name} is not ready {now - run.started:.0f} s after its start (no line matching '
                           f'{self.ready_lines[name].pattern!r} in its output yet; a log level above INFO hides it): '
                           'it runs on; ' + ('it is respawned if it dies' if name in self._ever_ready else
                                             'if it ends before it is ready, every node is stopped'))
            elif not run.announced:
                run.announced = True
                if run.late_reported or run.respawn:
                    report(f'{name} is ready{" again" if run.respawn else ""} (pid {run.proc.pid}), '
                           f'{run.ready - run.started:.1f} s after its start')
        if not self._all_ready_reported and all(r.ready is not None for r in self._runs.values()):
            self._all_ready_reported = True
            report('ready: ' + ', '.join(f'{n} after {r.ready - r.started:.1f} s' for n, r in self._runs.items()))

    def supervise(self, stop_requested, respawn: set[str], report, interval: float = 0.1
                  ) -> tuple[str, int, str] | None:
        """Watch the children until ``stop_requested()`` (returns None) or until one ends that
        ends the supervision (returns its name, exit status and why): it ended before it was ever
        ready (it cannot start), it is crash-looping, or it was the last one running. A child
        that dies after it was ready is started again if it is in ``respawn`` (whatever its age),
        else left dead while the others run on. Each death, respawn, late or restored readiness
        is told to ``report(line)``."""
        while not stop_requested():
            self._watch_readiness(report)
            ended = self.exited()
            if ended is None:
                time.sleep(interval)
                continue
            name, status = ended
            self._drain(name)                   # its ready line may be the last it wrote
            self._watch_readiness(report)
            now = time.monotonic()
            deaths = [t for t in self._deaths.get(name, []) if now - t < RESPAWN_WINDOW] + [now]
            self._deaths[name] = deaths
            if name not in self._ever_ready:
                return name, status, (f'it ended before it was ready, {now - self._runs[name].started:.1f} s after '
                                      f'its start (no line matching {self.ready_lines[name].pattern!r}): '
                                      'it cannot start')
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


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _binary:
    """Bytes written to a text stream (its ``buffer`` when it has one: pytest's capture has not)."""

    def __init__(self, stream) -> None:
        self.stream = stream

    def write(self, data: bytes) -> None:
        buffer = getattr(self.stream, 'buffer', None)
        if buffer is not None:
            self.stream.flush()
            buffer.write(data)
        else:
            self.stream.write(data.decode('utf-8', errors='replace'))

    def flush(self) -> None:
        buffer = getattr(self.stream, 'buffer', None)
        (buffer or self.stream).flush()


def _wait(stop_requested, seconds: float, interval: float) -> bool:
    """Sleep ``seconds`` s unless ``stop_requested()`` becomes true first (then True)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if stop_requested():
            return True
        time.sleep(interval)
    return stop_requested()
