"""The twin monitor's shadow sources: ROS side of :mod:`shadow_twin.monitoring.shadow_sources`
(a part of ``shadow_twin.ros.monitor.node``).

The topics of ``shadow_sources`` are subscribed once the ROS graph knows their type (as
``ros2 topic echo`` finds it: the first type a publisher offers, ``pkg/msg/Name`` imported as
``pkg.msg.Name`` (:func:`message_class`); looked up every second until found), with the
sensor-data QoS (best effort: it matches reliable and best-effort publishers). Any type with
``joint_names`` (``control_msgs/JointTrajectoryControllerState``,
``trajectory_msgs/JointTrajectory``) or ``name`` (``sensor_msgs/JointState``) carries those
joints; one with ``twist`` or ``pose`` (``geometry_msgs/TwistStamped``, ``nav_msgs/Odometry``)
carries the base. A source's time is its messages' header stamps (ROS time; a zero stamp or no
header: the node clock on arrival), compared with the node clock: silent longer than
``shadow_source_timeout`` s (or nothing yet) makes its joints (and the base) STALE in
``/diagnostics``; the status ``twin_monitor: shadow sources`` lists every source.
"""

from __future__ import annotations

import importlib

from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.qos import qos_profile_sensor_data

from shadow_twin.monitoring.shadow_sources import BASE, ShadowSources
from shadow_twin.monitoring.thresholds import OK, STALE
from shadow_twin.ros.guard import guarded_subscription, guarded_timer

def message_class(type_name: str):
    """The Python class of a ROS message type named as the graph names it (``pkg/msg/Name``), as
    ``ros2 topic echo`` loads it. Raises ValueError for another form, ModuleNotFoundError or
    AttributeError when the package or the type is not installed."""
    parts = type_name.split('/')
    if len(parts) != 3 or parts[1] != 'msg' or not all(parts):
        raise ValueError(f'{type_name!r} is not a message type name pkg/msg/Name')
    return getattr(importlib.import_module(f'{parts[0]}.msg'), parts[2])


#: Name of the shadow sources' status after the node's name.
SHADOW_STATUS = 'shadow sources'
#: Seconds between looks at the ROS graph for the types of sources not subscribed yet.
DISCOVERY_PERIOD = 1.0


def joints_of(msg) -> tuple:
    """The joints a shadow source's message carries: ``joint_names``, ``name``, or (BASE,) for a
    message with a ``twist`` or ``pose``; () for anything else."""
    for field in ('joint_names', 'name'):
        names = getattr(msg, field, None)
        if names is not None and not isinstance(names, str):
            return tuple(names)
    if hasattr(msg, 'twist') or hasattr(msg, 'pose'):
        return (BASE,)
    return ()


class ShadowWatch:
    """The shadow sources of ``node`` (parameters ``shadow_sources``, ``shadow_source_timeout``).

    Args:
        node: the twin monitor node.
        status: builds a ``DiagnosticStatus`` from (level, name, message, values).
    """

    def __init__(self, node, status) -> None:
        self.node, self._status = node, status
        topics = [t for t in node.settings.shadow_sources if str(t).strip()]
        self.sources = ShadowSources(topics, node.settings.shadow_source_timeout)
        self._subscriptions: dict[str, object] = {}
        if self.sources:
            guarded_timer(node, DISCOVERY_PERIOD, self._discover, 'shadow source discovery')
            node.get_logger().info(f'shadow sources: {", ".join(self.sources.sources)} (STALE after '
                                   f'{self.sources.timeout:g} s of silence)')

    def __bool__(self) -> bool:
        return bool(self.sources)

    def now(self) -> float:
        """The node clock, s."""
        return self.node.get_clock().now().nanoseconds * 1e-9

    def _discover(self) -> None:
        missing = [t for t in self.sources.sources if t not in self._subscriptions]
        if not missing:
            return
        types = dict(self.node.get_topic_names_and_types())
        for topic in missing:
            if not types.get(topic):
                continue
            name = types[topic][0]
            try:
                msg_type = message_class(name)
            except (AttributeError, ModuleNotFoundError, ValueError) as exc:
                self.node.get_logger().error(f'shadow source {topic}: type {name} cannot be loaded: {exc}',
                                             throttle_duration_sec=60.0)
                continue
            self.sources.sources[topic].type = name
            self._subscriptions[topic] = guarded_subscription(
                self.node, msg_type, topic, lambda m, topic=topic: self._on_message(topic, m), qos_profile_sensor_data)
            self.node.get_logger().info(f'shadow source {topic}: {name}')

    def _on_message(self, topic: str, msg) -> None:
        header = getattr(msg, 'header', None)
        stamp = 0.0 if header is None else header.stamp.sec + header.stamp.nanosec * 1e-9
        self.sources.heard(topic, stamp, joints_of(msg), self.now())

    def stale_joints(self) -> dict[str, str]:
        """{joint (or BASE): why} of the silent sources now."""
        return self.sources.stale_joints(self.now()) if self.sources else {}

    def status(self) -> DiagnosticStatus:
        """The ``twin_monitor: shadow sources`` status: STALE naming the silent sources, else OK;
        one value per source (type, joints, silence)."""
        now = self.now()
        stale = self.sources.stale(now)
        values = {}
        for s in self.sources.sources.values():
            silent = s.silent_for(now)
            values[s.topic] = (f'{s.type or "type unknown"}; {len(s.joints)} joints '
                               f'({", ".join(s.joints)}); ' + ('nothing received' if silent is None else
                                                               f'last {silent:.2f} s ago'))
        values['timeout_s'] = f'{self.sources.timeout:g}'
        if stale:
            message = f'{len(stale)} of {len(self.sources.sources)} silent: ' + ', '.join(s.topic for s in stale)
            return self._status(STALE, SHADOW_STATUS, message, values)
        return self._status(OK, SHADOW_STATUS, f'{len(self.sources.sources)} flowing', values)
