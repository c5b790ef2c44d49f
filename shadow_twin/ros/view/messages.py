"""The browser view's messages turned into the plain values of :mod:`shadow_twin.visual.browser`: TF
transforms, marker arrays, joint errors and diagnostic statuses. Each function checks what it reads and
raises :class:`~shadow_twin.common.errors.BadMessage` (the guarded subscription drops the message and logs
the line): a NaN, a quaternion of zero length, an empty frame name, a marker of a negative size.

Markers: CUBE, SPHERE, CYLINDER, MESH_RESOURCE (a ``file://`` URI or an absolute path of an STL), ARROW
(two points: shaft and head diameters and head length in ``scale``, as RViz; or no points: ``scale.x``
long along the pose's x axis, ``scale.y`` wide) and TEXT_VIEW_FACING are drawn; the other types (lines,
points, lists) are returned as skipped, by name. ``frame_locked`` is taken as true (the view draws every
frame at its newest transform) and ``lifetime`` is not kept: a marker stays until it is deleted or
replaced. An empty ``header.frame_id`` is the fixed frame.
"""

from __future__ import annotations

from typing import Sequence
from urllib.parse import unquote, urlparse

import numpy as np
from visualization_msgs.msg import Marker

from shadow_twin.common.errors import BadMessage
from shadow_twin.ros.message_checks import check_finite, check_joint_state
from shadow_twin.visual.browser_frames import Transform
from shadow_twin.visual.browser_markers import MarkerClear, MarkerDelete, MarkerPart
from shadow_twin.visual.browser_panel import Status

#: Marker types drawn, and their shapes.
SHAPES = {Marker.CUBE: 'box', Marker.SPHERE: 'sphere', Marker.CYLINDER: 'cylinder', Marker.MESH_RESOURCE: 'mesh',
          Marker.ARROW: 'arrow', Marker.TEXT_VIEW_FACING: 'text'}
#: An arrow's head length (of its whole length) when the marker gives none, as RViz draws it.
HEAD_SHARE = 0.23
#: Names of the marker types not drawn.
SKIPPED_TYPES = {Marker.LINE_STRIP: 'LINE_STRIP', Marker.LINE_LIST: 'LINE_LIST',
                 Marker.CUBE_LIST: 'CUBE_LIST', Marker.SPHERE_LIST: 'SPHERE_LIST', Marker.POINTS: 'POINTS',
                 Marker.TRIANGLE_LIST: 'TRIANGLE_LIST'}


def stamp_seconds(stamp) -> float:
    """A ``builtin_interfaces/Time`` in s."""
    return stamp.sec + 1e-9 * stamp.nanosec


def unit_wxyz(q, field: str) -> np.ndarray:
    """(4,) w, x, y, z of a ``geometry_msgs/Quaternion`` ``q``, normalised. Raises BadMessage: not finite,
    or of length zero."""
    wxyz = np.array([q.w, q.x, q.y, q.z], dtype=float)
    check_finite(wxyz, field)
    norm = float(np.linalg.norm(wxyz))
    if norm < 1e-6:
        raise BadMessage(f'{field} has length {norm:g}: not a rotation')
    return wxyz / norm


def transforms_of(msg) -> list[Transform]:
    """The :class:`Transform` of each ``geometry_msgs/TransformStamped`` of a ``tf2_msgs/TFMessage``.
    Raises BadMessage: an empty frame name, a non-finite translation, a bad rotation (:func:`unit_wxyz`)."""
    out = []
    for k, t in enumerate(msg.transforms):
        parent, child = t.header.frame_id.strip().lstrip('/'), t.child_frame_id.strip().lstrip('/')
        if not parent or not child:
            raise BadMessage(f'transforms[{k}] has an empty frame name ({t.header.frame_id!r} -> '
                             f'{t.child_frame_id!r})')
        tr = t.transform.translation
        position = np.array([tr.x, tr.y, tr.z], dtype=float)
        check_finite(position, f'transforms[{k}].transform.translation')
        out.append(Transform(parent, child, position, unit_wxyz(t.transform.rotation, f'transforms[{k}].rotation')))
    return out


def mesh_path(uri: str) -> str:
    """The file of a marker's ``mesh_resource``: a ``file://`` URI's path or an absolute path. Raises
    BadMessage: another scheme (``package://`` is not resolved here) or an empty one."""
    if uri.startswith('/'):
        return uri
    parsed = urlparse(uri)
    if parsed.scheme == 'file' and parsed.path:
        return unquote(parsed.path)
    raise BadMessage(f'mesh_resource {uri!r}: only file:// URIs and absolute paths are drawn')


def marker_operation(m: Marker, fixed_frame: str, where: str) -> MarkerPart | MarkerDelete | MarkerClear | None:
    """What one marker asks (None: a type not drawn). Raises BadMessage (module doc)."""
    if m.action == Marker.DELETEALL:
        return MarkerClear(m.ns)
    if m.action == Marker.DELETE:
        return MarkerDelete(m.ns, int(m.id))
    if m.action not in (Marker.ADD, Marker.MODIFY):
        raise BadMessage(f'{where}.action is {m.action}: not ADD, MODIFY, DELETE or DELETEALL')
    if m.type not in SHAPES:
        if m.type in SKIPPED_TYPES:
            return None
        raise BadMessage(f'{where}.type is {m.type}: not a marker type')
    p = m.pose.position
    position = np.array([p.x, p.y, p.z], dtype=float)
    check_finite(position, f'{where}.pose.position')
    scale = np.array([m.scale.x, m.scale.y, m.scale.z], dtype=float)
    check_finite(scale, f'{where}.scale')
    if np.any(scale < 0):
        raise BadMessage(f'{where}.scale is {scale.tolist()}: a size cannot be negative')
    rgba = np.array([m.color.r, m.color.g, m.color.b, m.color.a], dtype=float)
    check_finite(rgba, f'{where}.color')
    shape = SHAPES[m.type]
    mesh = mesh_path(m.mesh_resource) if shape == 'mesh' else None
    points = None
    if shape == 'arrow':
        points, scale = arrow_of(m, scale, where)
    frame = m.header.frame_id.strip().lstrip('/') or fixed_frame
    return MarkerPart(m.ns, int(m.id), frame, shape, scale, position, unit_wxyz(m.pose.orientation,
                      f'{where}.pose.orientation'), rgba, mesh, m.text if shape == 'text' else '', points)


def arrow_of(m: Marker, scale: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray]:
    """An ARROW marker's ends (2, 3) m in its pose's frame and its (shaft diameter, head diameter, head
    length) m (module doc). Raises BadMessage: one point, or points that are not finite."""
    if len(m.points) == 0:
        points = np.array([[0.0, 0.0, 0.0], [scale[0], 0.0, 0.0]])
        return points, np.array([scale[1] / 2, scale[1], HEAD_SHARE * scale[0]])
    if len(m.points) < 2:
        raise BadMessage(f'{where}.points has {len(m.points)} point: an arrow has two (or none)')
    points = np.array([[p.x, p.y, p.z] for p in m.points[:2]], dtype=float)
    check_finite(points.ravel(), f'{where}.points')
    head = scale[2] if scale[2] > 0 else HEAD_SHARE * float(np.linalg.norm(points[1] - points[0]))
    return points, np.array([scale[0], scale[1], head])


def marker_operations(msg, fixed_frame: str) -> tuple[list, list[str]]:
    """A ``visualization_msgs/MarkerArray`` as (its operations in order, the names of the marker types
    skipped). Raises BadMessage naming the first bad marker (nothing of the array is applied)."""
    operations, skipped = [], []
    for k, m in enumerate(msg.markers):
        op = marker_operation(m, fixed_frame, f'markers[{k}]')
        if op is None:
            skipped.append(SKIPPED_TYPES[m.type])
        else:
            operations.append(op)
    return operations, skipped


def joint_errors_of(msg) -> tuple[float, Sequence[str], Sequence[float]]:
    """(stamp s, names, position errors rad) of a ``sensor_msgs/JointState`` of joint errors. Raises
    BadMessage (:func:`~shadow_twin.ros.message_checks.check_joint_state`)."""
    check_joint_state(msg)
    return stamp_seconds(msg.header.stamp), list(msg.name), list(msg.position)


def statuses_of(msg) -> list[Status]:
    """The statuses of a ``diagnostic_msgs/DiagnosticArray`` (a level outside 0-3 reads as ERROR)."""
    out = []
    for s in msg.status:
        level = int.from_bytes(s.level, 'little') if isinstance(s.level, bytes) else int(s.level)
        out.append(Status(s.name, level if 0 <= level <= 3 else 2, s.message))
    return out
