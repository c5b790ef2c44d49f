"""Tests of the mobile base control core: diff-drive kinematics (shadow_twin.control.diff_drive),
base trajectories and goal rules (base_trajectory) and the trajectory follower (base_follower).

The follower runs against a kinematic model of the base: the commanded twist becomes wheel
rates (inverse kinematics), each wheel follows its command with a first-order lag, an
optional slip scales each wheel's effective rate, and the pose integrates the resulting
twist (forward kinematics) in 1 ms steps; the follower ticks every 20 ms on that pose (the
odometry) and velocity. Messages are types.SimpleNamespace stand-ins.
"""

import math
from types import SimpleNamespace as NS

import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError, TrajectoryError
from shadow_twin.common.stamps import to_sec_nanosec
from shadow_twin.control.base.follower import (BaseTolerances, BaseTrajectoryFollower, base_tolerances_from_goal,
                                               check_base_goal, config_from_mapping)
from shadow_twin.control.base.tracking import PosePredictor, TrackingGains, move_on, tracking_error
from shadow_twin.control.base.trajectory import (BaseLimits, BaseTrajectory, base_trajectory_from_msg, unwrap_yaw,
                                                 validate_base_goal, yaw_from_quaternion)
from shadow_twin.control.diff_drive import (ZERO_TWIST, BodyTwist, DiffDriveGeometry, Pose2D, body_twist,
                                            integrate_pose, limit_wheel_rates, saturate_twist, wheel_rates,
                                            wheel_rates_from_odom_velocity, wrap_angle)
from shadow_twin.control.jtc import (GOAL_TOLERANCE_VIOLATED, INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP,
                                     PATH_TOLERANCE_VIOLATED, SUCCESSFUL, GoalOutcome, GoalRejected)

MIR = DiffDriveGeometry()
CONTROL_PERIOD = 0.020  # s
LAG = 0.050  # s, first-order lag of each wheel's rate
SLIP = (0.03, 0.01)  # left, right: fraction of the commanded wheel rate lost


# ---------------------------------------------------------------------------------------
# Kinematics
# ---------------------------------------------------------------------------------------
def test_mir250_geometry_from_the_study():
    assert MIR.wheel_radius == 0.100 and MIR.wheel_separation == 0.410
    assert MIR.half_track == pytest.approx(0.205)


@pytest.mark.parametrize('field', ['wheel_radius', 'wheel_separation'])
@pytest.mark.parametrize('value', [0.0, -0.1, float('nan'), float('inf'), 'x', True])
def test_geometry_rejects_bad_values(field, value):
    with pytest.raises(ConfigError, match=field):
        DiffDriveGeometry(**{field: value})


def test_inverse_kinematics_is_the_study_formula():
    # omega_left = (v - a omega) / r, omega_right = (v + a omega) / r, a = 0.205 m, r = 0.1 m
    rates = wheel_rates(BodyTwist(0.5, 1.0), MIR)
    assert rates.left == pytest.approx((0.5 - 0.205) / 0.1)
    assert rates.right == pytest.approx((0.5 + 0.205) / 0.1)
    # Eq. 1 as written, from the velocity in odom at heading phi: (1/r)[cos, sin, +/-a].(X', Y', phi')
    phi, x_dot, y_dot, yaw_rate = 0.7, 0.3, -0.2, 0.4
    eq1 = wheel_rates_from_odom_velocity(x_dot, y_dot, yaw_rate, phi, MIR)
    row = np.array([math.cos(phi), math.sin(phi)])
    assert eq1.right == pytest.approx((row @ [x_dot, y_dot] + 0.205 * yaw_rate) / 0.1)
    assert eq1.left == pytest.approx((row @ [x_dot, y_dot] - 0.205 * yaw_rate) / 0.1)


def test_forward_kinematics_inverts_inverse_kinematics():
    rng = np.random.default_rng(0)
    geometry = DiffDriveGeometry(0.0625, 0.445)
    for v, omega in rng.uniform(-2, 2, size=(20, 2)):
        back = body_twist(wheel_rates((v, omega), geometry), geometry)
        assert back == pytest.approx((v, omega))
    assert body_twist((10.0, 10.0), MIR) == pytest.approx((1.0, 0.0))     # straight
    assert body_twist((-5.0, 5.0), MIR) == pytest.approx((0.0, 0.5 / 0.205))  # in place, left


def test_speed_saturation_keeps_the_curvature():
    twist = BodyTwist(3.0, 2.0)   # outer (right) wheel at 3.41 m/s rim speed
    limited = saturate_twist(twist, MIR, max_speed=2.0)
    assert limited.omega / limited.v == pytest.approx(twist.omega / twist.v)
    rates = wheel_rates(limited, MIR)
    assert max(abs(rates.left), abs(rates.right)) * MIR.wheel_radius == pytest.approx(2.0)
    # the yaw-rate limit scales v too
    limited = saturate_twist((0.5, 3.0), MIR, max_speed=2.0, max_yaw_rate=1.5)
    assert limited == pytest.approx((0.25, 1.5))
    # within limits: unchanged; reversing and right turns are limited alike
    assert saturate_twist((0.3, -0.2), MIR) == pytest.approx((0.3, -0.2))
    limited = saturate_twist((-4.0, -1.0), MIR)
    assert limited.omega / limited.v == pytest.approx(0.25) and abs(limited.v) < 2.0
    assert saturate_twist((float('nan'), 0.1), MIR) == ZERO_TWIST
    assert limit_wheel_rates((30.0, -10.0), 20.0) == pytest.approx((20.0, -20.0 / 3))
    assert limit_wheel_rates((float('inf'), 1.0), 20.0) == (0.0, 0.0)


def test_integrate_pose_is_exact_on_arcs():
    # a full circle of radius 0.5 m in 2 pi s returns to the start
    pose = Pose2D(1.0, 2.0, 0.3)
    for _ in range(100):
        pose = integrate_pose(pose, (0.5, 1.0), 2 * math.pi / 100)
    assert pose[:2] == pytest.approx((1.0, 2.0), abs=1e-12)
    assert pose.yaw == pytest.approx(0.3 + 2 * math.pi)
    # a quarter circle in one step: from (0, 0, 0) to (1, 1, pi/2) on radius 1
    assert integrate_pose((0, 0, 0), (1.0, 1.0), math.pi / 2) == pytest.approx((1.0, 1.0, math.pi / 2))
    assert integrate_pose((0, 0, math.pi / 2), (2.0, 0.0), 0.5) == pytest.approx((0.0, 1.0, math.pi / 2))
    assert wrap_angle(3 * math.pi / 2) == pytest.approx(-math.pi / 2)


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


# ---------------------------------------------------------------------------------------
# Follower
# ---------------------------------------------------------------------------------------
def simulate(trajectory, slip=(0.0, 0.0), tolerances=None, settle=3.0, substeps=20, dead_time_ticks=0,
             odom_delay_ticks=0, command_latency=0.0):
    """Run the follower on the kinematic base model until the goal ends and the wheels stop;
    the drive takes each command ``dead_time_ticks`` control periods after it was sent, and the
    follower gets the odometry of ``odom_delay_ticks`` periods ago (with its time).

    Returns (follower, final true pose, steps); ``true_errors`` (the true pose's against the
    reference, m, at each tick) is set on the follower."""
    follower = BaseTrajectoryFollower(trajectory, 0.0, start_pose=(0.0, 0.0, 0.0), tolerances=tolerances,
                                      command_latency=command_latency)
    follower.true_errors = []
    efficiency = 1.0 - np.asarray(slip)
    pose, wheels, t, steps = Pose2D(0.0, 0.0, 0.0), np.zeros(2), 0.0, []
    h = CONTROL_PERIOD / substeps
    blend = 1.0 - math.exp(-h / LAG)
    sent = [np.zeros(2)] * dead_time_ticks
    odometry = [(0.0, pose, body_twist(wheels, MIR))] * (odom_delay_ticks + 1)
    while t < trajectory.duration + settle:
        measured_at, measured, velocity = odometry[-1 - odom_delay_ticks]
        step = follower.update(t, measured, velocity, pose_time=measured_at)
        steps.append(step)
        follower.true_errors.append(tracking_error(follower.trajectory.sample(t).pose, pose).position)
        sent.append(np.array(wheel_rates(step.command, MIR)))
        command = sent.pop(0)
        for _ in range(substeps):
            wheels += (command - wheels) * blend
            pose = integrate_pose(pose, body_twist(wheels * efficiency, MIR), h)
        t += CONTROL_PERIOD
        odometry.append((t, pose, body_twist(wheels * efficiency, MIR)))
        if follower.done and np.max(np.abs(wheels)) < 1e-6 and not np.any(sent):
            break
    return follower, pose, steps


def straight_1m_in_5s():
    return validate_base_goal([(0.0, 0, 0, 0), (5.0, 1.0, 0.0, 0.0)])


def quarter_arc_1m_in_8s(n_points=17):
    """Quarter circle of radius 1 m to the left (centre (0, 1)), smooth-step timing, with velocities."""
    points = []
    for t in np.linspace(0.0, 8.0, n_points):
        u = t / 8.0
        phi, phi_dot = math.pi / 2 * (3 * u**2 - 2 * u**3), math.pi / 2 * (6 * u - 6 * u**2) / 8.0
        points.append((t, math.sin(phi), 1.0 - math.cos(phi), phi,
                       math.cos(phi) * phi_dot, math.sin(phi) * phi_dot, phi_dot))
    return validate_base_goal(points)


def end_error(trajectory, pose):
    error = tracking_error(trajectory.end_pose, pose)
    return error.position, abs(error.yaw)


TIGHT = BaseTolerances(goal_position=0.01, goal_yaw=0.01)


@pytest.mark.parametrize('make', [straight_1m_in_5s, quarter_arc_1m_in_8s], ids=['straight', 'arc'])
def test_follows_to_within_1cm_without_slip(make):
    trajectory = make()
    follower, pose, steps = simulate(trajectory, tolerances=TIGHT)
    assert follower.verdict.outcome is GoalOutcome.SUCCEEDED and follower.verdict.code == SUCCESSFUL
    position, yaw = end_error(trajectory, pose)
    assert position < 0.01 and yaw < 0.01
    assert max(step.error.position for step in steps) < 0.02   # tracks closely on the way, too


@pytest.mark.parametrize('make', [straight_1m_in_5s, quarter_arc_1m_in_8s], ids=['straight', 'arc'])
def test_follows_to_within_5cm_with_wheel_slip(make):
    trajectory = make()
    follower, pose, _ = simulate(trajectory, slip=SLIP)   # default goal tolerance: 5 cm, 0.05 rad
    assert follower.verdict.outcome is GoalOutcome.SUCCEEDED
    position, yaw = end_error(trajectory, pose)
    assert position < 0.05 and yaw < 0.05
    # the feedback removes most of the slip's drift: tight tolerances are met too
    follower, pose, _ = simulate(trajectory, slip=SLIP, tolerances=TIGHT)
    assert follower.verdict.outcome is GoalOutcome.SUCCEEDED


def test_commands_respect_the_limits():
    trajectory = validate_base_goal([(0.0, 0, 0, 0), (2.0, 3.9, 0.0, 0.0)])   # 1.95 m/s
    limits = BaseLimits(max_speed=2.0, max_yaw_rate=1.5)
    _, _, steps = simulate(trajectory)
    for step in steps:
        rates = wheel_rates(step.command, MIR)
        assert max(abs(rates.left), abs(rates.right)) * MIR.wheel_radius <= limits.max_speed + 1e-9
        assert abs(step.command.omega) <= limits.max_yaw_rate + 1e-9


def test_zero_command_after_cancel_and_abort():
    trajectory = straight_1m_in_5s()
    follower = BaseTrajectoryFollower(trajectory, 10.0)
    assert follower.update(9.0, (0, 0, 0)).command == ZERO_TWIST   # before the start time
    moving = follower.update(11.0, (0.1, 0.0, 0.0))
    assert moving.command.v > 0 and not follower.done
    assert follower.cancel() == ZERO_TWIST
    assert follower.verdict.outcome is GoalOutcome.CANCELED and follower.verdict.code == SUCCESSFUL
    step = follower.update(11.02, (0.1, 0.0, 0.0))
    assert step.command == ZERO_TWIST and step.verdict.outcome is GoalOutcome.CANCELED
    assert follower.abort('too late') == ZERO_TWIST and follower.verdict.outcome is GoalOutcome.CANCELED

    follower = BaseTrajectoryFollower(trajectory, 0.0)
    assert follower.abort('preempted by a new goal') == ZERO_TWIST
    assert follower.verdict == (GoalOutcome.ABORTED, INVALID_GOAL, 'preempted by a new goal')
    assert follower.update(1.0, (0.0, 0.0, 0.0)).command == ZERO_TWIST


def test_non_finite_odometry_aborts_with_zero_command():
    follower = BaseTrajectoryFollower(straight_1m_in_5s(), 0.0)
    step = follower.update(1.0, (float('nan'), 0.0, 0.0))
    assert step.command == ZERO_TWIST and step.verdict.outcome is GoalOutcome.ABORTED
    assert 'not finite' in step.verdict.message


def test_path_tolerance_violation_aborts():
    tolerances = BaseTolerances(path_position=0.1, path_yaw=0.2)
    follower = BaseTrajectoryFollower(straight_1m_in_5s(), 0.0, tolerances=tolerances)
    assert follower.update(1.0, (0.15, 0.05, 0.0)).verdict.outcome is GoalOutcome.RUNNING
    step = follower.update(2.0, (0.0, 0.3, 0.0))   # reference at (0.4, 0)
    assert step.command == ZERO_TWIST
    assert step.verdict.outcome is GoalOutcome.ABORTED and step.verdict.code == PATH_TOLERANCE_VIOLATED
    assert 'position error 0.5 m' in step.verdict.message
    follower = BaseTrajectoryFollower(straight_1m_in_5s(), 0.0, tolerances=tolerances)
    assert 'yaw error' in follower.update(2.0, (0.4, 0.0, 0.3)).verdict.message


def test_goal_tolerance_and_goal_time():
    trajectory = straight_1m_in_5s()
    follower = BaseTrajectoryFollower(trajectory, 0.0, tolerances=BaseTolerances(goal_time=1.0))
    step = follower.update(5.5, (0.9, 0.0, 0.0), velocity=(0.0, 0.0))
    assert step.verdict.outcome is GoalOutcome.RUNNING and 'position error 0.1 m' in step.verdict.message
    assert step.command.v > 0   # still closing in
    step = follower.update(6.5, (0.9, 0.0, 0.0), velocity=(0.0, 0.0))
    assert step.verdict.outcome is GoalOutcome.ABORTED and step.verdict.code == GOAL_TOLERANCE_VIOLATED
    assert step.command == ZERO_TWIST
    # within the tolerance but still moving: not yet reached
    error = tracking_error(trajectory.end_pose, (0.99, 0.0, 0.0))
    assert 'not stopped' in check_base_goal(error, (0.05, 0.0), BaseTolerances(), 0.1).message
    assert check_base_goal(error, (0.005, 0.0), BaseTolerances(), 0.1).outcome is GoalOutcome.SUCCEEDED


def test_tracking_error_is_in_the_robot_frame():
    error = tracking_error((1.0, 1.0, math.pi / 2), (0.0, 1.0, math.pi / 2))   # reference 1 m to the right
    assert error == pytest.approx((0.0, -1.0, 0.0))
    assert tracking_error((0, 0, -3.0), (0, 0, 3.0)).yaw == pytest.approx(2 * math.pi - 6.0)


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


def test_config_from_mapping():
    assert config_from_mapping(TrackingGains, {'k_x': 1}, 'base_follower.gains').k_x == 1.0
    assert config_from_mapping(BaseLimits, None, 'limits') == BaseLimits()
    with pytest.raises(ConfigError, match="gains: unknown key.*'kx'"):
        config_from_mapping(TrackingGains, {'kx': 1}, 'gains')
    with pytest.raises(ConfigError, match='tolerances: base tolerance goal_yaw'):
        config_from_mapping(BaseTolerances, {'goal_yaw': -1}, 'tolerances')
    with pytest.raises(ConfigError, match='max_speed'):
        BaseLimits(max_speed=0)


# ---------------------------------------------------------------------------------------
# Dead time: the Smith predictor
# ---------------------------------------------------------------------------------------
def test_pose_predictor_moves_on_with_each_command_from_when_it_takes_effect():
    predictor = PosePredictor(0.1)
    predictor.sent(1.0, BodyTwist(1.0, 0.0))            # in force from 1.1 s
    predictor.sent(1.2, BodyTwist(0.5, 0.5))            # from 1.3 s: an arc of radius 1 m
    start = Pose2D(2.0, 1.0, 0.3)
    expected = move_on(move_on(move_on(start, (0.2, 0.0), 0.05), (1.0, 0.0), 0.2), (0.5, 0.5), 0.4)
    np.testing.assert_allclose(predictor.predict(start, 1.05, 1.7, velocity=(0.2, 0.0)), expected, atol=1e-12)
    np.testing.assert_allclose(move_on((0.0, 0.0, 0.0), (0.5, 0.5), math.pi), (1.0, 1.0, math.pi / 2), atol=1e-12)
    np.testing.assert_allclose(move_on((0.0, 0.0, 0.0), (0.5, 0.5), 2 * math.pi), (0.0, 2.0, math.pi), atol=1e-12)
    np.testing.assert_allclose(predictor.predict(start, 1.7, 1.7), start)
    with pytest.raises(ConfigError, match='command latency must be finite and >= 0 s'):
        PosePredictor(-0.1)


def fast_right_arc():
    """The protocol's CN2: an arc of radius 1 m to the right at 0.9 m/s, ramps of 2.5 m/s^2."""
    from shadow_twin.calibration.jobs.motions import BaseMotion, base_goal
    from shadow_twin.control.trajectory import JointTrajectory
    goal = base_goal(BaseMotion(speed=0.9, accel=2.5, cruise=3.5, radius=-1.0),
                     JointTrajectory(['j'], np.array([0.1]), np.zeros((1, 1))))
    return BaseTrajectory(goal.base_times, goal.base_poses, goal.base_velocities)


def test_a_command_latency_is_compensated_by_predicting_the_pose():
    """A drive with 0.1 s dead time and odometry 80 ms old (live on the cell's dynamic model the
    uncompensated sim base left a 1 m/s arc by 0.8 m): uncompensated, the loop rings; with the
    latency given, the follower tracks almost as closely as without any delay (true pose against
    the reference, while the trajectory runs)."""
    trajectory = fast_right_arc()
    delayed = dict(dead_time_ticks=5, odom_delay_ticks=4)
    worst = {}
    for name, kwargs in (('no delay', {}), ('uncompensated', delayed),
                         ('compensated', dict(delayed, command_latency=0.1))):
        follower, pose, steps = simulate(trajectory, tolerances=BaseTolerances(goal_time=4.0), **kwargs)
        worst[name] = max(follower.true_errors[:int(trajectory.duration / CONTROL_PERIOD)])
        if name != 'uncompensated':
            assert follower.verdict.outcome is GoalOutcome.SUCCEEDED, (name, follower.verdict)
            assert end_error(trajectory, pose)[0] < 0.05
    assert worst['uncompensated'] > 2.5 * worst['compensated']       # 0.146 m against 0.053 m
    assert worst['compensated'] < 1.5 * worst['no delay']            # 0.039 m without any delay


def test_with_a_latency_the_first_command_goes_out_that_early():
    follower = BaseTrajectoryFollower(straight_1m_in_5s(), 1.0, start_pose=(0, 0, 0), command_latency=0.1)
    assert follower.update(0.85, (0, 0, 0)).command == ZERO_TWIST
    step = follower.update(0.95, (0, 0, 0))
    assert step.command.v > 0 and step.verdict.outcome is GoalOutcome.RUNNING
