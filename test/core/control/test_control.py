"""shadow_twin.control.controller: controller gains from YAML, the simulated effort controller, and which
calibrated values are its gains rather than MJCF."""

import mujoco
import numpy as np
import pytest
import yaml

from shadow_twin.control.controller import ControllerGains, PidGains, SimController
from shadow_twin.common.errors import ConfigError, ModelError
from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.model.mjcf import TwinModel, write_calibrated_mjcf
from shadow_twin.simulation.offline import TrajectorySimulator
from shadow_twin.control.trajectory import JointTrajectory

from conftest import GAINS, SHADOW_MODEL


def write_yaml(path, data):
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# -- gains from YAML ---------------------------------------------------------------------------
def test_default_gains():
    gains = ControllerGains.from_yaml(None)
    assert gains.for_joint('rh_FFJ1') == PidGains(4.0, 0.0, 0.1)
    assert gains.entries == {}


def test_shipped_gains():
    gains = ControllerGains.from_yaml(GAINS)
    assert gains.for_joint('rh_FFJ3') == PidGains(4.0, 0.0, 0.1)
    assert gains.for_joint('rh_THJ4') == PidGains(4.0, 0.0, 0.2)
    assert gains.for_joint('rh_WRJ1') == PidGains(10.0, 0.0, 0.1)
    assert gains.for_joint('rh_WRJ2') == PidGains(8.0, 0.0, 0.1)


def test_patterns_default_and_exact_names(tmp_path):
    path = write_yaml(tmp_path / 'g.yaml', {'controller': {
        'default': {'p': 3.0, 'd': 0.05},
        'gains': {'rh_FF*': {'p': 5.0, 'd': 0.1}, 'rh_*J2': {'p': 6.0, 'd': 0.1},
                  'rh_FFJ1': {'p': 7.0, 'd': 0.1}, 'rh_*J1': {'p': 8.0, 'd': 0.1}}}})
    gains = ControllerGains.from_yaml(path)
    assert gains.for_joint('rh_MFJ3') == PidGains(3.0, 0.0, 0.05)  # default
    assert gains.for_joint('rh_FFJ3').p == 5.0  # one pattern
    assert gains.for_joint('rh_FFJ2').p == 6.0  # two patterns: the last wins
    assert gains.for_joint('rh_FFJ1').p == 7.0  # exact name beats any pattern, even a later one
    assert gains.for_joint('rh_MFJ1').p == 8.0
    # to_dict gives explicit gains that load back to the same
    again = ControllerGains.from_dict(gains.to_dict(['rh_FFJ1', 'rh_FFJ2', 'rh_MFJ3']))
    for joint in ('rh_FFJ1', 'rh_FFJ2', 'rh_MFJ3'):
        assert again.for_joint(joint) == gains.for_joint(joint)


def test_ros_control_format(tmp_path):
    path = write_yaml(tmp_path / 'rh_trajectory_controller.yaml', {'rh_trajectory_controller': {
        'type': 'effort_controllers/JointTrajectoryController', 'joints': ['rh_FFJ1', 'rh_THJ1'],
        'constraints': {'goal_time': 0.6},
        'gains': {'rh_FFJ1': {'p': 4.0, 'i': 0.0, 'd': 0.1, 'i_clamp': 0.0, 'antiwindup': True},
                  'rh_THJ1': {'p': 4.5, 'i': 0.0, 'd': 0.2, 'i_clamp': 0.0, 'antiwindup': True}}}})
    gains = ControllerGains.from_yaml(path)
    assert gains.for_joint('rh_FFJ1') == PidGains(4.0, 0.0, 0.1)
    assert gains.for_joint('rh_THJ1') == PidGains(4.5, 0.0, 0.2)


def test_shadows_own_controller_file():
    path = SHADOW_MODEL.parent / 'rh_trajectory_controller.yaml'
    if not path.is_file():
        pytest.skip(f'{path} not available')
    gains = ControllerGains.from_yaml(path)
    shipped = ControllerGains.from_yaml(GAINS)
    joints = [f'rh_{f}J{k}' for f in ('FF', 'MF', 'RF') for k in (1, 2, 3, 4)] + [
        f'rh_LFJ{k}' for k in range(1, 6)] + [f'rh_THJ{k}' for k in range(1, 6)] + ['rh_WRJ1', 'rh_WRJ2']
    assert set(gains.entries) == set(joints)
    for joint in joints:  # the shipped YAML restates Shadow's figures
        assert gains.for_joint(joint) == shipped.for_joint(joint)


@pytest.mark.parametrize('entry, message', [
    ({'p': 4.0, 'i': 0.5, 'd': 0.1}, 'no integral term'),
    ({'p': 0.0, 'd': 0.1}, 'need p > 0'),
    ({'p': -1.0, 'd': 0.1}, 'need p > 0'),
    ({'p': 4.0, 'd': -0.1}, 'd >= 0'),
    ({'p': 4.0, 'kv': 0.1}, r"unknown key\(s\) \['kv'\]"),
    ({'p': 'four'}, 'must be numbers'),
    (4.0, 'must be a mapping'),
])
def test_rejected_gains(tmp_path, entry, message):
    path = write_yaml(tmp_path / 'g.yaml', {'controller': {'gains': {'rh_FFJ3': entry}}})
    with pytest.raises(ConfigError, match=message) as info:
        ControllerGains.from_yaml(path)
    assert 'rh_FFJ3' in str(info.value)


def test_rejected_default_and_files(tmp_path):
    with pytest.raises(ConfigError, match="'default'.*no integral term"):
        ControllerGains.from_dict({'controller': {'default': {'p': 4.0, 'i': 1.0}}})
    with pytest.raises(ConfigError, match='not found'):
        ControllerGains.from_yaml(tmp_path / 'absent.yaml')
    with pytest.raises(ConfigError, match='"controller" mapping with "gains"'):
        ControllerGains.from_dict({'controller': {'gains': ['rh_FFJ1']}})


# -- the simulated controller on the hand --------------------------------------------------------
@pytest.fixture
def hand():
    twin = TwinModel()
    controller = SimController(twin.model, ControllerGains.from_yaml(GAINS))
    return twin, controller


def test_motors_become_pd_servos(hand):
    twin, controller = hand
    m = twin.model
    assert len(controller.joint_names) == 24
    for a in range(m.nu):
        name = m.actuator(a).name
        expected = ControllerGains.from_yaml(GAINS).for_joint(name.replace('J0', 'J1'))
        assert m.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE
        assert m.actuator_gainprm[a, 0] == expected.p
        np.testing.assert_allclose(m.actuator_biasprm[a, :3], [0.0, -expected.p, -expected.d])
        assert controller.is_controller_gain(name, m)
    gains = controller.current_gains(m)
    assert gains['rh_FFJ1'] == gains['rh_FFJ2'] == PidGains(4.0, 0.0, 0.1)
    assert gains['rh_THJ2'] == PidGains(4.0, 0.0, 0.2)



def test_motor_gains_are_split_off_the_mjcf_values_and_never_written_into_the_mjcf(hand, tmp_path):
    """The one split, SimController.split_values: a motor's kp/kd are controller gains, joint
    values MJCF; write_calibrated_mjcf writes what it is given and refuses a controller gain."""
    twin, controller = hand
    kp, damping = twin.target('actuator', 'rh_FFJ3', 'kp'), twin.target('joint', 'rh_FFJ3', 'damping')
    mjcf, gains = controller.split_values({kp: 6.0, damping: 0.2}, twin.model)
    assert mjcf == {damping: 0.2} and gains == {kp: 6.0}
    with pytest.raises(ModelError, match=r"rh_FFJ3.kp: 'rh_FFJ3' is a motor .*SimController.split_values"):
        write_calibrated_mjcf(twin, {kp: 6.0, damping: 0.2}, tmp_path / 'calibrated.xml')
    assert not (tmp_path / 'calibrated.xml').exists()

def test_ctrl_converts_setpoints_and_sums_j1_j2_on_the_tendon(hand):
    twin, controller = hand
    m = twin.model
    rng = np.random.default_rng(1)
    q, qd = rng.uniform(0, 1.5, 24), rng.uniform(-2, 2, 24)
    ctrl = controller.ctrl(m, q, qd)
    assert ctrl.shape == (m.nu,)
    k = {name: i for i, name in enumerate(controller.joint_names)}
    a = {name: i for i, name in enumerate(twin.actuator_names)}
    d_over_p = 0.1 / 4.0
    for finger in ('FF', 'MF', 'RF', 'LF'):
        j1, j2 = k[f'rh_{finger}J1'], k[f'rh_{finger}J2']
        assert ctrl[a[f'rh_{finger}J0']] == pytest.approx(q[j1] + q[j2] + d_over_p * (qd[j1] + qd[j2]), abs=1e-12)
        j3 = k[f'rh_{finger}J3']
        assert ctrl[a[f'rh_{finger}J3']] == pytest.approx(q[j3] + d_over_p * qd[j3], abs=1e-12)
    th = k['rh_THJ1']
    assert ctrl[a['rh_THJ1']] == pytest.approx(q[th] + 0.2 / 4.0 * qd[th], abs=1e-12)
    wr = k['rh_WRJ1']
    assert ctrl[a['rh_WRJ1']] == pytest.approx(q[wr] + 0.1 / 10.0 * qd[wr], abs=1e-12)
    # vectorised over time
    Q, QD = rng.uniform(0, 1, (5, 24)), rng.uniform(-1, 1, (5, 24))
    np.testing.assert_allclose(controller.ctrl(m, Q, QD), np.stack([controller.ctrl(m, Q[i], QD[i]) for i in range(5)]))


def test_actuator_force_is_the_effort_pd_law(hand):
    """force = p (q_des - q) + d (qd_des - qd), with J1+J2 and their velocities summed on the tendon."""
    twin, controller = hand
    m = twin.model
    data = mujoco.MjData(m)
    rng = np.random.default_rng(2)
    data.qpos[controller.qpos_adr] = rng.uniform(0.1, 1.2, 24)
    data.qvel[controller.dof_adr] = rng.uniform(-1, 1, 24)
    q_des, qd_des = rng.uniform(0, 1.5, 24), rng.uniform(-1, 1, 24)
    data.ctrl[:] = controller.ctrl(m, q_des, qd_des)
    mujoco.mj_forward(m, data)
    q, qd, _ = controller.joint_state(data)
    k = {name: i for i, name in enumerate(controller.joint_names)}
    force = dict(zip(twin.actuator_names, data.actuator_force))
    j1, j2 = k['rh_MFJ1'], k['rh_MFJ2']
    expected = 4.0 * (q_des[j1] + q_des[j2] - q[j1] - q[j2]) + 0.1 * (qd_des[j1] + qd_des[j2] - qd[j1] - qd[j2])
    assert force['rh_MFJ0'] == pytest.approx(expected, rel=1e-9)
    j = k['rh_THJ3']
    assert force['rh_THJ3'] == pytest.approx(4.0 * (q_des[j] - q[j]) + 0.2 * (qd_des[j] - qd[j]), rel=1e-9)


def test_differing_gains_on_one_tendon_are_rejected(tmp_path):
    path = write_yaml(tmp_path / 'g.yaml', {'controller': {'gains': {'rh_FFJ2': {'p': 5.0, 'd': 0.1}}}})
    with pytest.raises(ConfigError, match="actuator 'rh_FFJ0' drives.*rh_FFJ1.*rh_FFJ2.*gains differ"):
        SimController(TwinModel().model, ControllerGains.from_yaml(path))


def test_joint_map_renames_controlled_joints():
    twin = TwinModel()
    controller = SimController(twin.model, joint_map=JointNameMap({'ff_distal': 'rh_FFJ1'}))
    assert 'ff_distal' in controller.joint_names and 'rh_FFJ1' not in controller.joint_names


def test_rollout_equals_live_stepping(hand):
    """The offline rollout gives exactly what the live bridge gets calling ctrl() every step."""
    twin, controller = hand
    m = twin.model
    traj = JointTrajectory(['rh_FFJ1', 'rh_FFJ2', 'rh_FFJ3', 'rh_THJ5', 'rh_WRJ1'], [0.2, 0.8],
                           [[0.1, 0.2, 0.3, 0.2, 0.1], [1.2, 1.0, 1.4, -0.5, -0.3]])
    sim = TrajectorySimulator(m, controller, traj, 1.2, initial_positions={'rh_FFJ3': 0.05})
    rollout = sim.run([m])[0]
    data = mujoco.MjData(m)
    mujoco.mj_setState(m, data, sim.initial_state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    live = []
    for k in range(sim.nstep):
        data.ctrl[:] = controller.ctrl(m, sim.desired_positions[k], sim.desired_velocities[k])
        mujoco.mj_step(m, data)
        live.append(controller.joint_state(data)[0])
    live = np.array(live)
    assert np.array_equal(rollout, live)
    j = controller.joint_names.index('rh_FFJ3')
    assert live[0, j] == pytest.approx(0.05, abs=1e-3) and live[-1, j] > 1.0  # it did move
    # several models in parallel threads give the same result
    twice = sim.run(sim.model_copies(2), nthread=2)
    assert np.array_equal(twice[0], rollout) and np.array_equal(twice[1], rollout)


# -- other actuator types -------------------------------------------------------------------------
SERVO_MJCF = """
<mujoco>
  <option timestep="0.002" gravity="0 0 0" integrator="implicitfast"/>
  <worldbody>
    <body>
      <joint name="j1" type="hinge" axis="0 0 1" damping="0.01" armature="0.01"/>
      <geom type="capsule" size="0.01" fromto="0 0 0 0.1 0 0" mass="0.05"/>
      <body pos="0.1 0 0">
        <joint name="j2" type="hinge" axis="0 0 1" damping="0.01" armature="0.01"/>
        <geom type="capsule" size="0.01" fromto="0 0 0 0.1 0 0" mass="0.05"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="servo" joint="j1" kp="2" kv="0.05"/>
    <velocity name="speed" joint="j2" kv="0.5"/>
  </actuator>
</mujoco>
"""


def test_position_and_velocity_actuators_are_used_as_they_are():
    m = mujoco.MjModel.from_xml_string(SERVO_MJCF)
    gain, bias = m.actuator_gainprm.copy(), m.actuator_biasprm.copy()
    controller = SimController(m)
    np.testing.assert_array_equal(m.actuator_gainprm, gain)  # not converted
    np.testing.assert_array_equal(m.actuator_biasprm, bias)
    assert controller.joint_names == ['j1', 'j2']
    np.testing.assert_allclose(controller.ctrl(m, [0.7, 0.2], [0.3, -0.4]), [0.7, -0.4])  # q_des, qd_des
    assert not controller.is_controller_gain('servo', m)
    assert controller.current_gains(m) == {}
    traj = JointTrajectory(['j1'], [0.5], [[0.8]])
    sim = TrajectorySimulator(m, controller, traj, 3.0)
    q = sim.run([m])[0]
    assert q[-1, 0] == pytest.approx(0.8, abs=0.01)  # the MJCF servo reaches the set point


def test_motor_with_gear_is_rejected():
    m = mujoco.MjModel.from_xml_string(SERVO_MJCF.replace(
        '<position name="servo" joint="j1" kp="2" kv="0.05"/>', '<motor name="m" joint="j1" gear="2"/>'))
    with pytest.raises(ConfigError, match="motor 'm': gear must be 1"):
        SimController(m)


def test_motor_torque_limit_does_not_clamp_the_set_point():
    m = mujoco.MjModel.from_xml_string(SERVO_MJCF.replace(
        '<position name="servo" joint="j1" kp="2" kv="0.05"/>',
        '<motor name="m" joint="j1" ctrllimited="true" ctrlrange="-1 1"/>'))
    controller = SimController(m)
    sim = TrajectorySimulator(m, controller, JointTrajectory(['j1'], [1.0], [[1.5]]), 4.0)
    q = sim.run([m])[0]
    assert q[-1, 0] == pytest.approx(1.5, abs=0.02), q[-1, 0]


def test_gains_files_include_others_and_override_them(tmp_path):
    from shadow_twin.common.paths import config_path
    cell = ControllerGains.from_yaml(config_path('controllers', 'cell.yaml'))
    assert cell.for_joint('rh_FFJ3') == PidGains(4.0, 0.0, 0.1)                 # the hand's default
    assert cell.for_joint('rh_WRJ1') == PidGains(10.0, 0.0, 0.1)
    assert cell.for_joint('ra_shoulder_lift_joint').p == 90000.0                 # the arm's, any prefix
    (tmp_path / 'base.yaml').write_text('controller: {default: {p: 2.0, d: 0.2}, gains: {a: {p: 5.0}}}')
    (tmp_path / 'top.yaml').write_text('include: [base.yaml]\ncontroller: {gains: {a: {p: 7.0}, b: {p: 1.0}}}')
    top = ControllerGains.from_yaml(tmp_path / 'top.yaml')
    assert top.for_joint('a').p == 7.0 and top.for_joint('b').p == 1.0 and top.for_joint('c').p == 2.0
    (tmp_path / 'loop.yaml').write_text('include: [loop.yaml]')
    with pytest.raises(ConfigError, match='includes itself'):
        ControllerGains.from_yaml(tmp_path / 'loop.yaml')
    (tmp_path / 'bad.yaml').write_text('include: base.yaml')
    with pytest.raises(ConfigError, match='include must be a list'):
        ControllerGains.from_yaml(tmp_path / 'bad.yaml')
