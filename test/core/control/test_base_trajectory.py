"""Tests of the mobile base's trajectories and goals (shadow_twin.control.base.trajectory): sampling
and yaw unwrapping, the goal rules of validate_base_goal, MultiDOFJointTrajectory messages, and
the tolerances a goal gives the follower (base_tolerances_from_goal). Messages are
types.SimpleNamespace stand-ins. The follower: test_base_follower.py."""

import math
from types import SimpleNamespace as NS

import numpy as np
import pytest

from shadow_twin.common.errors import TrajectoryError
from shadow_twin.common.stamps import to_sec_nanosec
from shadow_twin.control.base.follower import BaseTolerances, base_tolerances_from_goal
from shadow_twin.control.base.trajectory import (BaseLimits, BaseTrajectory, base_trajectory_from_msg, unwrap_yaw,
                                                 validate_base_goal, yaw_from_quaternion)
from shadow_twin.control.jtc import INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP, GoalRejected


# ---------------------------------------------------------------------------------------
# Base trajectories
# ---------------------------------------------------------------------------------------
def test_sampling_is_linear_between_pose_points():
    trajectory = BaseTrajectory.from_points([(0.0, 0, 0, 0), (2.0, 1.0, 0.5, 0.4)])
    sample = trajectory.sample(1.0)
    assert sample.pose == pytest.approx((0.5, 0.25, 0.2))
    assert (sample.x_dot, sample.y_dot, sample.yaw_rate) == pytest.approx((0.5, 0.25, 0.2))
    after = trajectory.sample(5.0)
    assert after.pose == pytest.approx((1.0, 0.5, 0.4)) and after.x_dot == 0.0 and after.yaw_rate == 0.0
    many = trajectory.sample(np.array([0.0, 1.0, 2.0]))
    assert many.x == pytest.approx([0.0, 0.5, 1.0])


def test_yaw_is_unwrapped_to_turn_the_short_way():
    trajectory = BaseTrajectory.from_points([(0.0, 0, 0, 3.0), (1.0, 0, 0, -3.0)])
    assert trajectory.poses[1, 2] == pytest.approx(2 * math.pi - 3.0)   # +0.28 rad, through pi
    assert trajectory.sample(0.5).yaw == pytest.approx(math.pi)
    assert unwrap_yaw([0.1, 6.3, -0.1]) == pytest.approx([0.1, 6.3 - 2 * math.pi, -0.1])
    # a start pose joins the same way: from yaw -3.1 to point 0 at yaw 3.1 turns -0.08 rad, through -pi
    started = BaseTrajectory.from_points([(1.0, 0, 0, 3.1)]).with_start((0.0, 0.0, -3.1))
    assert started.times == pytest.approx([0.0, 1.0])
    assert started.poses[1, 2] - started.poses[0, 2] == pytest.approx(6.2 - 2 * math.pi)


def test_sampling_with_velocities_is_cubic():
    trajectory = validate_base_goal([(0.0, 0, 0, 0, 0, 0, 0), (1.0, 0.5, 0, 0, 1.0, 0, 0), (2.0, 1.0, 0, 0, 0, 0, 0)])
    assert trajectory.velocities is not None
    assert trajectory.sample(1.0).x_dot == pytest.approx(1.0)
    assert trajectory.sample(0.5).x == pytest.approx(0.125)   # Hermite: 0.5 s^2 with p 0 -> 0.5, v 0 -> 1
    assert trajectory.sample(0.0).x_dot == pytest.approx(0.0)


def test_from_points_checks_its_arrays():
    with pytest.raises(TrajectoryError, match='strictly increasing'):
        BaseTrajectory.from_points([(1.0, 0, 0, 0), (1.0, 1, 0, 0)])
    with pytest.raises(TrajectoryError, match='4 .* or 7'):
        BaseTrajectory.from_points([(0.0, 0, 0)])


# ---------------------------------------------------------------------------------------
# Goal rules
# ---------------------------------------------------------------------------------------
GOOD = [(0.0, 0.0, 0.0, 0.0), (2.0, 1.0, 0.0, 0.0), (4.0, 1.0, 1.0, math.pi / 2)]


def rejected(points=GOOD, **kwargs) -> GoalRejected:
    with pytest.raises(GoalRejected) as info:
        validate_base_goal(points, **kwargs)
    return info.value


def test_a_good_goal_is_accepted():
    trajectory = validate_base_goal(GOOD)
    assert trajectory.duration == 4.0 and trajectory.frame_id == 'odom' and trajectory.joint_name == 'virtual_joint'
    assert trajectory.end_pose == pytest.approx((1.0, 1.0, math.pi / 2))


@pytest.mark.parametrize('index, value_index, label', [(1, 1, 'x'), (2, 3, 'yaw'), (1, 0, 'time_from_start')])
def test_nan_values_are_rejected_naming_point_and_value(index, value_index, label):
    points = [list(p) for p in GOOD]
    points[index][value_index] = float('nan')
    error = rejected(points)
    assert error.error_code == INVALID_GOAL
    assert f'point {index}' in str(error) and label in str(error) and 'NaN' in str(error)
    points[index][value_index] = float('inf')
    assert 'inf' in str(rejected(points))


def test_non_increasing_time_is_rejected():
    points = [GOOD[0], (2.0, 1.0, 0.0, 0.0), (2.0, 1.0, 1.0, 0.0)]
    error = rejected(points)
    assert error.error_code == INVALID_GOAL
    assert 'not strictly increasing' in str(error) and 'point 1' in str(error) and 'point 2' in str(error)
    assert 'negative' in str(rejected([(-1.0, 0, 0, 0), (1.0, 0, 0, 0)]))


def test_segment_faster_than_2_m_per_s_is_rejected():
    error = rejected([(0.0, 0, 0, 0), (1.0, 1.0, 0, 0), (2.0, 3.5, 0, 0)])   # 2.5 m/s from point 1 to 2
    assert error.error_code == INVALID_GOAL
    assert 'segment from point 1 to point 2' in str(error) and '2.5 m/s' in str(error) and 'limit 2 m/s' in str(error)
    validate_base_goal([(0.0, 0, 0, 0), (1.0, 2.0, 0, 0)])   # at the limit: accepted
    # a configured limit, and the yaw-rate limit
    assert 'limit 0.5 m/s' in str(rejected([(0.0, 0, 0, 0), (1.0, 1.0, 0, 0)], limits=BaseLimits(max_speed=0.5)))
    error = rejected([(0.0, 0, 0, 0), (1.0, 0, 0, 2.0)])
    assert 'turns 2 rad' in str(error) and 'limit 1.5 rad/s' in str(error)
    # explicit point velocities
    error = rejected([(0.0, 0, 0, 0, 0, 0, 0), (2.0, 1.0, 0, 0, 2.1, 0.5, 0), (4.0, 2.0, 0, 0, 0, 0, 0)])
    assert 'point 1: speed' in str(error)
    # from the current pose to point 0
    error = rejected([(1.0, 3.0, 0, 0)], current_pose=(0.0, 0.0, 0.0))
    assert 'segment from the current pose to point 0' in str(error)


def test_last_point_must_be_at_rest():
    error = rejected([(0.0, 0, 0, 0, 0, 0, 0), (2.0, 1.0, 0, 0, 0.2, 0, 0)])
    assert error.error_code == INVALID_GOAL and 'last point (1)' in str(error) and 'x_dot' in str(error)


def test_frame_other_than_odom_is_rejected():
    error = rejected(frame_id='map')
    assert error.error_code == INVALID_GOAL and "'map'" in str(error) and "'odom'" in str(error)
    assert "''" in str(rejected(frame_id=''))
    validate_base_goal(GOOD, frame_id='world', expected_frame='world')   # configurable


def test_unknown_joint_name_is_rejected():
    error = rejected(joint_names=['base_joint'])
    assert error.error_code == INVALID_JOINTS and "'base_joint'" in str(error) and "'virtual_joint'" in str(error)
    assert rejected(joint_names=[]).error_code == INVALID_JOINTS
    error = rejected(joint_names=['virtual_joint', 'virtual_joint'])
    assert error.error_code == INVALID_JOINTS and '2 times' in str(error)
    validate_base_goal(GOOD, joint_names=['mir_joint'], joint_name='mir_joint')   # configurable


def test_empty_and_malformed_goals_are_rejected():
    assert 'no points' in str(rejected([]))
    assert 'point 1 has 5 values' in str(rejected([(0.0, 0, 0, 0), (1.0, 0, 0, 0, 0)]))


def duration(t):
    sec, nanosec = to_sec_nanosec(t)
    return NS(sec=sec, nanosec=nanosec)


def transform(x, y, yaw, z=0.0, roll=0.0):
    # rotation about z by yaw, then (for the non-planar case) about x by roll
    cy, sy, cr, sr = math.cos(yaw / 2), math.sin(yaw / 2), math.cos(roll / 2), math.sin(roll / 2)
    return NS(translation=NS(x=x, y=y, z=z), rotation=NS(x=cy * sr, y=sy * sr, z=sy * cr, w=cy * cr))


def multi_dof(points, frame_id='odom', joint_names=('virtual_joint',), stamp=0.0):
    return NS(header=NS(frame_id=frame_id, stamp=duration(stamp)), joint_names=list(joint_names),
              points=[NS(time_from_start=duration(t), transforms=[transform(*pose)], velocities=list(vel),
                         accelerations=[]) for t, pose, vel in points])


def test_multi_dof_message_is_converted():
    twist = NS(linear=NS(x=0.25, y=0.0, z=0.0), angular=NS(x=0.0, y=0.0, z=0.1))
    rest = NS(linear=NS(x=0.0, y=0.0, z=0.0), angular=NS(x=0.0, y=0.0, z=0.0))
    msg = multi_dof([(0.0, (0, 0, 0), [rest]), (2.0, (0.5, 0.0, 0.2), [twist]), (4.0, (1.0, 0.0, 3.0), [rest])])
    trajectory = base_trajectory_from_msg(msg)
    assert trajectory.poses[:, 2] == pytest.approx([0.0, 0.2, 3.0])
    assert trajectory.velocities[1] == pytest.approx([0.25, 0.0, 0.1])
    assert yaw_from_quaternion(0, 0, math.sin(1.0), math.cos(1.0)) == pytest.approx(2.0)
    # velocities missing at a point: poses only (linear interpolation)
    msg.points[2].velocities = []
    assert base_trajectory_from_msg(msg).velocities is None


def test_multi_dof_message_rules():
    good = [(1.0, (0, 0, 0), []), (3.0, (1.0, 0, 0), [])]
    assert base_trajectory_from_msg(multi_dof(good)).duration == 3.0
    with pytest.raises(GoalRejected, match="frame 'map'"):
        base_trajectory_from_msg(multi_dof(good, frame_id='map'))
    with pytest.raises(GoalRejected, match="joint.*'base'") as info:
        base_trajectory_from_msg(multi_dof(good, joint_names=['base']))
    assert info.value.error_code == INVALID_JOINTS
    with pytest.raises(GoalRejected, match='point 1: transform is not planar'):
        base_trajectory_from_msg(multi_dof([good[0], (3.0, (1.0, 0, 0, 0.0, 0.2), [])]))
    with pytest.raises(GoalRejected, match='point 0: transform x is nan'):
        base_trajectory_from_msg(multi_dof([(1.0, (float('nan'), 0, 0), []), good[1]]))
    with pytest.raises(GoalRejected, match='point 1 at 1 s'):
        base_trajectory_from_msg(multi_dof([good[0], (1.0, (1.0, 0, 0), [])]))
    with pytest.raises(GoalRejected, match='point 1 has 2 transforms'):
        msg = multi_dof(good)
        msg.points[1].transforms *= 2
        base_trajectory_from_msg(msg)
    # stamped in the past and over: OLD_HEADER_TIMESTAMP; still running: accepted
    with pytest.raises(GoalRejected) as info:
        base_trajectory_from_msg(multi_dof(good, stamp=100.0), now=104.0)
    assert info.value.error_code == OLD_HEADER_TIMESTAMP
    base_trajectory_from_msg(multi_dof(good, stamp=100.0), now=102.0)


def test_tolerances_from_goal_components():
    defaults = BaseTolerances(goal_position=0.05, goal_yaw=0.05, goal_time=2.0)
    goal = NS(component_path_tolerance=[NS(joint_name='virtual_joint', component=4, position=0.3)],
              component_goal_tolerance=[NS(joint_name='virtual_joint', component=5, position=-1.0)],
              goal_time_tolerance=duration(0.5))
    tolerances = base_tolerances_from_goal(defaults, goal)
    assert (tolerances.path_position, tolerances.goal_position, tolerances.goal_yaw) == (0.3, 0.05, 0.0)
    assert tolerances.goal_time == pytest.approx(0.5)
    bad = NS(component_goal_tolerance=[NS(joint_name='virtual_joint', component=1, position=0.1)])
    with pytest.raises(GoalRejected, match='X_AXIS'):
        base_tolerances_from_goal(defaults, bad)
    bad = NS(component_goal_tolerance=[NS(joint_name='arm', component=4, position=0.1)])
    with pytest.raises(GoalRejected, match="'arm'"):
        base_tolerances_from_goal(defaults, bad)
