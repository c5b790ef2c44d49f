"""The stop request a signal handler sets (shadow_twin.common.signals).

A Python signal handler runs in the main thread between any two of its bytecodes. The tests
run the handler at every one of those points inside ``wait`` (a trace function calls it at
the n-th event, n = 1, 2, ...) in a child process, and check that ``wait`` then returns at
once. ``threading.Event`` fails the same check (the handler takes the lock ``wait`` holds
and the child hangs): the check can fail.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from shadow_twin.common.signals import POLL_INTERVAL, StopRequest

#: The child: for n = 1, 2, ..., a fresh flag, a trace function that calls ``set()`` at the n-th
#: trace event inside ``wait`` (calls and lines of every frame below it; a wait of a few polls, so
#: that n runs past its end), and ``wait`` must return True; prints the number of points tried.
_CHILD = textwrap.dedent('''
    import sys, threading
    from shadow_twin.common.signals import StopRequest
    make = {'StopRequest': StopRequest, 'Event': threading.Event}[sys.argv[1]]
    points = 0
    for n in range(1, 1000):
        flag, seen = make(), [0]
        def trace(frame, event, arg):
            seen[0] += 1
            if seen[0] == n:
                flag.set()
            return trace
        sys.settrace(trace)
        returned = flag.wait(float(sys.argv[2]))
        sys.settrace(None)
        if seen[0] <= n:        # set at the wait's last event, or never: every point was tried
            break
        assert returned, n
        points += 1
    print(points, flush=True)
''')


def _run_child(kind: str, timeout: float) -> subprocess.CompletedProcess | None:
    """The child's result, or None when it hung for ``timeout`` s (then it is killed)."""
    proc = subprocess.Popen([sys.executable, '-c', _CHILD, kind, str(3 * POLL_INTERVAL)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)})
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_a_request_at_any_point_of_the_wait_ends_it():
    done = _run_child('StopRequest', timeout=60)
    assert done is not None, 'StopRequest.wait hung when set at some point inside it'
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 5        # the wait was interrupted at each of its points


def test_an_event_set_at_some_point_of_its_wait_hangs():
    # why StopRequest exists: with the lock Event.wait holds, a handler's set() never returns
    assert _run_child('Event', timeout=5) is None


def test_a_signal_ends_the_wait_and_names_itself():
    request = StopRequest()
    with request.installed((signal.SIGUSR1,)):
        assert signal.getsignal(signal.SIGUSR1) == request.handle
        timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGUSR1))
        timer.start()
        assert request.wait(10)                 # True: set (a timeout returns False)
        timer.join()
    assert request.signum == signal.SIGUSR1
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL    # the handler there was, again


def test_wait_times_out_unset_and_another_thread_sets_it():
    request = StopRequest()
    assert request.wait(2 * POLL_INTERVAL) is False and not request.is_set()
    threading.Timer(0.02, request.set).start()
    assert request.wait(10) and request.signum is None


def test_installed_restores_the_handlers_when_the_block_raises():
    before = signal.getsignal(signal.SIGUSR1)
    with pytest.raises(RuntimeError):
        with StopRequest().installed((signal.SIGUSR1,)):
            raise RuntimeError('inside')
    assert signal.getsignal(signal.SIGUSR1) == before
