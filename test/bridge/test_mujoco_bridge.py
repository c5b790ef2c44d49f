"""Integration tests of the mujoco_bridge node: real processes over DDS. Longer than 400 lines: one
concept (the bridge as a node) over bridge processes its module fixtures start once; split, each part
would start its own (seconds each on this PC; the stepping thread's timing has its own module).

Each bridge runs as its own process (``python -m mujoco_bridge.main --ros-args
--params-file ...``) on a ROS domain private to this test run (derived from the
pid); the test talks to it through an rclpy node in this process. Processes are
stopped by their fixtures. Skipped without rclpy or control_msgs. The stepping thread's
timing (sim clock, rate meter, stall reports): test_bridge_timing.py.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from support import cell as cell_helpers
import numpy as np
import pytest
import yaml

from shadow_twin.common.stamps import to_nanoseconds, to_seconds
from shadow_twin.model.mjcf import builtin_model_path

REPO = Path(__file__).resolve().parents[2]
BRIDGE_PARAMS = REPO / 'config' / 'mujoco_bridge.yaml'
MOCK_PARAMS = REPO / 'config' / 'mock_hardware.yaml'
SIM_ACTION = '/sim/follow_joint_trajectory'
FINGER_DEFAULT = '<joint type="hinge" limited="true" damping="0.05" armature="0.005" frictionloss="0.1"/>'
BROKEN = ('<joint name="rh_FFJ3" class="FJ3"/>', '<joint name="rh_FFJ3" class="FJ3" range="1 0"/>')
START_TIMEOUT = 30.0
BUILTIN = builtin_model_path()


# ------------------------------------------------------------------------------------ fixtures


def start_bridge(ros, log_path: Path, ros_args: list[str], topic: str):
    """Start a bridge process; returns (process, recorder of its joint states) once states flow."""
    helpers, client = ros
    from sensor_msgs.msg import JointState
    recorder = client.record(JointState, topic)
    proc = helpers.NodeProcess('mujoco_bridge.main', ros_args, log_path)
    if not helpers.wait_until(lambda: recorder.count() > 0 or not proc.alive(), START_TIMEOUT):
        proc.stop()
        pytest.fail(f'no {topic} from the bridge within {START_TIMEOUT} s:\n{proc.output()}')
    if not proc.alive():
        pytest.fail(f'bridge exited with status {proc.proc.returncode}:\n{proc.output()}')
    return proc, recorder


@pytest.fixture(scope='module')
def bridge(ros, tmp_path_factory):
    """The twin: config/mujoco_bridge.yaml, /sim/joint_states, /sim/follow_joint_trajectory."""
    log = tmp_path_factory.mktemp('bridge') / 'mujoco_bridge.log'
    proc, states = start_bridge(ros, log, ['--params-file', str(BRIDGE_PARAMS)], '/sim/joint_states')
    yield proc, states
    status = proc.stop()
    assert status == 0, f'bridge exited with {status}:\n{proc.output()}'


@pytest.fixture
def sim(ros, bridge):
    """The twin reset and at rest; yields (process, joint state recorder)."""
    _, client = ros
    from std_srvs.srv import Trigger
    answer = client.call(Trigger, '/mujoco_bridge/reset')
    assert answer.success, answer.message
    proc, states = bridge
    cell_helpers.wait_at_rest(states)
    return proc, states


def moving(ros, states, above: float, joint: str = 'rh_FFJ3') -> None:
    """Wait until ``joint`` is past ``above`` rad (a goal has started moving it)."""
    assert ros[0].wait_until(lambda: positions(states.last(), [joint])[0] > above, 10.0), f'{joint} did not move'


# ------------------------------------------------------------------------------------- helpers
def positions(msg, names) -> np.ndarray:
    index = {n: k for k, n in enumerate(msg.name)}
    return np.array([msg.position[index[n]] for n in names])


def make_goal(targets: dict[str, float], seconds: float, goal_tolerance: float | None = None,
              stamp_ns: int = 0):
    """``ros_helpers.one_point_goal`` (imported once rclpy is known to be there)."""
    from support import ros as ros_helpers
    return ros_helpers.one_point_goal(targets, seconds, goal_tolerance, stamp_ns)


def send(ros, goal, action: str = SIM_ACTION, feedback=None):
    from control_msgs.action import FollowJointTrajectory
    _, client = ros
    return client.send_goal(FollowJointTrajectory, action, goal, feedback=feedback)


def result_of(ros, handle, timeout: float = 15.0):
    """(GoalStatus status, Result) of an accepted goal."""
    _, client = ros
    response = client.wait_future(handle.get_result_async(), timeout)
    return response.status, response.result


TARGET = {'rh_FFJ3': 1.2, 'rh_FFJ4': 0.2, 'rh_MFJ3': 0.9, 'rh_THJ4': 0.8, 'rh_WRJ1': -0.3}


# ------------------------------------------------------------------------------------- tests
def test_joint_states_flow_at_publish_rate(ros, bridge):
    from diagnostic_msgs.msg import DiagnosticArray
    helpers, client = ros
    _, states = bridge
    diagnostics = client.record(DiagnosticArray, '/diagnostics')
    start = helpers.ros_now()
    helpers.stamped_at(states, start + 1.5)            # 1.5 s of states, on their stamps
    window = [m for _, m in states.snapshot() if start <= helpers.stamp_s(m) < start + 1.5]
    assert len(window) > 0
    msg = window[-1]
    assert len(msg.name) == 24 and all(n.startswith('rh_') for n in msg.name)
    assert len(set(msg.name)) == 24
    assert len(msg.position) == len(msg.velocity) == len(msg.effort) == 24
    stamps = np.array([to_seconds(m.header.stamp) for m in window])
    assert np.all(np.diff(stamps) > 0), 'stamps must increase'
    rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
    assert rate == pytest.approx(250.0, rel=0.1)
    received = len(window) / 1.5                    # of those stamped in 1.5 s, how many arrived here
    assert received == pytest.approx(250.0, rel=0.15)
    # stamped with the ROS time of the state: never after it arrived here, and the promptest
    # arrival within 0.2 s of its stamp (receive times on the ROS clock, this host's)
    offset = time.time() - time.monotonic()
    lags = [r + offset - helpers.stamp_s(m) for r, m in states.snapshot() if start <= helpers.stamp_s(m) < start + 1.5]
    assert min(lags) > -0.005 and min(lags) < 0.2, (min(lags), max(lags))
    assert helpers.wait_until(lambda: diagnostics.count() > 0, 10.0)
    status = [s for m in (diagnostics.last(),) for s in m.status if s.name.startswith('mujoco_bridge')][0]
    values = {kv.key: kv.value for kv in status.values}
    assert float(values['real_time_factor_achieved']) == pytest.approx(1.0, abs=0.05)
    assert float(values['publish_rate_achieved_hz']) == pytest.approx(250.0, rel=0.1)


def test_stepping_thread_runs_at_the_configured_real_time_priority(ros, bridge):
    """thread_priority 50 (config/mujoco_bridge.yaml): exactly one thread of the bridge, the
    stepping thread, runs under SCHED_FIFO at 50; where the user may not set it, the node says
    so and runs at normal priority."""
    proc, _ = bridge
    fifo = []
    for task in Path(f'/proc/{proc.pid}/task').iterdir():
        try:
            if os.sched_getscheduler(int(task.name)) == os.SCHED_FIFO:
                fifo.append(os.sched_getparam(int(task.name)).sched_priority)
        except ProcessLookupError:                  # a thread that just ended
            continue
    if 'the stepping thread runs at normal priority' in proc.output():
        assert fifo == [] and 'rtprio' in proc.output()
    else:
        assert fifo == [50]


def test_bridge_process_uses_no_shared_memory_transport(ros, bridge):
    """Fast DDS over UDP only (shadow_twin.ros.dds): no shared-memory port is mapped, so no
    port health check can stall the process when another one joins (issue 9)."""
    proc, _ = bridge
    maps = Path(f'/proc/{proc.pid}/maps').read_text().splitlines()
    assert not [line for line in maps if '/dev/shm/fastrtps' in line]
    assert 'Fast DDS transport UDPv4 only' in proc.output()


def test_goal_moves_the_sim_to_the_target_and_succeeds(ros, sim):
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    _, states = sim
    feedback = []
    handle = send(ros, make_goal(TARGET, 0.6, goal_tolerance=0.05), feedback=feedback.append)
    assert handle.accepted
    fb = ros[0].final_feedback(feedback, TARGET)      # before the result is asked for (final_feedback says why)
    status, result = result_of(ros, handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    assert result.error_code == FollowJointTrajectory.Result.SUCCESSFUL
    reached = positions(ros[0].current(states), list(TARGET))
    np.testing.assert_allclose(reached, list(TARGET.values()), atol=0.05)
    assert len(feedback) >= 10                     # ~50 Hz over >= 0.6 s
    assert list(fb.joint_names) == list(TARGET)
    np.testing.assert_allclose(np.array(fb.error.positions),
                               np.array(fb.desired.positions) - np.array(fb.actual.positions), atol=1e-12)


def test_bad_goals_are_rejected_and_nothing_moves(ros, sim):
    proc, states = sim
    names = list(states.last().name)
    before = positions(states.last(), names)
    unknown = send(ros, make_goal({'rh_FFJ3': 0.5, 'rh_FFJ9': 0.1}, 0.5))
    outside = send(ros, make_goal({'rh_FFJ3': 2.5}, 0.5))
    assert not unknown.accepted and not outside.accepted
    after = positions(ros[0].stamped_at(states, ros[0].ros_now() + 0.4), names)      # 0.4 s on, on the stamps
    assert np.abs(after - before).max() < 1e-3
    log = proc.output()
    assert 'rh_FFJ9' in log and 'INVALID_JOINTS' in log
    assert 'outside its limits' in log


def test_cancel_mid_way_stops_the_motion(ros, sim):
    from action_msgs.msg import GoalStatus
    _, client = ros
    _, states = sim
    handle = send(ros, make_goal({'rh_FFJ3': 1.5}, 3.0))
    assert handle.accepted
    moving(ros, states, 0.15)
    client.wait_future(handle.cancel_goal_async(), 5.0)
    status, _ = result_of(ros, handle)
    assert status == GoalStatus.STATUS_CANCELED
    canceled = ros[0].ros_now()          # the sim at the cancel's answer and 0.6 s on, on its stamps
    at_cancel = positions(ros[0].stamped_at(states, canceled), ['rh_FFJ3'])[0]
    assert 0.1 < at_cancel < 1.0
    later = positions(ros[0].stamped_at(states, canceled + 0.6), ['rh_FFJ3'])[0]
    assert abs(later - at_cancel) < 0.05           # holds; the goal would be at ~0.9 rad by now
    assert later < 0.8


def test_new_goal_preempts_the_running_one(ros, sim):
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    _, states = sim
    first = send(ros, make_goal({'rh_FFJ3': 1.5}, 3.0))
    assert first.accepted
    moving(ros, states, 0.1)
    second = send(ros, make_goal({'rh_FFJ3': 0.3, 'rh_THJ4': 0.5}, 0.5, goal_tolerance=0.05))
    assert second.accepted
    status, result = result_of(ros, first)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == FollowJointTrajectory.Result.INVALID_GOAL
    assert 'preempted' in result.error_string
    status, result = result_of(ros, second)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    np.testing.assert_allclose(positions(ros[0].current(states), ['rh_FFJ3', 'rh_THJ4']), [0.3, 0.5], atol=0.05)


def test_pause_freezes_and_resume_continues(ros, sim):
    from std_srvs.srv import SetBool
    _, client = ros
    _, states = sim
    handle = send(ros, make_goal({'rh_FFJ3': 1.0}, 1.0))
    assert handle.accepted
    moving(ros, states, 0.1)
    assert client.call(SetBool, '/mujoco_bridge/pause', SetBool.Request(data=True)).success
    paused = len(states.snapshot())

    def repeating() -> bool:
        """A paused bridge publishes its frozen state (stamped now) again and again: the moving
        joint at the same position twice."""
        later = [m for _, m in states.snapshot()[paused:]]
        return len(later) >= 2 and list(later[-1].position) == list(later[-2].position)
    assert ros[0].wait_until(repeating, 10.0), 'the bridge did not pause'
    frozen = positions(states.last(), ['rh_FFJ3'])[0]
    held = ros[0].stamped_at(states, ros[0].ros_now() + 0.3)      # 0.3 s on, on the stamps
    assert positions(held, ['rh_FFJ3'])[0] == frozen
    assert client.call(SetBool, '/mujoco_bridge/pause', SetBool.Request(data=False)).success
    status, result = result_of(ros, handle)
    assert result.error_code == 0, result.error_string
    assert positions(ros[0].current(states), ['rh_FFJ3'])[0] == pytest.approx(1.0, abs=0.05)


def test_goal_stamped_in_the_future_starts_then(ros, sim):
    from action_msgs.msg import GoalStatus
    _, states = sim
    rest = positions(states.last(), ['rh_FFJ3'])[0]
    sent = time.monotonic()
    start = time.time() + 0.6
    handle = send(ros, make_goal({'rh_FFJ3': 0.8}, 0.3, goal_tolerance=0.05, stamp_ns=to_nanoseconds(start)))
    assert handle.accepted
    waiting = ros[0].stamped_at(states, start - 0.15)                        # the state 0.15 s before the start
    assert abs(positions(waiting, ['rh_FFJ3'])[0] - rest) < 1e-3             # still waiting
    status, result = result_of(ros, handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    moved = [m for _, m in states.since(sent) if abs(positions(m, ['rh_FFJ3'])[0] - rest) > 1e-3]
    first = to_seconds(moved[0].header.stamp)
    assert first == pytest.approx(start, abs=0.05)           # the state stamps show it began on time


def clock_rate(received: list) -> float:
    """Sim s per wall s of /clock messages [(monotonic receive s, Clock)] over their span: between
    the promptest arrival of the first 0.3 s and of the last 0.3 s (the least delayed messages,
    received nearest their publication: a loaded PC delivers in bursts)."""
    points = [(r, to_seconds(m.clock)) for r, m in received]
    first = min((p for p in points if p[0] < points[0][0] + 0.3), key=lambda p: p[0] - p[1])
    last = min((p for p in points if p[0] > points[-1][0] - 0.3), key=lambda p: p[0] - p[1])
    return (last[1] - first[1]) / (last[0] - first[0])


def test_publish_clock_mode(ros, tmp_path):
    """/clock carries sim time, joint states are stamped with it, goal stamps are sim time."""
    from action_msgs.msg import GoalStatus
    from rclpy.time import Time
    from rosgraph_msgs.msg import Clock
    helpers, client = ros
    params = yaml.safe_load(BRIDGE_PARAMS.read_text())
    values = params['/**/mujoco_bridge']['ros__parameters']
    values.update(publish_clock=True, joint_states_topic='/clocked/joint_states',
                  action_name='/clocked/follow_joint_trajectory')
    no_display = not (os.environ.get('DISPLAY') or os.environ.get('WAYLAND_DISPLAY'))
    values['viewer'] = no_display           # without a display: must be disabled, not fatal
    params_file = tmp_path / 'params.yaml'
    params_file.write_text(yaml.safe_dump(params))
    clock = client.record(Clock, '/clock')
    proc, states = start_bridge(ros, tmp_path / 'clocked.log', ['-r', '__ns:=/clocked', '--params-file',
                                                               str(params_file)], '/clocked/joint_states')
    try:
        assert helpers.wait_until(lambda: clock.count() > 10, 10.0)
        t0 = time.monotonic()
        assert helpers.wait_until(lambda: clock.since(t0 + 2.0), 10.0)
        assert clock_rate(clock.since(t0)) == pytest.approx(1.0, abs=0.1)    # sim time runs at the wall's pace
        # the joint states are stamped with sim time: recent states' stamps are /clock values (to 1 us)
        clocks = np.array([to_seconds(m.clock) for _, m in clock.snapshot()])
        stamps = [to_seconds(m.header.stamp) for _, m in states.since(t0)][-50:]
        assert any(np.min(np.abs(clocks - t)) < 1e-6 for t in stamps), (stamps[-1], clocks[-1])
        c1 = clock.last().clock
        now_ns = Time.from_msg(c1).nanoseconds
        handle = send(ros, make_goal({'rh_FFJ3': 0.6}, 0.3, goal_tolerance=0.05, stamp_ns=now_ns + 300_000_000),
                      action='/clocked/follow_joint_trajectory')
        assert handle.accepted
        status, result = result_of(ros, handle)
        assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
        if no_display:
            assert 'viewer disabled' in proc.output()
    finally:
        assert proc.stop() == 0, proc.output()


# --------------------------------------------------------------------------------- reload
@pytest.fixture(scope='module')
def reload_bridge(ros, tmp_path_factory):
    """A bridge in namespace /reload (own topics) started on the built-in model;
    yields (process, joint state recorder, model file to point model_path at)."""
    folder = tmp_path_factory.mktemp('reload')
    params = yaml.safe_load(BRIDGE_PARAMS.read_text())
    values = params['/**/mujoco_bridge']['ros__parameters']
    values.update(joint_states_topic='/reload/joint_states', action_name='/reload/follow_joint_trajectory')
    params_file = folder / 'params.yaml'
    params_file.write_text(yaml.safe_dump(params))
    model = folder / 'hand.xml'
    model.write_text(BUILTIN.read_text())
    proc, states = start_bridge(ros, folder / 'bridge.log', ['-r', '__ns:=/reload', '--params-file',
                                                            str(params_file)], '/reload/joint_states')
    yield proc, states, model
    status = proc.stop()
    assert status == 0, f'bridge exited with {status}:\n{proc.output()}'


def reload(ros):
    from std_srvs.srv import Trigger
    return ros[1].call(Trigger, '/reload/mujoco_bridge/reload')


def ffj3_after(ros, states, seconds: float) -> float:
    """Reset, send FFJ3 -> 1.2 rad in 0.4 s, return FFJ3 ``seconds`` after acceptance."""
    from std_srvs.srv import Trigger
    assert ros[1].call(Trigger, '/reload/mujoco_bridge/reset').success
    cell_helpers.wait_at_rest(states)
    handle = send(ros, make_goal({'rh_FFJ3': 1.2}, 0.4), action='/reload/follow_joint_trajectory')
    assert handle.accepted
    value = ros[0].stamped_at(states, ros[0].ros_now() + seconds)           # on the states' stamps
    ros[1].wait_future(handle.cancel_goal_async(), 5.0)
    return positions(value, ['rh_FFJ3'])[0]


def test_reload_with_changed_damping_changes_the_motion(ros, reload_bridge):
    _, client = ros
    proc, states, model = reload_bridge
    results = client.set_parameters('/reload/mujoco_bridge', {'model_path': str(model)})
    assert results[0].successful, results[0].reason
    refused = client.set_parameters('/reload/mujoco_bridge', {'publish_rate': 0.0, 'overrides': 'rh_FFJ1: {dampin: 1}'})
    assert not refused[0].successful and '1..5000' in refused[0].reason
    assert not refused[1].successful and 'unknown attribute' in refused[1].reason
    answer = reload(ros)
    assert answer.success, answer.message
    assert str(model) in answer.message
    default = ffj3_after(ros, states, 0.3)
    model.write_text(BUILTIN.read_text().replace(
        FINGER_DEFAULT, FINGER_DEFAULT.replace('damping="0.05"', 'damping="3.0"')))
    answer = reload(ros)
    assert answer.success, answer.message
    damped = ffj3_after(ros, states, 0.3)
    assert default > 0.5
    assert default - damped > 0.2, (default, damped)


def test_reload_of_a_broken_model_fails_and_the_old_one_keeps_running(ros, reload_bridge):
    proc, states, model = reload_bridge
    good = model.read_text()
    model.write_text(good.replace(*BROKEN))
    try:
        answer = reload(ros)
        assert not answer.success
        assert 'range[0] should be smaller than range[1]' in answer.message     # MuJoCo's text
        assert str(model) in answer.message
        start = ros[0].ros_now()                # 0.5 s of states after the failed reload, on their stamps
        ros[0].stamped_at(states, start + 0.5)
        assert sum(start <= ros[0].stamp_s(m) < start + 0.5 for _, m in states.snapshot()) > 0.5 * 250 * 0.8
        assert proc.alive()
        assert 'reload failed' in proc.output()
    finally:
        model.write_text(good)


# ------------------------------------------------------------------------------ mock hardware
def test_mock_hardware_publishes_joint_states_and_serves_the_real_action(ros, tmp_path):
    from action_msgs.msg import GoalStatus
    from std_srvs.srv import Trigger
    proc, states = start_bridge(ros, tmp_path / 'mock.log',
                                ['-r', '__node:=mock_hardware', '--params-file', str(MOCK_PARAMS)], '/joint_states')
    try:
        msg = states.last()
        assert len(msg.name) == 24 and all(n.startswith('rh_') for n in msg.name)
        assert ros[1].call(Trigger, '/mock_hardware/reset').success
        handle = send(ros, make_goal({'rh_FFJ3': 0.8, 'rh_THJ4': 0.6}, 0.5, goal_tolerance=0.05),
                      action='/rh_trajectory_controller/follow_joint_trajectory')
        assert handle.accepted
        status, result = result_of(ros, handle)
        assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
        np.testing.assert_allclose(positions(ros[0].current(states), ['rh_FFJ3', 'rh_THJ4']), [0.8, 0.6], atol=0.05)
        log = proc.output()
        assert '[mock_hardware]' in log
        assert 'rh_[FMRL]FJ[123].damping x3' in log and '(24 values set)' in log     # overrides applied
    finally:
        assert proc.stop() == 0, proc.output()


def test_a_bridge_follows_another_robots_joint_states(ros, tmp_path):
    """``follow_joint_states_topic``: the bridge's same-named joints track the positions published
    there (names it does not have are ignored), as a stand-in base's arm mirrors the arm stand-in's."""
    from sensor_msgs.msg import JointState
    helpers, client = ros
    proc, states = start_bridge(ros, tmp_path / 'follower.log',
                                ['-r', '__node:=follower', '--params-file', str(BRIDGE_PARAMS),
                                 '-p', 'joint_states_topic:=/follower/joint_states', '-p', 'action_name:=/follower/fjt',
                                 '-p', 'follow_joint_states_topic:=/leader/joint_states'], '/follower/joint_states')
    publisher = client.node.create_publisher(JointState, '/leader/joint_states', 10)
    try:
        assert positions(states.last(), ['rh_FFJ3'])[0] < 0.1

        def followed() -> bool:
            """The leader's state, published again each time (at 50 Hz), has reached the follower."""
            publisher.publish(JointState(name=['rh_FFJ3', 'shoulder_pan_joint'], position=[0.9, 1.0],
                                         velocity=[0.0, 0.0]))
            return positions(states.last(), ['rh_FFJ3'])[0] == pytest.approx(0.9, abs=0.05)
        assert helpers.wait_until(followed, 15.0, interval=0.02), positions(states.last(), ['rh_FFJ3'])
        assert 'following rh_FFJ3 on /leader/joint_states' in proc.output()
    finally:
        client.node.destroy_publisher(publisher)
        assert proc.stop() == 0, proc.output()
