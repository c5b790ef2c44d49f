"""The run state and its requests as simulation_interfaces names them (ROS-free part): every
transition SetSimulationState may ask for, and every ResetSimulation scope."""

import itertools

import pytest

from shadow_twin.simulation.live import run_state as rs

RUNNING = (rs.PLAYING, rs.PAUSED, rs.STOPPED)


def test_run_state_from_paused_and_stopped():
    assert rs.run_state(False, False) == rs.run_state(False, True) == rs.PLAYING     # running: never stopped
    assert rs.run_state(True, False) == rs.PAUSED and rs.run_state(True, True) == rs.STOPPED


@pytest.mark.parametrize('current, target', list(itertools.product(RUNNING, RUNNING)))
def test_transitions_between_the_run_states(current, target):
    plan = rs.plan_transition(current, target)
    if current == target:
        assert plan.result == rs.ALREADY_IN_TARGET_STATE and not plan.reset and plan.paused is None
        assert plan.stopped == (current == rs.STOPPED)          # asking again changes nothing
        return
    assert plan.result == rs.RESULT_OK
    # what the simulation is after doing the plan (paused as planned, else as it was)
    paused = plan.paused if plan.paused is not None else current != rs.PLAYING
    assert rs.run_state(paused, plan.stopped) == target
    assert plan.reset == (target == rs.STOPPED)                 # stopping is pausing and resetting


@pytest.mark.parametrize('target', [rs.QUITTING, rs.NO_WORLD, rs.LOADING_WORLD, 6, 200])
def test_states_the_bridge_does_not_set_are_refused_and_nothing_changes(target):
    for current in RUNNING:
        plan = rs.plan_transition(current, target)
        assert plan.result != rs.RESULT_OK and not plan.reset and plan.paused is None
        assert plan.stopped == (current == rs.STOPPED) and plan.message
    assert rs.plan_transition(rs.PLAYING, rs.QUITTING).result == rs.RESULT_FEATURE_UNSUPPORTED
    assert rs.plan_transition(rs.PLAYING, 200).result == rs.INCORRECT_TRANSITION


@pytest.mark.parametrize('scope, spawning, state, spawned, ok', [
    (rs.SCOPE_DEFAULT, False, True, False, True),               # DEFAULT is ALL
    (rs.SCOPE_ALL, False, True, False, True),
    (rs.SCOPE_ALL, True, True, True, True),
    (rs.SCOPE_STATE, True, True, False, True),
    (rs.SCOPE_STATE | rs.SCOPE_TIME, False, True, False, True),
    (rs.SCOPE_TIME, True, False, False, False),                 # sim time never goes back
    (rs.SCOPE_SPAWNED, False, False, False, False),             # nothing is spawned
    (rs.SCOPE_SPAWNED, True, False, True, True),
    (rs.SCOPE_SPAWNED | rs.SCOPE_TIME, True, False, True, True),
])
def test_reset_scopes(scope, spawning, state, spawned, ok):
    plan = rs.plan_reset(scope, spawning)
    assert (plan.result == rs.RESULT_OK) == ok and (plan.state, plan.spawned) == (state, spawned)
    assert ('time' in plan.message) == bool((scope or rs.SCOPE_ALL) & rs.SCOPE_TIME), plan.message
