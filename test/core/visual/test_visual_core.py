"""The 3D view's core (shadow_twin/visual): the parts drawn of each geom kind, the body tree's relative
poses composing back to the world poses, a robot's configuration put into a model, and the error colours."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import trimesh
from scipy.spatial.transform import Rotation

from shadow_twin.visual.colours import ErrorScale
from shadow_twin.visual.configuration import RobotConfiguration, link_errors
from shadow_twin.visual.frames import BodyTree
from shadow_twin.visual.geometry import PLANE_SIDE, geom_parts

XML = """
<mujoco>
  <asset>
    <mesh name="wedge" vertex="0 0 0  0.1 0 0  0 0.1 0  0 0 0.1"/>
  </asset>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 1"/>
    <body name="arm" pos="0.1 0.2 0.3" quat="0.7071068 0 0.7071068 0">
      <joint name="hinge" type="hinge" axis="0 0 1"/>
      <geom name="rod" type="capsule" size="0.02 0.1" pos="0 0 0.05"/>
      <geom name="hidden" type="box" size="0.1 0.1 0.1" group="3"/>
      <body name="hand" pos="0 0.3 0">
        <joint name="slide" type="slide" axis="1 0 0"/>
        <geom name="block" type="box" size="0.01 0.02 0.03" rgba="1 0 0 1"/>
        <geom name="clear" type="sphere" size="0.05" rgba="1 1 1 0"/>
        <geom name="wedge" type="mesh" mesh="wedge"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.fixture()
def model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(XML)


def test_each_visible_geom_becomes_the_parts_a_viewer_draws(model, tmp_path):
    parts = geom_parts(model, tmp_path / 'meshes')
    assert [(p.geom_name, p.shape) for p in parts] == [
        ('floor', 'plane'), ('rod', 'cylinder'), ('rod', 'sphere'), ('rod', 'sphere'), ('block', 'box'),
        ('wedge', 'mesh')]                       # group 3 and the transparent sphere are not drawn
    floor, cylinder, top, bottom, block, wedge = parts
    assert floor.scale[:2].tolist() == [PLANE_SIDE, PLANE_SIDE]
    assert cylinder.scale.tolist() == pytest.approx([0.04, 0.04, 0.2])
    assert top.pos.tolist() == pytest.approx([0, 0, 0.15]) and bottom.pos.tolist() == pytest.approx([0, 0, -0.05])
    assert block.scale.tolist() == pytest.approx([0.02, 0.04, 0.06]) and block.rgba.tolist() == [1, 0, 0, 1]
    assert block.body_name == 'hand'
    mesh = trimesh.load(wedge.mesh_file)
    assert len(mesh.vertices) == 4 and len(mesh.faces) == 4
    # the mesh's vertices as MuJoCo compiled them: placed by the geom's pose they are the asset's
    placed = Rotation.from_quat(wedge.quat, scalar_first=True).apply(mesh.vertices) + wedge.pos
    assert sorted(map(tuple, placed.round(6))) == sorted(map(tuple, np.array(
        [[0, 0, 0], [0.1, 0, 0], [0, 0.1, 0], [0, 0, 0.1]]).round(6)))
    assert geom_parts(model, tmp_path / 'meshes')[-1].mesh_file == wedge.mesh_file     # written once
    assert all(p.shape != 'mesh' for p in geom_parts(model))                           # no folder: no meshes


def test_relative_poses_compose_back_to_the_world_poses(model):
    data = mujoco.MjData(model)
    data.qpos[:] = [0.7, 0.05]
    mujoco.mj_kinematics(model, data)
    tree = BodyTree(model, 'sim/')
    poses = tree.relative(data.xpos, data.xquat)
    assert poses.parents == ('sim/world', 'sim/arm') and poses.children == ('sim/arm', 'sim/hand')
    world = {'sim/world': (np.zeros(3), Rotation.identity())}
    for parent, child, pos, quat in zip(poses.parents, poses.children, poses.pos, poses.quat):
        p, r = world[parent]
        world[child] = (p + r.apply(pos), r * Rotation.from_quat(quat, scalar_first=True))
    for body, name in ((1, 'sim/arm'), (2, 'sim/hand')):
        assert world[name][0] == pytest.approx(data.xpos[body])
        assert (world[name][1].inv() * Rotation.from_quat(data.xquat[body], scalar_first=True)).magnitude() < 1e-9


def test_a_configuration_sets_named_joints_and_reports_the_unknown(model):
    configuration = RobotConfiguration(model)
    sim, real = mujoco.MjData(model), mujoco.MjData(model)
    assert configuration.apply(sim, {'hinge': 0.0, 'slide': 0.0}) == []
    assert configuration.apply(real, {'hinge': 0.0, 'slide': 0.03, 'wrist': 1.0, 'hinge2': float('nan')}) == [
        'wrist', 'hinge2']
    errors = link_errors(sim, real)
    assert errors == pytest.approx([0.0, 0.03])          # the slide moves the hand 3 cm, not the arm
    configuration.apply(real, {'slide': float('nan')})    # a non-finite angle leaves the joint as it was
    assert real.qpos[1] == 0.03


def test_error_colours_run_green_to_red_and_grey_for_unknown():
    scale = ErrorScale(full_scale=0.02, alpha=0.4)
    colours = scale.rgba(np.array([0.0, 0.005, 0.01, 0.02, 0.5, np.nan]))
    assert colours[0, 1] > colours[0, 0] and colours[3, 0] > colours[3, 1]    # green, then red
    assert np.all(np.diff(colours[:4, 0] - colours[:4, 1]) > 0)   # redder as the error grows
    assert colours[4].tolist() == colours[3].tolist()
    assert colours[5, :3].tolist() == [0.5, 0.5, 0.5] and np.all(colours[:, 3] == 0.4)
    assert [value for value, _ in scale.legend(3)] == pytest.approx([0.0, 0.01, 0.02])
    for bad in (dict(full_scale=0.0), dict(full_scale=float('nan')), dict(alpha=1.5)):
        with pytest.raises(ValueError):
            ErrorScale(**bad)
