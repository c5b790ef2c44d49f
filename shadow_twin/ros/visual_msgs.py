"""The 3D view's ROS messages (issue 38): a model's drawn parts (:mod:`shadow_twin.visual.geometry`) as a
``visualization_msgs/MarkerArray`` in the bodies' TF frames, and its body tree
(:mod:`shadow_twin.visual.frames`) as ``tf2_msgs/TFMessage``, as RViz and Foxglove read them.

* **Markers**: one per part, ``header.frame_id`` its body's frame (``<prefix><body>``), ``frame_locked``
  (a viewer moves it with that frame's TF, so the array is sent once per model, and again only to recolour),
  stamp zero (the latest transform), the part's pose in the body's frame, type ``CUBE`` (box, plane slab),
  ``SPHERE``, ``CYLINDER`` or ``MESH_RESOURCE`` (``file://`` URI of the part's STL, its own colours off),
  ``scale`` the full extents (m), ``color`` the geom's or the caller's; ``ns`` names the set, ``id`` the part's
  index. The array begins with a ``DELETEALL`` of its namespace: a reloaded model's parts replace the old ones.
* **Transforms**: each body's pose in its parent body's frame, all stamped with the state's stamp;
  :class:`TransformBuffer` keeps the messages and refills them (a message per body built once).
* **Contact arrows**: a label's net contact force as an ``ARROW`` in its sensing body's frame, ending where the
  force's line of action passes nearest the body's origin (the wrench's own point: ``F x tau / |F|^2``) and
  as long as the force times a scale; magenta while the contact slips faster than a threshold, else blue.
* **QoS**: markers and ``/tf_static`` reliable and transient local, depth 1 (a viewer that starts later
  gets them), as ``tf2_ros``'s static broadcaster; ``/tf`` as ``tf2_ros``' broadcaster (depth 100).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from geometry_msgs.msg import Point, TransformStamped
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker, MarkerArray

from shadow_twin.visual.frames import RelativePoses
from shadow_twin.visual.geometry import Part

#: Markers and ``/tf_static``: the last message kept for viewers that join later.
LATCHED_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: ``/tf`` as ``tf2_ros.TransformBroadcaster`` publishes it.
TF_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
#: Marker types of the parts' shapes.
MARKER_TYPES = {'box': Marker.CUBE, 'plane': Marker.CUBE, 'sphere': Marker.SPHERE, 'cylinder': Marker.CYLINDER,
                'mesh': Marker.MESH_RESOURCE}


def part_markers(parts: Sequence[Part], prefix: str, ns: str, colours: np.ndarray | None = None) -> MarkerArray:
    """The :class:`MarkerArray` of ``parts`` (module doc) in the frames ``prefix + body name``, namespace
    ``ns``; ``colours`` (P, 4) rgba 0-1 per part (None: each geom's own). The first marker deletes the
    namespace's earlier markers."""
    clear = Marker(ns=ns, action=Marker.DELETEALL)
    out = [clear]
    for k, part in enumerate(parts):
        m = Marker(ns=ns, id=k, type=MARKER_TYPES[part.shape], action=Marker.ADD, frame_locked=True)
        m.header.frame_id = prefix + part.body_name
        p, q = m.pose.position, m.pose.orientation
        p.x, p.y, p.z = (float(v) for v in part.pos)
        q.w, q.x, q.y, q.z = (float(v) for v in part.quat)
        m.scale.x, m.scale.y, m.scale.z = (float(v) for v in part.scale)
        if part.mesh_file:
            m.mesh_resource = 'file://' + part.mesh_file
            m.mesh_use_embedded_materials = False
        out.append(m)
    array = MarkerArray(markers=out)
    set_colours(array, np.array([p.rgba for p in parts]) if colours is None else colours)
    return array


def set_colours(array: MarkerArray, colours: np.ndarray) -> None:
    """Colour the part markers of ``array`` (:func:`part_markers`'s, its first marker the ``DELETEALL``)
    ``colours`` (P, 4) rgba 0-1, in place. Raises ValueError: not one colour per part."""
    markers = array.markers[1:]
    if len(colours) != len(markers):
        raise ValueError(f'{len(colours)} colours for {len(markers)} markers')
    for marker, (r, g, b, a) in zip(markers, np.asarray(colours, dtype=float).tolist()):
        c = marker.color
        c.r, c.g, c.b, c.a = r, g, b, a


def identity_transform(parent: str, child: str, stamp=None) -> TransformStamped:
    """``parent`` -> ``child`` with no offset (a static frame), stamped ``stamp`` (None: zero)."""
    t = TransformStamped()
    t.header.frame_id, t.child_frame_id = parent, child
    if stamp is not None:
        t.header.stamp = stamp
    t.transform.rotation.w = 1.0
    return t


class TransformBuffer:
    """The ``TFMessage`` of a body tree's relative poses, its ``TransformStamped`` built once per tree and
    refilled for each instant (:meth:`message`).

    Args:
        parents, children: the frames (B,) of each transform (``BodyTree.parents``, ``.children``).
        skip: child frames left out (published by another node or output: a base's odometry).
    """

    def __init__(self, parents: Sequence[str], children: Sequence[str], skip: Sequence[str] = ()) -> None:
        self.keep = [k for k, child in enumerate(children) if child not in set(skip)]
        self.transforms = [identity_transform(parents[k], children[k]) for k in self.keep]
        self.frames = tuple(children[k] for k in self.keep)

    def message(self, poses: RelativePoses, stamp) -> TFMessage:
        """The kept transforms of ``poses`` (same tree, same order), each stamped ``stamp``."""
        pos, quat = poses.pos[self.keep].tolist(), poses.quat[self.keep].tolist()
        for t, (x, y, z), (w, qx, qy, qz) in zip(self.transforms, pos, quat):
            t.header.stamp = stamp
            tr, rot = t.transform.translation, t.transform.rotation
            tr.x, tr.y, tr.z = x, y, z
            rot.w, rot.x, rot.y, rot.z = w, qx, qy, qz
        return TFMessage(transforms=self.transforms)


#: Colours of a contact arrow: holding, and slipping.
HOLDING, SLIPPING = (0.2, 0.5, 1.0, 0.9), (1.0, 0.1, 0.9, 0.9)


def contact_arrows(readings: dict, frames: dict[str, str], prefix: str, ns: str, metres_per_newton: float = 0.02,
                   slip_speed: float = 0.01) -> MarkerArray:
    """The arrows of ``readings`` ({label: ``ContactReading``: ``force`` (3,) N, ``torque`` (3,) N m about the
    body's origin in its frame, ``slip`` m/s, ``in_contact``}) in the frames ``prefix + frames[label]`` (module
    doc): one ``ARROW`` per label in contact (id its order in ``readings``), a ``DELETE`` for the others;
    ``metres_per_newton`` the arrow's length per N, ``slip_speed`` (m/s) from which it is drawn slipping."""
    out = []
    for k, (label, reading) in enumerate(readings.items()):
        m = Marker(ns=ns, id=k, type=Marker.ARROW, frame_locked=True)
        m.header.frame_id = prefix + frames[label]
        force = np.asarray(reading.force, dtype=float)
        norm2 = float(force @ force)
        if not reading.in_contact or norm2 <= 0.0:
            m.action = Marker.DELETE
            out.append(m)
            continue
        m.action = Marker.ADD
        end = np.cross(force, np.asarray(reading.torque, dtype=float)) / norm2
        start = end - metres_per_newton * force
        m.points = [_point(start), _point(end)]
        m.pose.orientation.w = 1.0
        m.scale.x, m.scale.y, m.scale.z = 0.003, 0.007, 0.01      # shaft and head diameters, head length, m
        m.color.r, m.color.g, m.color.b, m.color.a = SLIPPING if reading.slip > slip_speed else HOLDING
        out.append(m)
    return MarkerArray(markers=out)


def _point(xyz) -> Point:
    p = Point()
    p.x, p.y, p.z = (float(v) for v in xyz)
    return p
