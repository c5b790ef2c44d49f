"""Another driver on a base: a velocity command the twin did not send, judged by what arrives.

A node that only holds a publisher on a base's cmd_vel topic (rqt_robot_steering,
teleop_twist_keyboard, nav2's controller server and velocity smoother, all idle in a normal
lab) drives nothing; a message it sends while the twin drives that base does. So the twin
listens on each cmd_vel topic it commands and reports every message it did not send itself
(:class:`CmdVelWatch`); the base driver aborts or warns (``base.other_publishers``).

* **What is heard**: ``geometry_msgs/TwistStamped`` (the MiR bridge's and the twin's type) and
  ``geometry_msgs/Twist`` (teleop_twist_keyboard, rqt_robot_steering, nav2 unstamped), with a
  best-effort subscription (it matches reliable and best-effort publishers alike). Fast DDS
  refuses two types of one topic in one participant, so the Twist subscription has a context
  (a DDS participant) of its own. Both run on ``SingleThreadedExecutor`` threads of their own:
  rclpy's ``EventsExecutor`` (the driver's) cannot hand a callback its ``MessageInfo``. The
  check runs in these subscription callbacks, off the control loop.
* **The twin's own messages** are recognised by their writer, not their content: rclpy 7.1
  (Jazzy) gives a subscription callback no ``publisher_gid``, only the writer's
  ``publication_sequence_number`` and its ``source_timestamp``. :class:`OwnWrites` records,
  for each message the twin's publisher sends, its sequence number (the writer numbers its
  samples 1, 2, ...) and the wall-clock window of the ``publish`` call (the writer stamps the
  sample inside it); a message is the twin's when both match. Another writer's message would
  need the same sequence number and a source time inside that window of a few tens of us.
* **Naming the sender**: the ROS graph's publishers of the topic of the message's type
  (``get_publishers_info_by_topic``) other than the twin's own endpoints; one of them is named,
  several are listed ("one of"), as the message itself does not say which.

Units: s (wall clock, as DDS stamps), ns where named.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

from geometry_msgs.msg import Twist, TwistStamped
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from shadow_twin.ros.guard import CallbackGuard, guard_of
from shadow_twin.ros.spinning import spin_guarded

#: How many of the twin's own writes per topic are remembered (50 Hz: 80 s of commands).
OWN_WRITES_KEPT = 4096
#: Queue depth of the watch subscriptions (best effort).
WATCH_DEPTH = 10
#: Message types heard, by ROS type name.
WATCHED_TYPES = {'geometry_msgs/msg/TwistStamped': TwistStamped, 'geometry_msgs/msg/Twist': Twist}


class OwnWrites:
    """The messages one publisher of the twin sent: {writer sequence number: (start ns, end ns)
    of the ``publish`` call, wall clock}, the newest :data:`OWN_WRITES_KEPT`. Thread-safe."""

    def __init__(self, kept: int = OWN_WRITES_KEPT) -> None:
        self._lock = threading.Lock()
        self._kept = int(kept)
        self._windows: dict[int, tuple[int, int]] = {}
        self._count = 0

    def publish(self, publisher, msg) -> None:
        """``publisher.publish(msg)``, recorded. Call it for every message of that publisher
        (its writer numbers them in this order)."""
        with self._lock:
            start = time.time_ns()
            publisher.publish(msg)
            end = time.time_ns()
            self._count += 1
            self._windows[self._count] = (start, end)
            self._windows.pop(self._count - self._kept, None)

    def is_own(self, info: dict) -> bool:
        """True if the message with rclpy's MessageInfo ``info`` (``publication_sequence_number``,
        ``source_timestamp`` ns) is one of the recorded writes. Without a sequence number (an RMW
        that does not give one: None or 0) the source time alone is matched."""
        sequence, source = info.get('publication_sequence_number'), info.get('source_timestamp')
        if not source:
            return False
        with self._lock:
            if sequence:
                window = self._windows.get(int(sequence))
                return window is not None and window[0] <= source <= window[1]
            return any(a <= source <= b for a, b in self._windows.values())


@dataclass(frozen=True)
class ForeignMessage:
    """A velocity command on a watched topic that the twin did not send.

    Attributes:
        side: the base whose cmd_vel topic it came on ('real', 'sim').
        topic: the topic.
        msg_type: its ROS type, e.g. ``geometry_msgs/msg/Twist``.
        sent_s: its writer's source timestamp, s since the epoch (wall clock).
        received_s: when it arrived here, s since the epoch.
        senders: the nodes that may have sent it (``/namespace/name``): the graph's publishers
            of that type on the topic besides the twin's; empty when none is left in the graph.
    """

    side: str
    topic: str
    msg_type: str
    sent_s: float
    received_s: float
    senders: tuple[str, ...]

    def describe(self) -> str:
        """E.g. ``a geometry_msgs/msg/Twist on /cmd_vel from /teleop_twist_keyboard``."""
        if len(self.senders) == 1:
            sender = f'from {self.senders[0]}'
        elif self.senders:
            sender = f'from one of {", ".join(self.senders)}'
        else:
            sender = 'from a publisher no longer in the ROS graph'
        return f'a {self.msg_type} on {self.topic} {sender}'


class CmdVelWatch:
    """Reports the messages on the bases' cmd_vel topics that the twin did not send (module doc).

    Args:
        context: the twin's context (the participant of its TwistStamped publishers).
        node_name: a base name for the watch's nodes (``<node_name>_watch``, ``..._watch_twist``).
        namespace: their namespace.
        topics: {side: resolved cmd_vel topic}.
        own: {side: the :class:`OwnWrites` of the twin's publisher on that topic}.
        own_nodes: the twin's nodes publishing there, as ``/namespace/name`` (never named as senders).
        on_foreign: called with a :class:`ForeignMessage` (on a watch thread) for each message
            the twin did not send, while ``wanted(side)`` is True (a run drives that base).
        wanted: callable(side) -> bool.
    """

    def __init__(self, context: Context, node_name: str, namespace: str, topics: dict[str, str],
                 own: dict[str, OwnWrites], own_nodes: set[str], on_foreign: Callable[[ForeignMessage], None],
                 wanted: Callable[[str], bool]) -> None:
        self.topics, self._own, self._own_nodes = dict(topics), own, set(own_nodes)
        self._on_foreign, self._wanted = on_foreign, wanted
        qos = QoSProfile(depth=WATCH_DEPTH, reliability=ReliabilityPolicy.BEST_EFFORT)
        self._context = Context()
        self._context.init(domain_id=context.get_domain_id())
        self.nodes = [Node(f'{node_name}_watch', namespace=namespace, context=context, use_global_arguments=False,
                           start_parameter_services=False),
                      Node(f'{node_name}_watch_twist', namespace=namespace, context=self._context,
                           use_global_arguments=False, start_parameter_services=False)]
        self._own_nodes.update(_full_name(n.get_namespace(), n.get_name()) for n in self.nodes)
        for node, (type_name, msg_type) in zip(self.nodes, WATCHED_TYPES.items()):
            guard = guard_of(node)
            for side, topic in self.topics.items():
                callback = guard.wrap(f'{topic} ({type_name})', self._heard)
                node.create_subscription(msg_type, topic, lambda msg, info, s=side, t=type_name, c=callback:
                                         c(s, t, info), qos)
        self._stop = threading.Event()
        self._executors, self._threads = [], []
        for node in self.nodes:
            executor = SingleThreadedExecutor(context=node.context)
            executor.add_node(node)
            thread = threading.Thread(target=spin_guarded, name=f'{node.get_name()}',
                                      args=(executor, CallbackGuard(node.get_logger()), node.get_name(), self._stop),
                                      daemon=True)
            thread.start()
            self._executors.append(executor)
            self._threads.append(thread)

    def _heard(self, side: str, type_name: str, info: dict) -> None:
        if not self._wanted(side):
            return
        if type_name == 'geometry_msgs/msg/TwistStamped' and self._own[side].is_own(info):
            return
        received = time.time()
        topic = self.topics[side]
        self._on_foreign(ForeignMessage(side, topic, type_name, info.get('source_timestamp', 0) * 1e-9, received,
                                        self.senders(topic, type_name)))

    def senders(self, topic: str, type_name: str) -> tuple[str, ...]:
        """The graph's publishers of ``type_name`` on ``topic`` besides the twin's, sorted; the
        graph of the participant that heard the message (it has discovered the writer)."""
        node = self.nodes[list(WATCHED_TYPES).index(type_name)]
        names = {_full_name(e.node_namespace, e.node_name) for e in node.get_publishers_info_by_topic(topic)
                 if e.topic_type == type_name}
        return tuple(sorted(names - self._own_nodes))

    def shutdown(self) -> None:
        """Stop the watch threads, destroy its nodes and its own context."""
        self._stop.set()
        for thread in self._threads:      # each ends within its 0.1 s spin timeout
            thread.join(timeout=1.0)
        for executor in self._executors:
            executor.shutdown(timeout_sec=0.5)
        for node in self.nodes:
            node.destroy_node()
        self._context.try_shutdown()


#: The node name rmw gives an endpoint whose node it has not learnt yet (ROS graph info lags DDS discovery).
UNKNOWN_NODE = '_NODE_NAME_UNKNOWN_'


def _full_name(namespace: str, name: str) -> str:
    if name == UNKNOWN_NODE:
        return 'a node whose name is not discovered yet'
    return f'{namespace.rstrip("/")}/{name}'
