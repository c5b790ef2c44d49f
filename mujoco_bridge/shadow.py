"""Shadow mode: the sim follows the setpoints the real robots' own controllers follow, whoever
drives them (MoveIt, a teach pendant, a navigation stack), so that what differs between sim and
robot is model error, not a motion the sim never saw.

Sources, by preference (each a list of topics; a component uses the first it has):

* **arm and hand:** the real controllers' ``~/controller_state``
  (``control_msgs/msg/JointTrajectoryControllerState``): the ``reference`` (positions, velocities)
  is followed from its stamp (:meth:`LiveSimulation.follow`); where a controller publishes no
  state, the trajectory it is sent on its ``~/joint_trajectory`` topic (``trajectory_msgs/
  JointTrajectory``), run on its own clock from its stamp (:meth:`LiveSimulation.follow_trajectory`);
  as a last resort, the real ``joint_states``, tracked by the sim's own servo;
* **base:** the ``geometry_msgs/TwistStamped`` the MiR receives on ``/cmd_vel``, through the sim's
  wheel law (the same as for the sim's own commands); where no command is observable, the twist of
  the robot's odometry (``nav_msgs/Odometry``).

**Timing**, one rule for every source: a setpoint applies at its stamp. A state is moved on from its
stamp to the sim's now at its velocity (at most ``FOLLOW_COAST``, 0.3 s; then the joints
hold, so a source that goes silent leaves the sim standing); a trajectory runs on its stamped clock;
a base command acts as the MiR's does, on arrival (plus the model's command latency from its stamp).

**Joining**: however far a new state is from what the sim followed (the first message, a source
that resumes after a silence), the sim's target joins it within the joints' speed and acceleration
limits (:func:`~shadow_twin.simulation.following.follow_target`); a controller state's ``feedback``
(the measured positions) lets the sim hold the pose the robot holds (a slow, bounded integral).

**Bad input** never moves anything: a message with NaN or inf or a malformed one is dropped, with one
warning line per source (the callback guard's, at most one per 5 s with the count). Each stamp is
judged against this node's clock and its source's history: one more than :data:`STAMP_LEAD_LIMIT`
ahead of now, more than :data:`STAMP_AGE_LIMIT` old, or going back from the source's last accepted
one is dropped, and only accepted stamps become that history (a stamp from the future does not
make the good ones after it look old). An odometry twist beyond the base's limits
(:class:`~shadow_twin.control.base.trajectory.BaseLimits`, the MiR250's 2 m/s and 1.5 rad/s, with
:data:`ODOMETRY_SLACK`) is dropped. Each such glitch is logged once per source and kind (one line,
then counted in :attr:`ShadowSources.glitches`); joints the sim does not know are left out, with one
warning per source naming them.
"""

from __future__ import annotations

import math

from control_msgs.msg import JointTrajectoryControllerState
from geometry_msgs.msg import TwistStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg

from mujoco_bridge.parameters import BridgeSettings
from shadow_twin.common.errors import BadMessage, ShadowTwinError
from shadow_twin.common.stamps import to_seconds
from shadow_twin.control import jtc
from shadow_twin.control.base.trajectory import BaseLimits
from shadow_twin.ros.guard import guarded_subscription
from shadow_twin.ros.message_checks import check_finite, check_joint_state, check_odometry, check_stamp, \
    check_twist_stamped
from shadow_twin.simulation.live.simulation import LiveSimulation

#: s: a stamp further ahead of this node's clock is a bad stamp, dropped. The followed state is moved
#: on from its stamp at its acceleration for at most FOLLOW_EXTRAPOLATION (0.1 s), so the clocks of the
#: robots' PCs and the twin's must agree to well within that anyway (chrony or NTP on a lab network:
#: about 1 ms).
STAMP_LEAD_LIMIT = 0.1
#: s: a message whose stamp is older than this when it arrives is dropped (a state that old is not
#: where the robot is; the source's next messages are followed).
STAMP_AGE_LIMIT = 1.0
#: An odometry twist up to this factor over the base's limits is measurement noise; beyond, a glitch.
ODOMETRY_SLACK = 1.05


def check_controller_state(msg) -> None:
    """A ``JointTrajectoryControllerState`` whose reference can be followed: stamp, unique joint
    names, ``reference.positions`` one per joint, ``reference.velocities`` empty or one per joint,
    all finite. Raises BadMessage."""
    check_stamp(msg.header.stamp)
    names = list(msg.joint_names)
    if len(set(names)) != len(names):
        raise BadMessage(f'joint_names lists {sorted({n for n in names if names.count(n) > 1})} more than once')
    ref = msg.reference
    if len(ref.positions) != len(names):
        raise BadMessage(f'reference.positions has {len(ref.positions)} values for {len(names)} joint_names')
    if len(ref.velocities) not in (0, len(names)):
        raise BadMessage(f'reference.velocities has {len(ref.velocities)} values for {len(names)} joint_names')
    check_finite(ref.positions, 'reference.positions')
    check_finite(ref.velocities, 'reference.velocities')


class ShadowSources:
    """The subscriptions of shadow mode (see module doc) on the bridge's input node.

    Args:
        node: the bridge node (its logger); ``inputs``: the node that takes the messages.
        sim: the live simulation.
        settings: the bridge's :class:`~mujoco_bridge.parameters.BridgeSettings`: its ``shadow_*``
            topics (the read-only ``shadow.*`` parameters; empty = that kind of source is not used).
        to_sim_time: ``builtin_interfaces/Time`` -> sim time (s), None for an unset stamp.
        now_s: now on the clock of the stamps, s (for the JTC rules of a trajectory's checks).
    """

    def __init__(self, node: Node, inputs: Node, sim: LiveSimulation, settings: BridgeSettings, to_sim_time,
                 now_s) -> None:
        def topics(value) -> list[str]:
            return [str(t).strip() for t in value if str(t).strip()]
        self.node, self.sim, self.to_sim_time, self.now_s = node, sim, to_sim_time, now_s
        self._last_stamp: dict[str, int] = {}        # ns, the latest accepted stamp of each source
        self._warned_unknown: set[str] = set()
        self.limits = BaseLimits()
        #: {(topic, kind of glitch): messages dropped}, e.g. ``('/odom', 'twist beyond the base limits')``.
        self.glitches: dict[tuple[str, str], int] = {}
        #: Topics followed, by kind (for the log and the diagnostics).
        self.topics: dict[str, list[str]] = {}
        qos = QoSProfile(depth=10)
        kinds = (('controller_state', JointTrajectoryControllerState, check_controller_state, self._on_controller_state,
                  topics(settings.shadow_controller_state_topics)),
                 ('joint_trajectory', JointTrajectoryMsg, None, self._on_trajectory,
                  topics(settings.shadow_joint_trajectory_topics)),
                 ('joint_states', JointState, check_joint_state, self._on_joint_state,
                  topics(settings.shadow_joint_states_topics)),
                 ('cmd_vel', TwistStamped, check_twist_stamped, self._on_twist,
                  topics([settings.shadow_cmd_vel_topic])),
                 ('odom', Odometry, check_odometry, self._on_odometry, topics([settings.shadow_odom_topic])))
        for kind, msg_type, check, callback, topics in kinds:
            for topic in topics:
                guarded_subscription(inputs, msg_type, topic, self._bind(topic, callback), qos, check=check)
                self.topics.setdefault(kind, []).append(topic)
        if self.topics:
            node.get_logger().info('shadow mode: the sim follows ' + '; '.join(
                f'{kind} {", ".join(topics)}' for kind, topics in self.topics.items()))

    @property
    def active(self) -> bool:
        """True when any shadow source is configured."""
        return bool(self.topics)

    @staticmethod
    def _bind(topic: str, callback):
        return lambda msg: callback(topic, msg)

    # -- checks shared by the sources ---------------------------------------------------------------
    def glitch(self, topic: str, kind: str, detail: str) -> None:
        """Count a message of ``topic`` dropped for ``kind`` of glitch; the first of each kind per
        source is logged (one line: ``detail`` says what was wrong), later ones only counted."""
        key = (topic, kind)
        self.glitches[key] = self.glitches.get(key, 0) + 1
        if self.glitches[key] == 1:
            self.node.get_logger().warning(f'shadow source {topic}: {detail}: dropped ({kind}; reported once per '
                                           f'source, further ones are counted)')

    def _stamp(self, topic: str, msg) -> float | None | bool:
        """Sim time of ``msg``'s stamp (None: unset, taken as now), or False when the stamp is bad
        (reported by :meth:`glitch`): more than :data:`STAMP_LEAD_LIMIT` ahead of this node's clock,
        more than :data:`STAMP_AGE_LIMIT` behind it, or going back from the source's last accepted
        stamp (compared as stamped, before any mapping to sim time)."""
        stamp = msg.header.stamp
        ns = int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)
        if not ns:
            return None
        ahead = to_seconds(stamp) - float(self.now_s())
        if ahead > STAMP_LEAD_LIMIT:
            self.glitch(topic, 'stamp ahead of the clock', f'header.stamp is {ahead:.3f} s ahead of this node\'s '
                        f'clock (more than {STAMP_LEAD_LIMIT} s)')
            return False
        if -ahead > STAMP_AGE_LIMIT:
            self.glitch(topic, 'stamp too old', f'header.stamp is {-ahead:.3f} s old on arrival (more than '
                        f'{STAMP_AGE_LIMIT} s)')
            return False
        last = self._last_stamp.get(topic)
        if last is not None and ns < last:
            self.glitch(topic, 'stamp goes back', f'header.stamp goes back {(last - ns) * 1e-9:.3f} s from the '
                        f'source\'s last accepted one')
            return False
        self._last_stamp[topic] = ns
        return self.to_sim_time(stamp)

    def _known(self, topic: str, names) -> list[str]:
        """The names the sim drives; the others are warned about once per source."""
        known = [n for n in names if n in self.sim.controlled_joints]
        unknown = [n for n in names if n not in self.sim.controlled_joints]
        if unknown and topic not in self._warned_unknown:
            self._warned_unknown.add(topic)
            self.node.get_logger().warning(f'shadow source {topic}: joints {unknown} are not driven by the sim '
                                           f'model: left out (reported once)')
        return known

    # -- arm and hand -------------------------------------------------------------------------------
    def _on_controller_state(self, topic: str, msg) -> None:
        names, feedback = list(msg.joint_names), msg.feedback.positions
        measured = feedback if len(feedback) == len(names) and all(map(math.isfinite, feedback)) else None
        self._follow_state(topic, msg, names, msg.reference.positions, msg.reference.velocities, measured)

    def _follow_state(self, topic: str, msg, names: list[str], positions, velocities, measured) -> None:
        """Follow the state (rad, rad/s: ``velocities`` empty for none) of ``names`` from ``msg``'s stamp;
        ``measured``: the robot's positions (rad), None for none."""
        at = self._stamp(topic, msg)
        if at is False:
            return
        known = set(self._known(topic, names))
        wanted = {n: float(q) for n, q in zip(names, positions) if n in known}
        rates = {n: float(v) for n, v in zip(names, velocities) if n in known} if len(velocities) else None
        real = None if measured is None else {n: float(q) for n, q in zip(names, measured) if n in known}
        if wanted:
            self.sim.follow(wanted, rates, at, source=topic, measured=real)

    def _on_trajectory(self, topic: str, msg) -> None:
        at = self._stamp(topic, msg)
        if at is False:
            return
        names = self._known(topic, list(msg.joint_names))
        if not names:
            return
        try:
            trajectory = jtc.validate_goal_msg(msg, list(msg.joint_names), {}, self.now_s(), True)
        except (jtc.GoalRejected, ShadowTwinError) as exc:
            raise BadMessage(str(exc)) from None
        self.sim.follow_trajectory(trajectory, at, source=topic)

    def _on_joint_state(self, topic: str, msg) -> None:
        self._follow_state(topic, msg, list(msg.name), msg.position, msg.velocity, msg.position)

    # -- base ---------------------------------------------------------------------------------------
    def _on_twist(self, topic: str, msg) -> None:
        at = self._stamp(topic, msg)
        if at is not False and self.sim.base is not None:
            self.sim.command_base(msg.twist.linear.x, msg.twist.angular.z, at)

    def _on_odometry(self, topic: str, msg) -> None:
        """The odometry's twist, within the base's limits, as the base's command; one beyond them
        (a measurement the MiR250 cannot make) is dropped as a glitch."""
        twist = msg.twist.twist
        v, omega = float(twist.linear.x), float(twist.angular.z)
        if abs(v) > self.limits.max_speed * ODOMETRY_SLACK or abs(omega) > self.limits.max_yaw_rate * ODOMETRY_SLACK:
            self.glitch(topic, 'twist beyond the base limits', f'twist {v:.3g} m/s, {omega:.3g} rad/s is beyond the '
                        f'base\'s limits ({self.limits.max_speed} m/s, {self.limits.max_yaw_rate} rad/s)')
            return
        at = self._stamp(topic, msg)
        if at is not False and self.sim.base is not None:
            self.sim.command_base(v, omega, at)
