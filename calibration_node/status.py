"""Progress of the calibration node: ``~/status`` (latched DiagnosticStatus), /diagnostics, log lines.

The status is a phase (idle, starting, recording, preparing, calibrating, installing,
done, refused, failed), a one-line message, a level (OK/WARN/ERROR) and key-value
details (run_dir, trajectory, evaluations, budget, best_objective, search_model (what the search
simulates: the reduced model's degrees of freedom, issue 39), fit and hold-out
errors, model, report) that ``shadow-twin calibrate-live`` and rqt_robot_monitor show.
"""

from __future__ import annotations

import threading

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile

#: Details kept when a new run starts (the others belong to the previous run).
_KEPT_ON_START = ('run_dir',)


class StatusBoard:
    """Hold, publish and log the node's status.

    Args:
        node: the owning node (its name labels the status; ``~/status`` is on it).
    """

    def __init__(self, node: Node) -> None:
        self.node = node
        self._lock = threading.Lock()
        self._status = {'phase': 'idle', 'message': 'waiting for ~/calibrate', 'level': DiagnosticStatus.OK}
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.status_pub = node.create_publisher(DiagnosticStatus, '~/status', latched)
        self.diagnostics_pub = node.create_publisher(DiagnosticArray, '/diagnostics', 10)

    @property
    def phase(self) -> str:
        with self._lock:
            return self._status['phase']

    @property
    def message(self) -> str:
        with self._lock:
            return self._status['message']

    def set(self, phase: str, message: str, level=DiagnosticStatus.OK, log: bool = True, **details) -> None:
        """Set and publish the status; log the message (at the level's severity) if ``log``.
        ``details`` (None values ignored) add to those of the current run."""
        with self._lock:
            kept = {k: v for k, v in self._status.items() if k not in ('phase', 'message', 'level')}
            if phase == 'starting':
                kept = {k: v for k, v in kept.items() if k in _KEPT_ON_START}
            self._status = {**kept, **{k: v for k, v in details.items() if v is not None},
                            'phase': phase, 'message': message, 'level': level}
        if log:
            line = f'[{phase}] {message}'
            logger = self.node.get_logger()
            if level == DiagnosticStatus.OK:
                logger.info(line)
            elif level == DiagnosticStatus.WARN:
                logger.warning(line)
            else:
                logger.error(line)
        self.publish()

    def msg(self) -> DiagnosticStatus:
        """The status as a ``diagnostic_msgs/DiagnosticStatus`` (phase and details as values)."""
        with self._lock:
            status = dict(self._status)
        msg = DiagnosticStatus(level=status.pop('level'), name=f'{self.node.get_name()}: calibration',
                               message=status.pop('message'), hardware_id='shadow_twin')
        msg.values = [KeyValue(key=str(k), value=str(v)) for k, v in status.items()]
        return msg

    def publish(self) -> None:
        """Publish on ``~/status`` and /diagnostics."""
        msg = self.msg()
        self.status_pub.publish(msg)
        array = DiagnosticArray(status=[msg])
        array.header.stamp = self.node.get_clock().now().to_msg()
        self.diagnostics_pub.publish(array)
