"""Integration tests of the goal preview in the cell (hand on a UR5 on a MiR250): real processes.

The cell's sim bridge, the mock UR5, hand and MiR250 and the twin server (config/twin_cell.yaml,
mode both: preview ``auto`` = enforce) on a private ROS domain. Each goal predicted to fail is
aborted with its reason (its result, and on ``/twin/preview_result``): one failing in the watch's
first window (the gate) before its start, the arm, the hand and both bases staying where they
were (states stamped after the abort against those before): an arm move needing more than the
UR5's 150 N m, a base goal above the MiR250's 2 m/s; one failing later (the hand driven into the
cabinet 2 s in) while it runs, the arm stopped (on its states' stamps) before the predicted
contact. A good goal of arm and base passes the preview and runs. Skipped without rclpy or
control_msgs.
"""

from __future__ import annotations

import json
import math

from support import cell as cell_helpers
import numpy as np
import pytest

from support.scenarios.cell import START_TIMEOUT, base_points, make_goal, pose_of, positions, result_of, send, straight

ARM_JOINTS = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint']


@pytest.fixture(scope='module')
def rec(ros):
    from std_msgs.msg import String
    _, client = ros
    return cell_helpers.record_cell_topics(client, extra={'preview': (String, '/twin/preview_result', 100)})


@pytest.fixture(scope='module')
def cell(ros, rec, tmp_path_factory):
    _, client = ros
    procs = cell_helpers.start_twin_cell(client, tmp_path_factory.mktemp('preview_cell'), rec, START_TIMEOUT)
    yield procs
    cell_helpers.stop_all(procs)


def stamp_of(msg) -> float:
    """A message's header stamp, s."""
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


def snapshot(helpers, rec) -> dict:
    """Arm (robot and sim) positions and both base poses, stamped now."""
    return {'arm': positions(helpers.current(rec['arm']), ARM_JOINTS),
            'sim': positions(helpers.current(rec['sim']), ARM_JOINTS),
            'odom': np.array(pose_of(helpers.current(rec['odom']))),
            'sim_odom': np.array(pose_of(helpers.current(rec['sim_odom'])))}


def aborted_for(helpers, client, cell, rec, goal, kind: str, subject: str) -> tuple[dict, float]:
    """``goal`` is accepted and aborted for a predicted ``kind`` failure of ``subject`` (its result
    says so). Returns the published first failure and the ROS time its result came."""
    from action_msgs.msg import GoalStatus
    count = rec['preview'].count()
    handle = send(client, goal)
    assert handle.accepted, cell['twin'].output()[-3000:]
    status, answer = result_of(client, handle)
    ended = helpers.ros_now()
    assert status == GoalStatus.STATUS_ABORTED and answer.error_string.startswith('predicted to fail: '), \
        answer.error_string
    assert helpers.wait_until(lambda: rec['preview'].count() > count, 10.0)
    result = json.loads(rec['preview'].last().data)
    first = result['first_failure']
    assert first['kind'] == kind and first['subject'] == subject, result
    assert first['time'] >= 0 and first['amount'] > 0
    assert answer.error_string == f'predicted to fail: {first["message"]}'
    return first, ended


def assert_rejected_and_still(helpers, client, cell, rec, goal, kind: str, subject: str) -> dict:
    """``goal`` fails in the watch's first window: aborted before its start, nothing moves in the
    0.3 s after (on the states' stamps). Returns the published first failure."""
    before = snapshot(helpers, rec)
    first, rejected = aborted_for(helpers, client, cell, rec, goal, kind, subject)
    for name, topic, tolerance in (('arm', 'arm', 1e-3), ('sim', 'sim', 1e-3), ('odom', 'odom', 5e-3),
                                   ('sim_odom', 'sim_odom', 5e-3)):
        msg = helpers.stamped_at(rec[topic], rejected + 0.3)
        now = np.array(pose_of(msg)) if 'odom' in name else positions(msg, ARM_JOINTS)
        assert np.abs(now - before[name]).max() < tolerance, f'{name} moved'
    return first


def test_hand_into_the_cabinet_is_stopped_before_the_contact(ros, cell, rec):
    import re
    helpers, client = ros
    home = positions(helpers.current(rec['arm']), ARM_JOINTS)
    first, ended = aborted_for(helpers, client, cell, rec,
                               make_goal({'shoulder_lift_joint': -0.5, 'elbow_joint': 2.2}, 3.0),
                               'contact', 'rh_forearm/cabinet')
    assert 'mm deep' in first['message']
    start = float(re.findall(r'accepted goal: .* starting at ([0-9.]+) s', cell['twin'].output())[-1])
    for topic in ('arm', 'sim'):                  # the robot and the sim stopped before the contact
        helpers.stamped_at(rec[topic], ended + 0.5)
        states = [m for _, m in rec[topic].snapshot() if stamp_of(m) >= start - 1.0]
        moving = [stamp_of(m) for a, m in zip(states, states[1:])
                  if np.abs(positions(m, ARM_JOINTS) - positions(a, ARM_JOINTS)).max() > 2e-4]
        assert moving and max(moving) < start + first['time'], f'{topic} moved until {max(moving) - start:.3f} s'
    back = send(client, make_goal(dict(zip(ARM_JOINTS, home.tolist())), 3.0))      # back where it began
    assert back.accepted
    result_of(client, back)


def test_arm_move_over_150_n_m_is_rejected(ros, cell, rec):
    helpers, client = ros
    first = assert_rejected_and_still(helpers, client, cell, rec, make_goal({'shoulder_lift_joint': -1.5}, 1.0),
                                      'effort', 'shoulder_lift_joint')
    assert 'against 150 N m' in first['message']


def test_base_goal_above_the_mir_speed_is_rejected(ros, cell, rec):
    helpers, client = ros
    x, y, yaw = pose_of(helpers.current(rec['odom']))
    # 1.9 m in 1 s: 1.9 m/s on average (the goal rules pass it), its cubic profile peaks at 2.85 m/s
    points = [(0.0, x, y, yaw, 0.0, 0.0, 0.0),
              (1.0, x + 1.9 * math.cos(yaw), y + 1.9 * math.sin(yaw), yaw, 0.0, 0.0, 0.0)]
    first = assert_rejected_and_still(helpers, client, cell, rec, make_goal(base=points), 'base_speed', 'base')
    assert "MiR250's limit 2.000 m/s" in first['message']


def test_good_arm_and_base_goal_passes_and_runs(ros, cell, rec):
    from action_msgs.msg import GoalStatus
    helpers, client = ros
    start = pose_of(helpers.current(rec['odom']))
    count = rec['preview'].count()
    handle = send(client, make_goal({'shoulder_pan_joint': 0.3, 'shoulder_lift_joint': -0.4}, 3.0,
                                    base=base_points(start, straight(0.3), 3.0)))
    assert handle.accepted, cell['twin'].output()[-3000:]
    status, answer = result_of(client, handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, answer.error_string
    assert helpers.wait_until(lambda: rec['preview'].count() > count, 10.0)     # the gate's prediction
    gate = json.loads(rec['preview'].snapshot()[count][1].data)
    assert gate['ok'] and gate['origin'] == 'goal' and gate['window_start'] == 0.0 and gate['compute_ms'] < 3000
    assert gate['simulated'] == pytest.approx(0.5, abs=0.01) and gate['base']['peak_reference_speed'] > 0.1
