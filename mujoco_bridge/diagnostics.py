"""The ``mujoco_bridge`` node's rates and diagnostics: the real-time factor log line, the
physics status (and the followed objects', :mod:`mujoco_bridge.object_sources`) on ``/diagnostics``, and
what the node says of stalls and of sim time dropped
(:class:`BridgeDiagnostics`, a part of :class:`mujoco_bridge.bridge_node.MujocoBridge`)."""

from __future__ import annotations

import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from mujoco_bridge.timing import stall_cause
from shadow_twin.common.stamps import to_nanoseconds

#: Achieved/target real-time factor below which /diagnostics reports WARN, and ERROR.
RTF_WARN, RTF_ERROR = 0.95, 0.5


class BridgeDiagnostics:
    """The real-time factor log and ``/diagnostics`` of the bridge node it is mixed into, from its
    ``meter`` (:class:`~mujoco_bridge.timing.RateMeter`), ``clock``, ``sim``, ``jtc`` and settings."""

    #: Late base velocity commands already logged (the base's ``late_commands`` when last logged).
    _late_logged: int = 0

    def _log_rate(self) -> None:
        report = self.meter.report()
        if self.sim.paused:
            self.get_logger().info(f'paused at sim time {self.sim.time:.3f} s')
        elif report is not None:
            self.get_logger().info(
                f'sim time {self.sim.time:.3f} s: real-time factor {report.real_time_factor:.3f} '
                f'(target {self.clock.real_time_factor:g}) over the last {report.window:.1f} s; '
                f'joint states at {report.rate:.1f} Hz; latest tick {report.max_lateness * 1e3:.1f} ms late; '
                f'dropped {report.dropped * 1e3:.0f} ms of sim time ({self._dropped_s:.3f} s since start)')
            base = self.sim.base
            if base is not None and base.late_commands > self._late_logged:
                self._late_logged = base.late_commands
                self.get_logger().warning(
                    f'{base.late_commands} base velocity command(s) arrived after the command latency '
                    f'({base.command_latency * 1e3:.0f} ms) had passed since their stamp, the latest '
                    f'{base.latest_late * 1e3:.0f} ms after it: they took effect late')

    def diagnostic_status(self) -> DiagnosticStatus:
        """Status of the physics loop: level by achieved vs target real-time factor over the
        window (sim time dropped after a stall counts as not advanced), at least WARN when sim
        time was dropped in the window; values also give the worst tick lateness of the window."""
        report = self.meter.report()
        target = self.clock.real_time_factor
        status = DiagnosticStatus(name=f'{self.get_name()}: physics', hardware_id=str(self.sim.path))
        if self.sim.paused:
            status.level, status.message = DiagnosticStatus.OK, 'paused'
        elif report is None:
            status.level, status.message = DiagnosticStatus.STALE, 'starting'
        else:
            ratio = report.real_time_factor / target
            status.level = (DiagnosticStatus.OK if ratio >= RTF_WARN else
                            DiagnosticStatus.WARN if ratio >= RTF_ERROR else DiagnosticStatus.ERROR)
            status.message = f'real-time factor {report.real_time_factor:.3f} (target {target:g})'
            if report.dropped > 0:
                status.level = max(status.level, DiagnosticStatus.WARN)
                status.message += (f'; dropped {report.dropped * 1e3:.0f} ms of sim time in the last '
                                   f'{report.window:.1f} s (a tick {report.max_lateness * 1e3:.0f} ms late)')
        values = {
            'real_time_factor_target': f'{target:g}',
            'real_time_factor_achieved': '' if report is None else f'{report.real_time_factor:.4f}',
            'publish_rate_target_hz': f'{self._settings.publish_rate:g}',
            'publish_rate_achieved_hz': '' if report is None else f'{report.rate:.1f}',
            'window_s': '' if report is None else f'{report.window:.2f}',
            'max_tick_lateness_ms': '' if report is None else f'{report.max_lateness * 1e3:.2f}',
            'max_tick_lateness_process_cpu_ms': '' if report is None else f'{report.max_lateness_cpu * 1e3:.2f}',
            'dropped_sim_time_window_s': '' if report is None else f'{report.dropped:.4f}',
            'sim_time_s': f'{self.sim.time:.4f}',
            'dropped_sim_time_s': f'{self._dropped_s:.4f}',
            'paused': str(self.sim.paused).lower(),
            'goal_active': str(self.jtc.active).lower(),
            'model_path': str(self.sim.path),
        }
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        return status

    def _publish_diagnostics(self) -> None:
        msg = DiagnosticArray()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.status = [self.diagnostic_status()]
        sources = getattr(self, 'object_sources', None)     # the followed objects (mujoco_bridge.object_sources)
        if sources is not None and sources.sources:
            sources.log_warnings()                           # queued by the stepping thread: logged here
            msg.status += sources.statuses(self.get_name())
        self.diagnostics_pub.publish(msg)

    def _warn_stall(self, lateness: float, waited: float, process_cpu: float) -> None:
        """A tick started ``lateness`` s late (above ``STALL_WARNING``): say so and who held it
        (at most every 5 s; every stall also shows in /diagnostics)."""
        now = time.monotonic()
        if now - self._last_stall_log > 5.0:
            self._last_stall_log = now
            self.get_logger().warning(f'the stepping thread started a tick {lateness * 1e3:.0f} ms late: '
                                      f'{stall_cause(lateness, waited, process_cpu)}')

    def _drop_lag(self, lag_s: float, dropped_s: float, scheduled: float) -> None:
        """Sim time fell ``lag_s`` behind at the tick ``scheduled`` (monotonic s); ``max_catch_up``
        of it was stepped, ``dropped_s`` is given up: the clock is re-anchored so that the sim
        time reached belongs to that tick (the rate meter is not reset: the loss shows in its
        real-time factor, see :class:`RateMeter`)."""
        self._dropped_s += dropped_s
        now = time.monotonic()
        self.clock.anchor(scheduled, self._ros_now_ns() - to_nanoseconds(now - scheduled), self.sim.time)
        if now - self._last_drop_log > 5.0:
            self._last_drop_log = now
            self.get_logger().warning(
                f'physics fell {lag_s * 1e3:.0f} ms of sim time behind the wall clock (a stall or CPU starved); '
                f'caught up max_catch_up {self._settings.max_catch_up:g} s and dropped {dropped_s * 1e3:.0f} ms '
                f'({self._dropped_s:.3f} s dropped since start)')
