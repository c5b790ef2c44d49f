"""The ``mujoco_bridge`` node's rates and diagnostics: the real-time factor log line and the
physics status on ``/diagnostics`` (:class:`BridgeDiagnostics`, a part of
:class:`mujoco_bridge.bridge_node.MujocoBridge`)."""

from __future__ import annotations

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

#: Achieved/target real-time factor below which /diagnostics reports WARN, and ERROR.
RTF_WARN, RTF_ERROR = 0.95, 0.5


class BridgeDiagnostics:
    """The real-time factor log and ``/diagnostics`` of the bridge node it is mixed into, from its
    ``meter`` (:class:`~mujoco_bridge.timing.RateMeter`), ``clock``, ``sim``, ``jtc`` and settings."""

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
            'publish_rate_target_hz': f'{self._settings["publish_rate"]:g}',
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
        self.diagnostics_pub.publish(msg)
