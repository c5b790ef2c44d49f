"""The cell's pick-up (shadow_twin.control.pick): the arm's IK reaches what it says, refuses what it
cannot, and the planned pick lifts config/scene.yaml's can off the tote in the simulated cell."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from shadow_twin.common.errors import ModelError
from shadow_twin.common.paths import config_path
from shadow_twin.control.pick import GRASP, plan_pick, side_grasp_rotation, solve_arm_ik
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.cell.assembly import arm_joint_names, write_cell_mjcf
from shadow_twin.model.scene import SceneConfig
from shadow_twin.simulation.live.entities import EntityMotion, object_motion, set_object_motion
from shadow_twin.simulation.live.simulation import LiveSimulation

ARM = arm_joint_names()
#: The can's place on the tote (config/scene.yaml: the tote's top at z 0.432, the base at the origin), m.
ON_TOTE = np.array([0.32, 0.02, 0.432 + 0.0575 + 0.001])


@pytest.fixture(scope='module')
def cell_path(tmp_path_factory):
    path, _ = write_cell_mjcf(None, tmp_path_factory.mktemp('cell') / 'cell.xml')
    return path


def test_side_grasp_rotation_is_a_rotation_with_the_palm_towards_the_object():
    approach = np.array([-0.6, 0.8, 0.3])            # the vertical part is ignored
    rotation = side_grasp_rotation(approach)
    np.testing.assert_allclose(rotation.T @ rotation, np.eye(3), atol=1e-12)
    assert np.linalg.det(rotation) == pytest.approx(1.0)
    np.testing.assert_allclose(-rotation[:, 1], [-0.6, 0.8, 0.0], atol=1e-12)   # palm normal (-y)
    np.testing.assert_allclose(rotation[:, 0], [0.0, 0.0, 1.0])                   # thumb's side up
    with pytest.raises(ValueError, match='horizontal part'):
        side_grasp_rotation([0.0, 0.0, -1.0])


def test_ik_reaches_the_pose_it_returns_and_refuses_one_out_of_reach(cell_path):
    model = mujoco.MjModel.from_xml_path(str(cell_path))
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    rotation = side_grasp_rotation([-1.0, 0.0, 0.0])
    target = np.array([0.40, -0.30, 0.55])
    q = solve_arm_ik(model, data, ARM, target, rotation, np.array([0.0, -1.2, 1.5, -1.9, -1.57, 0.0]))
    check = mujoco.MjData(model)
    check.qpos[:] = data.qpos
    check.qpos[[model.jnt_qposadr[model.joint(j).id] for j in ARM]] = q
    mujoco.mj_kinematics(model, check)
    body = model.body('rh_forearm').id
    np.testing.assert_allclose(check.xpos[body], target, atol=2e-4)
    np.testing.assert_allclose(check.xmat[body].reshape(3, 3), rotation, atol=2e-3)
    assert np.all(data.qpos[[model.jnt_qposadr[model.joint(j).id] for j in ARM]] == 0.0)   # data untouched
    with pytest.raises(ModelError, match='cannot reach'):
        solve_arm_ik(model, data, ARM, np.array([2.5, 0.0, 0.8]), rotation, q)      # UR5 reach: 0.85 m
    with pytest.raises(ModelError, match='no_such_joint'):
        solve_arm_ik(model, data, ['no_such_joint'], target, rotation, [0.0])


def test_the_plan_lifts_the_can_off_the_tote_and_sets_it_down(cell_path):
    sim = LiveSimulation(cell_path, gains=config_path('controllers', 'cell.yaml'),
                         scene=SceneConfig.from_yaml(config_path('scene.yaml')))
    sim.set_positions(dict(zip(ARM, [-1.0, 0.0, 0.0, 0.0, 0.0, 0.0])))    # where the demo's swing ends
    sim.set_positions({'rh_WRJ1': -0.3, 'rh_FFJ3': 1.2, 'rh_THJ4': 0.8})     # as its first goal leaves the hand
    set_object_motion(sim, 'can', EntityMotion(ON_TOTE, np.array([1.0, 0.0, 0.0, 0.0])))
    sim.step(100)
    start = object_motion(sim, 'can').position.copy()
    plan = plan_pick(sim.model, sim.data, ARM, start, [-1.0, 0.0, 0.0], lift=0.15,
                     q0=np.array([0.0, -1.2, 1.5, -1.9, -1.57, 0.0]))
    assert plan.joint_names == ARM + list(GRASP) and len(GRASP) == 24     # the whole hand
    assert np.all(np.diff(plan.times) > 0) and plan.positions.shape == (len(plan.times), len(plan.joint_names))
    sim.set_trajectory(JointTrajectory(plan.joint_names, plan.times, plan.positions))
    t0, heights = sim.time, []
    while sim.time < t0 + plan.times[-1] + 1.0:
        sim.step(25)
        heights.append((sim.time - t0, object_motion(sim, 'can').position[2] - start[2]))
    heights = np.array(heights)
    hold = heights[(heights[:, 0] > plan.phases['hold'][0]) & (heights[:, 0] < plan.phases['hold'][1]), 1]
    assert hold.min() > 0.10, hold.min()                  # lifted, and held through the hold
    assert hold.max() < plan.lift + 0.01                   # not thrown: it rose with the hand
    before = heights[heights[:, 0] < plan.phases['close'][0], 1]
    assert np.abs(before).max() < 0.005                    # the approach left it standing
    assert abs(heights[-1, 1]) < 0.005                     # set down upright on the tote at the end
