"""The twin goal, ROS-free: one FollowJointTrajectory goal for the robots and the sim
(``shadow_twin.ros.twin`` is its ROS side). By concept:

* ``config``: the twin's modes and the real controllers with the joints each drives;
* ``split``: which goal joints go to which controller, and each one's slice of the goal;
* ``timing``: the goal's stamp, the one start every part gets, the acceptance deadline, the
  liveness rule;
* ``desired``: the desired state of a running goal (the JTC's interpolation, the UR's speed
  scaling);
* ``verdict``: how the controller goals ended and the twin goal's verdict.

The names are re-exported here: ``shadow_twin.control.twin_split``, their module before issue 35,
stays importable for one release (:mod:`shadow_twin.common.moved`) and gives this package.
"""

from shadow_twin.twin.config import MODES, SIM, ControllerSpec, base_sides, controllers_from_config, parse_mode
from shadow_twin.twin.desired import DesiredSampler, state_arrays
from shadow_twin.twin.split import GoalSplit, filter_tolerances, pick, split_goal
from shadow_twin.twin.timing import STAMP_MATCH, acceptance_deadline, goal_stamp, oldest_state, start_stamp
from shadow_twin.twin.verdict import REACHED_JOINTS, ControllerResult, decide

__all__ = ['MODES', 'SIM', 'ControllerSpec', 'base_sides', 'controllers_from_config', 'parse_mode',
           'DesiredSampler', 'state_arrays', 'GoalSplit', 'filter_tolerances', 'pick', 'split_goal',
           'STAMP_MATCH', 'acceptance_deadline', 'goal_stamp', 'oldest_state', 'start_stamp',
           'REACHED_JOINTS', 'ControllerResult', 'decide']
