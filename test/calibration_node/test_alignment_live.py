"""Alignment of a live recording by its motion onset alone (issue 10, item 1).

The mock hardware (the bridge run as the robot: ``mujoco_bridge -r __node:=mock_hardware``)
follows a FollowJointTrajectory goal stamped with its start, whose point 0 is away from the
rest pose: the joint trajectory controller moves there from t = 0. Its ``/joint_states``,
recorded in this process, are aligned WITHOUT the start; the placement must land within
20 ms of the stamp (the bridge honours stamped starts, and stamps its joint states on the
same clock).
"""

from __future__ import annotations

import time
from pathlib import Path

from support import cell as cell_helpers
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / 'config'
START_TIMEOUT = 30.0
ACTION = '/rh_trajectory_controller/follow_joint_trajectory'
# Joints the mock's overrides leave alone (config/mock_hardware.yaml changes J1-J3 of the fingers):
# there the default model has the mock's physics.
JOINTS = ['rh_FFJ4', 'rh_MFJ4', 'rh_WRJ2']
TIMES = [0.6, 1.2, 1.8]          # s, time_from_start
POSITIONS = [[0.30, -0.30, -0.35],   # point 0, away from the rest pose (0 rad)
             [-0.20, 0.20, 0.10],
             [0.05, -0.05, -0.20]]
PLACEMENT_S = 0.020
REST_BEFORE_S = 0.8   # recorded before the stamped start


@pytest.fixture(scope='module')
def mock(ros, tmp_path_factory):
    """The mock hardware process and a recorder (depth 1000) of its /joint_states."""
    from control_msgs.action import FollowJointTrajectory
    from sensor_msgs.msg import JointState
    _, client = ros
    states = client.record(JointState, '/joint_states', depth=1000)
    proc = cell_helpers.bridge(tmp_path_factory.mktemp('mock'), 'mock_hardware', 'mock_hardware.yaml')
    cell_helpers.wait_started([proc], [states], START_TIMEOUT, 'the mock hardware')
    client.action_client(FollowJointTrajectory, ACTION, timeout=START_TIMEOUT)
    yield proc, states
    cell_helpers.stop_all({'mock': proc})


def at_rest(states, speed: float = 2e-3) -> bool:
    msg = states.last()
    return msg is not None and max(abs(v) for v in msg.velocity) < speed


def recording_of(messages):
    """A JointStateRecording of received JointState messages, on their header stamps (s)."""
    from shadow_twin.calibration.recordings.recording import JointStateRecording
    from shadow_twin.common.stamps import to_seconds
    names = list(messages[0].name)
    assert all(list(m.name) == names for m in messages)
    return JointStateRecording.from_arrays([to_seconds(m.header.stamp) for m in messages], names,
                                           [list(m.position) for m in messages],
                                           [list(m.velocity) for m in messages], source='mock_hardware')


def test_point_0_away_from_rest_is_placed_at_its_stamped_start(ros, mock):
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    from std_srvs.srv import Trigger

    from shadow_twin.calibration.scoring.evaluation import Evaluator
    from shadow_twin.calibration.scoring.placement import AlignmentSettings
    from shadow_twin.common.stamps import from_nanoseconds
    from shadow_twin.control.controller import ControllerGains, SimController
    from shadow_twin.control.trajectory import JointTrajectory
    from shadow_twin.model.mjcf import TwinModel
    from shadow_twin.ros.conversions import time_msg_ns, trajectory_msg
    helpers, client = ros
    proc, states = mock
    assert client.call(Trigger, '/mock_hardware/reset').success
    reset = helpers.ros_now()          # at rest in a state stamped after the reset answered
    assert helpers.wait_until(lambda: helpers.stamp_s(states.last()) > reset and at_rest(states), 10.0), \
        'the mock hardware did not come to rest'
    trajectory = JointTrajectory(JOINTS, TIMES, POSITIONS, name='away_from_rest')
    goal = FollowJointTrajectory.Goal()
    goal.trajectory = trajectory_msg(trajectory)
    recorded_from = time.monotonic()
    start_ns = client.node.get_clock().now().nanoseconds + int(REST_BEFORE_S * 1e9)
    goal.trajectory.header.stamp = time_msg_ns(start_ns)
    handle = client.send_goal(FollowJointTrajectory, ACTION, goal)
    assert handle.accepted, proc.output()[-2000:]
    response = client.wait_future(handle.get_result_async(), 15.0)
    assert response.status == GoalStatus.STATUS_SUCCEEDED, response.result.error_string
    helpers.stamped_at(states, helpers.ros_now() + 1.0)     # 1 s of rest after the end, on the stamps
    recording = recording_of([m for _, m in states.since(recorded_from)])
    start = from_nanoseconds(start_ns)
    rest = recording.values(JOINTS)[recording.times < start]
    assert np.abs(rest - np.array(POSITIONS[0])).max(axis=0).min() > 0.25  # point 0 is away from rest

    twin = TwinModel()
    controller = SimController(twin.model, ControllerGains.from_yaml(CONFIG / 'controllers' / 'shadow_hand_e.yaml'))
    evaluator = Evaluator(twin, controller, recording, trajectory, JOINTS)
    assert abs(evaluator.start - start) <= PLACEMENT_S, (evaluator.start - start, evaluator.onset - start)
    placed = evaluator.evaluate([{}])[0].objective
    # Between waypoints alone, the motion would start at point 0 (0.6 s): placed that much too early.
    blind = Evaluator(twin, controller, recording, trajectory, JOINTS,
                      settings=AlignmentSettings(start_tolerance=np.inf))
    assert blind.start - start < -0.15
    assert placed < 0.1 * blind.evaluate([{}])[0].objective
