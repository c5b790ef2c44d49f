"""The shared FollowJointTrajectory server (shadow_twin.ros.action_server) with stand-in hooks.

A server node spins in this process on its own context and MultiThreadedExecutor; the
test client (``ros`` fixture) sends goals over DDS. The LockedActionClient test sends
from this thread through a client on the server's node, whose executor threads take the
responses (the situation of ros2/rclpy#1123). The hooks record what the base asks
of them, so the lifecycle is checked without a simulation: intake, rejection, a failed
start, success, cancel, :meth:`stop_active` and preemption. A preempted goal's step
reports its work gone (what the simulated controller sees once its trajectory is
replaced); the goal must still end "preempted".
"""

from __future__ import annotations

import os
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

rclpy = pytest.importorskip('rclpy')
pytest.importorskip('control_msgs.action')

from action_msgs.msg import GoalStatus  # noqa: E402
from builtin_interfaces.msg import Time  # noqa: E402
from control_msgs.action import FollowJointTrajectory  # noqa: E402
from rclpy.executors import MultiThreadedExecutor  # noqa: E402

from shadow_twin.control import jtc  # noqa: E402
from shadow_twin.ros.action_client import LockedActionClient  # noqa: E402
from shadow_twin.ros.action_server import (FollowJointTrajectoryServer,  # noqa: E402
                                           outcome_of_status)

ACTION = '/fake/follow_joint_trajectory'
PERIOD = 0.005


class FakeServer(FollowJointTrajectoryServer):
    """Hooks that record their calls: ``events`` is [(hook, goal name)]. A goal is named
    by its first joint: ``bad`` is rejected, ``nostart`` fails to start, ``quick``
    succeeds after 3 steps, ``stale...`` was handed out before the running goal (it does not
    supersede it), anything else runs until stopped."""

    def __init__(self, node, action: str = ACTION) -> None:
        self.events: list[tuple[str, str]] = []
        super().__init__(node, action, handover_timeout=2.0)

    def validate(self, request):
        name = request.trajectory.joint_names[0]
        if name == 'bad':
            raise jtc.GoalRejected(jtc.INVALID_JOINTS, 'bad joint')
        return SimpleNamespace(name=name, steps=0)

    def start(self, goal):
        self.events.append(('start', goal.plan.name))
        return 'cannot start here' if goal.plan.name == 'nostart' else None

    def step(self, goal):
        zero = np.zeros(1)
        self.publish_feedback(goal, Time(), ['j'], goal.plan.steps * PERIOD, (zero, zero, zero), (zero, zero))
        goal.plan.steps += 1
        time.sleep(PERIOD)           # the step's work, during which a new goal may arrive
        with self.lock:
            replaced = not self.is_active(goal)
        if replaced:                 # a newer goal took over: this goal's work is gone
            return jtc.Verdict.aborted('trajectory stopped by the simulation (reset or model reload)')
        if goal.plan.name == 'quick' and goal.plan.steps >= 3:
            return jtc.Verdict(jtc.GoalOutcome.SUCCEEDED, jtc.SUCCESSFUL, 'reached')
        return None

    def stop(self, goal):
        self.events.append(('stop', goal.plan.name))

    def cancel(self, goal):
        self.events.append(('cancel', goal.plan.name))
        return 'canceled by the fake'

    def period(self):
        return PERIOD

    def supersedes(self, plan, running):
        return not plan.name.startswith('stale')      # a goal handed out before the running one


@pytest.fixture(scope='module')
def fake(ros):
    """The FakeServer, spun by a 4-thread executor on its own context."""
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(os.environ['ROS_DOMAIN_ID']))
    node = rclpy.create_node('fake_trajectory_server', context=context)
    server = FakeServer(node)
    executor = MultiThreadedExecutor(num_threads=4, context=context)
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    yield server
    server.stop_active('the test is over', wait=2.0)
    executor.shutdown(timeout_sec=2.0)
    node.destroy_node()
    rclpy.try_shutdown(context=context)
    thread.join(timeout=2.0)


@pytest.fixture
def server(fake):
    fake.events.clear()
    return fake


def goal_named(name: str) -> FollowJointTrajectory.Goal:
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = [name]
    return goal


def send(ros, name: str, feedback=None):
    return ros[1].send_goal(FollowJointTrajectory, ACTION, goal_named(name), feedback=feedback)


def result_of(ros, handle):
    response = ros[1].wait_future(handle.get_result_async(), 10.0)
    return response.status, response.result


def running(ros, name: str):
    """Send a goal that runs until stopped; return its handle once it has stepped."""
    feedback = []
    handle = send(ros, name, feedback=feedback.append)
    assert handle.accepted
    assert ros[0].wait_until(lambda: len(feedback) > 0, 5.0), 'no feedback'
    return handle


def test_goal_steps_until_its_verdict(ros, server):
    feedback = []
    handle = send(ros, 'quick', feedback=feedback.append)
    assert handle.accepted
    status, result = result_of(ros, handle)
    assert (status, result.error_code, result.error_string) == (GoalStatus.STATUS_SUCCEEDED, 0, 'reached')
    assert len(feedback) == 3
    fb = feedback[-1].feedback
    assert list(fb.joint_names) == ['j'] and list(fb.error.positions) == [0.0]
    assert fb.desired.time_from_start.nanosec == 10_000_000          # 2 periods of 5 ms
    assert server.events == [('start', 'quick')]                      # succeeded: not stopped
    assert not server.active


def test_rejected_goal_never_starts(ros, server):
    assert not send(ros, 'bad').accepted
    assert server.events == []


def test_failed_start_aborts_and_stops(ros, server):
    status, result = result_of(ros, send(ros, 'nostart'))
    assert status == GoalStatus.STATUS_ABORTED
    assert (result.error_code, result.error_string) == (jtc.INVALID_GOAL, 'cannot start here')
    assert server.events == [('start', 'nostart'), ('stop', 'nostart')]


def test_cancel_runs_the_cancel_hook_and_ends_canceled(ros, server):
    handle = running(ros, 'long')
    ros[1].wait_future(handle.cancel_goal_async(), 5.0)
    status, result = result_of(ros, handle)
    assert status == GoalStatus.STATUS_CANCELED
    assert (result.error_code, result.error_string) == (jtc.SUCCESSFUL, 'canceled by the fake')
    assert server.events == [('start', 'long'), ('cancel', 'long')]


def test_stop_active_aborts_with_the_reason(ros, server):
    handle = running(ros, 'long')
    server.stop_active('simulation reset', wait=5.0)
    assert not server.active
    status, result = result_of(ros, handle)
    assert status == GoalStatus.STATUS_ABORTED
    assert (result.error_code, result.error_string) == (jtc.INVALID_GOAL, 'simulation reset')
    assert server.events == [('start', 'long'), ('stop', 'long')]


def test_preempted_goal_always_says_preempted_and_stops_before_the_next_starts(ros, server):
    previous = running(ros, 'first')
    for k in range(10):
        handle = running(ros, f'goal{k}')
        status, result = result_of(ros, previous)
        assert status == GoalStatus.STATUS_ABORTED
        assert (result.error_code, result.error_string) == (jtc.INVALID_GOAL, 'preempted by a new goal')
        previous = handle
    server.stop_active('done', wait=5.0)
    result_of(ros, previous)
    names = ['first'] + [f'goal{k}' for k in range(10)]
    expected = [event for a in names for event in (('start', a), ('stop', a))]
    assert server.events == expected                # each goal stopped before the next one started


def test_a_goal_accepted_out_of_order_is_preempted_itself_and_the_running_goal_goes_on(ros, server):
    handle = running(ros, 'long')
    stale = send(ros, 'stale')
    assert stale.accepted
    status, result = result_of(ros, stale)
    assert (status, result.error_string) == (GoalStatus.STATUS_ABORTED, 'preempted by a new goal')
    assert server.active                                # the running goal goes on
    server.stop_active('done', wait=5.0)
    assert result_of(ros, handle)[1].error_string == 'done'
    assert server.events == [('start', 'long'), ('stop', 'stale'), ('stop', 'long')]     # 'stale' never started


def test_outcome_of_status():
    assert outcome_of_status(GoalStatus.STATUS_SUCCEEDED) is jtc.GoalOutcome.SUCCEEDED
    assert outcome_of_status(GoalStatus.STATUS_CANCELED) is jtc.GoalOutcome.CANCELED
    assert outcome_of_status(GoalStatus.STATUS_ABORTED) is jtc.GoalOutcome.ABORTED
    assert outcome_of_status(GoalStatus.STATUS_UNKNOWN) is jtc.GoalOutcome.ABORTED


def test_locked_action_client_sends_cancels_and_gets_results(ros, server):
    helpers = ros[0]
    client = LockedActionClient(server.node, FollowJointTrajectory, ACTION)
    try:
        assert client.wait_for_server(timeout_sec=5.0)
        for _ in range(20):                          # fast answers, taken by other threads
            future = client.send_goal_async(goal_named('bad'))
            assert helpers.wait_until(future.done, 2.0, interval=0.001) and not future.result().accepted
        feedback = []
        future = client.send_goal_async(goal_named('long'), feedback_callback=feedback.append)
        assert helpers.wait_until(future.done, 2.0, interval=0.001)
        handle = future.result()
        assert handle.accepted and helpers.wait_until(lambda: len(feedback) > 0, 2.0)
        cancel = handle.cancel_goal_async()
        assert helpers.wait_until(cancel.done, 2.0, interval=0.001)
        result = handle.get_result_async()
        assert helpers.wait_until(result.done, 2.0, interval=0.001)
        assert result.result().status == GoalStatus.STATUS_CANCELED
    finally:
        client.destroy()


def test_a_goal_is_canceled_by_its_id_before_its_client_took_the_goal_response(ros, server):
    """The twin's dispatch on a loaded PC: a controller accepted a part, its answer waits in the twin's
    queue, and the twin gives up on it. Here the client's node is never spun (it never takes a response):
    the cancel sent by the goal's id still reaches the server, which ends the goal canceled."""
    node = rclpy.create_node('unspun_client', context=server.node.context)
    client = LockedActionClient(node, FollowJointTrajectory, ACTION)
    try:
        assert ros[0].wait_until(client.server_is_ready, 5.0)
        goal_id = client.new_goal_id()
        future = client.send_goal_async(goal_named('long'), goal_uuid=goal_id)
        assert ros[0].wait_until(lambda: ('start', 'long') in server.events, 5.0), server.events
        client.cancel_by_id(goal_id)
        assert ros[0].wait_until(lambda: ('cancel', 'long') in server.events, 5.0), server.events
        assert not future.done()            # the response was never taken: only the id canceled it
    finally:
        client.destroy()
        node.destroy_node()


def test_a_burst_of_goals_while_the_server_is_held_up_is_answered_in_full(ros):
    """30 goals arrive while the server's executor is held up (here: not yet spinning); once it
    spins, every one is answered. rclpy's default for an action's services keeps 10 requests:
    20 clients would wait for ever (a preemption storm on a loaded CI machine lost one)."""
    helpers, client = ros
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=int(os.environ['ROS_DOMAIN_ID']))
    node = rclpy.create_node('held_up_trajectory_server', context=context)
    burst = '/held_up/follow_joint_trajectory'
    FakeServer(node, burst)
    executor = MultiThreadedExecutor(num_threads=2, context=context)
    thread = threading.Thread(target=executor.spin, daemon=True)
    try:
        act = client.action_client(FollowJointTrajectory, burst)
        futures = [act.send_goal_async(goal_named('bad')) for _ in range(30)]
        time.sleep(1.0)                      # all 30 requests are in the server's reader by now
        assert not any(f.done() for f in futures)
        executor.add_node(node)
        thread.start()
        assert helpers.wait_until(lambda: all(f.done() for f in futures), 10.0), \
            f'{sum(not f.done() for f in futures)} of 30 goals got no answer'
        assert not any(f.result().accepted for f in futures)
    finally:
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        thread.join(timeout=2.0)
