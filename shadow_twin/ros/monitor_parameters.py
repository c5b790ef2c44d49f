"""The ``twin_monitor`` node's ROS parameters: :data:`SPECS` (the shared groups of
:mod:`shadow_twin.ros.parameters` it declares, then its own), and the check of ``aggregated_path``
that the node also uses.
"""

from __future__ import annotations

from shadow_twin.common.errors import ConfigError
from shadow_twin.monitoring import base_error
from shadow_twin.monitoring import joint_error as monitor
from shadow_twin.ros.parameters import DIAGNOSTICS_SPECS, JOINT_STATE_INPUT_SPECS, ParameterSpec


def _path_parts(path: str) -> list[str]:
    """The names of an aggregated path (``/a/b`` -> [a, b]). Raises ConfigError if there are none."""
    parts = [p for p in path.split('/') if p]
    if not parts:
        raise ConfigError(f'an aggregated path needs at least one name, as /shadow_twin/sim vs real; got {path!r}')
    return parts


SPECS = DIAGNOSTICS_SPECS + JOINT_STATE_INPUT_SPECS + (
    ParameterSpec('joint_error_topic', '/twin/joint_error', 'sensor_msgs/JointState of sim minus real (rad, rad/s), '
                  'stamped with the newest real sample compared.', read_only=True),
    ParameterSpec('rate', 50.0, 'Rate of joint (and base) error messages, Hz.', read_only=True, bounds=(0.1, 1000.0)),
    ParameterSpec('window', 2.0, 'Sliding window of the RMS errors in /diagnostics, s.', bounds=(0.01, 600.0)),
    ParameterSpec('stale_after', 0.5, 'A stream silent for this long makes what depends on it STALE, s.',
                  bounds=(0.01, 3600.0)),
    ParameterSpec('max_stamp_gap', 0.05, 'A real sample ahead of every sim sample by at most this much is compared '
                  'with the newest sim sample (else it waits for the sim), s.', bounds=(0.0, 0.5)),
    ParameterSpec('thresholds.warn', monitor.DEFAULT_WARN, 'RMS position error from which a joint is WARN, rad (> 0).',
                  bounds=(0.0, 1e6)),
    ParameterSpec('thresholds.error', monitor.DEFAULT_ERROR, 'RMS position error from which a joint is ERROR, rad '
                  '(>= thresholds.warn).', bounds=(0.0, 1e6)),
    ParameterSpec('threshold_overrides', '', 'YAML {joint_glob: {warn: rad, error: rad}}: per-joint thresholds (the '
                  'first matching glob wins; a missing key takes the default), e.g. "rh_TH*: {warn: 0.1, error: '
                  '0.3}".'),
    ParameterSpec('real_odom_topic', '', "nav_msgs/Odometry of the robot's base (the MiR bridge's /odom); empty, or "
                  'sim_odom_topic empty: no base error.', read_only=True),
    ParameterSpec('sim_odom_topic', '', "nav_msgs/Odometry of the sim's base (/sim/odom); its odom frame must coincide "
                  "with the robot's at start.", read_only=True),
    ParameterSpec('base_max_stamp_gap', 0.0, 'A real odometry ahead of every sim odometry by at most this much is '
                  'compared with the newest sim pose (else it waits for the sim), s; 0: always waits (at 50 Hz a held '
                  'pose can be 20 ms old).', bounds=(0.0, 0.5)),
    ParameterSpec('base_error_topic', '/twin/base_error', 'geometry_msgs/Vector3Stamped of sim minus real base pose: '
                  'x, y in m (odom frame), z yaw in rad, stamped with the real odometry compared.', read_only=True),
    ParameterSpec('base_thresholds.position.warn', base_error.DEFAULT_POSITION_WARN, 'RMS base position error from '
                  'which the base is WARN, m (> 0).', bounds=(0.0, 1e6)),
    ParameterSpec('base_thresholds.position.error', base_error.DEFAULT_POSITION_ERROR, 'RMS base position error from '
                  'which the base is ERROR, m (>= warn).', bounds=(0.0, 1e6)),
    ParameterSpec('base_thresholds.yaw.warn', base_error.DEFAULT_YAW_WARN, 'RMS base yaw error from which the base is '
                  'WARN, rad (> 0).', bounds=(0.0, 1e6)),
    ParameterSpec('base_thresholds.yaw.error', base_error.DEFAULT_YAW_ERROR, 'RMS base yaw error from which the base '
                  'is ERROR, rad (>= warn).', bounds=(0.0, 1e6)),
    ParameterSpec('publish_aggregated', True, 'Also publish the statuses on aggregated_topic as diagnostic_aggregator '
                  'would (for rqt_robot_monitor without the C++ aggregator); false where diagnostic_aggregator runs.',
                  read_only=True),
    ParameterSpec('aggregated_topic', '/diagnostics_agg', 'diagnostic_msgs/DiagnosticArray of the aggregated statuses '
                  '(rqt_robot_monitor shows /diagnostics_agg).', read_only=True),
    ParameterSpec('aggregated_path', '/shadow_twin/sim vs real', "Where the statuses sit in the aggregated tree: "
                  "diagnostic_aggregator's base path and GenericAnalyzer path, '/'-separated.", read_only=True,
                  check=_path_parts),
)
