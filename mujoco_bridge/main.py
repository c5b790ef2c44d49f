"""Console entry point of the ``mujoco_bridge`` node.

Usage::

    mujoco_bridge --ros-args --params-file config/mujoco_bridge.yaml
    # mock hardware: the same node under another name with other parameters
    mujoco_bridge --ros-args -r __node:=mock_hardware --params-file config/mock_hardware.yaml

(or ``python -m mujoco_bridge.main ...``). Exit status: 0 after a normal
shutdown (Ctrl-C, SIGTERM), 1 when the node cannot start (the reason is logged:
a model that does not compile, a bad gains/joint-map/overrides file, a
parameter of the wrong type).
"""

from __future__ import annotations

import sys

import rclpy
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.logging import get_logger

from shadow_twin.errors import ShadowTwinError

from .bridge_node import NODE_NAME, MujocoBridge

#: Executor threads: action goals run their execute loops on executor threads
#: (a preempted and a new goal at once), besides services, timers and the goal intake.
EXECUTOR_THREADS = 6


def main(args: list[str] | None = None) -> int:
    """Run the bridge until shutdown; returns the exit status."""
    rclpy.init(args=args)
    try:
        node = MujocoBridge()
    except (ShadowTwinError, InvalidParameterTypeException, InvalidParameterValueException, ValueError) as exc:
        get_logger(NODE_NAME).fatal(f'cannot start: {" ".join(str(exc).split())}')
        rclpy.try_shutdown()
        return 1
    executor = MultiThreadedExecutor(num_threads=EXECUTOR_THREADS)
    executor.add_node(node)
    node.start()
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node.context.ok():
            node.get_logger().info('shutting down')
        node.shutdown()
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
