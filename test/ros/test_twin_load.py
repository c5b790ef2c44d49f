"""The twin under load in one process: ``shadow-twin up --mock-hardware`` (two bridges, the twin
server and the monitor share one Python process and its GIL) must keep both joint-state
streams at >= 240 Hz (publish rate 250 Hz) during a preemption storm on the sim's action and
during a 10,000-point goal on the twin, and give every preempted goal its reason. The same
scenarios with figures: ``benchmarks/faults.py``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0
RATE_HZ = 240.0


@pytest.fixture(scope='module')
def up(ros, states, tmp_path_factory):
    """``shadow-twin up --mock-hardware`` in a child process, serving the twin's action."""
    from control_msgs.action import FollowJointTrajectory
    helpers, client = ros
    log = tmp_path_factory.mktemp('load') / 'up.log'
    proc = helpers.NodeProcess(None, [], log, command=[
        helpers.PYTHON, '-c', 'import sys; from shadow_twin.cli.up import main; sys.exit(main(sys.argv[1:]))',
        '--mock-hardware'])
    started = time.monotonic()
    if not helpers.wait_until(lambda: all(r.since(started) for r in states.values()) or not proc.alive(),
                              START_TIMEOUT):
        proc.stop()
        pytest.fail(f'shadow-twin up did not start:\n{proc.output()[-3000:]}')
    client.action_client(FollowJointTrajectory, '/twin/follow_joint_trajectory', timeout=START_TIMEOUT)
    time.sleep(1.0)
    yield proc
    status = proc.stop()
    assert status == 0, proc.output()[-3000:]


def rates(scenarios, states, t0: float, t1: float) -> dict[str, float]:
    return {side: scenarios.rate(recorder, t0, t1) for side, recorder in states.items()}


def test_preemption_storm_keeps_the_rate_and_the_reasons(ros, states, up, scenarios):
    """A new goal every 50 ms for 5 s on /sim/follow_joint_trajectory."""
    from action_msgs.msg import GoalStatus
    _, client = ros
    storm = scenarios.preemption_storm(client, seconds=5.0)
    measured = rates(scenarios, states, storm.t0, storm.t1)
    assert storm.rejected == 0 and len(storm.results) >= 80
    *preempted, last = storm.results
    assert all(r[0] == GoalStatus.STATUS_ABORTED and r[2] == 'preempted by a new goal' for r in preempted), \
        sorted({r[2] for r in preempted})
    assert last[0] == GoalStatus.STATUS_SUCCEEDED, last
    assert min(measured.values()) >= RATE_HZ, measured


def test_ten_thousand_point_goal_keeps_the_rate(ros, states, up, scenarios):
    """A 20 s goal of 10,000 points (positions and velocities) on the twin: robot and sim follow
    it, it succeeds, and both streams keep >= 240 Hz from sending to the result."""
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    _, client = ros
    goal = scenarios.long_goal(10_000, 20.0)
    t0 = time.monotonic()
    handle = client.send_goal(FollowJointTrajectory, scenarios.TWIN_ACTION, goal, timeout=15.0)
    assert handle.accepted, up.output()[-3000:]
    halfway = t0 + 11.0       # send, the twin's checks (~0.5 s), start lead (0.75 s), 10 s
    response = client.wait_future(handle.get_result_async(), 45.0)
    t1 = time.monotonic()
    assert response.status == GoalStatus.STATUS_SUCCEEDED, response.result.error_string
    for side, recorder in states.items():      # at the arch's top (0.8 rad) half way
        assert scenarios.position_at(recorder, halfway) == pytest.approx(0.8, abs=0.1), side
    measured = rates(scenarios, states, t0, t1)
    assert min(measured.values()) >= RATE_HZ, measured
