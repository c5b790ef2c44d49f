"""The twin monitor's object pose error: ROS side of :mod:`shadow_twin.monitoring.object_error` (a part of
``shadow_twin.ros.monitor.node``), on with ``objects.enabled``.

* Takes, per object of ``objects.names``, the sim bridge's pose (``<objects.sim_prefix>/<name>/pose``) and
  the real object's (``<objects.real_prefix>/<name>/pose``: motion capture, or the mock hardware's
  stand-in), both ``geometry_msgs/PoseStamped`` in ``objects.frame`` (``world``), stamped with the time
  the pose was true. Each real pose is compared once, with the sim interpolated at its stamp (position
  linear, orientation slerp) as soon as the sim has reached that stamp: the comparison runs in the
  callbacks, no timer.
* Bad input (NaN, a non-unit quaternion, another frame, stamps not increasing) is dropped and counted,
  one warning per kind per source in the log; the counts are in ``/diagnostics``.
* Per object on ``<objects.error_topic_prefix>/<name>`` (``/twin/object_error/can``) one
  ``geometry_msgs/Vector3Stamped`` per comparison: ``vector.x`` = position error (m, the distance
  between the sim's and the real position, >= 0), ``vector.y`` = angle error (rad, the angle of the
  rotation between the two orientations, in [0, pi]), ``vector.z`` = 0; ``header.stamp`` = the real
  pose's stamp, ``header.frame_id`` = ``objects.frame``. Why these two magnitudes and not sim - real
  components: they are what the thresholds judge and the issue's following targets state (mm and deg,
  whatever the direction), the angle of a 3-D rotation has no component form a plot reads (a rotation
  vector's components mix axes), and the direction of an offset is in the two pose topics themselves.
  Why ``Vector3Stamped``: as the base's error, one stamped message keeps the errors of one time
  together, rqt_plot plots it field by field (``/twin/object_error/can/vector/x``) and
  ``geometry_msgs`` is already a dependency; y holding an angle and z unused is the liberty taken.
* ``/diagnostics``: per object ``twin_monitor: object <name>``: OK; WARN / ERROR by the RMS position
  (``objects.warn_position``, ``objects.error_position``, m) or angle (``objects.warn_angle``,
  ``objects.error_angle``, rad) error over ``objects.window`` s of stamps, the worse of the two; STALE
  while a source has had no accepted pose for ``stale_after`` s or no comparison is in the window.
"""

from __future__ import annotations

import time

from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import PoseStamped, Vector3Stamped

from shadow_twin.common.stamps import to_seconds
from shadow_twin.monitoring.object_error import KINDS, ObjectErrorMonitor, ObjectReport
from shadow_twin.ros.guard import guarded_subscription

#: Status name after the node's name: ``twin_monitor: object can``.
STATUS_PREFIX = 'object '
#: Seconds of the sim stream kept for the time alignment (and how long real poses wait for the sim).
HISTORY_AGE = 1.0


class ObjectMonitor:
    """The object pose errors of ``node`` (its ``objects.*`` settings and ``stale_after``; module doc).

    Args:
        node: the twin monitor node (typed ``settings``).
        status: builds a ``DiagnosticStatus`` from (level, name, message, values).
    """

    def __init__(self, node, status) -> None:
        s = node.settings
        self.node, self._status, self.frame = node, status, s.objects_frame
        self.names = list(s.objects_names)
        self.monitors: dict[str, ObjectErrorMonitor] = {}
        self.topics: dict[str, tuple[str, str]] = {}
        self.publishers = {}
        for name in self.names:
            sim, real = (f'{prefix.rstrip("/")}/{name}/pose' for prefix in (s.objects_sim_prefix,
                                                                             s.objects_real_prefix))
            self.topics[name] = (sim, real)
            self.monitors[name] = ObjectErrorMonitor(s.object_thresholds, window=s.objects_window,
                                                     stale_after=s.stale_after, history_age=HISTORY_AGE,
                                                     frame=self.frame, real_label=real, sim_label=sim)
            self.publishers[name] = node.create_publisher(Vector3Stamped,
                                                          f'{s.objects_error_topic_prefix.rstrip("/")}/{name}', 10)
            for side, topic in (('sim', sim), ('real', real)):
                guarded_subscription(node, PoseStamped, topic,
                                     lambda m, side=side, name=name: self._on_pose(side, name, m), 10)
        th = s.object_thresholds
        node.get_logger().info(
            f'objects: {", ".join(self.names) or "none named (objects.names)"}: {s.objects_sim_prefix}/<name>/pose '
            f'vs {s.objects_real_prefix}/<name>/pose in {self.frame!r}, errors on '
            f'{s.objects_error_topic_prefix}/<name> (warn {th.position.warn:g} m / {th.angle.warn:g} rad, error '
            f'{th.position.error:g} m / {th.angle.error:g} rad over {s.objects_window:g} s)')

    def _on_pose(self, side: str, name: str, msg: PoseStamped) -> None:
        """A pose of object ``name`` from the sim or the real side: checked, then every real pose the sim
        has reached is compared and published."""
        p, q = msg.pose.position, msg.pose.orientation
        monitor = self.monitors[name]
        add = monitor.add_sim if side == 'sim' else monitor.add_real
        warning = add(to_seconds(msg.header.stamp), (p.x, p.y, p.z), (q.w, q.x, q.y, q.z), msg.header.frame_id,
                      time.monotonic(), msg.header.stamp)
        if warning is not None:
            self.node.get_logger().warning(f'object {name}: {warning}')
        for error in monitor.update():
            out = Vector3Stamped()
            out.header.stamp, out.header.frame_id = error.stamp, self.frame
            out.vector.x, out.vector.y = error.position, error.angle
            self.publishers[name].publish(out)

    def statuses(self, now: float | None = None) -> list[DiagnosticStatus]:
        """One status per object (module doc)."""
        now = time.monotonic() if now is None else now
        out = []
        for name in self.names:
            monitor = self.monitors[name]
            report = monitor.report(now)
            out.append(self._status(report.level, STATUS_PREFIX + name, report.message,
                                    self.values(name, report)))
        return out

    def values(self, name: str, report: ObjectReport) -> dict[str, str]:
        """The values of object ``name``'s status: RMS / max errors (m, rad), samples, window (s),
        thresholds, topics and the samples dropped per source and kind."""
        st, th, monitor = report.stats, report.thresholds, self.monitors[name]
        values = {
            'rms_position_error_m': '' if st is None else f'{st.rms_position:.6f}',
            'rms_angle_error_rad': '' if st is None else f'{st.rms_angle:.6f}',
            'max_position_error_m': '' if st is None else f'{st.max_position:.6f}',
            'max_angle_error_rad': '' if st is None else f'{st.max_angle:.6f}',
            'samples': '0' if st is None else str(st.samples),
            'window_s': f'{monitor.window:g}',
            'position_warn_m': f'{th.position.warn:g}', 'position_error_m': f'{th.position.error:g}',
            'angle_warn_rad': f'{th.angle.warn:g}', 'angle_error_rad': f'{th.angle.error:g}',
            'sim_topic': self.topics[name][0], 'real_topic': self.topics[name][1], 'frame': self.frame,
        }
        for side, check in monitor.checks.items():
            values[f'{side}_accepted'] = str(check.accepted)
            values[f'{side}_dropped'] = ', '.join(f'{kind}: {check.counts[kind]}' for kind in KINDS
                                                  if check.counts[kind]) or '0'
        return values
