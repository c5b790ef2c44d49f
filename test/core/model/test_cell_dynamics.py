"""The assembled cell's dynamics (shadow_twin/model/cell/assembly.py): the MiR250 standing still
and driving, the base's configuration (mass, wheels, velocity loops, command latency), the UR5's
servo gains tracking in the cell and the arm's swing moving the base, as in the Simscape MiR250+UR5
twin study (IMECE 2023). Parts and kinematics: test_cell_model.py."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

from shadow_twin.common.errors import ConfigError
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.model.cell.assembly import (UR5_JOINTS, BaseConfig, CellConfig, build_cell_spec, compile_cell,
                                             write_cell_mjcf)
from shadow_twin.model.mjcf import TwinModel, builtin_model_path
from shadow_twin.model.mock_models import write_base_stand_in_mjcf
from shadow_twin.simulation.mobile_base import SimMobileBase


REPO = Path(__file__).resolve().parents[3]
UR5_GAINS = REPO / 'config' / 'controllers' / 'ur5.yaml'
HAND_GAINS = REPO / 'config' / 'controllers' / 'shadow_hand_e.yaml'


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
