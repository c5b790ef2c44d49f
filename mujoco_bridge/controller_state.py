"""The simulated JTC's ``~/controller_state``: ``control_msgs/msg/JointTrajectoryControllerState``
as ros2_controllers' joint_trajectory_controller publishes it (Jazzy): ``reference`` the setpoint
sampled from the running trajectory (or the held position), ``feedback`` the measured state,
``error`` their difference, ``speed_scaling_factor`` the scaling the trajectory runs at.

Mock hardware publishes it so that a twin in shadow mode can follow the same setpoints as the
"real" controllers (``mujoco_bridge.shadow``); the stepping thread publishes it at
``controller_state_rate`` on the tick of the state it describes, stamped like the joint states.
"""

from __future__ import annotations

from control_msgs.msg import JointTrajectoryControllerState
from rclpy.node import Node

from shadow_twin.ros.conversions import doubles
from shadow_twin.simulation.live.simulation import LiveSimulation

#: The topic's last name segment, beside the controller's action (``<controller>/follow_joint_trajectory``).
TOPIC_NAME = 'controller_state'


def controller_state_topic(action_name: str) -> str:
    """``<controller>/controller_state`` for a FollowJointTrajectory action ``<controller>/<action>``
    (e.g. ``/rh_trajectory_controller/follow_joint_trajectory`` ->
    ``/rh_trajectory_controller/controller_state``)."""
    head, _, _ = action_name.rstrip('/').rpartition('/')
    return f'{head}/{TOPIC_NAME}' if head else TOPIC_NAME


class ControllerStatePublisher:
    """Publishes ``sim``'s controller state on ``topic`` every ``1 / rate`` s (see module doc).

    Args:
        node: the bridge node; ``sim``: the live simulation; ``topic``: the topic name;
        rate: Hz (> 0); ``stamp_of``: sim time (s) -> ``builtin_interfaces/Time`` of that state.
    """

    def __init__(self, node: Node, sim: LiveSimulation, topic: str, rate: float, stamp_of) -> None:
        self.sim, self.stamp_of = sim, stamp_of
        self.publisher = node.create_publisher(JointTrajectoryControllerState, topic, 10)
        self._period = 1.0 / float(rate)
        self._next_due = -float('inf')
        self._msg = JointTrajectoryControllerState()
        node.get_logger().info(f'controller state on {self.publisher.topic_name} at {rate:g} Hz')

    def tick(self, mono: float) -> None:
        """Called by the stepping thread at each tick (monotonic ``mono``, s): publish when due."""
        if mono < self._next_due:
            return
        self._next_due = max(self._next_due + self._period, mono)
        self.publish()

    def publish(self) -> None:
        """Publish the controller state now."""
        t, names, q_ref, qd_ref, q, qd = self.sim.reference()
        msg = self._msg
        msg.header.stamp = self.stamp_of(t)
        msg.joint_names = list(names)
        msg.reference.positions, msg.reference.velocities = doubles(q_ref), doubles(qd_ref)
        msg.feedback.positions, msg.feedback.velocities = doubles(q), doubles(qd)
        msg.error.positions, msg.error.velocities = doubles(q_ref - q), doubles(qd_ref - qd)
        msg.speed_scaling_factor = float(self.sim.speed_scaling)
        self.publisher.publish(msg)
