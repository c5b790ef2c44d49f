"""The key/values of the twin monitor's statuses in ``/diagnostics``: per joint
(:func:`joint_values`) and the base's (:func:`base_values`). Part of
``shadow_twin.ros.monitor.node``; units in the keys (rad, rad/s, m, s).
"""

from __future__ import annotations

from shadow_twin.monitoring.base_error import BaseReport
from shadow_twin.monitoring.drift import JointDrift
from shadow_twin.monitoring.lag import LagShare
from shadow_twin.monitoring.sim_real_monitor import JointReport


def number(value: float, spec: str) -> str:
    """``value`` formatted by ``spec``; '' for NaN."""
    return '' if value != value else format(value, spec)


def joint_values(joint: JointReport, window: float, share: LagShare | None = None,
                 drift: JointDrift | None = None) -> dict[str, str]:
    """A joint's values: its RMS / max errors over ``window`` s and thresholds; with ``share``
    its lag share over the same window (``lag_share`` 0..1, ``lag_s`` the best shift,
    ``rms_position_error_lag_removed_rad`` the RMS error at it; '' when unknown); with ``drift``
    its drift trend and baseline (rad) and whether it drifted."""
    st = joint.stats
    values = {
        'rms_position_error_rad': '' if st is None else f'{st.rms_position:.6f}',
        'rms_velocity_error_rad_s': '' if st is None else f'{st.rms_velocity:.6f}',
        'max_abs_position_error_rad': '' if st is None else f'{st.max_abs_position:.6f}',
        'samples': '0' if st is None else str(st.samples),
        'window_s': f'{window:g}',
        'warn_rad': f'{joint.threshold.warn:g}',
        'error_rad': f'{joint.threshold.error:g}',
    }
    if share is not None:
        values.update(lag_share=number(share.share, '.3f'), lag_s=number(share.lag, '.3f'),
                      rms_position_error_lag_removed_rad=number(share.rms_shifted, '.6f'))
    if drift is not None:
        values.update(drift_trend_rad=number(drift.trend, '.6f'), drift_baseline_rad=number(drift.baseline, '.6f'),
                      drifted=str(drift.drifted).lower())
    return values


def base_values(report: BaseReport, window: float, topics: tuple[str, str], frames: list[str]) -> dict[str, str]:
    """The base's values: RMS / max position (m) and yaw (rad) errors over ``window`` s,
    thresholds, the (real, sim) odometry ``topics`` and their ``frames``."""
    st, th = report.stats, report.thresholds
    return {
        'rms_position_error_m': '' if st is None else f'{st.rms_position:.6f}',
        'rms_yaw_error_rad': '' if st is None else f'{st.rms_yaw:.6f}',
        'max_position_error_m': '' if st is None else f'{st.max_position:.6f}',
        'max_abs_yaw_error_rad': '' if st is None else f'{st.max_abs_yaw:.6f}',
        'samples': '0' if st is None else str(st.samples),
        'window_s': f'{window:g}',
        'position_warn_m': f'{th.position.warn:g}',
        'position_error_m': f'{th.position.error:g}',
        'yaw_warn_rad': f'{th.yaw.warn:g}',
        'yaw_error_rad': f'{th.yaw.error:g}',
        'real_odom_topic': topics[0],
        'sim_odom_topic': topics[1],
        'real_odom_frame': frames[0],
        'sim_odom_frame': frames[1],
    }
