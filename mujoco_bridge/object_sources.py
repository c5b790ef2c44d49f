"""Pose sources of the objects the bridge follows (``follow_objects``: the sim object follows the real
one, :mod:`shadow_twin.simulation.live.objects`):

* ``follow_objects`` is YAML ``{object: source}``, each object a free object of ``scene_file``; a
  source is a ``geometry_msgs/PoseStamped`` topic (motion capture, e.g. ``/mocap/can/pose``) or
  ``tf:<frame>``, a TF frame on ``/tf`` (AprilTag detections). A TF source takes the transforms of
  ``/tf`` whose ``child_frame_id`` is the frame and whose parent is the world frame (``world`` or
  ``odom``): the ``tf2_ros`` package is not in the environment, so no chain of transforms is looked
  up, and ``/tf_static`` is not read (a static frame does not move: nothing to follow);
* each message's header stamp is mapped to sim time as a followed joint state's, then offered to the
  object's gate (:class:`shadow_twin.simulation.objects.PoseGate`): a sample that is not finite, whose
  quaternion is not a unit one, whose stamp is not after the previous one or out of the sim's reach,
  or that jumps faster than the object can move is dropped, never followed; so is one whose
  ``frame_id`` is not the world frame or whose stamp is unset. Each kind of problem is logged once, as
  a warning naming the object, its source and the problem, until the source is good again (1 s of
  accepted samples); no message stops the node;
* a source silent for the gate's timeout (0.5 s) releases its object to physics: the warning is queued
  by the stepping thread and logged here, on the diagnostics timer (:meth:`ObjectSources.log_warnings`),
  with the object's state in ``/diagnostics`` (:meth:`ObjectSources.statuses`).

The subscriptions are the bridge's inputs node's (its own executor), best effort (they match reliable
and best-effort publishers).
"""

from __future__ import annotations

from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from rclpy.qos import QoSProfile, qos_profile_sensor_data
from tf2_msgs.msg import TFMessage

from shadow_twin.common.errors import ConfigError
from shadow_twin.model.scene import SceneConfig
from shadow_twin.model.scene.config import WORLD_FRAMES
from shadow_twin.ros.guard import guarded_subscription
from shadow_twin.ros.parameters import yaml_mapping
from shadow_twin.simulation.objects.gate import ACCEPTED, KINDS, SILENT

#: Prefix of a TF source.
TF = 'tf:'
#: The kinds of problems the ROS side finds before the gate (a message's frame and stamp).
WRONG_FRAME, NO_STAMP = 'wrong frame', 'no stamp'
#: s of accepted samples after which a kind of the ROS side's problems is reported again (the gate's rearm).
REARM = 1.0
#: The sources' QoS: best effort like any sensor stream, but a queue of 50 samples (0.5 s of 100 Hz motion
#: capture) so that a stalled executor takes every sample in order when it wakes rather than losing all but
#: the last five (the sensor-data profile's depth): each is checked and counted.
SOURCE_QOS = QoSProfile(depth=50, reliability=qos_profile_sensor_data.reliability,
                        durability=qos_profile_sensor_data.durability, history=qos_profile_sensor_data.history)


def parse_sources(text: str) -> dict[str, str]:
    """``follow_objects`` -> {object: source} (module doc; '' = {}). Raises ConfigError (one line naming
    the entry): malformed YAML, not a mapping, a source that is not a topic or ``tf:<frame>``."""
    data = yaml_mapping(text, 'follow_objects', "a mapping {object: PoseStamped topic or 'tf:<frame>'}") or {}
    sources = {}
    for name, source in data.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f'follow_objects: an object name must be a non-empty string, got {name!r}')
        if not isinstance(source, str) or not source.strip() or source.strip() == TF \
                or any(c.isspace() for c in source.strip()):
            raise ConfigError(f"follow_objects.{name}: expected a PoseStamped topic or 'tf:<frame>', got {source!r}")
        sources[name] = source.strip()
    return sources


def followed_sources(text: str, scene: SceneConfig | None) -> dict[str, str]:
    """:func:`parse_sources` of ``text``, each object checked to be a free object of ``scene`` (the
    bridge's ``scene_file``). Raises ConfigError (one line naming the object)."""
    sources = parse_sources(text)
    free = [obj.name for obj in (scene.objects if scene is not None else ()) if obj.free]
    for name in sources:
        if name not in free:
            raise ConfigError(f'follow_objects: {name!r} is not a free object of the scene_file; '
                              f'free objects: {free or "none"}')
    return sources


class ObjectSources:
    """Subscribes to the pose sources of ``sources`` ({object: source}, :func:`followed_sources`) on
    ``inputs`` (the bridge's inputs node) and offers their samples to ``sim`` (its
    ``LiveSimulation``, built with these objects followed); ``stamp_sim_time(stamp)`` maps a header
    stamp to sim time (None for an unset stamp); warnings go to ``logger``."""

    def __init__(self, inputs: Node, sim, sources: dict[str, str], stamp_sim_time, logger) -> None:
        self.sim, self.sources, self.logger = sim, dict(sources), logger
        self._stamp_sim_time = stamp_sim_time
        #: Set by the bridge once its clock is anchored: a message before maps to no sim time and is ignored.
        self.started = False
        self._reported: dict[str, set] = {name: set() for name in sources}
        self._good_since: dict[str, float | None] = dict.fromkeys(sources)
        self.dropped: dict[str, dict[str, int]] = {name: {WRONG_FRAME: 0, NO_STAMP: 0} for name in sources}
        sim.name_object_sources({name: f'{name} ({source})' for name, source in sources.items()})
        self._frames: dict[str, list[str]] = {}
        for name, source in sources.items():
            if source.startswith(TF):
                self._frames.setdefault(source[len(TF):].lstrip('/'), []).append(name)
            else:
                guarded_subscription(inputs, PoseStamped, source, lambda msg, n=name: self._on_pose(n, msg), SOURCE_QOS)
        if self._frames:
            guarded_subscription(inputs, TFMessage, '/tf', self._on_tf, SOURCE_QOS)
        if sources:
            logger.info('following objects: ' + ', '.join(f'{n} from {s}' for n, s in sources.items()))

    def _on_pose(self, name: str, msg: PoseStamped) -> None:
        if msg.header.frame_id not in WORLD_FRAMES:
            self._drop(name, WRONG_FRAME, f'frame_id {msg.header.frame_id!r} is not the world frame '
                                          f'({" or ".join(WORLD_FRAMES)})')
            return
        self._offer(name, msg.header.stamp, msg.pose.position, msg.pose.orientation)

    def _on_tf(self, msg: TFMessage) -> None:
        for transform in msg.transforms:
            names = self._frames.get(transform.child_frame_id.lstrip('/'))
            for name in names or ():
                if transform.header.frame_id.lstrip('/') not in WORLD_FRAMES:
                    parent = transform.header.frame_id
                    self._drop(name, WRONG_FRAME, f'the transform\'s parent {parent!r} is not the world frame '
                                                  f'({" or ".join(WORLD_FRAMES)}); no chain is followed')
                    continue
                self._offer(name, transform.header.stamp, transform.transform.translation, transform.transform.rotation)

    def _offer(self, name: str, stamp_msg, p, q) -> None:
        if not self.started:
            return
        stamp = self._stamp_sim_time(stamp_msg)
        if stamp is None:
            self._drop(name, NO_STAMP, 'header.stamp is unset (0)')
            return
        try:
            verdict = self.sim.offer_object_pose(name, stamp, (p.x, p.y, p.z), (q.w, q.x, q.y, q.z))
        except ConfigError:             # deleted at run time: not followed any more
            return
        if verdict.report:
            self.logger.warning(verdict.message)          # names the object and its source (name_object_sources)
        if verdict.accepted:
            since = self._good_since[name]
            if since is None:
                self._good_since[name] = stamp
            elif stamp - since >= REARM:
                self._reported[name].clear()

    def _drop(self, name: str, kind: str, detail: str) -> None:
        """A message of ``name``'s source dropped before its gate for ``kind``: counted, reported once."""
        self.dropped[name][kind] += 1
        self._good_since[name] = None
        if kind not in self._reported[name]:
            self._reported[name].add(kind)
            self.logger.warning(f'object source {name} ({self.sources[name]}): {detail}; dropped')

    def log_warnings(self) -> None:
        """Log the followed objects' queued warnings (a source gone silent); call off the stepping thread."""
        for message in self.sim.take_object_warnings():
            self.logger.warning(message)

    def statuses(self, node_name: str) -> list[DiagnosticStatus]:
        """Per followed object, its ``/diagnostics`` status: OK while its source is live, WARN while it is
        silent (the object left to physics); values: the source, the counts of accepted and dropped
        samples by kind, and the sim-vs-source error (m, rad) while live."""
        sim = self.sim
        with sim.lock:
            follower = sim.objects
            followed = set(follower.names) if follower is not None else set()
            counts = {name: dict(follower.gate(name).counts) for name in self.sources if name in followed}
            errors = sim.object_errors()
        statuses = []
        for name, source in self.sources.items():
            status = DiagnosticStatus(name=f'{node_name}: object {name}', hardware_id=source)
            values = {'source': source}
            if name not in counts:
                status.level, status.message = DiagnosticStatus.STALE, 'not in the simulation (deleted)'
            else:
                error = errors.get(name)
                if error is None:
                    status.level, status.message = DiagnosticStatus.WARN, 'source silent: the object is left to physics'
                else:
                    status.level = DiagnosticStatus.OK
                    status.message = f'following: {error[0] * 1e3:.1f} mm, {error[1]:.3f} rad from the source'
                    values.update(position_error_m=f'{error[0]:.5f}', angle_error_rad=f'{error[1]:.5f}')
                values['state'] = 'silent' if error is None else 'live'
                values[ACCEPTED] = str(counts[name][ACCEPTED])
                values.update({('silences' if kind == SILENT else f'dropped {kind}'): str(counts[name][kind])
                               for kind in KINDS})
            values.update({f'dropped {kind}': str(n) for kind, n in self.dropped[name].items()})
            status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
            statuses.append(status)
        return statuses
