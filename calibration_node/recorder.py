"""Record topics of a running system into a ROS 2 bag, as received (CDR bytes, no conversion).

:class:`BagRecorder` subscribes with ``raw=True`` (the serialized message, as
``ros2 bag record`` stores it), buffers between :meth:`start` and :meth:`stop`
and writes one MCAP bag with :func:`shadow_twin.calibration.recording.write_serialized_bag`
(atomically; an existing bag is never overwritten). Receive times come from the
node's clock (ns); the messages keep their own header stamps.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

from rclpy.node import Node
from rclpy.qos import QoSProfile

from shadow_twin.calibration.recording import write_serialized_bag
from shadow_twin.ros.spinning import BackgroundSpinner


def type_name(msg_class) -> str:
    """'pkg/msg/Type' of a generated ROS 2 message class."""
    module = msg_class.__module__.split('.')   # e.g. sensor_msgs.msg._joint_state
    return f'{module[0]}/{module[1]}/{msg_class.__name__}'


class BagRecorder:
    """Buffer the messages of ``topics`` while recording; write them as a bag.

    The subscriptions live on a helper node spun by its own single-threaded executor in a
    thread: joint states arrive at 2 x 250 Hz, more than a MultiThreadedExecutor shared with
    services and timers delivers without dropping messages.

    Args:
        node: the owning node (its context, namespace, clock and name are used).
        topics: {topic: message class}.
        depth: subscription queue depth.
    """

    def __init__(self, node: Node, topics: dict[str, type], depth: int = 1000) -> None:
        self.node = node
        self.types = {topic: type_name(cls) for topic, cls in topics.items()}
        #: The topics subscribed to (``types`` also holds topics stored with :meth:`add`).
        self.subscribed = list(topics)
        self._lock = threading.Lock()
        self._messages: list[tuple[str, int, bytes]] | None = None
        self._last_seen: dict[str, float] = {}      # topic: monotonic s of its last message
        self._helper = Node(f'{node.get_name()}_recorder', namespace=node.get_namespace(), context=node.context,
                            use_global_arguments=False, start_parameter_services=False)
        for topic, cls in topics.items():
            self._helper.create_subscription(cls, topic, lambda data, t=topic: self._on_message(t, data),
                                             QoSProfile(depth=depth), raw=True)
        self._spinner = BackgroundSpinner([self._helper], 'bag recorder')

    def _on_message(self, topic: str, data: bytes) -> None:
        with self._lock:
            self._last_seen[topic] = time.monotonic()
            if self._messages is not None:
                self._messages.append((topic, self.node.get_clock().now().nanoseconds, data))

    def wait_flowing(self, topics: list[str], timeout: float, fresh: float = 0.1) -> list[str]:
        """Wait up to ``timeout`` s until each of ``topics`` has delivered a message within the
        last ``fresh`` s (a subscription of a process that just started may take seconds to be
        matched by DDS discovery); returns the topics still silent ([] when all flow)."""
        deadline = time.monotonic() + timeout
        while True:
            now = time.monotonic()
            with self._lock:
                silent = [t for t in topics if now - self._last_seen.get(t, -math.inf) > fresh]
            if not silent or now > deadline:
                return silent
            time.sleep(0.02)

    def start(self) -> None:
        """Start buffering (drops what an earlier unfinished recording held)."""
        with self._lock:
            self._messages = []

    def add(self, topic: str, msgtype: str, data: bytes) -> None:
        """Store a serialized message that was not received (e.g. the goal sent), at the current time."""
        with self._lock:
            if self._messages is None:
                raise RuntimeError('add() outside a recording')
            self.types.setdefault(topic, msgtype)
            self._messages.append((topic, self.node.get_clock().now().nanoseconds, bytes(data)))

    def counts(self) -> dict[str, int]:
        """Messages buffered per topic so far."""
        with self._lock:
            out = {topic: 0 for topic in self.types}
            for topic, _, _ in self._messages or []:
                out[topic] += 1
            return out

    def stop(self, path: str | Path) -> Path:
        """Stop buffering and write the bag to ``path`` (a new MCAP bag directory).

        Raises RecordingError if ``path`` exists; RuntimeError if not recording.
        """
        with self._lock:
            messages, self._messages = self._messages, None
        if messages is None:
            raise RuntimeError('stop() without start()')
        messages.sort(key=lambda m: m[1])
        return write_serialized_bag(path, self.types, messages)

    def destroy(self) -> None:
        """Stop the helper executor and node."""
        self._spinner.shutdown()
        self._helper.destroy_node()
