"""The browser view's messages turned into plain values (shadow_twin/ros/view/messages.py): transforms with
their quaternions normalised, marker arrays as ordered operations (each drawn type, an arrow from its points
or its pose, a mesh's file, the types not drawn named), joint errors and diagnostic levels; and what a
malformed message raises (the guarded subscription drops it with that line)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

pytest.importorskip('rclpy')
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from geometry_msgs.msg import Point, TransformStamped  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

from shadow_twin.common.errors import BadMessage  # noqa: E402
from shadow_twin.ros.view.messages import (joint_errors_of, marker_operations, statuses_of,  # noqa: E402
                                           transforms_of)
from shadow_twin.visual.browser_markers import MarkerClear, MarkerDelete, MarkerPart  # noqa: E402


def transform(parent='world', child='sim/world', xyz=(0.0, 0.0, 0.0), wxyz=(1.0, 0.0, 0.0, 0.0)) -> TransformStamped:
    t = TransformStamped()
    t.header.frame_id, t.child_frame_id = parent, child
    t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = xyz
    r = t.transform.rotation
    r.w, r.x, r.y, r.z = wxyz
    return t


def marker(kind=Marker.CUBE, action=Marker.ADD, **fields) -> Marker:
    m = Marker(ns='sim', id=3, type=kind, action=action, **fields)
    m.header.frame_id = 'sim/rh_palm'
    m.pose.orientation.w = 1.0
    m.scale.x, m.scale.y, m.scale.z = 0.1, 0.2, 0.3
    m.color.r, m.color.a = 1.0, 0.5
    return m


def test_transforms_keep_their_frames_and_normalise_their_rotation():
    out = transforms_of(TFMessage(transforms=[transform('/world', 'sim/world', (1, 2, 3), (2.0, 0, 0, 0))]))
    assert [(t.parent, t.child) for t in out] == [('world', 'sim/world')]
    assert out[0].position.tolist() == [1, 2, 3] and out[0].wxyz.tolist() == [1, 0, 0, 0]


@pytest.mark.parametrize('bad, words', [
    (transform(xyz=(float('nan'), 0, 0)), 'translation'),
    (transform(wxyz=(0, 0, 0, 0)), 'not a rotation'),
    (transform(child=''), 'empty frame name'),
])
def test_a_malformed_transform_is_refused_with_its_field(bad, words):
    with pytest.raises(BadMessage, match=words):
        transforms_of(TFMessage(transforms=[transform(), bad]))


def test_a_marker_array_becomes_its_operations_in_order():
    mesh = marker(Marker.MESH_RESOURCE, mesh_resource='file:///tmp/my%20meshes/palm-1a2b.stl')
    text = marker(Marker.TEXT_VIEW_FACING, text='20 mm')
    text.header.frame_id = ''
    array = MarkerArray(markers=[marker(action=Marker.DELETEALL), marker(), marker(Marker.SPHERE), mesh, text,
                                 marker(Marker.LINE_STRIP), marker(action=Marker.DELETE)])
    operations, skipped = marker_operations(array, 'world')
    assert skipped == ['LINE_STRIP']
    clear, cube, sphere, part, label, delete = operations
    assert clear == MarkerClear('sim') and delete == MarkerDelete('sim', 3)
    assert isinstance(cube, MarkerPart) and (cube.shape, cube.frame, cube.key) == ('box', 'sim/rh_palm', ('sim', 3))
    assert cube.scale.tolist() == pytest.approx([0.1, 0.2, 0.3]) and cube.rgba.tolist() == [1, 0, 0, 0.5]
    assert sphere.shape == 'sphere' and part.mesh_file == '/tmp/my meshes/palm-1a2b.stl'
    assert (label.shape, label.text, label.frame) == ('text', '20 mm', 'world')     # no frame: the fixed one


def test_an_arrow_from_its_points_or_its_pose():
    ends = marker(Marker.ARROW, points=[Point(x=0.0, y=0.0, z=0.0), Point(x=0.0, y=0.0, z=0.1)])
    ends.scale.z = 0.0                                            # no head length given: RViz's share
    along = marker(Marker.ARROW)
    (a, b), _ = marker_operations(MarkerArray(markers=[ends, along]), 'world')
    assert a.points.tolist() == [[0, 0, 0], [0, 0, pytest.approx(0.1)]]
    assert a.scale.tolist() == pytest.approx([0.1, 0.2, 0.023])
    assert b.points.tolist() == [[0, 0, 0], [pytest.approx(0.1), 0, 0]]
    assert b.scale.tolist() == pytest.approx([0.1, 0.2, 0.023])


@pytest.mark.parametrize('bad, words', [
    (marker(Marker.MESH_RESOURCE, mesh_resource='package://shadow_twin/palm.stl'), 'only file://'),
    (marker(Marker.ARROW, points=[Point()]), 'two'),
    (marker(kind=42), 'not a marker type'),
    (marker(action=7), 'not ADD'),
])
def test_a_malformed_marker_is_refused_with_its_field(bad, words):
    with pytest.raises(BadMessage, match=words):
        marker_operations(MarkerArray(markers=[marker(), bad]), 'world')


def test_a_marker_of_negative_size_or_nan_colour_is_refused():
    negative, nan = marker(), marker()
    negative.scale.y = -0.1
    nan.color.g = float('nan')
    for bad, words in ((negative, 'negative'), (nan, 'color')):
        with pytest.raises(BadMessage, match=words):
            marker_operations(MarkerArray(markers=[bad]), 'world')


def test_joint_errors_and_diagnostics():
    msg = JointState(name=['a', 'b'], position=[0.1, -0.2])
    msg.header.stamp.sec, msg.header.stamp.nanosec = 12, 500_000_000
    assert joint_errors_of(msg) == (12.5, ['a', 'b'], [0.1, -0.2])
    with pytest.raises(BadMessage):
        joint_errors_of(JointState(name=['a', 'b'], position=[0.1]))
    statuses = statuses_of(DiagnosticArray(status=[DiagnosticStatus(level=DiagnosticStatus.WARN, name='x', message='m'),
                                                   DiagnosticStatus(level=bytes([9]), name='y')]))
    assert [(s.name, s.level) for s in statuses] == [('x', 1), ('y', 2)]         # a level out of range: ERROR
