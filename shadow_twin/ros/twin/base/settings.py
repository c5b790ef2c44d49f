"""The ``base.*`` ROS parameters of the twin server and what they are read into.

:data:`BASE_SPECS` declares them (defaults from the core's dataclasses:
:class:`~shadow_twin.control.base.follower.BaseTolerances`, ``TrackingGains``,
:class:`~shadow_twin.control.base.trajectory.BaseLimits`, ``DiffDriveGeometry``);
:func:`read_base_settings` and :func:`read_base_topics` read them into
:class:`BaseSettings` and :class:`BaseTopics` for :mod:`shadow_twin.ros.twin.base.driver`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from shadow_twin.common.errors import ConfigError
from shadow_twin.control.base.follower import BaseTolerances, config_from_mapping
from shadow_twin.control.base.tracking import TrackingGains
from shadow_twin.control.base.trajectory import DEFAULT_BASE_FRAME, DEFAULT_BASE_JOINT, BaseLimits
from shadow_twin.control.diff_drive import DiffDriveGeometry
from shadow_twin.ros.parameters import ParameterSpec
from shadow_twin.ros.settings import typed_value

#: What a goal does when a velocity command the twin did not send arrives on a base's cmd_vel topic.
OTHER_PUBLISHER_POLICIES = ('abort', 'warn')
_TOL = BaseTolerances()
_GAINS = TrackingGains()
_LIMITS = BaseLimits()
_GEOMETRY = DiffDriveGeometry()
#: The ``base.*`` parameters of the twin server.
BASE_SPECS = (
    ParameterSpec(
        'base.enabled', False, 'Drive a mobile base: goals may carry it in multi_dof_trajectory. false: a goal '
            'with a multi_dof_trajectory is rejected (a hand-only twin).', read_only=True),
    ParameterSpec(
        'base.joint_name', DEFAULT_BASE_JOINT, "The base's planar joint in multi_dof_trajectory (MoveIt's "
            'virtual joint).', read_only=True),
    ParameterSpec(
        'base.frame', DEFAULT_BASE_FRAME, 'Frame the base poses of a goal must be in (the odometry frame).',
            read_only=True),
    ParameterSpec(
        'base.control_rate', 50.0, 'Rate of the base control loop: follower ticks and TwistStamped commands.',
            read_only=True, bounds=(1.0, 500.0), unit='Hz'),
    ParameterSpec(
        'base.command_latency', 0.0, "The drives' dead time from a TwistStamped's stamp to its effect (the sim's "
            "cell model: cell.base.command_latency; the real MiR's, measured). > 0: each follower predicts its base's "
            'pose for when its command acts (a Smith predictor, shadow_twin/control/base/follower.py); with 0.1 s '
            'uncompensated the cell\'s sim base left a 0.9 m/s arc by 0.8 m. 0 = none.', read_only=True,
            bounds=(0.0, 1.0), unit='s'),
    ParameterSpec(
        'base.odom_timeout', 0.5, 'A base whose newest odometry is older than this is missing: a goal for it is '
            'rejected, a running one aborts.', bounds=(0.02, 10.0), unit='s'),
    ParameterSpec(
        'base.sim_odom_timeout', 1.0, "The same for the sim's base: the sim runs on the lab PC beside the twin and "
            'a stalled sim moves nothing real, so a busy PC is given longer (a loaded 2-core PC paused the cell '
            "sim's odometry 0.5 s without a fault).", bounds=(0.02, 10.0), unit='s'),
    ParameterSpec(
        'base.stop_hold_timeout', 10.0, 'After a run ends, zero twists are sent until its base reports rest on '
            'fresh odometry (at least 0.3 s); at most this long (a base whose odometry stopped: its bridge may '
            'resume and must find a zero command).', bounds=(0.3, 600.0), unit='s'),
    ParameterSpec(
        'base.other_publishers', 'abort', "A velocity command the twin did not send, arriving on a base's cmd_vel "
            "topic while a goal drives that base (a joystick, a navigation stack): 'abort' the goal (that base "
            "gets a zero twist at once, then the goal and the other base stop) or 'warn' only. A node that only "
            'holds a publisher there (an idle teleop, nav2) is never judged '
            '(shadow_twin/ros/twin/base/cmd_vel_watch.py).',
            choices=OTHER_PUBLISHER_POLICIES),
    ParameterSpec(
        'base.anchor.enabled', True, "Mode both: put the sim base on the real one (the sim bridge's SetEntityState) "
            'on start, after a sim reset or reload, before a base goal whose bases are apart and on ~/anchor_base: '
            'a goal never sends the sim base to cover a standing offset (shadow_twin/ros/twin/base/anchor.py).',
            read_only=True),
    ParameterSpec(
        'base.anchor.service', '/mujoco_bridge/set_entity_state', "The sim bridge's "
            'simulation_interfaces/srv/SetEntityState service.', read_only=True),
    ParameterSpec(
        'base.anchor.position_offset', 0.05, 'A base goal re-anchors the sim base first when the bases are farther '
            'apart than this.', bounds=(0.0, 100.0), unit='m'),
    ParameterSpec(
        'base.anchor.yaw_offset', 0.05, 'As position_offset, for yaw.', bounds=(0.0, 3.2), unit='rad'),
    ParameterSpec(
        'base.real.cmd_vel_topic', '/cmd_vel', 'geometry_msgs/TwistStamped commands of the real base (the MiR '
            'bridge).', read_only=True),
    ParameterSpec(
        'base.real.odom_topic', '/odom', 'nav_msgs/Odometry of the real base.', read_only=True),
    ParameterSpec(
        'base.real.base_frame', 'base_footprint', 'header.frame_id of the real TwistStamped commands.',
            read_only=True),
    ParameterSpec(
        'base.sim.cmd_vel_topic', '/sim/cmd_vel', "geometry_msgs/TwistStamped commands of the sim's base.",
            read_only=True),
    ParameterSpec(
        'base.sim.odom_topic', '/sim/odom', "nav_msgs/Odometry of the sim's base.", read_only=True),
    ParameterSpec(
        'base.sim.base_frame', 'sim/base_footprint', 'header.frame_id of the sim TwistStamped commands.',
            read_only=True),
    ParameterSpec(
        'base.limits.max_speed', _LIMITS.max_speed, 'Largest base speed of a goal and of a command '
            '(MiR250: 2 m/s).', bounds=(1e-3, 10.0), unit='m/s'),
    ParameterSpec(
        'base.limits.max_yaw_rate', _LIMITS.max_yaw_rate, 'Largest base yaw rate of a goal and of a command.',
            bounds=(1e-3, 20.0), unit='rad/s'),
    ParameterSpec(
        'base.wheel_radius', _GEOMETRY.wheel_radius, 'Drive wheel radius (for the wheel speed limit).',
            bounds=(1e-3, 10.0), unit='m'),
    ParameterSpec(
        'base.wheel_separation', _GEOMETRY.wheel_separation, 'Distance between the drive wheels.',
            bounds=(1e-3, 10.0), unit='m'),
    ParameterSpec(
        'base.gains.k_x', _GAINS.k_x, 'Along-track error -> speed.', bounds=(0.0, 1e3), unit='1/s'),
    ParameterSpec(
        'base.gains.k_y', _GAINS.k_y, 'Lateral error -> yaw rate per unit speed.', bounds=(0.0, 1e4), unit='1/m^2'),
    ParameterSpec(
        'base.gains.k_theta', _GAINS.k_theta, 'Heading error -> yaw rate per unit speed.', bounds=(0.0, 1e3),
            unit='1/m'),
    ParameterSpec(
        'base.gains.k_heading', _GAINS.k_heading, 'Heading error -> yaw rate at any speed.', bounds=(0.0, 1e3),
            unit='1/s'),
    ParameterSpec(
        'base.tolerances.path_position', _TOL.path_position, 'Largest base position error while the trajectory '
            'runs (0 = not checked); a goal overrides it (component_path_tolerance TRANSLATION).', bounds=(0.0, 1e6),
            unit='m'),
    ParameterSpec(
        'base.tolerances.path_yaw', _TOL.path_yaw, 'Largest base yaw error while the trajectory runs '
            '(0 = not checked).', bounds=(0.0, 1e6), unit='rad'),
    ParameterSpec(
        'base.tolerances.goal_position', _TOL.goal_position, 'Largest base position error at the goal.',
            bounds=(0.0, 1e6), unit='m'),
    ParameterSpec(
        'base.tolerances.goal_yaw', _TOL.goal_yaw, 'Largest base yaw error at the goal.', bounds=(0.0, 1e6),
            unit='rad'),
    ParameterSpec(
        'base.tolerances.goal_time', _TOL.goal_time, 'Time after the end within which the base must be within its '
            'goal tolerance (0 = wait indefinitely); a goal\'s goal_time_tolerance overrides it.', bounds=(0.0, 1e6),
            unit='s'),
    ParameterSpec(
        'base.tolerances.stopped_velocity', _TOL.stopped_velocity, 'Largest measured |v| and |omega| that count as '
            'stopped at the goal (0 = not checked).', bounds=(0.0, 1e6), unit='m/s, rad/s'),
)


@dataclass(frozen=True)
class BaseTopics:
    """One base's topics: TwistStamped commands, Odometry, and the commands' frame."""

    cmd_vel: str
    odom: str
    base_frame: str


@dataclass(frozen=True)
class BaseSettings:
    """The base's settings, read from the ``base.*`` parameters (see :data:`BASE_SPECS`)."""

    joint_name: str = DEFAULT_BASE_JOINT
    frame: str = DEFAULT_BASE_FRAME
    control_rate: float = 50.0
    command_latency: float = 0.0
    odom_timeout: float = 0.5
    sim_odom_timeout: float = 1.0
    stop_hold_timeout: float = 10.0
    other_publishers: str = 'abort'
    anchor_offsets: tuple[float, float] = (0.05, 0.05)
    limits: BaseLimits = field(default_factory=BaseLimits)
    gains: TrackingGains = field(default_factory=TrackingGains)
    tolerances: BaseTolerances = field(default_factory=BaseTolerances)
    geometry: DiffDriveGeometry = field(default_factory=DiffDriveGeometry)

    def odom_timeout_of(self, side: str) -> float:
        """The odometry timeout of ``side`` ('real': ``odom_timeout``, 'sim': ``sim_odom_timeout``), s."""
        return self.sim_odom_timeout if side == 'sim' else self.odom_timeout


def read_base_settings(get: Callable[[str], Any]) -> BaseSettings:
    """:class:`BaseSettings` from the parameter getter ``get(name) -> value``: each ``base.*`` value
    checked and typed by its spec (:func:`~shadow_twin.ros.settings.typed_value`), then grouped.
    Raises ConfigError (naming the parameter)."""
    v = {spec.name: typed_value(spec, get(spec.name)) for spec in BASE_SPECS}

    def section(cls, prefix: str):
        return config_from_mapping(cls, {n: v[f'{prefix}.{n}'] for n in cls.__dataclass_fields__}, prefix)
    joint_name = v['base.joint_name'].strip()
    if not joint_name:
        raise ConfigError('base.joint_name is empty: name the planar joint of multi_dof_trajectory')
    return BaseSettings(joint_name=joint_name, frame=v['base.frame'], other_publishers=v['base.other_publishers'],
                        stop_hold_timeout=v['base.stop_hold_timeout'],
                        anchor_offsets=(v['base.anchor.position_offset'], v['base.anchor.yaw_offset']),
                        control_rate=v['base.control_rate'], odom_timeout=v['base.odom_timeout'],
                        sim_odom_timeout=v['base.sim_odom_timeout'], command_latency=v['base.command_latency'],
                        limits=section(BaseLimits, 'base.limits'), gains=section(TrackingGains, 'base.gains'),
                        tolerances=section(BaseTolerances, 'base.tolerances'),
                        geometry=DiffDriveGeometry(v['base.wheel_radius'], v['base.wheel_separation']))


def read_base_topics(get: Callable[[str], Any], side: str) -> BaseTopics:
    """The topics of ``side`` ('real' or 'sim') from the ``base.<side>.*`` parameters."""
    return BaseTopics(str(get(f'base.{side}.cmd_vel_topic')), str(get(f'base.{side}.odom_topic')),
                      str(get(f'base.{side}.base_frame')))
