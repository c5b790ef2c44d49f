"""``shadow-twin rqt``: the twin's monitoring view in rqt, complete on every start.

Opens each perspective (default: ``config/shadow_twin_plots.perspective``, real vs sim
and sim - real plots, and ``config/shadow_twin_monitor.perspective``, the Robot
Monitor; with ``--cell`` ``config/shadow_twin_cell_plots.perspective``, arm joints and the base's
pose error, and ``config/shadow_twin_cell_monitor.perspective``; with ``--contacts`` the plots with
a row of contact force and slip, ``config/shadow_twin_contacts_plots.perspective`` or
``config/shadow_twin_cell_contacts_plots.perspective``; see ``shadow_twin.plots.perspective``) in an
rqt window of its own process,
so that rqt_robot_monitor, which spins rqt's shared node from a 1 s timer, cannot slow
the plots to one sample per second.

Plain ``rqt --perspective-file`` leaves a plot empty when its node has not yet
discovered the topic as rqt_plot restores it (on a cold start about 2 times in 3).
Here each window's process first waits until every topic its perspective shows has a
publisher, then runs rqt (``rqt_gui.main.Main``, what the ``rqt`` command runs) in
the same process and ROS context: rclpy's nodes of one context share one DDS
participant, so rqt's node starts with the graph already discovered. SIGINT and SIGTERM close
the window from Qt's event loop, which keeps rqt_plot from crashing on close (see ``_rqt_main``).

Steps: find rqt (``rqt`` next to the Python executable, as in a venv, or on PATH,
and its Python package ``rqt_gui``); wait up to ``--timeout`` s for all the topics
(nothing opens before the twin is up; the error names what is missing); start one
process per perspective (``python -m shadow_twin.cli.rqt --window FILE``); on Ctrl-C,
SIGINT or SIGTERM send each window SIGINT (plain rqt closes its window on SIGINT and
ignores SIGTERM), then SIGKILL after ``STOP_GRACE`` s. A window closed by the user
leaves the others open; one that fails stops them.

Usage::

    shadow-twin rqt [--cell] [--contacts] | [--perspective FILE...]  [--timeout S]

Exit status: 0 every window closed normally (or stopped by Ctrl-C / SIGINT / SIGTERM);
1 an rqt window failed; 2 bad input (a perspective missing or not a perspective), rqt
not installed, or the topics did not appear within ``--timeout``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import rclpy
from rclpy.signals import SignalHandlerOptions

from shadow_twin.common import lifeline
from shadow_twin.common.errors import ConfigError, ShadowTwinError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.common.paths import config_path
from shadow_twin.common.signals import StopRequest
from shadow_twin.plots.perspective import (CELL_CONTACTS_PLOTS_FILE, CELL_MONITOR_FILE, CELL_PLOTS_FILE,
                                           CONTACTS_PLOTS_FILE, DIAGNOSTICS_AGG_TOPIC, MONITOR_FILE, PLOTS_FILE,
                                           needed_topics, read_perspective)

PROG = 'shadow-twin rqt'
#: Seconds a window gets to close after SIGINT before it is killed (rqt takes 2-5 s on a loaded
#: 2-core PC; ros2 launch escalates to SIGKILL 10 s after its SIGINT).
STOP_GRACE = 8.0
#: Seconds between two looks at the ROS graph while waiting for topics.
POLL = 0.1
INSTALL_HINT = ('install it: with ROS 2 Jazzy from apt, `sudo apt install ros-jazzy-rqt ros-jazzy-rqt-plot '
                'ros-jazzy-rqt-robot-monitor` and `source /opt/ros/jazzy/setup.bash`; into this project\'s venv, '
                '`bash ../shared/tools/install_rqt.sh .venv ../shared/vendor/rqt`')
TWIN_HINT = 'is the twin up (shadow-twin up, or ros2 launch shadow_twin twin.launch.py) on this ROS_DOMAIN_ID ({})?'
AGG_HINT = (f' ({DIAGNOSTICS_AGG_TOPIC} comes from the twin_monitor with publish_aggregated: true, or from '
            f'diagnostic_aggregator)')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description='Open the twin\'s monitoring view: rqt windows with '
                                     'real vs sim plots and the Robot Monitor, once their topics are published.')
    parser.add_argument('--perspective', type=Path, action='append', metavar='FILE',
                        help=f'an rqt perspective to open in a window of its own; repeat for more (default: '
                             f'config/{PLOTS_FILE} and config/{MONITOR_FILE}; write others with shadow-twin '
                             f'perspective)')
    parser.add_argument('--cell', action='store_true',
                        help=f'the cell\'s view (default perspectives config/{CELL_PLOTS_FILE} and '
                             f'config/{CELL_MONITOR_FILE}): arm joints, the base\'s pose error, the Robot Monitor')
    parser.add_argument('--contacts', action='store_true',
                        help=f'contacts are on (the bridges\' contact_sensors, the monitor\'s contacts.enabled): the '
                             f'plots with a row of the pad normal force and the slip speed of the first finger and the '
                             f'thumb, real vs sim (config/{CONTACTS_PLOTS_FILE}, with --cell '
                             f'config/{CELL_CONTACTS_PLOTS_FILE}; other labels: shadow-twin perspective --contacts)')
    parser.add_argument('--timeout', type=float, default=30.0,
                        help='wait this long for the topics to be published, s (default 30)')
    parser.add_argument('--window', type=Path, help=argparse.SUPPRESS)   # one window, in this process
    return parser


def find_rqt() -> Path:
    """The ``rqt`` executable: next to this Python (a venv's bin/), else on PATH.

    Raises:
        ConfigError: there is none, or this Python cannot import ``rqt_gui`` (the message
            says how to install rqt).
    """
    beside = Path(sys.executable).parent / 'rqt'
    found = beside if os.access(beside, os.X_OK) else shutil.which('rqt')
    if found is None:
        raise ConfigError(f'rqt is not installed (no rqt next to {sys.executable} nor on PATH); {INSTALL_HINT}')
    if importlib.util.find_spec('rqt_gui') is None:
        raise ConfigError(f'{found} exists but {sys.executable} cannot import its Python package rqt_gui; '
                          f'{INSTALL_HINT}')
    return Path(found)


def use_rqt_prefix(rqt: Path) -> None:
    """Put the install prefix of ``rqt`` (``<prefix>/bin/rqt``) first on AMENT_PREFIX_PATH, where
    rqt finds its plugins, as the venv's ``rqt`` script does (a sourced ROS setup has it already)."""
    prefix = str(rqt.resolve().parent.parent)
    paths = [p for p in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p]
    if prefix not in paths:
        os.environ['AMENT_PREFIX_PATH'] = os.pathsep.join([prefix, *paths])


def unpublished(node, needed: list[str]) -> list[str]:
    """The entries of ``needed`` (topics, or fields ``/topic/field[i]``) that no topic with a
    publisher covers; a field's topic is a published name followed by '/', as rqt_plot matches it."""
    published = [name for name, _ in node.get_topic_names_and_types() if node.count_publishers(name) > 0]
    return [n for n in needed if not any(n == t or n.startswith(t + '/') for t in published)]


def graph_node():
    """A node of the default context (``rclpy.init`` first) for looking at the ROS graph.

    The context's DDS participant, and with it what it has discovered, lives only while the
    context has a node (rmw_fastrtps destroys it with the last one): a window keeps this
    node until rqt's own node exists. Its parameter services are off (nothing spins it)."""
    return rclpy.create_node(f'shadow_twin_rqt_{os.getpid()}', start_parameter_services=False)


def wait_for_topics(node, needed: list[str], timeout: float) -> list[str]:
    """Wait up to ``timeout`` s until every entry of ``needed`` has a publisher in ``node``'s
    graph (see :func:`unpublished`); returns what is still missing (empty: all there)."""
    deadline = time.monotonic() + timeout
    while True:
        missing = unpublished(node, needed)
        if not missing or time.monotonic() >= deadline:
            return missing
        time.sleep(POLL)


def _missing_message(missing: list[str], timeout: float) -> str:
    return (f'after {timeout:g} s nothing publishes {", ".join(missing)}; '
            + TWIN_HINT.format(os.environ.get('ROS_DOMAIN_ID', '0'))
            + (AGG_HINT if DIAGNOSTICS_AGG_TOPIC in missing else ''))


def _rqt_main() -> type:
    """rqt_gui's ``Main`` (what the ``rqt`` command runs), whose window closes on SIGINT and SIGTERM
    from Qt's event loop.

    rqt's own SIGINT handler closes the window inside the Python signal handler, which runs
    between two bytecodes of whatever Python code the GUI thread is in, often a PyQtGraph paint:
    rqt_plot then tears its plots down in the middle of painting them, and the process crashes
    (SIGSEGV in pyqtgraph's GraphicsView.paintEvent, 1 close in 8 on this 2-core PC; never when
    closed from its menu or title bar). Once the event loop runs, both signals only queue the
    close, as File > Quit does it.
    """
    base = importlib.import_module('rqt_gui.main').Main      # optional: only the view needs it (find_rqt)
    qt_core = importlib.import_module('python_qt_binding.QtCore')

    def close_from_event_loop(app) -> None:
        window = next(w for w in app.topLevelWidgets() if w.objectName() == 'MainWindow')
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: qt_core.QTimer.singleShot(0, window.close))

    class Main(base):
        def create_application(self, argv):
            app = super().create_application(argv)
            qt_core.QTimer.singleShot(0, lambda: close_from_event_loop(app))     # the window exists by then
            return app
    return Main


def run_window(perspective: Path, timeout: float) -> int:
    """One rqt window of ``perspective`` in this process (see the module doc); returns its exit status."""
    rqt = find_rqt()
    use_rqt_prefix(rqt)
    needed = needed_topics(read_perspective(perspective))
    # until rqt's window runs (see _rqt_main), SIGTERM ends this process as SIGINT does
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))
    lifeline.watch_parent(lambda: os.kill(os.getpid(), signal.SIGTERM))    # the supervisor ended: close
    node = graph_node()        # kept: rqt's node joins its participant (see graph_node)
    try:
        missing = wait_for_topics(node, needed, timeout)
        if missing:
            raise ConfigError(_missing_message(missing, timeout))
        return _rqt_main()().main(['rqt', '--perspective-file', str(perspective)])
    except KeyboardInterrupt:
        return ExitCode.OK
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGINT to every running window, SIGKILL to those still running ``STOP_GRACE`` s later."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + STOP_GRACE
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f'{PROG}: a window (pid {proc.pid}) did not close within {STOP_GRACE:g} s of SIGINT; '
                  f'killing it', file=sys.stderr)
            proc.kill()
            proc.wait()


def supervise(perspectives: list[Path], timeout: float) -> int:
    """Run one window process per perspective until all are closed, or until SIGINT/SIGTERM or
    a failed window stops them; returns the exit status (see the module doc)."""
    stop = StopRequest()        # not a threading.Event: a handler that sets one can hang (common.signals)
    lifeline.watch_parent(stop.set)     # started by a tool that ended: close the windows
    procs = []
    with stop.installed():
        try:
            for path in perspectives:   # own sessions: a terminal's Ctrl-C reaches them once, through _stop
                procs.append(subprocess.Popen([sys.executable, '-m', 'shadow_twin.cli.rqt', '--window', str(path),
                                               '--timeout', str(timeout)], start_new_session=True,
                                              **lifeline.child_options()))
            while not stop.wait(0.2):
                codes = [proc.poll() for proc in procs]
                if all(code is not None for code in codes) or any(code not in (None, 0) for code in codes):
                    break
        finally:
            _stop(procs)
    failed = [(path, proc.returncode) for path, proc in zip(perspectives, procs) if proc.returncode != 0]
    if not failed:
        return ExitCode.OK
    print(f'{PROG}: ' + '; '.join(f'the window of {p} ended with status {c}' for p, c in failed), file=sys.stderr)
    return ExitCode.BAD_INPUT if any(code == ExitCode.BAD_INPUT for _, code in failed) else ExitCode.FAILED


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``shadow-twin rqt``; returns the exit status (argparse exits 2 itself on
    unknown options)."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.window is not None:
            return run_window(args.window, args.timeout)
        if (args.cell or args.contacts) and args.perspective:
            raise ConfigError(f'give --{"cell" if args.cell else "contacts"} or --perspective, not both')
        defaults = {(False, False): (PLOTS_FILE, MONITOR_FILE), (True, False): (CELL_PLOTS_FILE, CELL_MONITOR_FILE),
                    (False, True): (CONTACTS_PLOTS_FILE, MONITOR_FILE),
                    (True, True): (CELL_CONTACTS_PLOTS_FILE, CELL_MONITOR_FILE)}[args.cell, args.contacts]
        perspectives = args.perspective or [config_path(name) for name in defaults]
        needed = list(dict.fromkeys(topic for path in perspectives for topic in needed_topics(read_perspective(path))))
        find_rqt()
        rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
        node = graph_node()
        try:
            print(f'{PROG}: waiting up to {args.timeout:g} s for publishers of the {len(needed)} topics and fields '
                  f'that {", ".join(p.name for p in perspectives)} show', flush=True)
            missing = wait_for_topics(node, needed, args.timeout)
        except KeyboardInterrupt:
            return ExitCode.OK
        finally:
            node.destroy_node()
            rclpy.try_shutdown()
        if missing:
            raise ConfigError(_missing_message(missing, args.timeout))
        return supervise(perspectives, args.timeout)
    except ShadowTwinError as exc:
        print(f'{PROG}: error: {exc}', file=sys.stderr)
        return ExitCode.BAD_INPUT


if __name__ == '__main__':
    sys.exit(main())
