"""The twin monitor's drift watch: ROS side of :mod:`shadow_twin.monitoring.drift` (a part of
``shadow_twin.ros.monitor.node``).

* Fed every sim-real comparison of the monitor (:meth:`DriftWatch.add`).
* ``drift.topic`` (``/twin/drift``): ``diagnostic_msgs/DiagnosticArray`` holding the one
  ``twin_monitor: drift`` status, latched (transient_local, depth 1: a late subscriber gets the
  last one), published on each closed bucket and each baseline change; the same status is in
  the monitor's ``/diagnostics``. Level WARN naming the drifted joints (``drifted_joints``:
  comma-separated), else OK; values per joint ``<joint>``: ``trend 0.0123 rad, baseline 0.0050
  rad (x2.46), 12 buckets``, and the settings and the baseline's origin.
* Baseline: the first full ``drift.window`` after the first start (nothing persisted), or after
  a calibration was installed: the sim bridge's ``/diagnostics`` status named ``drift.bridge_status``
  (``mujoco_bridge: physics``) has a ``model_path`` value, which the calibration node's install
  changes (a new versioned model, then ``~/reload``); a model of other content
  (:func:`~shadow_twin.monitoring.drift.model_identity`) restarts trend and baseline.
  ``~/reset_drift_baseline`` (``std_srvs/Trigger``) sets the baseline to the current trend.
* ``drift.state_file`` (JSON, :func:`shadow_twin.monitoring.drift.save_state`): written at most
  every ``drift.save_period`` s on a closed bucket, at once on a baseline change, and at shutdown
  when anything changed;
  reloaded at start; a file that is not a drift state (malformed, random bytes, nested too deeply,
  too large, NaN, a directory, unreadable) is reported in one error line, moved aside to
  ``<name>.corrupt-<UTC time>`` and the watch starts fresh (:func:`shadow_twin.monitoring.drift.load_state`).
* With ``drift.auto_calibrate`` (off by default: a live calibration moves the robot): once joints
  have drifted, the next idle window (robot and sim still for ``drift.idle_time`` s of stamps,
  :class:`~shadow_twin.monitoring.drift.IdleWatch`) calls ``drift.calibrate_service`` (the
  calibration node's ``~/calibrate``, ``std_srvs/Trigger``) once; again only after a new baseline.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_srvs.srv import Trigger

from shadow_twin.monitoring import drift
from shadow_twin.monitoring.joint.samples import positions_of
from shadow_twin.monitoring.thresholds import OK, WARN
from shadow_twin.ros.guard import guarded_service, guarded_subscription
from shadow_twin.ros.monitor.parameters import drift_settings

#: Name of the drift status after the node's name (``twin_monitor: drift``).
DRIFT_STATUS = 'drift'
MODEL_KEY = 'model_path'


def default_state_file(node_name: str) -> Path:
    """``$ROS_HOME/shadow_twin/drift/<node_name>.json`` (``$ROS_HOME`` defaults to ``~/.ros``)."""
    home = Path(os.environ.get('ROS_HOME') or Path.home() / '.ros')
    return home / 'shadow_twin' / 'drift' / f'{node_name}.json'


class DriftWatch:
    """The drift watch of ``node`` (its parameters ``drift.*``; see the module doc).

    Args:
        node: the twin monitor node (its typed ``settings`` read).
        status: builds a ``DiagnosticStatus`` from (level, name, message, values).
    Raises:
        ConfigError: inconsistent ``drift.*`` settings (window < bucket...).
    """

    def __init__(self, node, status) -> None:
        self.node, self._status = node, status
        s = node.settings
        self.settings = drift_settings(s.value)
        self.path = Path(s.drift_state_file or default_state_file(node.get_name())).expanduser()
        self.save_period = s.drift_save_period
        self.bridge_status = s.drift_bridge_status.strip()
        self.trend = self._load()
        self.idle = drift.IdleWatch(s.drift_idle_time)
        self.auto_calibrate = s.drift_auto_calibrate
        self.calibrate = node.create_client(Trigger, s.drift_calibrate_service) if self.auto_calibrate else None
        self._seen_model: str | None = None     # the bridge's model_path last seen
        self._calibration = 'idle'      # idle: none asked; wanted: on drift, waits for an idle window; asked
        self._last_save = time.monotonic()
        self.dirty = False              # changed since the state file was written
        qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
        self.topic = s.drift_topic
        self.publisher = node.create_publisher(DiagnosticArray, self.topic, qos)
        guarded_service(node, Trigger, '~/reset_drift_baseline', self._on_reset)
        if self.bridge_status:
            guarded_subscription(node, DiagnosticArray, '/diagnostics', self._on_diagnostics, QoSProfile(depth=50))

    def _load(self) -> drift.DriftTrend:
        loaded = drift.load_state(self.path, self.settings, lambda line: self.node.get_logger().error(
            f'drift watch: {line}'))
        if loaded is None:
            return drift.DriftTrend(self.settings)
        base = f'baseline of {len(loaded.baseline)} joints ({loaded.baseline_source})' if loaded.baseline else \
            'no baseline yet'
        self.node.get_logger().info(f'drift watch: {len(loaded.buckets)} buckets and {base} from {self.path}')
        return loaded

    def set_ratio(self, ratio: float | None = None, min_error: float | None = None,
                  min_motion: float | None = None) -> None:
        """Change the thresholds (from ``ros2 param set``)."""
        s = self.settings
        self.settings = drift.DriftSettings(s.window, s.bucket, s.ratio if ratio is None else float(ratio),
                                            s.min_error if min_error is None else float(min_error),
                                            s.min_motion if min_motion is None else float(min_motion))
        self.trend.settings = self.settings

    # -- inputs ----------------------------------------------------------------------------------
    def add(self, real, error, stream: int = 0) -> None:
        """One comparison of the monitor: ``real`` (JointSample) and ``error`` (JointError) of
        real stream number ``stream``."""
        if not error.names:
            return
        position = positions_of(real, error.names)
        if self.auto_calibrate:
            self.idle.add(stream, error.t, error.names, position, position + error.position)
            if self._calibration == 'wanted' and self.idle.idle():
                self._ask_calibration()
        if self.trend.add(error.t, error.names, error.position, position):
            self.dirty = True
            self.publish()
            if time.monotonic() - self._last_save >= self.save_period:
                self.save()

    def _ask_calibration(self) -> None:
        if not self.calibrate.service_is_ready():
            self.node.get_logger().warning(f'drift watch: {self.calibrate.srv_name} is not available; asking again '
                                           'in the next idle window', throttle_duration_sec=60.0)
            return
        self._calibration = 'asked'
        self.node.get_logger().info(f'drift watch: idle for {self.idle.idle_time:g} s with drifted joints: calling '
                                    f'{self.calibrate.srv_name}')

        def answered(future) -> None:
            answer = future.result()
            self.node.get_logger().info(f'drift watch: {self.calibrate.srv_name} answered '
                                        f'{"success" if answer and answer.success else "failure"}: '
                                        f'{answer.message if answer else future.exception()}')
        self.calibrate.call_async(Trigger.Request()).add_done_callback(answered)

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for st in msg.status:
            if st.name != self.bridge_status:
                continue
            model = next((v.value for v in st.values if v.key == MODEL_KEY), None)
            if model is None or model == self._seen_model:
                continue
            self._seen_model = model
            identity = drift.model_identity(model)
            if identity == self.trend.model_id:
                continue
            if self.trend.model_id is None:     # the model the current baseline belongs to
                self.trend.model, self.trend.model_id = model, identity
                # worth a file only with a trend (a short run writes nothing: a test, a demo)
                self.dirty = self.dirty or bool(self.trend.buckets or self.trend.baseline)
                continue
            self.node.get_logger().info(f'drift watch: {self.bridge_status} runs {model} (was {self.trend.model}): '
                                        'a calibration was installed; new baseline after one full window')
            self.trend.restart_baseline(f'calibration installed: {model}', model, identity)
            self._calibration = 'idle'
            self.save()       # saved before it is published: a status never runs ahead of the state file
            self.publish()

    def _on_reset(self, request, response):
        joints = self.trend.set_baseline_now()
        response.success = True
        response.message = (f'drift baseline set from the current trend of {len(joints)} joints'
                            if joints else 'no trend yet: the baseline is the first full window from now')
        if not joints:
            self.trend.restart_baseline('set by hand (first full window after the reset)')
        self._calibration = 'idle'
        self.node.get_logger().info(f'drift watch: {response.message}')
        self.save()           # saved before it is published (as above)
        self.publish()
        return response

    # -- outputs ---------------------------------------------------------------------------------
    def status(self, joints: list | None = None) -> DiagnosticStatus:
        """The ``twin_monitor: drift`` status (``joints``: :meth:`DriftTrend.report`, default now)."""
        trend, s = self.trend, self.settings
        joints = trend.report() if joints is None else joints
        drifted = [j.name for j in joints if j.drifted]
        pending = trend.pending()
        if drifted:
            level = WARN
            message = (f'{len(drifted)} joint(s) drifted: {", ".join(drifted)} (trend >= {s.ratio:g} x baseline '
                       f'and >= {s.min_error:g} rad over {s.window:g} s)')
        elif not trend.baseline:
            level = OK
            message = ('no baseline yet: it is the first full window from each joint\'s first motion'
                       if pending is None else f'baseline after a full window of motion: {pending:.0f} s to go')
        else:
            level, message = OK, f'no drift: {len(trend.baseline)} joints within {s.ratio:g} x their baseline'
        values = {
            'drifted_joints': ','.join(drifted),
            'baseline_source': trend.baseline_source,
            'baseline_model': trend.model or '',
            'baseline_pending_s': '' if pending is None else f'{pending:.1f}',
            'window_s': f'{s.window:g}', 'bucket_s': f'{s.bucket:g}', 'ratio': f'{s.ratio:g}',
            'min_error_rad': f'{s.min_error:g}', 'min_motion_rad': f'{s.min_motion:g}', 'state_file': str(self.path),
            'auto_calibrate': self._calibration if self.auto_calibrate else 'off',
        }
        for j in joints:
            values[j.name] = (f'trend {_rad(j.trend)}, baseline {_rad(j.baseline)}'
                              + ('' if math.isnan(j.ratio) else f' (x{j.ratio:.2f})') + f', {j.buckets} buckets')
        return self._status(level, DRIFT_STATUS, message, values)

    def publish(self) -> None:
        """Publish the drift status on ``drift.topic`` (and, with auto_calibrate, want a calibration
        when joints drifted)."""
        status = self.status()
        if self.auto_calibrate and self._calibration == 'idle' and status.level == bytes([WARN]):
            self._calibration = 'wanted'
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self.publisher.publish(msg)

    def save(self) -> None:
        """Write the state file; an error is logged (the watch goes on in memory)."""
        self._last_save = time.monotonic()
        self.dirty = False
        try:
            drift.save_state(self.trend, self.path)
        except OSError as exc:
            self.node.get_logger().error(f'drift watch: cannot write {self.path}: {exc}',
                                         throttle_duration_sec=60.0)


def _rad(value: float) -> str:
    return '-' if math.isnan(value) else f'{value:.4f} rad'
