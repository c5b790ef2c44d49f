"""The MiR250's drive-wheel suspension (issue 37; shadow_twin/model/cell/base.py, ``cell.base.suspension_*``):
absent by default (rigid wheels, the study's model), a spring-loaded slide per drive wheel before its hinge
when a stiffness is set, whose spring carries the wheel's floor load at rest; the wheels' hinges,
actuators and the controlled joints are unchanged; its calibration space resolves on a suspended cell
only; bad figures are one-line errors."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest
from support.object_following import contact_normal_force

from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.common.errors import ConfigError, SearchSpaceError
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.model.cell.assembly import BASE_WHEEL_JOINTS, CellConfig, build_cell_spec, write_cell_mjcf
from shadow_twin.model.mjcf import TwinModel

REPO = Path(__file__).resolve().parents[3]
SPACE = REPO / 'config' / 'calibration' / 'mir250_suspension.yaml'
CELL_GAINS = REPO / 'config' / 'controllers' / 'cell.yaml'
STIFFNESS, PRELOAD, DAMPING = 200e3, 550.0, 3000.0
SLIDES = ('left_wheel_suspension_joint', 'right_wheel_suspension_joint')


def suspended(**base) -> CellConfig:
    values = {'suspension_stiffness': STIFFNESS, 'suspension_preload': PRELOAD, 'suspension_damping': DAMPING}
    return CellConfig.from_dict({'cell': {'base': {**values, **base}}})


@pytest.fixture(scope='module')
def models():
    """(rigid, suspended) cells compiled."""
    return build_cell_spec().compile(), build_cell_spec(suspended()).compile()


def test_rigid_by_default_and_a_slide_before_each_wheel_hinge_with_a_stiffness(models):
    rigid, sprung = models
    assert all(mujoco.mj_name2id(rigid, mujoco.mjtObj.mjOBJ_JOINT, name) < 0 for name in SLIDES)
    assert sprung.njnt == rigid.njnt + 2 and sprung.nu == rigid.nu
    for slide, hinge in zip(SLIDES, BASE_WHEEL_JOINTS):
        j, h = sprung.joint(slide), sprung.joint(hinge)
        body = sprung.body(h.bodyid[0])
        first = body.jntadr[0]
        assert [sprung.joint(first + k).name for k in range(body.jntnum[0])] == [slide, hinge]   # slide first
        assert j.type[0] == mujoco.mjtJoint.mjJNT_SLIDE and np.allclose(j.axis, [0, 0, 1])
        assert sprung.jnt_stiffness[j.id] == pytest.approx(STIFFNESS)
        assert sprung.qpos_spring[j.qposadr[0]] == pytest.approx(-PRELOAD / STIFFNESS)
        assert sprung.dof_damping[j.dofadr[0]] == pytest.approx(DAMPING)
        assert np.allclose(sprung.jnt_range[j.id], [-0.015, 0.015])
        r = rigid.joint(hinge)             # the hinge re-added after the slide keeps its figures
        for field in ('jnt_axis', 'jnt_pos', 'jnt_limited'):
            assert np.allclose(getattr(sprung, field)[h.id], getattr(rigid, field)[r.id]), field
        for field in ('dof_armature', 'dof_damping', 'dof_frictionloss'):
            assert getattr(sprung, field)[h.dofadr[0]] == pytest.approx(getattr(rigid, field)[r.dofadr[0]]), field
    gains = ControllerGains.from_yaml(CELL_GAINS)
    assert SimController(sprung, gains).joint_names == SimController(rigid, gains).joint_names   # passive: unpublished


def test_at_rest_the_spring_carries_each_drive_wheel_to_the_floor(models):
    _, model = models
    data = mujoco.MjData(model)
    for _ in range(1500):                                   # 3 s: settled
        mujoco.mj_step(model, data)
    for side, slide in zip(('left', 'right'), SLIDES):
        j = model.joint(slide)
        q, qd = data.qpos[j.qposadr[0]], data.qvel[j.dofadr[0]]
        spring = STIFFNESS * (model.qpos_spring[j.qposadr[0]] - q)           # N along +z on the wheel (< 0: down)
        assert abs(qd) < 1e-3 and abs(q) < 0.015                           # at rest, inside its travel
        wheel_weight = model.body(f'{side}_wheel_link').mass[0] * 9.81
        assert contact_normal_force(model, data, f'{side}_wheel_contact') == pytest.approx(-spring + wheel_weight, rel=0.03)


def test_its_calibration_space_resolves_on_a_suspended_cell_only(tmp_path):
    path, _ = write_cell_mjcf(suspended(), tmp_path / 'sprung.xml')
    space = SearchSpace.from_yaml(SPACE, TwinModel(path))
    assert space.names == ['suspension_stiffness', 'suspension_springref']
    assert space.defaults == pytest.approx([STIFFNESS, -PRELOAD / STIFFNESS])
    rigid, _ = write_cell_mjcf(None, tmp_path / 'rigid.xml')
    with pytest.raises(SearchSpaceError) as raised:
        SearchSpace.from_yaml(SPACE, TwinModel(rigid))
    assert 'suspension_stiffness' in str(raised.value) and '\n' not in str(raised.value)


@pytest.mark.parametrize('key, value', [('suspension_stiffness', -1.0), ('suspension_preload', float('nan')),
                                        ('suspension_damping', 'soft'), ('suspension_travel', 0.0)])
def test_bad_suspension_figures_are_one_line_errors(key, value):
    with pytest.raises(ConfigError) as raised:
        CellConfig.from_dict({'cell': {'base': {key: value}}})
    assert f'base.{key}' in str(raised.value) and '\n' not in str(raised.value)
