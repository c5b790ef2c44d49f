"""shadow_twin.simulation.warp_rollout on Warp's CPU device: the same rollouts as ``mujoco.rollout`` within the
documented tolerance (float32 against float64), parameter sets batched per world, and clear refusals (issue 39).

The first rollout compiles Warp's kernels for the CPU (about 20 s here, once per machine: ~/.cache/warp)."""

import copy

import mujoco
import numpy as np
import pytest
from conftest import GAINS

pytest.importorskip('mujoco_warp')

from shadow_twin.calibration.scoring.evaluation import Evaluator  # noqa: E402
from shadow_twin.common.errors import ConfigError  # noqa: E402
from shadow_twin.control.controller import ControllerGains, SimController  # noqa: E402
from shadow_twin.model.calibratable import ParameterTarget, apply_parameters  # noqa: E402
from shadow_twin.model.mjcf import TwinModel  # noqa: E402
from shadow_twin.simulation.offline import TrajectorySimulator  # noqa: E402
from shadow_twin.simulation.warp_rollout import differing_fields, warp_rollout  # noqa: E402

#: The documented tolerance over 0.6 s of the hand closing (module doc of warp_rollout: within 1e-3 rad over 1 s;
#: measured here 2e-6 rad).
TOLERANCE = 1e-4
STEPS = 300


@pytest.fixture(scope='module')
def hand_simulator(hand_closing):
    twin = TwinModel()
    controller = SimController(twin.model, ControllerGains.from_yaml(GAINS))
    driven = [j for j in hand_closing.joint_names if j in controller.joint_names]
    return TrajectorySimulator(twin.model, controller, hand_closing.subset(driven), STEPS * twin.model.opt.timestep)


def parameter_sets():
    """The model as given and three others: damping, friction loss, stiffness, spring reference, range and a
    servo gain changed (fields batched per world)."""
    joint = lambda name, attribute: ParameterTarget('joint', name, attribute)  # noqa: E731
    return [{},
            {joint('rh_FFJ3', 'damping'): 0.4, joint('rh_FFJ2', 'frictionloss'): 0.2},
            {joint('rh_FFJ1', 'stiffness'): 0.003, joint('rh_FFJ1', 'springref'): -60.0,
             joint('rh_MFJ3', 'range_upper'): 1.2},
            {ParameterTarget('actuator', 'rh_FFJ3', 'kp'): 2.0, joint('rh_RFJ3', 'damping'): 0.01}]


def test_warp_on_the_cpu_moves_the_hand_as_mujoco_rollout(hand_simulator):
    sim = hand_simulator
    models = sim.model_copies(4)
    for model, values in zip(models, parameter_sets()):
        apply_parameters(model, values)
    reference = sim.run_with_clock(models, nthread=2)
    sim.backend, sim.device = 'warp', 'cpu'
    try:
        warp = sim.run_with_clock(models)
    finally:
        sim.backend, sim.device = 'cpu', None
    assert warp[0].shape == reference[0].shape == (4, STEPS, len(sim.controller.joint_names))
    np.testing.assert_allclose(warp[1], reference[1], rtol=0, atol=1e-4)             # the clocks (float32 time)
    np.testing.assert_allclose(warp[0], reference[0], rtol=0, atol=TOLERANCE)
    # the parameter sets moved the hand apart by far more than the tolerance: each world has its own
    spread = np.abs(reference[0][1:] - reference[0][0]).max(axis=(1, 2))
    assert np.all(spread > 100 * TOLERANCE), spread


def test_an_evaluator_on_warp_scores_as_on_the_cpu(real_recording, hand_closing):
    twin = TwinModel()
    controller = SimController(twin.model, ControllerGains.from_yaml(GAINS))
    short = hand_closing.subset(['rh_FFJ1', 'rh_FFJ2', 'rh_FFJ3', 'rh_FFJ4'])
    evaluator = Evaluator(twin, controller, real_recording, short, ['rh_FFJ3', 'rh_FFJ4'])
    evaluator.simulator.nstep = STEPS                   # the first 0.6 s only: the rollouts' cost on the CPU device
    evaluator.simulator.times = evaluator.simulator.times[:STEPS]
    evaluator.simulator.desired_positions = evaluator.simulator.desired_positions[:STEPS]
    evaluator.simulator.desired_velocities = evaluator.simulator.desired_velocities[:STEPS]
    sets = parameter_sets()[:2]
    cpu, stable = evaluator._simulate(sets, 2)
    evaluator.use_backend('warp', 'cpu')
    warp, stable_too = evaluator._simulate(sets, 2)
    assert stable == stable_too == [None, None]
    np.testing.assert_allclose(warp, cpu, rtol=0, atol=TOLERANCE)
    assert evaluator.backend == ('warp', 'cpu') and evaluator.simulator.backend == 'warp'


def test_fields_that_differ_are_batched_and_one_warp_cannot_batch_is_refused(hand_simulator):
    models = hand_simulator.model_copies(3)
    apply_parameters(models[1], parameter_sets()[1])
    batched = differing_fields(models)
    assert set(batched) == {'dof_damping', 'dof_frictionloss'} and batched['dof_damping'].shape[0] == 3
    other = copy.copy(models[0])
    other.geom_priority[3] += 1             # an int field MuJoCo Warp shares between worlds
    with pytest.raises(ConfigError, match='model field geom_priority, which MuJoCo Warp does not batch'):
        differing_fields([models[0], other])
    with pytest.raises(ConfigError, match='geom_priority'):
        warp_rollout([models[0], other], hand_simulator.initial_state, np.zeros((2, 3, models[0].nu)), 'cpu')


def test_unknown_backend_is_refused(real_recording, hand_closing):
    twin = TwinModel()
    controller = SimController(twin.model, ControllerGains.from_yaml(GAINS))
    evaluator = Evaluator(twin, controller, real_recording, hand_closing.subset(['rh_FFJ3']), ['rh_FFJ3'])
    with pytest.raises(ConfigError, match="backend 'gpu': expected one of cpu, warp"):
        evaluator.use_backend('gpu')
    assert evaluator.simulator.backend == 'cpu'


def test_mujoco_rollout_states_begin_with_time_and_qpos(hand_simulator):
    """What warp_rollout returns is what the callers read of mujoco.rollout's states: [time, qpos, ...]."""
    model = hand_simulator.model
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, hand_simulator.initial_state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    mujoco.mj_step(model, data)
    state = np.empty(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(model, data, state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    assert state[0] == data.time and np.array_equal(state[1:1 + model.nq], data.qpos)
