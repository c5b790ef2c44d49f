"""shadow_twin.model.mjcf: loading MJCF (with Shadow's symlink stubs), selecting, setting
parameters in the compiled model, and writing a calibrated MJCF."""

import shutil

import mujoco
import numpy as np
import pytest

from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.common.errors import ModelError
from shadow_twin.model.calibratable import (JOINT_ATTRIBUTES, ParameterTarget, apply_parameters, get_parameter,
                                            set_parameter)
from shadow_twin.model.mjcf import TwinModel, builtin_model_path, compile_error, write_calibrated_mjcf
from shadow_twin.simulation.offline import TrajectorySimulator
from shadow_twin.control.trajectory import JointTrajectory

from conftest import GAINS, README_JOINTS

FINGERS = ('FF', 'MF', 'RF', 'LF')


def closing_trajectory(duration=1.5):
    """A short flexion of every finger's J1-J3 (position-only, linear)."""
    joints = [f'rh_{f}J{k}' for f in FINGERS for k in (1, 2, 3)]
    return JointTrajectory(joints, [duration], [[1.2] * len(joints)], name='close')


def simulate(path_or_twin, values=None, duration=2.0):
    """Positions (nstep, J) of the closing trajectory on a model with ``values`` set in place."""
    twin = path_or_twin if isinstance(path_or_twin, TwinModel) else TwinModel(path_or_twin)
    controller = SimController(twin.model, ControllerGains.from_yaml(GAINS))
    apply_parameters(twin.model, values or {})
    sim = TrajectorySimulator(twin.model, controller, closing_trajectory(), duration)
    return sim.run([twin.model])[0], controller


# -- loading -----------------------------------------------------------------------------------
def test_builtin_model_loads():
    twin = TwinModel()
    assert twin.path == builtin_model_path() and twin.path.is_file()
    assert sorted(twin.joint_names) == sorted(README_JOINTS)
    assert len(twin.actuator_names) == 20
    assert {'rh_FFJ0', 'rh_MFJ0', 'rh_RFJ0', 'rh_LFJ0'} <= set(twin.actuator_names)
    with pytest.raises(ModelError, match="no built-in model 'nope'"):
        builtin_model_path('nope')


def test_shadow_model_loads_with_symlink_stubs_resolved(shadow_model):
    includes = sorted((shadow_model.parent / 'meshes' / 'arm_and_hand_meshes' / 'duplicate_geoms').glob('*.xml'))
    assert includes
    if all(not p.is_symlink() and b'<' not in p.read_bytes() for p in includes):
        # git symlink stubs (a relative path as text): MuJoCo alone cannot load the model
        with pytest.raises(Exception, match='Include error'):
            mujoco.MjSpec.from_file(str(shadow_model)).compile()
    twin = TwinModel(shadow_model)
    assert sorted(twin.joint_names) == sorted(README_JOINTS)
    assert len(twin.actuator_names) == 20
    assert twin.model.ngeom > TwinModel().model.ngeom  # the meshes of the duplicate geoms are there


def test_missing_model_file(tmp_path):
    with pytest.raises(ModelError, match='model file not found'):
        TwinModel(tmp_path / 'absent.xml')


def test_non_compiling_model_reports_mujoco_text(tmp_path):
    bad = tmp_path / 'bad.xml'
    bad.write_text('<mujoco><worldbody><body><joint name="a"/><geom size="0.1"/></body></worldbody>'
                   '<tendon><fixed name="t"><joint joint="zz" coef="1"/></fixed></tendon></mujoco>')
    with pytest.raises(ModelError) as info:
        TwinModel(bad)
    message = str(info.value)
    assert str(bad) in message and 'does not compile' in message
    assert "joint 'zz' not found" in message  # MuJoCo's own text
    assert '\n' not in message
    assert compile_error(bad) == message
    assert compile_error(builtin_model_path()) is None


def test_unparsable_model(tmp_path):
    bad = tmp_path / 'broken.xml'
    bad.write_text('<mujoco><worldbody><body>')
    with pytest.raises(ModelError, match='does not parse.*XML'):
        TwinModel(bad)


# -- selection and targets ---------------------------------------------------------------------
def test_select_by_glob_and_class():
    twin = TwinModel()
    assert twin.select('joint', ['rh_[FMRL]FJ1']) == ['rh_FFJ1', 'rh_MFJ1', 'rh_RFJ1', 'rh_LFJ1']
    assert twin.select('joint', classes=['FJ3']) == ['rh_FFJ3', 'rh_MFJ3', 'rh_RFJ3', 'rh_LFJ3']
    union = twin.select('joint', ['rh_THJ1'], ['FJ3'])
    assert union == ['rh_FFJ3', 'rh_MFJ3', 'rh_RFJ3', 'rh_LFJ3', 'rh_THJ1']  # model order
    assert twin.select('actuator', ['rh_*J0']) == ['rh_FFJ0', 'rh_MFJ0', 'rh_RFJ0', 'rh_LFJ0']
    assert twin.joint_class('rh_FFJ2') == 'FJ2'
    with pytest.raises(ModelError, match="no joint matches 'rh_XXJ\\*'"):
        twin.select('joint', ['rh_XXJ*'])
    with pytest.raises(ModelError, match="no joint has default class 'nope'"):
        twin.select('joint', classes=['nope'])


def test_select_by_class_on_shadow_model(shadow_model):
    twin = TwinModel(shadow_model)
    assert twin.select('joint', classes=['FJ1']) == ['rh_FFJ1', 'rh_MFJ1', 'rh_RFJ1', 'rh_LFJ1']


def test_target_validation():
    twin = TwinModel()
    assert twin.target('joint', 'rh_FFJ1', 'damping') == ParameterTarget('joint', 'rh_FFJ1', 'damping')
    assert str(twin.target('actuator', 'rh_FFJ0', 'kp')) == 'rh_FFJ0.kp'
    with pytest.raises(ModelError, match="unknown joint attribute 'mass'"):
        twin.target('joint', 'rh_FFJ1', 'mass')
    with pytest.raises(ModelError, match="no joint named 'rh_FFJ9'"):
        twin.target('joint', 'rh_FFJ9', 'damping')
    with pytest.raises(ModelError, match="no actuator named 'rh_FFJ1'"):
        twin.target('actuator', 'rh_FFJ1', 'kp')  # J1 is driven through the J0 tendon
    with pytest.raises(ModelError, match='unknown actuator attribute'):
        twin.target('actuator', 'rh_FFJ0', 'damping')


# -- parameters in the compiled model ----------------------------------------------------------
def test_set_and_get_each_joint_attribute_in_place():
    twin = TwinModel()
    m = twin.model
    jid = twin.joint_id('rh_MFJ2')
    dof, qpos = m.jnt_dofadr[jid], m.jnt_qposadr[jid]
    slots = {'damping': lambda: m.dof_damping[dof], 'frictionloss': lambda: m.dof_frictionloss[dof],
             'armature': lambda: m.dof_armature[dof], 'stiffness': lambda: m.jnt_stiffness[jid],
             'springref': lambda: m.qpos_spring[qpos], 'range_lower': lambda: m.jnt_range[jid, 0],
             'range_upper': lambda: m.jnt_range[jid, 1]}
    assert set(slots) == set(JOINT_ATTRIBUTES)
    for k, attribute in enumerate(JOINT_ATTRIBUTES):
        target = twin.target('joint', 'rh_MFJ2', attribute)
        assert get_parameter(m, target) == slots[attribute]()
        value = 0.123 + 0.01 * k
        set_parameter(m, target, value)
        assert slots[attribute]() == value
        assert get_parameter(m, target) == value
    # other joints untouched
    assert m.dof_damping[m.jnt_dofadr[twin.joint_id('rh_FFJ2')]] != 0.123


def test_parameters_change_the_motion():
    base, controller = simulate(TwinModel())
    k3 = controller.joint_names.index('rh_FFJ3')
    twin = TwinModel()
    damping = twin.target('joint', 'rh_FFJ3', 'damping')
    default = get_parameter(twin.model, damping)
    slowed, _ = simulate(twin, {damping: default * 20})
    assert np.abs(slowed[:, k3] - base[:, k3]).max() > 0.1
    assert np.all(slowed[:, k3] <= base[:, k3] + 1e-6)  # more damping: slower flexion
    # range: the joint stops at its new upper limit (soft constraint: a little past it)
    limited, _ = simulate(TwinModel(), {TwinModel().target('joint', 'rh_FFJ3', 'range_upper'): 0.6})
    assert base[:, k3].max() > 1.0
    assert limited[:, k3].max() == pytest.approx(0.6, abs=0.03)
    # springref acts only with a stiffness
    twin = TwinModel()
    stiff = {twin.target('joint', 'rh_FFJ3', 'stiffness'): 0.5}
    a, _ = simulate(TwinModel(), {**stiff, twin.target('joint', 'rh_FFJ3', 'springref'): 0.0})
    b, _ = simulate(TwinModel(), {**stiff, twin.target('joint', 'rh_FFJ3', 'springref'): 1.0})
    assert b[-1, k3] - a[-1, k3] > 0.05


def test_actuator_gains_on_a_converted_motor():
    twin = TwinModel()
    SimController(twin.model)
    aid = mujoco.mj_name2id(twin.model, mujoco.mjtObj.mjOBJ_ACTUATOR, 'rh_FFJ0')
    kp, kd = twin.target('actuator', 'rh_FFJ0', 'kp'), twin.target('actuator', 'rh_FFJ0', 'kd')
    assert get_parameter(twin.model, kp) == 4.0 and get_parameter(twin.model, kd) == pytest.approx(0.1)
    set_parameter(twin.model, kp, 6.5)
    set_parameter(twin.model, kd, 0.3)
    assert twin.model.actuator_gainprm[aid, 0] == 6.5 and twin.model.actuator_biasprm[aid, 1] == -6.5
    assert twin.model.actuator_biasprm[aid, 2] == -0.3
    with pytest.raises(ModelError, match='kp must be positive'):
        set_parameter(twin.model, kp, 0.0)


# -- calibrated MJCF ---------------------------------------------------------------------------
def _some_values(twin):
    names = ['rh_FFJ1', 'rh_MFJ2', 'rh_RFJ3']
    values = {}
    for k, name in enumerate(names):
        values[twin.target('joint', name, 'damping')] = 0.07 + 0.01 * k
        values[twin.target('joint', name, 'frictionloss')] = 0.03 + 0.01 * k
        values[twin.target('joint', name, 'stiffness')] = 0.004
        values[twin.target('joint', name, 'springref')] = -0.5 + k
        values[twin.target('joint', name, 'range_upper')] = 1.45
    values[twin.target('joint', 'rh_FFJ4', 'range_lower')] = -0.25
    return values


def test_calibrated_mjcf_never_overwrites_the_input(tmp_path):
    source = tmp_path / 'hand.xml'
    shutil.copy(builtin_model_path(), source)
    before = source.read_bytes()
    twin = TwinModel(source)
    values = _some_values(twin)
    with pytest.raises(ModelError, match='refusing to overwrite the input model'):
        write_calibrated_mjcf(twin, values, source)
    other_spelling = tmp_path / 'sub' / '..' / 'hand.xml'
    (tmp_path / 'sub').mkdir()
    with pytest.raises(ModelError, match='refusing to overwrite'):
        write_calibrated_mjcf(twin, values, other_spelling)
    assert source.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ['hand.xml', 'sub']


@pytest.mark.parametrize('which', ['builtin', 'shadow'])
def test_calibrated_mjcf_compiles_alone_and_moves_like_the_modified_model(which, tmp_path, monkeypatch,
                                                                           request):
    path = request.getfixturevalue('shadow_model') if which == 'shadow' else builtin_model_path()
    twin = TwinModel(path)
    values = _some_values(twin)
    out = write_calibrated_mjcf(twin, values, tmp_path / 'out' / 'calibrated.xml')
    assert out == tmp_path / 'out' / 'calibrated.xml'
    assert out.read_text().startswith('<!-- Calibrated by shadow_twin')
    assert [p.name for p in out.parent.iterdir()] == ['calibrated.xml']  # no temporary left over
    # compiles on its own, from another working directory
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    written = TwinModel(out)
    for target, value in values.items():
        assert get_parameter(written.model, target) == pytest.approx(value, rel=1e-12)
        assert get_parameter(twin.model, target) != pytest.approx(value)  # source model untouched
    # the written file moves as the in-memory model with the same values
    in_memory, _ = simulate(TwinModel(path), values, duration=2.0)
    from_file, _ = simulate(written, duration=2.0)
    default, _ = simulate(TwinModel(path), duration=2.0)
    assert np.abs(in_memory - default).max() > 1e-2  # the values matter...
    assert np.abs(in_memory - from_file).max() < 1e-6  # ...and the file carries them


def test_armature_in_place_matches_the_written_model(tmp_path):
    twin = TwinModel()
    values = {twin.target('joint', name, 'armature'): 0.002 for name in ('rh_FFJ1', 'rh_MFJ2', 'rh_RFJ3')}
    out = write_calibrated_mjcf(twin, values, tmp_path / 'armature.xml')
    in_memory, _ = simulate(TwinModel(), values)
    from_file, _ = simulate(TwinModel(out))
    assert np.abs(in_memory - from_file).max() < 1e-6
