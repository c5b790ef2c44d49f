"""Shadow mode for the hand, integration: the mock hand is driven directly through its own trajectory
controller (not through the twin), and the sim follows the controller's ``controller_state``
(mujoco_bridge/shadow.py, config/mujoco_bridge_shadow.yaml); bad messages on a shadow source move
nothing, and a source that goes silent leaves the sim holding.

Two processes on this run's private ROS domain: the unperturbed mock hand (no overrides: the same
model as the sim, so what differs is the shadowing itself), publishing its JTC's controller state,
and the sim bridge shadowing it and a test topic. The last test stops the mock. Skipped without rclpy.
"""

from __future__ import annotations

import math
import time

from support import cell as cell_helpers
import numpy as np
import pytest

from support.scenarios.cell import HAND_ACTION, START_TIMEOUT

JOINT_RMSE = 0.01          # rad, sim vs mock over the motion (the target)
TEST_SOURCE = '/test_controller/controller_state'
TEST_TRAJECTORY = '/test_controller/joint_trajectory'
TEST_STATES = '/test_robot/joint_states'
GOAL = {'rh_FFJ3': 1.2, 'rh_MFJ3': 0.8, 'rh_RFJ3': 0.9, 'rh_THJ4': 0.6, 'rh_WRJ1': 0.3}


@pytest.fixture(scope='module')
def hand(ros, tmp_path_factory):
    """{'procs': {mock, sim}, 'real': /joint_states recorder, 'sim': /sim/joint_states recorder}."""
    _, client = ros
    folder = tmp_path_factory.mktemp('shadow_hand')
    states = cell_helpers.record_hand_topics(client, depth=3000)
    procs = {'mock': cell_helpers.bridge(folder, 'mock_hardware', 'mock_hardware.yaml', '-p', "overrides:=''"),
             'sim': cell_helpers.bridge(folder, 'mujoco_bridge', 'mujoco_bridge.yaml', '--params-file',
                                        str(cell_helpers.CONFIG / 'mujoco_bridge_shadow.yaml'), '-p',
                                        'shadow.controller_state_topics:=[/rh_trajectory_controller/controller_state,'
                                        f' {TEST_SOURCE}]', '-p', f'shadow.joint_trajectory_topics:=[{TEST_TRAJECTORY}]',
                                        '-p', f'shadow.joint_states_topics:=[{TEST_STATES}]')}
    cell_helpers.wait_started(procs, states.values(), START_TIMEOUT, 'the shadowed hand')
    yield {'procs': procs, **states}
    for proc in procs.values():
        proc.stop()


def series(recorder, names, since: float, until: float):
    """(stamps (N,), positions (N, J)) of ``names`` in the messages stamped in [since, until]."""
    from support.ros import stamp_s
    rows = [(stamp_s(m), m) for _, m in recorder.snapshot()]
    rows = [(t, m) for t, m in rows if since <= t <= until]
    index = {n: k for k, n in enumerate(rows[0][1].name)}
    return (np.array([t for t, _ in rows]),
            np.array([[m.position[index[n]] for n in names] for _, m in rows]))


def positions_at(recorder, names, stamp: float) -> np.ndarray:
    from support.ros import stamped_at
    msg = stamped_at(recorder, stamp)
    return np.array([msg.position[list(msg.name).index(n)] for n in names])


def test_the_sim_follows_the_hand_driven_through_its_own_controller(ros, hand):
    from control_msgs.action import FollowJointTrajectory
    helpers, client = ros
    start = helpers.ros_now()
    handle = client.send_goal(FollowJointTrajectory, HAND_ACTION, helpers.one_point_goal(GOAL, 2.0), timeout=15.0)
    assert handle.accepted
    assert client.wait_future(handle.get_result_async(), 30.0).result.error_code == 0
    end = max(start + 2.5, helpers.ros_now() + 0.3)    # the goal may start late on a loaded PC: until its result
    helpers.stamped_at(hand['real'], end, timeout=30.0)
    helpers.stamped_at(hand['sim'], end, timeout=30.0)
    names = list(GOAL)
    t_real, q_real = series(hand['real'], names, start, end)
    t_sim, q_sim = series(hand['sim'], names, start - 0.1, end + 0.1)
    q_at = np.column_stack([np.interp(t_real, t_sim, q_sim[:, k]) for k in range(len(names))])
    rmse = np.sqrt(np.mean((q_at - q_real) ** 2, axis=0))
    assert q_sim[-1] == pytest.approx(list(GOAL.values()), abs=0.05)      # the sim did move
    assert rmse.max() < JOINT_RMSE, dict(zip(names, rmse))


def test_bad_shadow_messages_move_nothing_and_are_reported_once_per_source(ros, hand):
    """NaN, stamps going back, a reference shorter than its joint names, joints the sim does not
    know: nothing moves (the sim stays on the mock), one warning line per source."""
    from control_msgs.msg import JointTrajectoryControllerState

    from shadow_twin.ros.conversions import time_msg_ns
    helpers, client = ros
    publisher = client.node.create_publisher(JointTrajectoryControllerState, TEST_SOURCE, 10)
    assert cell_helpers.wait_matched(client.node, 10.0, subscribers={TEST_SOURCE: 1})
    names = list(GOAL)
    before = positions_at(hand['sim'], names, helpers.ros_now())

    def state(value, joints=('rh_FFJ3',)):
        msg = JointTrajectoryControllerState()
        msg.header.stamp = client.node.get_clock().now().to_msg()
        msg.joint_names = list(joints)
        msg.reference.positions = [float(value)] * len(joints)
        return msg

    first = state(0.2, ('no_such_joint',))          # a good stamp to go back from
    publisher.publish(first)
    for _ in range(30):
        publisher.publish(state(math.nan))
        back = state(0.1)
        back.header.stamp = time_msg_ns(client.node.get_clock().now().nanoseconds - 2_000_000_000)
        publisher.publish(back)
        short = state(0.1)
        short.reference.positions = []
        publisher.publish(short)
        publisher.publish(state(0.1, ('no_such_joint',)))
        time.sleep(0.01)
    after = positions_at(hand['sim'], names, helpers.ros_now() + 0.3)
    assert after == pytest.approx(before, abs=0.01), dict(zip(names, after - before))
    warnings = [line for line in hand['procs']['sim'].output().splitlines()
                if TEST_SOURCE in line and 'WARN' in line]
    assert any('NaN' in line for line in warnings) or any('goes back' in line for line in warnings), warnings
    assert len([line for line in warnings if 'no_such_joint' in line]) == 1, warnings
    assert 1 < len(warnings) <= 3, warnings          # 120 bad messages: one line per source, not one each


def test_a_source_that_goes_silent_leaves_the_sim_holding(ros, hand):
    """The mock (the source) stops; the sim holds where it was; a known joint of a message that also
    names an unknown one is still followed (on the test source), and holds when that goes silent."""
    from control_msgs.msg import JointTrajectoryControllerState
    helpers, client = ros
    names = list(GOAL)
    assert hand['procs']['mock'].stop() == 0
    silent = helpers.ros_now()
    held = positions_at(hand['sim'], names, silent + 0.2)
    assert positions_at(hand['sim'], names, silent + 1.2) == pytest.approx(held, abs=0.005)
    publisher = client.node.create_publisher(JointTrajectoryControllerState, TEST_SOURCE, 10)
    assert cell_helpers.wait_matched(client.node, 10.0, subscribers={TEST_SOURCE: 1})
    msg = JointTrajectoryControllerState(joint_names=['rh_FFJ3', 'no_such_joint'])
    msg.reference.positions = [0.4, 1.0]
    for _ in range(80):
        msg.header.stamp = client.node.get_clock().now().to_msg()
        publisher.publish(msg)
        time.sleep(0.01)
    quiet = helpers.ros_now()
    assert positions_at(hand['sim'], ['rh_FFJ3'], quiet)[0] == pytest.approx(0.4, abs=0.03)
    assert positions_at(hand['sim'], ['rh_FFJ3'], quiet + 1.0)[0] == pytest.approx(0.4, abs=0.03)


def test_a_controllers_trajectory_topic_and_a_robots_joint_states_are_followed(ros, hand):
    """The other two sources (the mock is stopped by now): a trajectory sent on a controller's
    ~/joint_trajectory runs on its own clock; a robot's joint states are tracked."""
    from sensor_msgs.msg import JointState
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from shadow_twin.ros.conversions import duration_msg
    helpers, client = ros
    trajectories = client.node.create_publisher(JointTrajectory, TEST_TRAJECTORY, 10)
    states = client.node.create_publisher(JointState, TEST_STATES, 10)
    assert cell_helpers.wait_matched(client.node, 10.0, subscribers={TEST_TRAJECTORY: 1, TEST_STATES: 1})
    sent = JointTrajectory(joint_names=['rh_MFJ3'], points=[
        JointTrajectoryPoint(positions=[0.7], velocities=[0.0], time_from_start=duration_msg(0.6))])
    sent.header.stamp = client.node.get_clock().now().to_msg()
    start = helpers.ros_now()
    trajectories.publish(sent)
    for _ in range(80):
        msg = JointState(name=['rh_RFJ3'], position=[0.5])
        msg.header.stamp = client.node.get_clock().now().to_msg()
        states.publish(msg)
        time.sleep(0.01)
    q = positions_at(hand['sim'], ['rh_MFJ3', 'rh_RFJ3'], start + 1.2)
    assert q == pytest.approx([0.7, 0.5], abs=0.03)


def test_a_future_stamp_and_a_silent_source_never_make_the_sim_jump(ros, hand):
    """The issue's adversary, on the test source (the mock is stopped by now): rh_FFJ3 moves at 0.2
    rad/s; amid its states come two stamped 3 s ahead (dropped, one log line, and the good states
    after them are still followed: before, the sim dropped them all for 3 s), then the source is
    silent for 3 s while the joint moves on 0.6 rad. On the sim's stamps: its joint never exceeds
    pi rad/s (before, 20-31 rad/s on resume) and is back on the joint's path within 1 s of good data."""
    from control_msgs.msg import JointTrajectoryControllerState

    from shadow_twin.ros.conversions import time_msg_ns
    helpers, client = ros
    hand['procs']['mock'].stop()                        # (stopped already, unless run alone) a rival source
    publisher = client.node.create_publisher(JointTrajectoryControllerState, TEST_SOURCE, 10)
    assert cell_helpers.wait_matched(client.node, 10.0, subscribers={TEST_SOURCE: 1})
    joint, rate = 'rh_FFJ3', 0.2
    t0 = helpers.ros_now()
    path = lambda t: 0.3 + rate * (t - t0)                                      # noqa: E731

    def publish(ahead: float = 0.0) -> float:
        now_ns = client.node.get_clock().now().nanoseconds
        msg = JointTrajectoryControllerState(joint_names=[joint])
        msg.header.stamp = time_msg_ns(now_ns + int(ahead * 1e9))
        stamp = helpers.stamp_s(msg)
        msg.reference.positions, msg.reference.velocities = [path(stamp)], [rate]
        publisher.publish(msg)
        return stamp

    def stream(seconds: float, glitch: bool = False) -> tuple[float, float, float | None]:
        first, future, next_time = None, None, time.monotonic()
        for k in range(int(round(seconds / 0.01))):
            stamp = publish()
            first = stamp if first is None else first
            if glitch and k == int(round(seconds / 0.02)):                    # mid-stream: from the future
                publish(3.0), publish(3.0)
                future = stamp
            next_time += 0.01
            time.sleep(max(0.0, next_time - time.monotonic()))
        return first, stamp, future

    _, silent, future = stream(1.5, glitch=True)
    time.sleep(3.0)
    resume, end, _ = stream(2.0)
    helpers.stamped_at(hand['sim'], end, timeout=30.0)
    t_sim, q_sim = series(hand['sim'], [joint], t0, end)
    rows = [m for _, m in hand['sim'].snapshot() if t0 <= helpers.stamp_s(m) <= end]
    speeds = np.array([abs(m.velocity[list(m.name).index(joint)]) for m in rows])
    assert speeds.max() <= math.pi, speeds.max()
    on_path = np.abs(q_sim[:, 0] - path(t_sim)) < 0.05        # the finger servo lags 21 mrad at 0.2 rad/s
    after_future = (t_sim > future + 0.3) & (t_sim < silent)
    assert on_path[after_future].all(), 'the good states after a future stamp were not followed'
    assert not on_path[(t_sim > resume) & (t_sim < resume + 0.2)].all()       # it was left behind
    assert on_path[t_sim > resume + 1.0].all(), 'not back on the path within 1 s of good data'
    output = hand['procs']['sim'].output().splitlines()
    lines = [line for line in output if TEST_SOURCE in line and 'ahead of this node' in line]
    assert len(lines) == 1, [line for line in output if 'WARN' in line][-10:]


def test_where_no_command_is_seen_the_base_follows_the_odometrys_twist(ros, tmp_path):
    """A MiR250 sim bridge shadowing /test_mir/odom only: published at 20 Hz with a twist of 0.5 m/s
    for 2 s, then standing, it drives the sim base about 1 m ahead; nothing more once it goes silent.
    Two twists of 10 km/s among them are dropped (the base drives on at 0.5 m/s), one log line."""
    from nav_msgs.msg import Odometry

    from support.scenarios.cell import pose_of
    helpers, client = ros
    odom = client.record(Odometry, '/test_mir_sim/odom', depth=500)
    proc = cell_helpers.bridge(tmp_path, 'test_mir_sim', 'mujoco_bridge.yaml',
                               '-p', 'model_path:=package://shadow_twin/models/mir250.xml',
                               '-p', 'joint_states_topic:=/test_mir_sim/joint_states',
                               '-p', 'action_name:=/test_mir_sim/follow_joint_trajectory',
                               '-p', 'cmd_vel_topic:=/test_mir_sim/cmd_vel', '-p', 'odom_topic:=/test_mir_sim/odom',
                               '-p', 'publish_tf:=false', '-p', 'shadow.odom_topic:=/test_mir/odom')
    try:
        cell_helpers.wait_started({'test_mir_sim': proc}, [odom], START_TIMEOUT, 'the shadowing MiR250 bridge')
        publisher = client.node.create_publisher(Odometry, '/test_mir/odom', 10)
        assert cell_helpers.wait_matched(client.node, 10.0, subscribers={'/test_mir/odom': 1})
        start = pose_of(helpers.current(odom))
        stamps, next_time = [], time.monotonic()
        for k in range(50):
            msg = Odometry()
            msg.header.stamp = client.node.get_clock().now().to_msg()
            msg.pose.pose.orientation.w = 1.0
            msg.twist.twist.linear.x = 0.5 if k < 40 else 0.0
            publisher.publish(msg)
            if k in (10, 20):                  # a glitch: 10 km/s, beyond the MiR250's 2 m/s
                msg.twist.twist.linear.x = 10_000.0
                publisher.publish(msg)
            stamps.append(helpers.stamp_s(msg))
            next_time += 0.05
            time.sleep(max(0.0, next_time - time.monotonic()))
        stopped = helpers.ros_now()
        end = pose_of(helpers.stamped_at(odom, stopped + 1.5))
        # 0.5 m/s from the first message's stamp to the standing one's: about 1 m (2 s at 20 Hz; longer
        # where this process published late on a loaded machine: CI saw 1.13 m)
        driven = 0.5 * (stamps[40] - stamps[0])
        assert end[0] - start[0] == pytest.approx(driven, abs=0.1) and abs(end[1] - start[1]) < 0.02, \
            (end, start, driven)
        assert pose_of(helpers.stamped_at(odom, stopped + 2.5))[0] == pytest.approx(end[0], abs=0.005)
        glitches = [line for line in proc.output().splitlines() if 'beyond the base' in line]
        assert len(glitches) == 1 and '/test_mir/odom' in glitches[0], glitches
    finally:
        assert proc.stop() == 0
