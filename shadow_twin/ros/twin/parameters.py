"""The twin server's (the ``shadow_twin`` node's) ROS parameters: :data:`SPECS` (the shared groups
of :mod:`shadow_twin.ros.parameters` it declares, its own, and the ``base.*`` ones of
:mod:`shadow_twin.ros.twin.base.settings`), the real controllers' (:data:`CONTROLLER_SPECS`,
:func:`declare_controllers`), and the typed settings its goal handling reads
(:class:`TwinSettings`, :func:`read_settings`).

Its ``constraints.*`` parameters depend on the model's joints:
:func:`shadow_twin.ros.parameters.constraint_specs` lists them.
"""

from __future__ import annotations

from typing import Callable

from rclpy.node import Node

from shadow_twin.common.errors import ConfigError
from shadow_twin.twin.config import ControllerSpec, controllers_from_config
from shadow_twin.model.cell.assembly import UR5_JOINTS
from shadow_twin.ros.twin.base.settings import BASE_SPECS, BaseSettings, read_base_settings
from shadow_twin.ros.parameters import GOAL_HANDLING_SPECS, JOINT_STATE_INPUT_SPECS, ParameterSpec
from shadow_twin.ros.settings import settings_class

SPECS = GOAL_HANDLING_SPECS + (
    ParameterSpec('cell_config', '', "Cell YAML (config/cell.yaml; package://shadow_twin/config/cell.yaml): when "
                  "model_path is empty, goals are checked against the joints of the cell built from it (MiR250 + UR5 "
                  "+ hand); empty = model_path's model.", read_only=True),
    ParameterSpec('mode', 'both', 'sim | real | both: where goals go; shadow: the sim follows the robots\' own '
                  'controllers (driven by other tools) and every goal is refused (the preview still answers).',
                  read_only=True),
    ParameterSpec('action_name', '/twin/follow_joint_trajectory', 'FollowJointTrajectory action served.',
                  read_only=True),
    ParameterSpec('sim_action', '/sim/follow_joint_trajectory', 'Action of the simulated controller.', read_only=True),
) + JOINT_STATE_INPUT_SPECS + (
    ParameterSpec('speed_scaling_topic', '', "std_msgs/Float64 speed scaling of the arm, % (the UR driver's "
                  '/speed_scaling_state_broadcaster/speed_scaling): the desired state of the speed_scaled_joints runs '
                  'at it; empty = not followed (100 %).', read_only=True),
    ParameterSpec('server_timeout', 1.0, 'Wait for a controller action server at goal time.', bounds=(0.0, 60.0),
                  unit='s'),
    ParameterSpec('start_lead', 0.25, 'Start an unstamped goal this long after it arrives; every controller must '
                  'accept its part by accept_margin before that start, or the goal is rejected and nothing moves.',
                  bounds=(0.05, 10.0), unit='s'),
    ParameterSpec('accept_margin', 0.05, 'Every controller must accept its part this long before the common start: '
                  'the cancels of a goal refused then (another part late or rejected) must reach the controllers '
                  "before its start, or its parts preempt the running goal's.", bounds=(0.01, 1.0), unit='s'),
    ParameterSpec('start_lead_per_point', 2e-4, 'Added to start_lead per trajectory point: each controller parses '
                  'and checks every point before it accepts (10,000 points: +2 s).', bounds=(0.0, 0.01),
                  unit='s per point'),
    ParameterSpec('joint_state_timeout', 0.2, 'A controller whose joint states (of the goal joints) are older than '
                  'this counts as gone: a running goal aborts, a new goal is rejected.', bounds=(0.01, 10.0), unit='s'),
    ParameterSpec('sim_joint_state_timeout', 0.5, "The same for the sim's joint states: the sim runs on the lab PC "
                  'beside the twin and a stalled sim moves nothing real, so a busy PC is given longer.',
                  bounds=(0.01, 10.0), unit='s'),
    ParameterSpec('feedback_timeout', 1.0, 'A controller that sends no feedback on its running goal for this long '
                  'counts as gone.', bounds=(0.05, 60.0), unit='s'),
) + BASE_SPECS + (
    ParameterSpec('preview', 'auto', 'Goal preview (docs/preview.md): enforce = a goal predicted to fail is rejected '
                  'before any controller is called; warn = it runs and the prediction is logged; off = no prediction; '
                  'auto = enforce in modes real and both, off in sim and shadow.',
                  choices=('auto', 'off', 'warn', 'enforce')),
    ParameterSpec('preview_action_name', '/twin/preview', 'FollowJointTrajectory action that previews a goal '
                  '(nothing moves).', read_only=True),
    ParameterSpec('preview_result_topic', '/twin/preview_result', 'std_msgs/String: every prediction as JSON.',
                  read_only=True),
    ParameterSpec('preview_config', '', "The preview's checks and limits (YAML; config/preview.yaml); empty = the "
                  'shipped config/preview.yaml.', read_only=True),
    ParameterSpec('scene_file', '', "The sim's scene (its bridge's scene_file, YAML): the preview simulates its "
                  'objects and judges the held ones (docs/preview.md); empty = none.', read_only=True),
    ParameterSpec('preview_objects_prefix', '/mujoco_bridge/objects', "The sim bridge's object poses "
                  '(<prefix>/<name>/pose, its object_pose_topic_prefix): where a prediction starts the objects.',
                  read_only=True),
    ParameterSpec('preview_setpoints_topic', '', "The sim's controller_state (its bridge's, with "
                  'controller_state_rate > 0): the setpoints the joints a goal leaves out hold in a prediction '
                  '(fingers squeezing a held object); empty = they hold where they stand.', read_only=True),
    ParameterSpec('preview_gains_file', '', "The sim bridge's drive gains the preview simulates with; empty = "
                  'the shipped config/controllers/<model>.yaml (cell.yaml for the cell, ur5.yaml for ur5.xml), else '
                  'shadow_hand_e.yaml.',
                  read_only=True),
)
#: The reason every goal gets in mode shadow.
SHADOW_REJECTION = ('the twin is in shadow mode: the sim follows the robots\' own controllers; send goals to them, '
                    'or restart the twin with mode sim/real/both')

UR_ACTION = '/scaled_joint_trajectory_controller/follow_joint_trajectory'
#: The real controllers' defaults by name (``real_controllers``; ``controllers.<name>.*`` override them).
DEFAULT_CONTROLLERS = {
    'hand': {'action': '/rh_trajectory_controller/follow_joint_trajectory', 'joints': ['rh_*']},
    'arm': {'action': UR_ACTION, 'joints': list(UR5_JOINTS)},
    'ur_arm': {'action': UR_ACTION, 'joints': list(UR5_JOINTS)},
}
#: The real controllers' parameters (:func:`declare_controllers`): ``real_controllers``, then for each name
#: in it ``controllers.<name>.action`` and ``.joints`` (defaults: :data:`DEFAULT_CONTROLLERS`; '' and [''] else).
CONTROLLER_SPECS = (
    ParameterSpec('real_controllers', ['hand', 'arm'], 'Names of the real controllers a goal is split between (mode '
                  'real and both), each one with its controllers.<name>.action and .joints; hand, arm and ur_arm have '
                  'defaults.'),
    ParameterSpec('controllers.<name>.action', '', 'FollowJointTrajectory action of the real controller <name> '
                  "(hand: /rh_trajectory_controller/follow_joint_trajectory; arm, ur_arm: the UR's "
                  f'{UR_ACTION}).'),
    ParameterSpec('controllers.<name>.joints', [''], 'Globs of the joints of the real controller <name>; the first '
                  'controller whose globs match a joint takes it (hand: rh_*; arm, ur_arm: the UR5 joints).'),
)


#: What a predicted failure does to a twin goal (the ``preview`` parameter; ``auto`` picks one by mode).
PREVIEW_POLICIES = ('off', 'warn', 'enforce')


def preview_policy(setting: str, mode: str) -> str:
    """The ``preview`` parameter's policy: ``off``, ``warn`` or ``enforce``; ``auto`` is ``enforce``
    in modes ``real`` and ``both`` (the robots move) and ``off`` in ``sim`` and ``shadow``.
    Raises ConfigError for another value."""
    value = str(setting).strip().lower()
    if value == 'auto':
        return 'enforce' if mode in ('real', 'both') else 'off'
    if value not in PREVIEW_POLICIES:
        raise ConfigError(f'preview must be one of {["auto", *PREVIEW_POLICIES]}, got {setting!r}')
    return value


def declare_controllers(node: Node) -> list[ControllerSpec]:
    """Declare and read ``real_controllers`` and each one's ``controllers.<name>.action`` and
    ``.joints`` on ``node`` (:data:`CONTROLLER_SPECS`: descriptions in their descriptors). Raises
    ShadowTwinError for a bad configuration."""
    listing, action_spec, joints_spec = CONTROLLER_SPECS
    names = node.declare_parameter(listing.name, list(listing.default), listing.descriptor()).value or []
    entries = {}
    for name in names:
        default = DEFAULT_CONTROLLERS.get(name, {'action': action_spec.default, 'joints': list(joints_spec.default)})
        action = node.declare_parameter(action_spec.name.replace('<name>', name), default['action'],
                                        _named(action_spec, name).descriptor()).value
        joints = node.declare_parameter(joints_spec.name.replace('<name>', name), list(default['joints']),
                                        _named(joints_spec, name).descriptor()).value
        entries[name] = {'action': action, 'joints': list(joints or [])}
    return controllers_from_config(list(names), entries)


def _named(spec: ParameterSpec, name: str) -> ParameterSpec:
    return ParameterSpec(spec.name.replace('<name>', name), spec.default, spec.description.replace('<name>', name))


#: The twin's settings, what its goal handling reads: one attribute per parameter of :data:`SPECS`
#: but the ``base.*`` ones, with ``velocity_limits`` parsed ({joint: rad/s}), ``constraints`` (the
#: JTC constraints of the model's joints), ``base`` (the ``base.*`` parameters as the base's
#: :class:`BaseSettings`, None without a base) and ``preview`` (the policy in force: off, warn or enforce).
TwinSettings = settings_class('TwinSettings', [spec for spec in SPECS if spec not in BASE_SPECS],
                              parsed={'velocity_limits': dict},
                              derived={'constraints': dict, 'base': BaseSettings | None, 'preview': str},
                              module=__name__)


def read_settings(p: Callable[[str], object], constraints: dict, base_enabled: bool, mode: str) -> TwinSettings:
    """The twin's :class:`TwinSettings` from its parameters (``p(name)``); ``constraints`` the JTC
    constraints read already, ``base_enabled`` whether it drives a base, ``mode`` the twin's ('shadow'
    for shadow mode). Raises ShadowTwinError (ConfigError) for a bad value."""
    return TwinSettings.read(p, constraints=constraints, base=read_base_settings(p) if base_enabled else None,
                             preview=preview_policy(p('preview'), mode))
