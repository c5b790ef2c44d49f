"""Fault injection against the twin with real processes: the mock hardware is its own process
(``mujoco_bridge -r __node:=mock_hardware``) and gets SIGKILL or SIGSTOP mid-goal; the sim
bridge and the twin server run as two more processes. The twin must abort within 0.5 s
naming the controller and its stale joint states, the sim must hold, and a goal sent while
the controller is gone must be rejected with nothing moving. The scenarios are shared with
``benchmarks/faults.py`` (test/support/scenarios/hand_faults.py), which repeats them for figures.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from support import cell as cell_helpers
import pytest

REPO = Path(__file__).resolve().parents[3]
CONFIG = REPO / 'config'
START_TIMEOUT = 30.0
DETECT_WITHIN_S = 0.5
HOLD_RAD = 0.01


@pytest.fixture(scope='module')
def sim_and_twin(ros, states, tmp_path_factory):
    """The sim bridge and the twin server, one process each, for the whole module."""
    helpers, client = ros
    folder = tmp_path_factory.mktemp('faults')
    procs = {'sim': cell_helpers.bridge(folder, 'mujoco_bridge', 'mujoco_bridge.yaml'),
             'twin': helpers.NodeProcess('shadow_twin.ros.twin.server', ['--params-file', str(CONFIG / 'twin.yaml')],
                                         folder / 'twin.log')}
    yield procs
    cell_helpers.stop_all(procs)


@pytest.fixture
def mock(ros, states, sim_and_twin, tmp_path):
    """A fresh mock hardware process, the cell at rest and the twin ready; stopped afterwards
    (SIGCONT first, in case a test stopped it)."""
    from control_msgs.action import FollowJointTrajectory
    from std_srvs.srv import Trigger
    helpers, client = ros
    proc = cell_helpers.bridge(tmp_path, 'mock_hardware', 'mock_hardware.yaml')
    started = time.monotonic()
    if not helpers.wait_until(lambda: all(r.since(started) for r in states.values()) or not proc.alive(),
                              START_TIMEOUT):
        proc.stop()
        pytest.fail(f'the cell did not start:\n{cell_helpers.logs({"mock": proc, **sim_and_twin}, 2000)}')
    client.action_client(FollowJointTrajectory, '/twin/follow_joint_trajectory', timeout=START_TIMEOUT)
    for node in ('/mujoco_bridge', '/mock_hardware'):
        assert client.call(Trigger, f'{node}/reset').success
    from support.scenarios import hand_faults as fault_scenarios
    assert fault_scenarios.wait_twin_accepts(client, START_TIMEOUT), 'the twin never saw the new mock hardware'
    assert helpers.wait_until(lambda: all(max(abs(v) for v in r.last().velocity) < 2e-3
                                          for r in states.values()), 10.0), 'the cell did not come to rest'
    yield proc
    if proc.alive():
        proc.proc.send_signal(signal.SIGCONT)
    proc.stop()


def assert_gone_and_rejecting(ros, states, scenarios, outcome, twin) -> None:
    """The twin goal aborted within 0.5 s naming the hand controller's stale joint states, the
    sim held, and a new goal is rejected without moving the sim."""
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    helpers, client = ros
    assert outcome.status == GoalStatus.STATUS_ABORTED, outcome.error_string
    text = outcome.error_string
    assert 'hand controller (/rh_trajectory_controller/follow_joint_trajectory) is gone' in text, text
    assert 'joint states stopped: rh_FFJ3' in text and 'joint_state_timeout 0.2 s' in text, text
    assert outcome.answer_s < DETECT_WITHIN_S, f'abort {outcome.answer_s:.3f} s after the fault'
    assert outcome.sim_drift < HOLD_RAD, f'the sim moved {outcome.sim_drift:.4f} rad 0.5-1.0 s after the fault'
    before = scenarios.position(states['sim'].last())
    handle = client.send_goal(FollowJointTrajectory, scenarios.TWIN_ACTION,
                              scenarios.one_point_goal({scenarios.MOVED: 0.9}, 0.5))
    assert not handle.accepted
    held = helpers.stamped_at(states['sim'], helpers.ros_now() + 0.6)     # 0.6 s on, on the sim's stamps
    assert abs(scenarios.position(held) - before) < HOLD_RAD
    assert 'rejected goal (INVALID_GOAL): hand controller' in twin.output()


def test_killed_controller_aborts_naming_it_and_the_sim_holds(ros, states, sim_and_twin, mock, scenarios):
    """SIGKILL of the mock hardware 0.15 rad into a 4 s goal (DDS still lists its action
    server for seconds: liveness comes from its joint states)."""
    _, client = ros
    outcome = scenarios.kill_mid_goal(client, mock.pid, states, signal.SIGKILL)
    assert_gone_and_rejecting(ros, states, scenarios, outcome, sim_and_twin['twin'])
    assert outcome.robot_position_at_signal < 0.6


def test_stalled_controller_is_named_and_cancelled_when_it_resumes(ros, states, sim_and_twin, mock, scenarios):
    """SIGSTOP of the mock hardware mid-goal: named as stale joint states; after SIGCONT the
    robot takes the cancel the twin sent (DDS delivers it once the process runs again) and
    ends its part canceled, and goals are accepted again."""
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    helpers, client = ros
    outcome = scenarios.kill_mid_goal(client, mock.pid, states, signal.SIGSTOP)
    assert_gone_and_rejecting(ros, states, scenarios, outcome, sim_and_twin['twin'])
    resumed = time.monotonic()
    mock.proc.send_signal(signal.SIGCONT)
    assert helpers.wait_until(lambda: states['real'].since(resumed + 0.1), 10.0), 'the mock did not resume'
    assert helpers.wait_until(lambda: 'goal canceled' in mock.output(), 10.0), mock.output()[-2000:]
    assert 'canceled the parts of: hand (gone: not waited for), sim' in sim_and_twin['twin'].output()
    handle = client.send_goal(FollowJointTrajectory, scenarios.TWIN_ACTION,
                              scenarios.one_point_goal({scenarios.MOVED: 0.5}, 0.5))
    assert handle.accepted, sim_and_twin['twin'].output()[-2000:]
    response = client.wait_future(handle.get_result_async(), 15.0)
    assert response.status == GoalStatus.STATUS_SUCCEEDED, response.result.error_string


def test_part_rejected_by_a_controller_is_cancelled_everywhere_before_the_start(ros, states, sim_and_twin, mock,
                                                                                scenarios):
    """The mock hardware rejects its part (a velocity limit the sim does not have): the sim's
    part, already accepted, is canceled before the common start and the goal is rejected;
    neither moves."""
    from control_msgs.action import FollowJointTrajectory
    helpers, client = ros
    results = client.set_parameters('/mock_hardware', {'velocity_limits': '{rh_FFJ3: 0.5}'})
    assert all(r.successful for r in results), results
    before = {side: scenarios.position(r.last()) for side, r in states.items()}
    handle = client.send_goal(FollowJointTrajectory, scenarios.TWIN_ACTION,
                              scenarios.one_point_goal({scenarios.MOVED: 1.2}, 0.5))
    assert not handle.accepted
    rejected = helpers.ros_now()
    for side, recorder in states.items():       # 0.8 s on, on the states' stamps
        assert abs(scenarios.position(helpers.stamped_at(recorder, rejected + 0.8)) - before[side]) < HOLD_RAD, side
    log = sim_and_twin['twin'].output()
    assert 'hand controller (/rh_trajectory_controller/follow_joint_trajectory) rejected its part' in log
    assert 'canceled before the start: sim' in log


def test_preemption_storm_gives_every_preempted_goal_its_reason(ros, states, sim_and_twin, mock, scenarios):
    """A new goal every 50 ms for 3 s on the sim's action: each goal but the last ends aborted,
    INVALID_GOAL, "preempted by a new goal" (none "stopped by the simulation")."""
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    _, client = ros
    storm = scenarios.preemption_storm(client, seconds=3.0)
    assert storm.rejected == 0 and len(storm.results) >= 40
    *preempted, last = storm.results
    wrong = [r for r in preempted if (r[0], r[1]) != (GoalStatus.STATUS_ABORTED,
                                                       FollowJointTrajectory.Result.INVALID_GOAL)
             or r[2] != 'preempted by a new goal']
    assert not wrong, wrong[:5]
    assert last[0] == GoalStatus.STATUS_SUCCEEDED, last
