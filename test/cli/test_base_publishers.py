"""Other /cmd_vel publishers beside the twin (issue 33): judged by what they send, not by being there.

``shadow-twin up --cell --mock-hardware --no-monitor`` (goal preview off: it is judged by its
own tests, and here only the base's driving matters) on this run's private ROS domain, plus
nodes in processes of their own (test/support/cmd_vel_publisher.py) holding a /cmd_vel publisher:

* two idle ones (a Twist one as rqt_robot_steering, a TwistStamped one as nav2's controller
  server) stay up through every test: base goals succeed beside them;
* a teleop that starts sending (Twist, then TwistStamped as nav2 would, 10 Hz) once the base
  moves: the goal is aborted naming the teleop and /cmd_vel, both bases get a zero command
  stamped after the teleop's first message and come to rest;
* with ``base.other_publishers`` warn (set on the running twin) the same teleop is warned
  about in the log and the goal runs on (it is not aborted for it).

The twin's own TwistStamped messages on /cmd_vel and /sim/cmd_vel never count as another's
(every goal here would abort otherwise). Figures are benchmarks/base_publishers.py's.
"""

from __future__ import annotations

import math

import pytest

pytest.importorskip('rclpy')
pytest.importorskip('control_msgs.action')
pytest.importorskip('simulation_interfaces.srv')

from support.scenarios import base_publishers as scenarios  # noqa: E402
from support import cell as cell_helpers  # noqa: E402

TWIN_NODE = '/shadow_twin'
IDLE = {'rqt_robot_steering': 'Twist', 'controller_server': 'TwistStamped'}


@pytest.fixture(scope='module')
def cell(ros, tmp_path_factory):
    """The cell (``up --cell --mock-hardware --no-monitor``) and the two idle publishers, seen in
    the graph and alive for a second of odometry stamps; yields the
    :class:`support.scenarios.cell_faults.Cell` (the bases' topics recorded)."""
    helpers, client = ros
    folder = tmp_path_factory.mktemp('base_publishers')
    cell = scenarios.start_cell(helpers, client, folder, *scenarios.UP_ARGS)
    idle = {}
    try:
        idle = {name: scenarios.start_publisher(folder, name, kind) for name, kind in IDLE.items()}
        assert scenarios.wait_in_graph(client, list(IDLE)), 'the idle publishers are not in the graph'
        cell_helpers.wait_flowed([cell.odom], 1.0)
        cell.folder = folder
        yield cell
    finally:
        alive = {name: p.alive() for name, p in idle.items()}
        exits = {name: p.stop() for name, p in idle.items()}
        status = cell.up.stop(timeout=15.0)
    assert alive == dict.fromkeys(IDLE, True) and exits == dict.fromkeys(IDLE, 0), (alive, exits)
    assert status == 0, cell.up.output()[-3000:]


def test_idle_publishers_on_cmd_vel_do_not_abort_base_goals(ros, cell):
    from action_msgs.msg import GoalStatus
    helpers, client = ros
    outcomes = scenarios.idle_goals(helpers, client, cell, 2)
    assert [o.status for o in outcomes] == [GoalStatus.STATUS_SUCCEEDED] * 2, \
        ([o.error_string for o in outcomes], cell.up.output()[-3000:])
    assert not any(o.other_driver for o in outcomes) and 'another driver' not in cell.up.output()


@pytest.mark.parametrize('kind', ['Twist', 'TwistStamped'])
def test_a_teleop_sending_during_a_base_goal_aborts_it_naming_it_and_both_bases_stop(ros, cell, kind):
    from action_msgs.msg import GoalStatus
    helpers, client = ros
    name = f'teleop_{kind.lower()}'
    teleop = scenarios.start_publisher(cell.folder, name, kind, rate=10.0)
    assert scenarios.wait_in_graph(client, [name])
    cell_helpers.wait_flowed([cell.odom], 0.5)
    out = scenarios.teleop_mid_goal(helpers, client, cell, teleop)
    assert out.status == GoalStatus.STATUS_ABORTED, (out.error_string, cell.up.output()[-3000:])
    # the twin names the sender once its graph has the node's name (it lags DDS discovery: CI once
    # heard the teleop's first message before that)
    named = f'/{name}' in out.error_string or 'a node whose name is not discovered yet' in out.error_string
    assert named and 'on /cmd_vel' in out.error_string, out.error_string
    assert f'geometry_msgs/msg/{kind} ' in out.error_string, out.error_string
    # the teleop's message came first, then the twin's zero commands to both bases (stamps)
    assert not math.isnan(out.first_sent)
    assert set(out.zero_after) == {'/cmd_vel', '/sim/cmd_vel'}
    assert all(0.0 <= after < math.inf for after in out.zero_after.values()), out.zero_after
    assert out.at_rest


def test_warn_mode_warns_about_a_teleop_and_the_goal_runs(ros, cell):
    from action_msgs.msg import GoalStatus
    helpers, client = ros
    results = client.set_parameters(TWIN_NODE, {'base.other_publishers': 'warn'})
    assert all(r.successful for r in results), results
    try:
        teleop = scenarios.start_publisher(cell.folder, 'teleop_warned', 'Twist', rate=10.0)
        assert scenarios.wait_in_graph(client, ['teleop_warned'])
        cell_helpers.wait_flowed([cell.odom], 0.5)
        before = len(cell.up.output())
        out = scenarios.teleop_mid_goal(helpers, client, cell, teleop, length=0.4, seconds=3.0)
        # it ran on (a starved PC may still fail it on a tolerance: not this test's)
        assert 'another driver' not in out.error_string, out.error_string
        assert out.status in (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_ABORTED), out.status
        assert out.answer_s > 0.0          # the teleop sent before the goal ended
        logged = cell.up.output()[before:]
        # named once the twin's graph has the node (it lags DDS discovery, as in the test above;
        # CI once heard the teleop while the graph still listed only the idle publishers)
        named = '/teleop_warned' in logged or 'a node whose name is not discovered yet' in logged
        assert named and 'base.other_publishers warn' in logged, logged[-3000:]
    finally:
        client.set_parameters(TWIN_NODE, {'base.other_publishers': 'abort'})
    # a value outside the choices is refused, the setting stays
    results = client.set_parameters(TWIN_NODE, {'base.other_publishers': 'ignore'})
    assert not results[0].successful and 'one of' in results[0].reason, results
