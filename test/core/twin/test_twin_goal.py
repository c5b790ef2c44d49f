"""ROS-free tests of the twin server's logic: splitting goals, start stamps, desired
sampling, actual state and the verdict (sim minus real: test_monitor.py)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from shadow_twin.control import jtc
from shadow_twin.twin.config import ControllerSpec, base_sides, controllers_from_config, parse_mode
from shadow_twin.twin.desired import DesiredSampler, state_arrays
from shadow_twin.twin.split import filter_tolerances, pick, split_goal
from shadow_twin.twin.timing import goal_stamp, start_stamp
from shadow_twin.twin.verdict import ControllerResult, decide
from shadow_twin.common.errors import ConfigError
from shadow_twin.control.jtc import GoalOutcome
from shadow_twin.control.trajectory import JointTrajectory

UR5 = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint', 'wrist_2_joint', 'wrist_3_joint']
CONTROLLERS = controllers_from_config(
    ['hand', 'arm'], {'hand': {'action': '/rh_trajectory_controller/follow_joint_trajectory', 'joints': ['rh_*']},
                      'arm': {'action': '/scaled_joint_trajectory_controller/follow_joint_trajectory',
                              'joints': UR5}})


def test_parse_mode():
    assert parse_mode(' Both ') == 'both'
    assert [parse_mode(m) for m in ('sim', 'real')] == ['sim', 'real']
    with pytest.raises(ConfigError, match='mode'):
        parse_mode('robot')


def test_controllers_from_config_checks_entries():
    assert CONTROLLERS[0] == ControllerSpec('hand', '/rh_trajectory_controller/follow_joint_trajectory',
                                                  ('rh_*',))
    assert CONTROLLERS[0].matches('rh_FFJ3') and not CONTROLLERS[0].matches('lh_FFJ3')
    assert CONTROLLERS[1].matches('elbow_joint') and not CONTROLLERS[1].matches('elbow')
    with pytest.raises(ConfigError, match='no action'):
        controllers_from_config(['hand'], {'hand': {'joints': ['rh_*']}})
    with pytest.raises(ConfigError, match='no joints'):
        controllers_from_config(['hand'], {'hand': {'action': '/a', 'joints': ['']}})
    with pytest.raises(ConfigError, match='twice'):
        controllers_from_config(['hand', 'hand'], {'hand': {'action': '/a', 'joints': ['rh_*']}})


def test_split_by_joint_group_in_every_mode():
    names = ['rh_FFJ3', 'elbow_joint', 'rh_WRJ1', 'shoulder_pan_joint']
    both = split_goal(names, CONTROLLERS, 'both')
    assert both.groups == {'hand': [0, 2], 'arm': [1, 3], 'sim': [0, 1, 2, 3]}
    assert both.joints_of('arm') == ['elbow_joint', 'shoulder_pan_joint']
    assert both.real == ['hand', 'arm']
    real = split_goal(names, CONTROLLERS, 'real')
    assert real.groups == {'hand': [0, 2], 'arm': [1, 3]}
    sim = split_goal(names, CONTROLLERS, 'sim')
    assert sim.groups == {'sim': [0, 1, 2, 3]} and sim.real == []
    # only the controllers a goal needs take part
    assert split_goal(['rh_FFJ3'], CONTROLLERS, 'both').groups == {'hand': [0], 'sim': [0]}


def test_first_matching_controller_takes_a_joint():
    overlapping = [ControllerSpec('wrist', '/w', ('rh_WR*',)), ControllerSpec('hand', '/h', ('rh_*',))]
    goal = split_goal(['rh_FFJ3', 'rh_WRJ1'], overlapping, 'real')
    assert goal.groups == {'wrist': [1], 'hand': [0]}


def test_joint_without_a_real_controller_is_rejected_except_in_sim_mode():
    with pytest.raises(jtc.GoalRejected, match='lh_FFJ3') as info:
        split_goal(['rh_FFJ3', 'lh_FFJ3'], CONTROLLERS, 'both')
    assert info.value.error_code == jtc.INVALID_JOINTS
    assert split_goal(['lh_FFJ3'], CONTROLLERS, 'sim').groups == {'sim': [0]}


def test_pick_and_filter_tolerances():
    assert pick([1.0, 2.0, 3.0], [2, 0]) == [3.0, 1.0]
    assert pick([], [0, 1]) == []
    tolerances = [SimpleNamespace(name='rh_FFJ3', position=0.1), {'name': 'elbow_joint', 'position': 0.2}]
    assert filter_tolerances(tolerances, ['elbow_joint']) == [tolerances[1]]
    assert filter_tolerances(None, ['x']) == []


def test_start_stamp():
    assert start_stamp(0.0, 100.0, 0.1) == pytest.approx(100.1)    # unstamped: now + lead
    assert start_stamp(105.0, 100.0, 0.1) == 105.0                  # future stamp kept
    assert start_stamp(99.5, 100.0, 0.1) == 99.5                    # past stamp: joined mid-way


def test_desired_sampler_from_start_state_to_points():
    trajectory = JointTrajectory(['a', 'b'], [1.0, 2.0], [[1.0, 2.0], [3.0, 2.0]])
    sampler = DesiredSampler(trajectory, [0.0, math.nan], start_s=10.0)
    assert sampler.end_s == 12.0
    pos, vel, acc, t = sampler.at(9.5)                # before the start: the start state at rest
    np.testing.assert_allclose(pos, [0.0, 2.0])       # NaN start takes the first point
    np.testing.assert_allclose(vel, [0.0, 0.0])
    assert t == pytest.approx(-0.5)
    pos, vel, _, _ = sampler.at(10.5)                 # linear from the start state to point 0
    np.testing.assert_allclose(pos, [0.5, 2.0])
    np.testing.assert_allclose(vel, [1.0, 0.0])
    pos, _, _, _ = sampler.at(11.5)
    np.testing.assert_allclose(pos, [2.0, 2.0])
    pos, vel, _, t = sampler.at(13.0)                 # after the end: the last point
    np.testing.assert_allclose(pos, [3.0, 2.0])
    np.testing.assert_allclose(vel, [0.0, 0.0])
    assert t == pytest.approx(3.0)


def test_state_arrays_in_goal_order_with_nan_for_missing_joints():
    real = {'a': (1.0, 0.1), 'b': (2.0, 0.0)}
    pos, vel = state_arrays(['b', 'a', 'c'], real)
    np.testing.assert_array_equal(pos[:2], [2.0, 1.0])
    np.testing.assert_array_equal(vel[:2], [0.0, 0.1])
    assert math.isnan(pos[2]) and math.isnan(vel[2])


def test_missing_state_counts_as_a_violation():
    pos, vel = state_arrays(['a'], {})
    tolerances = jtc.Tolerances(path={'a': jtc.StateTolerance(position=0.1)})
    state, code, message = jtc.check_path(['a'], [0.0], [0.0], pos, vel, tolerances)
    assert state is GoalOutcome.ABORTED and code == jtc.PATH_TOLERANCE_VIOLATED and "'a'" in message


RUNNING = jtc.RUNNING_VERDICT


def test_decide_waits_for_own_check_and_every_controller():
    ok = ControllerResult(GoalOutcome.SUCCEEDED)
    assert decide(RUNNING, False, {'hand': None, 'sim': None}).outcome is GoalOutcome.RUNNING
    assert decide(RUNNING, True, {'hand': ok, 'sim': None}).outcome is GoalOutcome.RUNNING
    assert decide(RUNNING, False, {'hand': ok, 'sim': ok}).outcome is GoalOutcome.RUNNING
    reached = jtc.Verdict(GoalOutcome.SUCCEEDED, jtc.SUCCESSFUL, 'in')
    verdict = decide(reached, True, {'hand': ok, 'sim': ok})
    assert (verdict.outcome, verdict.code) == (GoalOutcome.SUCCEEDED, jtc.SUCCESSFUL)
    assert 'hand, sim' in verdict.message


def test_decide_aborts_on_own_violation_or_a_failed_controller():
    aborted = GoalOutcome.ABORTED
    violated = jtc.Verdict.aborted('goal tolerance violated: joint x', jtc.GOAL_TOLERANCE_VIOLATED)
    assert decide(violated, False, {'hand': None}) == violated
    failed = ControllerResult(aborted, jtc.PATH_TOLERANCE_VIOLATED, 'joint rh_FFJ3 off')
    assert decide(RUNNING, False, {'hand': failed, 'sim': None}) == (
        aborted, jtc.PATH_TOLERANCE_VIOLATED,
        'hand controller goal aborted (PATH_TOLERANCE_VIOLATED): joint rh_FFJ3 off')
    lost = ControllerResult(aborted, jtc.INVALID_GOAL, 'action server /x disappeared')
    assert decide(RUNNING, True, {'arm': lost}) == (
        aborted, jtc.INVALID_GOAL, 'arm controller goal aborted (INVALID_GOAL): action server /x disappeared')
    canceled = ControllerResult(GoalOutcome.CANCELED)     # canceled by someone else: code 0 -> INVALID_GOAL
    assert decide(RUNNING, False, {'sim': canceled}) == (
        aborted, jtc.INVALID_GOAL, 'sim controller goal canceled')
    vendor = ControllerResult(aborted, -42, 'own code')   # a code control_msgs does not define
    assert decide(RUNNING, False, {'arm': vendor}) == (
        aborted, -42, 'arm controller goal aborted (-42): own code')


def test_base_sides_follow_the_mode():
    assert base_sides('both') == ['real', 'sim']
    assert base_sides('real') == ['real'] and base_sides('sim') == ['sim']


def test_goal_stamp_joins_the_joint_and_base_parts():
    assert goal_stamp(None, None) == 0.0
    assert goal_stamp(0.0, 12.5) == 12.5 and goal_stamp(12.5, None) == 12.5
    assert goal_stamp(12.5, 12.5 + 1e-7) == 12.5
    with pytest.raises(jtc.GoalRejected, match='different times') as rejected:
        goal_stamp(12.5, 13.0)
    assert rejected.value.error_code == jtc.INVALID_GOAL
