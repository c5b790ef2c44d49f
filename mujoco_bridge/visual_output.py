"""The bridge's 3D view outputs (issue 38), for RViz, Foxglove and ``shadow-twin view``:

* ``/tf``: every body of the running model as ``<tf_prefix><parent body>`` -> ``<tf_prefix><body>`` (the
  model's world body is ``<tf_prefix>world``), at ``tf_rate`` Hz, all stamped with the state's stamp (the
  joint states' clock: the state they were taken from is the tick's published one). From the stepping thread,
  after the tick's joint states (as the odometry): a copy of the bodies' poses under the simulation's lock and
  the messages' fields refilled (:class:`~shadow_twin.ros.visual_msgs.TransformBuffer`), a fraction of a
  millisecond at 30 Hz (``benchmarks/view.py`` measures the tick with and without it).
* ``/tf_static``: ``<tf_world_frame>`` -> ``<tf_prefix>world``, identity (the sim's world is the world: the
  real robots' tree hangs from it too, ``real/world``). Where the base interface publishes the base's
  odometry on ``/tf`` (``odom_frame`` -> ``base_frame``) and ``base_frame`` is a body of the tree, that body
  is left out of the tree and ``<tf_prefix>world`` -> ``odom_frame`` is added, identity (the sim's odometry
  is the base's pose in its world): each frame has one parent.
* ``markers_topic``: the model's visible geoms as a ``MarkerArray`` in the body frames (frame-locked, the
  geoms' colours; :mod:`shadow_twin.ros.visual_msgs`), transient local; built off the stepping thread (a
  timer of the node's executor) and sent again when the running model changes (a reload, a spawn).

Mock hardware bridges set ``tf_rate`` 0 and ``markers_topic`` empty: only the sim's tree is ``sim/``.
"""

from __future__ import annotations

import math

from rclpy.node import Node
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import MarkerArray

from shadow_twin.common.errors import ConfigError
from shadow_twin.ros.guard import guarded_timer
from shadow_twin.ros.visual_msgs import LATCHED_QOS, TF_QOS, TransformBuffer, identity_transform, part_markers
from shadow_twin.visual.frames import BodyTree
from shadow_twin.visual.geometry import geom_parts, mesh_folder

#: s between two looks for a changed model (the markers are sent again after a reload).
MARKER_CHECK_S = 0.5
#: The markers' namespace.
NAMESPACE = 'sim'


class VisualOutput:
    """The outputs of the module doc for ``sim`` on ``node``.

    Args:
        node: the bridge node (publishers, its timer).
        sim: its ``LiveSimulation`` (``model``, ``data``, ``lock``, ``time``).
        settings: the bridge's settings (``tf_rate``, ``tf_prefix``, ``tf_world_frame``, ``markers_topic``,
            ``mesh_dir``).
        stamp_of: sim time (s) -> the stamp of the state at that time.
        base_frames: (odom_frame, base_frame) when the base interface publishes the base's odometry on
            ``/tf``, else None.
    """

    def __init__(self, node: Node, sim, settings, stamp_of, base_frames: tuple[str, str] | None = None) -> None:
        self.node, self.sim, self.stamp_of = node, sim, stamp_of
        self.prefix, self.base_frames = settings.tf_prefix, base_frames
        self.mesh_dir = mesh_folder(settings.mesh_dir)
        self.period = 1.0 / settings.tf_rate if settings.tf_rate > 0 else None
        self._next_due = -float('inf')
        self._model = self._tree = self._buffer = None
        self.tf_pub = node.create_publisher(TFMessage, '/tf', TF_QOS) if self.period else None
        self.static_pub = node.create_publisher(TFMessage, '/tf_static', LATCHED_QOS) if self.period else None
        self.world = settings.tf_world_frame
        self.markers_pub = (node.create_publisher(MarkerArray, settings.markers_topic, LATCHED_QOS)
                            if settings.markers_topic else None)
        self._marked = None             # the model whose markers were sent
        if self.markers_pub is not None:
            try:
                self.publish_markers()
            except OSError as exc:
                raise ConfigError(f'mesh_dir {self.mesh_dir}: the mesh files cannot be written ({exc})') from None
            guarded_timer(node, MARKER_CHECK_S, self.publish_markers, 'markers')
        if self.tf_pub is not None:
            with sim.lock:
                self._bind(sim.model)
        node.get_logger().info(
            'bodies on /tf' + (f' as {self.prefix}<body> at {settings.tf_rate:g} Hz' if self.tf_pub else ': off')
            + (f', markers on {self.markers_pub.topic_name}' if self.markers_pub else ', no markers'))

    def _bind(self, model) -> None:
        """The tree of ``model`` (the running one) and its static frames, sent on ``/tf_static``."""
        self._model, self._tree = model, BodyTree(model, self.prefix)
        skip = ()
        statics = [identity_transform(self.world, self._tree.root)] if self.world else []
        if self.base_frames is not None and self.base_frames[1] in self._tree.children:
            skip = (self.base_frames[1],)
            statics.append(identity_transform(self._tree.root, self.base_frames[0]))
        self._buffer = TransformBuffer(self._tree.parents, self._tree.children, skip)
        if statics:
            self.static_pub.publish(TFMessage(transforms=statics))

    def tick(self, mono: float) -> None:
        """Publish the bodies' transforms when due (every ``1/tf_rate`` s of the tick's monotonic time ``mono``:
        also while the sim is paused, stamped as its joint states then)."""
        if self.tf_pub is None or mono < self._next_due:
            return
        self._next_due = (math.floor(mono / self.period) + 1) * self.period      # the next multiple of the period
        sim = self.sim
        with sim.lock:
            if sim.model is not self._model:
                self._bind(sim.model)
            xpos, xquat, now = sim.data.xpos.copy(), sim.data.xquat.copy(), float(sim.time)
        self.tf_pub.publish(self._buffer.message(self._tree.relative(xpos, xquat), self.stamp_of(now)))

    def publish_markers(self) -> None:
        """Send the running model's markers if they have not been sent for it (a timer's callback)."""
        model = self.sim.model
        if model is self._marked:
            return
        self.markers_pub.publish(part_markers(geom_parts(model, self.mesh_dir), self.prefix, NAMESPACE))
        self._marked = model
