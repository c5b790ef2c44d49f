"""Integration tests of the goal preview with the hand: real processes over DDS.

The mock hand, the sim bridge and the twin server (config/twin.yaml, mode both: preview
``auto`` = enforce) run as processes on a private ROS domain, plus a second twin server in mode
shadow under other action names. A goal predicted to fail in its first window is aborted before
its start with its reason and neither the mock's nor the sim's joint states move (states stamped
after the abort against those before); a goal predicted to fail later runs and is stopped, the
mock and the sim together, before it reaches the failure; a good goal passes the preview and runs;
``warn`` lets a failing goal run and logs the prediction; ``/twin/preview`` answers the same goal without moving anything and rejects a
malformed goal as the twin does; mode shadow rejects every goal. Skipped without rclpy or
control_msgs.
"""

from __future__ import annotations

import json
from pathlib import Path

from support import cell as cell_helpers
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
TWIN_PARAMS = REPO / 'config' / 'twin.yaml'
TWIN_ACTION = '/twin/follow_joint_trajectory'
PREVIEW_ACTION = '/twin/preview'
SHADOW_ACTION = '/shadow_twin_shadow/follow_joint_trajectory'
SHADOW_PREVIEW = '/shadow_twin_shadow/preview'
START_TIMEOUT = 30.0
#: Driven into its upper limit (1.5708 rad) within 0.1 s: the finger overshoots into the stop.
INTO_LIMIT = {'rh_FFJ3': 1.5708}
GOOD = {'rh_FFJ3': 0.8, 'rh_WRJ1': -0.2}
HAND = ['rh_FFJ3', 'rh_FFJ4', 'rh_MFJ3', 'rh_WRJ1', 'rh_WRJ2']


def make_goal(targets, seconds, goal_tolerance=0.05):
    from support import ros as ros_helpers
    return ros_helpers.one_point_goal(targets, seconds, goal_tolerance)


def send(client, goal, action=TWIN_ACTION, feedback=None):
    from control_msgs.action import FollowJointTrajectory
    return client.send_goal(FollowJointTrajectory, action, goal, feedback=feedback, timeout=15.0)


def result_of(client, handle, timeout=20.0):
    response = client.wait_future(handle.get_result_async(), timeout)
    return response.status, response.result


def positions(msg, names):
    index = {n: k for k, n in enumerate(msg.name)}
    return np.array([msg.position[index[n]] for n in names])


@pytest.fixture(scope='module')
def rec(ros):
    from std_msgs.msg import String
    _, client = ros
    return cell_helpers.record_hand_topics(client, depth=1000, extra={
        'preview': (String, '/twin/preview_result', 100),
        'shadow_preview': (String, '/shadow_twin_shadow/preview_result', 100)})


@pytest.fixture(scope='module')
def procs(ros, rec, tmp_path_factory):
    """Mock hand, sim bridge, the twin (mode both) and a twin in mode shadow."""
    _, client = ros
    folder = tmp_path_factory.mktemp('preview')
    shadow_args = ['-r', '__node:=shadow_twin_shadow', '-p', 'mode:=shadow',
                   '-p', f'action_name:={SHADOW_ACTION}', '-p', f'preview_action_name:={SHADOW_PREVIEW}',
                   '-p', 'preview_result_topic:=/shadow_twin_shadow/preview_result']
    procs = {**cell_helpers.hand_bridges(folder),
             'twin': cell_helpers.twin_server(folder, TWIN_PARAMS),
             'shadow': cell_helpers.twin_server(folder, TWIN_PARAMS, *shadow_args, log='shadow')}
    cell_helpers.wait_started(procs, [rec['real'], rec['sim']], START_TIMEOUT)
    cell_helpers.wait_twin_ready(client, procs, START_TIMEOUT,
                                 actions=(TWIN_ACTION, PREVIEW_ACTION, SHADOW_ACTION, SHADOW_PREVIEW),
                                 subscribers={'/joint_states': 3, '/sim/joint_states': 3})
    yield procs
    cell_helpers.stop_all(procs)


@pytest.fixture
def rest(ros, procs, rec):
    """Both bridges reset and at rest (the hand creeps for a second after a move)."""
    _, client = ros
    cell_helpers.reset_hand(client, {side: rec[side] for side in ('real', 'sim')})
    return procs


def last_result(helpers, recorder, after: int, timeout: float = 10.0) -> dict:
    """The newest preview result published after the recorder held ``after`` messages."""
    assert helpers.wait_until(lambda: recorder.count() > after, timeout), 'no preview result published'
    return json.loads(recorder.last().data)


def assert_still(helpers, rec, before: dict, since: float, names=HAND) -> None:
    """The mock's and the sim's joints stamped 0.3 s after ``since`` are where they were (within 5 mrad)."""
    for side in ('real', 'sim'):
        after = helpers.stamped_at(rec[side], since + 0.3)
        moved = np.abs(positions(after, names) - positions(before[side], names)).max()
        assert moved < 5e-3, f"{side} moved {moved:.4f} rad"   # a goal moves 0.8-1.6 rad; at rest it creeps < 2 mrad/s


def test_goal_failing_in_its_first_window_is_aborted_before_its_start_and_nothing_moves(ros, procs, rest, rec):
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    helpers, client = ros
    before = {side: helpers.current(rec[side]) for side in ('real', 'sim')}
    count = rec['preview'].count()
    handle = send(client, make_goal(INTO_LIMIT, 0.1))
    assert handle.accepted                  # its parts went out at once: the preview never delays a goal
    status, answer = result_of(client, handle)
    rejected = helpers.ros_now()
    assert status == GoalStatus.STATUS_ABORTED
    assert answer.error_code == FollowJointTrajectory.Result.INVALID_GOAL
    assert answer.error_string.startswith("predicted to fail: joint 'rh_FFJ3' is driven into its upper limit")
    result = last_result(helpers, rec['preview'], count)
    assert not result['ok'] and result['origin'] == 'goal' and result['policy'] == 'enforce'
    first = result['first_failure']
    assert first['kind'] == 'position_limit' and first['subject'] == 'rh_FFJ3' and first['amount'] > 0.01
    assert "'rh_FFJ3'" in first['message'] and 't = ' in first['message']
    assert helpers.wait_until(lambda: "goal aborted (INVALID_GOAL): predicted to fail: joint 'rh_FFJ3'"
                              in procs['twin'].output(), 5.0), procs['twin'].output()[-2000:]
    assert_still(helpers, rec, before, rejected)


def test_goal_failing_later_is_stopped_before_the_failure(ros, procs, rec):
    """A goal whose second segment drives rh_FFJ3 into its stop 3 s in: it runs, the watch predicts the
    failure a window ahead, and the mock and the sim stop together before the segment starts."""
    from action_msgs.msg import GoalStatus
    from trajectory_msgs.msg import JointTrajectoryPoint

    from shadow_twin.ros.conversions import duration_msg
    helpers, client = ros
    goal = make_goal({'rh_FFJ3': 0.6}, 2.9)
    goal.trajectory.points.append(JointTrajectoryPoint(positions=[1.5708], time_from_start=duration_msg(3.0)))
    sent = helpers.ros_now()
    handle = send(client, goal)
    assert handle.accepted, procs['twin'].output()[-2000:]
    status, answer = result_of(client, handle)
    ended = helpers.ros_now()
    assert status == GoalStatus.STATUS_ABORTED and answer.error_string.startswith(
        "predicted to fail: joint 'rh_FFJ3' is driven into its upper limit"), answer.error_string
    assert ended - sent < 2.9                # stopped before the segment into the stop began
    for side in ('real', 'sim'):
        helpers.stamped_at(rec[side], ended + 0.5)
        peak = max(positions(m, ['rh_FFJ3'])[0] for _, m in rec[side].snapshot()
                   if m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec >= sent)
        assert peak < 0.7, f'{side} reached {peak:.3f} rad'      # 0.6 at most on the first segment


def test_good_goal_passes_the_preview_and_runs(ros, procs, rec):
    from action_msgs.msg import GoalStatus
    helpers, client = ros
    count = rec['preview'].count()
    handle = send(client, make_goal(GOOD, 1.0))
    assert handle.accepted, procs['twin'].output()[-2000:]
    result = last_result(helpers, rec['preview'], count)
    assert result['ok'] and result['window_start'] == 0.0 and set(result['joint_errors']) == set(GOOD)
    assert result['compute_ms'] < 2000
    status, answer = result_of(client, handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, answer.error_string
    end = positions(helpers.current(rec['real']), list(GOOD))
    assert np.abs(end - list(GOOD.values())).max() < 0.05


def test_preview_action_predicts_and_moves_nothing(ros, procs, rest, rec):
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    helpers, client = ros
    before = {side: helpers.current(rec[side]) for side in ('real', 'sim')}
    feedback = []
    handle = send(client, make_goal(INTO_LIMIT, 0.1), PREVIEW_ACTION, feedback=feedback.append)
    assert handle.accepted
    status, answer = result_of(client, handle)
    done = helpers.ros_now()
    assert status == GoalStatus.STATUS_ABORTED
    assert answer.error_code == FollowJointTrajectory.Result.INVALID_GOAL
    assert answer.error_string.startswith("predicted to fail: joint 'rh_FFJ3' is driven into its upper limit")
    assert feedback and list(feedback[-1].feedback.joint_names) == ['rh_FFJ3']
    good = send(client, make_goal(GOOD, 1.0), PREVIEW_ACTION)
    status, answer = result_of(client, good)
    assert status == GoalStatus.STATUS_SUCCEEDED and 'predicted to succeed' in answer.error_string
    assert_still(helpers, rec, before, max(done, helpers.ros_now()))


def test_malformed_preview_gets_the_goals_rejection(ros, procs, rec):
    helpers, client = ros
    goal = make_goal({'rh_FFJ3': 0.5, 'no_such_joint': 0.1}, 1.0)
    count = rec['preview'].count()
    assert not send(client, goal, PREVIEW_ACTION).accepted
    published = last_result(helpers, rec['preview'], count)
    assert published['rejected'] and 'no_such_joint' in published['error_string']
    assert not send(client, goal).accepted
    reason = f'rejected goal (INVALID_JOINTS): {published["error_string"]}'
    assert helpers.wait_until(lambda: procs['twin'].output().count(reason) >= 2, 5.0), procs['twin'].output()[-2000:]


def test_warn_runs_a_failing_goal_and_logs_the_prediction(ros, procs, rec):
    from action_msgs.msg import GoalStatus
    helpers, client = ros
    assert all(r.successful for r in client.set_parameters('/shadow_twin', {'preview': 'warn'}))
    try:
        handle = send(client, make_goal(INTO_LIMIT, 0.1))
        assert handle.accepted, procs['twin'].output()[-2000:]
        status, _ = result_of(client, handle)
        assert status in (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_ABORTED)
        assert helpers.wait_until(lambda: "preview: predicted to fail: joint 'rh_FFJ3'" in procs['twin'].output()
                                  and 'the goal runs (warn)' in procs['twin'].output(), 5.0)
        moved = positions(helpers.current(rec['real']), ['rh_FFJ3'])[0]
        assert moved > 1.2                     # it ran
    finally:
        assert all(r.successful for r in client.set_parameters('/shadow_twin', {'preview': 'enforce'}))
    back = send(client, make_goal({'rh_FFJ3': 0.0}, 1.0))
    assert back.accepted
    result_of(client, back)


def test_shadow_mode_rejects_goals_and_still_previews(ros, procs, rec):
    from action_msgs.msg import GoalStatus
    helpers, client = ros
    assert not send(client, make_goal(GOOD, 1.0), SHADOW_ACTION).accepted
    assert helpers.wait_until(lambda: 'the twin is in shadow mode: the sim follows the robots\' own controllers'
                              in procs['shadow'].output(), 5.0), procs['shadow'].output()[-2000:]
    count = rec['shadow_preview'].count()
    handle = send(client, make_goal(GOOD, 1.0), SHADOW_PREVIEW)
    assert handle.accepted
    status, answer = result_of(client, handle)
    assert status == GoalStatus.STATUS_SUCCEEDED, answer.error_string
    assert last_result(helpers, rec['shadow_preview'], count)['mode'] == 'shadow'
