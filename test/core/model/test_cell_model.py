"""The cell models: the built-in UR5 and MiR250, the assembled cell (MiR250 + cabinet + UR5 +
hand, shadow_twin/model/cell/assembly.py) and ``shadow-twin model --cell`` (shadow_twin/cli/model.py).

Figures checked here come from the sources cited in ur5.xml and mir250.xml: the UR5 DH
parameters of Universal Robots' ROS 2 description (config/ur5), and the MiR250 figures of the
Simscape MiR250+UR5 twin study (IMECE 2023, table 1).
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

from shadow_twin.cli import model as model_cli
from shadow_twin.common.errors import ConfigError, ModelError
from shadow_twin.common.paths import config_path
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.control.trajectory import load_waypoint_yaml
from shadow_twin.model.cell.assembly import (BASE_CASTER_JOINTS, BASE_WHEEL_JOINTS, UR5_JOINTS, BaseConfig, CellConfig,
                                             arm_joint_names, arm_root_name, base_free_joint_name, build_cell_spec,
                                             compile_cell, write_cell_mjcf)
from shadow_twin.model.mjcf import BUILTIN_MODELS, TwinModel, builtin_model_path
from shadow_twin.model.mock_models import write_arm_stand_in_mjcf, write_base_stand_in_mjcf
from shadow_twin.simulation.mobile_base import SimMobileBase
from shadow_twin.simulation.offline import TrajectorySimulator

REPO = Path(__file__).resolve().parents[3]
SHADOW_HAND = REPO.parent / 'shared' / 'reference' / 'sr_description_mujoco_models' / 'sr_hand_e_plus_environment.xml'
CELL_YAML = REPO / 'config' / 'cell.yaml'
UR5_GAINS = REPO / 'config' / 'controllers' / 'ur5.yaml'
HAND_GAINS = REPO / 'config' / 'controllers' / 'shadow_hand_e.yaml'

# UR5 DH parameters (Universal Robots' ROS 2 description, config/ur5/default_kinematics.yaml), m and rad.
DH_D = (0.089159, 0.0, 0.0, 0.10915, 0.09465, 0.0823)
DH_A = (0.0, -0.425, -0.39225, 0.0, 0.0, 0.0)
DH_ALPHA = (math.pi / 2, 0.0, 0.0, math.pi / 2, -math.pi / 2, 0.0)
HAND_RPY = (math.pi / 2, math.pi, math.pi / 2)  # rh_forearm on the flange (Shadow's srhand_ur)


# -- independent kinematics (numpy) -------------------------------------------------------------
def rot_x(t):
    c, s = math.cos(t), math.sin(t)
    return np.array([[1, 0, 0, 0], [0, c, -s, 0], [0, s, c, 0], [0, 0, 0, 1.0]])


def rot_y(t):
    c, s = math.cos(t), math.sin(t)
    return np.array([[c, 0, s, 0], [0, 1, 0, 0], [-s, 0, c, 0], [0, 0, 0, 1.0]])


def rot_z(t):
    c, s = math.cos(t), math.sin(t)
    return np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])


def trans(x, y, z):
    out = np.eye(4)
    out[:3, 3] = (x, y, z)
    return out


def rpy(r, p, y):
    """URDF roll-pitch-yaw: Rz(y) Ry(p) Rx(r)."""
    return rot_z(y) @ rot_y(p) @ rot_x(r)


def dh_frame6(q):
    """Standard DH: T = prod Rz(theta_i) Tz(d_i) Tx(a_i) Rx(alpha_i), frame 0 -> frame 6."""
    out = np.eye(4)
    for theta, d, a, alpha in zip(q, DH_D, DH_A, DH_ALPHA):
        out = out @ rot_z(theta) @ trans(0, 0, d) @ trans(a, 0, 0) @ rot_x(alpha)
    return out


def site_pose(model, data, name):
    sid = model.site(name).id
    out = np.eye(4)
    out[:3, :3] = data.site_xmat[sid].reshape(3, 3)
    out[:3, 3] = data.site_xpos[sid]
    return out


def body_pose(model, data, name):
    bid = model.body(name).id
    out = np.eye(4)
    out[:3, :3] = data.xmat[bid].reshape(3, 3)
    out[:3, 3] = data.xpos[bid]
    return out


def pose_error(a, b):
    """(position error m, rotation error rad) between two 4x4 poses."""
    rel = a[:3, :3].T @ b[:3, :3]
    angle = math.acos(max(-1.0, min(1.0, (np.trace(rel) - 1) / 2)))
    return float(np.linalg.norm(a[:3, 3] - b[:3, 3])), angle


def yaw_of(quat):
    w, x, y, z = quat
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


# -- fixtures ------------------------------------------------------------------------------------
@pytest.fixture(scope='module')
def cell_model():
    """The default cell (built-in hand, arm prefix '') compiled."""
    return compile_cell(build_cell_spec())


def cell_controller(model):
    """(a copy of ``model``, its simulated controller): hand and UR5 gains (YAML) together, wheels
    velocity servos. The controller converts the motors of the model it gets, hence the copy."""
    model = copy.copy(model)
    hand = yaml.safe_load(HAND_GAINS.read_text())['controller']
    arm = yaml.safe_load(UR5_GAINS.read_text())['controller']
    return model, SimController(model, ControllerGains({**hand['gains'], **arm['gains']}, hand['default']))


# -- the parts on their own ---------------------------------------------------------------------
def test_builtin_parts_compile_standalone_with_their_published_figures():
    assert {'shadow_hand_e', 'ur5', 'mir250'} <= set(BUILTIN_MODELS)
    ur5 = TwinModel(builtin_model_path('ur5'))
    assert ur5.joint_names == list(UR5_JOINTS)
    assert ur5.actuator_names == list(UR5_JOINTS)
    m = ur5.model
    # masses of Universal Robots' physical_parameters.yaml (base 4.0 + links)
    assert m.body_subtreemass[m.body('base_link').id] == pytest.approx(4.0 + 3.7 + 8.393 + 2.33 + 1.219 * 2 + 0.1879)
    assert not m.actuator_forcelimited.any() and not m.actuator_ctrllimited.any()   # see ur5.xml's header
    assert m.jnt_range[m.joint('elbow_joint').id] == pytest.approx([-math.pi, math.pi], abs=1e-5)
    assert m.jnt_range[m.joint('wrist_3_joint').id] == pytest.approx([-2 * math.pi, 2 * math.pi], abs=1e-5)
    for name in UR5_JOINTS:  # present so that calibration can address them
        dof = m.joint(name).dofadr[0]
        assert m.dof_damping[dof] > 0 and m.dof_frictionloss[dof] > 0 and m.dof_armature[dof] > 0
    for site in ('base', 'flange', 'tool0'):
        assert m.site(site).id >= 0

    mir = TwinModel(builtin_model_path('mir250'))
    m = mir.model
    assert m.body_subtreemass[m.body('base_footprint').id] == pytest.approx(83.0)  # twin study table 1
    assert m.joint(base_free_joint_name()).type == mujoco.mjtJoint.mjJNT_FREE
    assert set(BASE_WHEEL_JOINTS) | set(BASE_CASTER_JOINTS) <= set(mir.joint_names)
    assert mir.actuator_names == list(BASE_WHEEL_JOINTS) + ['left_wheel_integral', 'right_wheel_integral']
    # the velocity loops' I: 0.01 A/rad x 0.15 N m/A x 10.167^2 at the wheel, an <intvelocity> actuator
    integral = m.actuator('left_wheel_integral')
    assert integral.dyntype[0] == mujoco.mjtDyn.mjDYN_INTEGRATOR
    assert integral.gainprm[0] == pytest.approx(0.01 * 0.15 * 10.167 ** 2, rel=0.01)
    left, right = (m.body(f'{s}_wheel_link').id for s in ('left', 'right'))
    assert m.body_pos[left][1] - m.body_pos[right][1] == pytest.approx(0.410)
    assert m.body_pos[left][2] == pytest.approx(0.100)
    assert m.site_pos[m.site('payload').id][2] == pytest.approx(0.352)
    # rotor 1.5 kg, 0.100 m diameter, reflected through the 10.167 gear
    assert m.dof_armature[m.joint('left_wheel_joint').dofadr[0]] == pytest.approx(0.5 * 1.5 * 0.05 ** 2 * 10.167 ** 2,
                                                                                rel=0.01)


# -- UR5 kinematics against the DH figures -------------------------------------------------------
@pytest.mark.parametrize('where', ['standalone', 'cell'])
def test_tool0_and_flange_match_the_dh_chain(where, cell_model):
    """tool0 and flange relative to UR's base frame equal the DH chain (and the URDF's fixed
    rotations) within 1 mm / 1 mrad over 20 random configurations. What this shows: the UR
    description's tool0 is the DH frame 6 (flange * rpy(pi/2, 0, pi/2) undoes the flange's
    rpy(0, -pi/2, -pi/2)), and the MJCF's body chain built from the URDF joint origins gives it."""
    model = TwinModel(builtin_model_path('ur5')).model if where == 'standalone' else cell_model
    data = mujoco.MjData(model)
    addr = [model.joint(name).qposadr[0] for name in UR5_JOINTS]
    rng = np.random.default_rng(7)
    worst = [0.0, 0.0]
    for _ in range(20):
        q = rng.uniform(-math.pi, math.pi, 6)
        data.qpos[addr] = q
        mujoco.mj_kinematics(model, data)
        base_inv = np.linalg.inv(site_pose(model, data, 'base'))
        frame6 = dh_frame6(q)
        flange = frame6 @ rpy(0, -math.pi / 2, -math.pi / 2)
        tool0 = flange @ rpy(math.pi / 2, 0, math.pi / 2)
        assert pose_error(tool0, frame6) == pytest.approx((0, 0), abs=1e-7)  # tool0 = DH frame 6
        for name, expected in (('tool0', tool0), ('flange', flange)):
            err = pose_error(base_inv @ site_pose(model, data, name), expected)
            worst = [max(worst[0], err[0]), max(worst[1], err[1])]
    assert worst[0] < 1e-3 and worst[1] < 1e-3, worst


def test_the_hand_sits_on_the_flange_with_shadows_mount_rotation(cell_model):
    data = mujoco.MjData(cell_model)
    addr = [cell_model.joint(name).qposadr[0] for name in UR5_JOINTS]
    rng = np.random.default_rng(3)
    for _ in range(5):
        data.qpos[addr] = rng.uniform(-math.pi, math.pi, 6)
        mujoco.mj_kinematics(cell_model, data)
        expected = site_pose(cell_model, data, 'flange') @ rpy(*HAND_RPY)
        err = pose_error(body_pose(cell_model, data, 'rh_forearm'), expected)
        assert err[0] < 1e-9 and err[1] < 1e-6
    # the forearm's +z (towards the fingers) points out of the flange: tool0's +z
    forearm_z = body_pose(cell_model, data, 'rh_forearm')[:3, 2]
    np.testing.assert_allclose(forearm_z, site_pose(cell_model, data, 'tool0')[:3, 2], atol=1e-9)


# -- names ---------------------------------------------------------------------------------------
def test_arm_prefix_is_applied_and_hand_and_base_names_stay(cell_model):
    names = [cell_model.joint(i).name for i in range(cell_model.njnt)]
    assert arm_joint_names('') == list(UR5_JOINTS)
    assert set(arm_joint_names('')) <= set(names)
    assert names[0] == base_free_joint_name() == 'base_free'
    assert sum(n.startswith('rh_') for n in names) == 24

    spec = build_cell_spec(arm_prefix='ra_')
    model = compile_cell(spec)
    names = [model.joint(i).name for i in range(model.njnt)]
    actuators = [model.actuator(i).name for i in range(model.nu)]
    assert arm_joint_names('ra_') == [f'ra_{n}' for n in UR5_JOINTS]
    assert set(arm_joint_names('ra_')) <= set(names) and set(arm_joint_names('ra_')) <= set(actuators)
    assert not set(UR5_JOINTS) & set(names)
    assert [n for n in names if n.startswith('rh_')] == [n for n in names if 'rh_' in n]  # no ra_rh_*
    assert {'ra_base', 'ra_flange', 'ra_tool0'} <= {model.site(i).name for i in range(model.nsite)}
    assert model.body(arm_root_name('ra_')).id > 0 and cell_model.body(arm_root_name('')).name == 'ur5_base_link'
    assert set(BASE_WHEEL_JOINTS) <= set(actuators)


# -- the base ------------------------------------------------------------------------------------
def test_the_base_stands_still_and_drives_straight_at_omega_r():
    model = TwinModel(builtin_model_path('mir250')).model
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    start = data.qpos[:3].copy()
    for _ in range(int(2.0 / model.opt.timestep)):
        mujoco.mj_step(model, data)
    assert np.linalg.norm(data.qpos[:2] - start[:2]) < 1e-3
    assert abs(data.qpos[2] - start[2]) < 1e-3

    omega, radius = 5.0, 0.100  # rad/s at both wheels: 0.5 m/s straight ahead
    data.ctrl[:] = omega
    for _ in range(int(1.0 / model.opt.timestep)):  # reach speed
        mujoco.mj_step(model, data)
    before, steps = data.qpos[:3].copy(), int(1.0 / model.opt.timestep)
    for _ in range(steps):
        mujoco.mj_step(model, data)
    velocity = (data.qpos[:3] - before) / (steps * model.opt.timestep)
    assert velocity[0] == pytest.approx(omega * radius, rel=0.05)
    assert abs(velocity[1]) < 0.01 * omega * radius
    assert abs(yaw_of(data.qpos[3:7])) < 1e-3


def test_the_cell_stands_still_on_the_floor(cell_model):
    model, controller = cell_controller(cell_model)
    data = mujoco.MjData(model)
    n = len(controller.joint_names)
    data.ctrl[:] = controller.ctrl(model, np.zeros(n), np.zeros(n))
    mujoco.mj_forward(model, data)
    start = data.qpos[:3].copy()
    for _ in range(int(2.0 / model.opt.timestep)):
        mujoco.mj_step(model, data)
    assert np.linalg.norm(data.qpos[:3] - start) < 1e-3


def test_base_overrides_change_the_model(cell_model):
    config = CellConfig(base=BaseConfig(mass=97.0, wheel_radius=0.11, wheel_separation=0.403, friction=0.3,
                                        wheel_kv=500.0))
    model = compile_cell(build_cell_spec(config))
    total = model.body_subtreemass[model.body('base_footprint').id]
    assert total - cell_model.body_subtreemass[cell_model.body('base_footprint').id] == pytest.approx(97.0 - 83.0)
    left, right = model.body('left_wheel_link').id, model.body('right_wheel_link').id
    assert model.body_pos[left][1] - model.body_pos[right][1] == pytest.approx(0.403)
    assert model.body_pos[left][2] == model.geom_size[model.geom('left_wheel_contact').id][0] == pytest.approx(0.11)
    assert model.geom_friction[model.geom('fl_caster_wheel_contact').id][0] == pytest.approx(0.3)
    assert model.actuator_gainprm[model.actuator('left_wheel_joint').id][0] == pytest.approx(500.0)
    pi = compile_cell(build_cell_spec(CellConfig(base=BaseConfig(wheel_ki=2000.0))))
    assert pi.actuator_gainprm[pi.actuator('right_wheel_integral').id][0] == pytest.approx(2000.0)
    assert pi.actuator_biasprm[pi.actuator('right_wheel_integral').id][1] == pytest.approx(-2000.0)
    p_only = compile_cell(build_cell_spec(CellConfig.from_dict({'cell': {'base': {'wheel_ki': 0}}})))
    assert p_only.nu == cell_model.nu - 2 and p_only.na == 0        # 0: a P loop, no integral actuators
    with pytest.raises(ConfigError, match='wheel_ki'):
        CellConfig.from_dict({'cell': {'base': {'wheel_ki': -1.0}}})
    with pytest.raises(ConfigError, match='mass'):
        build_cell_spec(CellConfig(base=BaseConfig(mass=3.0)))


def test_a_command_latency_is_carried_by_the_cell_and_the_base_stand_in(tmp_path):
    config = CellConfig.from_dict({'cell': {'base': {'command_latency': 0.08, 'wheel_torque_limit': 0}}})
    assert config.base.command_latency == 0.08 and config.base.wheel_torque_limit == 0   # 0: none
    path, _ = write_cell_mjcf(config, tmp_path / 'cell.xml')
    stand_in = write_base_stand_in_mjcf(config, tmp_path / 'mir250.xml', arm_moves=True)
    for model in (mujoco.MjModel.from_xml_path(str(path)), mujoco.MjModel.from_xml_path(str(stand_in))):
        assert SimMobileBase.find(model).command_latency == pytest.approx(0.08)
    assert SimMobileBase.find(compile_cell(build_cell_spec(CellConfig()))).command_latency == 0.0
    with pytest.raises(ConfigError, match=r'cell\.base\.command_latency: must not be negative'):
        CellConfig.from_dict({'cell': {'base': {'command_latency': -0.1}}})


# -- the arm servo and its effect on the base ----------------------------------------------------
def quintic(t, duration):
    s = min(max(t / duration, 0.0), 1.0)
    return 10 * s ** 3 - 15 * s ** 4 + 6 * s ** 5, (30 * s ** 2 - 60 * s ** 3 + 30 * s ** 4) / duration


def test_ur5_gains_track_a_1_rad_move_in_2_s_within_1_mrad(cell_model):
    """config/controllers/ur5.yaml: all six joints move 1 rad in 2 s (quintic) at once, hand on,
    from a pose that keeps the hand off the floor; 0.2 s after the end every joint is within
    1 mrad, and no joint strays more than 5 mrad on the way (stable, no overshoot)."""
    model, controller = cell_controller(cell_model)
    data = mujoco.MjData(model)
    names = controller.joint_names
    arm = [names.index(name) for name in UR5_JOINTS]
    addr = [model.joint(name).qposadr[0] for name in UR5_JOINTS]
    start = np.array([0.0, -1.0, 1.0, -1.0, -1.0, 0.0])
    data.qpos[addr] = start
    mujoco.mj_forward(model, data)
    q_des, qd_des = np.zeros(len(names)), np.zeros(len(names))
    dt, worst = model.opt.timestep, 0.0
    for k in range(int(2.5 / dt)):
        s, sd = quintic(k * dt - 0.3, 2.0)
        q_des[arm], qd_des[arm] = start + s, sd
        data.ctrl[:] = controller.ctrl(model, q_des, qd_des)
        mujoco.mj_step(model, data)
        worst = max(worst, float(np.abs(data.qpos[addr] - q_des[arm]).max()))
    assert np.abs(data.qpos[addr] - (start + 1.0)).max() < 1e-3
    assert worst < 5e-3


def test_swinging_the_extended_arm_moves_the_base(cell_model):
    """The twin study's effect: the extended arm swinging shoulder_pan +-1 rad (0.5 Hz, peak pi
    rad/s, UR5's velocity limit), wheels commanded still, moves the base in y/yaw by >= 1 mm
    (yaw counted at the base's half length, 0.4 m); the base stays upright and on the floor."""
    model, controller = cell_controller(cell_model)
    data = mujoco.MjData(model)
    names = controller.joint_names
    pan = names.index('shoulder_pan_joint')
    data.qpos[model.joint('shoulder_pan_joint').qposadr[0]] = 1.0  # start at the turning point: no jerk
    mujoco.mj_forward(model, data)
    q_des, qd_des = np.zeros(len(names)), np.zeros(len(names))
    q_des[pan] = 1.0
    dt, frequency = model.opt.timestep, 0.5
    ys, yaws, tilt = [], [], 0.0
    for k in range(int(2.0 / dt)):
        phase = 2 * math.pi * frequency * k * dt
        q_des[pan], qd_des[pan] = math.cos(phase), -2 * math.pi * frequency * math.sin(phase)
        data.ctrl[:] = controller.ctrl(model, q_des, qd_des)  # wheels: qd_des 0
        mujoco.mj_step(model, data)
        ys.append(data.qpos[1])
        yaws.append(yaw_of(data.qpos[3:7]))
        tilt = max(tilt, math.acos(min(1.0, 1 - 2 * (data.qpos[4] ** 2 + data.qpos[5] ** 2))))
    y_pp, yaw_pp = float(np.ptp(ys)), float(np.ptp(yaws))
    assert max(y_pp, 0.4 * yaw_pp) >= 1e-3, (y_pp, yaw_pp)
    assert yaw_pp < 0.2 and tilt < 0.02 and abs(data.qpos[2]) < 2e-3  # a plausible, stable response


# -- writing the cell and the command line -------------------------------------------------------
def test_written_cell_compiles_on_its_own_from_a_temporary_directory(tmp_path, monkeypatch, cell_model):
    out = tmp_path / 'out' / 'cell.xml'
    path, model = write_cell_mjcf(CellConfig.from_yaml(CELL_YAML), out)
    assert path == out and model.nu == cell_model.nu == 30
    monkeypatch.chdir(tmp_path)
    loaded = mujoco.MjModel.from_xml_path(str(out))
    assert (loaded.nbody, loaded.njnt, loaded.nu, loaded.ntendon) == (model.nbody, model.njnt, model.nu, 4)
    np.testing.assert_allclose(loaded.dof_damping, cell_model.dof_damping)
    np.testing.assert_allclose(loaded.body_mass, cell_model.body_mass)
    with pytest.raises(ConfigError, match='exists'):
        write_cell_mjcf(None, out)
    write_cell_mjcf(None, out, force=True)


def test_arm_stand_in_keeps_the_six_arm_joints_and_the_cells_bodies(tmp_path, cell_model):
    """The stand-in is the cell with only the UR5's joints and actuators (named as in the cell, with
    or without an arm prefix): the same bodies, masses and options, the base where the cell's starts,
    and it loads with the UR's gains as the mock UR's bridge loads it."""
    path = write_arm_stand_in_mjcf(CELL_YAML, tmp_path / 'out' / 'ur5_with_hand.xml')
    twin = TwinModel(path)
    model = twin.model
    assert path.is_file() and twin.joint_names == arm_joint_names()
    assert [model.actuator(i).name for i in range(model.nu)] == arm_joint_names()
    assert model.ntendon == model.neq == model.nkey == model.nsensor == 0
    assert model.body_subtreemass[0] == pytest.approx(cell_model.body_subtreemass[0], rel=1e-12)
    cell_bodies = {cell_model.body(i).name: cell_model.body_mass[i] for i in range(cell_model.nbody)}
    assert {model.body(i).name: model.body_mass[i] for i in range(model.nbody)} == pytest.approx(cell_bodies)
    assert (model.opt.timestep, model.opt.integrator, model.opt.cone, model.opt.impratio) == (
        cell_model.opt.timestep, cell_model.opt.integrator, cell_model.opt.cone, cell_model.opt.impratio)
    poses = []
    for m in (model, cell_model):   # both at qpos0: the stand-in's base and hand where the cell's start
        data = mujoco.MjData(m)
        mujoco.mj_kinematics(m, data)
        poses.append({name: body_pose(m, data, name) for name in ('base_link', 'rh_palm', 'rh_ffdistal',
                                                                  'rh_thdistal')})
    for name, pose in poses[0].items():
        assert pose_error(pose, poses[1][name]) == pytest.approx((0.0, 0.0), abs=1e-7), name
    controller = SimController(model, ControllerGains.from_yaml(UR5_GAINS))
    assert controller.joint_names == arm_joint_names()
    prefixed = mujoco.MjModel.from_xml_path(str(write_arm_stand_in_mjcf(None, tmp_path / 'ra.xml', arm_prefix='ra_')))
    assert [prefixed.joint(i).name for i in range(prefixed.njnt)] == arm_joint_names('ra_')
    with pytest.raises(ConfigError, match='is a directory'):
        write_arm_stand_in_mjcf(None, tmp_path)


def test_arm_stand_in_moves_like_the_cell_and_the_bare_arm_does_not(tmp_path):
    """A fast shoulder-lift sweep (config/trajectories/ur5.yaml) simulated offline: the stand-in with
    the UR's gains against the cell with its own (config/controllers/cell.yaml), and bare ur5.xml (no
    hand) likewise. Measured RMS differences from the cell's six arm joint positions: stand-in 2.0e-5
    rad, bare arm 3.9e-4 rad (19x; 14x to 48x over the pan, elbow, wrist 1 and slow sweeps). What is
    left is the cell's base rocking on its wheels and the hand's joints giving a little."""
    trajectory = load_waypoint_yaml(config_path('trajectories', 'ur5.yaml'), 'shoulder_lift_sweep_fast', prefix='')
    rest = dict(zip(trajectory.joint_names, trajectory.positions[0]))

    def arm_positions(path, gains) -> np.ndarray:
        twin = TwinModel(path)
        controller = SimController(twin.model, ControllerGains.from_yaml(gains))
        sim = TrajectorySimulator(twin.model, controller, trajectory, trajectory.duration + 0.5, rest)
        columns = [controller.joint_names.index(j) for j in arm_joint_names()]
        return sim.run([twin.model])[0][:, columns]

    cell, _ = write_cell_mjcf(None, tmp_path / 'cell.xml')
    full = arm_positions(cell, config_path('controllers', 'cell.yaml'))
    stand_in = arm_positions(write_arm_stand_in_mjcf(None, tmp_path / 'stand_in.xml'), UR5_GAINS)
    bare = arm_positions(builtin_model_path('ur5'), UR5_GAINS)
    rms = {name: float(np.sqrt(np.mean((q - full) ** 2))) for name, q in (('stand-in', stand_in), ('bare', bare))}
    assert rms['stand-in'] * 5 <= rms['bare'] and rms['stand-in'] < 1e-4, rms


def test_cell_with_shadows_mesh_hand_writes_a_standalone_file(tmp_path, monkeypatch):
    if not SHADOW_HAND.is_file():
        pytest.skip(f'{SHADOW_HAND} is not available (needs ../shared beside the repository)')
    out = tmp_path / 'shadow_cell.xml'
    _, model = write_cell_mjcf(None, out, hand_path=SHADOW_HAND, arm_prefix='ra_')
    monkeypatch.chdir(tmp_path)
    loaded = mujoco.MjModel.from_xml_path(out.name)
    assert loaded.nmesh > 0 and loaded.nexclude > 0
    names = {loaded.joint(i).name for i in range(loaded.njnt)}
    assert 'rh_FFJ1' in names and 'ra_wrist_3_joint' in names


def test_bad_hand_and_config_are_named():
    with pytest.raises(ModelError, match='not found'):
        build_cell_spec(hand_path='/nonexistent/hand.xml')
    with pytest.raises(ModelError, match='no body named'):
        build_cell_spec(hand_path=builtin_model_path('ur5'))
    with pytest.raises(ConfigError, match=r"cell\.base: unknown key\(s\) \['mas'\]"):
        CellConfig.from_dict({'cell': {'base': {'mas': 90}}})
    with pytest.raises(ConfigError, match=r'cell\.cabinet\.size'):
        CellConfig.from_dict({'cell': {'cabinet': {'size': [0.5, 0.4]}}})
    with pytest.raises(ConfigError, match=r'cell\.arm\.prefix'):
        CellConfig.from_dict({'cell': {'arm': {'prefix': 'r a'}}})
    assert CellConfig.from_yaml(CELL_YAML) == CellConfig()  # the YAML holds the defaults


def test_cli_writes_the_cell_and_refuses_bad_input_with_exit_2(tmp_path, capsys):
    out = tmp_path / 'cell.xml'
    assert model_cli.main(['--cell', '--config', str(CELL_YAML), '--arm-prefix', 'ra_', '--out', str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f'wrote {out}:') and '30 actuators' in line and 'kg' in line
    assert mujoco.MjModel.from_xml_path(str(out)).joint('ra_shoulder_pan_joint').id > 0
    before = out.read_bytes()

    assert model_cli.main(['--cell', '--out', str(out)]) == 2  # exists
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'exists' in err[0] and '--force' in err[0]
    assert out.read_bytes() == before

    assert model_cli.main(['--cell', '--hand', str(tmp_path / 'missing.xml'), '--out', str(tmp_path / 'b.xml')]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'missing.xml' in err[0]
    assert not (tmp_path / 'b.xml').exists()

    assert model_cli.main(['--cell', '--out', str(out), '--force']) == 0
    assert mujoco.MjModel.from_xml_path(str(out)).joint('shoulder_pan_joint').id > 0


def test_ur5_servo_moves_at_speed_from_a_velocity_step():
    """A one-point goal starts with a velocity step; the stiff servo must not crawl (with clamped
    forces under implicitfast it reached 0.11 of 0.5 rad after 2 s: ur5.xml's header)."""
    from shadow_twin.common.paths import config_path
    from shadow_twin.control.trajectory import JointTrajectory
    from shadow_twin.simulation.live.simulation import LiveSimulation
    sim = LiveSimulation(builtin_model_path('ur5'), gains=config_path('controllers', 'ur5.yaml'))
    sim.set_trajectory(JointTrajectory(['shoulder_pan_joint'], np.array([1.0]), np.array([[0.5]])))
    sim.step(int(round(1.5 / sim.dt)))
    assert sim.positions(['shoulder_pan_joint'])[0] == pytest.approx(0.5, abs=2e-3)
