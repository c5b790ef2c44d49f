"""The calibration node on the cell: the MiR250 + UR5 calibration protocol run live through the twin.

Fast tests (no processes): a run's base path composed onto a start pose at yaw != 0, and the goal
of a run passing the twin's own base-goal rules. The live test (slow): ``shadow-twin up --cell
--mock-hardware --no-monitor`` in one process (sim bridge on the cell, mock UR, mock hand, mock MiR,
twin server) on this test run's private ROS domain, and a calibration node with a small protocol
(an arm swing, one straight base run, one validation arc; tiny screening and budgets) started
through ``shadow-twin calibrate-live``: every run's bag holds the joint states, the base's commands,
both odometries and the commanded arm trajectory; the mock MiR moved by the commanded path; the
node ends ``done`` or ``refused`` (both legitimate for a 4-rollout fit) with a validation entry per
validation run; every goal is stamped the cell twin's start lead (+ per point + send_margin) ahead. Skipped without rclpy or control_msgs.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from pathlib import Path

from support import cell as cell_helpers
import numpy as np
import pytest

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

REPO = Path(__file__).resolve().parents[2]
NODE_PARAMS = REPO / 'config' / 'calibration_node.yaml'
START_TIMEOUT = 60.0
NODE_NAME = 'cell_calibration'
#: s; the cell's stepping threads stalled for 0.11-0.18 s with the test run, the cell's 6 processes
#: and the node on 2 shared cores, and all three recordings of a run were set aside at the node's
#: 0.1 s (the set-aside itself: test_calibration_node.py); the protocol is what is tested here
MAX_GAP = 0.5
REST_POSE = ('{shoulder_pan_joint: 0.0, shoulder_lift_joint: -1.5707963, elbow_joint: 1.5707963, '
             'wrist_1_joint: -3.1415927, wrist_2_joint: -1.5707963, wrist_3_joint: 0.0}')
SMALL_PROTOCOL = f"""
protocol:
  rest_pose: {REST_POSE}
  arm_space: ur5_arm_dynamics.yaml
  base_space: mir250_base.yaml
  screening_samples: 3
  screened_keep: 2
  arm_budget: 4
  base_budget: 4
  lead_in: {{speed: 0.2, accel: 0.5, cruise: 0.5}}
  goal_position_tolerance: 0.3
  goal_yaw_tolerance: 0.25
runs:
  AR1:
    role: arm_identification
    description: short shoulder pan swing, base still
    arm: {{kind: swing, joint: shoulder_pan_joint, amplitude: 0.3, period: 1.0, cycles: 2}}
  IN1:
    role: identification
    description: straight at 0.6 m/s, arm still
    base: {{speed: 0.6, accel: 1.0, cruise: 1.0, radius: 0.0}}
  CN1:
    role: validation
    description: left arc of 1 m at 0.5 m/s, arm still
    base: {{speed: 0.5, accel: 1.0, cruise: 1.5, radius: 1.0}}
"""


@pytest.fixture(scope='module')
def small_protocol(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp('protocol') / 'small_protocol.yaml'
    path.write_text(SMALL_PROTOCOL)
    return path


# ------------------------------------------------------------------------- fast: no processes
def calibrate_live(helpers, node_name: str, timeout: float) -> subprocess.CompletedProcess:
    """``shadow-twin calibrate-live`` against ``node_name`` (its output captured), giving up after
    ``timeout`` s (the process itself after 60 s more)."""
    return subprocess.run([helpers.PYTHON, '-m', 'shadow_twin.cli.main', 'calibrate-live', '--node', f'/{node_name}',
                           '--service-timeout', str(START_TIMEOUT), '--timeout', str(timeout)],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout + 60)


def test_base_path_is_composed_onto_a_start_pose_at_yaw():
    pytest.importorskip('rclpy')
    from calibration_node.protocol_runner import compose_base_path
    from shadow_twin.calibration.recordings.base_recording import poses_relative_to
    start = np.array([1.0, -2.0, 2.5])            # yaw 2.5 rad: a quarter turn on is past pi
    relative = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, math.pi / 2], [0.0, -0.5, -0.3]])
    rates = np.array([[0.5, 0.0, 0.0], [0.0, 0.5, 0.5], [0.2, -0.1, -0.4]])
    poses, velocities = compose_base_path(start, relative, rates)
    c, s = math.cos(2.5), math.sin(2.5)
    np.testing.assert_allclose(poses[0], [1.0 + c, -2.0 + s, 2.5], atol=1e-12)           # 1 m ahead
    np.testing.assert_allclose(poses[1], [1.0 + c - s, -2.0 + s + c, 2.5 + math.pi / 2], atol=1e-12)
    assert poses[1, 2] > math.pi                                                          # yaw not wrapped
    np.testing.assert_allclose(velocities[0], [0.5 * c, 0.5 * s, 0.0], atol=1e-12)      # along the heading
    np.testing.assert_allclose(velocities[1], [-0.5 * s, 0.5 * c, 0.5], atol=1e-12)     # to its left
    np.testing.assert_allclose(poses_relative_to(start, poses), relative, atol=1e-12)    # the inverse
    np.testing.assert_allclose(np.hypot(velocities[:, 0], velocities[:, 1]), np.hypot(rates[:, 0], rates[:, 1]))


def test_a_run_goal_passes_the_twins_base_rules(small_protocol):
    pytest.importorskip('control_msgs.action')
    from calibration_node.protocol_runner import RUN_GOAL_TIME, rest_goal, run_goal_msg
    from shadow_twin.calibration.jobs.protocol import CellProtocol
    from shadow_twin.common.stamps import to_seconds
    from shadow_twin.control.base.follower import BaseTolerances, base_tolerances_from_goal
    from shadow_twin.control.base.trajectory import base_trajectory_from_msg
    protocol = CellProtocol.from_yaml(small_protocol)
    start = np.array([3.0, 1.0, -2.9])
    for run in protocol.runs:
        goal = run.goal(protocol.rest_pose)
        msg = run_goal_msg(goal, start)
        assert list(msg.trajectory.joint_names) == list(protocol.rest_pose)
        assert to_seconds(msg.trajectory.points[-1].time_from_start) == pytest.approx(goal.arm.duration)
        if run.base.still:
            assert not msg.multi_dof_trajectory.points
            continue
        base = msg.multi_dof_trajectory
        assert base.header.frame_id == 'odom' and list(base.joint_names) == ['virtual_joint']
        trajectory = base_trajectory_from_msg(base, current_pose=start)        # the twin's checks
        # a base that slid gets RUN_GOAL_TIME to come back to its end pose; the twin's tolerances stay
        twin = BaseTolerances(goal_position=0.05, goal_yaw=0.1, goal_time=2.0, path_position=0.4)
        tolerances = base_tolerances_from_goal(twin, msg)
        assert (tolerances.goal_position, tolerances.goal_yaw, tolerances.goal_time) == (0.05, 0.1, RUN_GOAL_TIME)
        # ... unless the protocol sets the run's goal tolerance (its end pose is no target)
        with_tolerance = run_goal_msg(goal, start, (protocol.goal_position_tolerance, protocol.goal_yaw_tolerance))
        tolerances = base_tolerances_from_goal(twin, with_tolerance)
        assert (tolerances.goal_position, tolerances.goal_yaw, tolerances.path_position) == (0.3, 0.25, 0.4)
        only_yaw = base_tolerances_from_goal(twin, run_goal_msg(goal, start, (0.0, 0.2)))
        assert (only_yaw.goal_position, only_yaw.goal_yaw) == (0.05, 0.2)
        end = goal.base_poses[-1]
        c, s = math.cos(start[2]), math.sin(start[2])
        np.testing.assert_allclose(trajectory.end_pose, [start[0] + c * end[0] - s * end[1],
                                                         start[1] + s * end[0] + c * end[1], start[2] + end[2]],
                                   atol=1e-6)
        np.testing.assert_array_equal(trajectory.velocities[-1], 0.0)
    rest = rest_goal(protocol.rest_pose)
    point = rest.trajectory.points[-1]
    assert list(rest.trajectory.joint_names) == list(protocol.rest_pose) and len(rest.trajectory.points) == 1
    assert to_seconds(point.time_from_start) == 3.0 and list(point.velocities) == [0.0] * 6
    assert not rest.multi_dof_trajectory.points


# ---------------------------------------------------------------------------- live: the cell
def statuses_of(recorder, name: str) -> list[dict]:
    return [{**{kv.key: kv.value for kv in msg.values}, 'message': msg.message}
            for _, msg in recorder.snapshot() if msg.name == f'{name}: calibration']


@pytest.fixture(scope='module')
def cell(ros, tmp_path_factory):
    """``shadow-twin up --cell --mock-hardware --no-monitor`` in one process (a calibration does not use
    the monitor, which a calibration does not need); yields {'up', 'odom', 'sim_odom'}."""
    from control_msgs.action import FollowJointTrajectory
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import JointState
    _, client = ros
    flowing = {topic: client.record(JointState, topic, depth=10)
               for topic in ('/joint_states', '/sim/joint_states', '/rh/joint_states')}
    odom = {topic: client.record(Odometry, topic, depth=2000) for topic in ('/odom', '/sim/odom')}
    up = cell_helpers.up(tmp_path_factory.mktemp('cell') / 'up.log', '--cell', '--mock-hardware', '--no-monitor')
    cell_helpers.wait_started([up], [*flowing.values(), *odom.values()], START_TIMEOUT, 'shadow-twin up --cell')
    client.action_client(FollowJointTrajectory, '/twin/follow_joint_trajectory', timeout=START_TIMEOUT)
    yield {'up': up, 'odom': odom['/odom'], 'sim_odom': odom['/sim/odom']}
    cell_helpers.stop_all({'up': up})


@pytest.fixture(scope='module')
def protocol_run(ros, cell, small_protocol, tmp_path_factory):
    """The small protocol, live, through ``shadow-twin calibrate-live``; returns what it left behind."""
    from diagnostic_msgs.msg import DiagnosticStatus
    helpers, client = ros
    folder = tmp_path_factory.mktemp('protocol_run')
    statuses = client.record(DiagnosticStatus, f'/{NODE_NAME}/status', depth=500)
    node = helpers.NodeProcess('calibration_node.node', [
        '-r', f'__node:={NODE_NAME}', '--params-file', str(NODE_PARAMS), '-p', f'output_dir:={folder / "out"}',
        '-p', f'protocol:={small_protocol}', '-p', f'max_gap:={MAX_GAP}'], folder / f'{NODE_NAME}.log')
    started = time.monotonic()
    try:
        cli = calibrate_live(helpers, NODE_NAME, 540)
    finally:
        status = node.stop()
    wall = time.monotonic() - started
    assert status == 0, node.output()[-3000:]
    runs = [p for p in (folder / 'out').iterdir() if p.name != 'models']
    print(f'\nsmall protocol, live: {wall:.1f} s to the end (calibrate-live exit {cli.returncode})')
    return {'cli': cli, 'run_dir': runs[0] if runs else None, 'log': node.output(), 'wall': wall,
            'statuses': statuses_of(statuses, NODE_NAME), 'models': sorted((folder / 'out' / 'models').glob('*.xml'))}


@pytest.mark.slow
def test_every_run_is_recorded_with_the_base_and_arm_topics(cell, protocol_run, small_protocol):
    from calibration_node.execution import TRAJECTORY_TOPIC
    from shadow_twin.calibration.recordings.base_recording import ODOMETRY, TWIST_STAMPED, read_base_recording
    from shadow_twin.calibration.jobs.protocol import CellProtocol
    from shadow_twin.calibration.recordings.recording import (JOINT_STATE, TRAJECTORY, bag_topics,
                                                              read_commanded_trajectory, read_joint_states)
    run_dir = protocol_run['run_dir']
    output = protocol_run['cli'].stdout + protocol_run['cli'].stderr
    assert run_dir is not None, output + protocol_run['log'][-3000:]
    protocol = CellProtocol.from_yaml(small_protocol)
    # a recording with lost messages is set aside in bags/rejected/ and recorded again (a starved PC)
    assert sorted(p.name for p in (run_dir / 'bags').iterdir() if p.name != 'rejected') == \
        sorted(r.name for r in protocol.runs), output + protocol_run['log'][-3000:]
    for k, run in enumerate(protocol.runs):
        assert f'[recording] executing {run.name} ({k + 1}/3, ' in output, output
    expected = {'/joint_states': JOINT_STATE, '/sim/joint_states': JOINT_STATE, '/cmd_vel': TWIST_STAMPED,
                '/odom': ODOMETRY, '/sim/odom': ODOMETRY, TRAJECTORY_TOPIC: TRAJECTORY}
    for run in protocol.runs:
        bag = run_dir / 'bags' / run.name
        assert bag_topics(bag) == expected, run.name
        goal = run.goal(protocol.rest_pose)
        commanded, start = read_commanded_trajectory(bag)
        assert list(commanded.joint_names) == list(protocol.rest_pose)
        np.testing.assert_allclose(commanded.positions, goal.arm.positions)
        arm = read_joint_states(bag, '/joint_states')
        # recorded from before the start to the end + base_settle_time (1.5 s)
        assert arm.times[0] < start and arm.times[-1] > start + goal.duration + 1.4, run.name
        if run.base.still:
            moved, commanded_swing = np.ptp(arm.values(['shoulder_pan_joint'])[:, 0]), np.ptp(goal.arm.positions[:, 0])
            assert commanded_swing > 0.4 and moved > 0.9 * commanded_swing, (run.name, moved)   # the mock UR swung
            continue
        target = goal.base_poses[-1]
        if run.name == 'IN1':
            # the first base run: the lead-in (0.18 m straight ahead, not recorded) took the base
            # from the origin. Its goal carries the protocol's goal tolerance, and the twin's follower
            # ends a goal once the base is stopped within it: a follower that fell behind on a loaded
            # PC overshoots (0.224 m measured with a busy core beside the suite). So: ahead by more
            # than half the lead-in (a recorded or missing lead-in starts at the origin), within the
            # tolerance past it, and straight.
            lead = protocol.lead_in_goal().base_poses[-1][0]
            first = read_base_recording(bag, '/cmd_vel', '/odom').poses[0]
            assert lead / 2 < first[0] < lead + protocol.goal_position_tolerance, first
            assert abs(first[1]) < 0.03, first
        for odom in ('/odom', '/sim/odom'):
            recording = read_base_recording(bag, '/cmd_vel', odom)
            end = recording.relative_poses()[-1]
            # the protocol's goal tolerance (each base follows the path in its own odom)
            assert math.hypot(*(end[:2] - target[:2])) < protocol.goal_position_tolerance + 0.01 and \
                abs(end[2] - target[2]) < protocol.goal_yaw_tolerance + 0.01, (run.name, odom, end, target)
            # driven at the run's speed; a follower that fell behind on a loaded PC catches up faster
            # (measured: 0.98 m/s on a 0.6 m/s run), within the twin's base limit (2 m/s)
            assert run.base.speed - 0.25 < recording.commands[:, 0].max() <= 2.0, (run.name, odom)


@pytest.mark.slow
def test_every_goal_is_stamped_the_cell_twins_lead_ahead(ros, protocol_run, small_protocol):
    """Each goal of the runs (rest pose, lead-in, the run) is stamped the cell twin's start_lead
    (config/twin_cell.yaml, read from /shadow_twin when the run started) + start_lead_per_point x its
    arm and base points + send_margin ahead; the twin rejected none (it rejects a goal whose parts are
    not all accepted before its start)."""
    import yaml
    from test_calibration_node import stamped_leads, twin_lead_parameters

    from calibration_node.protocol_runner import rest_goal, run_goal_msg
    from calibration_node.twin_lead import goal_points
    from shadow_twin.calibration.jobs.protocol import CellProtocol
    _, client = ros
    base, per_point = twin_lead_parameters(client)
    margin = yaml.safe_load(NODE_PARAMS.read_text())['/**/calibration_node']['ros__parameters']['send_margin']
    protocol = CellProtocol.from_yaml(small_protocol)
    expected = []
    for run in protocol.runs:
        expected.append(goal_points(rest_goal(protocol.rest_pose)))
        goal = run.goal(protocol.rest_pose)
        if len(goal.base_times):
            expected.append(goal_points(run_goal_msg(protocol.lead_in_goal(), np.zeros(3))))
        expected.append(goal_points(run_goal_msg(goal, np.zeros(3))))
    leads = stamped_leads(protocol_run['log'])
    # (a recording set aside for a gap is executed again: its goals appear twice)
    assert len(leads) >= len(expected) and {p for p, _ in leads} == set(expected), (leads, expected)
    for points, lead in leads:
        assert lead == pytest.approx(base + per_point * points + margin, abs=1e-3), (points, lead)
    assert "(the twin /shadow_twin's parameters, read now)" in protocol_run['log']
    assert 'rejected the goal' not in protocol_run['log'], protocol_run['log'][-3000:]


@pytest.mark.slow
def test_the_fit_ends_done_or_refused_with_every_validation_run(ros, cell, protocol_run):
    from shadow_twin.calibration.jobs.job import RESULT
    helpers, client = ros
    cli, run_dir = protocol_run['cli'], protocol_run['run_dir']
    output = cli.stdout + cli.stderr
    assert cli.returncode in (0, 3), output + protocol_run['log'][-3000:]
    final = protocol_run['statuses'][-1]
    assert final['phase'] in ('done', 'refused'), final
    assert final['validation_CN1'].count(' -> ') == 1, final
    assert '[calibrating] arm screening' in output and 'base fit' in output, output
    result = json.loads((run_dir / RESULT).read_text())
    assert set(result['validation']) == {'CN1'}
    assert {'before', 'after'} <= set(result['validation']['CN1'])
    assert result['accept'] == (final['phase'] == 'done')
    assert (run_dir / 'report.json').is_file() and (run_dir / 'parameters.yaml').is_file()
    if result['accept']:
        from rcl_interfaces.srv import GetParameters
        assert result['installed'] and protocol_run['models'] == [Path(result['model'])], result
        answer = client.call(GetParameters, '/mujoco_bridge/get_parameters',
                             GetParameters.Request(names=['model_path', 'gains_file']))
        assert answer.values[0].string_value == result['model']
        assert answer.values[1].string_value.endswith('config/controllers/cell.yaml')   # gains kept
    else:
        assert result['installed'] is False and not protocol_run['models']



@pytest.mark.slow
def test_offline_protocol_from_the_live_bags(ros, cell, protocol_run, small_protocol, tmp_path):
    """``bag:=`` the live run's bags with the protocol: a run without a bag is refused naming it; with
    all three the node fits and validates from them (install:=false), and nothing moves."""
    from std_srvs.srv import Trigger

    from shadow_twin.calibration.jobs.job import RESULT
    from shadow_twin.calibration.jobs.plan import CalibrationPlan
    helpers, client = ros
    bags = {p.name: p for p in (protocol_run['run_dir'] / 'bags').iterdir() if p.name != 'rejected'}
    name = 'cell_calibration_offline'

    def node(*params: str):
        return helpers.NodeProcess('calibration_node.node', [
            '-r', f'__node:={name}', '--params-file', str(NODE_PARAMS), '-p', f'output_dir:={tmp_path / "out"}',
            '-p', f'protocol:={small_protocol}', '-p', 'install:=false', *(a for p in params for a in ('-p', p))],
            tmp_path / f'{name}.log')
    partial = node(f'bag:={bags["AR1"]},{bags["IN1"]}')
    try:
        answer = client.call(Trigger, f'/{name}/calibrate', timeout=START_TIMEOUT)
    finally:
        assert partial.stop() == 0, partial.output()[-2000:]
    assert not answer.success and "protocol run(s) ['CN1'] have no bag" in answer.message, answer.message
    assert not (tmp_path / 'out').exists() or not any((tmp_path / 'out').iterdir())
    odom_before = cell['odom'].last().pose.pose.position
    full = node(f'bag:={bags["CN1"]},{bags["AR1"]},{bags["IN1"]}')
    try:
        cli = calibrate_live(helpers, name, 300)
    finally:
        assert full.stop() == 0, full.output()[-3000:]
    assert cli.returncode in (0, 3), cli.stdout + cli.stderr + full.output()[-3000:]
    assert '(offline)' in cli.stdout and '[recording]' not in cli.stdout, cli.stdout
    run_dir = next(p for p in (tmp_path / 'out').iterdir() if p.name != 'models')
    plan = CalibrationPlan.read(run_dir)
    assert [(e.name, e.bag, e.holdout) for e in plan.entries] == [
        ('AR1', str(bags['AR1']), False), ('IN1', str(bags['IN1']), False), ('CN1', str(bags['CN1']), True)]
    result = json.loads((run_dir / RESULT).read_text())
    assert set(result['validation']) == {'CN1'} and result['installed'] is False
    assert not (run_dir / 'bags').exists()
    odom_after = cell['odom'].last().pose.pose.position
    assert math.hypot(odom_after.x - odom_before.x, odom_after.y - odom_before.y) < 1e-3    # nothing moved

def test_a_rejected_goal_fails_the_run_with_a_line_naming_it(ros, cell, tmp_path):
    """A rest pose outside the UR5's joint limits: the twin rejects the positioning goal, which is
    sent again up to record_attempts (3) times (nothing moved); the run then fails (calibrate-live
    exit 1) with one line naming the run, and nothing is recorded."""
    helpers, _ = ros
    protocol = tmp_path / 'unreachable.yaml'
    protocol.write_text(SMALL_PROTOCOL.replace('shoulder_pan_joint: 0.0,', 'shoulder_pan_joint: 7.0,', 1))
    name = 'cell_calibration_rejected'
    node = helpers.NodeProcess('calibration_node.node', [
        '-r', f'__node:={name}', '--params-file', str(NODE_PARAMS), '-p', f'output_dir:={tmp_path / "out"}',
        '-p', f'protocol:={protocol}'], tmp_path / f'{name}.log')
    try:
        cli = calibrate_live(helpers, name, 120)
    finally:
        assert node.stop() == 0, node.output()[-3000:]
    assert cli.returncode == 1, cli.stdout + cli.stderr
    failed = [line for line in cli.stdout.splitlines() if line.startswith('[failed]')]
    assert failed == ['[failed] run AR1: moving the arm to the rest pose: /twin/follow_joint_trajectory rejected '
                      'the goal (see its log for the reason)'], cli.stdout
    assert "position 7 rad of joint 'shoulder_pan_joint' is outside its limits" in cell['up'].output()
    log = node.output()
    assert [f'attempt {k}/3' in log for k in (2, 3)] == [True, True] and 'nothing moved' in log, log[-3000:]
    run_dir = next(p for p in (tmp_path / 'out').iterdir() if p.name != 'models')
    assert not (run_dir / 'bags').exists() or not any((run_dir / 'bags').iterdir())


@pytest.mark.parametrize('param, expected', [
    ('protocol:=/nowhere/protocol.yaml', "protocol '/nowhere/protocol.yaml': /nowhere/protocol.yaml does not exist"),
    ('base_odom_topic:=odom here', "base_odom_topic 'odom here' is not a valid topic name"),
    ('frame_file:=/nowhere/frame.yaml', 'frame_file /nowhere/frame.yaml is set but base_pose_topic is empty'),
])
def test_bad_protocol_parameters_stop_the_node_naming_them(ros, tmp_path, param, expected):
    helpers, _ = ros
    node = helpers.NodeProcess('calibration_node.node', [
        '-r', '__node:=bad_cell_calibration', '--params-file', str(NODE_PARAMS), '-p', 'protocol:=cell',
        '-p', f'output_dir:={tmp_path / "out"}', '-p', param], tmp_path / 'bad.log')
    node.proc.wait(timeout=60)
    assert node.stop() == 1 and expected in node.output(), node.output()[-2000:]
    assert not (tmp_path / 'out').exists()
