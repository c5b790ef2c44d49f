"""Integration tests of the mujoco_bridge node: real processes over DDS.

Each bridge runs as its own process (``python -m mujoco_bridge.main --ros-args
--params-file ...``) on a ROS domain private to this test run (derived from the
pid); the test talks to it through an rclpy node in this process. Processes are
stopped by their fixtures. Skipped without rclpy or control_msgs.

The clock tests at the end need no ROS.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from mujoco_bridge.timing import RateMeter, SimClock, set_realtime_priority, stall_cause
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
    wait_at_rest(ros, states)
    return proc, states


def wait_at_rest(ros, states, timeout: float = 5.0, speed: float = 2e-3) -> None:
    """Wait until the newest joint state shows every |velocity| below ``speed`` rad/s."""
    helpers, _ = ros

    def resting():
        msg = states.last()
        return msg is not None and max(abs(v) for v in msg.velocity) < speed
    time.sleep(0.05)
    assert helpers.wait_until(resting, timeout), 'joints did not come to rest'


# ------------------------------------------------------------------------------------- helpers
def positions(msg, names) -> np.ndarray:
    index = {n: k for k, n in enumerate(msg.name)}
    return np.array([msg.position[index[n]] for n in names])


def make_goal(targets: dict[str, float], seconds: float, goal_tolerance: float | None = None,
              stamp_ns: int = 0):
    """``ros_helpers.one_point_goal`` (imported once rclpy is known to be there)."""
    import ros_helpers
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
    start = time.monotonic()
    time.sleep(1.5)
    window = [m for r, m in states.since(start)]
    assert len(window) > 0
    msg = window[-1]
    assert len(msg.name) == 24 and all(n.startswith('rh_') for n in msg.name)
    assert len(set(msg.name)) == 24
    assert len(msg.position) == len(msg.velocity) == len(msg.effort) == 24
    stamps = np.array([to_seconds(m.header.stamp) for m in window])
    assert np.all(np.diff(stamps) > 0), 'stamps must increase'
    rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
    assert rate == pytest.approx(250.0, rel=0.1)
    received = len(window) / 1.5
    assert received == pytest.approx(250.0, rel=0.15)
    # stamped with the ROS time of the state: close to now, never in the future
    assert abs(time.time() - stamps[-1]) < 0.2
    assert helpers.wait_until(lambda: diagnostics.count() > 0, 3.0)
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
    status, result = result_of(ros, handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    assert result.error_code == FollowJointTrajectory.Result.SUCCESSFUL
    reached = positions(states.last(), list(TARGET))
    np.testing.assert_allclose(reached, list(TARGET.values()), atol=0.05)
    fb = ros[0].final_feedback(feedback, TARGET)
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
    time.sleep(0.4)
    after = positions(states.last(), names)
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
    time.sleep(0.8)
    client.wait_future(handle.cancel_goal_async(), 5.0)
    status, _ = result_of(ros, handle)
    assert status == GoalStatus.STATUS_CANCELED
    at_cancel = positions(states.last(), ['rh_FFJ3'])[0]
    assert 0.1 < at_cancel < 1.0
    time.sleep(0.6)
    later = positions(states.last(), ['rh_FFJ3'])[0]
    assert abs(later - at_cancel) < 0.05           # holds; the goal would be at ~0.9 rad by now
    assert later < 0.8


def test_new_goal_preempts_the_running_one(ros, sim):
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    _, states = sim
    first = send(ros, make_goal({'rh_FFJ3': 1.5}, 3.0))
    assert first.accepted
    time.sleep(0.4)
    second = send(ros, make_goal({'rh_FFJ3': 0.3, 'rh_THJ4': 0.5}, 0.5, goal_tolerance=0.05))
    assert second.accepted
    status, result = result_of(ros, first)
    assert status == GoalStatus.STATUS_ABORTED
    assert result.error_code == FollowJointTrajectory.Result.INVALID_GOAL
    assert 'preempted' in result.error_string
    status, result = result_of(ros, second)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    np.testing.assert_allclose(positions(states.last(), ['rh_FFJ3', 'rh_THJ4']), [0.3, 0.5], atol=0.05)


def test_pause_freezes_and_resume_continues(ros, sim):
    from std_srvs.srv import SetBool
    _, client = ros
    _, states = sim
    handle = send(ros, make_goal({'rh_FFJ3': 1.0}, 1.0))
    assert handle.accepted
    time.sleep(0.3)
    assert client.call(SetBool, '/mujoco_bridge/pause', SetBool.Request(data=True)).success
    time.sleep(0.05)
    frozen = positions(states.last(), ['rh_FFJ3'])[0]
    time.sleep(0.3)
    assert positions(states.last(), ['rh_FFJ3'])[0] == frozen
    assert client.call(SetBool, '/mujoco_bridge/pause', SetBool.Request(data=False)).success
    status, result = result_of(ros, handle)
    assert result.error_code == 0, result.error_string
    assert positions(states.last(), ['rh_FFJ3'])[0] == pytest.approx(1.0, abs=0.05)


def test_goal_stamped_in_the_future_starts_then(ros, sim):
    from action_msgs.msg import GoalStatus
    _, states = sim
    rest = positions(states.last(), ['rh_FFJ3'])[0]
    sent = time.monotonic()
    start = time.time() + 0.6
    handle = send(ros, make_goal({'rh_FFJ3': 0.8}, 0.3, goal_tolerance=0.05, stamp_ns=to_nanoseconds(start)))
    assert handle.accepted
    time.sleep(max(0.0, start - 0.15 - time.time()))
    assert abs(positions(states.last(), ['rh_FFJ3'])[0] - rest) < 1e-3      # still waiting
    status, result = result_of(ros, handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    moved = [m for _, m in states.since(sent) if abs(positions(m, ['rh_FFJ3'])[0] - rest) > 1e-3]
    first = to_seconds(moved[0].header.stamp)
    assert first == pytest.approx(start, abs=0.05)           # the state stamps show it began on time


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
        assert helpers.wait_until(lambda: clock.count() > 10, 5.0)
        t0, c0 = time.monotonic(), clock.last().clock
        time.sleep(1.0)
        t1, c1 = time.monotonic(), clock.last().clock
        assert (to_seconds(c1) - to_seconds(c0)) / (t1 - t0) == pytest.approx(1.0, abs=0.1)
        stamp = states.last().header.stamp
        assert abs(to_seconds(stamp) - to_seconds(c1)) < 0.05   # sim time
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
    wait_at_rest(ros, states)
    handle = send(ros, make_goal({'rh_FFJ3': 1.2}, 0.4), action='/reload/follow_joint_trajectory')
    assert handle.accepted
    accepted = time.monotonic()
    time.sleep(seconds)
    value = [m for r, m in states.snapshot() if r <= accepted + seconds][-1]
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
        start = time.monotonic()
        time.sleep(0.5)
        assert len(states.since(start)) > 0.5 * 250 * 0.8
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
        np.testing.assert_allclose(positions(states.last(), ['rh_FFJ3', 'rh_THJ4']), [0.8, 0.6], atol=0.05)
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
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            publisher.publish(JointState(name=['rh_FFJ3', 'shoulder_pan_joint'], position=[0.9, 1.0],
                                         velocity=[0.0, 0.0]))
            time.sleep(0.02)
        assert positions(states.last(), ['rh_FFJ3'])[0] == pytest.approx(0.9, abs=0.05)
        assert 'following rh_FFJ3 on /leader/joint_states' in proc.output()
    finally:
        client.node.destroy_publisher(publisher)
        assert proc.stop() == 0, proc.output()


# --------------------------------------------------------------------- stall reporting
@contextlib.contextmanager
def bridge_driven_tick_by_tick(prefix: str):
    """A bridge node in this process on topics under ``/<prefix>``, never spun and with no
    stepping thread: the test calls its ``_tick`` on a made-up monotonic schedule."""
    import rclpy
    from rclpy.parameter import Parameter

    from mujoco_bridge.bridge_node import MujocoBridge
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(os.environ['ROS_DOMAIN_ID']))
    node = None
    try:
        node = MujocoBridge(f'{prefix}_bridge', context=context, parameter_overrides=[
            Parameter('joint_states_topic', value=f'/{prefix}/joint_states'),
            Parameter('action_name', value=f'/{prefix}/follow_joint_trajectory')])
        yield node
    finally:
        if node is not None:
            node.shutdown()
            node.destroy_node()
        rclpy.try_shutdown(context=context)


def status_values(status) -> dict[str, str]:
    return {kv.key: kv.value for kv in status.values}


def test_a_stall_shows_in_the_node_real_time_factor_lateness_and_dropped_time(ros):
    """The node driven tick by tick on a made-up monotonic schedule (no stepping thread, not
    spun): a 333 ms stall (a publish blocked that long) makes the next tick 329 ms late, the lag
    beyond max_catch_up (0.1 s) is dropped, and /diagnostics says so: real-time factor below
    target over the window, the tick lateness, the sim time dropped, level WARN."""
    from diagnostic_msgs.msg import DiagnosticStatus
    with bridge_driven_tick_by_tick('stall_test') as node:
        period = 1.0 / 250.0
        node.clock.anchor(0.0, node.get_clock().now().nanoseconds, node.sim.time)
        node.meter.reset()
        t = 0.0
        for k in range(1, 501):                       # 2 s on schedule
            t = k * period
            node._tick(t, 0.0005)
        steady = node.diagnostic_status()
        values = status_values(steady)
        assert steady.level == DiagnosticStatus.OK
        assert float(values['real_time_factor_achieved']) == pytest.approx(1.0, abs=1e-3)
        assert float(values['max_tick_lateness_ms']) == pytest.approx(0.5)
        assert float(values['dropped_sim_time_s']) == 0.0
        t += 0.333                                    # the stall: the next tick starts 329 ms late
        node._tick(t, 0.329, 0.0008)                  # the process hardly ran meanwhile
        for k in range(1, 251):                       # 1 s on schedule again
            node._tick(t + k * period, 0.0005)
        status = node.diagnostic_status()
        values = status_values(status)
        # the tick before the stall had stepped ahead to its successor's time (+4 ms): the lag is
        # 333 - 4 = 329 ms, 164 whole steps (328 ms), less max_catch_up
        dropped = 0.328 - 0.1
        assert float(values['dropped_sim_time_s']) == pytest.approx(dropped, abs=1e-6)
        assert float(values['dropped_sim_time_window_s']) == pytest.approx(dropped, abs=1e-6)
        assert float(values['max_tick_lateness_ms']) == pytest.approx(329.0)
        assert float(values['max_tick_lateness_process_cpu_ms']) == pytest.approx(0.8)
        span = 3.333 - period                         # first tick to last
        assert float(values['real_time_factor_achieved']) == pytest.approx((span - dropped) / span, abs=2e-3)
        assert status.level == DiagnosticStatus.WARN
        assert 'dropped 228 ms of sim time' in status.message
        node._log_rate()                              # the log line has the same figures


# ------------------------------------------------------------------------- clock (no ROS)
def test_sim_clock_maps_wall_ros_and_sim_time():
    clock = SimClock(0.5)
    clock.anchor(mono=100.0, ros_ns=5_000_000_000, sim_time=2.0)
    assert clock.target(102.0) == pytest.approx(3.0)            # 2 wall s at RTF 0.5
    assert clock.stamp_ns(3.0) == 7_000_000_000
    assert clock.sim_time_at(7_000_000_000) == pytest.approx(3.0)
    clock.anchor(mono=110.0, ros_ns=15_000_000_000, sim_time=4.0, real_time_factor=2.0)
    assert clock.real_time_factor == 2.0 and clock.target(111.0) == pytest.approx(6.0)
    with pytest.raises(ValueError):
        SimClock(0.0)
    with pytest.raises(ValueError):
        clock.anchor(0.0, 0, 0.0, real_time_factor=math.inf)


def test_rate_meter_measures_rtf_and_rate_over_its_window():
    meter = RateMeter(window=1.0)
    assert meter.report() is None
    for k in range(301):                      # 3 s at 100 Hz, sim running at 0.9x
        meter.tick(k * 0.01, k * 0.009)
    report = meter.report()
    assert report.real_time_factor == pytest.approx(0.9)
    assert report.rate == pytest.approx(100.0)
    assert report.window == pytest.approx(1.0, abs=0.011)
    meter.reset()
    assert meter.report() is None


def _in_a_thread(function):
    """``function()`` run in a new thread (scheduling is per thread); returns its result."""
    import threading
    out = []
    thread = threading.Thread(target=lambda: out.append(function()))
    thread.start()
    thread.join()
    return out[0]


def test_set_realtime_priority_sets_sched_fifo_on_the_calling_thread_only():
    def run():
        refused = set_realtime_priority(30)
        return refused, os.sched_getscheduler(0), os.sched_getparam(0).sched_priority
    refused, policy, priority = _in_a_thread(run)
    if refused is None:
        assert (policy, priority) == (os.SCHED_FIFO, 30)
    else:                                           # no rtprio limit for this user
        assert policy == os.SCHED_OTHER and 'rtprio' in refused
    assert os.sched_getscheduler(0) == os.SCHED_OTHER            # this thread is untouched
    assert _in_a_thread(lambda: (set_realtime_priority(0), os.sched_getscheduler(0))) == (None, os.SCHED_OTHER)


def test_set_realtime_priority_explains_a_refusal_and_rejects_bad_priorities(monkeypatch):
    import errno

    def refuse(*_):
        raise PermissionError(errno.EPERM, 'Operation not permitted')
    monkeypatch.setattr(os, 'sched_setscheduler', refuse)
    refused = set_realtime_priority(50)
    assert 'SCHED_FIFO priority 50 refused (Operation not permitted)' in refused
    assert 'rtprio' in refused and 'thread_priority' in refused
    for bad in (-1, 100):
        with pytest.raises(ValueError, match='thread priority must be 0'):
            set_realtime_priority(bad)


def test_a_tick_publishes_first_then_steps_ahead_to_the_next_tick(ros):
    """The node driven tick by tick (not spun): each tick publishes the state of its own
    scheduled time, then steps ahead, so the next tick has nothing to step before publishing."""
    with bridge_driven_tick_by_tick('step_ahead_test') as node:
        period = 1.0 / 250.0
        sim0 = node.sim.time
        node.clock.anchor(0.0, node.get_clock().now().nanoseconds, sim0)
        for k in range(1, 6):
            node._tick(k * period)
            assert node._published_sim_time == pytest.approx(sim0 + k * period, abs=1e-9)
            assert node.sim.time == pytest.approx(sim0 + (k + 1) * period, abs=1e-9)


def test_stall_cause_tells_the_nodes_own_threads_from_the_machine():
    """A stall during which the process ran (the GIL held by another thread) is the node's; one
    during which it hardly ran is the operating system's or the hypervisor's."""
    own = stall_cause(0.040, 0.044, 0.038)
    machine = stall_cause(0.060, 0.064, 0.0008)
    assert 'another thread of this node' in own and '38.0 ms of CPU in the 44 ms' in own
    assert 'not running' in machine and 'hypervisor' in machine and '0.8 ms of CPU' in machine
    assert 'not running' in stall_cause(0.030, 0.0, 0.0)


def test_rate_meter_reports_the_process_cpu_of_its_latest_tick():
    meter = RateMeter(window=5.0)
    meter.tick(0.004, 0.004, lateness=0.001, process_cpu=0.003)
    meter.tick(0.008, 0.008, lateness=0.050, process_cpu=0.0007)
    meter.tick(0.012, 0.012, lateness=0.002, process_cpu=0.004)
    report = meter.report()
    assert report.max_lateness == pytest.approx(0.050)
    assert report.max_lateness_cpu == pytest.approx(0.0007)


def test_rate_meter_counts_a_stall_in_its_real_time_factor():
    """A tick 329 ms late after which 232 ms of sim time were dropped: the window's real-time
    factor falls short by the drop, and the report gives the lateness and the drop, until the
    stall leaves the window."""
    meter = RateMeter(window=5.0)
    sim = 0.0
    for k in range(1, 501):                   # 2 s at 250 Hz on schedule
        sim += 0.004
        meter.tick(k * 0.004, sim, lateness=0.001)
    sim += 0.1                                # a 333 ms stall: max_catch_up stepped, the rest dropped
    meter.tick(2.333, sim, lateness=0.329, dropped=0.233)
    for k in range(1, 251):
        sim += 0.004
        meter.tick(2.333 + k * 0.004, sim, lateness=0.001)
    report = meter.report()
    span = 3.333 - 0.004
    assert report.real_time_factor == pytest.approx((span - 0.233) / span)
    assert report.max_lateness == pytest.approx(0.329)
    assert report.dropped == pytest.approx(0.233)
    assert report.ticks == 750
    for k in range(1, 1501):                  # 6 s later the stall is out of the window
        sim += 0.004
        meter.tick(3.333 + k * 0.004, sim)
    report = meter.report()
    assert report.real_time_factor == pytest.approx(1.0)
    assert (report.max_lateness, report.dropped) == (0.0, 0.0)
