"""Tests of the mobile base's trajectory follower (shadow_twin.control.base.follower, tracking):
tracking with and without wheel slip, limits, cancel and abort, path and goal tolerances, its
configuration, and the Smith predictor that compensates a command latency.

The follower runs against a kinematic model of the base: the commanded twist becomes wheel
rates (inverse kinematics), each wheel follows its command with a first-order lag, an
optional slip scales each wheel's effective rate, and the pose integrates the resulting
twist (forward kinematics) in 1 ms steps; the follower ticks every 20 ms on that pose (the
odometry) and velocity.
"""

import math

import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.control.base.follower import (BaseTolerances, BaseTrajectoryFollower, check_base_goal,
                                               config_from_mapping)
from shadow_twin.control.base.tracking import PosePredictor, TrackingGains, move_on, tracking_error
from shadow_twin.control.base.trajectory import BaseLimits, BaseTrajectory, validate_base_goal
from shadow_twin.control.diff_drive import (ZERO_TWIST, BodyTwist, DiffDriveGeometry, Pose2D, body_twist,
                                            integrate_pose, wheel_rates)
from shadow_twin.control.jtc import (GOAL_TOLERANCE_VIOLATED, INVALID_GOAL, PATH_TOLERANCE_VIOLATED, SUCCESSFUL,
                                     GoalOutcome)


MIR = DiffDriveGeometry()
CONTROL_PERIOD = 0.020  # s
LAG = 0.050  # s, first-order lag of each wheel's rate
SLIP = (0.03, 0.01)  # left, right: fraction of the commanded wheel rate lost


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
