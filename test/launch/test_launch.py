"""The launch files through the real upstream ``ros2 launch`` (``.venv/bin/ros2 launch shadow_twin ...``),
with this package found as an ament package in .venv (``scripts/setup.sh``).

Every launch runs as real processes on this test run's private ROS domain and is checked to leave
no process behind: none of those it started, and none carrying its unique environment marker.
Covered: the twin with mock hardware (joint states of robot and sim at >= 240 Hz, the bridges
publishing at 250 Hz; a FollowJointTrajectory goal through the twin; SIGINT stops everything);
a launch naming a package that is not installed fails before starting anything; a node failing
at start stops the others; the offline calibration of the real hand's ROS 1 bag ends ``done``
with a report, with and without ``install`` (no bridge running: the model is written, not
installed).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

from support import cell as cell_helpers
import pytest
import yaml

pytestmark = [pytest.mark.launch, pytest.mark.ros, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / 'shared'
VENV = REPO / '.venv'
BAG = SHARED / 'data' / 'shadow_hand_e' / 'hand_closing_real.bag'
TRAJECTORIES = SHARED / 'data' / 'shadow_hand_e' / 'trajectories.yaml'
TWIN_ACTION = '/twin/follow_joint_trajectory'
START_TIMEOUT = 40.0       # s, a launch until its nodes answer (2 loaded cores)
STOP_TIMEOUT = 30.0        # s, SIGINT until ros2 launch has stopped everything (its own SIGKILL comes at 10 s)
MIN_RATE = 240.0           # Hz, joint states of each bridge (publish_rate 250 Hz)
RATE_SETTLE = 2.0          # s of joint states (on their stamps) after the twin answers, for the nodes' start-up work
RATE_WINDOW = 3.0          # s, over which the rates are measured (on the messages' stamps)
RATE_WINDOWS = 3           # windows measured at most, until one reaches MIN_RATE on both topics


def load_launch_file(name: str):
    """The module of ``launch/<name>`` (imported from the checkout, as ``ros2 launch`` does)."""
    spec = importlib.util.spec_from_file_location(name.replace('.', '_'), REPO / 'launch' / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stop_and_check(run, timeout: float = STOP_TIMEOUT) -> int | None:
    """SIGINT the launch; assert it ended and left no process behind; returns its exit status."""
    status = run.interrupt(timeout)
    assert status is not None, f'ros2 launch still runs {timeout} s after SIGINT:\n{run.output()[-3000:]}'
    assert_nothing_left(run)
    return status


def assert_nothing_left(run) -> None:
    """Assert that no process of the launch runs (any found is killed first)."""
    from support.ros import wait_until
    wait_until(lambda: not run.leftovers(), 5.0, interval=0.05)     # exited children are reaped by their new parent
    left = run.kill()
    assert not left, f'processes outlived the launch: {left}\n{run.output()[-3000:]}'


def rate(helpers, recorder, start: float, seconds: float) -> float:
    """Messages per second ``recorder``'s publisher stamped in ``seconds`` s from ``start`` (ROS
    time, s), once one stamped later has arrived, Hz: what the bridge published, however late
    this (loaded) process took the messages in."""
    helpers.stamped_at(recorder, start + seconds, 30.0)
    return sum(start <= helpers.stamp_s(m) < start + seconds for _, m in recorder.snapshot()) / seconds


# ------------------------------------------------------------------------------------- tests
def test_setup_lays_out_an_ament_package_in_the_venv(ros2_launch):
    """What ``colcon build --symlink-install`` would install, as links into the checkout; activate
    exports AMENT_PREFIX_PATH; a second run of the layout changes nothing."""
    from importlib.metadata import Distribution
    share = VENV / 'share' / 'shadow_twin'
    assert (share / 'package.xml').resolve() == REPO / 'package.xml'
    for name in ('twin.launch.py', 'calibration.launch.py'):
        assert (share / 'launch' / name).resolve() == REPO / 'launch' / name
    for path in (REPO / 'config').rglob('*'):
        if path.is_file():
            assert (share / path.relative_to(REPO)).resolve() == path
    assert (share / 'models' / 'shadow_hand_e.xml').resolve() == REPO / 'shadow_twin' / 'model' / 'builtin' / 'shadow_hand_e.xml'
    [installed] = VENV.glob('lib/python3*/site-packages/shadow_twin-*.dist-info')     # not ./shadow_twin.egg-info
    scripts = {e.name for e in Distribution.at(installed).entry_points if e.group == 'console_scripts'}
    assert {'mujoco_bridge', 'twin_server', 'twin_monitor', 'calibration_node', 'shadow-twin'} <= scripts
    assert {p.name for p in (VENV / 'lib' / 'shadow_twin').iterdir()} == scripts
    for name in scripts:
        assert (VENV / 'lib' / 'shadow_twin' / name).resolve() == (VENV / 'bin' / name).resolve()
    assert (VENV / 'share' / 'ament_index' / 'resource_index' / 'packages' / 'shadow_twin').is_file()
    activated = subprocess.run(['bash', '-c', 'source .venv/bin/activate && source .venv/bin/activate && '
                                'echo "$AMENT_PREFIX_PATH"'], cwd=REPO, capture_output=True, text=True,
                               env={'PATH': '/usr/bin:/bin', 'AMENT_PREFIX_PATH': '/opt/ros/jazzy'}, check=True)
    assert activated.stdout.strip() == f'{VENV}:/opt/ros/jazzy'       # once, in front, the old value kept
    before = sorted((str(p), p.is_symlink() and str(p.readlink())) for p in share.rglob('*'))
    again = subprocess.run(['bash', 'scripts/ament_layout.sh'], cwd=REPO, capture_output=True, text=True, check=True)
    assert 'up to date' in again.stdout
    assert sorted((str(p), p.is_symlink() and str(p.readlink())) for p in share.rglob('*')) == before


def test_launch_descriptions(ros2_launch):
    """The descriptions build without the package being looked up (substitutions resolve at launch)."""
    from launch.actions import DeclareLaunchArgument, ExecuteProcess
    from launch_ros.actions import Node
    twin = load_launch_file('twin.launch.py').generate_launch_description()
    arguments = {a.name for a in twin.entities if isinstance(a, DeclareLaunchArgument)}
    assert arguments == {'mode', 'use_mock_hardware', 'model', 'config', 'diagnostics_aggregator', 'rqt'}
    nodes = [e for e in twin.entities if isinstance(e, Node)]
    # the sim bridge twice: with config/mujoco_bridge_shadow.yaml in mode shadow, without it otherwise
    assert [n.node_executable for n in nodes] == ['mujoco_bridge', 'mujoco_bridge', 'mujoco_bridge', 'twin_server',
                                                  'twin_monitor', 'twin_monitor', 'aggregator_node']
    sims = nodes[:2]                 # the sim bridge's two entries; the third is mock_hardware
    assert [type(n.condition).__name__ for n in sims] == ['LaunchConfigurationNotEquals', 'LaunchConfigurationEquals']
    [view] = [e for e in twin.entities if isinstance(e, ExecuteProcess) and not isinstance(e, Node)]
    assert "exec='shadow-twin'" in view.cmd[0][0].describe() and view.cmd[1][0].describe() == "'rqt'"
    cell = load_launch_file('cell.launch.py').generate_launch_description()
    arguments = {a.name for a in cell.entities if isinstance(a, DeclareLaunchArgument)}
    assert arguments == {'use_mock_hardware', 'mode', 'cell_config', 'config', 'rqt'}
    calibration = load_launch_file('calibration.launch.py').generate_launch_description()
    arguments = {a.name for a in calibration.entities if isinstance(a, DeclareLaunchArgument)}
    assert arguments == {'config', 'bag', 'trajectory', 'install'}
    assert [n.node_executable for n in calibration.entities if isinstance(n, Node)] == ['calibration_node']


def test_twin_with_mock_hardware(ros, launch):
    """Robot and sim joint states at >= 240 Hz, a goal through the twin succeeds, SIGINT stops all."""
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    from sensor_msgs.msg import JointState
    helpers, client = ros
    states = {topic: client.record(JointState, topic, depth=2000) for topic in ('/joint_states', '/sim/joint_states')}
    run = launch('twin.launch.py', 'use_mock_hardware:=true')
    try:
        flowing = helpers.wait_until(lambda: all(r.count() for r in states.values()) or not run.alive(),
                                     START_TIMEOUT)
        assert flowing and run.alive(), f'the twin did not start:\n{run.output()[-3000:]}'
        try:
            client.action_client(FollowJointTrajectory, TWIN_ACTION, timeout=START_TIMEOUT)
        except TimeoutError:
            pytest.fail(f'no action server {TWIN_ACTION}:\n{run.output()[-3000:]}')
        assert run.started() == 4, run.output()[-3000:]     # 2 bridges, twin server, twin monitor
        cell_helpers.wait_flowed(states.values(), RATE_SETTLE)
        windows = []            # other work on the machine starts and stops: the best window counts
        while len(windows) < RATE_WINDOWS and not (windows and min(windows[-1].values()) >= MIN_RATE):
            start = helpers.ros_now()
            windows.append({topic: round(rate(helpers, recorder, start, RATE_WINDOW), 1)
                            for topic, recorder in states.items()})
        assert min(windows[-1].values()) >= MIN_RATE, \
            f'{windows} Hz; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; the bridges say: ' + \
            ' | '.join([line for line in run.output().splitlines() if 'joint states at' in line][-2:])

        handle = client.send_goal(FollowJointTrajectory, TWIN_ACTION,
                                  helpers.one_point_goal({'rh_FFJ3': 0.8, 'rh_WRJ1': -0.2}, 0.5, goal_tolerance=0.05),
                                  timeout=15.0)
        assert handle.accepted, run.output()[-3000:]
        response = client.wait_future(handle.get_result_async(), 15.0)
        assert response.status == GoalStatus.STATUS_SUCCEEDED, response.result.error_string
    finally:
        status = stop_and_check(run)
    assert status == 0, run.output()[-3000:]
    output = run.output()
    assert output.count('process has finished cleanly') == 4 and 'process has died' not in output, output[-3000:]


def test_cell_with_mock_hardware(ros, launch):
    """The whole cell: sim on the cell model, mock UR, hand and MiR, twin server and monitor; all
    streams flow, one goal with arm and hand joints succeeds through the twin, SIGINT stops all."""
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import JointState
    helpers, client = ros
    streams = {topic: client.record(JointState, topic, depth=10)
               for topic in ('/joint_states', '/rh/joint_states', '/sim/joint_states')}
    streams.update({topic: client.record(Odometry, topic, depth=10) for topic in ('/odom', '/sim/odom')})
    run = launch('cell.launch.py', 'use_mock_hardware:=true')
    try:
        flowing = helpers.wait_until(lambda: all(r.count() for r in streams.values()) or not run.alive(),
                                     START_TIMEOUT)
        assert flowing and run.alive(), f'the cell did not start:\n{run.output()[-3000:]}'
        sim_joints = set(streams['/sim/joint_states'].last().name)
        assert {'shoulder_pan_joint', 'wrist_3_joint', 'rh_FFJ3', 'left_wheel_joint'} <= sim_joints
        assert 'shoulder_pan_joint' in streams['/joint_states'].last().name
        try:
            client.action_client(FollowJointTrajectory, TWIN_ACTION, timeout=START_TIMEOUT)
        except TimeoutError:
            pytest.fail(f'no action server {TWIN_ACTION}:\n{run.output()[-3000:]}')
        # 4 bridges, twin server, twin monitor (the launch process itself imports mujoco to write the
        # cell model, whose import may run a short-lived probe of its own: count the nodes)
        assert run.output().count('process started with pid') == 6, run.output()[-3000:]
        goal = helpers.one_point_goal({'shoulder_pan_joint': 0.3, 'elbow_joint': -0.4, 'rh_FFJ3': 0.8}, 1.0,
                                      goal_tolerance=0.05)
        handle = client.send_goal(FollowJointTrajectory, TWIN_ACTION, goal, timeout=15.0)
        assert handle.accepted, run.output()[-3000:]
        response = client.wait_future(handle.get_result_async(), 15.0)
        assert response.status == GoalStatus.STATUS_SUCCEEDED, response.result.error_string
    finally:
        status = stop_and_check(run)
    assert status == 0, run.output()[-3000:]
    output = run.output()
    assert output.count('process has finished cleanly') == 6 and 'process has died' not in output, output[-3000:]


def test_missing_package_fails_before_anything_starts(launch):
    """diagnostics_aggregator:=true without the diagnostic_aggregator package (not installed here)."""
    run = launch('twin.launch.py', 'use_mock_hardware:=true', 'diagnostics_aggregator:=true')
    status = run.wait(START_TIMEOUT)
    assert status is not None and status != 0, run.output()[-3000:]
    output = run.output()
    assert "package 'diagnostic_aggregator' not found" in output and 'nothing was started' in output, output
    assert 'process started' not in output and run.started() == 0, output
    assert_nothing_left(run)


def test_node_failing_at_start_stops_the_others(launch, tmp_path):
    """A model that does not parse: the bridge and the twin server exit 1; the launch stops the twin
    monitor and exits non-zero."""
    broken = tmp_path / 'broken.xml'
    broken.write_text('<mujoco><worldbody><body></worldbody></mujoco>\n')
    run = launch('twin.launch.py', f'model:={broken}')
    status = run.wait(START_TIMEOUT)
    assert status is not None and status != 0, run.output()[-3000:]
    output = run.output()
    assert 'exited with status 1; stopping the twin' in output and 'MJCF does not parse' in output, output[-3000:]
    assert run.started() == 3, output[-3000:]
    assert_nothing_left(run)


@pytest.fixture
def calibration_params(tmp_path) -> Path:
    """config/calibration_node.yaml with a budget of 12 evaluations, output into tmp and a short
    bridge timeout (no bridge runs: each look-up waits for it that long)."""
    if not BAG.is_file() or not TRAJECTORIES.is_file():
        pytest.skip(f'{BAG} or {TRAJECTORIES} is absent (../shared/data)')
    params = yaml.safe_load((REPO / 'config' / 'calibration_node.yaml').read_text())
    params['/**/calibration_node']['ros__parameters'].update(budget=12, output_dir=str(tmp_path / 'out'),
                                                             bridge_timeout=1.0)
    path = tmp_path / 'calibration_node.yaml'
    path.write_text(yaml.safe_dump(params))
    return path


def calibrate(helpers, client, statuses, run, timeout: float = 150.0) -> dict:
    """Call /calibration_node/calibrate and wait for the end of the run it starts; returns its last
    status ({key: value} of the DiagnosticStatus, with 'message')."""
    from std_srvs.srv import Trigger
    answer = client.call(Trigger, '/calibration_node/calibrate', timeout=START_TIMEOUT)
    assert answer.success and answer.message.startswith('calibration started: '), answer.message
    run_dir = answer.message.split(': ', 1)[1]

    def last():     # the status of this run (the node republishes the previous run's end until it starts)
        msg = statuses.last()
        status = {} if msg is None else {**{kv.key: kv.value for kv in msg.values}, 'message': msg.message}
        return status if status.get('run_dir') == run_dir else {}
    ended = helpers.wait_until(lambda: last().get('phase') in ('done', 'refused', 'failed') or not run.alive(),
                               timeout, interval=0.1)
    assert ended and run.alive(), f'no end of the calibration within {timeout} s: {last()}\n{run.output()[-3000:]}'
    return last()


def test_offline_calibration_of_the_real_hand(ros, launch, calibration_params):
    """calibration.launch.py with the shared ROS 1 bag (no trajectory topic: trajectory:= gives it):
    install:=false ends done; then install true with no bridge answering ends done too, not installed."""
    from diagnostic_msgs.msg import DiagnosticStatus
    from shadow_twin.calibration.jobs.job import RESULT
    helpers, client = ros
    statuses = client.record(DiagnosticStatus, '/calibration_node/status', depth=50)
    run = launch('calibration.launch.py', f'config:={calibration_params}', f'bag:={BAG}',
                 f'trajectory:={TRAJECTORIES}:hand_closing', 'install:=false')
    try:
        first = calibrate(helpers, client, statuses, run)
        assert first['phase'] == 'done' and 'install is false' in first['message'], first
        run_dir = Path(first['run_dir'])
        assert run_dir.parent == calibration_params.parent / 'out'
        report = json.loads((run_dir / 'report.json').read_text())
        assert report['alignment']['recording'] == 'hand_closing_real'
        result = json.loads((run_dir / RESULT).read_text())
        assert result['accept'] and result['installed'] is False and Path(result['model']).is_file(), result
        assert result['fit']['after'] < result['fit']['before']

        assert all(r.successful for r in client.set_parameters('/calibration_node', {'install': True}))
        second = calibrate(helpers, client, statuses, run)
        assert second['phase'] == 'done', second
        assert 'not installed: no bridge /mujoco_bridge answered (offline)' in second['message'], second
        result = json.loads((Path(second['run_dir']) / RESULT).read_text())
        assert result['installed'] is False and Path(result['model']).is_file(), result
    finally:
        status = stop_and_check(run)
    assert status == 0, run.output()[-3000:]
