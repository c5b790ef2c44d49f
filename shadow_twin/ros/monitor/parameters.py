"""The ``twin_monitor`` node's ROS parameters: :data:`SPECS` (the shared groups of
:mod:`shadow_twin.ros.parameters` it declares, then its own), the check of ``aggregated_path``
that the node also uses, what the node builds from several parameters together (thresholds,
odometry topics) with the check of a runtime change of them (:func:`invalid_change`), and the
typed settings the node reads them through (:class:`MonitorSettings`, :func:`read_settings`).
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable


from shadow_twin.common.errors import ConfigError
from shadow_twin.model.cell.names import UR5_JOINTS
from shadow_twin.monitoring import base_error, drift, lag, object_error
from shadow_twin.monitoring.effort_settings import EffortSettings
from shadow_twin.monitoring.joint import error as monitor
from shadow_twin.ros.parameters import DIAGNOSTICS_SPECS, JOINT_STATE_INPUT_SPECS, ParameterSpec, yaml_mapping
from shadow_twin.ros.settings import settings_class


def path_parts(path: str) -> list[str]:
    """The names of an aggregated path (``/a/b`` -> [a, b]). Raises ConfigError if there are none."""
    parts = [p for p in path.split('/') if p]
    if not parts:
        raise ConfigError(f'an aggregated path needs at least one name, as /shadow_twin/sim vs real; got {path!r}')
    return parts


SPECS = DIAGNOSTICS_SPECS + JOINT_STATE_INPUT_SPECS + (
    ParameterSpec('joint_error_topic', '/twin/joint_error', 'sensor_msgs/JointState of sim minus real (rad, rad/s), '
                  'stamped with the newest real sample compared.', read_only=True),
    ParameterSpec('rate', 50.0, 'Rate of joint (and base) error messages.', read_only=True, bounds=(0.1, 1000.0),
                  unit='Hz'),
    ParameterSpec('window', 2.0, 'Sliding window of the RMS errors in /diagnostics.', bounds=(0.01, 600.0), unit='s'),
    ParameterSpec('stale_after', 0.5, 'A stream silent for this long makes what depends on it STALE.',
                  bounds=(0.01, 3600.0), unit='s'),
    ParameterSpec('max_stamp_gap', 0.05, 'A real sample ahead of every sim sample by at most this much is compared '
                  'with the newest sim sample (else it waits for the sim).', bounds=(0.0, 0.5), unit='s'),
    ParameterSpec('thresholds.warn', monitor.DEFAULT_WARN, 'RMS position error from which a joint is WARN (> 0).',
                  bounds=(0.0, 1e6), unit='rad'),
    ParameterSpec('thresholds.error', monitor.DEFAULT_ERROR, 'RMS position error from which a joint is ERROR '
                  '(>= thresholds.warn).', bounds=(0.0, 1e6), unit='rad'),
    ParameterSpec('threshold_overrides', '', 'YAML {joint_glob: {warn: W, error: E}}: per-joint thresholds (the '
                  'first matching glob wins; a missing key takes the default), e.g. "rh_TH*: {warn: 0.1, error: '
                  '0.3}".', unit='rad'),
    ParameterSpec('real_odom_topic', '', "nav_msgs/Odometry of the robot's base (the MiR bridge's /odom); empty, or "
                  'sim_odom_topic empty: no base error.', read_only=True),
    ParameterSpec('sim_odom_topic', '', "nav_msgs/Odometry of the sim's base (/sim/odom); its odom frame must coincide "
                  "with the robot's at start.", read_only=True),
    ParameterSpec('base_max_stamp_gap', 0.0, 'A real odometry ahead of every sim odometry by at most this much is '
                  'compared with the newest sim pose (else it waits for the sim); 0: always waits (at 50 Hz a held '
                  'pose can be 20 ms old).', bounds=(0.0, 0.5), unit='s'),
    ParameterSpec('base_error_topic', '/twin/base_error', 'geometry_msgs/Vector3Stamped of sim minus real base pose: '
                  'x, y in m (odom frame), z yaw in rad, stamped with the real odometry compared.', read_only=True),
    ParameterSpec('base_thresholds.position.warn', base_error.DEFAULT_POSITION_WARN, 'RMS base position error from '
                  'which the base is WARN (> 0).', bounds=(0.0, 1e6), unit='m'),
    ParameterSpec('base_thresholds.position.error', base_error.DEFAULT_POSITION_ERROR, 'RMS base position error from '
                  'which the base is ERROR (>= warn).', bounds=(0.0, 1e6), unit='m'),
    ParameterSpec('base_thresholds.yaw.warn', base_error.DEFAULT_YAW_WARN, 'RMS base yaw error from which the base is '
                  'WARN (> 0).', bounds=(0.0, 1e6), unit='rad'),
    ParameterSpec('base_thresholds.yaw.error', base_error.DEFAULT_YAW_ERROR, 'RMS base yaw error from which the base '
                  'is ERROR (>= warn).', bounds=(0.0, 1e6), unit='rad'),
    ParameterSpec('publish_aggregated', True, 'Also publish the statuses on aggregated_topic as diagnostic_aggregator '
                  'would (for rqt_robot_monitor without the C++ aggregator); false where diagnostic_aggregator runs.',
                  read_only=True),
    ParameterSpec('aggregated_topic', '/diagnostics_agg', 'diagnostic_msgs/DiagnosticArray of the aggregated statuses '
                  '(rqt_robot_monitor shows /diagnostics_agg).', read_only=True),
    ParameterSpec('aggregated_path', '/shadow_twin/sim vs real', "Where the statuses sit in the aggregated tree: "
                  "diagnostic_aggregator's base path and GenericAnalyzer path, '/'-separated.", read_only=True,
                  check=path_parts),
    # -- drift watch (shadow_twin.monitoring.drift, shadow_twin.ros.monitor.drift) --
    ParameterSpec('drift.enabled', True, 'Keep the long-window error trend per joint and report drift from its '
                  'baseline.', read_only=True),
    ParameterSpec('drift.window', drift.DEFAULT_WINDOW, 'Trend window (minutes to days; >= drift.bucket); the '
                  'baseline is the first full window after a calibration (or after the first start).', read_only=True,
                  bounds=(0.1, 1e8), unit='s'),
    ParameterSpec('drift.bucket', drift.DEFAULT_BUCKET, 'Trend bucket: the RMS error is summed per bucket, and '
                  'a bucket counts for a joint only when it moved.', read_only=True, bounds=(0.05, 1e6), unit='s'),
    ParameterSpec('drift.ratio', drift.DEFAULT_RATIO, 'A joint has drifted when its trend is this many times its '
                  'baseline (> 1) ...', bounds=(1.0, 1e6)),
    ParameterSpec('drift.min_error', drift.DEFAULT_MIN_ERROR, '... and at least this much (noise on a near-zero '
                  'baseline does not alarm).', bounds=(0.0, 1e6), unit='rad'),
    ParameterSpec('drift.min_motion', drift.DEFAULT_MIN_MOTION, 'A joint moved in a bucket when its real position '
                  'spans this much there.', bounds=(0.0, 1e6), unit='rad'),
    ParameterSpec('drift.state_file', '', 'JSON file of the trend and baseline, reloaded at start, written '
                  'atomically; empty = $ROS_HOME/shadow_twin/drift/<node name>.json ($ROS_HOME: ~/.ros).',
                  read_only=True),
    ParameterSpec('drift.save_period', 60.0, 'Most often the state file is written (on a closed bucket); '
                  'also at shutdown and on a baseline change.', read_only=True, bounds=(0.0, 1e6), unit='s'),
    ParameterSpec('drift.topic', '/twin/drift', 'diagnostic_msgs/DiagnosticArray of the drift status, latched '
                  '(transient_local), on each closed bucket and baseline change.', read_only=True),
    ParameterSpec('drift.bridge_status', 'mujoco_bridge: physics', "Name of the sim bridge's /diagnostics status "
                  'whose model_path value changes when a calibration is installed (a new baseline); empty = not '
                  'watched.', read_only=True),
    ParameterSpec('drift.auto_calibrate', False, 'On drift, ask the calibration node to calibrate (its '
                  'std_srvs/Trigger drift.calibrate_service) in the next idle window: robot and sim still for '
                  'drift.idle_time. A live calibration moves the robot: off by default.', read_only=True),
    ParameterSpec('drift.idle_time', 10.0, 'Stillness (no real or sim joint moving 0.01 rad) that makes an idle '
                  'window for drift.auto_calibrate.', read_only=True, bounds=(0.1, 86400.0), unit='s'),
    ParameterSpec('drift.calibrate_service', '/calibration_node/calibrate', 'std_srvs/Trigger that starts a '
                  'calibration (drift.auto_calibrate).', read_only=True),
    # -- lag share (shadow_twin.monitoring.lag) --
    ParameterSpec('lag.max_lag', lag.DEFAULT_MAX_LAG, 'Largest time shift of the lag share (the part of the '
                  'error a shift of the sim removes); 0 = no lag share.', bounds=(0.0, 10.0), unit='s'),
    # -- shadow sources (shadow_twin.monitoring.shadow_sources, shadow_twin.ros.monitor.shadow) --
    ParameterSpec('shadow_sources', [''], 'Topics the sim follows in shadow mode (controller_state, '
                  'joint_trajectory, joint states, cmd_vel, odom); each one silent for shadow_source_timeout makes its '
                  "joints STALE. Types from the ROS graph. [''] = none.", read_only=True),
    ParameterSpec('shadow_source_timeout', 0.5, 'A shadow source silent this long (header stamps vs now) is '
                  'stale.', bounds=(0.01, 3600.0), unit='s'),
    # -- external-force watch (shadow_twin.monitoring.effort_watch, shadow_twin.ros.monitor.effort) --
    ParameterSpec('effort.enabled', 'auto', 'Watch the arm joints\' efforts for external forces: auto = when the '
                  'model has effort.joints and the real joint states carry effort; on (also say once when they do '
                  'not); off.', read_only=True, choices=('auto', 'on', 'off')),
    ParameterSpec('effort.joints', list(UR5_JOINTS), 'The arm joints watched (ROS names = MJCF names).',
                  read_only=True),
    ParameterSpec('effort.model_path', '', "MJCF whose inverse dynamics predicts the efforts; '' = the sim bridge's "
                  'model (model_path of its drift.bridge_status in /diagnostics, followed on a calibration install).',
                  read_only=True),
    ParameterSpec('effort.parameters_file', '', "parameters.yaml of shadow-twin identify (effort unit, drive gains, "
                  "offsets, residual sigma); '' = effort.effort_unit and effort.drive_gains.", read_only=True),
    ParameterSpec('effort.effort_unit', 'A', 'Unit of the real efforts without parameters_file: A (ur_robot_driver\'s '
                  'joint currents) or Nm.', read_only=True, choices=('A', 'Nm')),
    ParameterSpec('effort.drive_gains', '', "Without parameters_file: YAML {joint glob: drive gain}; '' = the nominal "
                  'UR5 figures (shadow_twin.monitoring.effort_watch.NOMINAL_UR_DRIVE_GAINS).', read_only=True,
                  check=lambda text: drive_gains(text), unit='N m/A'),
    ParameterSpec('effort.k_warn', 4.0, 'A joint is WARN from |residual| >= k_warn sigma (> 0).', bounds=(0.0, 1e6)),
    ParameterSpec('effort.k_error', 6.0, 'ERROR from k_error sigma (>= k_warn).', bounds=(0.0, 1e6)),
    ParameterSpec('effort.fallback_sigma', 0.2, 'Residual sigma of a joint parameters_file gives none for (> 0).',
                  bounds=(0.0, 1e6), unit='effort unit (A or N m)'),
    ParameterSpec('effort.sigma_overrides', '', "YAML {joint glob: sigma} before fallback_sigma; '' = none.",
                  check=lambda text: parse_sigmas(text), unit='effort unit (A or N m)'),
    ParameterSpec('effort.debounce_samples', 3, 'Consecutive samples over a level to enter it (>= 1).',
                  bounds=(1, 100000), unit='samples'),
    ParameterSpec('effort.debounce_time', 0.0, '... or this long over it (of stamps); 0 = samples only.',
                  bounds=(0.0, 60.0), unit='s'),
    ParameterSpec('effort.hold_time', 0.5, 'Under a level this long (stamps) to leave it.', bounds=(0.0, 3600.0),
                  unit='s'),
    ParameterSpec('effort.window', 3, 'Samples of the centred acceleration fit (odd, >= 3); the residual is known '
                  '(window - 1) / 2 samples late.', read_only=True, bounds=(3, 101), unit='samples'),
    ParameterSpec('effort.max_gap', 0.1, 'A larger gap between real stamps restarts the fit window.', read_only=True,
                  bounds=(0.001, 10.0), unit='s'),
    ParameterSpec('effort.topic', '/twin/effort_error', 'sensor_msgs/JointState: effort = measured - predicted '
                  '(effort unit) of the arm joints, stamped with the sample it is of.', read_only=True),
    ParameterSpec('effort.predicted_topic', '/twin/effort_predicted', "The same with effort = predicted; '' = not "
                  'published.', read_only=True),
    # -- contacts and slip (shadow_twin.monitoring.slip, shadow_twin.ros.monitor.contacts) --
    ParameterSpec('contacts.enabled', False, "Compare the sim's contact outputs with the real hand's and warn of slip "
                  '(the bridges\' contact_sensors).', read_only=True),
    ParameterSpec('contacts.labels', ['ff', 'mf', 'rf', 'lf', 'th', 'palm'], 'The labels compared.', read_only=True),
    ParameterSpec('contacts.sim_prefix', '/mujoco_bridge/contacts', "The sim bridge's contact_topic_prefix.",
                  read_only=True),
    ParameterSpec('contacts.real_prefix', '/rh/contacts', "The real hand's (or its mock's) contact topics: "
                  '<prefix>/<label>/wrench and /slip.', read_only=True),
    ParameterSpec('contacts.min_force', 0.01, 'A wrench whose force is larger is a contact.', read_only=True,
                  bounds=(0.0, 1000.0), unit='N'),
    ParameterSpec('contacts.slip_threshold', 0.01, 'A contact sliding faster slips (after slip_hold).',
                  read_only=True, bounds=(1e-6, 10.0), unit='m/s'),
    ParameterSpec('contacts.slip_hold', 0.02, 'Sliding this long (stamps) before the warning.', read_only=True,
                  bounds=(0.0, 10.0), unit='s'),
    ParameterSpec('contacts.slip_release', 0.2, 'Not sliding this long (stamps) before the warning ends.',
                  read_only=True, bounds=(0.0, 60.0), unit='s'),
    ParameterSpec('contacts.agreement_window', 10.0, 'Contact agreement over this many seconds of stamps.',
                  read_only=True, bounds=(0.1, 3600.0), unit='s'),
    ParameterSpec('contacts.agreement_warn', 0.95, 'A label is WARN when sim and real agree on fewer samples.',
                  read_only=True, bounds=(0.0, 1.0), unit='fraction'),
    # -- object pose error (shadow_twin.monitoring.object_error, shadow_twin.ros.monitor.objects) --
    ParameterSpec('objects.enabled', False, "Compare each object's sim pose with its real pose (motion capture); "
                  'needs a scene (the bridge\'s scene_file) and a pose source per object.', read_only=True),
    ParameterSpec('objects.names', [''], "The scene objects compared (names of the scene file's objects, e.g. "
                  "[can, ball]); [''] = none.", read_only=True, check=lambda names: object_names(names)),
    ParameterSpec('objects.sim_prefix', '/mujoco_bridge/objects', "The sim bridge's object poses: "
                  '<prefix>/<name>/pose, geometry_msgs/PoseStamped stamped when the pose was true.', read_only=True),
    ParameterSpec('objects.real_prefix', '/mocap', "The real objects' poses (motion capture, the mock hardware's "
                  'stand-in): <prefix>/<name>/pose, PoseStamped stamped when the pose was true.', read_only=True),
    ParameterSpec('objects.frame', 'world', 'The frame_id both sources must give (the sim\'s world, which the '
                  'motion capture is registered to); a pose in another frame is dropped.', read_only=True),
    ParameterSpec('objects.error_topic_prefix', '/twin/object_error', 'geometry_msgs/Vector3Stamped per object on '
                  '<prefix>/<name>: x position error (m), y angle error (rad), z 0, stamped with the real pose '
                  'compared.', read_only=True),
    ParameterSpec('objects.window', 2.0, "RMS window of an object's errors in /diagnostics (as the joints' window: "
                  '200 comparisons at the motion capture\'s 100 Hz).', read_only=True, bounds=(0.01, 600.0), unit='s'),
    ParameterSpec('objects.warn_position', object_error.DEFAULT_POSITION_WARN, 'RMS position error from which an '
                  'object is WARN: over twice the following target (2 mm p95 while carried, issue 36) plus the '
                  "motion capture's noise (0.5 mm per axis, 0.9 mm RMS in the distance).", read_only=True,
                  bounds=(1e-6, 1e3), unit='m'),
    ParameterSpec('objects.error_position', object_error.DEFAULT_POSITION_ERROR, 'RMS position error from which an '
                  'object is ERROR (>= warn): most of a fingertip\'s width, the sim holds it elsewhere.',
                  read_only=True, bounds=(1e-6, 1e3), unit='m'),
    ParameterSpec('objects.warn_angle', object_error.DEFAULT_ANGLE_WARN, 'RMS angle error from which an object is '
                  'WARN (2.9 deg): about three times the following target (1 deg p95) and five times the motion '
                  "capture's orientation noise (0.009 rad RMS).", read_only=True, bounds=(1e-6, math.pi),
                  unit='rad'),
    ParameterSpec('objects.error_angle', object_error.DEFAULT_ANGLE_ERROR, 'RMS angle error from which an object is '
                  'ERROR (>= warn; 11 deg).', read_only=True, bounds=(1e-6, math.pi), unit='rad'),
    # the real robots drawn through the sim's model (shadow_twin.ros.monitor.view)
    ParameterSpec('view.enabled', True, "Draw the real robots: every body of the sim's model posed by the real joint "
                  "states and odometry, on /tf as <view.tf_prefix><body>, and as a translucent ghost coloured by each "
                  "link's sim-real error on view.markers_topic.", read_only=True),
    ParameterSpec('view.model_path', '', "The sim bridge's MJCF (its model_path; empty = the built-in Shadow Hand E).",
                  read_only=True),
    ParameterSpec('view.joint_map_file', '', 'ROS -> MJCF joint names of that model (the bridge\'s joint_map_file).',
                  read_only=True),
    ParameterSpec('view.publish_tf', True, 'Publish the real bodies on /tf (false where a robot_state_publisher of the '
                  'whole cell does: the ghost then uses its frames, <view.tf_prefix><body>).', read_only=True),
    ParameterSpec('view.tf_prefix', 'real/', 'Prefix of the real bodies\' frames.', read_only=True),
    ParameterSpec('view.world_frame', 'world', 'Frame the real tree hangs from (/tf_static: <world> -> '
                  '<view.tf_prefix>world, identity); empty = none.', read_only=True),
    ParameterSpec('view.tf_rate', 30.0, 'Rate of the real bodies on /tf (at most one per new comparison).',
                  read_only=True, bounds=(1.0, 250.0), unit='Hz'),
    ParameterSpec('view.markers_topic', '/real/markers', 'visualization_msgs/MarkerArray of the ghost (transient '
                  'local), sent again when a colour changes; empty = none.', read_only=True),
    ParameterSpec('view.marker_rate', 10.0, 'At most this often the ghost\'s colours are sent.', read_only=True,
                  bounds=(0.1, 100.0), unit='Hz'),
    ParameterSpec('view.error_scale', 0.02, "A link this far from the sim's (or further) is red, half as far yellow, "
                  'on the spot green.', read_only=True, bounds=(1e-4, 10.0), unit='m'),
    ParameterSpec('view.alpha', 0.4, "The ghost's opacity.", read_only=True, bounds=(0.0, 1.0)),
    ParameterSpec('view.legend_xyz', [0.0, -0.6, 0.8], "Where the colour scale's legend stands in the world frame "
                  '(markers in namespace legend).', read_only=True, unit='m'),
    ParameterSpec('view.mesh_dir', '', "Folder of the mesh geoms' STL files (empty = ~/.cache/shadow_twin/meshes).",
                  read_only=True),
)


THRESHOLD_PARAMS = ('thresholds.warn', 'thresholds.error', 'threshold_overrides')
BASE_THRESHOLD_PARAMS = ('base_thresholds.position.warn', 'base_thresholds.position.error',
                         'base_thresholds.yaw.warn', 'base_thresholds.yaw.error')
#: The drift watch's parameters that may change at runtime, in DriftWatch.set_ratio's order.
DRIFT_PARAMS = ('drift.ratio', 'drift.min_error', 'drift.min_motion')
#: ``effort.*`` parameters that may change at run time (the watch's EffortSettings).
EFFORT_PARAMS = ('effort.k_warn', 'effort.k_error', 'effort.fallback_sigma', 'effort.sigma_overrides',
                 'effort.debounce_samples', 'effort.debounce_time', 'effort.hold_time')
#: The object thresholds, in ObjectThresholds.from_config's order.
OBJECT_THRESHOLD_PARAMS = ('objects.warn_position', 'objects.error_position', 'objects.warn_angle',
                           'objects.error_angle')
#: ``param(name)``: a parameter's current value.
Getter = Callable[[str], Any]


def odom_topics(param: Getter) -> tuple[str, str] | None:
    """(real, sim) odometry topics, or None when both are empty (no base). Raises ConfigError
    when only one is set, or both are the same."""
    real, sim = (str(param(n) or '').strip() for n in ('real_odom_topic', 'sim_odom_topic'))
    if not real and not sim:
        return None
    if not real or not sim:
        raise ConfigError(f'real_odom_topic ({real!r}) and sim_odom_topic ({sim!r}): set both to compare the '
                          'bases, or neither')
    if real == sim:
        raise ConfigError(f'real_odom_topic and sim_odom_topic are both {real}')
    return real, sim


def thresholds(param: Getter, changed: dict) -> monitor.Thresholds:
    """Joint thresholds from the current parameters with ``changed`` {name: value} applied.
    Raises ConfigError."""
    values = {name: changed.get(name, param(name)) for name in THRESHOLD_PARAMS}
    return monitor.Thresholds.from_config(values['thresholds.warn'], values['thresholds.error'],
                                          values['threshold_overrides'])


def base_thresholds(param: Getter, changed: dict) -> base_error.BaseThresholds:
    """Base thresholds from the current parameters with ``changed`` {name: value} applied.
    Raises ConfigError."""
    return base_error.BaseThresholds.from_config(*(changed.get(name, param(name)) for name in BASE_THRESHOLD_PARAMS))


def drift_settings(param: Getter, changed: dict | None = None) -> drift.DriftSettings:
    """The drift watch's settings from the current parameters with ``changed`` applied. Raises
    ConfigError (window < bucket, ratio <= 1, ...)."""
    changed = changed or {}
    return drift.DriftSettings(*(float(changed.get(f'drift.{k}', param(f'drift.{k}')))
                                 for k in ('window', 'bucket', 'ratio', 'min_error', 'min_motion')))


def parse_sigmas(text: str) -> dict[str, float]:
    """``effort.sigma_overrides`` YAML {joint glob: sigma} ('' = none). Raises ConfigError."""
    data = yaml_mapping(text, 'effort.sigma_overrides', '{joint glob: sigma}') or {}
    return {str(k): v for k, v in data.items()}


def effort_settings(param: Getter, changed: dict | None = None) -> EffortSettings:
    """The watch's settings from the parameters with ``changed`` {name: value} applied. Raises ConfigError."""
    changed = changed or {}

    def v(name):
        return changed.get(f'effort.{name}', param(f'effort.{name}'))
    return EffortSettings(float(v('k_warn')), float(v('k_error')), float(v('fallback_sigma')),
                          parse_sigmas(v('sigma_overrides')), int(v('debounce_samples')), float(v('debounce_time')),
                          float(v('hold_time')), int(v('window')), float(v('max_gap')))


def drive_gains(text: str, name: str = 'effort.drive_gains') -> dict[str, float] | None:
    """Parameter ``name``: YAML {joint glob: N m/A}, '' -> None (the nominal UR5 figures). Raises
    ConfigError (malformed, not a mapping, a gain not a number > 0). Also the sim bridge's ``drive_gains``."""
    data = yaml_mapping(text, name, '{joint glob: N m/A}')
    if data is None:
        return None
    for glob, gain in data.items():
        if not isinstance(gain, (int, float)) or isinstance(gain, bool) or not math.isfinite(gain) or gain <= 0:
            raise ConfigError(f'{name}: gain of {glob!r} = {gain!r} must be a number > 0 (N m/A)')
    return {str(k): float(v) for k, v in data.items()}


def object_names(names) -> list[str]:
    """The objects of ``objects.names`` ('' entries left out). Raises ConfigError for a name that cannot be
    a topic's name part (letters, digits, '_', not starting with a digit) or a repeated one."""
    out = []
    for name in (str(n).strip() for n in names):
        if not name:
            continue
        if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', name):
            raise ConfigError(f'object name {name!r} cannot be part of a topic name (letters, digits, _)')
        if name in out:
            raise ConfigError(f'object {name!r} is listed twice')
        out.append(name)
    return out


def object_thresholds(param: Getter, changed: dict | None = None) -> object_error.ObjectThresholds:
    """Object thresholds from the parameters with ``changed`` applied. Raises ConfigError (error < warn)."""
    changed = changed or {}
    return object_error.ObjectThresholds.from_config(*(changed.get(name, param(name))
                                                       for name in OBJECT_THRESHOLD_PARAMS))


#: The monitor's settings: one attribute per parameter of :data:`SPECS` (``drift.ratio`` -> ``drift_ratio``),
#: and what the node builds from several of them: ``thresholds`` (the joints'), ``base_thresholds``,
#: ``odom_topics`` ((real, sim), or None: no base) and ``object_thresholds``; ``objects_names`` is a list
#: without the '' entries.
MonitorSettings = settings_class('MonitorSettings', SPECS, derived={
    'thresholds': monitor.Thresholds, 'odom_topics': tuple | None, 'base_thresholds': base_error.BaseThresholds,
    'object_thresholds': object_error.ObjectThresholds}, parsed={'objects.names': list}, module=__name__)


def read_settings(param: Getter) -> MonitorSettings:
    """The monitor's :class:`MonitorSettings` from its parameters (``param(name)``: a value). Raises
    ConfigError: invalid joint thresholds, only one odometry topic (or both the same), invalid base
    thresholds, invalid object thresholds (checked in that order, also without a base or objects)."""
    joints = thresholds(param, {})
    odom = odom_topics(param)
    return MonitorSettings.read(param, thresholds=joints, odom_topics=odom, base_thresholds=base_thresholds(param, {}),
                                object_thresholds=object_thresholds(param))


def invalid_change(param: Getter, changed: dict) -> str | None:
    """Why the parameter values ``changed`` {name: value} are invalid together with the others
    (thresholds error < warn, ...), or None."""
    try:
        if any(name in changed for name in THRESHOLD_PARAMS):
            thresholds(param, changed)
        if any(name in changed for name in BASE_THRESHOLD_PARAMS):
            base_thresholds(param, changed)
        if any(name in changed for name in DRIFT_PARAMS):
            drift_settings(param, changed)
        if any(name in changed for name in EFFORT_PARAMS):
            effort_settings(param, changed)
    except ConfigError as exc:
        return str(exc)
    return None
