"""Starting, waiting for and stopping the twin's processes in the ROS tests (one place for the
fixture code that test/ros, test/rqt and the scenario modules share).

* :func:`bridge`: a ``mujoco_bridge`` process under a node name with a config/ params file;
  :func:`hand_bridges` the hand's mock hardware and sim bridge, :func:`cell_bridges` the
  cell's sim bridge and its three mock robots (UR5, hand, MiR250).
* :func:`up`: ``shadow-twin up ARGS`` in one child process.
* :func:`wait_started`: wait until every recorder has a message while every process lives;
  else stop them all and fail the test with their logs.
* :func:`wait_matched`: wait until topics have at least so many subscribers and publishers;
  :func:`wait_flowed`: until topics have flowed for a while, on their messages' stamps.
* :func:`stop_all`: stop every process and assert that each exited with status 0.

This module imports without rclpy (test modules import it at their top); its functions import
``support.ros``, so call them after ``pytest.importorskip('rclpy')`` (the ``ros`` fixture).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from support.ros import NodeProcess

CONFIG = Path(__file__).resolve().parents[2] / 'config'
#: ``shadow-twin up`` as the command runs it, without the console script (a venv need not be on PATH).
UP_CODE = 'import sys; from shadow_twin.cli.up import main; sys.exit(main(sys.argv[1:]))'
#: The cell's sim bridge uses the cell's drive gains.
CELL_GAINS = 'gains_file:=package://shadow_twin/config/controllers/cell.yaml'


def bridge(folder: Path, name: str, params: str, *extra: str) -> 'NodeProcess':
    """``mujoco_bridge`` as node ``name`` with ``config/<params>`` and ``extra`` ROS arguments;
    its output in ``folder/<name>.log``."""
    from support.ros import NodeProcess
    return NodeProcess('mujoco_bridge.main', ['-r', f'__node:={name}', '--params-file', str(CONFIG / params), *extra],
                       Path(folder) / f'{name}.log')


def hand_bridges(folder: Path) -> dict[str, 'NodeProcess']:
    """The hand's mock hardware (``/joint_states``) and sim bridge (``/sim/...``): {'mock', 'sim'}."""
    return {'mock': bridge(folder, 'mock_hardware', 'mock_hardware.yaml'),
            'sim': bridge(folder, 'mujoco_bridge', 'mujoco_bridge.yaml')}


def cell_bridges(folder: Path, model: Path) -> dict[str, 'NodeProcess']:
    """The cell's sim bridge on the MJCF ``model`` and the mock UR5 (``/joint_states``), hand
    (``/rh/joint_states``) and MiR250 (``/odom``): {'sim', 'ur', 'hand', 'mir'}."""
    return {'sim': bridge(folder, 'mujoco_bridge', 'mujoco_bridge.yaml', '-p', f'model_path:={model}',
                          '-p', CELL_GAINS),
            'ur': bridge(folder, 'mock_ur', 'mock_ur.yaml'),
            'hand': bridge(folder, 'mock_hardware', 'mock_hardware.yaml', '-p', 'joint_states_topic:=/rh/joint_states'),
            'mir': bridge(folder, 'mock_mir', 'mock_mir.yaml')}


def up(log_path: Path, *args: str) -> 'NodeProcess':
    """``shadow-twin up ARGS`` in a child process, its output in ``log_path``."""
    from support.ros import PYTHON, NodeProcess
    return NodeProcess(None, [], log_path, command=[PYTHON, '-c', UP_CODE, *args])


def logs(procs, chars: int = 3000) -> str:
    """The tail (``chars``) of every process's output, each under its name."""
    named = procs.items() if isinstance(procs, dict) else ((p.command[-1], p) for p in procs)
    return '\n'.join(f'--- {name}\n{p.output()[-chars:]}' for name, p in named)


def wait_started(procs, recorders, timeout: float, what: str = 'the cell') -> None:
    """Wait up to ``timeout`` s until every recorder (``ros_helpers.Recorder``) has a message
    while every process (a dict or list of ``NodeProcess``) lives; otherwise stop them all and
    fail the test (pytest.fail) with ``what`` and their logs."""
    from support.ros import wait_until
    alive = list(procs.values() if isinstance(procs, dict) else procs)
    ok = wait_until(lambda: all(r.count() for r in recorders) or not all(p.alive() for p in alive), timeout)
    if not ok or not all(p.alive() for p in alive):
        for p in alive:
            p.stop()
        pytest.fail(f'{what} did not start:\n{logs(procs)}')


def wait_matched(node, timeout: float, subscribers: dict[str, int] | None = None,
                 publishers: dict[str, int] | None = None) -> bool:
    """Wait up to ``timeout`` s until each topic of ``subscribers`` / ``publishers`` {topic: at
    least} has that many subscribers / publishers on the graph ``node`` sees; returns whether it did."""
    from support.ros import wait_until

    def matched() -> bool:
        return (all(node.count_subscribers(t) >= n for t, n in (subscribers or {}).items())
                and all(node.count_publishers(t) >= n for t, n in (publishers or {}).items()))
    return wait_until(matched, timeout)


def wait_flowed(recorders, seconds: float, timeout: float = 30.0) -> None:
    """Wait until every recorder has a message stamped ``seconds`` s after now: its topic has
    flowed that long, to this process and so to every subscriber matched by now, on the
    publishers' own stamps (a sleep would not know whether a loaded PC ran them meanwhile).
    AssertionError after ``timeout`` s."""
    from support.ros import ros_now, stamped_at
    until = ros_now() + seconds
    for recorder in recorders:
        stamped_at(recorder, until, timeout)


def stop_all(procs: dict[str, 'NodeProcess']) -> None:
    """Stop every process; AssertionError with their logs unless each exited with status 0."""
    exits = {name: p.stop() for name, p in procs.items()}
    assert exits == dict.fromkeys(procs, 0), (exits, logs(procs, 2000))
