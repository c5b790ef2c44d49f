"""Tests of the simulation's queue of trajectories stamped for a later start
(shadow_twin.simulation.trajectory_queue, through LiveSimulation): a goal preempts at its
start, one canceled before its start changes nothing, and the order is the acceptance's."""

import numpy as np
import pytest

from shadow_twin.common.paths import config_path
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.simulation import trajectory_queue as tq
from shadow_twin.simulation.live.simulation import LiveSimulation

GAINS = config_path('controllers', 'shadow_hand_e.yaml')
JOINTS = ['rh_FFJ3', 'rh_MFJ3']


def move(to: float, seconds: float = 1.0) -> JointTrajectory:
    return JointTrajectory(JOINTS, [seconds], [[to, to]])


def test_queued_trajectory_preempts_at_its_start_not_before():
    sim = LiveSimulation(gains=GAINS)
    first = sim.set_trajectory(move(1.2, 1.0), start_time=0.0)
    second = sim.set_trajectory(move(0.2, 0.5), start_time=0.5)
    assert sim.trajectory_state(second) == tq.QUEUED
    sim.step_to(0.3)
    assert sim.trajectory_state(first) == tq.RUNNING
    assert sim.tracking(first).desired_position[0] == pytest.approx(1.2 * 0.3, abs=0.01)   # still the first
    queued = sim.tracking(second)                  # a queued goal has feedback: what its joints follow now
    assert queued.start_time == pytest.approx(0.5) and queued.sim_time < queued.start_time
    np.testing.assert_allclose(queued.desired_position, sim.tracking(first).desired_position)
    sim.step_to(0.52)
    assert sim.trajectory_state(first) == tq.PREEMPTED and sim.tracking(first) is None
    assert sim.trajectory_state(second) == tq.RUNNING
    # it took over where the first one had brought the joints at 0.5 s, not where they were when it came
    assert sim.tracking(second).start_time == pytest.approx(0.5)
    assert sim.tracking(second).desired_position[0] > 0.4          # the joints were at 0 when it was queued


def test_cancel_before_the_start_leaves_the_running_trajectory_untouched():
    reference = LiveSimulation(gains=GAINS)
    reference.set_trajectory(move(1.2, 1.0), start_time=0.0)
    reference.step_to(1.5)
    sim = LiveSimulation(gains=GAINS)
    first = sim.set_trajectory(move(1.2, 1.0), start_time=0.0)
    second = sim.set_trajectory(move(0.0, 0.5), start_time=0.6)
    sim.step_to(0.4)
    sim.cancel(second)
    assert sim.trajectory_state(second) == tq.CANCELED
    sim.step_to(1.5)
    assert sim.trajectory_state(first) == tq.RUNNING
    np.testing.assert_array_equal(sim.positions(JOINTS), reference.positions(JOINTS))   # bit for bit


def test_cancel_of_an_ended_token_changes_nothing():
    sim = LiveSimulation(gains=GAINS)
    first = sim.set_trajectory(move(1.0), start_time=0.0)
    second = sim.set_trajectory(move(0.5))              # now: preempts the first at once
    assert sim.trajectory_state(first) == tq.PREEMPTED
    sim.cancel(first)
    assert sim.trajectory_state(second) == tq.RUNNING


def test_order_is_the_reservation_not_the_call():
    sim = LiveSimulation(gains=GAINS)
    older, newer = sim.reserve_token(), sim.reserve_token()
    sim.set_trajectory(move(0.8), start_time=None, token=newer)
    sim.set_trajectory(move(0.1), start_time=None, token=older)        # set late: a newer one runs
    assert sim.trajectory_state(older) == tq.PREEMPTED
    assert sim.trajectory_state(newer) == tq.RUNNING


def test_a_start_preempts_everything_accepted_before_it_and_nothing_after():
    sim = LiveSimulation(gains=GAINS)
    late_start = sim.set_trajectory(move(1.0), start_time=0.8)       # accepted first, starts last
    early = sim.set_trajectory(move(0.5), start_time=0.2)
    later = sim.set_trajectory(move(0.3), start_time=0.6)            # accepted after ``early``
    sim.step_to(0.25)
    assert sim.trajectory_state(early) == tq.RUNNING
    assert sim.trajectory_state(late_start) == tq.PREEMPTED           # accepted before ``early``
    assert sim.trajectory_state(later) == tq.QUEUED
    sim.step_to(0.65)
    assert (sim.trajectory_state(early), sim.trajectory_state(later)) == (tq.PREEMPTED, tq.RUNNING)


def test_reset_and_reload_stop_queued_trajectories():
    sim = LiveSimulation(gains=GAINS)
    running = sim.set_trajectory(move(1.0), start_time=0.0)
    queued = sim.set_trajectory(move(0.5), start_time=5.0)
    sim.step_to(0.1)
    sim.reset()
    assert (sim.trajectory_state(running), sim.trajectory_state(queued)) == (tq.STOPPED, tq.STOPPED)
    sim.step_to(5.5)
    assert not sim.trajectory_active


def test_ended_reasons_are_bounded():
    queue = tq.TrajectoryQueue()
    for token in range(1, tq.ENDED_MEMORY + 11):
        queue.end(token, tq.CANCELED)
    assert queue.ended_why(1) is None and queue.ended_why(tq.ENDED_MEMORY + 10) == tq.CANCELED
    queue.end(tq.ENDED_MEMORY + 10, tq.PREEMPTED)
    assert queue.ended_why(tq.ENDED_MEMORY + 10) == tq.CANCELED          # the first reason is kept
