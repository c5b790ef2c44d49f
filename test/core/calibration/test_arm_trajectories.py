"""The UR5 arm's calibration trajectories in the cell (``config/trajectories/ur5.yaml``): every
trajectory loads, names only the cell's arm (and hand) joints, starts and ends at one rest pose,
stays inside the joint ranges and below the UR5's pi rad/s, and, simulated in the cell, touches
nothing (contacts of the arm and the hand with the floor, the base, the cabinet and the arm's own
base enabled for the check), follows its setpoints within 10 mrad and stays within the UR5's effort
limits. Calibrating the arm from recordings: test_arm_calibration.py.
"""

from __future__ import annotations

import copy
import logging
import math

import mujoco
import numpy as np
import pytest
import yaml
from support.arm_cell import SETTLE, TRAJECTORIES, rest_state, trajectory

from shadow_twin.model.cell.assembly import UR5_JOINTS, arm_joint_names
from shadow_twin.simulation.offline import FULL_STATE, TrajectorySimulator
from support import arm_cell

cell_file, cell = arm_cell.cell_file, arm_cell.cell        # fixtures


#: The UR5's joint speed limit, rad/s, and effort limits, N m (ur5.xml [LIM]: joint_limits.yaml).
SPEED_LIMIT = math.pi
EFFORT_LIMITS = dict(zip(UR5_JOINTS, (150.0, 150.0, 150.0, 28.0, 28.0, 28.0)))
SECTIONS = ('arm_trajectories', 'arm_and_hand_trajectories')
ALL_TRAJECTORIES = [name for section in SECTIONS
                    for name in (yaml.safe_load(TRAJECTORIES.read_text()).get(section) or {})]
#: Link bodies of the arm near its mount, and those beyond the elbow, in the cell (arm prefix '').
ARM_BASE_BODIES = ('ur5_base_link', 'shoulder_link', 'upper_arm_link')
ARM_DISTAL_BODIES = ('forearm_link', 'wrist_1_link', 'wrist_2_link', 'wrist_3_link')
#: What the arm must stay clear of: the floor, the MiR250's chassis and drive wheels, the cabinet.
SURROUNDINGS = ('floor', 'chassis', 'left_wheel_contact', 'right_wheel_contact', 'cabinet_box')
CLEARANCE = 0.05                 # m, the least distance of forearm, wrists and hand to the surroundings
log = logging.getLogger(__name__)


# -- fixtures and helpers ------------------------------------------------------------------------
def geoms_of(model: mujoco.MjModel, bodies) -> list[int]:
    return [g for g in range(model.ngeom) if model.body(model.geom_bodyid[g]).name in bodies]


def hand_geoms(model: mujoco.MjModel) -> list[int]:
    return [g for g in range(model.ngeom) if model.body(model.geom_bodyid[g]).name.startswith('rh_')]


def checking_model(model: mujoco.MjModel) -> mujoco.MjModel:
    """``model`` with the collisions the cell leaves out on purpose switched on, to detect them:
    arm and hand against the base's chassis and drive wheels and the cabinet (collision bit 4),
    wrists and hand against the arm's mount, shoulder and upper arm (bit 8). Arm and hand already
    collide with the floor. Without such a contact the motion is the cell's own."""
    moving = geoms_of(model, ('upper_arm_link',) + ARM_DISTAL_BODIES) + hand_geoms(model)
    distal = geoms_of(model, ARM_DISTAL_BODIES[1:]) + hand_geoms(model)
    model.geom_contype[moving] |= 4
    model.geom_conaffinity[[model.geom(name).id for name in SURROUNDINGS[1:]]] |= 4
    model.geom_contype[distal] |= 8
    model.geom_conaffinity[geoms_of(model, ARM_BASE_BODIES)] |= 8
    for g in range(model.ngeom):  # the broad phase filters by the bodies' masks: the OR of their geoms'
        model.body_contype[model.geom_bodyid[g]] |= model.geom_contype[g]
        model.body_conaffinity[model.geom_bodyid[g]] |= model.geom_conaffinity[g]
    return model


def moving_average(values: np.ndarray, samples: int) -> np.ndarray:
    kernel = np.ones(samples) / samples
    return np.stack([np.convolve(values[:, k], kernel, mode='valid') for k in range(values.shape[1])], axis=1)


# -- the trajectories ----------------------------------------------------------------------------
def test_trajectories_load_name_the_cell_joints_and_respect_ranges_and_speed(cell):
    """Every trajectory loads, names the six arm joints in ur_robot_driver's order (and, in the
    combined section, the hand's joints after them), starts and ends at the common rest pose, stays
    inside every joint's range and below pi rad/s (sampled as the joint trajectory controller does),
    each sweep moves its joint alone both ways, the fast ones near the speed limit."""
    twin, controller = cell
    model = twin.model
    data = yaml.safe_load(TRAJECTORIES.read_text())
    assert data['arm_joints_order'] == list(UR5_JOINTS)  # ur_robot_driver's names, without a prefix
    arm = arm_joint_names()
    hand = [j for j in controller.joint_names if j.startswith('rh_')]
    sweeps, combined = data['arm_trajectories'], data['arm_and_hand_trajectories']
    for joint in UR5_JOINTS:
        assert {f'{joint[:-len("_joint")]}_sweep_{speed}' for speed in ('slow', 'fast')} <= set(sweeps)
    assert combined and set(sweeps) | set(combined) == set(ALL_TRAJECTORIES)
    rest = np.array(list(rest_state(ALL_TRAJECTORIES[0]).values())[:6])
    for name in ALL_TRAJECTORIES:
        traj = trajectory(name)
        if name in sweeps:
            assert traj.joint_names == arm
        else:
            assert traj.joint_names[:6] == arm and sorted(traj.joint_names[6:]) == sorted(hand)
        positions = traj.positions
        np.testing.assert_allclose(positions[0, :6], rest, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(positions[-1], positions[0], atol=1e-6, err_msg=name)
        for k, joint in enumerate(traj.joint_names):
            low, high = model.jnt_range[model.joint(joint).id]
            assert low <= positions[:, k].min() and positions[:, k].max() <= high, (name, joint)
        # sampled as the JTC does (position-only points: linear), from the rest pose it starts at
        times = np.arange(0.0, traj.duration + 0.01, 0.002)
        _, velocity, _ = traj.with_start(positions[0]).sample(times)
        peak = np.abs(velocity[:, :6]).max(axis=0)
        assert peak.max() < SPEED_LIMIT, (name, peak)
        if name in sweeps:
            joint = next(j for j in UR5_JOINTS if name.startswith(j[:-len('_joint')] + '_sweep'))
            k = UR5_JOINTS.index(joint)
            others = [c for c in range(6) if c != k]
            assert np.ptp(positions[:, others], axis=0).max() < 1e-9, name   # the others hold
            assert positions[:, k].max() - rest[k] >= 0.8 and rest[k] - positions[:, k].min() >= 0.8, name
            if name.endswith('_fast'):
                assert peak[k] > 0.75 * SPEED_LIMIT, (name, peak[k])
            else:
                assert peak[k] <= 1.0, (name, peak[k])
        else:
            assert np.ptp(positions, axis=0)[:6].min() > 0.1, name        # every arm joint moves
            assert np.ptp(positions, axis=0)[6:].max() > 1.0, name        # and the hand closes


def robot_contacts(model: mujoco.MjModel, data: mujoco.MjData, robot: set[int]) -> set[tuple[str, str]]:
    """Geom name pairs of the contacts in ``data`` that involve a geom of ``robot``."""
    return {(model.geom(g1).name, model.geom(g2).name) for g1, g2 in zip(data.contact.geom1, data.contact.geom2)
            if g1 in robot or g2 in robot}


def robot_geoms(model: mujoco.MjModel) -> set[int]:
    """The arm's moving links' and the hand's geoms (the arm's mount is fixed to the cabinet)."""
    return set(geoms_of(model, ARM_BASE_BODIES[1:] + ARM_DISTAL_BODIES) + hand_geoms(model))


@pytest.mark.parametrize('offsets, partner', [
    ((0.0, 0.9, 1.2, 0.0, 0.0, 0.0), 'cabinet_box'),        # reached down and folded: the hand in the cabinet
    ((0.0, 2.0, 0.0, 0.0, 0.0, 0.0), 'chassis'),            # bent far forward: the hand on the base
    ((0.0, 0.0, 1.5, -1.0, 0.0, 0.0), 'upper_arm_tube')])   # elbow folded: the wrist against the upper arm
def test_the_collision_check_sees_the_arm_hit_the_cell(cell, offsets, partner):
    """Negative control of the check below: poses away from the rest pose that put the hand or the
    wrist into the cabinet, the base or the upper arm give contacts with them in the checking model
    (and none in the cell as it is, which leaves those collisions out)."""
    twin, _ = cell
    rest = list(rest_state(ALL_TRAJECTORIES[0]).values())[:6]
    found = {}
    for label, model in (('cell', twin.model), ('checking', checking_model(copy.copy(twin.model)))):
        data = mujoco.MjData(model)
        for joint, value, offset in zip(UR5_JOINTS, rest, offsets):
            data.qpos[model.joint(joint).qposadr[0]] = value + offset
        mujoco.mj_forward(model, data)
        found[label] = {name for pair in robot_contacts(model, data, robot_geoms(model)) for name in pair}
    assert partner in found['checking'] and partner not in found['cell'], found


@pytest.mark.parametrize('name', ALL_TRAJECTORIES)
def test_trajectory_runs_in_the_cell_touching_nothing(cell, name):
    """Simulated in the cell (cell.yaml gains, from the rest pose, plus SETTLE s): no contact of the
    arm or the hand with anything (floor, base, cabinet, the arm's mount), forearm, wrists and hand
    at least CLEARANCE from the surroundings, every arm joint within 10 mrad of its setpoint on the
    way and 1.5 mrad at the end, the arm's torques (50 ms means) within the UR5's effort limits, and
    the base still on the floor."""
    twin, controller = cell
    traj = trajectory(name)
    sim = TrajectorySimulator(twin.model, controller, traj, traj.duration + SETTLE, rest_state(name))
    model = checking_model(sim.model_copies(1)[0])
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, sim.initial_state, FULL_STATE)
    controls = sim.control(model)
    robot = robot_geoms(model)
    distal = geoms_of(model, ARM_DISTAL_BODIES) + hand_geoms(model)
    surroundings = [model.geom(g).id for g in SURROUNDINGS]
    qpos = [model.joint(j).qposadr[0] for j in UR5_JOINTS]
    dofs = [model.joint(j).dofadr[0] for j in UR5_JOINTS]
    positions, torques, touches = np.empty((sim.nstep, 6)), np.empty((sim.nstep, 6)), set()
    clearance = (np.inf, '')
    base_height = data.qpos[2]
    for k in range(sim.nstep):
        data.ctrl[:] = controls[k]
        mujoco.mj_step(model, data)
        positions[k], torques[k] = data.qpos[qpos], data.qfrc_actuator[dofs]
        touches |= robot_contacts(model, data, robot)
        if k % 25 == 0:  # every 50 ms
            for g in distal:
                for s in surroundings:
                    distance = mujoco.mj_geomDistance(model, data, g, s, 1.0, None)
                    if distance < clearance[0]:
                        clearance = (distance, f'{model.geom(g).name} - {model.geom(s).name} at {k * sim.dt:.2f} s')
    assert not touches, (name, sorted(touches))
    assert clearance[0] >= CLEARANCE, (name, clearance)
    desired = traj.with_start(traj.positions[0]).sample(sim.times)[0][:, :6]
    error = np.abs(positions - desired)
    assert error.max() < 0.010, (name, error.max(axis=0))
    assert error[-1].max() < 0.0015, (name, error[-1])
    mean_torque = np.abs(moving_average(torques, int(round(0.05 / sim.dt)))).max(axis=0)
    assert np.all(mean_torque <= [EFFORT_LIMITS[j] for j in UR5_JOINTS]), (name, mean_torque.round(1))
    assert abs(data.qpos[2] - base_height) < 0.005, name
    log.info('%s: clearance %.3f m (%s), tracking %.2f mrad, torque %s N m', name, clearance[0], clearance[1],
             1e3 * error.max(), mean_torque.round(1))
