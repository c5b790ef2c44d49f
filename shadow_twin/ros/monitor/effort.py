"""The twin monitor's external-force watch: ROS side of :mod:`shadow_twin.monitoring.effort_watch`
(a part of ``shadow_twin.ros.monitor.node``).

* Fed every real joint state message (:meth:`EffortMonitor.on_state`); the arm joints
  ``effort.joints`` (the UR's) are predicted by inverse dynamics of the measured motion through
  the model (``effort.model_path``; '' = the model the sim bridge runs: the ``model_path`` value of
  its ``/diagnostics`` status ``drift.bridge_status``, reloaded when a calibration is installed)
  and the drive parameters (``effort.parameters_file``, the ``parameters.yaml`` of
  ``shadow-twin identify``; '' = ``effort.effort_unit`` with the nominal ``effort.drive_gains``).
* ``effort.topic`` (``/twin/effort_error``): ``sensor_msgs/JointState`` per evaluated sample,
  ``name`` = the arm joints, ``effort`` = measured - predicted in the recording's unit (A from
  ur_robot_driver), ``position`` and ``velocity`` empty; ``header.stamp`` = the stamp of the
  sample the residual is of (one sample before the newest: the acceleration is a centred fit).
  ``effort.predicted_topic`` (``/twin/effort_predicted``; '' = none): the same with ``effort`` =
  the predicted effort.
* ``/diagnostics``: per joint ``twin_monitor: external force: <joint>`` (OK / WARN / ERROR;
  STALE while no sample came for ``stale_after`` s), values ``residual``, ``predicted``,
  ``measured``, ``sigma``, ``warn_threshold``, ``error_threshold`` (effort unit, named in
  ``unit``; both include ``friction_band``, the static friction a joint standing since the watch
  began may hold) and ``sigma_source`` (identified / configured). Published with the monitor's other
  statuses every ``diagnostics_period``, and at once, alone, when a joint's level changes, stamped
  with the newest sample's stamp (the moment the change was known): a push is not held for the
  period.
* ``effort.enabled``: ``auto`` (default) watches when the model has the joints and a real message
  carries their efforts (messages without effort are skipped silently); ``on`` also says once when
  they lack it; ``off`` never.
"""

from __future__ import annotations

import time

import numpy as np

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState

from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.common.stamps import to_seconds
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.monitoring.effort_settings import nominal_drive
from shadow_twin.monitoring.effort_watch import EffortWatch
from shadow_twin.monitoring.thresholds import STALE
from shadow_twin.ros.conversions import doubles
from shadow_twin.ros.guard import guarded_subscription
from shadow_twin.ros.monitor.parameters import drive_gains, effort_settings
from shadow_twin.simulation.effort import DriveParameters, InverseDynamics

#: Status name after the node's name: ``twin_monitor: external force: shoulder_lift_joint``.
STATUS_PREFIX = 'external force: '
MODEL_KEY = 'model_path'


class EffortMonitor:
    """The external-force watch of ``node`` (its parameters ``effort.*``; see the module doc).

    Args:
        node: the twin monitor node (its typed ``settings`` read).
        status: builds a ``DiagnosticStatus`` from (level, name, message, values).
        publish_diagnostics: publishes a ``DiagnosticArray`` (the node's ``/diagnostics``).
    Raises:
        ConfigError, ModelError: bad ``effort.*`` settings, parameters file or model.
    """

    def __init__(self, node, status, publish_diagnostics) -> None:
        self.node, self._status, self._publish_diagnostics = node, status, publish_diagnostics
        s = node.settings
        self.mode = s.effort_enabled
        self.joints = [str(j) for j in s.effort_joints]
        self.settings = effort_settings(s.value)
        path = s.effort_parameters_file.strip()
        self.drive = (DriveParameters.from_yaml(path) if path else
                      nominal_drive(self.joints, s.effort_effort_unit, drive_gains(s.effort_drive_gains)))
        self.drive_source = path or 'nominal drive gains'
        self.drive.check_covers(self.joints, self.drive_source)
        self.watch: EffortWatch | None = None
        self.model_path = ''
        self._last: tuple[float, object] | None = None      # (arrival monotonic s, newest sample)
        self._warned_no_effort = False
        self.stale_after = s.stale_after
        self.topic = s.effort_topic
        self.error_pub = node.create_publisher(JointState, self.topic, 10)
        topic = s.effort_predicted_topic
        self.predicted_pub = node.create_publisher(JointState, topic, 10) if topic else None
        model = s.effort_model_path.strip()
        self.bridge_status = s.drift_bridge_status.strip()
        if model:
            self._load(model, fatal=True)
        elif self.bridge_status:
            guarded_subscription(node, DiagnosticArray, '/diagnostics', self._on_diagnostics, QoSProfile(depth=50))

    # -- model -----------------------------------------------------------------------------------
    def _load(self, path: str, fatal: bool = False) -> None:
        log = self.node.get_logger()
        try:
            model = TwinModel(path).model
            inverse = InverseDynamics(model, self.joints)
        except ShadowTwinError as exc:
            if fatal and self.mode == 'on':
                raise
            (log.info if self.mode == 'auto' else log.error)(f'external-force watch off for {path}: {exc}')
            self.watch, self.model_path = None, path
            return
        self.watch = EffortWatch(inverse, self.drive, self.settings, self.joints,
                                 on_warning=lambda line: log.warning(line))
        self.model_path = path
        log.info(f'external-force watch on {", ".join(self.joints)}: {path} and {self.drive_source} '
                 f'(effort in {self.drive.effort_unit}), warn {self.settings.k_warn:g} sigma, error '
                 f'{self.settings.k_error:g} sigma, on {self.topic}')

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for st in msg.status:
            if st.name == self.bridge_status:
                model = next((v.value for v in st.values if v.key == MODEL_KEY), None)
                if model and model != self.model_path:
                    self._load(model)

    def set_settings(self, settings) -> None:
        """New thresholds / debounce from the node's typed ``settings`` (checked before)."""
        self.settings = effort_settings(settings.value)
        if self.watch is not None:
            self.watch.set_settings(self.settings)

    # -- input -----------------------------------------------------------------------------------
    def on_state(self, msg: JointState) -> None:
        """A real joint state message (already checked: finite values, matching lengths)."""
        watch = self.watch
        if watch is None or self.mode == 'off':
            return
        if not len(msg.effort):
            if self.mode == 'on' and not self._warned_no_effort and set(self.joints) <= set(msg.name):
                self._warned_no_effort = True
                self.node.get_logger().warning('external-force watch: the joint states carry no effort; '
                                               'nothing to compare (said once)')
            return
        before = watch.levels()
        sample = watch.add(to_seconds(msg.header.stamp), msg.name, msg.position, msg.velocity, msg.effort,
                           stamp=msg.header.stamp)
        if sample is None:
            return
        self._last = (time.monotonic(), sample)
        for pub, values in ((self.error_pub, sample.residual), (self.predicted_pub, sample.predicted)):
            if pub is not None:
                out = JointState(name=list(self.joints), effort=doubles(values))
                out.header.stamp = sample.stamp
                pub.publish(out)
        if sample.levels != before:
            array = DiagnosticArray(status=self.statuses())
            array.header.stamp = msg.header.stamp           # known at the newest sample
            self._publish_diagnostics(array)

    # -- output ----------------------------------------------------------------------------------
    def statuses(self, now: float | None = None) -> list[DiagnosticStatus]:
        """One status per joint (none before the first evaluated sample)."""
        if self.watch is None or self._last is None:
            return []
        arrival, sample = self._last
        stale = (time.monotonic() if now is None else now) - arrival > self.stale_after
        watch, unit = self.watch, self.drive.effort_unit
        band = np.zeros(len(self.joints)) if sample.band is None else sample.band
        warn, error = watch.thresholds
        warn, error = warn + band, error + band       # the static friction a standing joint may hold
        out = []
        for j, joint in enumerate(self.joints):
            level = STALE if stale else sample.levels[j]
            r = sample.residual[j]
            what = {0: 'within', 1: 'over the warn threshold', 2: 'over the error threshold: an external force?'}
            message = (f'no joint state for {self.stale_after:g} s' if stale else
                       f'residual {r:+.3f} {unit} {what.get(level, "")} (warn {warn[j]:.3f}, error {error[j]:.3f} '
                       f'{unit})')
            values = {'residual': f'{r:.4f}', 'predicted': f'{sample.predicted[j]:.4f}',
                      'measured': f'{sample.measured[j]:.4f}', 'unit': unit, 'sigma': f'{watch.sigma[j]:.4f}',
                      'warn_threshold': f'{warn[j]:.4f}', 'error_threshold': f'{error[j]:.4f}',
                      'friction_band': f'{band[j]:.4f}',
                      'sigma_source': 'identified' if joint in self.drive.residual_sigma else 'configured',
                      'stamp': f'{sample.t:.6f}', 'model_path': self.model_path}
            out.append(self._status(level, STATUS_PREFIX + joint, message, values))
        return out
