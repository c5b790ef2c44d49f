"""The ``twin_monitor`` node: how far the simulation is from the robot, joint by joint and base.

Subscribes the robot's joint states on ``real_joint_states_topics`` (``[/joint_states]``; in the
cell ``[/joint_states, /rh/joint_states]``: the UR driver's at 125 Hz and the hand driver's at 250
Hz) and the sim's on ``sim_joint_states_topic`` (``/sim/joint_states``), all
``sensor_msgs/JointState``, and publishes (logic in ``shadow_twin.monitoring.joint.error``):

* at ``rate`` Hz on ``joint_error_topic`` (``/twin/joint_error``) a
  ``sensor_msgs/JointState``: ``name`` = the joints in the real and the sim streams,
  real topic by real topic (in the order of ``real_joint_states_topics``), each in
  the order of its message; ``position`` = sim - real (rad); ``velocity`` = sim - real
  (rad/s); ``effort`` empty. Each real topic is compared on its own stamps: its
  sample is the newest one, or the newest one the sim has already reached when the
  sim's newest stamp is older, and the sim is interpolated at that same stamp
  (time-aligned, not latest against latest; a real sample ahead of all sim samples
  by at most ``max_stamp_gap`` s is compared with the newest sim sample). The message
  holds the newest comparison of every topic (one whose newest comparison is
  ``stale_after`` s older than the newest is left out) and ``header.stamp`` = the
  newest of their real stamps: with one topic, exactly the compared sample's stamp;
  with several, the other topics' joints are as of their own last stamp, at most one
  of their periods older while they flow. Why per topic and not one merged real
  state: two drivers at 125 and 250 Hz never stamp together, and a merged state
  would hold the slower topic's joints for up to 8 ms while comparing them at the
  faster one's stamps; compared on their own stamps every error is exact in time,
  and the RMS windows in ``/diagnostics`` hold only such exact comparisons. Stamps
  strictly increase; nothing is published without a new real sample. A joint on
  several real topics is taken from the first topic listed that has it.
* with ``real_odom_topic`` and ``sim_odom_topic`` set (``nav_msgs/Odometry``, the
  MiR bridge's ``/odom``, ``odom`` -> ``base_footprint``, and the sim bridge's
  ``/sim/odom``, ``sim/odom`` -> ``sim/base_footprint``, both 50 Hz; the odom frames
  coincide at start; logic in ``shadow_twin.monitoring.base_error``), at the same
  timer on ``base_error_topic`` (``/twin/base_error``) one
  ``geometry_msgs/Vector3Stamped`` per real odometry message (each compared once the
  sim has reached its stamp): ``vector.x``, ``vector.y`` = sim - real position
  in the odom frame (m), ``vector.z`` = sim - real yaw (rad, wrapped into [-pi, pi));
  ``header.stamp`` = the real odometry's stamp (the sim pose interpolated at it, as
  for the joints, except that a real pose ahead of the sim's newest waits for the
  sim unless ``base_max_stamp_gap`` > 0: at 50 Hz a held sim pose could be 20 ms old,
  8 mm at 0.4 m/s), ``header.frame_id`` = the real odometry's frame (``odom``). Why this
  message: one stamped message keeps the three errors of one time together (two
  ``std_msgs/Float64`` carry no stamp, so the time alignment would be lost), it is
  a standard message rqt_plot plots field by field (``/twin/base_error/vector/x``),
  and ``geometry_msgs`` is already a dependency; z holding an angle is the one
  liberty (``geometry_msgs/Pose2D`` has no header, a ``PoseStamped`` hides yaw in a
  quaternion). Without odometry topics (the hand-only twin) none of this exists.
* every ``diagnostics_period`` s on ``/diagnostics`` a ``diagnostic_msgs/DiagnosticArray``:
  one ``DiagnosticStatus`` per joint (name ``twin_monitor: <joint>``, hardware_id
  ``shadow_twin``, message ``RMS error 0.012 rad over 2.0 s``, values
  ``rms_position_error_rad``, ``rms_velocity_error_rad_s``,
  ``max_abs_position_error_rad``, ``samples``, ``window_s``, ``warn_rad``,
  ``error_rad``), a summary ``twin_monitor: sim vs real`` with the worst joint's
  level, naming it, and with odometry ``twin_monitor: base`` (message ``RMS error
  0.012 m, 0.004 rad over 2.0 s``, values ``rms_position_error_m``,
  ``rms_yaw_error_rad``, ``max_position_error_m``, ``max_abs_yaw_error_rad``,
  ``samples``, ``window_s``, ``position_warn_m``, ``position_error_m``,
  ``yaw_warn_rad``, ``yaw_error_rad``, the topics and the frames). Levels by RMS
  error over the last ``window`` s: a joint's position error, OK <
  ``thresholds.warn`` <= WARN < ``thresholds.error`` <= ERROR (per-joint-glob
  ``threshold_overrides``, e.g. stiffer arm joints); the base's the worse of its
  position (``base_thresholds.position.*``, m) and yaw (``base_thresholds.yaw.*``,
  rad) levels; STALE while a stream it depends on has been silent for
  ``stale_after`` s or has sent nothing yet (the summary: any stream).
* per joint in ``/diagnostics`` also the *lag share* of its error over ``window``
  (``lag_share``, ``lag_s``, ``rms_position_error_lag_removed_rad``; maths in
  ``shadow_twin.monitoring.lag``, shifts up to ``lag.max_lag`` s): near 1, the sim does what the
  robot does but late; near 0, the model differs.
* the *drift watch* (``drift.*``; ``shadow_twin.ros.monitor.drift``): a long-window trend of each
  joint's error over moving time against its baseline after the last calibration, persisted in
  ``drift.state_file``, as the status ``twin_monitor: drift`` (WARN naming drifted joints) in
  ``/diagnostics`` and latched on ``drift.topic`` (``/twin/drift``); ``~/reset_drift_baseline``.
* *shadow sources* (``shadow_sources``; ``shadow_twin.ros.monitor.shadow``): the topics the sim
  follows in shadow mode; one silent for ``shadow_source_timeout`` s makes the joints it carries
  (or the base) STALE, and the summary; the status ``twin_monitor: shadow sources`` lists them.
* the *external-force watch* (``effort.*``; ``.effort``): each arm joint's real effort against the
  inverse dynamics of its real motion, ``/twin/effort_error`` and ``twin_monitor: external force:
  <joint>`` (at once on a change); *contacts* (``contacts.*``; ``.contacts``): per fingertip and palm,
  sim-vs-real contact agreement and slip warnings, ``twin_monitor: contact: <label>``; *objects*
  (``objects.*``; ``.objects``): per scene object, the sim-vs-real pose error (m, rad) of each motion-capture
  pose on ``/twin/object_error/<name>`` and over ``objects.window`` in ``twin_monitor: object <name>``.
* with ``publish_aggregated`` (default true), at the same time on ``aggregated_topic``
  (``/diagnostics_agg``, what rqt_robot_monitor shows) the same statuses as diagnostic_aggregator
  would publish them under ``aggregated_path`` (``config/diagnostic_aggregator.yaml``; layout in
  :func:`aggregated`), where the C++ aggregator is not installed; false where it runs.
* with ``view.enabled`` (``.view``): the real robots through the sim's model on ``/tf`` (``real/<body>``) and
  as a ghost coloured by each link's sim-real error on ``/real/markers``.

All callbacks of the node run on one single-threaded executor (the joint-state and
odometry subscriptions and the timers). Parameters: ``config/twin_monitor.yaml`` (the
hand), ``config/twin_monitor_cell.yaml`` (the cell); thresholds, base thresholds,
window, stale_after, max_stamp_gap, base_max_stamp_gap, lag.max_lag, drift.ratio, drift.min_error,
drift.min_motion and shadow_source_timeout may be changed at runtime.

Run: ``twin_monitor --ros-args --params-file config/twin_monitor.yaml`` (or
``python -m shadow_twin.ros.monitor.node ...``). Exit status 0 after Ctrl-C / SIGTERM,
1 on a bad configuration (one fatal log line naming the problem).
"""

from __future__ import annotations

import sys
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Vector3Stamped
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState

from shadow_twin.common.stamps import to_seconds
from shadow_twin.monitoring import base_error
from shadow_twin.monitoring.joint import error as monitor
from shadow_twin.monitoring.joint.samples import positions_of
from shadow_twin.monitoring.lag import LagWindow
from shadow_twin.monitoring.shadow_sources import BASE
from shadow_twin.ros import parameters as ros_params
from shadow_twin.ros.conversions import doubles
from shadow_twin.ros.guard import guarded_subscription, guarded_timer
from shadow_twin.ros.message_checks import check_joint_state, check_odometry
from shadow_twin.ros.monitor.aggregated import aggregated, level_byte
from shadow_twin.ros.monitor.drift import DriftWatch
from shadow_twin.ros.monitor.contacts import ContactMonitor
from shadow_twin.ros.monitor.effort import EffortMonitor
from shadow_twin.ros.monitor.objects import ObjectMonitor
from shadow_twin.ros.monitor.parameters import (BASE_THRESHOLD_PARAMS, DRIFT_PARAMS, EFFORT_PARAMS, SPECS,
                                                THRESHOLD_PARAMS, MonitorSettings, invalid_change, read_settings)
from shadow_twin.ros.monitor.shadow import ShadowWatch
from shadow_twin.ros.monitor.view import RealView
from shadow_twin.ros.monitor.values import base_values, joint_values
from shadow_twin.ros.spinning import events_executor, run_node

NODE_NAME = 'twin_monitor'
HARDWARE_ID = 'shadow_twin'
DIAGNOSTICS_TOPIC = '/diagnostics'
#: Seconds of each stream kept for the time alignment.
HISTORY_AGE = 1.0
#: Name of the base's status after the node's name (``twin_monitor: base``).
BASE_STATUS = 'base'


class TwinMonitor(Node):
    """The twin monitor node (see module doc).

    Args:
        node_name: default node name.
        kwargs: passed to ``rclpy.node.Node`` (``context``, ``parameter_overrides``...).
    Raises:
        ConfigError: a parameter of the wrong type or out of range, invalid thresholds
            (the message names the parameter, joint glob and values), no real joint state
            topic, or only one of the two odometry topics.
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        ros_params.declare(self, SPECS)
        self.real_topics = ros_params.real_joint_state_topics(self)
        #: The current parameters, typed, with the thresholds and odometry topics (read again on a change).
        self.settings: MonitorSettings = read_settings(self._param)
        s = self.settings
        self.sim_topic = s.sim_joint_states_topic
        self.monitor = monitor.SimRealMonitor(
            s.thresholds, window=s.window, stale_after=s.stale_after, max_gap=s.max_stamp_gap,
            history_age=HISTORY_AGE, real_labels=self.real_topics, sim_label=self.sim_topic)
        self.odom_topics = s.odom_topics
        self.base = None if self.odom_topics is None else base_error.BaseMonitor(
            s.base_thresholds, window=s.window, stale_after=s.stale_after, max_gap=s.base_max_stamp_gap,
            history_age=HISTORY_AGE, real_label=self.odom_topics[0], sim_label=self.odom_topics[1])
        self.lag_windows = [LagWindow(self.monitor.window) for _ in self.real_topics]
        self.max_lag = s.lag_max_lag
        self.drift = DriftWatch(self, self._status) if s.drift_enabled else None
        self.shadow = ShadowWatch(self, self._status)
        self.monitor.on_compare = self._on_compare
        self.add_on_set_parameters_callback(self._validate_change)
        self.add_post_set_parameters_callback(self._after_set)
        self._names_cache: dict = {}
        self._frames = ['', '']             # header.frame_id of the real and the sim odometry
        self._warned_globs = False

        self.error_pub = self.create_publisher(JointState, s.joint_error_topic, 10)
        self.base_error_pub = (None if self.base is None else
                               self.create_publisher(Vector3Stamped, s.base_error_topic, 10))
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, 10)
        self.effort = EffortMonitor(self, self._status, self.diagnostics_pub.publish)
        self.contacts = ContactMonitor(self, self._status, self.diagnostics_pub.publish) if s.contacts_enabled else None
        self.objects = ObjectMonitor(self, self._status) if s.objects_enabled else None
        self.view = RealView(self) if s.view_enabled else None      # the real robots on /tf, their ghost
        self.aggregated_path = s.aggregated_path
        self.aggregated_pub = (self.create_publisher(DiagnosticArray, s.aggregated_topic, 10)
                               if s.publish_aggregated else None)
        qos = QoSProfile(depth=10)
        for k, topic in enumerate(self.real_topics):
            guarded_subscription(self, JointState, topic, lambda m, k=k: self._on_state(k, m), qos,
                                 check=check_joint_state)
        guarded_subscription(self, JointState, self.sim_topic, lambda m: self._on_state('sim', m), qos,
                             check=check_joint_state)
        if self.base is not None:
            for k, topic in enumerate(self.odom_topics):
                guarded_subscription(self, Odometry, topic, lambda m, k=k: self._on_odometry(k, m), qos,
                                     check=check_odometry)
        guarded_timer(self, 1.0 / s.rate, self._publish_error, 'joint error')
        guarded_timer(self, s.diagnostics_period, self._publish_diagnostics, 'diagnostics')
        th = self.monitor.thresholds
        base = ''
        if self.base is not None:
            bt = self.base.thresholds
            base = (f'; base: {self.odom_topics[1]} vs {self.odom_topics[0]}, sim - real on '
                    f'{s.base_error_topic} (warn {bt.position.warn:g} m / {bt.yaw.warn:g} rad, error '
                    f'{bt.position.error:g} m / {bt.yaw.error:g} rad)')
        self.get_logger().info(        # its ready line (shadow_twin.cli.up.READY_LINES): it serves from here
            f'ready: comparing {self.sim_topic} with {", ".join(self.real_topics)}: sim - real on '
            f'{s.joint_error_topic} at {s.rate:g} Hz, {DIAGNOSTICS_TOPIC} every {s.diagnostics_period:g} s '
            f'(RMS over {self.monitor.window:g} s, warn {th.default.warn:g} rad, error {th.default.error:g} rad'
            + (f', {len(th.overrides)} overrides' if th.overrides else '') + ')' + base
            + (f', aggregated at {self.aggregated_path!r} on {s.aggregated_topic}' if self.aggregated_pub else ''))

    # -- parameters ----------------------------------------------------------------------------
    def _param(self, name: str):
        return self.get_parameter(name).value

    def _validate_change(self, params) -> SetParametersResult:
        """Refuse values that are invalid together (``parameters.declare`` checks each value alone)."""
        problem = invalid_change(self._param, {param.name: param.value for param in params})
        return SetParametersResult(successful=problem is None, reason=problem or '')

    def _after_set(self, params) -> None:
        names = {param.name for param in params}
        self.settings = s = read_settings(self._param)
        if names & set(THRESHOLD_PARAMS):
            self.monitor.thresholds = s.thresholds
            self._warned_globs = False
        parts = [self.monitor] + ([self.base] if self.base is not None else [])
        if self.base is not None and names & set(BASE_THRESHOLD_PARAMS):
            self.base.thresholds = s.base_thresholds
        for part in parts:
            if 'window' in names:
                part.window = s.window
            if 'stale_after' in names:
                part.stale_after = s.stale_after
        if 'window' in names:
            for lag in self.lag_windows:
                lag.window = self.monitor.window
        if 'lag.max_lag' in names:
            self.max_lag = s.lag_max_lag
        if 'shadow_source_timeout' in names:
            self.shadow.sources.timeout = s.shadow_source_timeout
        if self.drift is not None and names & set(DRIFT_PARAMS):
            self.drift.set_ratio(*(s.value(n) for n in DRIFT_PARAMS))
        if names & set(EFFORT_PARAMS):
            self.effort.set_settings(s)
        if 'max_stamp_gap' in names:
            self.monitor.max_gap = s.max_stamp_gap
        if self.base is not None and 'base_max_stamp_gap' in names:
            self.base.max_gap = s.base_max_stamp_gap
        self.get_logger().info(f'parameters set: {sorted(names)}')

    # -- streams ---------------------------------------------------------------------------------
    def _names(self, which, names: list) -> tuple:
        """The message's names as a tuple, the same object while they do not change."""
        last_list, last_tuple = self._names_cache.get(which, ((), ()))
        if names == last_list:
            return last_tuple
        out = tuple(names)
        self._names_cache[which] = (names, out)
        return out

    def _on_state(self, which, msg: JointState) -> None:
        """A JointState of the sim (``which`` 'sim') or of real topic number ``which``."""
        if which != 'sim':
            self.effort.on_state(msg)
        names = self._names(which, msg.name)
        try:
            sample = monitor.JointSample.make(to_seconds(msg.header.stamp), names,
                                              np.asarray(msg.position, dtype=float), msg.velocity,
                                              stamp=msg.header.stamp)
        except ValueError as exc:
            topic = self.sim_topic if which == 'sim' else self.real_topics[which]
            self.get_logger().warning(f'ignoring a message on {topic}: {exc}', throttle_duration_sec=5.0)
            return
        arrival = time.monotonic()
        if which == 'sim':
            self.monitor.add_sim(sample, arrival)
        else:
            self.monitor.add_real(sample, arrival, which)

    def _on_compare(self, k: int, real: monitor.JointSample, sim: monitor.JointSample,
                    error: monitor.JointError) -> None:
        """Each comparison of real stream ``k``: into its lag window and the drift watch."""
        if self.max_lag > 0 and error.names:
            real_pos = positions_of(real, error.names)
            self.lag_windows[k].add(error.t, error.names, real_pos, real_pos + error.position)
        if self.drift is not None:
            self.drift.add(real, error, k)

    def _on_odometry(self, which: int, msg: Odometry) -> None:
        """An odometry of the robot (``which`` 0) or of the sim (1)."""
        pose, q = msg.pose.pose.position, msg.pose.pose.orientation
        try:
            planar = base_error.planar_pose(to_seconds(msg.header.stamp), pose.x, pose.y, q.x, q.y, q.z, q.w,
                                            stamp=msg.header.stamp)
        except ValueError as exc:
            self.get_logger().warning(f'ignoring a message on {self.odom_topics[which]}: {exc}',
                                      throttle_duration_sec=5.0)
            return
        self._frames[which] = msg.header.frame_id
        arrival = time.monotonic()
        if which == 0:
            self.base.add_real(planar, arrival)
        else:
            self.base.add_sim(planar, arrival)

    # -- outputs ---------------------------------------------------------------------------------
    def _publish_error(self) -> None:
        error = self.monitor.update()
        if error is not None:
            msg = JointState(name=list(error.names), position=doubles(error.position),
                             velocity=doubles(error.velocity))
            msg.header.stamp = error.stamp
            self.error_pub.publish(msg)
        if self.base is not None:
            for base in self.base.update():
                out = Vector3Stamped()
                out.header.stamp, out.header.frame_id = base.stamp, self._frames[0]
                out.vector.x, out.vector.y, out.vector.z = base.x, base.y, base.yaw
                self.base_error_pub.publish(out)

    def diagnostics(self, now: float | None = None) -> DiagnosticArray:
        """The DiagnosticArray of the current state (``now``: monotonic s, default now)."""
        now = time.monotonic() if now is None else now
        report = self.monitor.report(now)
        if report.joints and not self._warned_globs:
            unused = self.monitor.thresholds.unused_globs(j.name for j in report.joints)
            if unused:
                self.get_logger().warning(f'threshold_overrides globs set no compared joint (no match, or an '
                                          f'earlier glob takes them): {unused}')
            self._warned_globs = True
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        window = f'{self.monitor.window:g}'
        shares = {}
        if self.max_lag > 0:
            for lag in self.lag_windows:
                for name, share in lag.shares(self.max_lag).items():
                    shares.setdefault(name, share)
        drift = {} if self.drift is None else {j.name: j for j in self.drift.trend.report()}
        stale = self.shadow.stale_joints()
        level = report.level
        for joint in report.joints:
            values = joint_values(joint, self.monitor.window, shares.get(joint.name), drift.get(joint.name))
            joint_level, message = joint.level, joint.message
            if joint.name in stale:
                joint_level, message = monitor.STALE, f'{stale[joint.name]} (last: {message})'
            msg.status.append(self._status(joint_level, joint.name, message, values))
        if self.base is not None:
            base_report = self.base.report(now)
            base = self._status(base_report.level, BASE_STATUS, base_report.message,
                                base_values(base_report, self.base.window, self.odom_topics, self._frames))
            if BASE in stale:
                base.level, base.message = level_byte(monitor.STALE), f'{stale[BASE]} (last: {base.message})'
            msg.status.append(base)
        summary_values = {'worst_joint': report.worst or '', 'joints': str(len(report.joints)),
                          'real_topics': ', '.join(self.real_topics), 'sim_topic': self.sim_topic, 'window_s': window}
        message = report.message
        if stale:
            level = monitor.STALE
            message = f'shadow source(s) silent: {len(stale)} joints STALE; {message}'
        msg.status.append(self._status(level, 'sim vs real', message, summary_values))
        if self.shadow:
            msg.status.append(self.shadow.status())
        if self.drift is not None:
            msg.status.append(self.drift.status(list(drift.values())))
        for part in (self.effort, self.contacts, self.objects):
            if part is not None:
                msg.status.extend(part.statuses(now))
        return msg

    def _status(self, level: int, name: str, message: str, values: dict) -> DiagnosticStatus:
        return DiagnosticStatus(level=level_byte(level), name=f'{self.get_name()}: {name}', message=message,
                                hardware_id=HARDWARE_ID, values=[KeyValue(key=k, value=v) for k, v in values.items()])

    def destroy_node(self) -> None:
        """Save the drift state, then destroy the node."""
        if self.drift is not None and self.drift.dirty:
            self.drift.save()
        super().destroy_node()

    def _publish_diagnostics(self) -> None:
        msg = self.diagnostics()
        self.diagnostics_pub.publish(msg)
        if self.aggregated_pub is not None:
            agg = DiagnosticArray(status=aggregated(msg.status, self.aggregated_path, self.get_name()))
            agg.header.stamp = msg.header.stamp
            self.aggregated_pub.publish(agg)


def main(args: list[str] | None = None) -> int:
    """Console entry point ``twin_monitor``: run the node until shutdown; returns the exit status."""
    return run_node(TwinMonitor, NODE_NAME, events_executor, args)


if __name__ == '__main__':
    sys.exit(main())
