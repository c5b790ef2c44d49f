"""The bridge serves its run state over ROS 2's simulation_interfaces (GetSimulatorFeatures,
Get/SetSimulationState, ResetSimulation, StepSimulation): one bridge process with ``publish_clock``
(its joint states are stamped with sim time, so a step is seen on the stamps), called as a client
of the standard would. Also: the constants of the core's run-state module equal the generated
classes' (upstream's)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

sim_msg = pytest.importorskip('simulation_interfaces.msg')
sim_srv = pytest.importorskip('simulation_interfaces.srv')

from shadow_twin.common.stamps import to_seconds  # noqa: E402
from support import bridge as bridge_support  # noqa: E402
from support.bridge import namespaced_bridge  # noqa: E402
from shadow_twin.simulation.live import run_state as rs  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NS = '/ctl/mujoco_bridge'


def test_run_state_constants_are_upstreams():
    state, result = sim_msg.SimulationState, sim_msg.Result
    assert (rs.STOPPED, rs.PLAYING, rs.PAUSED, rs.QUITTING, rs.NO_WORLD, rs.LOADING_WORLD) == (
        state.STATE_STOPPED, state.STATE_PLAYING, state.STATE_PAUSED, state.STATE_QUITTING, state.STATE_NO_WORLD,
        state.STATE_LOADING_WORLD)
    assert (rs.RESULT_FEATURE_UNSUPPORTED, rs.RESULT_OK, rs.RESULT_NOT_FOUND, rs.RESULT_INCORRECT_STATE,
            rs.RESULT_OPERATION_FAILED) == (result.RESULT_FEATURE_UNSUPPORTED, result.RESULT_OK,
                                            result.RESULT_NOT_FOUND, result.RESULT_INCORRECT_STATE,
                                            result.RESULT_OPERATION_FAILED)
    response = sim_srv.SetSimulationState.Response
    assert (rs.ALREADY_IN_TARGET_STATE, rs.STATE_TRANSITION_ERROR, rs.INCORRECT_TRANSITION) == (
        response.ALREADY_IN_TARGET_STATE, response.STATE_TRANSITION_ERROR, response.INCORRECT_TRANSITION)
    reset = sim_srv.ResetSimulation.Request
    assert (rs.SCOPE_DEFAULT, rs.SCOPE_TIME, rs.SCOPE_STATE, rs.SCOPE_SPAWNED, rs.SCOPE_ALL) == (
        reset.SCOPE_DEFAULT, reset.SCOPE_TIME, reset.SCOPE_STATE, reset.SCOPE_SPAWNED, reset.SCOPE_ALL)


@pytest.fixture(scope='module')
def clocked(ros, tmp_path_factory):
    """A hand bridge stamping its joint states with sim time, in namespace /ctl."""
    from sensor_msgs.msg import JointState
    states = ros[1].record(JointState, '/ctl/joint_states', depth=2000)
    proc = namespaced_bridge(ros, tmp_path_factory.mktemp('control'), '/ctl', lambda: states.count() > 0,
                             publish_clock=True)
    yield proc, states
    assert proc.stop() == 0, proc.output()


def call(ros, srv, service, **fields):
    """The bridge's ``service`` (its name in the bridge's namespace), called with ``fields``."""
    return bridge_support.call(ros, srv, f'{NS}/{service}', **fields)


def set_state(ros, state):
    return call(ros, sim_srv.SetSimulationState, 'set_simulation_state',
                state=sim_msg.SimulationState(state=state)).result


def get_state(ros) -> int:
    return call(ros, sim_srv.GetSimulationState, 'get_simulation_state').state.state


def newest_stamp(ros, states, after: float | None = None) -> float:
    """The stamp (sim time, s) of the newest joint state, once one newer than ``after`` arrived
    (a paused bridge repeats its frozen state: the wait is for a message, not a new stamp)."""
    count = states.count()
    assert ros[0].wait_until(lambda: states.count() > count + 2, 5.0)
    return to_seconds(states.last().header.stamp)


def test_features_name_what_is_served(ros, clocked):
    answer = call(ros, sim_srv.GetSimulatorFeatures, 'get_simulator_features').features
    features, f = set(answer.features), sim_msg.SimulatorFeatures
    assert {f.SIMULATION_STATE_GETTING, f.SIMULATION_STATE_SETTING, f.SIMULATION_STATE_PAUSE, f.SIMULATION_RESET,
            f.SIMULATION_RESET_STATE, f.STEP_SIMULATION_SINGLE, f.STEP_SIMULATION_MULTIPLE, f.SPAWNING, f.DELETING,
            f.ENTITY_STATE_GETTING, f.ENTITY_STATE_SETTING, f.SIMULATION_RESET_SPAWNED} <= features
    assert f.SIMULATION_RESET_TIME not in features and f.ENTITY_TAGS not in features
    assert list(answer.spawn_formats) == ['shadow_twin_scene_object']


def test_pause_step_stop_and_play(ros, clocked):
    proc, states = clocked
    assert get_state(ros) == rs.PLAYING
    refused = call(ros, sim_srv.StepSimulation, 'step_simulation', steps=5).result
    assert refused.result == rs.RESULT_OPERATION_FAILED and 'pause it first' in refused.error_message
    assert set_state(ros, rs.PAUSED).result == rs.RESULT_OK and get_state(ros) == rs.PAUSED
    frozen = newest_stamp(ros, states)
    assert newest_stamp(ros, states) == frozen                   # paused: sim time stands
    again = set_state(ros, rs.PAUSED)
    assert again.result == rs.ALREADY_IN_TARGET_STATE and again.error_message == 'already paused'
    dt = 0.002                                                    # the built-in hand's timestep
    assert call(ros, sim_srv.StepSimulation, 'step_simulation', steps=7).result.result == rs.RESULT_OK
    assert newest_stamp(ros, states) == pytest.approx(frozen + 7 * dt, abs=1e-9)
    assert call(ros, sim_srv.StepSimulation, 'step_simulation', steps=1).result.result == rs.RESULT_OK
    assert newest_stamp(ros, states) == pytest.approx(frozen + 8 * dt, abs=1e-9)
    too_many = call(ros, sim_srv.StepSimulation, 'step_simulation', steps=10**9).result
    assert too_many.result == rs.RESULT_OPERATION_FAILED and 'per call' in too_many.error_message
    # stop: paused and reset (the hand back at its keyframe), sim time not set back
    assert set_state(ros, rs.STOPPED).result == rs.RESULT_OK and get_state(ros) == rs.STOPPED
    assert newest_stamp(ros, states) == pytest.approx(frozen + 8 * dt, abs=1e-9)
    assert set_state(ros, rs.QUITTING).result == rs.RESULT_FEATURE_UNSUPPORTED and get_state(ros) == rs.STOPPED
    assert set_state(ros, rs.PLAYING).result == rs.RESULT_OK and get_state(ros) == rs.PLAYING
    start = newest_stamp(ros, states)
    assert ros[0].wait_until(lambda: to_seconds(states.last().header.stamp) > start + 0.5, 5.0)   # runs again
    assert ros[0].wait_until(lambda: 'set_simulation_state playing: resumed at sim time' in proc.output(), 5.0), proc.output()[-1500:]


def test_reset_scopes_over_the_service(ros, clocked):
    reset = sim_srv.ResetSimulation.Request
    ok = call(ros, sim_srv.ResetSimulation, 'reset_simulation', scope=reset.SCOPE_DEFAULT).result
    assert ok.result == rs.RESULT_OK and 'sim time runs on' in ok.error_message
    assert call(ros, sim_srv.ResetSimulation, 'reset_simulation', scope=reset.SCOPE_STATE).result.result == rs.RESULT_OK
    time_only = call(ros, sim_srv.ResetSimulation, 'reset_simulation', scope=reset.SCOPE_TIME).result
    assert time_only.result == rs.RESULT_FEATURE_UNSUPPORTED and 'never goes back' in time_only.error_message
    assert get_state(ros) == rs.PLAYING                          # a reset leaves a running simulation running
