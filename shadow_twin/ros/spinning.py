"""How the project's nodes are spun: one place for executors, threads, signals and exit codes.

* :func:`events_executor` is rclpy's ``EventsExecutor`` (``rclpy.experimental``): one thread,
  callbacks dispatched from C++ as their events arrive, where the Python executors rebuild
  their wait set for every message. Every single-threaded spinner uses it: the idle cell's
  twin monitor fell from 25 % to 10 % of a core, the twin server (whose joint-state
  listener spins on one) from 23 % to 10 % (``benchmarks/idle.py``).
* :class:`BackgroundSpinner` spins nodes on an :func:`events_executor` in a daemon
  thread (high-rate subscriptions that must not wait behind a busy
  MultiThreadedExecutor, or a node beside others in one process).
* :func:`spin_guarded` spins an executor until it is shut down; an exception that escapes
  a callback is logged (rate-limited, :class:`~shadow_twin.ros.guard.CallbackGuard`) and
  spinning goes on: nothing a message carries ends the process.
* :func:`run_until_signal` spins an executor until SIGINT/SIGTERM and lets the
  nodes clean up over ROS before it stops.
* :func:`result_within` / :func:`all_done_within` wait for futures that another thread's executor completes.
* :func:`run_node` is the body of every console entry point: Fast DDS over UDP only
  (:func:`shadow_twin.ros.dds.use_udp_transport`), init, build the node (a bad
  configuration ends with one fatal log line and exit status 1), freeze the start-up
  objects for the garbage collector (:func:`freeze_startup_objects`), spin until a
  signal or until the parent process ends (:func:`stop_with_parent`), shut down (exit
  status 0; a node whose executor stopped without a signal logs why and exits 1). SIGUSR2
  (:data:`STACKS_SIGNAL`) prints every thread's stack and changes nothing.
"""

from __future__ import annotations

import faulthandler
import gc
import os
import signal
import threading
import time
from typing import Callable

import rclpy
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.executors import Executor, ExternalShutdownException
from rclpy.experimental import EventsExecutor
from rclpy.logging import get_logger
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from shadow_twin.common import lifeline
from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.common.signals import StopRequest
from shadow_twin.ros.dds import use_udp_transport
from shadow_twin.ros.guard import CallbackGuard

#: Exceptions that mean "the node's configuration is wrong" when raised while it is built.
STARTUP_ERRORS = (ShadowTwinError, InvalidParameterTypeException, InvalidParameterValueException, ValueError)


def all_done_within(futures, timeout: float, interval: float = 0.005) -> bool:
    """Wait up to ``timeout`` s until every future (completed by executors spinning in other
    threads) is done; True if they all are."""
    deadline = time.monotonic() + timeout
    while not all(f.done() for f in futures):
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def result_within(future, timeout: float, interval: float = 0.005):
    """The result of ``future`` (completed by an executor spinning in another thread), or None
    if it is not done within ``timeout`` s."""
    return future.result() if all_done_within([future], timeout, interval) else None


def events_executor(context=None) -> Executor:
    """A new ``rclpy.experimental.EventsExecutor`` on ``context`` (default: the default context).

    Single-threaded: a callback that blocks holds every other callback of its nodes, so it
    suits nodes whose callbacks return at once (listeners, the monitor), not a node that waits
    inside a callback for another of its callbacks (the twin server's goal path).
    """
    return EventsExecutor(context=context)


class BackgroundSpinner:
    """Spin ``nodes`` on their own :func:`events_executor` in a daemon thread.

    Args:
        nodes: nodes sharing one context.
        name: thread name (and the label of an error log line if spinning fails).
    """

    def __init__(self, nodes: list[Node], name: str) -> None:
        self.nodes = list(nodes)
        self.name = name
        self.executor = events_executor(context=self.nodes[0].context)
        for node in self.nodes:
            self.executor.add_node(node)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._spin, name=name, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        spin_guarded(self.executor, CallbackGuard(self.nodes[0].get_logger()), self.name, self._stop)

    def call_soon(self, callback: Callable[[], None]) -> None:
        """Run ``callback()`` on the spinner's thread, queued behind the events already waiting
        (e.g. messages that arrived before the call). Use a guarded callback: what it raises
        reaches the spinning loop."""
        self.executor.create_task(callback)

    def shutdown(self) -> None:
        """Stop spinning and wait for the thread (its last callback may still be running)."""
        self._stop.set()
        self.executor.shutdown(timeout_sec=1.0)
        self.thread.join(timeout=2.0)


def spin_guarded(executor: Executor, guard: CallbackGuard, name: str = 'executor',
                 stop: threading.Event | None = None) -> None:
    """Spin ``executor`` until ``stop`` is set or it or its context is shut down (an
    ``EventsExecutor`` does not say it was shut down: set ``stop`` first). An exception raised
    by a callback (rclpy re-raises it from ``spin_once``) is reported by ``guard`` under ``name``
    and spinning goes on."""
    context = executor.context
    stop = stop or threading.Event()
    while context.ok() and not stop.is_set() and not getattr(executor, '_is_shutdown', False):
        try:
            executor.spin_once(timeout_sec=0.1)
        except (KeyboardInterrupt, ExternalShutdownException):
            return
        except Exception as exc:   # a callback's: keep the node up, say what failed
            if not context.ok():
                return
            guard.report(name, exc)


#: s after its signal (or its executor's end) a node still not stopped prints every thread's stack
#: to stderr (``faulthandler``): ``shadow-twin up`` sends SIGTERM 10 s after SIGINT, and the
#: longest orderly stop (a running goal canceled, ``ANSWER_TIMEOUT`` + 1 s, then the threads'
#: joins) stays under this.
STOP_REPORT_AFTER = 8.0


def run_until_signal(executor: Executor, on_stop: Callable[[], None]) -> bool:
    """Spin ``executor`` in a thread until SIGINT/SIGTERM (or until it stops), then call
    ``on_stop()`` while it still spins (so goals can be canceled over ROS), then shut it down.
    Use with ``rclpy.init(..., signal_handler_options=SignalHandlerOptions.NO)``. Returns True
    after a signal, False when the executor stopped by itself. A stop still under way
    :data:`STOP_REPORT_AFTER` s later prints the stacks of all threads to stderr."""
    stop = StopRequest()        # not a threading.Event: a handler that sets one can hang (common.signals)
    nodes = executor.get_nodes()
    guard = CallbackGuard(nodes[0].get_logger() if nodes else get_logger('executor'))
    stopping = threading.Event()
    thread = threading.Thread(target=spin_guarded, args=(executor, guard, 'executor', stopping), name='executor',
                              daemon=True)
    with stop.installed():
        thread.start()
        try:
            while not stop.wait(0.1) and thread.is_alive():
                pass
        finally:
            # a stop that hangs says where: every thread's stack on stderr (the process's log)
            faulthandler.dump_traceback_later(STOP_REPORT_AFTER, exit=False)
            try:
                on_stop()
            finally:
                stopping.set()
                executor.shutdown(timeout_sec=1.0)
                thread.join(timeout=2.0)     # its last callback may still run: let it end before nodes go
    return stop.is_set()


#: ``gc.set_threshold`` of the nodes: a young collection every 50,000 allocations instead of 700.
#: Taking a 10,000-point goal allocates ~60,000 objects (rclpy's conversion of the message) under
#: the GIL; with the default thresholds the collections it triggered made the sim bridge's stepping
#: thread start a tick up to 34-61 ms late, with these 12-15 ms (benchmarks/faults.py, 2 runs each).
#: The nodes' garbage is almost all acyclic (messages), freed by reference counting anyway.
GC_THRESHOLDS = (50_000, 20, 20)


def freeze_startup_objects() -> None:
    """Collect garbage once, then move every object alive (modules, MuJoCo and rclpy state: the
    bulk of the heap) out of the cyclic garbage collector's reach (``gc.freeze``). A full
    collection otherwise scans them all and holds the GIL for 20-40 ms (measured in the
    bridge: a late physics tick); after the freeze it scans only what was made since. Then the
    collector runs less often (:data:`GC_THRESHOLDS`)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


#: The signal on which a node prints every thread's stack to stderr and goes on (``faulthandler``):
#: where a node that does not stop, or does not answer, is stuck. The tests' process helper sends
#: it before its SIGKILL.
STACKS_SIGNAL = signal.SIGUSR2

#: Seconds a node whose parent ended has for its orderly stop (as after SIGTERM) before it
#: exits anyway: the whole cell is gone within 2 s of a SIGKILL of ``shadow-twin up``.
PARENT_GONE_EXIT_DEADLINE = 1.5


def stop_with_parent(name: str) -> bool:
    """When the parent that started this process with a lifeline
    (:mod:`shadow_twin.common.lifeline`) ends, however it ends, log it, stop as on SIGTERM
    (the node's orderly stop: a running goal is canceled) and exit with status 1 at the latest
    :data:`PARENT_GONE_EXIT_DEADLINE` s later. Returns False when there is no lifeline."""
    def parent_gone() -> None:
        get_logger(name).error('the parent process ended: stopping')
        deadline = threading.Timer(PARENT_GONE_EXIT_DEADLINE, os._exit, (ExitCode.FAILED,))
        deadline.daemon = True
        deadline.start()
        os.kill(os.getpid(), signal.SIGTERM)
    return lifeline.watch_parent(parent_gone)


def run_node(make_node: Callable[[], Node], name: str, make_executor: Callable[[], Executor],
             args: list[str] | None = None, on_start: Callable[[Node], None] | None = None,
             on_stop: Callable[[Node], None] | None = None) -> int:
    """Run one node until SIGINT/SIGTERM; returns the exit status (0; 1 if it cannot start, or
    if its executor stopped without a signal: the reason is logged).

    Args:
        make_node: builds the node (after ``rclpy.init``); STARTUP_ERRORS mean a bad configuration.
        name: logger name for the fatal line.
        make_executor: builds the executor.
        args: ROS command-line arguments (default: ``sys.argv``).
        on_start: called with the node once it spins (e.g. start a physics thread).
        on_stop: called with the node on shutdown while the executor still spins.
    """
    stop_with_parent(name)
    faulthandler.register(STACKS_SIGNAL, all_threads=True)    # `kill -USR2 <pid>`: where is it?
    transport = use_udp_transport()       # before rclpy.init: no shared-memory stalls (issue 9)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    if transport:
        get_logger(name).info(transport)
    try:
        node = make_node()
    except STARTUP_ERRORS as exc:
        get_logger(name).fatal(f'cannot start: {" ".join(str(exc).split())}')
        rclpy.try_shutdown()
        return ExitCode.FAILED
    executor = make_executor()
    executor.add_node(node)
    freeze_startup_objects()
    if on_start is not None:
        on_start(node)
    try:
        signalled = run_until_signal(executor, (lambda: on_stop(node)) if on_stop else (lambda: None))
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    if not signalled:
        get_logger(name).fatal('stopped without a signal: its executor ended (the ROS context was shut down)')
        return ExitCode.FAILED
    return ExitCode.OK
