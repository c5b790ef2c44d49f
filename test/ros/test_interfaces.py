"""Checks the message packages of the MiR250 mobile base nodes against upstream ROS 2 Jazzy.

* nav_msgs/Odometry and geometry_msgs/TwistStamped come from the PyPI wheels
  (ros-jazzy-nav-msgs, ros-jazzy-geometry-msgs 5.3.6, requirements.txt);
* tf2_msgs/TFMessage (and TF2Error) is not on PyPI: scripts/build_interfaces.sh
  builds the subset in interfaces/tf2_msgs into the venv;
* simulation_interfaces (not on PyPI either: interfaces/simulation_interfaces)
  is checked by test_simulation_interfaces.py.

Each type must import, round-trip through rclpy's C serialization, and carry the
RIHS01 type hash of upstream Jazzy (what DDS peers compare when matching topics),
both in the installed type description (share/<pkg>/msg/<Type>.json) and
as advertised over the rmw.  For TFMessage the hash is also recomputed with
rosbags (an implementation of RIHS01 independent of rosidl) from the .msg
definitions: the ones in interfaces/ and those the wheels installed for the
types they reference.

The whole module is skipped when rclpy or one of the packages cannot be imported.
"""

import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

rclpy = pytest.importorskip('rclpy')
nav_msgs_msg = pytest.importorskip('nav_msgs.msg')
geometry_msgs_msg = pytest.importorskip('geometry_msgs.msg')
tf2_msgs_msg = pytest.importorskip('tf2_msgs.msg')

from support import interfaces as iface  # noqa: E402
from support import ros as ros_helpers  # noqa: E402

Odometry = nav_msgs_msg.Odometry
TwistStamped = geometry_msgs_msg.TwistStamped
TransformStamped = geometry_msgs_msg.TransformStamped
TFMessage = tf2_msgs_msg.TFMessage
TF2Error = tf2_msgs_msg.TF2Error

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
}

CLASSES = {
    'tf2_msgs/msg/TFMessage': TFMessage,
    'tf2_msgs/msg/TF2Error': TF2Error,
    'nav_msgs/msg/Odometry': Odometry,
    'geometry_msgs/msg/TwistStamped': TwistStamped,
    'geometry_msgs/msg/TransformStamped': TransformStamped,
}


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


# ----------------------------------------------------- C type support

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
    back = iface.round_trip(odom)
    assert back.child_frame_id == 'sim/base_footprint'
    assert back.pose.covariance[7] == pytest.approx(1e-3)


def test_twist_stamped_round_trip():
    cmd = TwistStamped()
    cmd.header.frame_id = 'sim/base_footprint'
    cmd.twist.linear.x, cmd.twist.angular.z = 0.5, -0.25
    assert iface.round_trip(cmd).twist.angular.z == -0.25


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
    back = iface.round_trip(TFMessage(transforms=transforms))
    assert [(t.header.frame_id, t.child_frame_id) for t in back.transforms] == [
        ('sim/odom', 'sim/base_footprint'), ('sim/base_footprint', 'sim/base_link')]
    assert iface.round_trip(TFMessage()).transforms == []
    iface.round_trip(TF2Error(error=TF2Error.LOOKUP_ERROR, error_string='no frame sim/odom'))


# ------------------------------------------------------------ type hashes

@pytest.mark.parametrize('type_name', sorted(UPSTREAM_HASHES))
def test_type_hash_in_installed_type_description(type_name):
    assert iface.installed_hashes(type_name)[type_name] == UPSTREAM_HASHES[type_name]


def test_tf_message_hash_recomputed_from_definitions():
    """RIHS01 of TFMessage from interfaces/tf2_msgs and the installed .msg files (rosbags)."""
    store = iface.rosbags_store({
        'tf2_msgs/msg/TFMessage': REPO / 'interfaces/tf2_msgs/msg/TFMessage.msg',
        'tf2_msgs/msg/TF2Error': REPO / 'interfaces/tf2_msgs/msg/TF2Error.msg',
    }, ('builtin_interfaces/msg/Time', 'std_msgs/msg/Header', 'geometry_msgs/msg/Vector3',
        'geometry_msgs/msg/Quaternion', 'geometry_msgs/msg/Transform', 'geometry_msgs/msg/TransformStamped'))
    for type_name in ('tf2_msgs/msg/TFMessage', 'tf2_msgs/msg/TF2Error',
                      'geometry_msgs/msg/TransformStamped'):
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
