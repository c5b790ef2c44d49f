"""Adding a scene's objects to a model (shadow_twin/model/scene/build.py, geometry.py, names.py): masses
from the geometry, contact parameters, objects dropped on the floor or the cabinet settle at the height
their geometry gives, a fixed object rides on its body, a pose in a body's frame lands where the
kinematics puts it, the shipped scenes start without penetration, objects are removed and stay findable
through MJCF text. The scene file itself: test_scene_config.py."""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import numpy as np
import pytest
from support.poses import body_pose, pose_error, rpy, trans
from support.scene import can_entry, floor_spec, write_cube_obj

from shadow_twin.common.errors import ModelError
from shadow_twin.model.cell.assembly import build_cell_spec, compile_cell
from shadow_twin.model.mjcf import builtin_model_path, load_spec
from shadow_twin.model.scene import (SceneConfig, add_objects, free_joint_name, object_kinds, object_names,
                                     remove_object)
from shadow_twin.model.scene.geometry import PRIORITY

REPO = Path(__file__).resolve().parents[3]
CELL_SCENE = REPO / 'config' / 'scene.yaml'
HAND_SCENE = REPO / 'config' / 'scene_hand.yaml'
G = 9.81


def scene(*entries, root=None) -> SceneConfig:
    return SceneConfig.from_mapping({'objects': list(entries)}, 'test', root)


def settle(model, seconds: float = 1.0) -> mujoco.MjData:
    """Data of ``model`` after ``seconds`` of simulation from its initial state."""
    data = mujoco.MjData(model)
    for _ in range(round(seconds / model.opt.timestep)):
        mujoco.mj_step(model, data)
    return data


def object_contacts(model, data, names):
    """(geom 1, geom 2, distance m) of the contacts that involve a geom of ``names``."""
    ids = {model.geom(n).id for n in names}
    return [(model.geom(c.geom1).name, model.geom(c.geom2).name, float(c.dist)) for c in data.contact[:data.ncon]
            if c.geom1 in ids or c.geom2 in ids]


@pytest.fixture(scope='module')
def cell_with_scene():
    """The default cell with config/scene.yaml's objects: (spec, model)."""
    spec = build_cell_spec()
    assert add_objects(spec, SceneConfig.from_yaml(CELL_SCENE)) == ['can', 'tote', 'ball']
    return spec, compile_cell(spec)


# -- mass, inertia, contact parameters ------------------------------------------------------------------
def test_a_density_gives_the_mass_of_the_geometrys_volume(tmp_path):
    r, h, density = 0.03, 0.05, 700.0
    mesh = write_cube_obj(tmp_path / 'cube.obj', 0.1)
    volumes = {'box': 8 * 0.02 * 0.03 * 0.04, 'cylinder': math.pi * r * r * 2 * h,
               'sphere': 4 / 3 * math.pi * r ** 3, 'capsule': math.pi * r * r * 2 * h + 4 / 3 * math.pi * r ** 3,
               'mesh': 0.1 ** 3 * 0.5 * 1.0 * 2.0}
    sizes = {'box': [0.02, 0.03, 0.04], 'cylinder': [r, h], 'sphere': [r], 'capsule': [r, h]}
    entries = [can_entry(name=shape, shape=shape, size=sizes.get(shape), mass=None, density=density,
                         xyz=[i, 0, 0.2], mesh=str(mesh) if shape == 'mesh' else None,
                         scale=[0.5, 1.0, 2.0] if shape == 'mesh' else None) for i, shape in enumerate(volumes)]
    spec = floor_spec()
    add_objects(spec, scene(*entries))
    model = spec.compile()
    for shape, volume in volumes.items():         # MuJoCo holds mesh vertices in single precision
        assert model.body(shape).mass[0] == pytest.approx(density * volume, rel=1e-6 if shape == 'mesh' else 1e-12)


def test_a_mass_gives_a_uniform_solids_inertia_unless_one_is_given():
    m, (hx, hy, hz) = 2.0, (0.05, 0.1, 0.2)
    spec = floor_spec()
    add_objects(spec, scene(can_entry(name='block', shape='box', size=[hx, hy, hz], mass=m),
                            can_entry(name='given', inertia=[0.004, 0.005, 0.006], xyz=[1, 0, 0.1])))
    model = spec.compile()
    # uniform box of edges a b c: I = m (b^2 + c^2) / 12, ...
    expected = [m * ((2 * hy) ** 2 + (2 * hz) ** 2) / 12, m * ((2 * hx) ** 2 + (2 * hz) ** 2) / 12,
                m * ((2 * hx) ** 2 + (2 * hy) ** 2) / 12]
    np.testing.assert_allclose(model.body('block').inertia, expected, rtol=1e-9)
    assert model.body('block').mass[0] == m
    np.testing.assert_allclose(model.body('given').inertia, [0.004, 0.005, 0.006])
    np.testing.assert_allclose(model.body('given').ipos, 0.0, atol=1e-12)
    assert model.body('given').mass[0] == 0.35


def test_the_geom_carries_the_contact_parameters_and_its_contacts_take_them():
    spec = floor_spec(floor_friction=2.0)                      # a floor far more grippy than the object
    add_objects(spec, scene(can_entry(friction=[0.4, 0.01, 0.002], solref=[0.01, 0.8],
                                      solimp=[0.8, 0.9, 0.002, 0.4, 3.0], rgba=[0.1, 0.2, 0.3, 1.0])))
    model = spec.compile()
    geom = model.geom('can')
    np.testing.assert_allclose(geom.friction, [0.4, 0.01, 0.002])
    np.testing.assert_allclose(geom.solref, [0.01, 0.8])
    np.testing.assert_allclose(geom.solimp, [0.8, 0.9, 0.002, 0.4, 3.0])
    np.testing.assert_allclose(geom.rgba, [0.1, 0.2, 0.3, 1.0])
    assert geom.condim[0] == 6 and geom.priority[0] == PRIORITY > model.geom('floor').priority[0]
    data = settle(model, 0.05)
    contacts = [c for c in data.contact[:data.ncon]]
    assert contacts
    for contact in contacts:           # the object's parameters, not the floor's larger friction
        np.testing.assert_allclose(contact.friction, [0.4, 0.4, 0.01, 0.002, 0.002])
        assert contact.dim == 6
        np.testing.assert_allclose(contact.solref, [0.01, 0.8])


def test_a_scaled_scene_has_the_mock_hardwares_friction_and_mass():
    config = SceneConfig.from_yaml(CELL_SCENE)
    plain, mock = build_cell_spec(), build_cell_spec()
    add_objects(plain, config)
    add_objects(mock, config.scaled(friction=0.6, mass=1.3))
    plain, mock = plain.compile(), mock.compile()
    for name in config.names:
        assert mock.body(name).mass[0] == pytest.approx(1.3 * plain.body(name).mass[0])
        np.testing.assert_allclose(mock.geom(name).friction, 0.6 * plain.geom(name).friction)
        np.testing.assert_allclose(mock.body(name).inertia, 1.3 * plain.body(name).inertia)


# -- resting and riding ------------------------------------------------------------------------------------
def test_free_objects_dropped_on_the_floor_and_a_table_settle_at_their_geometrys_height(tmp_path):
    drop, top = 0.02, 0.3                          # m: each starts 2 cm above where it rests; table top
    mesh = write_cube_obj(tmp_path / 'cube.obj', 0.08)
    rest = {'block': top + 0.03, 'standing': 0.06, 'lying': 0.025, 'ball': top + 0.04, 'cube': 0.04}
    spec = floor_spec()
    add_objects(spec, scene(
        can_entry(name='table', shape='box', size=[0.3, 0.3, top / 2], mass=10, xyz=[0, 0, top / 2], free=False),
        can_entry(name='block', shape='box', size=[0.05, 0.04, 0.03], xyz=[-0.15, 0, rest['block'] + drop]),
        can_entry(name='ball', shape='sphere', size=[0.04], xyz=[0.15, 0.1, rest['ball'] + drop]),
        can_entry(name='standing', shape='cylinder', size=[0.03, 0.06], xyz=[1, 0, rest['standing'] + drop]),
        can_entry(name='lying', shape='capsule', size=[0.025, 0.05], xyz=[1, 1, rest['lying'] + drop],
                  rpy=[math.pi / 2, 0, 0]),
        can_entry(name='cube', shape='mesh', size=None, mesh=str(mesh), density=300, mass=None,
                  xyz=[-1, 0, rest['cube'] + drop])))
    model = spec.compile()
    data = settle(model, 1.0)
    for name, height in rest.items():
        body = model.body(name).id
        assert abs(data.xpos[body][2] - height) < 1e-3, (name, data.xpos[body][2], height)
        assert np.linalg.norm(data.cvel[body]) < 1e-2, name
    assert data.xpos[model.body('table').id][2] == top / 2          # fixed to the world


def test_a_free_object_on_the_cabinet_settles_on_its_top():
    """The can of config/scene.yaml, declared in the cabinet's frame 1 cm above its top, rests on it."""
    spec = build_cell_spec()
    add_objects(spec, scene(can_entry(frame='cabinet', xyz=[-0.15, -0.13, 0.40 + 0.0575 + 0.01])))
    model = compile_cell(spec)
    data = settle(model, 1.0)
    can = body_pose(model, data, 'can')
    in_cabinet = np.linalg.inv(body_pose(model, data, 'cabinet')) @ can
    assert abs(in_cabinet[2, 3] - (0.40 + 0.0575)) < 1e-3          # top of the 0.40 m cabinet + half-height


def test_a_fixed_object_rides_on_its_moving_body():
    """A box fixed to a free cart pushed along the floor keeps its place on the cart."""
    spec = floor_spec(floor_friction=0.2)
    cart = spec.worldbody.add_body(name='cart', pos=[0, 0, 0.05])
    cart.add_freejoint(name='cart_free')
    cart.add_geom(name='cart', type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.2, 0.2, 0.05], mass=5.0,
                  friction=[0.2, 0.005, 0.0001])
    add_objects(spec, scene(can_entry(name='load', shape='box', size=[0.05, 0.05, 0.05], xyz=[0.1, 0.05, 0.1],
                                      rpy=[0, 0, 0.3], frame='cart', free=False)))
    model = spec.compile()
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    start = body_pose(model, data, 'load')
    mass = model.body_subtreemass[model.body('cart').id]                    # 5 kg + the 0.35 kg load
    data.xfrc_applied[model.body('cart').id] = [40.0, 0, 0, 0, 0, 0]       # N along x, about 4 x the friction
    for _ in range(250):
        mujoco.mj_step(model, data)
    moved = body_pose(model, data, 'load')
    travel = (40.0 - 0.2 * mass * G) / mass * 0.5 ** 2 / 2                 # m in 0.5 s: x = a t^2 / 2
    assert moved[0, 3] - start[0, 3] == pytest.approx(travel, rel=0.05)   # the cart went, with the load
    offset = np.linalg.inv(body_pose(model, data, 'cart')) @ moved
    err = pose_error(offset, trans(0.1, 0.05, 0.1) @ rpy(0, 0, 0.3))
    assert err[0] < 1e-9 and err[1] < 1e-6


def test_the_tote_rides_on_the_mirs_top_plate_when_the_base_moves(cell_with_scene):
    _, model = cell_with_scene
    data = mujoco.MjData(model)
    base = model.joint('base_free').qposadr[0]
    data.qpos[base:base + 7] = [1.0, 2.0, 0.0, math.cos(0.25), 0, 0, math.sin(0.25)]    # 0.5 rad of yaw
    mujoco.mj_kinematics(model, data)
    expected = trans(1.0, 2.0, 0.0) @ rpy(0, 0, 0.5) @ trans(0.32, 0.0, 0.392)
    err = pose_error(body_pose(model, data, 'tote'), expected)
    assert err[0] < 1e-9 and err[1] < 1e-6


def test_a_pose_in_a_body_frame_lands_where_the_kinematics_puts_that_body():
    """A fixed object follows its body (here the UR5's wrist_3_link) in any pose; a free one is placed
    where the body (the palm) is at the start."""
    spec = build_cell_spec()
    offset = ([0.02, -0.03, 0.2], [0.3, -0.2, 1.0])
    add_objects(spec, scene(can_entry(name='on_wrist', frame='wrist_3_link', xyz=offset[0], rpy=offset[1],
                                      free=False),
                            can_entry(name='near_palm', frame='rh_palm', xyz=offset[0], rpy=offset[1])))
    model = compile_cell(spec)
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    err = pose_error(body_pose(model, data, 'near_palm'),
                     body_pose(model, data, 'rh_palm') @ trans(*offset[0]) @ rpy(*offset[1]))
    assert err[0] < 1e-9 and err[1] < 1e-6
    data.qpos[[model.joint(j).qposadr[0] for j in ('shoulder_pan_joint', 'elbow_joint', 'wrist_3_joint')]] = \
        [0.7, -1.1, 2.0]
    mujoco.mj_kinematics(model, data)
    err = pose_error(body_pose(model, data, 'on_wrist'),
                     body_pose(model, data, 'wrist_3_link') @ trans(*offset[0]) @ rpy(*offset[1]))
    assert err[0] < 1e-9 and err[1] < 1e-6


def test_a_free_object_is_placed_at_keyframe_0_and_the_keyframes_get_its_pose():
    spec = floor_spec()
    arm = spec.worldbody.add_body(name='arm', pos=[0, 0, 0.5])
    arm.add_joint(name='hinge', axis=[0, 0, 1])
    arm.add_geom(type=mujoco.mjtGeom.mjGEOM_CAPSULE, fromto=[0, 0, 0, 0.3, 0, 0], size=[0.02, 0, 0])
    arm.add_body(name='tip', pos=[0.3, 0, 0])
    spec.add_key(name='start', qpos=[math.pi / 2])
    add_objects(spec, scene(can_entry(frame='tip', xyz=[0.1, 0, 0])))
    model = spec.compile()
    assert model.nq == 8
    np.testing.assert_allclose(model.key_qpos[0][:4], [math.pi / 2, 0.0, 0.4, 0.5], atol=1e-12)   # tip turned
    np.testing.assert_allclose(model.key_qpos[0][4:], [math.cos(math.pi / 4), 0, 0, math.sin(math.pi / 4)])
    remove_object(spec, 'can')
    np.testing.assert_allclose(spec.compile().key_qpos, [[math.pi / 2]])


# -- the shipped scenes ----------------------------------------------------------------------------------------
def test_the_cell_scene_starts_without_penetration_and_its_objects_stay_put(cell_with_scene):
    _, model = cell_with_scene
    names = object_names(model)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    assert all(dist > -1e-3 for _, _, dist in object_contacts(model, data, names))
    start = {name: data.xpos[model.body(name).id].copy() for name in names}
    data = settle(model, 0.5)
    for name in names:
        assert np.linalg.norm(data.xpos[model.body(name).id] - start[name]) < 2e-3, name
    touching = object_contacts(model, data, names)
    assert all(dist > -1e-3 for _, _, dist in touching)
    assert {tuple(sorted((a, b))) for a, b, _ in touching} <= {('cabinet_box', 'can'), ('ball', 'floor')}


def test_the_hand_scene_starts_without_touching_the_hand():
    spec = load_spec(builtin_model_path('shadow_hand_e'))
    names = add_objects(spec, SceneConfig.from_yaml(HAND_SCENE))
    model = spec.compile()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    hand = [g for g in range(model.ngeom) if model.geom(g).name.startswith('rh_')]
    for name in names:
        gap = min(mujoco.mj_geomDistance(model, data, model.geom(name).id, g, 0.1, None) for g in hand)
        assert gap > 1e-3, name
    assert all(dist > -1e-3 for _, _, dist in object_contacts(model, data, names))
    can = data.xpos[model.body('can').id].copy()
    data = settle(model, 0.5)
    assert np.linalg.norm(data.xpos[model.body('can').id] - can) < 2e-3


# -- finding, removing, refusing -------------------------------------------------------------------------------
def test_objects_stay_findable_through_mjcf_text_and_the_written_file_compiles_anywhere(tmp_path, monkeypatch):
    mesh = write_cube_obj(tmp_path / 'cube.obj', 0.05)
    spec = floor_spec()
    add_objects(spec, scene(can_entry(), can_entry(name='cube', shape='mesh', size=None, mesh=str(mesh),
                                                   xyz=[1, 0, 0.025], free=False)))
    reparsed = mujoco.MjSpec.from_string(spec.to_xml())
    assert object_names(reparsed) == object_names(reparsed.compile()) == object_names(spec) == ['can', 'cube']
    assert object_kinds(reparsed.compile()) == {'can': 'free', 'cube': 'fixed'}
    assert reparsed.joint(free_joint_name('can')) is not None
    (tmp_path / 'elsewhere').mkdir()
    (tmp_path / 'elsewhere' / 'scene.xml').write_text(spec.to_xml())
    monkeypatch.chdir(tmp_path / 'elsewhere')
    model = mujoco.MjModel.from_xml_path(str(tmp_path / 'elsewhere' / 'scene.xml'))
    assert model.body('cube').mass[0] == pytest.approx(0.35) and object_names(model) == ['can', 'cube']


def test_remove_object_takes_the_object_and_those_fixed_to_it(cell_with_scene):
    spec = mujoco.MjSpec.from_string(cell_with_scene[0].to_xml())
    nq = cell_with_scene[1].nq
    add_objects(spec, scene(can_entry(name='lid', shape='box', size=[0.02, 0.02, 0.005], frame='can',
                                      xyz=[0, 0, 0.0625], free=False)))
    assert remove_object(spec, 'tote') == ['tote']
    model = spec.compile()
    assert model.nq == nq and object_names(model) == ['can', 'ball', 'lid']
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, 'tote') < 0
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, 'tote') < 0
    assert remove_object(spec, 'can') == ['can', 'lid']
    model = spec.compile()
    assert model.nq == nq - 7 and object_names(model) == ['ball'] and model.ntext == 1
    with pytest.raises(ModelError, match=r"no scene object named 'can'.*\['ball'\]"):
        remove_object(spec, 'can')
    with pytest.raises(ModelError, match="no scene object named 'cabinet'"):
        remove_object(spec, 'cabinet')                    # a body of the cell, not an object


def test_removing_a_mesh_object_drops_its_mesh(tmp_path):
    spec = floor_spec()
    add_objects(spec, scene(can_entry(shape='mesh', size=None, mesh=str(write_cube_obj(tmp_path / 'c.obj', 0.05)))))
    assert spec.compile().nmesh == 1
    remove_object(spec, 'can')
    assert spec.compile().nmesh == 0 and spec.mesh('can_mesh') is None


@pytest.mark.parametrize('entry, message', [
    (can_entry(frame='shelf'), "scene object 'can': frame 'shelf' is neither world, odom nor a body"),
    (can_entry(name='cabinet'), "scene object 'cabinet': the model already has a body named 'cabinet'"),
    (can_entry(name='floor'), "the model already has a geom named 'floor'"),
    (can_entry(name='elbow_joint'), "the model already has a joint named 'elbow_joint'"),
    (can_entry(name='base'), "the model already has a joint named 'base_free'"),
])
def test_an_unknown_frame_or_a_name_in_use_is_one_model_error_line(entry, message):
    spec = build_cell_spec()
    with pytest.raises(ModelError, match=message) as caught:
        add_objects(spec, scene(entry))
    assert '\n' not in str(caught.value)


def test_adding_a_scene_twice_is_refused_and_a_bad_mesh_is_named(tmp_path):
    spec = floor_spec()
    add_objects(spec, scene(can_entry()))
    with pytest.raises(ModelError, match="already has a body named 'can'"):
        add_objects(spec, scene(can_entry()))
    flat = tmp_path / 'flat.obj'
    flat.write_text('v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n')
    with pytest.raises(ModelError, match="scene object 'flat': MuJoCo cannot build it") as caught:
        add_objects(spec, scene(can_entry(name='flat', shape='mesh', size=None, mesh=str(flat), mass=None,
                                          density=100)))
    assert '\n' not in str(caught.value)
