"""The twin server's (the ``shadow_twin`` node's) ROS parameters: :data:`SPECS` (the shared groups
of :mod:`shadow_twin.ros.parameters` it declares, its own, and the ``base.*`` ones of
:mod:`shadow_twin.ros.base_settings`), and :data:`ACCEPT_MARGIN`, which a description states.

Its ``constraints.*`` parameters depend on the model's joints:
:func:`shadow_twin.ros.parameters.constraint_specs` lists them.
"""

from __future__ import annotations

from shadow_twin.ros.base_settings import BASE_SPECS
from shadow_twin.ros.parameters import GOAL_HANDLING_SPECS, JOINT_STATE_INPUT_SPECS, ParameterSpec

#: Seconds before the common start by which every controller must have accepted its part
#: (the cancels of a goal that fails this reach the controllers before anything moves).
ACCEPT_MARGIN = 0.03
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
    ParameterSpec('speed_scaling_topic', '', "std_msgs/Float64 speed scaling of the arm, percent (the UR driver's "
                  '/speed_scaling_state_broadcaster/speed_scaling): the desired state of the speed_scaled_joints runs '
                  'at it; empty = not followed (100 %).', read_only=True),
    ParameterSpec('server_timeout', 1.0, 'Wait for a controller action server at goal time, s.', bounds=(0.0, 60.0)),
    ParameterSpec('start_lead', 0.25, 'Start an unstamped goal this long after it arrives, s; every controller must '
                  f'accept its part by {ACCEPT_MARGIN:g} s before that start, or the goal is rejected and nothing '
                  'moves.', bounds=(0.05, 10.0)),
    ParameterSpec('start_lead_per_point', 2e-4, 'Added to start_lead per trajectory point, s: each controller parses '
                  'and checks every point before it accepts (10,000 points: +2 s).', bounds=(0.0, 0.01)),
    ParameterSpec('joint_state_timeout', 0.2, 'A controller whose joint states (of the goal joints) are older than '
                  'this counts as gone: a running goal aborts, a new goal is rejected, s.', bounds=(0.01, 10.0)),
    ParameterSpec('feedback_timeout', 1.0, 'A controller that sends no feedback on its running goal for this long '
                  'counts as gone, s.', bounds=(0.05, 60.0)),
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
    ParameterSpec('preview_gains_file', '', "The sim bridge's drive gains the preview simulates with; empty = "
                  'the shipped config/controllers/<model>.yaml (cell.yaml for the cell, ur5.yaml for ur5.xml), else '
                  'shadow_hand_e.yaml.',
                  read_only=True),
    ParameterSpec('preview_timeout', 5.0, 'Longest wait for a prediction, s; a goal whose prediction takes longer is '
                  'rejected (enforce) or runs unpredicted (warn).', bounds=(0.1, 60.0)),
)
#: The reason every goal gets in mode shadow.
SHADOW_REJECTION = ('the twin is in shadow mode: the sim follows the robots\' own controllers; send goals to them, '
                    'or restart the twin with mode sim/real/both')
