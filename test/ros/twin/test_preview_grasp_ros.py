"""Integration test of the grasp preview (issue 37) with real processes over DDS: the mock hand and the
sim bridge with config/scene_hand.yaml's can (the sim publishing its controller_state), the twin (mode
both: preview enforce) with the scene, the sim's setpoints and a preview config that turns the grasp
check on (10 mm) and declares the can held (it stands on its stand in this scene: a can the hand carries would be held without it; the hand
alone cannot lift it). The fingers close on the can through the twin; a goal that would open the hand
is aborted before its start with the can's name, its slide and the time, and nothing moves; a goal that
keeps the grasp passes the preview and runs, its prediction reporting the can's slide; a malformed
object pose on the sim's topic is dropped and the twin lives. Skipped without rclpy or control_msgs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from support import cell as cell_helpers
from support.scenarios.cell import positions, result_of

REPO = Path(__file__).resolve().parents[3]
SCENE = REPO / 'config' / 'scene_hand.yaml'
TWIN_ACTION = '/twin/follow_joint_trajectory'
START_TIMEOUT = 30.0


#: A light grasp of the hand scene's can on its stand (benchmarks/contacts.py's): the firm one of
#: shadow_twin.control.pick drives a finger that misses this can into its J1 stop, which the preview refuses.
LIGHT = {**{f'rh_{f}J{j}': q for f in ('FF', 'MF', 'RF', 'LF') for j, q in ((3, 1.0), (2, 0.8), (1, 0.6))},
         'rh_THJ5': 0.4, 'rh_THJ4': 1.1, 'rh_THJ2': 0.3, 'rh_THJ1': 0.5}
OPEN = dict.fromkeys(LIGHT, 0.0)


def send_and_wait(client, targets, seconds):
    from control_msgs.action import FollowJointTrajectory
    from support import ros as ros_helpers
    goal = ros_helpers.one_point_goal(targets, seconds, goal_tolerance=2.0)    # fingers stop on the can
    handle = client.send_goal(FollowJointTrajectory, TWIN_ACTION, goal, timeout=15.0)
    assert handle.accepted
    return result_of(client, handle, 20.0)


@pytest.fixture(scope='module')
def rec(ros):
    from std_msgs.msg import String
    _, client = ros
    return cell_helpers.record_hand_topics(client, depth=1000, extra={'preview': (String, '/twin/preview_result', 100)})


@pytest.fixture(scope='module')
def procs(ros, rec, tmp_path_factory):
    _, client = ros
    folder = tmp_path_factory.mktemp('grasp')
    scene = ['-p', f'scene_file:={SCENE}']
    config = yaml.safe_load((REPO / 'config' / 'preview.yaml').read_text())
    config['preview']['grasp'].update(held=['can'], slide_limit=0.01)     # on (off by default), the can held
    (folder / 'preview.yaml').write_text(yaml.safe_dump(config))
    procs = {'mock': cell_helpers.bridge(folder, 'mock_hardware', 'mock_hardware.yaml', *scene),
             'sim': cell_helpers.bridge(folder, 'mujoco_bridge', 'mujoco_bridge.yaml', *scene,
                                        '-p', 'controller_state_rate:=50.0'),
             'twin': cell_helpers.twin_server(folder, 'twin.yaml', *scene, '-p', f'preview_config:={folder / "preview.yaml"}',
                                              '-p', 'preview_setpoints_topic:=/sim/controller_state')}
    cell_helpers.wait_started(procs, [rec['real'], rec['sim']], START_TIMEOUT, 'the hand with its can')
    cell_helpers.wait_twin_ready(client, procs, START_TIMEOUT, subscribers={
        '/joint_states': 2, '/sim/joint_states': 2, '/mujoco_bridge/objects/can/pose': 1, '/sim/controller_state': 1})
    yield procs
    cell_helpers.stop_all(procs)


def test_a_goal_that_lets_go_of_the_held_can_is_refused_and_one_that_keeps_it_runs(ros, procs, rec):
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    helpers, client = ros
    status, answer = send_and_wait(client, LIGHT, 1.0)           # close on the can
    assert status == GoalStatus.STATUS_SUCCEEDED, (answer.error_string, procs['twin'].output()[-3000:])
    helpers.stamped_at(rec['real'], helpers.ros_now() + 0.5)             # settled in the grip
    names = list(LIGHT)
    before = {side: positions(helpers.current(rec[side]), names) for side in ('real', 'sim')}
    count = rec['preview'].count()
    status, answer = send_and_wait(client, OPEN, 0.5)
    refused = helpers.ros_now()
    assert status == GoalStatus.STATUS_ABORTED and answer.error_code == FollowJointTrajectory.Result.INVALID_GOAL
    assert answer.error_string.startswith("predicted to fail: 'can' slides "), answer.error_string
    assert 'leaves the hand at t = ' in answer.error_string
    for side in ('real', 'sim'):                                         # nothing moved: the fingers still closed
        after = positions(helpers.stamped_at(rec[side], refused + 0.3), names)
        assert np.abs(after - before[side]).max() < 0.02, side
    assert helpers.wait_until(lambda: rec['preview'].count() > count, 5.0)
    first = json.loads(rec['preview'].last().data)['first_failure']
    assert first['kind'] == 'grasp' and first['subject'] == 'can'
    count = rec['preview'].count()
    status, answer = send_and_wait(client, LIGHT, 0.5)          # the grasp kept: it runs
    assert status == GoalStatus.STATUS_SUCCEEDED, answer.error_string
    assert helpers.wait_until(lambda: rec['preview'].count() > count, 5.0)
    result = json.loads(rec['preview'].last().data)
    assert result['ok'] and 0.0 <= result['grasp_slides']['can'] < 0.01


def test_a_malformed_object_pose_or_setpoint_message_is_dropped_and_the_twin_lives(ros, procs):
    from control_msgs.msg import JointTrajectoryControllerState
    from geometry_msgs.msg import PoseStamped
    helpers, client = ros
    publisher = client.node.create_publisher(PoseStamped, '/mujoco_bridge/objects/can/pose', 10)
    bad = PoseStamped()
    bad.header.frame_id = 'world'
    bad.pose.position.x = float('nan')
    bad.pose.orientation.w = 1.0
    assert helpers.wait_until(lambda: publisher.get_subscription_count() >= 1, 5.0)   # the twin's

    def said() -> bool:
        publisher.publish(bad)
        out = procs['twin'].output()
        return '/mujoco_bridge/objects/can/pose' in out and 'not finite' in out
    assert helpers.wait_until(said, 5.0), procs['twin'].output()[-2000:]
    setpoints = client.node.create_publisher(JointTrajectoryControllerState, '/sim/controller_state', 10)
    uneven = JointTrajectoryControllerState(joint_names=['rh_FFJ3', 'rh_FFJ2'])
    uneven.reference.positions = [0.5]
    assert helpers.wait_until(lambda: setpoints.get_subscription_count() >= 1, 5.0)

    def dropped() -> bool:
        setpoints.publish(uneven)
        return '2 joint names but 1 reference positions' in procs['twin'].output()
    assert helpers.wait_until(dropped, 5.0), procs['twin'].output()[-2000:]
    assert procs['twin'].alive()
    client.node.destroy_publisher(publisher)
    client.node.destroy_publisher(setpoints)
