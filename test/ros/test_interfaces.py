"""Checks the message packages of the MiR250 mobile base nodes against upstream ROS 2 Jazzy.

* nav_msgs/Odometry and geometry_msgs/TwistStamped come from the PyPI wheels
  (ros-jazzy-nav-msgs, ros-jazzy-geometry-msgs 5.3.6, requirements.txt);
* tf2_msgs/TFMessage (and TF2Error) is not on PyPI: scripts/build_interfaces.sh
  builds the subset in interfaces/tf2_msgs into the venv;
* simulation_interfaces/SetEntityState (and the EntityState and Result messages
  it uses), with which the twin sets the simulated base's pose, is not on PyPI
  either: the subset in interfaces/simulation_interfaces (jazzy release 1.5.1).

Each type must import, round-trip through rclpy's C serialization, and carry the
RIHS01 type hash of upstream Jazzy (what DDS peers compare when matching topics),
both in the installed type description (share/<pkg>/<msg|srv>/<Type>.json) and
as advertised over the rmw (for the service: the hash under which the node's
type description service serves it, and the request/reply endpoint hashes).
For TFMessage, EntityState and Result the hash is also recomputed with rosbags
(an implementation of RIHS01 independent of rosidl) from the .msg definitions:
the ones in interfaces/ and those the wheels installed for the types they
reference.

The whole module is skipped when rclpy or one of the packages cannot be imported.
"""

import json
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

rclpy = pytest.importorskip('rclpy')
nav_msgs_msg = pytest.importorskip('nav_msgs.msg')
geometry_msgs_msg = pytest.importorskip('geometry_msgs.msg')
tf2_msgs_msg = pytest.importorskip('tf2_msgs.msg')
sim_msg = pytest.importorskip('simulation_interfaces.msg')
sim_srv = pytest.importorskip('simulation_interfaces.srv')

from support import ros as ros_helpers  # noqa: E402

Odometry = nav_msgs_msg.Odometry
TwistStamped = geometry_msgs_msg.TwistStamped
TransformStamped = geometry_msgs_msg.TransformStamped
TFMessage = tf2_msgs_msg.TFMessage
TF2Error = tf2_msgs_msg.TF2Error
EntityState = sim_msg.EntityState
Result = sim_msg.Result
SetEntityState = sim_srv.SetEntityState

REPO = Path(__file__).resolve().parents[2]

# RIHS01 hashes of upstream ROS 2 Jazzy.  TFMessage / TF2Error: as reported by
# `ros2 topic info --verbose /tf` on stock Jazzy systems and in Jazzy rosbag2
# metadata (type_description_hash), and as rosbags computes them from its Jazzy
# type store; the Odometry and TwistStamped values are those of the Jazzy
# nav_msgs / geometry_msgs 5.3.6 builds (type description JSON in the wheels).
UPSTREAM_HASHES = {
    'tf2_msgs/msg/TFMessage':
        'RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087',
    'tf2_msgs/msg/TF2Error':
        'RIHS01_db2485e7d6a0ec75bf087e058ee45df682acc3a621ca7780503d10aac141809a',
    'nav_msgs/msg/Odometry':
        'RIHS01_3cc97dc7fb7502f8714462c526d369e35b603cfc34d946e3f2eda2766dfec6e0',
    'geometry_msgs/msg/TwistStamped':
        'RIHS01_5f0fcd4f81d5d06ad9b4c4c63e3ea51b82d6ae4d0558f1d475229b1121db6f64',
    # referenced by TFMessage; pins the wheel's geometry_msgs definition
    'geometry_msgs/msg/TransformStamped':
        'RIHS01_0a241f87d04668d94099cbb5ba11691d5ad32c2f29682e4eb5653424bd275206',
    # simulation_interfaces, jazzy branch at release 1.5.1 (commit a3c60ff).  RIHS01
    # covers fields, not constants: 1.5.1's new INVALID_POSE leaves the hashes as
    # in 1.5.0, so test_set_entity_state_fields_and_constants pins the constants.
    # Computed with rosbags 0.11.9 from the upstream definitions (git show
    # 1.5.1:msg/EntityState.msg etc. in ros-simulation/simulation_interfaces)
    # against its ROS2_JAZZY type store (std_msgs/Header, geometry_msgs/Pose,
    # Twist, Accel, service_msgs/ServiceEventInfo); for the service, the
    # .srv halves were registered as SetEntityState_Request/_Response, plus
    # rosidl's implicit SetEntityState_Event (info, request[<=1], response[<=1])
    # and the service description (request_message, response_message,
    # event_message), with ServiceEventInfo's `char[16] client_gid` read as
    # uint8[16] as rosidl maps .msg `char` (rosbags types it as char, which
    # changes that hash).  Identical to what rosidl generated for
    # interfaces/simulation_interfaces (share/simulation_interfaces/*/*.json).
    'simulation_interfaces/msg/EntityState':
        'RIHS01_2e0464a85eb80a939025075d6c20761eca6a4cb9d6baf2c0ba373467c8b598d0',
    'simulation_interfaces/msg/Result':
        'RIHS01_cf43a306adff3337a0a47143d8f5689933bc70a30478f13b077dc1fe3bc5ad17',
    'simulation_interfaces/srv/SetEntityState':
        'RIHS01_ca210e7d2b66629ae133c8e1edf5246e618106d75c78ed0556c0e7a33c59ee5e',
}

# Hashes of SetEntityState's request and response messages (what its rq/ and
# rr/ DDS endpoints advertise), computed with rosbags as above.
SET_ENTITY_STATE_PART_HASHES = {
    'simulation_interfaces::srv::dds_::SetEntityState_Request_':
        'RIHS01_95cdfbffcd9c4d0133b2079bdcadd4420ce86dd255c11a3dfed7f9f907fd304d',
    'simulation_interfaces::srv::dds_::SetEntityState_Response_':
        'RIHS01_bbd9bcb2def000f1ed8cb9482abff46c5a11cfe4184203f336b920f249d757f4',
}

CLASSES = {
    'tf2_msgs/msg/TFMessage': TFMessage,
    'tf2_msgs/msg/TF2Error': TF2Error,
    'nav_msgs/msg/Odometry': Odometry,
    'geometry_msgs/msg/TwistStamped': TwistStamped,
    'geometry_msgs/msg/TransformStamped': TransformStamped,
    'simulation_interfaces/msg/EntityState': EntityState,
    'simulation_interfaces/msg/Result': Result,
}


def _share_dir(pkg):
    """share/<pkg> of the prefix the package was imported from."""
    module = __import__(pkg)
    try:
        from ament_index_python.packages import get_package_share_directory
        return Path(get_package_share_directory(pkg))
    except Exception:
        pass
    # <prefix>/lib/pythonX.Y/site-packages/<pkg>/__init__.py
    return Path(module.__file__).resolve().parents[4] / 'share' / pkg


# --------------------------------------------------------------- fields

def test_tf_message_fields():
    assert list(TFMessage.get_fields_and_field_types().items()) == [
        ('transforms', 'sequence<geometry_msgs/TransformStamped>')]


def test_tf2_error_fields_and_constants():
    assert list(TF2Error.get_fields_and_field_types().items()) == [
        ('error', 'uint8'), ('error_string', 'string')]
    meta = type(TF2Error)
    assert getattr(meta, f'_{meta.__name__}__constants') == {
        'NO_ERROR': 0, 'LOOKUP_ERROR': 1, 'CONNECTIVITY_ERROR': 2, 'EXTRAPOLATION_ERROR': 3,
        'INVALID_ARGUMENT_ERROR': 4, 'TIMEOUT_ERROR': 5, 'TRANSFORM_ERROR': 6}


def _constants(cls):
    meta = type(cls)
    return getattr(meta, f'_{meta.__name__}__constants')


def test_set_entity_state_fields_and_constants():
    assert list(EntityState.get_fields_and_field_types().items()) == [
        ('header', 'std_msgs/Header'), ('pose', 'geometry_msgs/Pose'),
        ('twist', 'geometry_msgs/Twist'), ('acceleration', 'geometry_msgs/Accel')]
    assert list(Result.get_fields_and_field_types().items()) == [
        ('result', 'uint8'), ('error_message', 'string')]
    assert _constants(Result) == {
        'RESULT_FEATURE_UNSUPPORTED': 0, 'RESULT_OK': 1, 'RESULT_NOT_FOUND': 2,
        'RESULT_INCORRECT_STATE': 3, 'RESULT_OPERATION_FAILED': 4}
    assert list(SetEntityState.Request.get_fields_and_field_types().items()) == [
        ('entity', 'string'), ('state', 'simulation_interfaces/EntityState')]
    assert list(SetEntityState.Response.get_fields_and_field_types().items()) == [
        ('result', 'simulation_interfaces/Result')]
    assert _constants(SetEntityState.Request) == {}
    assert _constants(SetEntityState.Response) == {'INVALID_POSE': 101}


# ----------------------------------------------------- C type support

def _round_trip(msg):
    from rclpy.serialization import deserialize_message, serialize_message
    data = serialize_message(msg)
    assert isinstance(data, bytes) and len(data) > 0
    back = deserialize_message(data, type(msg))
    assert back == msg
    return back


def test_odometry_round_trip():
    odom = Odometry()
    odom.header.stamp.sec, odom.header.stamp.nanosec = 12, 345_000_000
    odom.header.frame_id = 'sim/odom'
    odom.child_frame_id = 'sim/base_footprint'
    odom.pose.pose.position.x, odom.pose.pose.position.y = 1.25, -0.5
    odom.pose.pose.orientation.z, odom.pose.pose.orientation.w = 0.3826834, 0.9238795
    odom.pose.covariance[0] = odom.pose.covariance[7] = 1e-3
    odom.twist.twist.linear.x, odom.twist.twist.angular.z = 0.8, 0.2
    odom.twist.covariance[35] = 5e-3
    back = _round_trip(odom)
    assert back.child_frame_id == 'sim/base_footprint'
    assert back.pose.covariance[7] == pytest.approx(1e-3)


def test_twist_stamped_round_trip():
    cmd = TwistStamped()
    cmd.header.frame_id = 'sim/base_footprint'
    cmd.twist.linear.x, cmd.twist.angular.z = 0.5, -0.25
    assert _round_trip(cmd).twist.angular.z == -0.25


def test_tf_message_round_trip():
    transforms = []
    for i, (parent, child) in enumerate([('sim/odom', 'sim/base_footprint'),
                                         ('sim/base_footprint', 'sim/base_link')]):
        t = TransformStamped()
        t.header.stamp.sec = 7
        t.header.frame_id, t.child_frame_id = parent, child
        t.transform.translation.x = 1.0 + i
        t.transform.rotation.z, t.transform.rotation.w = 0.0, 1.0
        transforms.append(t)
    back = _round_trip(TFMessage(transforms=transforms))
    assert [(t.header.frame_id, t.child_frame_id) for t in back.transforms] == [
        ('sim/odom', 'sim/base_footprint'), ('sim/base_footprint', 'sim/base_link')]
    assert _round_trip(TFMessage()).transforms == []
    _round_trip(TF2Error(error=TF2Error.LOOKUP_ERROR, error_string='no frame sim/odom'))


def test_set_entity_state_round_trip():
    request = SetEntityState.Request(entity='mir250')
    request.state.header.frame_id = 'world'
    request.state.pose.position.x, request.state.pose.position.y = 2.5, -1.0
    request.state.pose.orientation.z, request.state.pose.orientation.w = 0.3826834, 0.9238795
    back = _round_trip(request)
    assert back.entity == 'mir250'
    assert back.state.pose.orientation.z == pytest.approx(0.3826834)
    response = SetEntityState.Response()
    response.result.result = SetEntityState.Response.INVALID_POSE
    response.result.error_message = 'position outside world bounds'
    assert _round_trip(response).result.result == 101
    _round_trip(Result(result=Result.RESULT_OK))


# ------------------------------------------------------------ type hashes

@pytest.mark.parametrize('type_name', sorted(UPSTREAM_HASHES))
def test_type_hash_in_installed_type_description(type_name):
    pkg, kind, name = type_name.split('/')
    path = _share_dir(pkg) / kind / f'{name}.json'
    if not path.is_file():
        pytest.skip(f'type description not installed at {path}')
    hashes = {h['type_name']: h['hash_string']
              for h in json.loads(path.read_text())['type_hashes']}
    assert hashes[type_name] == UPSTREAM_HASHES[type_name]


def _rosbags_store(sources: dict, installed: tuple):
    """A rosbags type store (an RIHS01 implementation independent of rosidl) of the definitions
    ``sources`` ({type name: .msg path}) and of the ``installed`` types' .msg files in the venv."""
    typesys = pytest.importorskip('rosbags.typesys')
    store = typesys.get_typestore(typesys.Stores.EMPTY)
    sources = dict(sources)
    for type_name in installed:
        pkg, _, name = type_name.split('/')
        sources[type_name] = _share_dir(pkg) / 'msg' / f'{name}.msg'
    types = {}
    for type_name, path in sources.items():
        types.update(typesys.get_types_from_msg(path.read_text(), type_name))
    store.register(types)
    return store


def test_tf_message_hash_recomputed_from_definitions():
    """RIHS01 of TFMessage from interfaces/tf2_msgs and the installed .msg files (rosbags)."""
    store = _rosbags_store({
        'tf2_msgs/msg/TFMessage': REPO / 'interfaces/tf2_msgs/msg/TFMessage.msg',
        'tf2_msgs/msg/TF2Error': REPO / 'interfaces/tf2_msgs/msg/TF2Error.msg',
    }, ('builtin_interfaces/msg/Time', 'std_msgs/msg/Header', 'geometry_msgs/msg/Vector3',
        'geometry_msgs/msg/Quaternion', 'geometry_msgs/msg/Transform', 'geometry_msgs/msg/TransformStamped'))
    for type_name in ('tf2_msgs/msg/TFMessage', 'tf2_msgs/msg/TF2Error',
                      'geometry_msgs/msg/TransformStamped'):
        assert store.hash_rihs01(type_name) == UPSTREAM_HASHES[type_name], type_name


def test_entity_state_and_result_hashes_recomputed_from_definitions():
    """RIHS01 of EntityState and Result from interfaces/simulation_interfaces and
    the installed .msg files (rosbags)."""
    sources = {}
    for name in ('EntityState', 'Result'):
        path = REPO / f'interfaces/simulation_interfaces/msg/{name}.msg'
        installed = _share_dir('simulation_interfaces') / 'msg' / f'{name}.msg'
        if installed.is_file():  # the venv holds the definition built from interfaces/
            assert installed.read_text() == path.read_text(), installed
        sources[f'simulation_interfaces/msg/{name}'] = path
    store = _rosbags_store(sources, ('builtin_interfaces/msg/Time', 'std_msgs/msg/Header', 'geometry_msgs/msg/Point',
                                     'geometry_msgs/msg/Quaternion', 'geometry_msgs/msg/Pose',
                                     'geometry_msgs/msg/Vector3', 'geometry_msgs/msg/Twist', 'geometry_msgs/msg/Accel'))
    for type_name in ('simulation_interfaces/msg/EntityState',
                      'simulation_interfaces/msg/Result'):
        assert store.hash_rihs01(type_name) == UPSTREAM_HASHES[type_name], type_name


def test_type_hashes_advertised_over_rmw():
    """The hash compiled into the C type support is what DDS peers see."""
    context = rclpy.Context()
    # Private domain so nothing else on the host interferes.
    rclpy.init(context=context, domain_id=ros_helpers.domain_id_for())
    node = None
    tag = uuid.uuid4().hex[:8]
    try:
        node = rclpy.create_node(f'interfaces_hash_test_{tag}', context=context)
        topics = {}
        for i, (type_name, cls) in enumerate(sorted(CLASSES.items())):
            topics[type_name] = f'/interfaces_hash_test_{tag}_{i}'
            node.create_publisher(cls, topics[type_name], 1)
        for type_name, topic in topics.items():
            infos = ros_helpers.graph_endpoints(lambda: node.get_publishers_info_by_topic(topic))
            assert infos, f'publisher on {topic} not visible in graph'
            assert infos[0].topic_type == type_name
            assert str(infos[0].topic_type_hash) == UPSTREAM_HASHES[type_name], type_name
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.shutdown(context=context)


def test_set_entity_state_hash_over_rmw():
    """A node serving SetEntityState registers the service type under the hash of
    its C type support: the node's type description service (what `ros2
    interface` and peers query) must serve it under the upstream hash, and its
    request/reply endpoints must advertise the upstream part hashes."""
    from rclpy.executors import SingleThreadedExecutor
    from type_description_interfaces.srv import GetTypeDescription

    type_name = 'simulation_interfaces/srv/SetEntityState'
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=ros_helpers.domain_id_for())
    tag = uuid.uuid4().hex[:8]
    nodes, executor = [], None
    try:
        server = rclpy.create_node(f'set_entity_state_hash_test_{tag}', context=context)
        nodes.append(server)
        asker = rclpy.create_node(f'set_entity_state_hash_asker_{tag}', context=context)
        nodes.append(asker)
        service_name = f'/set_entity_state_hash_test_{tag}'
        server.create_service(SetEntityState, service_name, lambda request, response: response)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(server)
        executor.add_node(asker)
        client = asker.create_client(
            GetTypeDescription, f'/set_entity_state_hash_test_{tag}/get_type_description')
        assert client.wait_for_service(timeout_sec=5.0), 'no get_type_description service'

        def describe(type_hash):
            future = client.call_async(GetTypeDescription.Request(
                type_name=type_name, type_hash=type_hash, include_type_sources=False))
            executor.spin_until_future_complete(future, timeout_sec=5.0)
            assert future.done(), 'get_type_description timed out'
            return future.result()

        reply = describe(UPSTREAM_HASHES[type_name])
        assert reply.successful, reply.failure_reason
        assert reply.type_description.type_description.type_name == type_name
        # the lookup is by hash: any other hash is not found
        assert not describe('RIHS01_' + '0' * 64).successful

        for topic, kind in ((f'rq{service_name}Request', 'Request'),
                            (f'rr{service_name}Reply', 'Response')):
            dds_type = f'simulation_interfaces::srv::dds_::SetEntityState_{kind}_'
            infos = ros_helpers.graph_endpoints(lambda: server.get_publishers_info_by_topic(topic, no_mangle=True)
                                                + server.get_subscriptions_info_by_topic(topic, no_mangle=True))
            assert infos, f'no endpoint on {topic} visible in graph'
            for info in infos:
                assert info.topic_type == dds_type
                assert str(info.topic_type_hash) == SET_ENTITY_STATE_PART_HASHES[dds_type], topic
    finally:
        if executor is not None:
            executor.shutdown()
        for node in nodes:
            node.destroy_node()
        rclpy.shutdown(context=context)
