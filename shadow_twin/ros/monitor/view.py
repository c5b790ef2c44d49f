"""The twin monitor's 3D view of the real robots (issue 38; a part of ``shadow_twin.ros.monitor.node``, on with
``view.enabled``): the robots drawn through the sim's own model, for labs without a robot_state_publisher of
the whole cell, and a ghost of them coloured by where they part from the sim.

* ``/tf``: every body of the model (``view.model_path``, the sim bridge's) as
  ``<view.tf_prefix><parent body>`` -> ``<view.tf_prefix><body>`` (``real/``), posed by the real joint states and
  the real base's odometry, at most ``view.tf_rate`` Hz and once per new comparison, stamped with the newest real
  sample used; ``/tf_static``: ``<view.world_frame>`` -> ``real/world``, identity (the odometry frames of sim
  and real coincide at start, as the base's error assumes). Off with ``view.publish_tf`` false (a lab's
  robot_state_publisher gives the frames).
* ``view.markers_topic`` (``/real/markers``): the model's visible geoms in the ``real/`` frames, translucent
  (``view.alpha``), each link coloured by its sim-real error: the distance between where the link stands in the
  sim and on the robots at the same instant (:mod:`shadow_twin.visual.ghost`: the monitor's time-aligned
  comparison, both through the same model), green at 0, yellow at half ``view.error_scale``, red from it on
  (:class:`~shadow_twin.visual.colours.ErrorScale`), grey before the first comparison; sent again at most
  ``view.marker_rate`` Hz when a colour changed. With it, in namespace ``legend``: the scale (five cubes and
  their values in mm) at ``view.legend_xyz`` in the world frame.

Joints of the model the real streams do not report stay at the model's reference pose in both.
"""

from __future__ import annotations

import mujoco
import numpy as np
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker, MarkerArray

from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.ros.guard import guarded_timer
from shadow_twin.ros.visual_msgs import LATCHED_QOS, TF_QOS, TransformBuffer, identity_transform, part_markers, \
    set_colours
from shadow_twin.visual.colours import ErrorScale
from shadow_twin.visual.configuration import RobotConfiguration, link_errors
from shadow_twin.visual.frames import BodyTree
from shadow_twin.visual.geometry import geom_parts, mesh_folder
from shadow_twin.visual.ghost import GhostState, ghost_state

#: The ghost's namespace, and the legend's.
NAMESPACE, LEGEND = 'real', 'legend'
#: A colour channel must change this much before the ghost is sent again.
COLOUR_STEP = 0.02


class RealView:
    """The real robots' frames and ghost of the module doc, for the monitor ``node``.

    Args:
        node: the twin monitor (``settings``, its ``monitor`` and ``base`` comparisons).
    Raises:
        ModelError: ``view.model_path`` does not load. ConfigError: a bad joint map file.
    """

    def __init__(self, node) -> None:
        s = node.settings
        self.node, self.prefix = node, s.view_tf_prefix
        self.model = TwinModel(s.view_model_path or None).model
        self.configuration = RobotConfiguration(self.model, JointNameMap.from_yaml(s.view_joint_map_file or None))
        self.real, self.sim = mujoco.MjData(self.model), mujoco.MjData(self.model)
        for data in (self.real, self.sim):
            mujoco.mj_kinematics(self.model, data)
        self.tree = BodyTree(self.model, self.prefix)
        self.scale = ErrorScale(s.view_error_scale, s.view_alpha)
        # the robots' links only: the world's geoms (the floor) are the sim's, not a ghost's
        self.parts = [p for p in geom_parts(self.model, mesh_folder(s.view_mesh_dir)) if p.body != 0]
        self.part_bodies = np.array([p.body for p in self.parts], dtype=int)
        self._last_t = None
        self.tf_pub = self.buffer = None
        if s.view_publish_tf:
            self.tf_pub = node.create_publisher(TFMessage, '/tf', TF_QOS)
            self.buffer = TransformBuffer(self.tree.parents, self.tree.children)
            if s.view_world_frame:
                static = node.create_publisher(TFMessage, '/tf_static', LATCHED_QOS)
                static.publish(TFMessage(transforms=[identity_transform(s.view_world_frame, self.tree.root)]))
        self.markers_pub = self.markers = self._sent = None
        if s.view_markers_topic:
            self.markers_pub = node.create_publisher(MarkerArray, s.view_markers_topic, LATCHED_QOS)
            self.markers = part_markers(self.parts, self.prefix, NAMESPACE, self.scale.rgba(
                np.full(len(self.parts), np.nan)))
            self.markers.markers.extend(legend_markers(self.scale, s.view_legend_xyz, s.view_world_frame or
                                                       self.tree.root))
            self._publish_markers(self._colours())
            guarded_timer(node, 1.0 / s.view_marker_rate, self._recolour, 'ghost colours')
        guarded_timer(node, 1.0 / s.view_tf_rate, self.update, 'real bodies')
        node.get_logger().info(
            f'real robots drawn through {s.view_model_path or "the built-in hand"}: '
            + (f'/tf as {self.prefix}<body>' if self.tf_pub else 'no /tf (view.publish_tf false)')
            + (f', ghost on {self.markers_pub.topic_name} (red from {s.view_error_scale * 1e3:g} mm)'
               if self.markers_pub else ''))

    def update(self) -> GhostState | None:
        """Pose the model as the robots and the sim at the newest comparison and publish the real bodies' frames
        (once per new comparison); returns that state (None: nothing new)."""
        state = ghost_state(self.node.monitor, self.node.base)
        if state is None or state.t == self._last_t:
            return None
        self._last_t = state.t
        self.configuration.apply(self.real, state.real, state.real_base)
        self.configuration.apply(self.sim, state.sim, state.sim_base)
        if self.tf_pub is not None:
            poses = self.tree.relative(self.real.xpos, self.real.xquat)
            self.tf_pub.publish(self.buffer.message(poses, state.stamp))
        return state

    def errors(self) -> np.ndarray:
        """(nbody,) m: each body's sim-real distance at the last update (NaN before the first; the world 0)."""
        if self._last_t is None:
            return np.full(self.model.nbody, np.nan)
        return np.concatenate([[0.0], link_errors(self.sim, self.real)])

    def _colours(self) -> np.ndarray:
        return self.scale.rgba(self.errors()[self.part_bodies])

    def _recolour(self) -> None:
        """Send the ghost again when a colour changed by :data:`COLOUR_STEP` or more (a timer's callback)."""
        colours = self._colours()
        if self._sent is None or np.abs(colours - self._sent).max() >= COLOUR_STEP:
            self._publish_markers(colours)

    def _publish_markers(self, colours: np.ndarray) -> None:
        set_colours_of_parts(self.markers, colours)
        self.markers_pub.publish(self.markers)
        self._sent = colours


def set_colours_of_parts(array: MarkerArray, colours: np.ndarray) -> None:
    """Colour the part markers of ``array`` (those of namespace :data:`NAMESPACE`, the legend's kept)."""
    parts = MarkerArray(markers=[m for m in array.markers if m.ns == NAMESPACE])
    set_colours(parts, colours)


def legend_markers(scale: ErrorScale, xyz, frame: str, steps: int = 5) -> list[Marker]:
    """The colour scale as markers in ``frame``: ``steps`` cubes 4 cm apart upwards from ``xyz`` (m), each with
    its value in mm beside it, and a title above them (namespace :data:`LEGEND`)."""
    out = []
    x, y, z = (float(v) for v in xyz)
    for k, (value, rgba) in enumerate(scale.legend(steps)):
        for kind, offset, text in ((Marker.CUBE, 0.0, ''), (Marker.TEXT_VIEW_FACING, 0.06, f'{value * 1e3:.0f} mm')):
            m = Marker(ns=LEGEND, id=2 * k + (kind == Marker.TEXT_VIEW_FACING), type=kind, action=Marker.ADD, text=text)
            m.header.frame_id = frame
            m.pose.position.x, m.pose.position.y, m.pose.position.z = x, y + offset, z + 0.04 * k
            m.pose.orientation.w = 1.0
            m.scale.x = m.scale.y = m.scale.z = 0.03
            m.color.r, m.color.g, m.color.b, m.color.a = (float(c) for c in (*rgba[:3], 1.0))
            out.append(m)
    title = Marker(ns=LEGEND, id=2 * steps, type=Marker.TEXT_VIEW_FACING, action=Marker.ADD,
                   text='real vs sim, per link')
    title.header.frame_id = frame
    title.pose.position.x, title.pose.position.y, title.pose.position.z = x, y, z + 0.04 * steps + 0.03
    title.pose.orientation.w = 1.0
    title.scale.z = 0.03
    title.color.r = title.color.g = title.color.b = title.color.a = 1.0
    return out + [title]
