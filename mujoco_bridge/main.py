"""Console entry point of the ``mujoco_bridge`` node.

Usage::

    mujoco_bridge --ros-args --params-file config/mujoco_bridge.yaml
    # mock hardware: the same node under another name with other ROS parameters
    mujoco_bridge --ros-args -r __node:=mock_hardware --params-file config/mock_hardware.yaml

(or ``python -m mujoco_bridge.main ...``). Exit status: 0 after a normal
shutdown (Ctrl-C, SIGTERM), 1 when the node cannot start (the reason is logged:
a model that does not compile, a bad gains/joint-map/overrides file, a
ROS parameter of the wrong type).
"""

from __future__ import annotations

import sys

from rclpy.executors import MultiThreadedExecutor

from mujoco_bridge.bridge_node import NODE_NAME, MujocoBridge
from shadow_twin.ros.spinning import run_node

#: Executor threads: action goals run their execute loops on executor threads
#: (a preempted and a new goal at once), besides services, timers and the goal intake.
EXECUTOR_THREADS = 6
#: The interpreter's GIL switch interval in the bridge, s (Python's default: 0.005). The stepping
#: thread, woken on time by the kernel (SCHED_FIFO), still needs the GIL; a thread holding it
#: (an executor thread taking a message) gives it up only when asked and this interval has
#: passed, so the default let a tick start up to 5 ms late. At 0.5 ms the sim bridge's period
#: jitter p99 during a cell goal fell from 2.9 ms to below 2 ms (``benchmarks/idle.py``).
GIL_SWITCH_INTERVAL = 0.0005


def _start(node: MujocoBridge) -> None:
    """Start stepping, then log the ready line (``ready: stepping ...``: its topics, services and
    action are served; ``shadow-twin up`` waits for it, ``shadow_twin.cli.up.READY_LINES``)."""
    node.start()
    node.get_logger().info(f'ready: stepping, joint states on {node.joint_state_pub.topic_name}')


def _stop(node: MujocoBridge) -> None:
    if node.context.ok():
        node.get_logger().info('shutting down')
    node.shutdown()


def main(args: list[str] | None = None) -> int:
    """Run the bridge until shutdown; returns the exit status."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    return run_node(MujocoBridge, NODE_NAME, lambda: MultiThreadedExecutor(num_threads=EXECUTOR_THREADS), args,
                    on_start=_start, on_stop=_stop)


if __name__ == '__main__':
    sys.exit(main())
