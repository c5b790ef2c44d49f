"""The ROS interface of the simulated mobile base (when the bridge's model has one).

* ``cmd_vel_topic`` (``geometry_msgs/TwistStamped``, as the MiR takes from software
  2.7 on): ``twist.linear.x`` (m/s) and ``twist.angular.z`` (rad/s) become the base's
  velocity command (``LiveSimulation.command_base``), sent at its header stamp (when
  set): with a model that has a command latency it takes effect that long after its
  stamp, whenever it arrives within it; a command lapses after ``cmd_vel_timeout`` s,
  then the base stops (other components of the twist, which a differential drive
  cannot follow, are ignored).
* ``odom_topic`` (``nav_msgs/Odometry``) at ``odom_rate``: the pose of the base's
  footprint in ``odom_frame`` and its twist in ``base_frame`` (REP 105), stamped like
  the joint states; with ``publish_tf`` also the transform ``odom_frame`` ->
  ``base_frame`` on ``/tf``. The bridge's stepping thread publishes it (:meth:`BaseInterface.tick`
  after the tick's joint states), not an executor timer: a timer would wake the executor
  threads 50 times a second, whose Python holds the GIL the stepping thread needs on time.

* ``~/set_entity_state`` (``simulation_interfaces/srv/SetEntityState``, the ROS simulation
  interfaces' standard, served by :mod:`mujoco_bridge.entities` with the scene's objects): puts the
  base at a pose in ``odom_frame`` (x, y and yaw of ``state.pose``; height, roll and pitch kept),
  at rest, its command dropped: the twin
  re-anchors the sim base to the real one's odometry with it. ``entity`` is ``base_frame``
  or empty; a twist or acceleration other than zero is refused (FEATURE_UNSUPPORTED), a
  non-finite or zero quaternion too (INVALID_POSE), and a frame other than ``odom_frame``
  or empty (OPERATION_FAILED); the message says why.

The sim's odometry is its exact free-body pose (no wheel slip drift), so it is the
ground truth that the real robot's wheel odometry is compared against.
"""

from __future__ import annotations

import math
import threading
import time

from geometry_msgs.msg import TransformStamped, TwistStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from simulation_interfaces.msg import Result
from simulation_interfaces.srv import SetEntityState
from tf2_msgs.msg import TFMessage

from mujoco_bridge.parameters import BridgeSettings
from shadow_twin.common.stamps import to_seconds
from shadow_twin.control.base.trajectory import yaw_from_quaternion
from shadow_twin.ros.guard import guarded_subscription
from shadow_twin.ros.message_checks import BadMessage, check_finite, check_pose, check_twist_stamped
from shadow_twin.simulation.live.simulation import LiveSimulation
from shadow_twin.simulation.mobile_base import BaseOdometry

#: Shortest interval between two warnings of late velocity commands, s.
LATE_LOG_PERIOD = 5.0


def _pose_fields(odom: BaseOdometry, position, orientation) -> None:
    """Fill a geometry_msgs Point/Vector3 and Quaternion from ``odom`` (MuJoCo's w, x, y, z)."""
    position.x, position.y, position.z = (float(v) for v in odom.position)
    w, x, y, z = (float(v) for v in odom.orientation)
    orientation.w, orientation.x, orientation.y, orientation.z = w, x, y, z


class BaseInterface:
    """Velocity commands in, odometry (and TF) out, for ``sim``'s base (see module doc).

    Args:
        node: the bridge node (publishers, the ``~/set_entity_state`` service).
        inputs: the node that takes the velocity commands (the bridge's input node).
        sim: the live simulation; its base may come and go with reloads (nothing is sent
            while the model has none).
        settings: the bridge's :class:`~mujoco_bridge.parameters.BridgeSettings` (``cmd_vel_topic``,
            ``odom_topic``, ``odom_rate`` (Hz), ``odom_frame``, ``base_frame``, ``publish_tf``).
        stamp_of: sim time (s) -> builtin_interfaces/Time of the state at that time.
        to_sim_time: builtin_interfaces/Time of a command's stamp -> sim time (s), None when unset.
        now_s: "now" on the clock of command stamps (ROS time, or sim time with ``/clock``), s.
    """

    def __init__(self, node: Node, inputs: Node, sim: LiveSimulation, settings: BridgeSettings, stamp_of,
                 to_sim_time, now_s) -> None:
        self.node, self.sim, self.stamp_of, self.to_sim_time, self.now_s = node, sim, stamp_of, to_sim_time, now_s
        self._lock = threading.Lock()       # a command and a placement of the base, one at a time
        self.odom_pub = node.create_publisher(Odometry, settings.odom_topic, 10)
        self.tf_pub = node.create_publisher(TFMessage, '/tf', 100) if settings.publish_tf else None
        guarded_subscription(inputs, TwistStamped, settings.cmd_vel_topic, self._on_command, 10,
                             check=check_twist_stamped)
        self.frames = (settings.odom_frame, settings.base_frame)
        #: Velocity commands that arrived later than the command latency after their stamps.
        self.late_commands = 0
        self._late_logged = -math.inf
        self._period = 1.0 / settings.odom_rate
        self._next_due = -float('inf')      # monotonic s of the next odometry message
        self._odom = Odometry()
        self._odom.header.frame_id = settings.odom_frame
        self._odom.child_frame_id = settings.base_frame
        self._tf = TransformStamped()
        self._tf.header.frame_id, self._tf.child_frame_id = settings.odom_frame, settings.base_frame
        base = sim.base
        node.get_logger().info(
            f'mobile base: {base.geometry.wheel_radius:g} m wheels {base.geometry.wheel_separation:g} m apart; '
            f'TwistStamped on {settings.cmd_vel_topic}'
            f'{f" (taking effect {base.command_latency:g} s after their stamps)" if base.command_latency else ""}'
            f', odometry on {self.odom_pub.topic_name} at '
            f'{settings.odom_rate:g} Hz ({settings.odom_frame} -> {settings.base_frame}'
            f'{", also on /tf" if self.tf_pub else ""})')

    def _on_command(self, msg: TwistStamped) -> None:
        """A velocity command (checked by ``check_twist_stamped``). Raises BadMessage for a stale
        one (the subscription's guard drops and reports it)."""
        with self._lock:
            self._command(msg)

    def _command(self, msg: TwistStamped) -> None:
        base = self.sim.base
        if base is None:
            return
        stamp = msg.header.stamp
        if stamp.sec or stamp.nanosec:
            age, timeout = self.now_s() - to_seconds(stamp), self.sim.base_command_timeout
            if age > timeout:
                raise BadMessage(f'header.stamp is {age:.3f} s old, more than cmd_vel_timeout {timeout:g} s: a stale '
                                 f'command (held while this bridge or the network stalled) is not driven')
        sent = self.to_sim_time(stamp)
        self.sim.command_base(msg.twist.linear.x, msg.twist.angular.z, sent)
        if base.command_latency and sent is not None:
            self._check_lateness(self.sim.time - sent, base.command_latency)

    def set_state(self, request, response):
        """``~/set_entity_state`` for the base (served by :mod:`mujoco_bridge.entities`): place it
        (see module doc)."""
        with self._lock:
            return self._set_state(request, response)

    def _set_state(self, request, response):
        odom_frame, base_frame = self.frames
        state = request.state
        result = response.result
        refusal = None
        motion = (state.twist.linear, state.twist.angular, state.acceleration.linear, state.acceleration.angular)
        try:
            check_pose(state.pose, 'state.pose')
            check_finite([c for v in motion for c in (v.x, v.y, v.z)], 'state.twist/acceleration')
        except BadMessage as exc:
            refusal = (SetEntityState.Response.INVALID_POSE, str(exc))
        if refusal is None and request.entity not in ('', base_frame):
            refusal = (Result.RESULT_NOT_FOUND, f'entity {request.entity!r}: the only entity is the base, '
                                                f'{base_frame!r} (or empty)')
        elif refusal is None and state.header.frame_id not in ('', odom_frame):
            refusal = (Result.RESULT_OPERATION_FAILED, f'header.frame_id {state.header.frame_id!r}: the base is '
                                                       f'placed in {odom_frame!r} (or empty)')
        elif refusal is None and any(c for v in motion for c in (v.x, v.y, v.z)):
            refusal = (Result.RESULT_FEATURE_UNSUPPORTED, 'the base is placed at rest: twist and acceleration '
                                                          'must be zero')
        if refusal is not None:
            result.result, result.error_message = refusal
            self.node.get_logger().warning(f'set_entity_state refused: {result.error_message}')
            return response
        p, q = state.pose.position, state.pose.orientation
        x, y, yaw = float(p.x), float(p.y), yaw_from_quaternion(q.x, q.y, q.z, q.w)
        self.sim.place_base(x, y, yaw)
        self._next_due = -float('inf')          # the new pose goes out at the next tick
        result.result = Result.RESULT_OK
        result.error_message = f'base placed at x {x:.3f} m, y {y:.3f} m, yaw {yaw:.3f} rad in {odom_frame}'
        self.node.get_logger().info(result.error_message)
        return response

    def _check_lateness(self, age: float, latency: float) -> None:
        """Count a command that arrived ``age`` s after its stamp, later than the drive's command
        ``latency`` (s): it took effect on arrival, not at its stamp plus the latency, so the base
        moved differently from a replay of the stamps; logged at most every LATE_LOG_PERIOD s."""
        if age <= latency:
            return
        self.late_commands += 1
        now = time.monotonic()
        if now - self._late_logged >= LATE_LOG_PERIOD:
            self._late_logged = now
            self.node.get_logger().warning(
                f'a velocity command arrived {age * 1e3:.0f} ms after its stamp, later than the command latency '
                f'({latency * 1e3:.0f} ms): it took effect on arrival ({self.late_commands} so late since start)')

    def tick(self, mono: float) -> None:
        """Called by the stepping thread at each tick (monotonic ``mono``, s): publish when the
        odometry is due (every ``1 / odom_rate`` s; a late tick does not bunch messages)."""
        if mono < self._next_due:
            return
        self._next_due = max(self._next_due + self._period, mono)
        self.publish()

    def publish(self) -> None:
        """Publish the base's odometry (and TF) now; nothing while the model has no base."""
        odom = self.sim.base_odometry()
        if odom is None:
            return
        msg = self._odom
        msg.header.stamp = self.stamp_of(odom.sim_time)
        _pose_fields(odom, msg.pose.pose.position, msg.pose.pose.orientation)
        msg.twist.twist.linear.x, msg.twist.twist.linear.y = odom.twist.v, odom.lateral
        msg.twist.twist.angular.z = odom.twist.omega
        self.odom_pub.publish(msg)
        if self.tf_pub is not None:
            self._tf.header.stamp = msg.header.stamp
            _pose_fields(odom, self._tf.transform.translation, self._tf.transform.rotation)
            self.tf_pub.publish(TFMessage(transforms=[self._tf]))
