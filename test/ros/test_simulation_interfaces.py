"""Checks the project's build of simulation_interfaces against upstream ROS 2 Jazzy.

interfaces/simulation_interfaces holds the part of upstream ros-simulation/simulation_interfaces,
jazzy release 1.5.1 (commit a3c60ff), that the MuJoCo bridge serves (see its CMakeLists.txt);
scripts/build_interfaces.sh builds it into the venv (it is not on PyPI).  Every type must import,
round-trip through rclpy's C serialization, carry upstream's constants and StepSimulation's default
(RIHS01 covers neither) and upstream's RIHS01 type hash (what DDS peers compare when matching
endpoints), pinned below from an independent computation, in three places:

* in the type descriptions rosidl installed (share/simulation_interfaces/<kind>/<Type>.json);
* recomputed at test time with rosbags (support.interfaces.rihs01_hashes) from the definitions
  in interfaces/ and the Jazzy .msg files the wheels installed for the types they reference;
* as a node advertises them over the rmw: publishers' topic hashes, services' and the action's
  request/reply/feedback endpoint hashes, and the hashes under which the node's type description
  service serves the service and action types.

The whole module is skipped when rclpy or simulation_interfaces cannot be imported.
"""

import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

rclpy = pytest.importorskip('rclpy')
sim_msg = pytest.importorskip('simulation_interfaces.msg')
sim_srv = pytest.importorskip('simulation_interfaces.srv')
sim_action = pytest.importorskip('simulation_interfaces.action')
Vector3 = pytest.importorskip('geometry_msgs.msg').Vector3

from support import interfaces as iface  # noqa: E402
from support import ros as ros_helpers  # noqa: E402
from support.simulation_interfaces_upstream import UPSTREAM_CONSTANTS, UPSTREAM_HASHES  # noqa: E402

PKG = 'simulation_interfaces'
SOURCES = Path(__file__).resolve().parents[2] / 'interfaces' / PKG
SERVICES = ('DeleteEntity', 'GetEntities', 'GetEntitiesStates', 'GetEntityState', 'GetSimulationState',
            'GetSimulatorFeatures', 'ResetSimulation', 'SetEntityState', 'SetSimulationState', 'SpawnEntity',
            'StepSimulation')
# The messages the services and the action use, transitively (upstream 1.5.1 has seven more).
MESSAGES = ('Bounds', 'EntityCategory', 'EntityFilters', 'EntityState', 'Result', 'SimulationState',
            'SimulatorFeatures', 'TagsFilter')
ACTIONS = ('SimulateSteps',)

# rosidl's .msg -> IDL names of the primitive types that differ (rosidl_adapter), as rclpy reports them.
_IDL_NAMES = {'bool': 'boolean', 'byte': 'octet', 'float32': 'float', 'float64': 'double'}
_ACTION_PARTS = {'Goal': 'Goal', 'Result': 'Result', 'Feedback': 'Feedback', 'FeedbackMessage': 'Impl.FeedbackMessage',
                 'SendGoal': 'Impl.SendGoalService', 'GetResult': 'Impl.GetResultService'}


def _type_class(key):
    """The generated class of a key of UPSTREAM_HASHES ('srv/SpawnEntity_Request' ->
    SpawnEntity.Request, 'action/SimulateSteps_SendGoal_Event' -> SimulateSteps.Impl.SendGoalService.Event)."""
    kind, name = key.split('/')
    module = {'msg': sim_msg, 'srv': sim_srv, 'action': sim_action}[kind]
    base, *parts = name.split('_')
    cls = getattr(module, base)
    if kind == 'action' and parts:
        for attr in _ACTION_PARTS[parts.pop(0)].split('.'):
            cls = getattr(cls, attr)
    for part in parts:   # Request, Response, Event
        cls = getattr(cls, part)
    return cls


# The keys that name messages (generated message classes), not service or action descriptions.
MESSAGE_KEYS = sorted(k for k in UPSTREAM_HASHES if hasattr(_type_class(k), 'get_fields_and_field_types'))


def _definitions():
    """{type name: definition text} of every interface file in interfaces/simulation_interfaces."""
    return {f'{PKG}/{path.parent.name}/{path.stem}': path.read_text()
            for kind in ('msg', 'srv', 'action') for path in sorted((SOURCES / kind).glob(f'*.{kind}'))}


def _rclpy_type(desc):
    """rclpy's name (get_fields_and_field_types) of a rosbags field type."""
    from rosbags.typesys.base import Nodetype
    kind, rest = desc
    if kind == Nodetype.BASE:
        name, size = rest
        return f'{name}<{size}>' if name == 'string' and size else _IDL_NAMES.get(name, name)
    if kind == Nodetype.NAME:
        pkg, _, name = rest.split('/')
        return f'{pkg}/{name}'
    inner, size = _rclpy_type(rest[0]), rest[1]
    if kind == Nodetype.ARRAY:
        return f'{inner}[{size}]'
    return f'sequence<{inner}, {size}>' if size else f'sequence<{inner}>'


# ------------------------------------------------------------ what is built

def test_sources_are_the_upstream_subset_and_all_built():
    """interfaces/ holds exactly the services, action and message closure above, and the
    CMakeLists.txt builds every one of them."""
    found = {key.split('/', 1)[1] for key in _definitions()}
    expected = ({f'msg/{m}' for m in MESSAGES} | {f'srv/{s}' for s in SERVICES}
                | {f'action/{a}' for a in ACTIONS})
    assert found == expected
    cmake = (SOURCES / 'CMakeLists.txt').read_text()
    for key in sorted(expected):
        kind = key.split('/')[0]
        assert f'"{key}.{kind}"' in cmake, f'{key}.{kind} not in CMakeLists.txt'
    assert {k.split('_')[0] for k in UPSTREAM_HASHES} == expected


@pytest.mark.parametrize('key', MESSAGE_KEYS)
def test_fields_match_the_definitions(key):
    """The generated Python class has the fields, in order and with the types, of the definition
    (parsed by rosbags, with rosidl's derived types of services and actions)."""
    pytest.importorskip('rosbags.typesys')
    type_name = f'{PKG}/{key}'
    kind, name = key.split('/')
    source = f'{PKG}/{kind}/{name.split("_")[0]}'
    _, fields = iface.definition_types(source, _definitions()[source])[type_name]
    cls = _type_class(key)
    assert list(cls.get_fields_and_field_types().items()) == [
        (field, _rclpy_type(desc)) for field, desc in fields]


# ---------------------------------------------------------- values: constants, defaults

@pytest.mark.parametrize('key', MESSAGE_KEYS)
def test_constants_equal_upstream(key):
    expected = UPSTREAM_CONSTANTS.get(key, {})
    cls = _type_class(key)
    assert iface.constants(cls) == expected
    for name, value in expected.items():
        assert getattr(cls, name) == value


def test_constants_parsed_from_the_definitions_equal_upstream():
    """The constants of the definitions in interfaces/ (parsed by rosbags, not rosidl)."""
    pytest.importorskip('rosbags.typesys')
    parsed = {}
    for type_name, text in _definitions().items():
        for name, (consts, _) in iface.definition_types(type_name, text).items():
            if consts:
                parsed[name.split('/', 1)[1]] = {c: value for c, _, value in consts}
    assert parsed == UPSTREAM_CONSTANTS


def test_step_simulation_default_steps():
    """Upstream's only default value (`uint64 steps 1`); RIHS01 does not cover defaults."""
    assert sim_srv.StepSimulation.Request().steps == 1
    assert sim_action.SimulateSteps.Goal().steps == 0


# ----------------------------------------------------- C type support

@pytest.mark.parametrize('key', MESSAGE_KEYS)
def test_default_message_round_trip(key):
    iface.round_trip(_type_class(key)())


def test_filled_messages_round_trip():
    msg, srv = sim_msg, sim_srv
    spawn = srv.SpawnEntity.Request(name='cube_1', allow_renaming=True, uri='file:///objects/cube.xml',
                                    entity_namespace='objects')
    spawn.initial_pose.header.frame_id = 'world'
    spawn.initial_pose.pose.position.z, spawn.initial_pose.pose.orientation.w = 0.85, 1.0
    assert iface.round_trip(spawn).initial_pose.pose.position.z == 0.85

    sphere = msg.Bounds(type=msg.Bounds.TYPE_SPHERE)
    sphere.points = [Vector3(x=0.1, y=0.2, z=0.3), Vector3(x=0.05)]   # centre, radius
    filters = msg.EntityFilters(
        filter='^cube_[0-9]+$', categories=[msg.EntityCategory(category=msg.EntityCategory.CATEGORY_DYNAMIC_OBJECT)],
        tags=msg.TagsFilter(tags=['graspable', 'small'], filter_mode=msg.TagsFilter.FILTER_MODE_ALL), bounds=sphere)
    back = iface.round_trip(srv.GetEntities.Request(filters=filters))
    assert back.filters.tags.tags == ['graspable', 'small'] and back.filters.bounds.points[1].x == 0.05
    states = srv.GetEntitiesStates.Response(result=msg.Result(result=msg.Result.RESULT_OK),
                                            entities=['cube_1', 'mir250'])
    states.states = [msg.EntityState(), msg.EntityState()]
    states.states[1].twist.angular.z = -0.25
    assert iface.round_trip(states).states[1].twist.angular.z == -0.25

    features = msg.SimulatorFeatures(features=[msg.SimulatorFeatures.SPAWNING, msg.SimulatorFeatures.SPAWNING_ENTITIES],
                                     spawn_formats=['mjcf'], custom_info='shadow_twin MuJoCo bridge')
    assert list(iface.round_trip(srv.GetSimulatorFeatures.Response(features=features)).features.features) == [0, 50]
    iface.round_trip(srv.SetSimulationState.Request(state=msg.SimulationState(state=msg.SimulationState.STATE_PAUSED)))
    scope = srv.ResetSimulation.Request.SCOPE_TIME | srv.ResetSimulation.Request.SCOPE_SPAWNED
    assert iface.round_trip(srv.ResetSimulation.Request(scope=scope)).scope == 5
    assert iface.round_trip(srv.StepSimulation.Request(steps=2 ** 40)).steps == 2 ** 40

    action = sim_action.SimulateSteps
    assert iface.round_trip(action.Goal(steps=1000)).steps == 1000
    assert iface.round_trip(action.Feedback(completed_steps=400, remaining_steps=600)).remaining_steps == 600
    feedback = action.Impl.FeedbackMessage(feedback=action.Feedback(completed_steps=3))
    feedback.goal_id.uuid = list(uuid.uuid4().bytes)
    assert list(iface.round_trip(feedback).goal_id.uuid) == list(feedback.goal_id.uuid)


# ------------------------------------------------------------ type hashes

@pytest.mark.parametrize('key', sorted(k for k in UPSTREAM_HASHES if '_' not in k.split('/')[1]))
def test_type_hashes_in_installed_type_description(key):
    """share/simulation_interfaces/<kind>/<Type>.json: the type, the types rosidl derived from it
    and the package's messages it references carry upstream's hashes."""
    installed = iface.installed_hashes(f'{PKG}/{key}')
    own = {k for k in UPSTREAM_HASHES if k == key or k.startswith(f'{key}_')}
    assert {k: installed.get(f'{PKG}/{k}') for k in own} == {k: UPSTREAM_HASHES[k] for k in own}
    for type_name, hash_string in installed.items():
        if type_name.startswith(f'{PKG}/'):
            assert hash_string == UPSTREAM_HASHES[type_name.split('/', 1)[1]], type_name


def test_hashes_recomputed_from_definitions():
    """RIHS01 of every type from the definitions in interfaces/ (rosbags, not rosidl), which the
    venv's installed copies must equal."""
    definitions = _definitions()
    share = iface.share_dir(PKG)
    for type_name, text in definitions.items():
        kind, name = type_name.split('/')[1:]
        installed = share / kind / f'{name}.{kind}'
        if installed.is_file():  # the venv holds the definition built from interfaces/
            assert installed.read_text() == text, installed
    computed = iface.rihs01_hashes(definitions)
    assert {k.split('/', 1)[1]: v for k, v in computed.items()} == UPSTREAM_HASHES


def _endpoints(node, topic):
    """The graph's endpoints on the unmangled ``topic`` (publishers and subscriptions)."""
    return ros_helpers.graph_endpoints(lambda: node.get_publishers_info_by_topic(topic, no_mangle=True)
                                       + node.get_subscriptions_info_by_topic(topic, no_mangle=True))


def _assert_endpoint_hashes(node, topic, dds_type, key):
    infos = _endpoints(node, topic)
    assert infos, f'no endpoint on {topic} visible in graph'
    for info in infos:
        assert (info.topic_type, str(info.topic_type_hash)) == (dds_type, UPSTREAM_HASHES[key]), topic


def test_type_hashes_over_rmw():
    """A node publishing every message, serving every service and the action advertises upstream's
    hashes on its endpoints, and its type description service (what `ros2 interface` and peers
    query) serves the service and action types under upstream's hashes, and under no other."""
    from rclpy.action import ActionServer
    from rclpy.executors import SingleThreadedExecutor
    from type_description_interfaces.srv import GetTypeDescription

    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_helpers.domain_id_for())   # private domain
    tag = uuid.uuid4().hex[:8]
    nodes, executor = [], None
    try:
        node = rclpy.create_node(f'sim_interfaces_hash_test_{tag}', context=context)
        nodes.append(node)
        asker = rclpy.create_node(f'sim_interfaces_hash_asker_{tag}', context=context)
        nodes.append(asker)
        prefix = f'/sim_interfaces_hash_test_{tag}'
        for name in MESSAGES:
            node.create_publisher(getattr(sim_msg, name), f'{prefix}/{name}', 1)
        for name in SERVICES:
            node.create_service(getattr(sim_srv, name), f'{prefix}/{name}', lambda request, response: response)
        ActionServer(node, sim_action.SimulateSteps, f'{prefix}/SimulateSteps',
                     lambda goal_handle: sim_action.SimulateSteps.Result())
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        executor.add_node(asker)

        for name in MESSAGES:
            _assert_endpoint_hashes(node, f'rt{prefix}/{name}', f'{PKG}::msg::dds_::{name}_', f'msg/{name}')
        halves = (('rq', 'Request', 'Request'), ('rr', 'Reply', 'Response'))   # rmw_dds_common's mangling
        for name in SERVICES:
            for head, tail, part in halves:
                _assert_endpoint_hashes(node, f'{head}{prefix}/{name}{tail}', f'{PKG}::srv::dds_::{name}_{part}_',
                                        f'srv/{name}_{part}')
        action = f'{prefix}/SimulateSteps/_action'
        _assert_endpoint_hashes(node, f'rt{action}/feedback', f'{PKG}::action::dds_::SimulateSteps_FeedbackMessage_',
                                'action/SimulateSteps_FeedbackMessage')
        for service, part in (('send_goal', 'SendGoal'), ('get_result', 'GetResult')):
            for head, tail, half in halves:
                _assert_endpoint_hashes(node, f'{head}{action}/{service}{tail}',
                                        f'{PKG}::action::dds_::SimulateSteps_{part}_{half}_',
                                        f'action/SimulateSteps_{part}_{half}')

        client = asker.create_client(GetTypeDescription, f'{node.get_fully_qualified_name()}/get_type_description')
        assert client.wait_for_service(timeout_sec=5.0), 'no get_type_description service'

        def describe(type_name, type_hash):
            future = client.call_async(GetTypeDescription.Request(
                type_name=type_name, type_hash=type_hash, include_type_sources=False))
            executor.spin_until_future_complete(future, timeout_sec=5.0)
            assert future.done(), 'get_type_description timed out'
            return future.result()

        described = [f'srv/{name}' for name in SERVICES] + [
            'action/SimulateSteps', 'action/SimulateSteps_SendGoal', 'action/SimulateSteps_GetResult']
        for key in described:
            reply = describe(f'{PKG}/{key}', UPSTREAM_HASHES[key])
            assert reply.successful, f'{key}: {reply.failure_reason}'
            assert reply.type_description.type_description.type_name == f'{PKG}/{key}'
        # the lookup is by hash: any other hash is not found
        assert not describe(f'{PKG}/srv/SpawnEntity', 'RIHS01_' + '0' * 64).successful
    finally:
        if executor is not None:
            executor.shutdown()
        for node in nodes:
            node.destroy_node()
        rclpy.shutdown(context=context)
