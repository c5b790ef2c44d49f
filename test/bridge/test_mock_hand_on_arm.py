"""The cell's mock hand on the mock UR5's arm (issue 37): a bridge running the cell reduced to the arm and
the hand (``write_hand_stand_in_mjcf``), its arm following another robot's joint states
(``follow_joint_states_topic``) and publishing the hand's joints alone (``published_joints``), as
``shadow-twin up --cell --mock-hardware --scene`` starts it. The hand feels the arm turn: with the
UR5's wrist 1 turned a quarter turn, the wrist's gravity load moves from WRJ1 to WRJ2 in the published
efforts (0.52 N m on WRJ1 at the arm's zero pose; 0.78 N m on WRJ2 turned: the model's gravity torques),
which a hand fixed in the world never shows. A glob matching no joint, or a captured body the model
lacks, stops the bridge at start with one line. Real processes on this run's ROS domain."""

from __future__ import annotations

from pathlib import Path

import pytest

from shadow_twin.common.paths import config_path
from shadow_twin.model.mock_models import write_hand_stand_in_mjcf

ARM = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint', 'wrist_2_joint', 'wrist_3_joint']
START_TIMEOUT = 30.0


def bridge_args(model: Path, *extra: str) -> list[str]:
    return ['-r', '__node:=mock_hand_on_arm', '--params-file', str(config_path('mock_hardware.yaml')),
            '-p', f'model_path:={model}', '-p', f'gains_file:={config_path("controllers", "cell.yaml")}',
            '-p', 'joint_states_topic:=/arm_test/rh/joint_states', '-p', 'action_name:=/arm_test/hand_fjt',
            '-p', 'follow_joint_states_topic:=/arm_test/ur/joint_states', '-p', 'object_pose_rate:=0.0', *extra]


def efforts(msg, names) -> list[float]:
    index = {n: k for k, n in enumerate(msg.name)}
    return [msg.effort[index[n]] for n in names]


def test_the_mock_hand_publishes_its_joints_and_feels_the_arm_turn(ros, tmp_path):
    from sensor_msgs.msg import JointState
    helpers, client = ros
    model = write_hand_stand_in_mjcf(None, tmp_path / 'mock_hand.xml')
    states = client.record(JointState, '/arm_test/rh/joint_states')
    proc = helpers.NodeProcess('mujoco_bridge.main', bridge_args(model, '-p', "published_joints:=['rh_*']"),
                               tmp_path / 'mock_hand.log')
    publisher = client.node.create_publisher(JointState, '/arm_test/ur/joint_states', 10)
    try:
        assert helpers.wait_until(lambda: states.count() > 0 or not proc.alive(), START_TIMEOUT), proc.output()
        names = list(states.last().name)
        assert len(names) == 24 and all(n.startswith('rh_') for n in names), names     # the hand's alone
        assert 'rh_WRJ1' in names and not set(ARM) & set(names)

        def carries(wrist_1: float, loaded: int, load: float) -> bool:
            """Publish the arm's pose with ``wrist_1`` rad until the wrist joint ``loaded`` (0: WRJ1, 1: WRJ2)
            carries ``load`` N m (+-0.1) and the other less than 0.15 N m: the hand under the turned arm."""
            def settled() -> bool:
                publisher.publish(JointState(name=ARM, position=[0.0, 0.0, 0.0, wrist_1, 0.0, 0.0], velocity=[0.0] * 6))
                wrist = [abs(e) for e in efforts(states.last(), ['rh_WRJ1', 'rh_WRJ2'])]
                return abs(wrist[loaded] - load) < 0.1 and wrist[1 - loaded] < 0.15
            return helpers.wait_until(settled, 20.0, interval=0.05)

        assert carries(0.0, 0, 0.52), efforts(states.last(), ['rh_WRJ1', 'rh_WRJ2'])      # the arm at zero
        assert carries(1.57, 1, 0.78), efforts(states.last(), ['rh_WRJ1', 'rh_WRJ2'])     # wrist 1 turned
        assert 'following shoulder_pan_joint' in proc.output()
    finally:
        client.node.destroy_publisher(publisher)
        assert proc.stop() == 0, proc.output()


@pytest.mark.parametrize('parameter, message', [
    ("published_joints:=['lh_*']", "published_joints ['lh_*'] match no joint"),
    ("object_pose_bodies:=['lh_palm']", "object_pose_bodies: the model has no body 'lh_palm'")])
def test_a_name_matching_nothing_stops_the_bridge_with_one_line(ros, tmp_path, parameter, message):
    helpers, _ = ros
    model = write_hand_stand_in_mjcf(None, tmp_path / 'mock_hand.xml')
    extra = ('-p', parameter) if parameter.startswith('published') else ('-p', parameter, '-p', 'object_pose_rate:=100.0')
    proc = helpers.NodeProcess('mujoco_bridge.main', bridge_args(model, *extra), tmp_path / 'bad.log')
    assert helpers.wait_until(lambda: not proc.alive(), START_TIMEOUT), proc.output()
    assert proc.proc.returncode != 0
    lines = [line for line in proc.output().splitlines() if message in line]
    assert len(lines) == 1, proc.output()
