"""shadow_twin.calibration.scoring.reduced: the search on the smallest model that gives the objective joints,
on the real hand recording (issue 39). Equal to the whole model where nothing couples; the whole model, said in
the log, where something does."""

import copy
import logging

import numpy as np
import pytest
from conftest import FF_JOINTS, GAINS, REPO

from shadow_twin.calibration.scoring import reduced as reduced_mod
from shadow_twin.calibration.scoring.evaluation import Evaluator
from shadow_twin.calibration.scoring.evaluator_set import EvaluatorSet
from shadow_twin.calibration.scoring.reduced import search_model
from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.common.errors import ConfigError, TrajectoryError
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.model.mjcf import TwinModel

SPACE = REPO / 'config' / 'calibration' / 'fingers_j123.yaml'
WRIST = ('rh_WRJ1', 'rh_WRJ2')


def fixed_wrist(spec):
    """The hand with its wrist bolted (a Shadow hand mounted without the wrist): the palm is welded to the world."""
    for actuator in [a for a in spec.actuators if a.name in WRIST]:
        spec.delete(actuator)
    for joint in [j for j in spec.joints if j.name in WRIST]:
        spec.delete(joint)


def touching_fingers(spec):
    """Also the middle finger's geoms collide with the first finger's (conaffinity 1: a coupling by contact)."""
    fixed_wrist(spec)
    for geom in spec.geoms:
        if geom.name.startswith('rh_mf'):
            geom.conaffinity = 1


def evaluator_for(recording, trajectory, edit=None, joints=FF_JOINTS):
    twin = TwinModel(edit=edit)
    controller = SimController(twin.model, ControllerGains.from_yaml(GAINS))
    driven = [j for j in trajectory.joint_names if j in controller.joint_names]
    return Evaluator(twin, controller, recording, trajectory.subset(driven), joints)


def random_sets(twin, count, seed=0):
    space = SearchSpace.from_yaml(SPACE, twin)
    rng = np.random.default_rng(seed)
    return [space.values(space.from_unit(rng.uniform(0, 1, (1, len(space.dimensions))))[0]) for _ in range(count)]


@pytest.fixture(scope='module')
def bolted(real_recording, hand_closing):
    return evaluator_for(real_recording, hand_closing, fixed_wrist)


def test_where_nothing_couples_the_reduced_model_gives_the_whole_models_objective(bolted, caplog):
    with caplog.at_level(logging.INFO, logger='shadow_twin.calibration.scoring.reduced'):
        search = search_model(bolted, 'exact')
    assert search.reduced and search.evaluator is not bolted
    assert 'rh_mfknuckle, rh_rfknuckle, rh_lfmetacarpal, rh_thbase' in caplog.text
    assert search.evaluator.model.nv == 4 and bolted.model.nv == 22
    sets = [{}] + random_sets(bolted.twin, 6)      # the model as given and six points of the space
    whole = bolted.evaluate_scored_residuals(sets, nthread=2)
    small = search.evaluator.evaluate_scored_residuals(sets, nthread=2)
    spread = np.ptp([s.objective for s in whole[0]])
    assert spread > 1e-4                            # the sets differ: equal objectives are no accident
    for a, b in zip(whole[0], small[0]):
        assert abs(a.objective - b.objective) <= 1e-9, (a.objective, b.objective)
        assert set(b.per_joint_mse) == set(FF_JOINTS)
    np.testing.assert_allclose(whole[1], small[1], rtol=0, atol=1e-9)
    # auto removes the same parts: nothing couples, nothing is measured
    auto = search_model(bolted, 'auto')
    assert auto.reduced and auto.objective_gap is None and auto.rollout_s == {}


def test_fingers_that_can_touch_are_kept_together(real_recording, hand_closing, caplog):
    evaluator = evaluator_for(real_recording, hand_closing, touching_fingers)
    with caplog.at_level(logging.INFO, logger='shadow_twin.calibration.scoring.reduced'):
        search = search_model(evaluator, 'exact')
    assert 'kept rh_mfknuckle (contact: geom rh_mf' in caplog.text
    assert search.reduced and search.evaluator.model.nv == 8     # the first and middle fingers
    sets = [{}] + random_sets(evaluator.twin, 3, seed=1)
    for a, b in zip(evaluator.evaluate(sets), search.evaluator.evaluate(sets)):
        assert abs(a.objective - b.objective) <= 1e-9


def test_a_wrist_carrying_the_other_fingers_is_a_load_coupling(real_recording, hand_closing, caplog, monkeypatch):
    evaluator = evaluator_for(real_recording, hand_closing)
    with caplog.at_level(logging.INFO, logger='shadow_twin.calibration.scoring.reduced'):
        exact = search_model(evaluator, 'exact')
    assert not exact.reduced and exact.evaluator is evaluator
    assert 'the whole model (24 dofs)' in caplog.text and 'moves with rh_WRJ2, rh_WRJ1' in caplog.text
    auto = search_model(evaluator, 'auto')
    assert auto.reduced and auto.evaluator.model.nv == 6
    gap = auto.objective_gap
    assert 0 < abs(gap) <= reduced_mod.LOAD_TOLERANCE               # measured, not assumed
    whole = evaluator.evaluate([{}])[0].objective
    assert auto.evaluator.evaluate([{}])[0].objective == pytest.approx(whole * (1 + gap), rel=1e-12)
    assert auto.rollout_s['reduced'] < auto.rollout_s['full']
    # a tolerance the measured gap exceeds: the whole model, and the log says why
    monkeypatch.setattr(reduced_mod, 'LOAD_TOLERANCE', abs(gap) / 2)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger='shadow_twin.calibration.scoring.reduced'):
        strict = search_model(evaluator, 'auto')
    assert not strict.reduced and strict.evaluator is evaluator
    assert 'the whole model: removing rh_mfknuckle' in caplog.text and 'more than' in caplog.text


def test_several_recordings_each_reduced_and_parameters_of_removed_parts_skipped(bolted):
    both = EvaluatorSet([bolted, bolted], [1.0, 3.0])
    search = search_model(both, 'exact')
    assert isinstance(search.evaluator, EvaluatorSet) and search.evaluator.recording_weights == [1.0, 3.0]
    values = random_sets(bolted.twin, 1, seed=2)[0]
    assert any(t.name.startswith('rh_MF') for t in values)          # the middle finger's, not in the reduced model
    assert search.evaluator.evaluate([values])[0].objective == pytest.approx(both.evaluate([values])[0].objective,
                                                                             abs=1e-9)


def test_off_and_unknown_modes(bolted):
    assert search_model(bolted, 'off').evaluator is bolted
    with pytest.raises(ConfigError, match="reduce 'fast': expected one of auto, exact, off"):
        search_model(bolted, 'fast')


def test_an_objective_joint_outside_the_reduced_model_is_refused(bolted):
    search = search_model(bolted, 'exact')
    other = copy.copy(bolted)
    other.objective_joints = ['rh_MFJ3']
    with pytest.raises(TrajectoryError, match=r"objective joint\(s\) \['rh_MFJ3'\] are not in the reduced model"):
        other.on_model(search.evaluator.model, search.evaluator.controller)


def test_the_progress_bar_names_the_search_model(bolted, real_recording, hand_closing):
    assert search_model(bolted, 'exact').short() == 'reduced model, 4 of 22 dofs'
    assert search_model(bolted, 'off').short() == 'whole model, 22 dofs'
