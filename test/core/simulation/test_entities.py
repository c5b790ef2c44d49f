"""Objects of a live simulation as simulation_interfaces' entities: read and set their pose and twist,
spawn and delete them while everything else keeps its live state (the built-in hand and a scene)."""

import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError, ModelError
from shadow_twin.model.scene import ObjectConfig, SceneConfig, object_names
from shadow_twin.simulation.live.entities import (EntityMotion, delete_objects, object_motion, set_object_motion,
                                                  spawn_object, world_placement)
from shadow_twin.simulation.live.simulation import LiveSimulation

G = 9.81


def obj(name, **fields):
    entry = {'name': name, 'shape': 'sphere', 'size': [0.02], 'mass': 0.1, **fields}
    return ObjectConfig.from_mapping(entry, 'test')


@pytest.fixture
def sim():
    return LiveSimulation(scene=SceneConfig((obj('ball', xyz=[0.5, 0.0, 1.0]),)))


def test_a_free_object_falls_as_gravity_says(sim):
    start = object_motion(sim, 'ball')
    assert np.allclose(start.position, [0.5, 0.0, 1.0]) and np.allclose(start.quat, [1, 0, 0, 0])
    g = -sim.model.opt.gravity[2]
    assert g == pytest.approx(G, abs=0.01)
    t = 200 * sim.dt
    sim.step(200)
    now = object_motion(sim, 'ball')
    assert now.linear[2] == pytest.approx(-g * t, rel=1e-6)                    # v = -g t
    assert now.position[2] == pytest.approx(1.0 - 0.5 * g * t * t, abs=g * sim.dt * t)   # Euler: within g dt t


def test_set_pose_and_twist_read_back_in_world_axes(sim):
    quat = np.array([np.cos(0.4), np.sin(0.4) * 0.6, 0.0, np.sin(0.4) * 0.8])          # a turned object
    wanted = EntityMotion(np.array([0.1, 0.2, 0.9]), quat, np.array([0.3, 0.0, -0.1]), np.array([0.5, -1.0, 2.0]))
    set_object_motion(sim, 'ball', wanted)
    got = object_motion(sim, 'ball')
    for a, b in ((got.position, wanted.position), (got.quat, wanted.quat), (got.linear, wanted.linear),
                 (got.angular, wanted.angular)):
        assert np.allclose(a, b, atol=1e-9), (a, b)


@pytest.mark.parametrize('motion, match', [
    (EntityMotion(np.array([0, 0, np.nan]), np.array([1.0, 0, 0, 0])), 'finite'),
    (EntityMotion(np.zeros(3), np.array([1.0, 1.0, 0, 0])), 'not a unit quaternion'),
    (EntityMotion(np.zeros(3), np.array([0.0, 0, 0, 0])), 'not a unit quaternion'),
])
def test_bad_states_are_refused_and_nothing_moves(sim, motion, match):
    before = sim.data.qpos.copy()
    with pytest.raises(ConfigError, match=match):
        set_object_motion(sim, 'ball', motion)
    assert np.array_equal(sim.data.qpos, before)
    with pytest.raises(ConfigError, match="no object 'nope'"):
        object_motion(sim, 'nope')


def test_spawn_keeps_every_live_state_and_delete_removes(sim):
    finger = sim.model.joint('rh_FFJ3').qposadr[0]
    sim.data.qpos[finger] = 0.7                                    # a finger somewhere, the ball falling
    sim.step(50)
    ball, bent = object_motion(sim, 'ball'), float(sim.data.qpos[finger])
    time = sim.time
    report = spawn_object(sim, obj('cube', shape='box', size=[0.03, 0.03, 0.03], xyz=[0.0, 0.5, 0.2]))
    assert object_names(sim.model) == ['ball', 'cube'] and sim.scene.names == ['ball', 'cube']
    assert 'rh_FFJ3' in report.kept_state and sim.time == time
    finger = sim.model.joint('rh_FFJ3').qposadr[0]
    assert float(sim.data.qpos[finger]) == bent
    after = object_motion(sim, 'ball')
    assert np.allclose(after.position, ball.position) and np.allclose(after.linear, ball.linear)
    assert np.allclose(object_motion(sim, 'cube').position, [0.0, 0.5, 0.2])
    with pytest.raises(ConfigError, match='exists already'):
        spawn_object(sim, obj('cube'))
    with pytest.raises(ModelError, match='rh_palm'):
        spawn_object(sim, obj('rh_palm'))                         # a body of the hand: refused, nothing changes
    assert object_names(sim.model) == ['ball', 'cube']
    assert delete_objects(sim, ['ball']) == ['ball']
    assert object_names(sim.model) == ['cube'] and float(sim.data.qpos[sim.model.joint('rh_FFJ3').qposadr[0]]) == bent
    with pytest.raises(ConfigError, match="no object 'ball'"):
        delete_objects(sim, ['ball'])


def test_objects_fixed_to_a_deleted_object_go_with_it(sim):
    spawn_object(sim, obj('tray', shape='box', size=[0.1, 0.1, 0.01], free=False, xyz=[0.6, 0.0, 0.3]))
    spawn_object(sim, obj('cup', shape='cylinder', size=[0.03, 0.05], free=False, frame='tray', xyz=[0, 0, 0.06]))
    assert delete_objects(sim, ['tray']) == ['tray', 'cup'] and object_names(sim.model) == ['ball']


def test_a_fixed_object_moves_relative_to_its_body_and_takes_no_twist(sim):
    spawn_object(sim, obj('pad', shape='box', size=[0.01, 0.01, 0.005], free=False, frame='rh_palm',
                          xyz=[0.0, -0.03, 0.05]))
    palm = sim.model.body('rh_palm').id
    target = sim.data.xpos[palm] + np.array([0.0, 0.0, 0.1])
    set_object_motion(sim, 'pad', EntityMotion(target, sim.data.xquat[palm].copy()))
    assert np.allclose(object_motion(sim, 'pad').position, target, atol=1e-9)
    assert sim.model.body('pad').parentid[0] == palm                      # still fixed to the palm
    with pytest.raises(ConfigError, match='cannot be given a twist'):
        set_object_motion(sim, 'pad', EntityMotion(target, np.array([1.0, 0, 0, 0]), np.array([0.1, 0, 0])))


def test_a_free_object_spawned_in_a_body_frame_starts_where_the_body_is_now(sim):
    placed = world_placement(sim, obj('chip', frame='rh_palm', xyz=[0.0, 0.0, 0.1], rpy=[0.0, 0.0, 0.3]))
    palm = sim.model.body('rh_palm').id
    rotation = sim.data.xmat[palm].reshape(3, 3)
    assert placed.frame == 'world'
    assert np.allclose(placed.xyz, sim.data.xpos[palm] + rotation @ [0.0, 0.0, 0.1], atol=1e-12)
    with pytest.raises(ConfigError, match="frame 'nowhere'"):
        world_placement(sim, obj('chip', frame='nowhere'))
