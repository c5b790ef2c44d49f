"""The 3D view's messages (shadow_twin.ros.visual_msgs): markers of a model's parts in their body frames, the
body tree's transforms (a base's frame left to its odometry), and contact arrows on the force's line of action."""

from __future__ import annotations

from types import SimpleNamespace

import mujoco
import numpy as np
import pytest

from shadow_twin.visual.frames import BodyTree
from shadow_twin.visual.geometry import geom_parts

pytest.importorskip('visualization_msgs.msg')
from visualization_msgs.msg import Marker  # noqa: E402

from shadow_twin.ros.visual_msgs import (HOLDING, SLIPPING, TransformBuffer, contact_arrows,  # noqa: E402
                                         part_markers, set_colours)

XML = """
<mujoco>
  <worldbody>
    <body name="base" pos="1 0 0"><freejoint/><geom type="box" size="0.1 0.2 0.3" rgba="0 0 1 1"/>
      <body name="link" pos="0 0 0.5"><joint type="hinge"/><geom type="capsule" size="0.02 0.1"/></body>
    </body>
  </worldbody>
</mujoco>
"""


def test_parts_become_frame_locked_markers_after_a_delete_all():
    model = mujoco.MjModel.from_xml_string(XML)
    parts = geom_parts(model)
    array = part_markers(parts, 'sim/', 'sim')
    first, *markers = array.markers
    assert first.action == Marker.DELETEALL and first.ns == 'sim'
    assert [(m.header.frame_id, m.type) for m in markers] == [
        ('sim/base', Marker.CUBE), ('sim/link', Marker.CYLINDER), ('sim/link', Marker.SPHERE), ('sim/link', Marker.SPHERE)]
    assert all(m.frame_locked and m.action == Marker.ADD for m in markers)
    assert (markers[0].scale.x, markers[0].scale.y, markers[0].scale.z) == pytest.approx((0.2, 0.4, 0.6))
    assert (markers[0].color.b, markers[0].color.a) == (1.0, 1.0)
    set_colours(array, np.tile([1.0, 0.0, 0.0, 0.4], (4, 1)))
    assert {(m.color.r, round(m.color.a, 3)) for m in markers} == {(1.0, 0.4)}
    with pytest.raises(ValueError, match='3 colours for 4 markers'):
        set_colours(array, np.zeros((3, 4)))


def test_transforms_are_stamped_together_and_a_skipped_frame_is_left_out():
    model = mujoco.MjModel.from_xml_string(XML)
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    tree = BodyTree(model, 'sim/')
    stamp = SimpleNamespace(sec=3, nanosec=5)
    whole = TransformBuffer(tree.parents, tree.children).message(tree.relative(data.xpos, data.xquat), stamp)
    assert [(t.header.frame_id, t.child_frame_id) for t in whole.transforms] == [
        ('sim/world', 'sim/base'), ('sim/base', 'sim/link')]
    assert all(t.header.stamp is stamp for t in whole.transforms)
    assert (whole.transforms[0].transform.translation.x, whole.transforms[1].transform.translation.z) == (1.0, 0.5)
    based = TransformBuffer(tree.parents, tree.children, skip=['sim/base'])
    assert [t.child_frame_id for t in based.message(tree.relative(data.xpos, data.xquat), stamp).transforms] == [
        'sim/link']


def test_a_contact_arrow_ends_on_the_forces_line_of_action_and_shows_slip():
    point, force = np.array([0.01, 0.02, 0.03]), np.array([0.0, 0.0, -2.0])
    reading = SimpleNamespace(in_contact=True, force=force, torque=np.cross(point, force), slip=0.0)
    slipping = SimpleNamespace(in_contact=True, force=force, torque=np.cross(point, force), slip=0.05)
    free = SimpleNamespace(in_contact=False, force=np.zeros(3), torque=np.zeros(3), slip=0.0)
    array = contact_arrows({'ff': reading, 'th': slipping, 'palm': free},
                           {'ff': 'rh_ffdistal', 'th': 'rh_thdistal', 'palm': 'rh_palm'}, 'sim/', 'contacts',
                           metres_per_newton=0.01)
    ff, th, palm = array.markers
    start, end = (np.array([p.x, p.y, p.z]) for p in ff.points)
    assert end == pytest.approx([0.01, 0.02, 0.0])        # where the vertical line through the point is nearest
    assert end - start == pytest.approx(0.01 * force)     # 20 mm for 2 N, pointing as the force
    assert ff.header.frame_id == 'sim/rh_ffdistal' and ff.type == Marker.ARROW and ff.action == Marker.ADD
    assert (ff.color.r, ff.color.b) == pytest.approx(HOLDING[::2]) and (th.color.r, th.color.b) == pytest.approx(
        SLIPPING[::2])
    assert palm.action == Marker.DELETE and palm.id == 2


def test_the_rviz_layout_shows_the_topics_and_frame_the_nodes_publish():
    import yaml
    from mujoco_bridge.parameters import SPECS as BRIDGE
    from shadow_twin.ros.monitor.parameters import SPECS as MONITOR
    from shadow_twin.common.paths import config_path
    defaults = {spec.name: spec.default for spec in (*BRIDGE, *MONITOR)}
    layout = yaml.safe_load(config_path('shadow_twin.rviz').read_text())['Visualization Manager']
    topics = {d['Topic']['Value']: d['Topic']['Durability Policy'] for d in layout['Displays'] if 'Topic' in d}
    assert topics == {defaults['markers_topic']: 'Transient Local', defaults['view.markers_topic']: 'Transient Local',
                      defaults['contact_markers_topic']: 'Volatile'}
    assert layout['Global Options']['Fixed Frame'] == defaults['tf_world_frame'] == defaults['view.world_frame']
