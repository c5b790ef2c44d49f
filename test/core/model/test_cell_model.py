"""The cell models' parts and kinematics: the built-in UR5 and MiR250 on their own, the UR5's
kinematics in the assembled cell (MiR250 + cabinet + UR5 + hand, shadow_twin/model/cell/assembly.py)
against its DH figures, the hand on the flange, and the cell's names. The cell's dynamics:
test_cell_dynamics.py; writing it and ``shadow-twin model --cell``: test_cell_files.py.

Figures checked here come from the sources cited in ur5.xml and mir250.xml: the UR5 DH
parameters of Universal Robots' ROS 2 description (config/ur5), and the MiR250 figures of the
Simscape MiR250+UR5 twin study (IMECE 2023, table 1).
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
from support.poses import body_pose, pose_error, rot_x, rot_z, rpy, site_pose, trans

from shadow_twin.model.cell.assembly import (BASE_CASTER_JOINTS, BASE_WHEEL_JOINTS, UR5_JOINTS, arm_joint_names,
                                             arm_root_name, base_free_joint_name, build_cell_spec, compile_cell)
from shadow_twin.model.mjcf import BUILTIN_MODELS, TwinModel, builtin_model_path


# UR5 DH parameters (Universal Robots' ROS 2 description, config/ur5/default_kinematics.yaml), m and rad.
DH_D = (0.089159, 0.0, 0.0, 0.10915, 0.09465, 0.0823)
DH_A = (0.0, -0.425, -0.39225, 0.0, 0.0, 0.0)
DH_ALPHA = (math.pi / 2, 0.0, 0.0, math.pi / 2, -math.pi / 2, 0.0)
HAND_RPY = (math.pi / 2, math.pi, math.pi / 2)  # rh_forearm on the flange (Shadow's srhand_ur)


def dh_frame6(q):
    """Standard DH: T = prod Rz(theta_i) Tz(d_i) Tx(a_i) Rx(alpha_i), frame 0 -> frame 6."""
    out = np.eye(4)
    for theta, d, a, alpha in zip(q, DH_D, DH_A, DH_ALPHA):
        out = out @ rot_z(theta) @ trans(0, 0, d) @ trans(a, 0, 0) @ rot_x(alpha)
    return out


# -- fixtures ------------------------------------------------------------------------------------
@pytest.fixture(scope='module')
def cell_model():
    """The default cell (built-in hand, arm prefix '') compiled."""
    return compile_cell(build_cell_spec())


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
