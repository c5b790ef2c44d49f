"""Followed objects in the live simulation: the reloader gives them targets and welds, each physics
step follows the poses offered (stamps in sim time), a reload or a spawn keeps following, a reset
re-joins, a silent source lets the object fall; malformed poses move nothing."""

import math

import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.model.scene import ObjectConfig, SceneConfig
from shadow_twin.simulation.live.entities import object_motion, spawn_object
from shadow_twin.simulation.live.simulation import LiveSimulation
from shadow_twin.simulation.objects.gate import ACCEPTED

START = np.array([0.5, 0.0, 0.6])


def box(name='box', **fields):
    entry = {'name': name, 'shape': 'box', 'size': [0.02, 0.02, 0.02], 'mass': 0.1, 'xyz': START.tolist(), **fields}
    return ObjectConfig.from_mapping(entry, 'test')


@pytest.fixture
def sim():
    return LiveSimulation(scene=SceneConfig((box(),)), followed=['box'])


def follow(sim, path, seconds: float, rate: float = 100.0):
    """Offer the poses ``path(t)`` at ``rate`` Hz (stamped with sim time) while stepping ``seconds``;
    returns the largest position error of the last half."""
    errors = []
    steps = int(round(1.0 / (rate * sim.dt)))
    for _ in range(int(seconds * rate)):
        verdict = sim.offer_object_pose('box', sim.time, path(sim.time), [1.0, 0.0, 0.0, 0.0])
        assert verdict.accepted, verdict.message
        sim.step(steps)
        errors.append(np.linalg.norm(object_motion(sim, 'box').position - path(sim.time)))
    return max(errors[len(errors) // 2:])


def test_a_followed_object_tracks_its_source_and_falls_when_it_goes_silent(sim):
    assert sim.objects is not None and sim.objects.names == ['box']
    t0 = sim.time
    moving = lambda t: START + [0.1 * (t - t0), 0.0, 0.0]         # 0.1 m/s along x, held in the air
    assert follow(sim, moving, 2.0) < 0.002                       # 2 mm while it moves
    held = object_motion(sim, 'box').position[2]
    silent = sim.objects.gate('box').limits.timeout
    sim.step(int(round((silent + 0.3) / sim.dt)))                  # the source silent: the weld lets go
    assert object_motion(sim, 'box').position[2] < held - 0.05
    assert sim.object_errors() == {'box': None}


def test_reload_and_spawn_keep_following_and_bad_poses_move_nothing(sim):
    t0 = sim.time
    still = lambda t: START + [0.0, 0.0, 0.05]
    follow(sim, still, 0.5)
    accepted = sim.objects.gate('box').counts[ACCEPTED]
    assert accepted == 50
    sim.reload()
    assert sim.objects.names == ['box']
    spawn_object(sim, box('other', xyz=[0.0, 0.5, 0.3]))
    assert sim.objects.names == ['box'] and accepted == sim.objects.gate('box').counts[ACCEPTED]
    assert follow(sim, still, 1.0) < 0.002
    before = object_motion(sim, 'box').position.copy()
    for position, quat in (([math.nan, 0, 0], [1, 0, 0, 0]), ([0, 0, 100.0], [1, 0, 0, 0]), (still(0), [0, 0, 0, 0])):
        assert not sim.offer_object_pose('box', sim.time, position, quat).accepted
    sim.step(5)
    assert np.linalg.norm(object_motion(sim, 'box').position - before) < 0.002
    with pytest.raises(ConfigError):
        sim.offer_object_pose('other', sim.time, still(0), [1, 0, 0, 0])      # spawned, not followed
    assert t0 < sim.time


def test_without_followed_objects_nothing_is_added():
    plain = LiveSimulation(scene=SceneConfig((box(),)))
    assert plain.objects is None and plain.object_errors() == {}
    with pytest.raises(ConfigError, match='not followed'):
        plain.offer_object_pose('box', 0.0, START, [1, 0, 0, 0])


def test_a_silence_is_queued_once_named_by_its_source_and_taken_once(sim):
    sim.name_object_sources({'box': 'box (/mocap/box/pose)'})
    follow(sim, lambda t: START, 0.3)
    timeout = sim.objects.gate('box').limits.timeout
    assert sim.take_object_warnings() == []                       # live: nothing to say
    sim.step(int(round((timeout + 0.2) / sim.dt)))                # silent past the timeout
    warnings = sim.take_object_warnings()
    assert len(warnings) == 1 and 'box (/mocap/box/pose)' in warnings[0] and 'silent' in warnings[0]
    sim.step(int(round(timeout / sim.dt)))                        # still silent: said once
    assert sim.take_object_warnings() == []


def test_the_warning_queue_is_bounded_oldest_lost():
    from shadow_twin.simulation.live.objects import MAX_WARNINGS
    names = [f'box{k}' for k in range(MAX_WARNINGS + 3)]
    many = LiveSimulation(scene=SceneConfig(tuple(box(n, xyz=[0.1 * k, 1.0, 0.5]) for k, n in enumerate(names))),
                          followed=names)
    many.step(int(round((many.objects.gate(names[0]).limits.timeout + 0.1) / many.dt)))   # none ever heard
    warnings = many.take_object_warnings()
    assert len(warnings) == MAX_WARNINGS
    assert f'source {names[-1]}:' in warnings[-1] and not any(f'source {names[0]}:' in w for w in warnings)
