"""``shadow-twin up``: the live twin in one process.

Starts, on one MultiThreadedExecutor, the ``mujoco_bridge`` node (the sim,
``config/mujoco_bridge.yaml``), with ``--mock-hardware`` a second bridge named
``mock_hardware`` standing in for the robot (``config/mock_hardware.yaml``),
the ``shadow_twin`` trajectory action server (``config/twin.yaml`` or
``--config``), and the ``twin_monitor`` (sim vs real on ``/twin/joint_error`` and
``/diagnostics``, ``config/twin_monitor.yaml`` or ``--monitor-config``; it spins on
its own single-threaded executor thread, so that its two 250 Hz subscriptions do
not load the shared executor). Parameters come from the same YAML files as the
separate executables: they are passed as ``--params-file`` ROS arguments and each
node picks the section of its name. Further ROS arguments may follow ``--ros-args``.

Usage::

    shadow-twin up [--mock-hardware] [--config FILE] [--mode sim|real|both]
                   [--bridge-config FILE] [--mock-config FILE] [--monitor-config FILE]
                   [--ros-args ...]

Exit status 0 after Ctrl-C / SIGTERM, 1 when a node cannot start, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.logging import get_logger
from rclpy.parameter import Parameter
from rclpy.signals import SignalHandlerOptions

from mujoco_bridge.bridge_node import MujocoBridge
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.common.paths import config_path
from shadow_twin.ros.spinning import run_until_signal
from shadow_twin.ros.twin_monitor import TwinMonitor
from shadow_twin.ros.twin_server import TwinServer

EXECUTOR_THREADS = 8


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='shadow-twin up', description='Start the sim bridge, optional mock '
                                     'hardware, the twin trajectory server and the twin monitor in one process.')
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


def ros_arguments(args: argparse.Namespace, extra: list[str]) -> list[str]:
    """The ``rclpy.init`` arguments: one ``--params-file`` per YAML file, then ``extra``."""
    files = [args.bridge_config or config_path('mujoco_bridge.yaml')]
    if args.mock_hardware:
        files.append(args.mock_config or config_path('mock_hardware.yaml'))
    files.append(args.config or config_path('twin.yaml'))
    files.append(args.monitor_config or config_path('twin_monitor.yaml'))
    out = ['shadow-twin-up', '--ros-args']
    for f in files:
        if not Path(f).is_file():
            raise FileNotFoundError(f'parameter file {f} does not exist')
        out += ['--params-file', str(f)]
    return out + extra


def main(argv: list[str] | None = None) -> int:
    """Run until shutdown; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if '--ros-args' in argv:
        k = argv.index('--ros-args')
        argv, extra = argv[:k], argv[k + 1:]
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        init_args = ros_arguments(args, extra)
    except FileNotFoundError as exc:
        print(f'shadow-twin up: {exc}', file=sys.stderr)
        return ExitCode.BAD_INPUT

    rclpy.init(args=init_args, signal_handler_options=SignalHandlerOptions.NO)
    log = get_logger('shadow_twin_up')
    nodes = []
    try:
        nodes.append(MujocoBridge())
        if args.mock_hardware:
            nodes.append(MujocoBridge('mock_hardware'))
        overrides = [Parameter('mode', value=args.mode)] if args.mode else []
        nodes.append(TwinServer(parameter_overrides=overrides))
        nodes.append(TwinMonitor())
    except Exception as exc:
        log.fatal(f'cannot start: {" ".join(str(exc).split())}')
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()
        return ExitCode.FAILED
    executor = MultiThreadedExecutor(num_threads=EXECUTOR_THREADS)
    for node in nodes:
        if isinstance(node, TwinMonitor):
            node.start()            # its own single-threaded executor
            continue
        executor.add_node(node)
        if isinstance(node, MujocoBridge):
            node.start()
    log.info(f'up: {", ".join(n.get_name() for n in nodes)}')

    def stop() -> None:
        # the twin first (it cancels its controller goals while the bridges still run)
        log.info('shutting down')
        for node in reversed(nodes):
            try:
                node.shutdown()
            except Exception as exc:  # keep shutting the others down
                log.error(f'{node.get_name()} shutdown failed: {exc!r}')
    try:
        run_until_signal(executor, stop)
    finally:
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown()
    return ExitCode.OK


if __name__ == '__main__':
    sys.exit(main())
