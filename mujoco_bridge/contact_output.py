"""Contact outputs of the bridge: per fingertip and palm (``contact_sensors``), what the simulated
hand feels, at ``contact_rate`` from the stepping thread (after the tick's joint states, as the
base's odometry):

* ``<contact_topic_prefix>/<label>/wrench`` (``geometry_msgs/WrenchStamped``, ``frame_id`` the
  sensing body, e.g. ``rh_ffdistal``): the net wrench the touched objects exert on it, N and N m
  about the body's origin, in its frame; all zero when nothing touches it: in contact <=> the
  wrench is not zero (a contact counts above ``contact_min_force``);
* ``contact_markers_topic`` (``/sim/contact_markers``): the wrenches and slips as arrows for a 3D view
  (:func:`shadow_twin.ros.visual_msgs.contact_arrows`, in the body frames of ``tf_prefix``);
* ``<contact_topic_prefix>/<label>/slip`` (``geometry_msgs/TwistStamped``, the same frame):
  ``linear.x`` the slip, the tangential sliding speed at the contact, m/s (0 without contact).

Stamped as the joint states (the ROS time the state refers to, or sim time with ``publish_clock``).
The readings are :class:`shadow_twin.simulation.contact_sensing.ContactReader`'s; a reload or a
spawn (a new model) makes a new reader. The mock hardware publishes the same under its own prefix
(``/rh/contacts``): the "real" tactile signals a real hand's PST or BioTac sensors would be mapped to
(docs/contacts.md).
"""

from __future__ import annotations

from geometry_msgs.msg import TwistStamped, WrenchStamped
from rclpy.node import Node
from visualization_msgs.msg import MarkerArray

from shadow_twin.ros.parameters import yaml_mapping
from shadow_twin.ros.visual_msgs import contact_arrows
from shadow_twin.simulation.contact_sensing import DEFAULT_MIN_FORCE, ContactReader, parse_sensing

#: ``contact_sensors`` value meaning the Shadow Hand E's five fingertips and palm
#: (:data:`shadow_twin.simulation.contact_sensing.DEFAULT_SENSORS`).
HAND = 'hand'


def sensors_of(text: str, min_force: float = DEFAULT_MIN_FORCE):
    """The :class:`~shadow_twin.simulation.contact_sensing.SensingConfig` of a ``contact_sensors``
    value ('' = none: returns None; 'hand'; or YAML {label: [body or geom globs]}) and ``min_force``
    (N). Raises ConfigError naming the problem."""
    if (text or '').strip() == HAND:
        return parse_sensing(None, min_force)
    data = yaml_mapping(text, 'contact_sensors', f"'{HAND}' or a mapping {{label: [body or geom globs]}}")
    return None if data is None else parse_sensing(data, min_force)


class ContactOutput:
    """Publishes the contact outputs of the module doc for ``sim`` on ``node``.

    Args:
        node: the bridge node (publishers).
        sim: its ``LiveSimulation``.
        settings: the bridge's settings (``contact_sensors``, ``contact_rate``, ``contact_min_force``,
            ``contact_topic_prefix``).
        stamp_of: sim time (s) -> stamp of a message (the joint states' clock).
    Raises:
        ConfigError: a bad ``contact_sensors``, or a glob that matches nothing in the model.
    """

    def __init__(self, node: Node, sim, settings, stamp_of) -> None:
        self.sim, self.stamp_of = sim, stamp_of
        self.sensing = sensors_of(settings.contact_sensors, settings.contact_min_force)
        self._reader = ContactReader(sim.model, self.sensing)
        self._model = sim.model
        self._period = 1.0 / settings.contact_rate
        self._next_due = -float('inf')
        prefix = settings.contact_topic_prefix.rstrip('/')
        self._wrench, self._slip, self._messages = {}, {}, {}
        for label in self._reader.labels:
            self._wrench[label] = node.create_publisher(WrenchStamped, f'{prefix}/{label}/wrench', 10)
            self._slip[label] = node.create_publisher(TwistStamped, f'{prefix}/{label}/slip', 10)
            frame = self._reader.frames[label]
            wrench, slip = WrenchStamped(), TwistStamped()
            wrench.header.frame_id = slip.header.frame_id = frame
            self._messages[label] = (wrench, slip)
        self._arrows = (node.create_publisher(MarkerArray, settings.contact_markers_topic, 10)
                        if settings.contact_markers_topic else None)
        self._prefix = settings.tf_prefix
        node.get_logger().info(
            f'contacts of {", ".join(f"{k} ({v})" for k, v in self._reader.frames.items())} on '
            f'{node.resolve_topic_name(prefix)}/<label>/wrench and /slip at {settings.contact_rate:g} Hz')

    def tick(self, mono: float) -> None:
        """Publish the readings when due (every ``1 / contact_rate`` s of monotonic time ``mono``)."""
        if mono < self._next_due:
            return
        # on schedule; after a stall (or at the first tick) the schedule starts again from now
        self._next_due = mono + self._period if mono - self._next_due > self._period else self._next_due + self._period
        with self.sim.lock:
            if self.sim.model is not self._model:          # reloaded or an object spawned: a new model
                self._reader = ContactReader(self.sim.model, self.sensing)
                self._model = self.sim.model
            readings = self._reader.read(self.sim.data)
            stamp = self.stamp_of(self.sim.time)
        for label, reading in readings.items():
            wrench, slip = self._messages[label]
            wrench.header.stamp = slip.header.stamp = stamp
            force, torque = wrench.wrench.force, wrench.wrench.torque
            force.x, force.y, force.z = (float(v) for v in reading.force)
            torque.x, torque.y, torque.z = (float(v) for v in reading.torque)
            slip.twist.linear.x = float(reading.slip)
            self._wrench[label].publish(wrench)
            self._slip[label].publish(slip)
        if self._arrows is not None:
            self._arrows.publish(contact_arrows(readings, self._reader.frames, self._prefix, 'contacts'))
