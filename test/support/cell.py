"""Starting, waiting for and stopping the twin's processes in the ROS tests (one place for the
fixture code that test/ros, test/rqt and the scenario modules share).

* :func:`bridge`: a ``mujoco_bridge`` process under a node name with a config/ params file;
  :func:`hand_bridges` the hand's mock hardware and sim bridge, :func:`cell_bridges` the
  cell's sim bridge and its three mock robots (UR5, hand, MiR250) on the MJCF :func:`write_cell`
  writes; :func:`twin_server` and :func:`monitor` the twin's server and monitor nodes.
* :func:`up`: ``shadow-twin up ARGS`` in one child process.
* :func:`record_hand_topics` / :func:`record_cell_topics`: recorders of the standard streams of
  the hand's and the cell's twin (and a test's extra topics).
* :func:`wait_started`: wait until every recorder has a message while every process lives;
  else stop them all and fail the test with their logs. :func:`wait_twin_ready`: until the
  twin serves its actions and its listeners have subscribed; :func:`start_twin_cell`: the
  cell's twin started and settled, as its integration tests want it.
* :func:`wait_matched`: wait until topics have at least so many subscribers and publishers;
  :func:`wait_flowed`: until topics have flowed for a while, on their messages' stamps.
* :func:`wait_at_rest`: until a joint state stamped after now is at rest; :func:`reset_hand`:
  both hand bridges reset and at rest.
* :func:`stop_all`: stop every process and assert that each exited with status 0.

This module imports without rclpy (test modules import it at their top); its functions import
``support.ros``, so call them after ``pytest.importorskip('rclpy')`` (the ``ros`` fixture).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from support.ros import NodeProcess, Recorder

CONFIG = Path(__file__).resolve().parents[2] / 'config'
#: ``shadow-twin up`` as the command runs it, without the console script (a venv need not be on PATH).
UP_CODE = 'import sys; from shadow_twin.cli.up import main; sys.exit(main(sys.argv[1:]))'
#: The cell's sim bridge uses the cell's drive gains.
CELL_GAINS = 'gains_file:=package://shadow_twin/config/controllers/cell.yaml'
TWIN_ACTION = '/twin/follow_joint_trajectory'
#: The cell's five standard streams, {key: topic}, and how deep their recorders are unless a test says
#: otherwise (seconds of each: the states are judged on their stamps, and a loaded PC takes them in bursts).
CELL_TOPICS = {'arm': '/joint_states', 'hand': '/rh/joint_states', 'sim': '/sim/joint_states', 'odom': '/odom',
               'sim_odom': '/sim/odom'}
CELL_DEPTHS = {'arm': 1000, 'hand': 1000, 'sim': 1000, 'odom': 500, 'sim_odom': 500}
#: The hand's two standard streams, the robot's and the sim's joint states.
HAND_TOPICS = {'real': '/joint_states', 'sim': '/sim/joint_states'}


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


def write_cell(folder: Path, config=None) -> Path:
    """The cell's MJCF written to ``folder/cell.xml`` (``config``: a ``CellConfig``, default the
    built-in cell); returns its path."""
    from shadow_twin.model.cell.assembly import write_cell_mjcf
    model, _ = write_cell_mjcf(config, Path(folder) / 'cell.xml')
    return model


def twin_server(folder: Path, params: str | Path, *extra: str, log: str = 'twin') -> 'NodeProcess':
    """The twin server (``shadow_twin.ros.twin.server``) with the params file ``config/<params>`` (or
    the path ``params``) and ``extra`` ROS arguments; its output in ``folder/<log>.log``."""
    from support.ros import NodeProcess
    return NodeProcess('shadow_twin.ros.twin.server', ['--params-file', str(CONFIG / params), *extra],
                       Path(folder) / f'{log}.log')


def monitor(folder: Path, params: str | Path, *extra: str) -> 'NodeProcess':
    """The twin monitor (``shadow_twin.ros.monitor.node``) with the params file ``config/<params>``
    (or the path ``params``) and ``extra`` ROS arguments; its output in ``folder/monitor.log``."""
    from support.ros import NodeProcess
    return NodeProcess('shadow_twin.ros.monitor.node', ['--params-file', str(CONFIG / params), *extra],
                       Path(folder) / 'monitor.log')


def up(log_path: Path, *args: str) -> 'NodeProcess':
    """``shadow-twin up ARGS`` in a child process, its output in ``log_path``."""
    from support.ros import PYTHON, NodeProcess
    return NodeProcess(None, [], log_path, command=[PYTHON, '-c', UP_CODE, *args])


def record_hand_topics(client, depth: int = 1000, extra: dict | None = None) -> dict[str, 'Recorder']:
    """Recorders (``client.record``, ``depth`` deep) of the hand's joint states, the robot's
    (``'real'``: /joint_states) and the sim's (``'sim'``: /sim/joint_states), and of ``extra``
    {key: (message type, topic, depth)}."""
    from sensor_msgs.msg import JointState
    return client.record_topics({**{key: (JointState, topic, depth) for key, topic in HAND_TOPICS.items()},
                                 **(extra or {})})


def record_cell_topics(client, depths: dict[str, int] | None = None,
                       extra: dict | None = None) -> dict[str, 'Recorder']:
    """Recorders of the cell's five streams (:data:`CELL_TOPICS`: ``arm``, ``hand``, ``sim``
    JointState, ``odom``, ``sim_odom`` Odometry), each as deep as ``depths`` {key: depth} says or
    :data:`CELL_DEPTHS`, and of ``extra`` {key: (message type, topic, depth)}."""
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import JointState
    depths = {**CELL_DEPTHS, **(depths or {})}
    assert depths.keys() == CELL_TOPICS.keys(), f'not a cell stream: {sorted(depths.keys() - CELL_TOPICS.keys())}'
    types = {'arm': JointState, 'hand': JointState, 'sim': JointState, 'odom': Odometry, 'sim_odom': Odometry}
    return client.record_topics({**{key: (types[key], topic, depths[key]) for key, topic in CELL_TOPICS.items()},
                                 **(extra or {})})


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


def _fail(procs, message: str) -> None:
    """Stop every process and fail the test with ``message`` and their logs."""
    for p in (procs.values() if isinstance(procs, dict) else procs):
        p.stop()
    pytest.fail(f'{message}:\n{logs(procs)}')


def wait_twin_ready(client, procs, timeout: float, what: str = 'the twin', actions=(TWIN_ACTION,),
                    subscribers: dict[str, int] | None = None, publishers: dict[str, int] | None = None) -> None:
    """Wait up to ``timeout`` s until each FollowJointTrajectory action of ``actions`` has its server
    and each topic of ``subscribers`` / ``publishers`` {topic: at least} has that many on the graph
    (the twin's listeners have subscribed: the states reach them a period later); otherwise stop
    the processes (a dict or list of ``NodeProcess``) and fail the test with ``what`` and their logs."""
    from control_msgs.action import FollowJointTrajectory
    for action in actions:
        try:
            client.action_client(FollowJointTrajectory, action, timeout=timeout)
        except TimeoutError:
            _fail(procs, f'{what}: no action server {action}')
    if not wait_matched(client.node, timeout, subscribers, publishers):
        _fail(procs, f'{what}: not matched: subscribers {subscribers}, publishers {publishers} (at least)')


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


def wait_at_rest(recorder: 'Recorder', timeout: float = 10.0, speed: float = 2e-3, what: str = 'joints') -> None:
    """Wait up to ``timeout`` s until a joint state of ``recorder`` stamped after now (a reset just
    answered) has every joint slower than ``speed`` rad/s; AssertionError naming ``what`` otherwise."""
    from support.ros import ros_now, stamp_s, wait_until
    after = ros_now()

    def resting() -> bool:
        msg = recorder.last()
        return msg is not None and stamp_s(msg) > after and max(abs(v) for v in msg.velocity) < speed
    assert wait_until(resting, timeout), f'{what} did not come to rest'


def reset_hand(client, states: dict[str, 'Recorder'], timeout: float = 10.0) -> None:
    """Reset the hand's sim bridge and mock hardware (``~/reset``), then :func:`wait_at_rest` each of
    ``states`` {side: joint state recorder} in turn (the hand creeps for a second after a move)."""
    from std_srvs.srv import Trigger
    for node in ('/mujoco_bridge', '/mock_hardware'):
        answer = client.call(Trigger, f'{node}/reset')
        assert answer.success, answer.message
    for side, recorder in states.items():
        wait_at_rest(recorder, timeout, what=f'{side} joints')


def start_twin_cell(client, folder: Path, recorders: dict[str, 'Recorder'], timeout: float,
                    publishers: dict[str, int] | None = None) -> dict[str, 'NodeProcess']:
    """The cell's twin as its integration tests run it: the cell of config/cell.yaml written to
    ``folder``, :func:`cell_bridges` on it and the twin server with config/twin_cell.yaml. Returns
    {name: process} once the five streams of ``recorders`` (:func:`record_cell_topics`) flow, the
    twin serves its action, its listeners have subscribed to those topics (this client is one
    more) and ``publishers`` {topic: at least} are matched (each within ``timeout`` s, else the
    test fails with the logs), both bases are at rest and the streams have flowed 0.3 s more."""
    from shadow_twin.model.cell.config import CellConfig
    from support import ros as helpers
    from support.scenarios.cell import wait_base_rest
    procs = {**cell_bridges(folder, write_cell(folder, CellConfig.from_yaml(CONFIG / 'cell.yaml'))),
             'twin': twin_server(folder, 'twin_cell.yaml')}
    flowing = [recorders[k] for k in CELL_TOPICS]
    wait_started(procs, flowing, timeout)
    wait_twin_ready(client, procs, timeout, subscribers=dict.fromkeys(CELL_TOPICS.values(), 2),
                    publishers=publishers)
    wait_base_rest(helpers, [recorders['odom'], recorders['sim_odom']], timeout=10.0)
    wait_flowed(flowing, 0.3)       # the twin, subscribed, has had the states for a while
    return procs


def stop_all(procs: dict[str, 'NodeProcess']) -> None:
    """Stop every process; AssertionError with their logs unless each exited with status 0."""
    exits = {name: p.stop() for name, p in procs.items()}
    assert exits == dict.fromkeys(procs, 0), (exits, logs(procs, 2000))
