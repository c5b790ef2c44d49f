"""A node holding a publisher on a base's cmd_vel topic, as a lab has them (test/cli/test_base_publishers.py,
benchmarks/base_publishers.py): idle (rqt_robot_steering, nav2's controller server: a publisher,
nothing sent) or, after SIGUSR1, a teleop sending at ``rate`` Hz.

Run as its own process (``python test/support/cmd_vel_publisher.py --ros-args -r __node:=NAME -p type:=Twist
-p topic:=/cmd_vel -p rate:=10.0``). Parameters: ``type`` (``Twist`` or ``TwistStamped``), ``topic``,
``rate`` (Hz; 0 = idle whatever it is told), ``speed`` (the command's linear.x, m/s). It prints
``ready`` once its publisher exists and, for each message, ``sent <ns>``: the wall-clock time
(``time.time_ns``) just before ``publish``. SIGINT/SIGTERM: exit 0.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from geometry_msgs.msg import Twist, TwistStamped  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402

from shadow_twin.ros.conversions import time_msg_ns  # noqa: E402
from shadow_twin.ros.spinning import run_node  # noqa: E402

TYPES = {'Twist': Twist, 'TwistStamped': TwistStamped}


class CmdVelPublisher(Node):
    """See module doc."""

    def __init__(self) -> None:
        super().__init__('cmd_vel_publisher')
        kind = self.declare_parameter('type', 'Twist').value
        self.stamped = kind == 'TwistStamped'
        self.rate = float(self.declare_parameter('rate', 0.0).value)
        self.speed = float(self.declare_parameter('speed', 0.2).value)
        self.pub = self.create_publisher(TYPES[kind], self.declare_parameter('topic', '/cmd_vel').value, 10)
        self._go = threading.Event()
        signal.signal(signal.SIGUSR1, lambda *_: self._go.set())
        if self.rate > 0:
            self.create_timer(1.0 / self.rate, self._send)
        print('ready', flush=True)

    def _send(self) -> None:
        if not self._go.is_set():
            return
        now = time.time_ns()
        msg = TwistStamped() if self.stamped else Twist()
        twist = msg.twist if self.stamped else msg
        twist.linear.x = self.speed
        if self.stamped:
            msg.header.stamp = time_msg_ns(now)
        self.pub.publish(msg)
        print(f'sent {now}', flush=True)


def sent_times(output: str) -> list[float]:
    """The send times (s, wall clock) a process of this module printed, in order."""
    return [int(line.split()[1]) * 1e-9 for line in output.splitlines() if line.startswith('sent ')]


if __name__ == '__main__':
    sys.exit(run_node(CmdVelPublisher, 'cmd_vel_publisher', SingleThreadedExecutor))
