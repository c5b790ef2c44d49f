"""The effort model (shadow_twin/simulation/effort.py): inverse dynamics against a forward
simulation of the built-in UR5, the joint dynamics as separate terms, and the drive parameters'
file (parameters.yaml) with its bad input."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError, ModelError
from shadow_twin.simulation.effort import DriveParameters, InverseDynamics
from shadow_twin.simulation.friction import PRESLIDING_DISTANCE

UR5 = Path(__file__).resolve().parents[3] / 'shadow_twin' / 'model' / 'builtin' / 'ur5.xml'


@pytest.fixture(scope='module')
def ur5():
    model = mujoco.MjModel.from_xml_path(str(UR5))
    return model, [model.joint(i).name for i in range(model.njnt)]


def forward_run(model, torque_of, steps: int = 1500):
    """Positions, velocities, accelerations (N, 6) and applied torques (N, 6) of a forward run whose
    torque ``torque_of(t, q, qd)`` (N m) is applied as the motors' controls."""
    data = mujoco.MjData(model)
    rows = []
    for k in range(steps):
        tau = torque_of(k * model.opt.timestep, data.qpos.copy(), data.qvel.copy())
        data.ctrl[:] = tau
        mujoco.mj_forward(model, data)
        rows.append((data.qpos.copy(), data.qvel.copy(), data.qacc.copy(), tau))
        mujoco.mj_step(model, data)
    return (np.array(x) for x in zip(*rows))


def swing(t: float, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """N m: a PD swing of every joint about 0 (+-0.5 rad), inside the joint ranges (a joint
    limit's force is no drive torque)."""
    reference = 0.5 * np.sin(2.0 * t + np.arange(6))
    return np.array([300.0, 300.0, 150.0, 20.0, 20.0, 5.0]) * (reference - q) - np.array([30, 30, 15, 2, 2, 0.5]) * qd


def test_inverse_dynamics_gives_the_torques_that_made_the_motion(ur5):
    model, joints = ur5
    free = mujoco.MjModel.from_xml_path(str(UR5))
    free.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)    # the swing in free space
    q, qd, qdd, tau = forward_run(free, swing)
    assert np.all(np.abs(q) < free.jnt_range[:, 1]) and np.ptp(q, axis=0).min() > 0.1
    predicted = InverseDynamics(model, joints).torques(q, qd, qdd)
    rmse = np.sqrt(((predicted - tau) ** 2).mean(axis=0))
    # the only approximation: MuJoCo's frictionloss (0.1 N m, a soft constraint) against tanh
    assert rmse.max() < 0.1, rmse
    # and the joint dynamics matter: without them the error is larger than the frictionloss alone
    rigid = InverseDynamics(model, joints).rigid_torques(q, qd, qdd)
    assert np.sqrt(((rigid - tau) ** 2).mean(axis=0)).max() > 0.1


def test_constraint_forces_are_not_drive_torques(ur5):
    """A posture through the floor: MuJoCo's contact forces would be thousands of N m; the
    drives deliver only the rigid-body torque."""
    model, joints = ur5
    inverse = InverseDynamics(model, joints)
    q = np.array([[0.0, 1.57, 0.0, 0.0, 0.0, 0.0]])         # the stretched arm swung down into the floor
    data = mujoco.MjData(model)
    data.qpos[:] = q[0]
    mujoco.mj_forward(model, data)
    assert data.ncon > 0
    torque = inverse.rigid_torques(q, np.zeros_like(q), np.zeros_like(q))
    assert np.abs(torque).max() < 150.0


def test_joint_dynamics_are_the_linear_terms(ur5):
    model, joints = ur5
    inverse = InverseDynamics(model, joints)
    assert np.allclose(inverse.joint_dynamics.armature, model.dof_armature)
    qd = np.array([[0.5, -0.5, 0.0, 1.0, -1.0, 0.2]])
    qdd = np.array([[1.0, 2.0, -1.0, 0.0, 0.5, 0.0]])
    friction = np.array([[1.0, -1.0, 0.3, 0.0, -0.2, 1.0]])
    expected = model.dof_armature * qdd + model.dof_damping * qd + model.dof_frictionloss * friction
    assert np.allclose(inverse.joint_dynamics.torques(qd, qdd, friction), expected)
    # the copy used for the rigid part has none; the caller's model is untouched
    assert not inverse.model.dof_damping.any() and model.dof_damping.all()


def test_unknown_joint_is_a_model_error(ur5):
    model, _ = ur5
    with pytest.raises(ModelError, match="'nope' is not in the model"):
        InverseDynamics(model, ['nope'])


def test_drive_parameters_round_trip_and_convert(tmp_path):
    params = DriveParameters('A', {'elbow_joint': 13.0}, {'elbow_joint': 0.1}, {'elbow_joint': 0.05},
                             {'elbow_joint': 0.002})
    path = params.write_yaml(tmp_path / 'parameters.yaml', header='written by a test')
    assert path.read_text().startswith('# written by a test\n')
    again = DriveParameters.from_yaml(path)
    assert again == params
    joints = ['elbow_joint', 'wrist_1_joint']
    torque = np.array([[26.0, 3.0]])
    effort = again.to_effort(torque, joints)
    assert effort.tolist() == [[2.1, 3.0]]           # 26/13 + 0.1; a joint not given: gain 1, offset 0
    assert np.allclose(again.to_torque(effort, joints), torque)
    assert again.presliding_distances(joints).tolist() == [0.002, PRESLIDING_DISTANCE]


@pytest.mark.parametrize('text, problem', [
    ('effort_unit: mA\n', "effort_unit 'mA'"),
    ('joints: {elbow_joint: {drive_gain: -1}}\n', 'must be > 0'),
    ('joints: {elbow_joint: {presliding_distance: 0}}\n', 'presliding_distance of elbow_joint: 0 must be > 0'),
    ('joints: {elbow_joint: {friction_velocity: 0.005}}\n', 'friction_velocity is from an older'),
    ('joints: {elbow_joint: {drive_gain: .nan}}\n', 'not a finite number'),
    ("joints: {elbow_joint: {drive_gain: '13'}}\n", 'not a finite number'),
    ('joints: {elbow_joint: {gain: 1}}\n', "unknown key(s) gain"),
    ('joints: [1, 2]\n', "expected a mapping with 'effort_unit' and 'joints'"),
    ('joints: {elbow_joint: {drive_gain: [1\n', 'malformed YAML (line 2)'),
    ('[' * 200_000, 'malformed YAML (line 1): exceeded maximum nesting depth'),   # read in ms, no RecursionError
])
def test_bad_drive_parameters_are_one_line_errors(tmp_path, text, problem):
    path = tmp_path / 'parameters.yaml'
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        DriveParameters.from_yaml(path)
    assert problem in str(info.value) and '\n' not in str(info.value)


def test_missing_drive_parameters_file(tmp_path):
    with pytest.raises(ConfigError, match='no such file'):
        DriveParameters.from_yaml(tmp_path / 'none.yaml')
