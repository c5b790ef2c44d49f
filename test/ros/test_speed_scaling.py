"""The UR's speed scaling in the twin: a UR stand-in (config/mock_ur.yaml, its speed slider at
50 %) publishes it, and a sim bridge on the UR5 that follows the topic
(``speed_scaling_input_topic``, as config/mujoco_bridge.yaml sets it) runs its arm trajectories half as fast, as ur_robot_driver's scaled joint trajectory controller
does on the robot. Real processes over DDS, private domain."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0


def test_the_sim_follows_the_robots_speed_scaling(ros, tmp_path):
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64
    helpers, client = ros
    scaling = client.record(Float64, '/speed_scaling_state_broadcaster/speed_scaling')
    states = client.record(JointState, '/ur_sim/joint_states')
    mock = helpers.NodeProcess('mujoco_bridge.main', ['-r', '__node:=mock_ur', '--params-file',
                                                      str(REPO / 'config' / 'mock_ur.yaml'), '-p', 'speed_scaling:=50.0',
                                                      '-p', 'joint_states_topic:=/mock_ur/joint_states'],
                               tmp_path / 'mock_ur.log')
    sim = helpers.NodeProcess('mujoco_bridge.main', ['-r', '__node:=ur_sim', '--params-file',
                                                     str(REPO / 'config' / 'mujoco_bridge.yaml'),
                                                     '-p', 'model_path:=package://shadow_twin/models/ur5.xml',
                                                     '-p', 'gains_file:=package://shadow_twin/config/controllers/ur5.yaml',
                                                     '-p', 'joint_states_topic:=/ur_sim/joint_states',
                                                     '-p', 'action_name:=/ur_sim/follow_joint_trajectory',
                                                     '-p', 'speed_scaling_input_topic:='
                                                           '/speed_scaling_state_broadcaster/speed_scaling'],
                              tmp_path / 'ur_sim.log')
    try:
        assert helpers.wait_until(lambda: scaling.count() > 0 and states.count() > 0, START_TIMEOUT), \
            mock.output()[-2000:] + sim.output()[-2000:]
        assert scaling.last().data == 50.0
        assert helpers.wait_until(lambda: 'speed scaling 50 %' in sim.output(), 5.0), sim.output()[-2000:]
        goal = helpers.one_point_goal({'shoulder_pan_joint': 0.5}, 1.0, goal_tolerance=0.02)
        sent = time.monotonic()
        handle = client.send_goal(FollowJointTrajectory, '/ur_sim/follow_joint_trajectory', goal, timeout=10.0)
        assert handle.accepted
        response = client.wait_future(handle.get_result_async(), 10.0)
        took = time.monotonic() - sent
        assert response.status == GoalStatus.STATUS_SUCCEEDED, response.result.error_string
        assert 1.8 < took < 3.0, took              # 1 s of trajectory at 50 %: 2 s
        pan = states.last().position[list(states.last().name).index('shoulder_pan_joint')]
        assert pan == pytest.approx(0.5, abs=0.02)
    finally:
        assert sim.stop() == 0, sim.output()[-2000:]
        assert mock.stop() == 0, mock.output()[-2000:]
