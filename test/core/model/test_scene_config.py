"""The scene file (shadow_twin/model/scene/config.py): the shipped scenes parse, defaults are MuJoCo's,
the condim follows the friction coefficients, a mesh path is relative to the file, ``scaled`` gives the
mock hardware's objects, and every bad value is one ConfigError line naming the object and the key.
Adding the objects to models: test_scene_build.py."""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import numpy as np
import pytest
from support.scene import can_entry, write_cube_obj

from shadow_twin.common.errors import ConfigError
from shadow_twin.model.scene import ObjectConfig, SceneConfig

REPO = Path(__file__).resolve().parents[3]


def scene(*entries, root=None) -> SceneConfig:
    return SceneConfig.from_mapping({'scene': {'objects': list(entries)}}, 'test.yaml', root)


# -- the shipped scenes -------------------------------------------------------------------------------
def test_the_cell_scene_declares_a_can_a_tote_and_a_ball():
    config = SceneConfig.from_yaml(REPO / 'config' / 'scene.yaml')
    assert config.names == ['can', 'tote', 'ball']
    can, tote, ball = config.objects
    assert can.shape == 'cylinder' and can.size == (0.033, 0.0575) and can.mass == 0.35 and can.free
    assert 2 * can.size[1] == pytest.approx(0.115) and can.frame == 'cabinet'
    assert tote.density == 200.0 and tote.mass is None and not tote.free and tote.frame == 'base_link'
    # the condim each friction needs: torsional -> 4, sliding only -> 3, rolling -> 6
    assert (can.condim, tote.condim, ball.condim) == (4, 3, 6)
    assert len(can.solimp) == 5 and can.solimp[3:] == tuple(mujoco.MjSpec().worldbody.add_geom().solimp[3:])


def test_the_hand_scene_declares_a_stand_and_a_can():
    config = SceneConfig.from_yaml(REPO / 'config' / 'scene_hand.yaml')
    assert config.names == ['stand_post', 'stand_plate', 'can']
    assert [obj.free for obj in config.objects] == [False, False, True]


def test_an_empty_scene_file_has_no_objects(tmp_path):
    path = tmp_path / 'empty.yaml'
    path.write_text('# nothing\n')
    assert SceneConfig.from_yaml(path).objects == ()
    path.write_text('scene:\n  objects: []\n')
    assert SceneConfig.from_yaml(path).objects == ()


# -- defaults and conversions ---------------------------------------------------------------------------
def test_defaults_are_mujocos_geom_defaults_without_spin_or_roll_friction():
    obj = scene(can_entry()).objects[0]
    geom = mujoco.MjSpec().worldbody.add_geom()          # MuJoCo's defaults
    assert obj.solref == tuple(geom.solref) and obj.solimp == tuple(geom.solimp)
    assert obj.friction == (geom.friction[0], 0.0, 0.0) and obj.condim == 3 == geom.condim
    assert obj.frame == 'world' and obj.free and obj.rgba is None and obj.rpy == (0.0, 0.0, 0.0)


def test_the_condim_given_is_kept_when_it_uses_every_friction_coefficient():
    assert scene(can_entry(condim=6, friction={'torsional': 0.01})).objects[0].condim == 6
    assert scene(can_entry(condim=1, friction={'sliding': 0})).objects[0].condim == 1
    assert scene(can_entry(friction=[0.5, 0.01, 0.001])).objects[0].friction == (0.5, 0.01, 0.001)


def test_the_pose_quaternion_is_urdf_roll_pitch_yaw():
    obj = scene(can_entry(rpy=[0.0, 0.0, math.pi / 2])).objects[0]
    np.testing.assert_allclose(obj.quat, [math.cos(math.pi / 4), 0, 0, math.sin(math.pi / 4)], atol=1e-12)
    roll = scene(can_entry(rpy=[0.3, 0.0, 0.0])).objects[0].quat
    np.testing.assert_allclose(roll, [math.cos(0.15), math.sin(0.15), 0, 0], atol=1e-12)


def test_a_mesh_path_is_relative_to_the_scene_file_and_a_scale_may_be_one_number(tmp_path):
    (tmp_path / 'meshes').mkdir()
    write_cube_obj(tmp_path / 'meshes' / 'cube.obj', 0.1)
    path = tmp_path / 'scene.yaml'
    path.write_text('scene:\n  objects:\n    - {name: cube, shape: mesh, mesh: meshes/cube.obj, scale: 0.5, '
                    'density: 500}\n')
    obj = SceneConfig.from_yaml(path).objects[0]
    assert obj.mesh == (tmp_path / 'meshes' / 'cube.obj').resolve() and obj.mesh.is_absolute()
    assert obj.scale == (0.5, 0.5, 0.5) and obj.size == ()


def test_a_sphere_size_may_be_one_number():
    assert scene(can_entry(shape='sphere', size=0.04)).objects[0].size == (0.04,)


def test_scaled_multiplies_friction_and_mass_and_keeps_the_rest():
    base = scene(can_entry(inertia=[0.001, 0.001, 0.0005], friction=[0.8, 0.01, 0.001]),
                 can_entry(name='block', shape='box', size=[0.1, 0.1, 0.1], mass=None, density=400)).scaled(0.6, 1.3)
    can, block = base.objects
    assert can.friction == pytest.approx((0.48, 0.006, 0.0006)) and can.mass == pytest.approx(0.455)
    assert can.inertia == pytest.approx((0.0013, 0.0013, 0.00065))
    assert block.density == pytest.approx(520.0) and block.mass is None
    assert (can.size, can.condim, can.xyz) == ((0.033, 0.0575), 6, (0.0, 0.0, 0.0575))
    original = scene(can_entry()).objects[0]
    assert original.scaled() == original
    for bad in (dict(friction=-1.0), dict(mass=0.0), dict(mass=float('nan'))):
        with pytest.raises(ConfigError, match='factor'):
            original.scaled(**bad)


# -- bad input: one line naming the object and the key ------------------------------------------------------
BAD_OBJECTS = [
    (dict(colour=[1, 0, 0, 1]), "unknown key.*colour"),
    (dict(shape='cone'), 'shape.*cone'),
    (dict(size=[0.033]), 'size.*2 numbers'),
    (dict(size=[0.033, 0.0]), 'size.*positive'),
    (dict(size=[-0.033, 0.05]), 'size.*positive'),
    (dict(size=None), 'size.*missing'),
    (dict(mass=0.0), 'mass.*positive'),
    (dict(mass=-1.0), 'mass.*positive'),
    (dict(mass=float('nan')), 'mass.*finite'),
    (dict(mass=True), 'mass.*finite'),
    (dict(density=100.0), 'exactly one of mass'),
    (dict(mass=None), 'exactly one of mass'),
    (dict(mass=None, density=100.0, inertia=[1e-3, 1e-3, 1e-3]), 'inertia.*only with mass'),
    (dict(inertia=[1e-3, 1e-3, 3e-3]), 'inertia.*triangle'),
    (dict(inertia=[1e-3, 0.0, 1e-3]), 'inertia.*positive'),
    (dict(friction={'sliding': -0.1}), r'friction\.sliding.*negative'),
    (dict(friction={'slide': 0.5}), r'friction.*unknown key.*slide'),
    (dict(friction=[0.5, 0.01]), 'friction.*list of 3'),
    (dict(friction={'torsional': 0.01}, condim=3), 'condim 3 ignores the torsional friction.*condim 4'),
    (dict(friction={'rolling': 0.001}, condim=4), 'condim 4 ignores the rolling friction.*condim 6'),
    (dict(condim=1), 'condim 1 ignores the sliding friction'),
    (dict(condim=5), 'condim.*one of'),
    (dict(solref=[0.02, -1.0]), 'solref'),
    (dict(solref=[0.02]), 'solref.*2 numbers'),
    (dict(solimp=[0.9, 0.95, 0.001, 0.5]), 'solimp.*3 or 5'),
    (dict(solimp=[1.2, 0.95, 0.001]), 'solimp.*dmin'),
    (dict(solimp=[0.9, 0.95, 0.001, 0.5, 0.5]), 'solimp.*power'),
    (dict(rgba=[1, 0, 0, 2]), r'rgba.*\[0, 1\]'),
    (dict(rgba=[1, 0, 0]), 'rgba.*4 numbers'),
    (dict(frame=''), 'frame'),
    (dict(frame=3), 'frame'),
    (dict(xyz=[0.0, 0.0]), 'xyz.*3 numbers'),
    (dict(rpy=[0.0, float('inf'), 0.0]), 'rpy.*finite'),
    (dict(free='yes'), 'free.*true or false'),
    (dict(mesh='can.stl'), 'mesh.*only a mesh'),
]


@pytest.mark.parametrize('changes, message', BAD_OBJECTS, ids=[m for _, m in BAD_OBJECTS])
def test_a_bad_value_is_one_line_naming_the_object_and_the_key(changes, message):
    with pytest.raises(ConfigError, match=message) as caught:
        scene(can_entry(name='ok'), can_entry(**changes))
    text = str(caught.value)
    assert '\n' not in text and text.startswith('test.yaml: scene.objects[1] (can)'), text


@pytest.mark.parametrize('name', ['', 'a can', 'can/1', 7, None])
def test_a_bad_or_missing_name_is_refused(name):
    with pytest.raises(ConfigError, match=r'scene.objects\[0\].name'):
        scene(can_entry(name=name) if name is not None else {k: v for k, v in can_entry().items() if k != 'name'})


def test_two_objects_of_one_name_are_refused():
    with pytest.raises(ConfigError, match=r"objects\[2\].name: 'can' is declared twice \(also objects\[0\]\)"):
        scene(can_entry(), can_entry(name='other'), can_entry())


def test_bad_mesh_declarations_are_refused(tmp_path):
    write_cube_obj(tmp_path / 'cube.obj', 0.1)
    (tmp_path / 'cube.dae').write_text('')
    cases = [(dict(mesh='missing.obj'), 'mesh: file not found'),
             (dict(mesh='cube.dae'), 'mesh: .*cube.dae is not an STL or OBJ'),
             (dict(mesh='cube.obj', size=[0.1]), 'size: a mesh takes no size'),
             (dict(mesh='cube.obj', scale=[1, 2]), 'scale.*1 or 3 numbers'),
             (dict(mesh='cube.obj', scale=0.0), 'scale.*positive'), (dict(mesh=None), 'mesh: expected the path')]
    for changes, message in cases:
        entry = can_entry(**{'shape': 'mesh', 'size': None, **changes})
        with pytest.raises(ConfigError, match=rf'\(can\)\.{message}'):
            scene(entry, root=tmp_path)


def test_bad_files_and_layouts_are_refused(tmp_path):
    with pytest.raises(ConfigError, match='scene file not found'):
        SceneConfig.from_yaml(tmp_path / 'none.yaml')
    bad = tmp_path / 'bad.yaml'
    bad.write_text('scene: [\n')
    with pytest.raises(ConfigError, match='not valid YAML'):
        SceneConfig.from_yaml(bad)
    bad.write_text('scene:\n  objects:\n    - {name: can, shape: box, size: [1, 1, .nan], mass: 1}\n')
    with pytest.raises(ConfigError, match=r'bad.yaml: scene.objects\[0\] \(can\).size: expected a finite number'):
        SceneConfig.from_yaml(bad)
    for data, message in (({'scene': {'objects': {'can': {}}}}, 'objects: expected a list'),
                          ({'scene': {'things': []}}, 'unknown key'), ({'scene': {'objects': ['can']}}, 'mapping'),
                          ({'scene': {}, 'cell': {}}, 'unknown key')):
        with pytest.raises(ConfigError, match=message):
            SceneConfig.from_mapping(data, 'test.yaml')


def test_an_object_can_be_built_from_its_mapping_alone():
    obj = ObjectConfig.from_mapping(can_entry(), 'spawn request')
    assert obj.name == 'can' and obj.mass == 0.35
    with pytest.raises(ConfigError, match=r'^spawn request \(can\).mass'):
        ObjectConfig.from_mapping(can_entry(mass=0), 'spawn request')
