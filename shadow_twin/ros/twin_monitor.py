"""The ``twin_monitor`` node: how far the simulation is from the robot, joint by joint.

Subscribes ``real_joint_states_topic`` (``/joint_states``) and
``sim_joint_states_topic`` (``/sim/joint_states``), both ``sensor_msgs/JointState``
(about 250 Hz each), and publishes (logic in ``shadow_twin.monitoring.joint_error``):

* at ``rate`` Hz on ``joint_error_topic`` (``/twin/joint_error``) a
  ``sensor_msgs/JointState``: ``name`` = the joints in both streams, in the order of
  the real message; ``position`` = sim - real (rad); ``velocity`` = sim - real
  (rad/s); ``effort`` empty; ``header.stamp`` = the stamp of the real sample
  compared, and the sim state is interpolated at that same stamp (time-aligned, not
  latest against latest). The real sample is the newest one, or the newest one the
  sim has already reached when the sim's newest stamp is older; a real sample ahead
  of all sim samples by at most ``max_stamp_gap`` s is compared with the newest sim
  sample. Stamps strictly increase; nothing is published without a new real sample.
* every ``diagnostics_period`` s on ``/diagnostics`` a ``diagnostic_msgs/DiagnosticArray``:
  one ``DiagnosticStatus`` per joint (name ``twin_monitor: <joint>``, hardware_id
  ``shadow_twin``, message ``RMS error 0.012 rad over 2.0 s``, values
  ``rms_position_error_rad``, ``rms_velocity_error_rad_s``,
  ``max_abs_position_error_rad``, ``samples``, ``window_s``, ``warn_rad``,
  ``error_rad``) and a summary ``twin_monitor: sim vs real`` with the worst joint's
  level, naming it. Levels by RMS position error over the last ``window`` s:
  OK < ``thresholds.warn`` <= WARN < ``thresholds.error`` <= ERROR (per-joint-glob
  ``threshold_overrides``); STALE while a stream has been silent for ``stale_after``
  s or has sent nothing yet.
* with ``publish_aggregated`` (default true), at the same time on ``aggregated_topic``
  (``/diagnostics_agg``, the topic rqt_robot_monitor shows) the same statuses as
  diagnostic_aggregator's ``aggregator_node`` would publish them with a GenericAnalyzer
  at ``aggregated_path`` (``/shadow_twin/sim vs real``) and ``remove_prefix:
  [twin_monitor]`` (``config/diagnostic_aggregator.yaml``): ``/shadow_twin/sim vs
  real/rh_FFJ3`` per joint, ``/shadow_twin/sim vs real/sim vs real`` (the summary), the
  analyzer's header ``/shadow_twin/sim vs real`` and the group header ``/shadow_twin``
  (see :func:`aggregated`). This stands in for the C++ aggregator where it is not
  installed; set it false where diagnostic_aggregator runs (one publisher per topic).

All callbacks of the node run on one single-threaded executor (two 250 Hz
subscriptions and the timers). Parameters: ``config/twin_monitor.yaml``;
thresholds, window, stale_after and max_stamp_gap may be changed at runtime.

Run: ``twin_monitor --ros-args --params-file config/twin_monitor.yaml`` (or
``python -m shadow_twin.ros.twin_monitor ...``). Exit status 0 after Ctrl-C / SIGTERM,
1 on a bad configuration (one fatal log line naming the problem).
"""

from __future__ import annotations

import sys
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import SetParametersResult
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.stamps import to_seconds
from shadow_twin.monitoring import joint_error as monitor
from shadow_twin.ros import parameters as bridge_params
from shadow_twin.ros.conversions import doubles
from shadow_twin.ros.spinning import run_node

NODE_NAME = 'twin_monitor'
HARDWARE_ID = 'shadow_twin'
DIAGNOSTICS_TOPIC = '/diagnostics'
#: diagnostic_aggregator's header messages by level (``valToMsg`` of its status_item.hpp).
AGGREGATED_MESSAGES = {monitor.OK: 'OK', monitor.WARN: 'Warning', monitor.ERROR: 'Error', monitor.STALE: 'Stale'}
#: Seconds of each stream kept for the time alignment.
HISTORY_AGE = 1.0
Spec = bridge_params.Spec


def _path_parts(path: str) -> list[str]:
    """The names of an aggregated path (``/a/b`` -> [a, b]). Raises ConfigError if there are none."""
    parts = [p for p in path.split('/') if p]
    if not parts:
        raise ConfigError(f'an aggregated path needs at least one name, as /shadow_twin/sim vs real; got {path!r}')
    return parts


SPECS = tuple(s for s in bridge_params.SPECS if s.name == 'diagnostics_period') + (
    Spec('real_joint_states_topic', '/joint_states', 'sensor_msgs/JointState of the robot.', read_only=True),
    Spec('sim_joint_states_topic', '/sim/joint_states', 'sensor_msgs/JointState of the sim.', read_only=True),
    Spec('joint_error_topic', '/twin/joint_error', 'sensor_msgs/JointState of sim minus real (rad, rad/s), '
         'stamped with the real sample compared.', read_only=True),
    Spec('rate', 50.0, 'Rate of joint error messages, Hz.', read_only=True, bounds=(0.1, 1000.0)),
    Spec('window', 2.0, 'Sliding window of the RMS errors in /diagnostics, s.', bounds=(0.01, 600.0)),
    Spec('stale_after', 0.5, 'A stream silent for this long makes every joint STALE, s.', bounds=(0.01, 3600.0)),
    Spec('max_stamp_gap', 0.05, 'A real sample ahead of every sim sample by at most this much is compared '
         'with the newest sim sample (else it waits for the sim), s.', bounds=(0.0, 0.5)),
    Spec('thresholds.warn', monitor.DEFAULT_WARN, 'RMS position error from which a joint is WARN, rad (> 0).',
         bounds=(0.0, 1e6)),
    Spec('thresholds.error', monitor.DEFAULT_ERROR, 'RMS position error from which a joint is ERROR, rad '
         '(>= thresholds.warn).', bounds=(0.0, 1e6)),
    Spec('threshold_overrides', '', 'YAML {joint_glob: {warn: rad, error: rad}}: per-joint thresholds (the '
         'first matching glob wins; a missing key takes the default), e.g. "rh_TH*: {warn: 0.1, error: 0.3}".'),
    Spec('publish_aggregated', True, 'Also publish the statuses on aggregated_topic as diagnostic_aggregator '
         'would (for rqt_robot_monitor without the C++ aggregator); false where diagnostic_aggregator runs.',
         read_only=True),
    Spec('aggregated_topic', '/diagnostics_agg', 'diagnostic_msgs/DiagnosticArray of the aggregated statuses '
         '(rqt_robot_monitor shows /diagnostics_agg).', read_only=True),
    Spec('aggregated_path', '/shadow_twin/sim vs real', "Where the statuses sit in the aggregated tree: "
         "diagnostic_aggregator's base path and GenericAnalyzer path, '/'-separated.", read_only=True,
         check=_path_parts),
)
_THRESHOLD_PARAMS = ('thresholds.warn', 'thresholds.error', 'threshold_overrides')


def level_byte(level: int) -> bytes:
    """``DiagnosticStatus.level`` (a byte) of a ``shadow_twin.monitoring.joint_error`` level."""
    return bytes([int(level)])


def _chaff_removed(name: str, prefix: str) -> str:
    """diagnostic_aggregator's ``removeLeadingNameChaff`` on a status name: ``prefix``, then one
    ':', then spaces off its start (``twin_monitor: rh_FFJ3`` -> ``rh_FFJ3``)."""
    if prefix and name.startswith(prefix):
        name = name[len(prefix):]
    if name.startswith(':'):
        name = name[1:]
    return name.lstrip(' ')


def aggregated(statuses: list[DiagnosticStatus], path: str, prefix: str) -> list[DiagnosticStatus]:
    """``statuses`` as diagnostic_aggregator's ``aggregator_node`` publishes them on
    ``/diagnostics_agg`` when its base path and one GenericAnalyzer (``startswith`` and
    ``remove_prefix: [prefix]``) make ``path``, and the analyzer's items do not time out
    (they are all new). Sources: ros/diagnostics, diagnostic_aggregator
    ``generic_analyzer_base.hpp`` (``report``), ``generic_analyzer.cpp``, ``status_item.hpp``,
    ``analyzer_group.cpp``.

    In publishing order:

    * the analyzer's header, named ``path`` (``/shadow_twin/sim vs real``): the worst level of
      its items (STALE only when all are or there are none, else ERROR), message ``OK``,
      ``Warning``, ``Error`` or ``Stale``, one value per item (original name: message);
    * the items, sorted by original name, named ``path/<name>`` with ``prefix``, a ':' and spaces
      taken off the name's start and '/' in it replaced by ' ' (``/shadow_twin/sim vs
      real/rh_FFJ3``), level, message, hardware id and values as they are;
    * one group header per enclosing path, innermost first (``/shadow_twin``): level and message
      as above from the one group below, one value (that group's last name: its message).

    rqt_robot_monitor builds its tree from these names: it splits them at '/'.
    Raises ConfigError for a path without names.
    """
    parts = _path_parts(path)
    items = sorted(statuses, key=lambda st: st.name)
    levels = [st.level[0] for st in items]
    level = max(levels, default=monitor.OK)
    if all(lv == monitor.STALE for lv in levels):          # also without items, as the aggregator
        level = monitor.STALE
    elif level == monitor.STALE:
        level = monitor.ERROR
    header = DiagnosticStatus(level=level_byte(level), name='/' + '/'.join(parts),
                              message=AGGREGATED_MESSAGES[level],
                              values=[KeyValue(key=st.name, value=st.message) for st in items])
    out = [header]
    for st in items:
        name = _chaff_removed(st.name.replace('/', ' '), prefix.replace('/', ' '))
        out.append(DiagnosticStatus(level=st.level, name=f'{header.name}/{name}', message=st.message,
                                    hardware_id=st.hardware_id, values=list(st.values)))
    child = header
    for depth in range(len(parts) - 1, 0, -1):
        child = DiagnosticStatus(level=child.level, name='/' + '/'.join(parts[:depth]), message=child.message,
                                 values=[KeyValue(key=parts[depth], value=child.message)])
        out.append(child)
    return out


class TwinMonitor(Node):
    """The twin monitor node (see module doc).

    Args:
        node_name: default node name.
        kwargs: passed to ``rclpy.node.Node`` (``context``, ``parameter_overrides``...).
    Raises:
        ConfigError: a parameter of the wrong type or out of range, or invalid
            thresholds (the message names the parameter, joint glob and values).
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        bridge_params.declare(self, SPECS)
        p = self._param
        self.real_topic, self.sim_topic = p('real_joint_states_topic'), p('sim_joint_states_topic')
        self.monitor = monitor.SimRealMonitor(
            self._thresholds({}), window=float(p('window')), stale_after=float(p('stale_after')),
            max_gap=float(p('max_stamp_gap')), history_age=HISTORY_AGE, real_label=self.real_topic,
            sim_label=self.sim_topic)
        self.add_on_set_parameters_callback(self._validate_change)
        self.add_post_set_parameters_callback(self._after_set)
        self._names_cache: dict[str, tuple] = {'real': ((), ()), 'sim': ((), ())}
        self._warned_globs = False

        self.error_pub = self.create_publisher(JointState, p('joint_error_topic'), 10)
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC, 10)
        self.aggregated_path = p('aggregated_path')
        self.aggregated_pub = (self.create_publisher(DiagnosticArray, p('aggregated_topic'), 10)
                               if p('publish_aggregated') else None)
        qos = QoSProfile(depth=10)
        self.create_subscription(JointState, self.real_topic, lambda m: self._on_state('real', m), qos)
        self.create_subscription(JointState, self.sim_topic, lambda m: self._on_state('sim', m), qos)
        self.create_timer(1.0 / float(p('rate')), self._publish_error)
        self.create_timer(float(p('diagnostics_period')), self._publish_diagnostics)
        th = self.monitor.thresholds
        self.get_logger().info(
            f'comparing {self.sim_topic} with {self.real_topic}: sim - real on {p("joint_error_topic")} at '
            f'{p("rate"):g} Hz, {DIAGNOSTICS_TOPIC} every {p("diagnostics_period"):g} s (RMS over '
            f'{self.monitor.window:g} s, warn {th.default.warn:g} rad, error {th.default.error:g} rad'
            + (f', {len(th.overrides)} overrides' if th.overrides else '') + ')'
            + (f', aggregated at {self.aggregated_path!r} on {p("aggregated_topic")}' if self.aggregated_pub else ''))

    # -- parameters ----------------------------------------------------------------------------
    def _param(self, name: str):
        return self.get_parameter(name).value

    def _thresholds(self, changed: dict) -> monitor.Thresholds:
        """Thresholds from the current parameters with ``changed`` {name: value} applied."""
        values = {name: changed.get(name, self._param(name)) for name in _THRESHOLD_PARAMS}
        return monitor.Thresholds.from_config(values['thresholds.warn'], values['thresholds.error'],
                                              values['threshold_overrides'])

    def _validate_change(self, params) -> SetParametersResult:
        """Refuse thresholds that are invalid together (``parameters.declare`` checks each value alone)."""
        changed = {param.name: param.value for param in params}
        if any(name in changed for name in _THRESHOLD_PARAMS):
            try:
                self._thresholds(changed)
            except ConfigError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def _after_set(self, params) -> None:
        names = {param.name for param in params}
        if names & set(_THRESHOLD_PARAMS):
            self.monitor.thresholds = self._thresholds({})
            self._warned_globs = False
        if 'window' in names:
            self.monitor.window = float(self._param('window'))
        if 'stale_after' in names:
            self.monitor.stale_after = float(self._param('stale_after'))
        if 'max_stamp_gap' in names:
            self.monitor.max_gap = float(self._param('max_stamp_gap'))
        self.get_logger().info(f'parameters set: {sorted(names)}')

    # -- streams ---------------------------------------------------------------------------------
    def _names(self, which: str, names: list) -> tuple:
        """The message's names as a tuple, the same object while they do not change."""
        last_list, last_tuple = self._names_cache[which]
        if names == last_list:
            return last_tuple
        out = tuple(names)
        self._names_cache[which] = (names, out)
        return out

    def _on_state(self, which: str, msg: JointState) -> None:
        names = self._names(which, msg.name)
        try:
            sample = monitor.JointSample.make(to_seconds(msg.header.stamp), names,
                                              np.asarray(msg.position, dtype=float), msg.velocity,
                                              stamp=msg.header.stamp)
        except ValueError as exc:
            self.get_logger().warning(f'ignoring a message on {self.real_topic if which == "real" else self.sim_topic}:'
                                      f' {exc}', throttle_duration_sec=5.0)
            return
        arrival = time.monotonic()
        if which == 'real':
            self.monitor.add_real(sample, arrival)
        else:
            self.monitor.add_sim(sample, arrival)

    # -- outputs ---------------------------------------------------------------------------------
    def _publish_error(self) -> None:
        error = self.monitor.update()
        if error is None:
            return
        msg = JointState(name=list(error.names), position=doubles(error.position),
                         velocity=doubles(error.velocity))
        msg.header.stamp = error.stamp
        self.error_pub.publish(msg)

    def diagnostics(self, now: float | None = None) -> DiagnosticArray:
        """The DiagnosticArray of the current state (``now``: monotonic s, default now)."""
        report = self.monitor.report(time.monotonic() if now is None else now)
        if report.joints and not self._warned_globs:
            unused = self.monitor.thresholds.unused_globs(j.name for j in report.joints)
            if unused:
                self.get_logger().warning(f'threshold_overrides globs set no compared joint (no match, or an '
                                          f'earlier glob takes them): {unused}')
            self._warned_globs = True
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        window = f'{self.monitor.window:g}'
        for joint in report.joints:
            st = joint.stats
            values = {
                'rms_position_error_rad': '' if st is None else f'{st.rms_position:.6f}',
                'rms_velocity_error_rad_s': '' if st is None else f'{st.rms_velocity:.6f}',
                'max_abs_position_error_rad': '' if st is None else f'{st.max_abs_position:.6f}',
                'samples': '0' if st is None else str(st.samples),
                'window_s': window,
                'warn_rad': f'{joint.threshold.warn:g}',
                'error_rad': f'{joint.threshold.error:g}',
            }
            msg.status.append(DiagnosticStatus(
                level=level_byte(joint.level), name=f'{self.get_name()}: {joint.name}', message=joint.message,
                hardware_id=HARDWARE_ID, values=[KeyValue(key=k, value=v) for k, v in values.items()]))
        summary_values = {
            'worst_joint': report.worst or '',
            'joints': str(len(report.joints)),
            'real_topic': self.real_topic,
            'sim_topic': self.sim_topic,
            'window_s': window,
        }
        msg.status.append(DiagnosticStatus(
            level=level_byte(report.level), name=f'{self.get_name()}: sim vs real', message=report.message,
            hardware_id=HARDWARE_ID, values=[KeyValue(key=k, value=v) for k, v in summary_values.items()]))
        return msg

    def _publish_diagnostics(self) -> None:
        msg = self.diagnostics()
        self.diagnostics_pub.publish(msg)
        if self.aggregated_pub is not None:
            agg = DiagnosticArray(status=aggregated(msg.status, self.aggregated_path, self.get_name()))
            agg.header.stamp = msg.header.stamp
            self.aggregated_pub.publish(agg)


def main(args: list[str] | None = None) -> int:
    """Console entry point ``twin_monitor``: run the node until shutdown; returns the exit status."""
    return run_node(TwinMonitor, NODE_NAME, SingleThreadedExecutor, args)


if __name__ == '__main__':
    sys.exit(main())
