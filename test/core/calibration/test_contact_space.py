"""Contact and object parameters in the calibration space (issue 37: friction sliding and torsional,
solref time constant and damping ratio, solimp width, an object's mass and centre of mass):
config/calibration/scene_contacts.yaml resolves on the hand with the scene's can; set in place they
change the compiled model and its physics (the can's weight on the table follows its mass); written
into an MJCF they come back; bad entries and values are one-line errors."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml
from support.object_following import contact_normal_force

from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.common.errors import ModelError, SearchSpaceError
from shadow_twin.model.calibratable import ParameterTarget, apply_parameters, get_parameter
from shadow_twin.model.mjcf import TwinModel, write_calibrated_mjcf
from shadow_twin.model.scene import SceneConfig, add_objects

REPO = Path(__file__).resolve().parents[3]
SPACE = REPO / 'config' / 'calibration' / 'scene_contacts.yaml'
NAMES = ['can_friction', 'can_friction_torsional', 'can_solref_timeconst', 'can_solref_dampratio',
         'can_solimp_width', 'can_mass', 'can_com_z']


@pytest.fixture
def scene_model(tmp_path):
    """The built-in hand with the hand scene's objects (a can on a table), as an MJCF file's TwinModel."""
    twin = TwinModel(None, edit=lambda spec: add_objects(spec, SceneConfig.from_yaml(REPO / 'config' / 'scene_hand.yaml')))
    path = tmp_path / 'hand_scene.xml'
    path.write_text(twin.spec.to_xml())
    return TwinModel(path)


def can_support_force(model: mujoco.MjModel, seconds: float = 1.0) -> float:
    """N: the can's contacts' normal force after ``seconds`` at rest."""
    data = mujoco.MjData(model)
    for _ in range(int(seconds / model.opt.timestep)):
        mujoco.mj_step(model, data)
    return contact_normal_force(model, data, 'can')


def test_the_contact_space_resolves_on_the_scene_and_sets_the_compiled_model(scene_model):
    space = SearchSpace.from_yaml(SPACE, scene_model)
    assert space.names == NAMES
    model = scene_model.model
    can = model.geom('can').id
    expected = [model.geom_friction[can, 0], model.geom_friction[can, 1], model.geom_solref[can, 0],
                model.geom_solref[can, 1], model.geom_solimp[can, 2], model.body('can').mass[0],
                model.body('can').ipos[2]]
    assert space.defaults == pytest.approx(np.clip(expected, space.lows, space.highs))
    point = dict(zip(NAMES, (0.5, 0.002, 0.01, 0.7, 0.004, 0.455, -0.01)))
    inertia, mass = model.body('can').inertia.copy(), model.body('can').mass[0]
    apply_parameters(model, space.named_values(point))
    got = [get_parameter(model, t) for d in space.dimensions for t in d.targets]
    assert got == pytest.approx(list(point.values()))
    assert model.geom_friction[can, :2] == pytest.approx([0.5, 0.002]) and model.geom_solref[can] == pytest.approx([0.01, 0.7])
    assert model.body('can').inertia == pytest.approx(inertia * 0.455 / mass)      # same shape and density


def test_the_weight_on_the_table_follows_the_mass_set_in_place(scene_model):
    model = scene_model.model
    base = can_support_force(model)
    target = ParameterTarget('body', 'can', 'mass')
    assert base == pytest.approx(get_parameter(model, target) * 9.81, rel=0.02)
    apply_parameters(model, {target: 0.7})
    assert can_support_force(model) == pytest.approx(0.7 * 9.81, rel=0.02)


def test_written_into_an_mjcf_they_come_back(scene_model, tmp_path):
    space = SearchSpace.from_yaml(SPACE, scene_model)
    point = dict(zip(NAMES, (1.1, 0.01, 0.03, 1.5, 0.002, 0.25, 0.02)))
    out = write_calibrated_mjcf(scene_model, space.named_values(point), tmp_path / 'calibrated.xml')
    again = TwinModel(out)
    got = [get_parameter(again.model, t) for d in space.dimensions for t in d.targets]
    assert got == pytest.approx(list(point.values()))
    original = scene_model.model.body('can')
    assert again.model.body('can').inertia == pytest.approx(original.inertia * 0.25 / original.mass[0], rel=1e-5)   # MJCF's 6 digits


@pytest.mark.parametrize('entry, words', [
    ({'name': 'm', 'bodies': ['no_such_*'], 'attribute': 'mass', 'bounds': [0.1, 1.0]}, "no body matches 'no_such_*'"),
    ({'name': 'm', 'bodies': ['can'], 'attribute': 'density', 'bounds': [0.1, 1.0]}, "unknown body attribute 'density'"),
    ({'name': 'w', 'geoms': ['can'], 'attribute': 'solimp_width', 'bounds': [-1.0, 0.0]}, 'leave nothing'),
])
def test_bad_entries_are_one_line_errors(scene_model, tmp_path, entry, words):
    path = tmp_path / 'space.yaml'
    path.write_text(yaml.safe_dump({'parameters': [entry]}))
    with pytest.raises(SearchSpaceError) as raised:
        SearchSpace.from_yaml(path, scene_model)
    assert words in str(raised.value) and '\n' not in str(raised.value)


def test_a_mass_at_or_below_zero_is_refused(scene_model):
    with pytest.raises(ModelError, match='mass must be positive'):
        apply_parameters(scene_model.model, {ParameterTarget('body', 'can', 'mass'): 0.0})
