"""Record topics of a running system into a ROS 2 bag, as received (CDR bytes, no conversion).

:class:`BagRecorder` subscribes with ``raw=True`` (the serialized message, as
``ros2 bag record`` stores it), buffers between :meth:`start` and :meth:`stop`
and writes one MCAP bag with :func:`shadow_twin.calibration.recordings.recording.write_serialized_bag`
(atomically; an existing bag is never overwritten). Receive times come from the
node's clock (ns); the messages keep their own header stamps.
"""

from __future__ import annotations

import functools
import math
import struct
import threading
import time
from pathlib import Path
from typing import Sequence

from rclpy.node import Node
from rclpy.qos import QoSProfile

from shadow_twin.calibration.recordings.recording import write_serialized_bag
from shadow_twin.common.errors import ConfigError
from shadow_twin.ros.guard import guarded_subscription
from shadow_twin.ros.spinning import BackgroundSpinner


#: Message types that begin with a std_msgs/Header, whose stamps the recorder reads (:func:`header_stamp_ns`).
HEADED_TYPES = frozenset({'sensor_msgs/msg/JointState', 'nav_msgs/msg/Odometry', 'geometry_msgs/msg/TwistStamped'})
_CDR_LITTLE_ENDIAN = b'\x00\x01'


def header_stamp_ns(data: bytes) -> int | None:
    """``header.stamp`` (ns) of a serialized message that begins with a std_msgs/Header; None unless
    it is little-endian CDR (encapsulation 0x0001, what rmw_fastrtps writes on x86 and ARM). The
    stamp is the first field: int32 sec and uint32 nanosec after the 4-byte encapsulation header
    (OMG DDS-XTypes 1.3, 7.4.3.4; ROS 2 REP-2011 for rmw's plain CDR)."""
    if len(data) < 12 or data[:2] != _CDR_LITTLE_ENDIAN:
        return None
    sec, nanosec = struct.unpack_from('<iI', data, 4)
    return sec * 1_000_000_000 + nanosec


def type_name(msg_class) -> str:
    """'pkg/msg/Type' of a generated ROS 2 message class."""
    module = msg_class.__module__.split('.')   # e.g. sensor_msgs.msg._joint_state
    return f'{module[0]}/{module[1]}/{msg_class.__name__}'


class BagRecorder:
    """Buffer the messages of subscribed topics while recording; write them as a bag.

    The subscriptions live on a helper node spun by its own single-threaded executor in a
    thread: joint states arrive at 2 x 250 Hz, more than a MultiThreadedExecutor shared with
    services and timers delivers without dropping messages.

    Args:
        node: the owning node (its context, namespace, clock and name are used).
        topics: {topic: message class} subscribed at once (:meth:`subscribe` adds more).
        depth: subscription queue depth.
    """

    def __init__(self, node: Node, topics: dict[str, type], depth: int = 1000) -> None:
        self.node = node
        self.depth = depth
        #: {topic: 'pkg/msg/Type'} of the subscribed topics and of topics stored with :meth:`add`.
        self.types: dict[str, str] = {}
        #: The topics subscribed to.
        self.subscribed: list[str] = []
        self._lock = threading.Lock()
        self._messages: list[tuple[str, int, bytes]] | None = None
        self._recording: set[str] = set()           # topics buffered by the current recording
        self._last_seen: dict[str, float] = {}      # topic: monotonic s of its last message
        self._newest_stamp: dict[str, int] = {}     # topic: newest header stamp received, ns (headed types)
        self._helper = Node(f'{node.get_name()}_recorder', namespace=node.get_namespace(), context=node.context,
                            use_global_arguments=False, start_parameter_services=False)
        self.subscribe(topics)
        self._spinner = BackgroundSpinner([self._helper], 'bag recorder')

    def subscribe(self, topics: dict[str, type]) -> None:
        """Subscribe to those of ``topics`` ({topic: message class}) not subscribed yet (also while
        spinning). Raises ConfigError for a subscribed topic asked for with another type."""
        for topic, cls in topics.items():
            with self._lock:
                known = self.types.get(topic) if topic in self.subscribed else None
                if known is None:
                    self.types[topic] = type_name(cls)
                    self.subscribed.append(topic)
            if known is None:
                guarded_subscription(self._helper, cls, topic, functools.partial(self._on_message, topic),
                                     QoSProfile(depth=self.depth), raw=True)
            elif known != type_name(cls):
                raise ConfigError(f'topic {topic} is recorded as {known}; it cannot also be {type_name(cls)}')

    def _on_message(self, topic: str, data: bytes) -> None:
        stamp = header_stamp_ns(data) if self.types.get(topic) in HEADED_TYPES else None
        with self._lock:
            self._last_seen[topic] = time.monotonic()
            if stamp is not None and stamp > self._newest_stamp.get(topic, -1):
                self._newest_stamp[topic] = stamp
            if self._messages is not None and topic in self._recording:
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

    def wait_stamped(self, topics: Sequence[str], stamp_ns: int, timeout: float) -> list[str]:
        """Wait up to ``timeout`` s until each of ``topics`` whose messages carry a header has
        delivered one stamped ``stamp_ns`` or later: a topic's messages arrive in order, so by then
        everything it stamped before ``stamp_ns`` is in (however late the PC delivered it). Returns
        the topics that had not ([] when all had; topics without a header are not waited for)."""
        headed = [t for t in topics if self.types.get(t) in HEADED_TYPES]
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                behind = [t for t in headed if self._newest_stamp.get(t, -1) < stamp_ns]
            if not behind or time.monotonic() > deadline:
                return behind
            time.sleep(0.01)

    def start(self, topics: Sequence[str] | None = None) -> None:
        """Start buffering ``topics`` (default: every subscribed topic; each must be subscribed);
        drops what an earlier unfinished recording held. Raises RuntimeError for a topic not
        subscribed."""
        with self._lock:
            wanted = list(self.subscribed if topics is None else topics)
            unknown = [t for t in wanted if t not in self.subscribed]
            if unknown:
                raise RuntimeError(f'cannot record {unknown}: not subscribed')
            self._recording = set(wanted)
            self._messages = []

    def discard(self) -> None:
        """Stop buffering and drop what was buffered (a recording that failed); nothing is written."""
        with self._lock:
            self._messages = None
            self._recording = set()

    def add(self, topic: str, msgtype: str, data: bytes) -> None:
        """Store a serialized message that was not received (e.g. the goal sent), at the current time."""
        with self._lock:
            if self._messages is None:
                raise RuntimeError('add() outside a recording')
            self.types.setdefault(topic, msgtype)
            self._recording.add(topic)
            self._messages.append((topic, self.node.get_clock().now().nanoseconds, bytes(data)))

    def counts(self) -> dict[str, int]:
        """Messages buffered per recorded topic so far."""
        with self._lock:
            out = {topic: 0 for topic in self._recording}
            for topic, _, _ in self._messages or []:
                out[topic] += 1
            return out

    def stop(self, path: str | Path) -> Path:
        """Stop buffering and write the bag to ``path`` (a new MCAP bag directory).

        Raises RecordingError if ``path`` exists; RuntimeError if not recording.
        """
        with self._lock:
            messages, self._messages = self._messages, None
            recorded, self._recording = self._recording, set()
        if messages is None:
            raise RuntimeError('stop() without start()')
        messages.sort(key=lambda m: m[1])
        return write_serialized_bag(path, {t: m for t, m in self.types.items() if t in recorded}, messages)

    def destroy(self) -> None:
        """Stop the helper executor and node."""
        self._spinner.shutdown()
        self._helper.destroy_node()
