"""The bridge's entities over ROS 2's simulation_interfaces, called as a client of the standard would:
a hand bridge with config/scene_hand.yaml (a stand and a can), paused so that states are exact.
Spawn, list, read, set and delete objects; every malformed request is refused with its code and
nothing moves; the node outlives them all."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

sim_msg = pytest.importorskip('simulation_interfaces.msg')
sim_srv = pytest.importorskip('simulation_interfaces.srv')

from shadow_twin.model.scene import SceneConfig  # noqa: E402
from support import bridge as bridge_support  # noqa: E402
from support.bridge import namespaced_bridge  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCENE = REPO / 'config' / 'scene_hand.yaml'
NS = '/ent/mujoco_bridge'
BALL = 'shape: sphere\nsize: [0.02]\nmass: 0.05\n'
OK, NOT_FOUND, FAILED = sim_msg.Result.RESULT_OK, sim_msg.Result.RESULT_NOT_FOUND, sim_msg.Result.RESULT_OPERATION_FAILED
SPAWN = sim_srv.SpawnEntity.Response


@pytest.fixture(scope='module')
def bridge(ros, tmp_path_factory):
    """A paused hand bridge with the hand's scene, in namespace /ent; yields (process, joint states)."""
    from sensor_msgs.msg import JointState
    states = ros[1].record(JointState, '/ent/joint_states', depth=500)
    proc = namespaced_bridge(ros, tmp_path_factory.mktemp('entities'), '/ent', lambda: states.count() > 0,
                             scene_file=str(SCENE))
    state = sim_msg.SimulationState(state=sim_msg.SimulationState.STATE_PAUSED)
    assert call(ros, sim_srv.SetSimulationState, 'set_simulation_state', state=state).result.result == OK
    yield proc, states
    assert proc.alive(), proc.output()                   # no request took it down
    assert proc.stop() == 0, proc.output()


def call(ros, srv, service, **fields):
    """The bridge's ``service`` (its name in the bridge's namespace), called with ``fields``."""
    return bridge_support.call(ros, srv, f'{NS}/{service}', **fields)


def entities(ros, pattern: str = '') -> list[str]:
    answer = call(ros, sim_srv.GetEntities, 'get_entities', filters=sim_msg.EntityFilters(filter=pattern))
    assert answer.result.result == OK, answer.result.error_message
    return list(answer.entities)


def pose_stamped(x, y, z, quat=(1.0, 0.0, 0.0, 0.0), frame=''):
    from geometry_msgs.msg import PoseStamped
    msg = PoseStamped()
    msg.header.frame_id = frame
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = x, y, z
    q = msg.pose.orientation
    q.w, q.x, q.y, q.z = quat
    return msg


def spawn(ros, name, resource=BALL, pose=None, **fields):
    return call(ros, sim_srv.SpawnEntity, 'spawn_entity', name=name, resource_string=resource,
                initial_pose=pose or pose_stamped(0.4, 0.0, 1.0), **fields)


def state_of(ros, name):
    return call(ros, sim_srv.GetEntityState, 'get_entity_state', entity=name)


def test_the_scene_files_objects_are_the_entities(ros, bridge):
    assert entities(ros) == SceneConfig.from_yaml(SCENE).names
    assert entities(ros, '^stand_') == ['stand_post', 'stand_plate'] and entities(ros, 'nothing') == []
    bad = call(ros, sim_srv.GetEntities, 'get_entities', filters=sim_msg.EntityFilters(filter='(unclosed'))
    assert bad.result.result == FAILED and 'regular expression' in bad.result.error_message
    tags = sim_msg.EntityFilters(tags=sim_msg.TagsFilter(tags=['red']))
    refused = call(ros, sim_srv.GetEntities, 'get_entities', filters=tags).result
    assert refused.result == sim_msg.Result.RESULT_FEATURE_UNSUPPORTED
    states = call(ros, sim_srv.GetEntitiesStates, 'get_entities_states', filters=sim_msg.EntityFilters(filter='can'))
    assert list(states.entities) == ['can'] and states.states[0].header.frame_id == 'world'
    assert state_of(ros, 'nope').result.result == NOT_FOUND


def test_set_and_get_an_objects_state(ros, bridge):
    from simulation_interfaces.msg import EntityState
    wanted = EntityState()
    wanted.pose = pose_stamped(0.3, 0.1, 0.8, (math.cos(0.3), 0.0, 0.0, math.sin(0.3))).pose
    wanted.twist.linear.x, wanted.twist.angular.z = 0.2, 1.5
    assert call(ros, sim_srv.SetEntityState, 'set_entity_state', entity='can', state=wanted).result.result == OK
    got = state_of(ros, 'can').state                        # paused: exactly what was set
    for a, b in ((got.pose.position.x, 0.3), (got.pose.position.z, 0.8), (got.pose.orientation.z, math.sin(0.3)),
                 (got.twist.linear.x, 0.2), (got.twist.angular.z, 1.5)):
        assert a == pytest.approx(b, abs=1e-9)
    bad = EntityState()
    bad.pose.orientation.w = 0.0                            # a zero quaternion
    answer = call(ros, sim_srv.SetEntityState, 'set_entity_state', entity='can', state=bad).result
    assert answer.result == sim_srv.SetEntityState.Response.INVALID_POSE
    assert state_of(ros, 'can').state.pose.position.z == pytest.approx(0.8, abs=1e-9)     # nothing moved
    fixed = EntityState()
    fixed.pose = pose_stamped(0.0, 0.0, 0.5).pose
    fixed.twist.linear.x = 1.0
    answer = call(ros, sim_srv.SetEntityState, 'set_entity_state', entity='stand_plate', state=fixed).result
    assert answer.result != OK and 'twist' in answer.error_message


def test_spawn_keeps_the_hands_state_and_refuses_bad_requests(ros, bridge):
    proc, states = bridge
    before = list(states.last().position)
    answer = spawn(ros, 'ball')
    assert answer.result.result == OK and answer.entity_name == 'ball', answer.result.error_message
    assert entities(ros)[-1] == 'ball'
    assert state_of(ros, 'ball').state.pose.position.z == pytest.approx(1.0, abs=1e-9)
    assert ros[0].wait_until(lambda: states.count() > 0 and list(states.last().position) == before, 5.0)
    assert spawn(ros, 'ball').result.result == SPAWN.NAME_NOT_UNIQUE
    renamed = spawn(ros, 'ball', allow_renaming=True)
    assert renamed.result.result == OK and renamed.entity_name == 'ball_1'
    for name, resource, pose, code in (
            ('b2', 'shape: [unclosed', None, SPAWN.UNSUPPORTED_FORMAT),
            ('b2', '- a list', None, SPAWN.UNSUPPORTED_FORMAT),
            ('b2', BALL + 'xyz: [0, 0, 1]\n', None, SPAWN.RESOURCE_PARSE_ERROR),       # the pose is the request's
            ('b2', 'shape: sphere\nsize: [-0.02]\nmass: 0.05\n', None, SPAWN.RESOURCE_PARSE_ERROR),
            ('b2', '', None, SPAWN.NO_RESOURCE),
            ('b2', BALL, pose_stamped(0.0, math.nan, 1.0), SPAWN.INVALID_POSE),
            ('b2', BALL, pose_stamped(0.0, 0.0, 1.0, (0.0, 0.0, 0.0, 0.0)), SPAWN.INVALID_POSE),
            ('b 2', BALL, None, SPAWN.NAME_INVALID),
            ('', BALL, None, SPAWN.NAME_INVALID),
            ('rh_palm', BALL, None, FAILED),                                          # a body of the hand
            ('b2', BALL, pose_stamped(0.0, 0.0, 1.0, frame='nowhere'), FAILED)):
        answer = spawn(ros, name, resource, pose)
        assert answer.result.result == code, (name, resource, answer.result.error_message)
        assert answer.result.error_message
    missing = call(ros, sim_srv.SpawnEntity, 'spawn_entity', name='b3', uri='/no/such/ball.yaml').result
    assert missing.result == SPAWN.MISSING_ASSETS
    assert entities(ros)[-2:] == ['ball', 'ball_1'] and proc.alive()


def test_delete_and_reset_of_the_spawned(ros, bridge):
    if 'ball' not in entities(ros):
        assert spawn(ros, 'ball').result.result == OK
    on_palm = spawn(ros, 'pad', 'shape: box\nsize: [0.01, 0.01, 0.005]\nmass: 0.01\nfree: false\n',
                    pose_stamped(0.0, -0.03, 0.05, frame='rh_palm'))
    assert on_palm.result.result == OK, on_palm.result.error_message
    assert call(ros, sim_srv.DeleteEntity, 'delete_entity', entity='ball').result.result == OK
    assert 'ball' not in entities(ros)
    assert call(ros, sim_srv.DeleteEntity, 'delete_entity', entity='ball').result.result == NOT_FOUND
    scope = sim_srv.ResetSimulation.Request.SCOPE_SPAWNED
    assert call(ros, sim_srv.ResetSimulation, 'reset_simulation', scope=scope).result.result == OK
    assert entities(ros) == SceneConfig.from_yaml(SCENE).names          # the scene file's objects stay
