"""Fault injection on the whole cell (issue 22): ``shadow-twin up --cell --mock-hardware``, real
processes on this run's private ROS domain, fed what an adversary on the lab network sends.

* Malformed messages on every topic the nodes subscribe to (NaN, inf, negative stamps, wrong
  array lengths, unknown joint names, stale or NaN velocity commands, bad speed scaling): no
  node exits (the cell's and a calibration node of the cell protocol), nothing moves, the streams go on and a goal still succeeds.
* A base goal whose point 0 at t = 0 is 10 km away is rejected and nothing moves.
* The MiR bridge SIGSTOPped for 3 s mid-goal: after SIGCONT the base moves less than 2 cm.
* The MiR bridge SIGKILLed mid-goal: the client gets ABORTED naming the real base within 1 s,
  the other nodes stay up, ``up`` respawns the mock and a base goal succeeds again (the sim
  base re-anchored to the respawned one).
* 8 combined goals at the same instant, 10 times: one goal runs everywhere or none does; a goal
  rejected because the hand could not accept its part in time leaves the running goal to succeed
  (on a PC too loaded for the cancel to arrive before the refused part's start, the running goal
  aborts, saying so, and everything stops).
* A sim reset, then a base goal: the sim base is re-anchored, not sent after the real one at speed.

The scenarios are shared with ``benchmarks/faults.py`` (test/support/scenarios/cell_faults.py).
"""

from __future__ import annotations

import math
import re
import time

import pytest

pytest.importorskip('rclpy')
pytest.importorskip('control_msgs.action')
pytest.importorskip('simulation_interfaces.srv')

from support.scenarios import cell_faults as faults  # noqa: E402
from support.scenarios import malformed  # noqa: E402
from support.scenarios.cell import (ARM, START_TIMEOUT, base_points, make_goal, pose_of, result_of, send,  # noqa: E402
                            straight)
from support.ros import REPO  # noqa: E402


@pytest.fixture(scope='module')
def cell(ros, tmp_path_factory):
    """``shadow-twin up --cell --mock-hardware`` (monitor included: its topics are fed too);
    yields a :class:`support.scenarios.cell_faults.Cell`."""
    helpers, client = ros
    cell = faults.start_cell(helpers, client, tmp_path_factory.mktemp('cell_faults'))
    yield cell
    status = cell.up.stop(timeout=15.0)
    assert status == 0, cell.up.output()[-3000:]


def test_malformed_messages_on_every_topic_leave_every_node_up_and_nothing_moves(ros, cell, tmp_path):
    helpers, client = ros
    before = {name: pose_of(r.last()) for name, r in (('real', cell.odom), ('sim', cell.sim_odom))}
    # the calibration node of the cell protocol subscribes to the joint states and the odometry too
    listening = client.node.count_subscribers('/odom')
    calibration = helpers.NodeProcess('calibration_node.node', [
        '--params-file', str(REPO / 'config' / 'calibration_node.yaml'), '-p', 'protocol:=cell',
        '-p', f'output_dir:={tmp_path / "out"}'], tmp_path / 'calibration_node.log')
    try:
        assert helpers.wait_until(lambda: 'ready: ~/calibrate' in calibration.output() or not calibration.alive(),
                                  START_TIMEOUT), calibration.output()[-3000:]
        # DDS discovery between the new process and this one: its subscription is in this node's graph
        # (flood_malformed then waits until its publishers are matched with every subscriber there)
        assert helpers.wait_until(lambda: client.node.count_subscribers('/odom') > listening, START_TIMEOUT)
        # rounds go on until every node logged its drops (or 60 s): a subscription learns of the test's
        # publishers after they have matched it (one fresh-clone CI run lost all three rounds to /odom)
        logged = ('/sim/cmd_vel', '/cmd_vel', '/joint_states', '/speed_scaling_state_broadcaster/speed_scaling')
        sent = malformed.flood_malformed(client, until=lambda: 'dropped a message on /odom' in calibration.output()
                                         and all(f'dropped a message on {t}' in cell.up.output() for t in logged),
                                         timeout=START_TIMEOUT)
        assert sent >= 60
        assert helpers.wait_until(lambda: 'dropped a message on /odom' in calibration.output()
                                  or not calibration.alive(), START_TIMEOUT), calibration.output()[-3000:]
        assert calibration.alive(), calibration.output()[-3000:]
    finally:
        assert calibration.stop() == 0, calibration.output()[-3000:]
    assert 'dropped a message on /odom' in calibration.output(), calibration.output()[-3000:]
    assert cell.up.alive() and 'exited' not in cell.up.output(), cell.up.output()[-3000:]
    now = time.monotonic()
    assert helpers.wait_until(lambda: all(r.since(now) for r in cell.streams.values()), 10.0), \
        f'{ {t: r.count() for t, r in cell.streams.items()} }\n{cell.up.output()[-3000:]}'
    for name, recorder in (('real', cell.odom), ('sim', cell.sim_odom)):
        x, y, _ = pose_of(recorder.last())
        assert math.hypot(x - before[name][0], y - before[name][1]) < 0.005, name
    for topic in logged:
        assert f'dropped a message on {topic}' in cell.up.output(), topic
    # the cell still works
    status, result = result_of(client, send(client, make_goal({'shoulder_pan_joint': ARM['shoulder_pan_joint']},
                                                              1.5)))
    assert (status, result.error_code) == (4, 0), result.error_string


def test_point_0_at_t0_10_km_away_is_rejected_and_nothing_moves(ros, cell):
    helpers, client = ros
    start = pose_of(cell.odom.last())
    goal = make_goal(base=[(0.0, start[0] + 10_000.0, start[1], start[2]), (2.0, start[0] + 10_000.2, start[1],
                                                                          start[2])])
    t0 = time.monotonic()
    handle = send(client, goal)
    assert not handle.accepted
    helpers.stamped_at(cell.odom, helpers.ros_now() + 0.5)      # 0.5 s on, on the odometry's stamps
    assert not cell.cmd_vel.since(t0) and not cell.sim_cmd_vel.since(t0), 'a rejected goal sent velocity commands'


def test_a_stalled_mir_bridge_does_not_drive_on_when_it_resumes(ros, cell):
    helpers, client = ros
    outcome = faults.stall_base_mid_goal(helpers, client, cell, stall_s=3.0)
    assert outcome.status == 6, outcome          # ABORTED: its odometry stopped
    assert outcome.moved_after_resume < 0.02, outcome


def test_a_killed_mir_bridge_aborts_naming_it_and_its_respawn_restores_service(ros, cell):
    helpers, client = ros
    outcome = faults.kill_base_mid_goal(helpers, client, cell)
    assert outcome.status == 6 and 'real base' in outcome.error_string and '/odom' in outcome.error_string, outcome
    # judged on the twin's own clock: it names how old the newest odometry was when it gave up (its
    # control ticks at 50 Hz: two ticks past base.odom_timeout 0.5 s); the answer's arrival here,
    # on this process's clock, only within 2 s (a loaded CI took 1.15 s from the kill)
    age = re.search(r'the newest is ([0-9.]+) s old', outcome.error_string)
    assert age and 0.5 < float(age.group(1)) < 1.0, outcome
    assert outcome.answer_s < 2.0, outcome
    assert outcome.others_alive, outcome
    assert outcome.respawned, cell.up.output()[-3000:]
    # the twin matches the respawned bridge's odometry when DDS discovery lets it (up to Fast DDS's
    # 3 s announcement period on a loaded machine); until then it names the missing base
    deadline = time.monotonic() + 10.0
    while True:
        earlier = len(cell.up.output())
        start = pose_of(cell.odom.last())
        handle = send(client, make_goal(base=base_points(start, straight(0.2), 2.0)))
        said = cell.up.output()[earlier:]
        if handle.accepted or time.monotonic() > deadline:
            break
        assert 'real base (TwistStamped on /cmd_vel, odometry on /odom) is missing' in said, said
        time.sleep(0.5)
    assert handle.accepted, cell.up.output()[-3000:]
    status, result = result_of(client, handle)
    assert (status, result.error_code) == (4, 0), result.error_string
    assert 're-anchored' in cell.up.output()


def test_goals_arriving_together_run_one_goal_everywhere_or_none(ros, cell):
    """8 combined goals at the same instant, 10 times: at most one succeeds, and sim and real
    arm are within 0.01 rad at rest after it; nothing moves towards a goal that did not run.

    A running goal may end aborted (at most 3 of the 10 bursts) only for a cause the twin names: a refused goal's part
    whose cancel came after its start (a loaded PC), or a controller whose data stopped. Then
    everything stops where it is (sim and real may part by what they moved while the stop
    travelled); a burst that runs no goal leaves them as far apart as they were."""
    helpers, client = ros
    outcomes = [faults.burst(helpers, client, cell, k) for k in range(10)]
    stopped = 0
    for k, outcome in enumerate(outcomes):
        assert len(outcome.succeeded) <= 1, (k, outcome)
        assert outcome.strayed < 0.01, (k, outcome)
        # the base ends within the goal tolerance of the goal that ran (config/twin_cell.yaml:
        # base.tolerances.goal_position); goals preempted on their way may have moved it first
        assert abs(outcome.base_moved - outcome.base_expected) < 0.05, (k, outcome)
        aborted = [why for _, status, why in outcome.answers if status == 6 and why != 'preempted by a new goal']
        if outcome.succeeded:
            assert outcome.apart < 0.01, (k, outcome)
        elif aborted:
            stopped += 1
            assert all('whose cancel reached the controller after its start' in why or 'is gone' in why
                       for why in aborted), (k, outcome)
        else:
            assert outcome.apart < outcome.apart_before + 0.005, (k, outcome)
    # a named stop is load's, not a fault: 2 of 10 bursts on the PC this was set on, 3 in a fresh-clone CI
    # run at a load average of 4 (each cause named, as checked above)
    assert stopped <= 3, outcomes
    assert sum(len(o.succeeded) for o in outcomes) + stopped >= 8, outcomes    # a burst is not simply refused
    assert 'another goal is being accepted' in cell.up.output()


def test_a_rejected_goal_leaves_the_running_goal_to_succeed(ros, cell):
    helpers, client = ros
    accepted, status, error, hand_moved = faults.rejected_goal_beside_a_running_one(helpers, client, cell)
    assert not accepted
    assert 'did not accept its part' in cell.up.output(), cell.up.output()[-3000:]
    assert (status, error.startswith('goal reached')) == (4, True), error
    assert hand_moved < 0.01


def test_after_a_sim_reset_a_base_goal_drives_the_sim_base_at_the_goal_speed(ros, cell):
    helpers, client = ros
    status, error, peak, nominal = faults.reset_then_base_goal(helpers, client, cell)
    assert status == 4, error
    assert 're-anchored' in cell.up.output()
    # the tracking law closes a lag on the sim's odometry: after a stall of the twin's or the sim's process on a
    # loaded CI machine the sim base caught up at 0.261 m/s against the goal's 0.1875 (1.39 x); a base sent after
    # the real one instead would also cover the offset the reset made
    assert peak <= 1.5 * nominal + 0.02, (peak, nominal)
