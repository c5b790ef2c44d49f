"""Tests of the base goal rules beyond the speed limits (shadow_twin.control.base.goal_rules):
point 0 by the JTC's rule, drivable segments, the start delay, and the follower's caps to the
trajectory's own speed profile. Messages are types.SimpleNamespace stand-ins."""

import math
from types import SimpleNamespace as NS

import numpy as np
import pytest
from support.scenarios.cell import base_points, left_arc, straight

from shadow_twin.calibration.jobs.protocol import CellProtocol
from shadow_twin.common.stamps import to_sec_nanosec
from shadow_twin.control.base.follower import BaseTolerances, BaseTrajectoryFollower
from shadow_twin.control.base.goal_rules import (MAX_START_DELAY, PROFILE_MARGIN, PROFILE_SPEED_FLOOR,
                                                 PROFILE_YAW_RATE_FLOOR, START_POSITION_TOLERANCE, profile_caps,
                                                 sideways_motion)
from shadow_twin.control.base.tracking import move_on, tracking_command
from shadow_twin.control.base.trajectory import base_trajectory_from_msg, validate_base_goal
from shadow_twin.control.jtc import INVALID_GOAL, GoalOutcome, GoalRejected

PERIOD = 0.02   # s, control period of the follower loops


def rejected(points, **kwargs) -> GoalRejected:
    with pytest.raises(GoalRejected) as info:
        validate_base_goal(points, **kwargs)
    assert info.value.error_code == INVALID_GOAL and '\n' not in str(info.value)
    return info.value


def msg_rejected(msg, **kwargs) -> GoalRejected:
    with pytest.raises(GoalRejected) as info:
        base_trajectory_from_msg(msg, **kwargs)
    assert info.value.error_code == INVALID_GOAL and '\n' not in str(info.value)
    return info.value


def duration(t):
    sec, nanosec = to_sec_nanosec(t)
    return NS(sec=sec, nanosec=nanosec)


def multi_dof(points, stamp=0.0):
    """A MultiDOFJointTrajectory stand-in of points (t, x, y, yaw), poses only."""
    def transform(x, y, yaw):
        return NS(translation=NS(x=x, y=y, z=0.0), rotation=NS(x=0.0, y=0.0, z=math.sin(yaw / 2), w=math.cos(yaw / 2)))
    return NS(header=NS(frame_id='odom', stamp=duration(stamp)), joint_names=['virtual_joint'],
              points=[NS(time_from_start=duration(t), transforms=[transform(x, y, yaw)], velocities=[])
                      for t, x, y, yaw in points])


# --------------------------------------------------------------------------------- legit paths
def path_points(path, duration_s, start=(0.0, 0.0, 0.0), dt=0.1):
    """Points (t, x, y, yaw, x_dot, y_dot, yaw_rate) of a relative ``path(s, ds)`` driven from
    ``start`` with a quintic time law (``support.scenarios.cell.base_points``, the cell tests' paths)."""
    return base_points(start, path, duration_s, dt)


def s_curve(length, amplitude):
    """A lane change: y = amplitude (k x - sin(k x)), k = 2 pi / length, x from 0 to length (the
    heading along the tangent, 0 at both ends; the lane moves 2 pi amplitude to the left)."""
    k = 2 * math.pi / length

    def f(s, ds):
        x, dx = length * s, length * ds
        y, slope = amplitude * (k * x - math.sin(k * x)), amplitude * k * (1 - math.cos(k * x))
        yaw_rate = amplitude * k * k * math.sin(k * x) * dx / (1 + slope ** 2)
        return x, y, math.atan(slope), dx, slope * dx, yaw_rate
    return f


def turn_in_place(angle):
    return lambda s, ds: (0.0, 0.0, angle * s, 0.0, 0.0, angle * ds)


def quarter_arc_1m_in_8s():
    """test_base_follower.py's quarter arc: radius 1 m, smooth-step timing, 17 points with velocities."""
    points = []
    for t in np.linspace(0.0, 8.0, 17):
        u = t / 8.0
        phi, phi_dot = math.pi / 2 * (3 * u**2 - 2 * u**3), math.pi / 2 * (6 * u - 6 * u**2) / 8.0
        points.append((t, math.sin(phi), 1.0 - math.cos(phi), phi, math.cos(phi) * phi_dot,
                       math.sin(phi) * phi_dot, phi_dot))
    return points


START = (3.0, 1.0, -2.9)
LEGIT = {
    'straight 1 m in 5 s': path_points(straight(1.0), 5.0, START),
    'reverse 1 m in 5 s': path_points(straight(-1.0), 5.0, START),
    'quarter arc r 1 m in 8 s': path_points(left_arc(1.0, math.pi / 2), 8.0, START),
    'right arc r 1 m in 5 s': path_points(left_arc(1.0, -math.pi / 4), 5.0, START),
    'S-curve 4 m': path_points(s_curve(4.0, 0.15), 8.0, START),
    'turn in place': path_points(turn_in_place(math.pi), 4.0, START),
}


@pytest.mark.parametrize('name', list(LEGIT))
def test_real_paths_are_accepted(name):
    points = LEGIT[name]
    validate_base_goal(points, current_pose=START)
    validate_base_goal(points, current_pose=START, path_tolerance=(0.01, 0.01))   # a tight path tolerance too


def test_the_existing_test_paths_and_the_cell_protocol_are_accepted():
    validate_base_goal(quarter_arc_1m_in_8s(), current_pose=(0.0, 0.0, 0.0))
    # test_base_trajectory.py's GOOD: 1 m ahead, then a quarter turn interpolated along the corner
    validate_base_goal([(0.0, 0.0, 0.0, 0.0), (2.0, 1.0, 0.0, 0.0), (4.0, 1.0, 1.0, math.pi / 2)],
                       current_pose=(0.0, 0.0, 0.0))
    protocol = CellProtocol.from_yaml()
    goals = [run.goal(protocol.rest_pose) for run in protocol.runs] + [protocol.lead_in_goal()]
    c, s = math.cos(START[2]), math.sin(START[2])
    checked = 0
    for goal in goals:
        if not len(goal.base_times):
            continue
        p, v = goal.base_poses, goal.base_velocities.copy()
        v[-1] = 0.0
        points = np.column_stack([goal.base_times, START[0] + c * p[:, 0] - s * p[:, 1],
                                  START[1] + s * p[:, 0] + c * p[:, 1], START[2] + p[:, 2],
                                  c * v[:, 0] - s * v[:, 1], s * v[:, 0] + c * v[:, 1], v[:, 2]])
        validate_base_goal(points.tolist(), current_pose=START)
        checked += 1
    assert checked >= 7


# ------------------------------------------------------------------------------------ point 0
def test_point_0_at_t0_far_from_the_base_is_rejected():
    far = [(0.0, 10000.0, 0.0, 0.0), (10.0, 10001.0, 0.0, 0.0)]
    error = rejected(far, current_pose=(0.0, 0.0, 0.0))
    assert 'point 0 is due at once' in str(error) and '10000 m' in str(error)
    assert f'start tolerance {START_POSITION_TOLERANCE:g} m' in str(error)
    # 1 m away: rejected; within the tolerance: accepted; without a current pose: not checked
    one_metre = [(0.0, 1.0, 0.0, 0.0), (5.0, 2.0, 0.0, 0.0)]
    assert ' 1 m ' in str(rejected(one_metre, current_pose=(0.0, 0.0, 0.0)))
    validate_base_goal(one_metre, current_pose=(0.95, 0.03, 0.05))
    validate_base_goal(one_metre)
    # a yaw off by more than the tolerance
    assert '0.3 rad from it' in str(rejected(one_metre, current_pose=(1.0, 0.0, 0.3)))
    # the goal's path tolerance, where set, is the tolerance
    error = rejected(one_metre, current_pose=(0.0, 0.0, 0.0), path_tolerance=(0.5, 0.0))
    assert 'start tolerance 0.5 m' in str(error)
    validate_base_goal(one_metre, current_pose=(0.6, 0.0, 0.0), path_tolerance=(0.5, 0.0))
    error = rejected(one_metre, current_pose=(0.98, 0.0, 0.0), path_tolerance=(0.01, 0.0))
    assert '0.02 m' in str(error) and 'start tolerance 0.01 m' in str(error)
    # from a message too (unstamped)
    assert 'point 0 is due at once' in str(msg_rejected(multi_dof(far), now=50.0, current_pose=(0.0, 0.0, 0.0)))


def test_point_0_after_t0_too_fast_is_rejected():
    error = rejected([(1.0, 3.0, 0.0, 0.0), (3.0, 4.0, 0.0, 0.0)], current_pose=(0.0, 0.0, 0.0))
    assert 'segment from the current pose to point 0' in str(error) and '3 m/s' in str(error)
    error = rejected([(1.0, 0.0, 0.0, 2.0), (3.0, 1.0, 0.0, 2.0)], current_pose=(0.0, 0.0, 0.0))
    assert 'segment from the current pose to point 0' in str(error) and 'turns 2 rad' in str(error)


def test_a_past_stamp_checks_point_0_over_the_time_left():
    points = [(2.0, 1.5, 0.0, 0.0), (6.0, 2.5, 0.0, 0.0)]
    base_trajectory_from_msg(multi_dof(points), now=101.5, current_pose=(0.0, 0.0, 0.0))   # 0.75 m/s
    # stamped 1.5 s ago: 1.5 m in the 0.5 s left is 3 m/s
    error = msg_rejected(multi_dof(points, stamp=100.0), now=101.5, current_pose=(0.0, 0.0, 0.0))
    assert 'segment from the current pose to point 0' in str(error) and 'in 0.5 s' in str(error)
    base_trajectory_from_msg(multi_dof(points, stamp=100.0), now=101.5, current_pose=(1.0, 0.0, 0.0))
    # point 0 due 2 s ago: the base must be where the trajectory is now (1.5 + 0.25 * 2 = 2 m)
    error = msg_rejected(multi_dof(points, stamp=100.0), now=104.0, current_pose=(1.5, 0.0, 0.0))
    assert 'point 0 was due 2 s ago' in str(error) and 'the base is 0.5 m and 0 rad from it' in str(error)
    base_trajectory_from_msg(multi_dof(points, stamp=100.0), now=104.0, current_pose=(1.98, 0.03, 0.0))
    # the base's stamp 0 under a joint trajectory's past stamp: the common stamp counts
    msg_rejected(multi_dof(points), now=104.0, current_pose=(1.5, 0.0, 0.0), stamp=100.0)


def test_a_goal_stamped_too_far_ahead_is_rejected():
    points = [(0.0, 0.0, 0.0, 0.0), (5.0, 1.0, 0.0, 0.0)]
    error = msg_rejected(multi_dof(points, stamp=100.0 + 3600.0), now=100.0)
    assert '3600 s from now' in str(error) and f'{MAX_START_DELAY:g} s' in str(error)
    base_trajectory_from_msg(multi_dof(points, stamp=100.0 + MAX_START_DELAY / 2), now=100.0)


# ------------------------------------------------------------------------------------ drivable
def test_a_sideways_segment_is_rejected():
    error = rejected([(0.0, 0.0, 0.0, 0.0), (4.0, 0.0, 1.0, 0.0)])
    assert 'segment from point 0 to point 1' in str(error) and '1 m sideways' in str(error)
    # with velocities (a cubic spline), later in a path
    points = [(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0), (2.0, 1.0, 0.0, 0.0, 0.5, 0.0, 0.0),
              (4.0, 1.0, 1.0, 0.0, 0.0, 0.5, 0.0), (6.0, 1.0, 2.0, 0.0, 0.0, 0.0, 0.0)]
    assert 'segment from point 1 to point 2' in str(rejected(points))
    # from the current pose to point 0
    error = rejected([(3.0, 0.0, 0.5, 0.0), (6.0, 1.0, 0.5, 0.0)], current_pose=(0.0, 0.0, 0.0))
    assert 'segment from the current pose to point 0' in str(error) and '0.5 m sideways' in str(error)
    # a slide within the tolerance passes; the tolerance is the goal's path tolerance where set
    validate_base_goal([(0.0, 0.0, 0.0, 0.0), (4.0, 1.0, 0.05, 0.0)])
    validate_base_goal([(0.0, 0.0, 0.0, 0.0), (4.0, 0.0, 1.0, 0.0)], path_tolerance=(1.5, 0.0))


def test_sideways_motion_is_measured_with_the_references_own_yaw():
    trajectory = validate_base_goal(LEGIT['quarter arc r 1 m in 8 s'])
    lateral, forward = sideways_motion(trajectory)
    assert lateral.max() < 1e-3 and forward.sum() == pytest.approx(math.pi / 2, rel=1e-3)


# ------------------------------------------------------------------------------------ follower caps
def run_follower(trajectory, start_time, pose, until, tolerances=None):
    """Tick a follower every PERIOD from t = 0 on a unicycle that drives each command exactly.
    Returns (follower, commands, final pose)."""
    follower = BaseTrajectoryFollower(trajectory, start_time, start_pose=pose, tolerances=tolerances)
    commands, t = [], 0.0
    while t < until and not follower.done:
        step = follower.update(t, pose)
        commands.append(step.command)
        pose = move_on(pose, step.command, PERIOD)
        t += PERIOD
    return follower, commands, pose


def test_a_past_stamped_join_does_not_sprint():
    trajectory = validate_base_goal(path_points(straight(1.0), 5.0))   # peak 0.375 m/s
    caps = profile_caps(trajectory)
    assert caps.speed == pytest.approx(0.375 * (1 + PROFILE_MARGIN) + PROFILE_SPEED_FLOOR, rel=1e-3)
    # joined 2.5 s after its stamped start, the base still at the start, 0.5 m behind the reference
    follower, commands, pose = run_follower(trajectory, -2.5, (0.0, 0.0, 0.0), 8.0,
                                            BaseTolerances(goal_time=5.0))
    first = follower.trajectory.sample(2.5)
    assert tracking_command(first, NS(along=first.x, lateral=0.0, yaw=0.0), follower.gains).v > 1.0  # uncapped
    assert max(abs(c.v) for c in commands) <= caps.speed + 1e-9 < 0.6
    assert follower.verdict.outcome is GoalOutcome.SUCCEEDED, follower.verdict
    assert math.hypot(pose[0] - 1.0, pose[1]) < 0.05


def test_a_past_stamped_join_moves_from_the_start_pose_over_the_time_left():
    trajectory = validate_base_goal([(2.0, 1.0, 0.0, 0.0), (4.0, 2.0, 0.0, 0.0)])
    follower = BaseTrajectoryFollower(trajectory, 100.0, start_pose=(0.5, 0.0, 0.0))
    follower.update(101.0, (0.5, 0.0, 0.0))                    # joined 1 s after the stamp
    assert follower.trajectory.times[0] == pytest.approx(1.0)
    assert follower.trajectory.sample(1.0).x == pytest.approx(0.5)
    assert follower.trajectory.sample(1.5).x == pytest.approx(0.75)
    assert follower.caps.speed == pytest.approx(0.5 * (1 + PROFILE_MARGIN) + PROFILE_SPEED_FLOOR)
    # point 0 already due: no start segment (the goal rules required the base to be there)
    follower = BaseTrajectoryFollower(trajectory, 100.0, start_pose=(0.5, 0.0, 0.0))
    follower.update(103.0, (1.5, 0.0, 0.0))
    assert follower.trajectory.times[0] == pytest.approx(2.0)


def test_commands_stay_within_the_profile_on_an_arc():
    trajectory = validate_base_goal(path_points(left_arc(1.0, math.pi / 2), 8.0))
    caps = profile_caps(trajectory)
    peak_yaw_rate = 1.875 * (math.pi / 2) / 8.0
    assert caps.yaw_rate == pytest.approx(peak_yaw_rate * (1 + PROFILE_MARGIN) + PROFILE_YAW_RATE_FLOOR, rel=1e-3)
    # joined 2 s late from the start pose (uncapped, the law turns at 0.68 rad/s to catch up)
    follower, commands, _ = run_follower(trajectory, -2.0, (0.0, 0.0, 0.0), 12.0, BaseTolerances(goal_time=4.0))
    assert max(abs(c.omega) for c in commands) == pytest.approx(caps.yaw_rate)
    assert max(abs(c.v) for c in commands) <= caps.speed + 1e-9
    assert follower.verdict.outcome is GoalOutcome.SUCCEEDED, follower.verdict
