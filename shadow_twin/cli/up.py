"""``shadow-twin up``: the live twin, one process per node.

Starts the ``mujoco_bridge`` node (the sim, ``config/mujoco_bridge.yaml``), with
``--mock-hardware`` a second bridge named ``mock_hardware`` standing in for the robot
(``config/mock_hardware.yaml``), the ``shadow_twin`` trajectory action server
(``config/twin.yaml`` or ``--config``) and the ``twin_monitor`` (sim vs real on
``/twin/joint_error`` and ``/diagnostics``, ``config/twin_monitor.yaml`` or
``--monitor-config``), each as its own process, as ``ros2 launch shadow_twin
twin.launch.py`` does: in one Python process the nodes shared one GIL, and a busy
action server (a preemption storm, a 10,000-point goal) held the physics threads off
their 250 Hz (issue 9). The children's output is this command's; further ROS
arguments may follow ``--ros-args`` (given to every node).

A node that exits stops the others; Ctrl-C / SIGTERM stops the twin server first (it
cancels its controller goals while the bridges still run), then the monitor and the
bridges.

Usage::

    shadow-twin up [--mock-hardware] [--config FILE] [--mode sim|real|both]
                   [--bridge-config FILE] [--mock-config FILE] [--monitor-config FILE]
                   [--ros-args ...]

Exit status 0 after Ctrl-C / SIGTERM, 1 when a node cannot start or fails, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from shadow_twin.cli.processes import ChildProcesses
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.common.paths import config_path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='shadow-twin up', description='Start the sim bridge, optional mock '
                                     'hardware, the twin trajectory server and the twin monitor, one process each.')
    parser.add_argument('--mock-hardware', action='store_true', help='also start the mock hardware bridge')
    parser.add_argument('--config', type=Path, default=None, help='twin parameters (default config/twin.yaml)')
    parser.add_argument('--mode', choices=('sim', 'real', 'both'), default=None,
                        help='override the mode parameter of the twin server')
    parser.add_argument('--bridge-config', type=Path, default=None,
                        help='sim bridge parameters (default config/mujoco_bridge.yaml)')
    parser.add_argument('--mock-config', type=Path, default=None,
                        help='mock hardware parameters (default config/mock_hardware.yaml)')
    parser.add_argument('--monitor-config', type=Path, default=None,
                        help='twin monitor parameters (default config/twin_monitor.yaml)')
    return parser


def node_commands(args: argparse.Namespace, extra: list[str]) -> dict[str, list[str]]:
    """{node name: command line} of the nodes to start, in start order.

    Raises FileNotFoundError for a parameter file that does not exist."""
    python = sys.executable

    def command(module: str, params: Path, *ros_args: str) -> list[str]:
        if not Path(params).is_file():
            raise FileNotFoundError(f'parameter file {params} does not exist')
        return [python, '-m', module, '--ros-args', *ros_args, '--params-file', str(params), *extra]
    out = {'mujoco_bridge': command('mujoco_bridge.main', args.bridge_config or config_path('mujoco_bridge.yaml'))}
    if args.mock_hardware:
        out['mock_hardware'] = command('mujoco_bridge.main', args.mock_config or config_path('mock_hardware.yaml'),
                                       '-r', '__node:=mock_hardware')
    mode = ['-p', f'mode:={args.mode}'] if args.mode else []
    out['shadow_twin'] = command('shadow_twin.ros.twin_server', args.config or config_path('twin.yaml'), *mode)
    out['twin_monitor'] = command('shadow_twin.ros.twin_monitor',
                                  args.monitor_config or config_path('twin_monitor.yaml'))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run until shutdown; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if '--ros-args' in argv:
        k = argv.index('--ros-args')
        argv, extra = argv[:k], argv[k + 1:]
    args = build_parser().parse_args(argv)
    try:
        commands = node_commands(args, extra)
    except FileNotFoundError as exc:
        print(f'shadow-twin up: {exc}', file=sys.stderr)
        return ExitCode.BAD_INPUT

    stop = threading.Event()
    handlers = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    children = ChildProcesses()
    try:
        for name, command in commands.items():
            children.start(name, command)
        print(f'[shadow-twin up] started: {", ".join(f"{n} (pid {p.pid})" for n, p in children.procs.items())}',
              flush=True)
        ended = children.wait_any(stop.is_set)
    finally:
        # the twin first: it cancels its controller goals while the bridges still run
        statuses = children.stop(order=['shadow_twin', 'twin_monitor'])
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    if ended is not None:
        name, status = ended
        print(f'[shadow-twin up] {name} exited with status {status}; stopped the others', file=sys.stderr,
              flush=True)
        return ExitCode.OK if status == 0 else ExitCode.FAILED
    failed = {n: s for n, s in statuses.items() if s != 0}
    if failed:
        print(f'[shadow-twin up] nodes ended with errors: {failed}', file=sys.stderr, flush=True)
        return ExitCode.FAILED
    return ExitCode.OK


if __name__ == '__main__':
    sys.exit(main())
