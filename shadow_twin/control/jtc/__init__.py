"""Goal validation and tolerance semantics of ros2_controllers' joint trajectory controller.

ROS-free: nothing here imports ROS. Messages are read duck-typed (attributes of
``trajectory_msgs/JointTrajectory``, ``control_msgs/JointTolerance`` and
``control_msgs/action/FollowJointTrajectory`` goals), so the MuJoCo bridge's
simulated trajectory controller and the twin's ``FollowJointTrajectory`` action
server share one implementation, and the tests run without ROS.

Modules (every public name is re-exported here: use ``from shadow_twin.control import jtc``,
then ``jtc.X``):

* :mod:`~shadow_twin.control.jtc.result_codes`: ``Result.error_code`` values
  (``control_msgs/action/FollowJointTrajectory.action``), goal outcomes,
  verdicts and :class:`GoalRejected`.
* :mod:`~shadow_twin.control.jtc.goal_validation`: which goals are rejected
  (joint_trajectory_controller.cpp ``validate_trajectory_msg`` and
  ``validate_trajectory_point_field``).
* :mod:`~shadow_twin.control.jtc.joint_limits`: the joint limits goals are checked against, and
  those of a model.
* :mod:`~shadow_twin.control.jtc.tolerances`: default and per-goal tolerances
  (tolerances.hpp ``StateTolerances``/``SegmentTolerances``, both
  ``get_segment_tolerances``, ``resolve_tolerance_source``: > 0 overrides,
  0 keeps the default, -1 erases; a tolerance of 0 is not checked).
* :mod:`~shadow_twin.control.jtc.state_checks`: path tolerance while moving,
  goal tolerance and ``goal_time`` after the last point (``update``,
  ``check_state_tolerance_per_joint``, ``compute_error_for_joint``: error =
  desired - actual, shortest angular distance for continuous joints).

Upstream reference: ros-controls/ros2_controllers, Jazzy, 4.x.

Rules added by the twin, not in the Jazzy JTC (which rejects none of these in
``validate_trajectory_msg``): duplicate joint names, NaN/inf values, a negative
first ``time_from_start``, position limits and velocity limits (explicit point
velocities and the average velocity a segment implies). Result codes for a
rejected goal follow the ROS 1 joint_trajectory_controller (``goalCB``), which
answered joint-name problems with ``INVALID_JOINTS`` and everything else with
``INVALID_GOAL``; the ROS 2 JTC rejects goals without a result.

Units: positions rad (m for prismatic joints), velocities rad/s, accelerations
rad/s^2, times s.
"""

from shadow_twin.control.jtc.goal_validation import check_time_from_start, validate_goal, validate_goal_msg
from shadow_twin.control.jtc.joint_limits import LIMIT_SLACK, JointLimits, joint_limits_from_model
from shadow_twin.control.jtc.result_codes import (GOAL_TOLERANCE_VIOLATED, INVALID_GOAL, INVALID_JOINTS,
                                                  OLD_HEADER_TIMESTAMP, PATH_TOLERANCE_VIOLATED, RUNNING_VERDICT,
                                                  SUCCESSFUL, GoalOutcome, GoalRejected, ResultCode, Verdict,
                                                  result_name)
from shadow_twin.control.jtc.state_checks import check_goal, check_path, check_state
from shadow_twin.control.jtc.tolerances import (DEFAULT_STOPPED_VELOCITY, ERASE_TOLERANCE, StateTolerance, Tolerances,
                                                default_tolerances, goal_tolerances, resolve_tolerance,
                                                tolerances_for_goal, tolerances_from_goal)

__all__ = [
    'DEFAULT_STOPPED_VELOCITY', 'ERASE_TOLERANCE', 'GOAL_TOLERANCE_VIOLATED', 'INVALID_GOAL', 'INVALID_JOINTS',
    'LIMIT_SLACK', 'OLD_HEADER_TIMESTAMP', 'PATH_TOLERANCE_VIOLATED', 'RUNNING_VERDICT', 'SUCCESSFUL',
    'GoalOutcome', 'GoalRejected', 'JointLimits', 'ResultCode', 'StateTolerance', 'Tolerances', 'Verdict',
    'check_goal', 'check_path', 'check_state', 'check_time_from_start', 'default_tolerances', 'goal_tolerances',
    'joint_limits_from_model', 'resolve_tolerance', 'result_name', 'tolerances_for_goal', 'tolerances_from_goal',
    'validate_goal', 'validate_goal_msg',
]
