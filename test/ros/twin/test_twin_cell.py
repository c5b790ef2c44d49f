"""Integration tests of the twin for the cell (hand on a UR5 on a MiR250): real processes over DDS.

Five processes on a ROS domain private to this test run: the sim bridge running the cell MJCF
(written to tmp by ``shadow_twin.model.cell.assembly.write_cell_mjcf``), the mock UR
(config/mock_ur.yaml: /joint_states, the scaled joint trajectory controller's action), the
mock hand (config/mock_hardware.yaml with its joint states on /rh/joint_states: the twin merges
two real joint state topics), the mock MiR (config/mock_mir.yaml: TwistStamped on /cmd_vel,
Odometry on /odom) and the twin server with config/twin_cell.yaml. Goals go to
/twin/follow_joint_trajectory: arm and hand joints in ``trajectory``, the base as MoveIt's
planar ``virtual_joint`` in ``multi_dof_trajectory`` (poses in ``odom``). The last two tests
stop the mock UR and the mock MiR. Skipped without rclpy or control_msgs.
"""

from __future__ import annotations

import math
import time

from support import cell as cell_helpers
import numpy as np
import pytest

from support.scenarios.cell import (ARM, BASE_POSITION_TOLERANCE, BASE_YAW_TOLERANCE, HAND, HAND_ACTION,
                                    JOINT_TOLERANCE, START_TIMEOUT, UR_ACTION, base_points, left_arc,
                                    make_goal, pose_error, pose_of, positions, result_of, send, straight,
                                    wait_base_rest, wait_joints_rest, wait_quiet)

#: End pose errors of the base goals, for the report: {goal: {side: (position m, yaw rad)}}.
END_ERRORS: dict = {}


# ------------------------------------------------------------------------------------ helpers
@pytest.fixture(scope='module')
def topics(ros):
    """Recorders: arm (/joint_states), hand (/rh/joint_states), sim (/sim/joint_states), odom,
    sim_odom, cmd_vel, sim_cmd_vel, and the action status of the UR and hand controllers (deep
    queues: states are judged on their stamps, and a loaded PC takes them in bursts)."""
    from action_msgs.msg import GoalStatusArray
    from geometry_msgs.msg import TwistStamped
    _, client = ros
    return cell_helpers.record_cell_topics(client, extra={
        'cmd_vel': (TwistStamped, '/cmd_vel', 100),
        'sim_cmd_vel': (TwistStamped, '/sim/cmd_vel', 100),
        'ur_status': (GoalStatusArray, f'{UR_ACTION}/_action/status', 50),
        'hand_status': (GoalStatusArray, f'{HAND_ACTION}/_action/status', 50)})


@pytest.fixture(scope='module')
def cell(ros, topics, tmp_path_factory):
    """The five processes, the twin's base publishers matched too; yields {name: process}."""
    _, client = ros
    procs = cell_helpers.start_twin_cell(client, tmp_path_factory.mktemp('twin_cell'), topics, START_TIMEOUT,
                                         publishers={'/cmd_vel': 1, '/sim/cmd_vel': 1})
    yield procs
    cell_helpers.stop_all(procs)
    if END_ERRORS:
        print('\nbase end pose errors (position m, yaw rad):', END_ERRORS)


# ------------------------------------------------------------------------------------- tests
def test_arm_and_hand_goal_reaches_the_target_on_robot_and_sim(ros, cell, topics):
    from action_msgs.msg import GoalStatus
    helpers, client = ros
    target = {**ARM, **HAND}
    feedback = []
    handle = send(client, make_goal(target, 2.0), feedback=feedback.append)
    assert handle.accepted, cell['twin'].output()[-3000:]
    status, result = result_of(client, handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    assert 'ur_arm' in result.error_string and 'hand' in result.error_string, result.error_string
    np.testing.assert_allclose(positions(helpers.current(topics['arm']), list(ARM)), list(ARM.values()),
                               atol=JOINT_TOLERANCE)
    np.testing.assert_allclose(positions(helpers.current(topics['hand']), list(HAND)), list(HAND.values()),
                               atol=JOINT_TOLERANCE)
    np.testing.assert_allclose(positions(helpers.current(topics['sim']), list(target)), list(target.values()),
                               atol=JOINT_TOLERANCE)
    # feedback: joints of two real sources merged in one "actual"
    fb = feedback[-1].feedback
    assert list(fb.joint_names) == list(target) and len(fb.actual.positions) == len(target)
    assert not fb.multi_dof_joint_names
    # the arm's speed scaling (mock UR: 100 %) is followed and logged
    assert 'arm speed scaling 100 %' in cell['twin'].output()


@pytest.mark.parametrize('name, path, duration', [('straight 1 m in 5 s', straight(1.0), 5.0),
                                                  ('quarter arc r 1 m in 8 s', left_arc(1.0, math.pi / 2), 8.0)])
def test_base_goal_ends_at_the_target_on_mir_and_sim(ros, cell, topics, name, path, duration):
    from action_msgs.msg import GoalStatus
    helpers, client = ros
    odoms = {'mock': topics['odom'], 'sim': topics['sim_odom']}
    wait_base_rest(helpers, odoms.values())
    start = pose_of(odoms['mock'].last())
    points = base_points(start, path, duration)
    target = points[-1][1:4]
    feedback = []
    handle = send(client, make_goal(base=points), feedback=feedback.append)
    assert handle.accepted, cell['twin'].output()[-3000:]
    status, result = result_of(client, handle, timeout=duration + 15.0)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string
    assert 'base' in result.error_string and 'sim base' in result.error_string, result.error_string
    wait_base_rest(helpers, odoms.values())
    errors = {side: pose_error(pose_of(o.last()), target) for side, o in odoms.items()}
    END_ERRORS[name] = {side: (round(float(e[0]), 4), round(float(e[1]), 4)) for side, e in errors.items()}
    print(f'\n{name}: end pose errors (m, rad): {END_ERRORS[name]}')
    for side, (position, yaw) in errors.items():
        assert position < BASE_POSITION_TOLERANCE and yaw < BASE_YAW_TOLERANCE, (side, errors)
    # feedback carries the base as MoveIt reads it; error = desired - actual
    fb = feedback[-1].feedback
    assert list(fb.multi_dof_joint_names) == ['virtual_joint'] and not fb.joint_names
    desired, actual, error = (p.transforms[0].translation for p in (fb.multi_dof_desired, fb.multi_dof_actual,
                                                                     fb.multi_dof_error))
    # the last feedback may come from the last control period before the end (the goal succeeds at
    # the first tick after it), where the reference, slowing to rest, is within a millimetre of it
    assert (desired.x, desired.y) == pytest.approx(target[:2], abs=1e-3)
    assert error.x == pytest.approx(desired.x - actual.x, abs=1e-9)
    assert len(feedback) > 20 * duration


def bad_base_goals(start) -> dict:
    x, y, yaw = start
    good = [(0.0, x, y, yaw), (2.0, x + 0.3, y, yaw)]
    nan = [list(p) for p in good]
    nan[1][1] = float('nan')
    return {'NaN': make_goal(base=nan),
            'non-increasing time': make_goal(base=[good[0], (1.0, x + 0.1, y, yaw), (1.0, x + 0.2, y, yaw)]),
            'speed over 2 m/s': make_goal(base=[(0.0, x, y, yaw), (0.4, x + 1.0, y, yaw)]),
            'frame not odom': make_goal(base=good, frame='map'),
            'unknown joint': make_goal(base=good, base_joint='base_joint')}


def test_bad_base_goals_are_rejected_and_nothing_moves(ros, cell, topics):
    helpers, client = ros
    odoms = [topics['odom'], topics['sim_odom']]
    commands = [topics['cmd_vel'], topics['sim_cmd_vel']]
    wait_base_rest(helpers, odoms)
    wait_quiet(helpers, commands)
    before = [pose_of(o.last()) for o in odoms]
    since = time.monotonic()
    for name, goal in bad_base_goals(before[0]).items():
        handle = send(client, goal)
        assert not handle.accepted, name
    # with arm joints too: the whole goal is rejected, the arm does not move
    arm_before = positions(topics['arm'].last(), list(ARM))
    handle = send(client, make_goal({'shoulder_pan_joint': 0.0}, 1.0, base=[(0.0, *before[0]), (0.2, 5.0, 0.0, 0.0)]))
    assert not handle.accepted
    later = helpers.ros_now() + 0.5        # 0.5 s on, on the robots' and the sim's stamps: nothing moved
    arm_later = positions(helpers.stamped_at(topics['arm'], later), list(ARM))
    for odom, pose in zip(odoms, before):
        error = pose_error(pose_of(helpers.stamped_at(odom, later)), pose)
        assert error[0] < 1e-3 and error[1] < 1e-3, error
    assert not topics['cmd_vel'].since(since) and not topics['sim_cmd_vel'].since(since), 'a TwistStamped was sent'
    np.testing.assert_allclose(arm_later, arm_before, atol=2e-3)
    log = cell['twin'].output()
    for reason in ('is nan (NaN or inf)', 'not strictly increasing', 'above the limit 2 m/s', "it must be in 'odom'",
                   "the base follows only the planar joint 'virtual_joint'"):
        assert reason in log, reason


def test_cancel_stops_arm_hand_and_both_bases(ros, cell, topics):
    from action_msgs.msg import GoalStatus
    helpers, client = ros
    odoms = [topics['odom'], topics['sim_odom']]
    wait_base_rest(helpers, odoms)
    start = pose_of(topics['odom'].last())
    joints = {'shoulder_pan_joint': -0.3, 'elbow_joint': 1.2, 'rh_FFJ3': 0.2, 'rh_MFJ3': 0.2}
    topics['ur_status'].clear()
    topics['hand_status'].clear()
    handle = send(client, make_goal(joints, 4.0, base=base_points(start, straight(1.0), 5.0)))
    assert handle.accepted, cell['twin'].output()[-3000:]
    assert helpers.wait_until(lambda: all(abs(o.last().twist.twist.linear.x) > 0.1 for o in odoms), 4.0), \
        'the bases did not start moving'
    canceled_at = helpers.ros_now()
    client.wait_future(handle.cancel_goal_async(), 5.0)
    status, result = result_of(client, handle)
    assert status == GoalStatus.STATUS_CANCELED, result.error_string
    for part in ('ur_arm', 'hand', 'sim', 'base', 'sim base'):
        assert part in result.error_string, result.error_string
    # both bases stopped within 1 s of the cancel: judged on the odometry stamped 1 s after it,
    # however late this (loaded) process receives it
    after = [helpers.stamped_at(o, canceled_at + 1.0) for o in odoms]
    assert all(abs(m.twist.twist.linear.x) < 0.02 and abs(m.twist.twist.angular.z) < 0.02 for m in after), \
        [(m.twist.twist.linear.x, m.twist.twist.angular.z) for m in after]
    # the arm and hand controllers' goals were canceled
    for key in ('ur_status', 'hand_status'):
        assert helpers.wait_until(lambda: any(s.status == GoalStatus.STATUS_CANCELED
                                              for m in [topics[key].last()] if m is not None for s in m.status_list),
                                  3.0), f'{key}: {topics[key].last()}'
    # and nothing is sent to the bases once they have stopped
    wait_quiet(helpers, [topics['cmd_vel'], topics['sim_cmd_vel']])


def test_a_joint_goal_preempting_a_base_goal_stops_both_bases(ros, cell, topics):
    from action_msgs.msg import GoalStatus
    helpers, client = ros
    odoms = [topics['odom'], topics['sim_odom']]
    wait_base_rest(helpers, odoms)
    start = pose_of(topics['odom'].last())
    first = send(client, make_goal(base=base_points(start, left_arc(1.0, -math.pi / 4), 5.0)))
    assert first.accepted, cell['twin'].output()[-3000:]
    assert helpers.wait_until(lambda: all(abs(o.last().twist.twist.linear.x) > 0.1 for o in odoms), 4.0), \
        'the bases did not start moving'
    second = send(client, make_goal({'rh_FFJ3': 0.6}, 0.5))
    assert second.accepted, cell['twin'].output()[-3000:]
    preempted_at = helpers.ros_now()
    status, result = result_of(client, first)
    assert status == GoalStatus.STATUS_ABORTED and 'preempted by a new goal' in result.error_string, \
        result.error_string
    # both bases stopped within 1 s of the preemption, on the odometry stamped then
    after = [helpers.stamped_at(o, preempted_at + 1.0) for o in odoms]
    assert all(abs(m.twist.twist.linear.x) < 0.02 and abs(m.twist.twist.angular.z) < 0.02 for m in after), \
        [(m.twist.twist.linear.x, m.twist.twist.angular.z) for m in after]
    status, result = result_of(client, second)
    assert status == GoalStatus.STATUS_SUCCEEDED, result.error_string


def test_arm_driver_missing_rejects_an_arm_goal_and_nothing_moves(ros, cell, topics):
    from action_msgs.msg import GoalStatus
    helpers, client = ros
    assert cell['ur'].stop() == 0
    assert helpers.wait_until(lambda: not topics['arm'].since(time.monotonic() - 0.5), 10.0)
    wait_joints_rest(helpers, [topics['hand'], topics['sim']], {*ARM, *HAND})
    sim_before = positions(topics['sim'].last(), list(ARM))
    hand_before = positions(topics['hand'].last(), list(HAND))
    since = time.monotonic()
    handle = send(client, make_goal({**ARM, 'rh_FFJ3': 0.3}, 1.0))
    assert not handle.accepted
    log = cell['twin'].output()
    assert f'ur_arm controller ({UR_ACTION}) is gone: its joint states stopped' in log, log[-3000:]
    assert 'from /joint_states' in log
    later = helpers.ros_now() + 0.5        # 0.5 s on, on the sim's and the hand's stamps: nothing moved
    np.testing.assert_allclose(positions(helpers.stamped_at(topics['sim'], later), list(ARM)), sim_before, atol=2e-3)
    np.testing.assert_allclose(positions(helpers.stamped_at(topics['hand'], later), list(HAND)), hand_before,
                               atol=2e-3)
    assert not topics['cmd_vel'].since(since) and not topics['sim_cmd_vel'].since(since)
    # the hand alone still goes (the hand driver is there)
    handle = send(client, make_goal({'rh_FFJ3': 0.4}, 0.5))
    assert handle.accepted, cell['twin'].output()[-3000:]
    assert result_of(client, handle)[0] == GoalStatus.STATUS_SUCCEEDED


def test_mir_bridge_missing_rejects_a_base_goal(ros, cell, topics):
    helpers, client = ros
    assert cell['mir'].stop() == 0
    assert helpers.wait_until(lambda: not topics['odom'].since(time.monotonic() - 0.7), 10.0)
    sim_before = pose_of(topics['sim_odom'].last())
    since = time.monotonic()
    # point 0 at t = 0 is 0.3 m from the bases: judged on the stale odometry it would be refused for the
    # start tolerance; the twin names the missing base first
    aside = (sim_before[0] + 0.3 * math.cos(sim_before[2]), sim_before[1] + 0.3 * math.sin(sim_before[2]), sim_before[2])
    earlier = len(cell['twin'].output())
    handle = send(client, make_goal(base=base_points(aside, straight(0.5), 3.0)))
    assert not handle.accepted
    log = cell['twin'].output()[earlier:]
    assert 'real base (TwistStamped on /cmd_vel, odometry on /odom) is missing: no fresh odometry on /odom' in log, \
        log[-3000:]
    assert 'start tolerance' not in log and 're-anchored' not in log, log[-3000:]
    later = helpers.stamped_at(topics['sim_odom'], helpers.ros_now() + 0.5)     # 0.5 s on: the sim base stayed
    assert pose_error(pose_of(later), sim_before)[0] < 1e-3
    assert not topics['sim_cmd_vel'].since(since)
