"""Integration tests of the twin's trajectory action server: real processes over DDS.

The mock hardware bridge (``/joint_states``, ``/rh_trajectory_controller/...``),
the sim bridge (``/sim/...``) and the twin server (``/twin/follow_joint_trajectory``)
run as separate processes on a ROS domain private to this test run; ``shadow-twin
up`` runs them in one process. Skipped without rclpy or control_msgs. The launch
files are tested through ``ros2 launch`` in test/launch/.
"""

from __future__ import annotations

from pathlib import Path

from support import cell as cell_helpers
import numpy as np
import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
TWIN_PARAMS = REPO / 'config' / 'twin.yaml'
TWIN_ACTION = '/twin/follow_joint_trajectory'
START_TIMEOUT = 30.0
#: Subscribers of the joint states once the twin listens: this client's and the twin's.
LISTENING = {'/joint_states': 2, '/sim/joint_states': 2}
TARGET = {'rh_FFJ3': 1.2, 'rh_FFJ4': 0.2, 'rh_MFJ3': 0.9, 'rh_THJ4': 0.8, 'rh_WRJ1': -0.3}


# ------------------------------------------------------------------------------------ helpers
def make_goal(targets: dict[str, float], seconds: float, goal_tolerance: float | None = None):
    """``ros_helpers.one_point_goal`` (imported once rclpy is known to be there)."""
    from support import ros as ros_helpers
    return ros_helpers.one_point_goal(targets, seconds, goal_tolerance)


def positions(msg, names) -> np.ndarray:
    index = {n: k for k, n in enumerate(msg.name)}
    return np.array([msg.position[index[n]] for n in names])


def send(client, goal, action: str = TWIN_ACTION, feedback=None):
    from control_msgs.action import FollowJointTrajectory
    return client.send_goal(FollowJointTrajectory, action, goal, feedback=feedback, timeout=15.0)


def result_of(client, handle, timeout: float = 15.0):
    response = client.wait_future(handle.get_result_async(), timeout)
    return response.status, response.result


# ------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope='module')
def states(ros):
    """Recorders of /joint_states (real) and /sim/joint_states (1000 deep: the states are judged on
    their stamps, and a loaded PC takes them in bursts)."""
    _, client = ros
    return cell_helpers.record_hand_topics(client, depth=1000)


@pytest.fixture(scope='module')
def cell(ros, states, tmp_path_factory):
    """Mock hardware, sim bridge and twin server as three processes; yields {name: process}."""
    _, client = ros
    folder = tmp_path_factory.mktemp('twin')
    procs = {**cell_helpers.hand_bridges(folder), 'twin': cell_helpers.twin_server(folder, TWIN_PARAMS)}
    cell_helpers.wait_started(procs, [states['real'], states['sim']], START_TIMEOUT)
    cell_helpers.wait_twin_ready(client, procs, START_TIMEOUT, 'the twin server', subscribers=LISTENING)
    yield procs
    cell_helpers.stop_all(procs)


@pytest.fixture
def rest(ros, cell, states):
    """Both bridges reset and at rest."""
    _, client = ros
    cell_helpers.reset_hand(client, states)
    return cell


# ------------------------------------------------------------------------------------- tests
def test_up_with_mock_hardware_serves_the_twin_action(ros, states, tmp_path):
    """``shadow-twin up --mock-hardware`` (shadow_twin.cli.up.main in a subprocess): one process with the
    bridges, the twin server and the twin monitor; a goal succeeds. Runs before the ``cell`` fixture
    starts, so it is alone on the domain."""
    from action_msgs.msg import GoalStatus
    from sensor_msgs.msg import JointState
    helpers, client = ros
    joint_error = client.record(JointState, '/twin/joint_error', depth=10)
    proc = cell_helpers.up(tmp_path / 'up.log', '--mock-hardware')
    try:
        # the monitor's sim - real flows once it has both joint states
        cell_helpers.wait_started([proc], [states['real'], states['sim'], joint_error], START_TIMEOUT,
                                  'shadow-twin up')
        cell_helpers.wait_twin_ready(client, [proc], START_TIMEOUT, 'shadow-twin up', subscribers=LISTENING)
        assert len(joint_error.last().name) == 24
        handle = send(client, make_goal({'rh_FFJ3': 0.8, 'rh_WRJ1': -0.2}, 0.5, goal_tolerance=0.05))
        assert handle.accepted, proc.output()[-3000:]
        status, result = result_of(client, handle)
        assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
        for side in ('real', 'sim'):
            np.testing.assert_allclose(positions(helpers.current(states[side]), ['rh_FFJ3', 'rh_WRJ1']), [0.8, -0.2],
                                       atol=0.05)
    finally:
        status = proc.stop()
    assert status == 0, proc.log_path.read_text()[-3000:]
    for _, recorder in states.items():
        recorder.clear()


def test_goal_moves_robot_and_sim_and_succeeds(ros, rest, states):
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    helpers, client = ros
    feedback = []
    handle = send(client, make_goal(TARGET, 0.6, goal_tolerance=0.05), feedback=feedback.append)
    assert handle.accepted, rest['twin'].output()[-2000:]
    # the end point's feedback before the result is asked for (final_feedback says why)
    fb = helpers.final_feedback(feedback, TARGET, settled=lambda fb: np.allclose(fb.actual.positions,
                                                                                 list(TARGET.values()), atol=0.05))
    status, result = result_of(client, handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    assert result.error_code == FollowJointTrajectory.Result.SUCCESSFUL
    for side in ('real', 'sim'):
        np.testing.assert_allclose(positions(helpers.current(states[side]), list(TARGET)), list(TARGET.values()),
                                   atol=0.05)
    assert len(feedback) >= 10
    assert list(fb.joint_names) == list(TARGET)
    np.testing.assert_allclose(np.array(fb.error.positions),
                               np.array(fb.desired.positions) - np.array(fb.actual.positions), atol=1e-12)
    # actual is the robot (mock hardware): its state at the feedback's stamp
    np.testing.assert_allclose(fb.actual.positions,
                               positions(helpers.stamped_at(states['real'], helpers.stamp_s(fb)), list(TARGET)),
                               atol=0.02)
    # sim minus real of the two: the twin monitor's job (test_twin_monitor.py)


def test_bad_goals_are_rejected_and_nothing_moves(ros, rest, states):
    helpers, client = ros
    before = {side: positions(states[side].last(), list(TARGET)) for side in ('real', 'sim')}
    unknown = send(client, make_goal({'rh_FFJ3': 0.5, 'rh_FFJ9': 0.1}, 0.5))
    outside = send(client, make_goal({'rh_FFJ3': 2.5}, 0.5))
    assert not unknown.accepted and not outside.accepted
    # the other JTC rejections, over DDS too (their codes and texts: test_jtc_goals.py)
    from builtin_interfaces.msg import Duration, Time
    from trajectory_msgs.msg import JointTrajectoryPoint
    bad = {}
    bad['no joint names'] = make_goal({'rh_FFJ3': 0.5}, 0.5)
    bad['no joint names'].trajectory.joint_names = []
    bad['no points'] = make_goal({'rh_FFJ3': 0.5}, 0.5)
    bad['no points'].trajectory.points = []
    bad['duplicate joint'] = make_goal({'rh_FFJ3': 0.5}, 0.5)
    bad['duplicate joint'].trajectory.joint_names = ['rh_FFJ3', 'rh_FFJ3']
    bad['duplicate joint'].trajectory.points[0].positions = [0.5, 0.5]
    bad['size mismatch'] = make_goal({'rh_FFJ3': 0.5, 'rh_MFJ3': 0.5}, 0.5)
    bad['size mismatch'].trajectory.points[0].positions = [0.5]
    bad['NaN'] = make_goal({'rh_FFJ3': float('nan')}, 0.5)
    bad['non-increasing time'] = make_goal({'rh_FFJ3': 0.5}, 0.5)
    bad['non-increasing time'].trajectory.points.append(JointTrajectoryPoint(
        positions=[0.6], time_from_start=Duration(sec=0, nanosec=400_000_000)))
    bad['start already past'] = make_goal({'rh_FFJ3': 0.5}, 0.5)
    bad['start already past'].trajectory.header.stamp = Time(sec=1, nanosec=0)
    for what, goal in bad.items():
        assert not send(client, goal).accepted, what
    rejected = helpers.ros_now()
    for side in ('real', 'sim'):      # nothing moved in the 0.4 s after (on the states' stamps)
        held = helpers.stamped_at(states[side], rejected + 0.4)
        assert np.abs(positions(held, list(TARGET)) - before[side]).max() < 1e-3
    log = rest['twin'].output()
    assert 'rh_FFJ9' in log and 'INVALID_JOINTS' in log
    assert 'outside its limits' in log


def moving(helpers, states, joint: str = 'rh_FFJ3', above: float = 0.15) -> None:
    """Wait until ``joint`` is past ``above`` rad on both sides (the goal runs on both)."""
    assert helpers.wait_until(lambda: all(positions(states[side].last(), [joint])[0] > above
                                          for side in ('real', 'sim')), 5.0), 'the goal did not start moving'


def test_cancel_mid_way_stops_robot_and_sim(ros, rest, states):
    from action_msgs.msg import GoalStatus
    helpers, client = ros
    handle = send(client, make_goal({'rh_FFJ3': 1.5}, 3.0))
    assert handle.accepted
    moving(helpers, states)
    client.wait_future(handle.cancel_goal_async(), 5.0)
    status, _ = result_of(client, handle)
    assert status == GoalStatus.STATUS_CANCELED
    canceled = helpers.ros_now()        # robot and sim at the cancel's answer and 0.6 s on, on their stamps
    at_cancel = {side: positions(helpers.stamped_at(states[side], canceled), ['rh_FFJ3'])[0]
                 for side in ('real', 'sim')}
    for side in ('real', 'sim'):
        assert 0.05 < at_cancel[side] < 1.0, (side, at_cancel)
    for side in ('real', 'sim'):
        later = positions(helpers.stamped_at(states[side], canceled + 0.6), ['rh_FFJ3'])[0]
        assert abs(later - at_cancel[side]) < 0.05, side      # holds; the goal would be at ~0.9 rad
        assert later < 0.8


def test_new_goal_preempts_the_running_one(ros, rest, states):
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    helpers, client = ros
    first = send(client, make_goal({'rh_FFJ3': 1.5}, 3.0))
    assert first.accepted
    moving(helpers, states)
    second = send(client, make_goal({'rh_FFJ3': 0.3, 'rh_THJ4': 0.5}, 0.5, goal_tolerance=0.05))
    assert second.accepted
    status, result = result_of(client, first)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == FollowJointTrajectory.Result.INVALID_GOAL
    assert 'preempted' in result.error_string
    status, result = result_of(client, second)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    for side in ('real', 'sim'):
        np.testing.assert_allclose(positions(helpers.current(states[side]), ['rh_FFJ3', 'rh_THJ4']), [0.3, 0.5],
                                   atol=0.05)


def second_twin(helpers, folder: Path, name: str, **changes):
    """Another twin server process named ``name`` serving /``name``/follow_joint_trajectory."""
    params = yaml.safe_load(TWIN_PARAMS.read_text())
    values = params.pop('/**/shadow_twin')['ros__parameters']
    values.update(action_name=f'/{name}/follow_joint_trajectory')
    values.update(changes)
    params[f'/**/{name}'] = {'ros__parameters': values}
    params_file = folder / f'{name}.yaml'
    params_file.write_text(yaml.safe_dump(params))
    return helpers.NodeProcess('shadow_twin.ros.twin.server', ['-r', f'__node:={name}', '--params-file',
                                                           str(params_file)], folder / f'{name}.log')


def answered_probe(helpers, client, action: str, tries: int = 5) -> bool:
    """Send a goal without joints (the twin rejects it: nothing moves) until it is answered; True once it is,
    rejected. A twin started seconds before may not yet have matched this client's goal-response reader: its
    answer is then lost (Fast DDS "failed to send response (timeout)": the goal runs, the client never hears;
    twice in four fresh-clone CI runs, 30 Nov). An answered probe shows the path is there."""
    from control_msgs.action import FollowJointTrajectory
    sender = client.action_client(FollowJointTrajectory, action)
    for _ in range(tries):
        future = sender.send_goal_async(FollowJointTrajectory.Goal())
        if helpers.wait_until(future.done, 3.0):
            return not future.result().accepted
    return False


def test_sim_mode_moves_only_the_sim(ros, rest, states, tmp_path):
    from action_msgs.msg import GoalStatus
    helpers, client = ros
    listening = {t: client.node.count_subscribers(t) + 1 for t in ('/joint_states', '/sim/joint_states')}
    # a fresh process: give it time to discover the sim's action server on a loaded machine
    proc = second_twin(helpers, tmp_path, 'twin_sim', mode='sim', server_timeout=5.0)
    try:
        cell_helpers.wait_twin_ready(client, [proc], START_TIMEOUT, 'the sim-mode twin',
                                     actions=('/twin_sim/follow_joint_trajectory',), subscribers=listening)
        assert answered_probe(helpers, client, '/twin_sim/follow_joint_trajectory'), proc.output()[-2000:]
        real_before = positions(states['real'].last(), ['rh_FFJ3'])[0]
        feedback = []
        handle = send(client, make_goal({'rh_FFJ3': 0.7}, 0.4, goal_tolerance=0.05),
                      action='/twin_sim/follow_joint_trajectory', feedback=feedback.append)
        assert handle.accepted, proc.output()[-2000:]
        # actual is the sim in sim mode (the robot stays where it was); the end point's feedback
        # before the result is asked for (final_feedback says why)
        helpers.final_feedback(feedback, {'rh_FFJ3': 0.7}, settled=lambda fb: abs(fb.actual.positions[0] - 0.7) < 0.05)
        status, result = result_of(client, handle)
        assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
        assert positions(helpers.current(states['sim']), ['rh_FFJ3'])[0] == pytest.approx(0.7, abs=0.05)
        assert abs(positions(helpers.current(states['real']), ['rh_FFJ3'])[0] - real_before) < 0.01
    finally:
        status = proc.stop()
        assert status == 0, proc.log_path.read_text()[-3000:]


def test_missing_real_controller_rejects_the_goal(ros, rest, states, tmp_path):
    """Mode both with a real controller whose action server does not exist: rejected, nothing moves."""
    helpers, client = ros
    controllers = yaml.safe_load(TWIN_PARAMS.read_text())['/**/shadow_twin']['ros__parameters']['controllers']
    controllers['hand']['action'] = '/missing/follow_joint_trajectory'
    proc = second_twin(helpers, tmp_path, 'twin_missing', controllers=controllers)
    try:
        before = {side: positions(states[side].last(), ['rh_FFJ3']) for side in ('real', 'sim')}
        handle = send(client, make_goal({'rh_FFJ3': 0.8}, 0.5), action='/twin_missing/follow_joint_trajectory')
        assert not handle.accepted
        rejected = helpers.ros_now()
        for side in ('real', 'sim'):      # nothing moved in the 0.3 s after (on the states' stamps)
            held = helpers.stamped_at(states[side], rejected + 0.3)
            assert abs(positions(held, ['rh_FFJ3']) - before[side])[0] < 1e-3
        assert helpers.wait_until(lambda: '/missing/follow_joint_trajectory' in proc.output(), 10.0)
        assert 'not available' in proc.output()
    finally:
        status = proc.stop()
        assert status == 0, proc.log_path.read_text()[-3000:]


def test_real_controller_going_away_aborts_and_cancels_the_sim(ros, rest, states):
    """The mock hardware shuts down mid-goal (its controller aborts the goal and its server
    disappears): the twin cancels the sim's goal and aborts with the reason. Stops the mock
    hardware, so it runs last of the cell tests."""
    from action_msgs.msg import GoalStatus
    helpers, client = ros
    handle = send(client, make_goal({'rh_FFJ3': 1.5}, 3.0))
    assert handle.accepted
    moving(helpers, states)
    assert rest['mock'].stop() == 0
    status, result = result_of(client, handle)
    assert status == GoalStatus.STATUS_ABORTED
    assert 'hand controller' in result.error_string, result.error_string
    aborted = helpers.ros_now()          # the sim at the abort's answer and 0.5 s on, on its stamps
    at_abort = positions(helpers.stamped_at(states['sim'], aborted), ['rh_FFJ3'])[0]
    assert at_abort < 1.0
    later = positions(helpers.stamped_at(states['sim'], aborted + 0.5), ['rh_FFJ3'])[0]
    assert abs(later - at_abort) < 0.05     # the sim holds
