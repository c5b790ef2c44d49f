"""Tests of shadow_twin.control.jtc's tolerance semantics (no ROS needed): default tolerances from
the controller's constraints, a goal's path and goal tolerances merged over them, and the
verdicts of check_state, check_path and check_goal. Goal validation: test_jtc_goals.py.

Messages are types.SimpleNamespace stand-ins; where control_msgs is importable, a real
FollowJointTrajectory goal's tolerances are read too.
"""

from types import SimpleNamespace as NS

import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.control.jtc import (GOAL_TOLERANCE_VIOLATED, INVALID_GOAL, PATH_TOLERANCE_VIOLATED, RUNNING_VERDICT,
                                     SUCCESSFUL, GoalOutcome, GoalRejected, StateTolerance, Tolerances, Verdict,
                                     check_goal, check_path, check_state, default_tolerances, goal_tolerances,
                                     resolve_tolerance, tolerances_from_goal)


JOINTS = ['j1', 'j2', 'j3']


# -- tolerances ------------------------------------------------------------------------------
def test_default_tolerances_from_constraints():
    config = {'goal_time': 0.5, 'stopped_velocity_tolerance': 0.02,
              'j1': {'trajectory': 0.2, 'goal': 0.02}, 'j2': {'goal': 0.03}}
    tol = default_tolerances(config, joints=JOINTS)
    assert tol.goal_time == 0.5 and tol.stopped_velocity == 0.02
    assert tol.path == {'j1': StateTolerance(0.2), 'j2': StateTolerance(0.0), 'j3': StateTolerance(0.0)}
    assert tol.goal == {'j1': StateTolerance(0.02, 0.02), 'j2': StateTolerance(0.03, 0.02),
                        'j3': StateTolerance(0.0, 0.02)}
    assert default_tolerances({'constraints': config}, joints=JOINTS) == tol
    empty = default_tolerances({})
    assert empty.goal_time == 0.0 and empty.stopped_velocity == 0.01 and empty.path == {}
    assert empty.goal_for('any') == StateTolerance(0.0, 0.01, 0.0)


@pytest.mark.parametrize('config', [{'goal_time': -1.0}, {'j1': {'goal': 'x'}}, {'j1': {'path': 0.1}},
                                    {'jX': {'goal': 0.1}}, {'j1': 0.1}])
def test_default_tolerances_rejects_bad_config(config):
    with pytest.raises(ConfigError):
        default_tolerances(config, joints=JOINTS)


def test_goal_tolerance_merge_zero_keeps_minus_one_erases_positive_overrides():
    defaults = default_tolerances({'goal_time': 0.5, 'j1': {'trajectory': 0.2, 'goal': 0.02},
                                   'j2': {'trajectory': 0.3, 'goal': 0.04}}, joints=JOINTS)
    path = [NS(name='j1', position=0.0, velocity=0.0, acceleration=0.0),      # 0: keep
            NS(name='j2', position=-1.0, velocity=0.5, acceleration=0.0)]     # -1 erases, >0 sets
    goal = [{'name': 'j1', 'position': 0.1, 'velocity': -1.0, 'acceleration': 0.0},
            {'name': 'j2', 'position': 0.0, 'velocity': 0.0, 'acceleration': 2.0}]
    tol = goal_tolerances(defaults, path, goal, 0.0)
    assert tol.path['j1'] == StateTolerance(0.2, 0.0, 0.0)
    assert tol.path['j2'] == StateTolerance(0.0, 0.5, 0.0)
    assert tol.path['j3'] == StateTolerance()
    assert tol.goal['j1'] == StateTolerance(0.1, 0.0, 0.0)         # stopped velocity check removed
    assert tol.goal['j2'] == StateTolerance(0.04, 0.01, 2.0)
    assert tol.goal['j3'] == StateTolerance(0.0, 0.01, 0.0)
    assert tol.goal_time == 0.5                                    # 0 keeps the default
    assert goal_tolerances(defaults, [], [], 3.0).goal_time == 3.0
    assert goal_tolerances(defaults, [], [], -1.0).goal_time == 0.0
    assert goal_tolerances(defaults, [], [], NS(sec=1, nanosec=250_000_000)).goal_time == 1.25
    # defaults untouched
    assert defaults.path['j2'] == StateTolerance(0.3) and defaults.goal['j1'] == StateTolerance(0.02, 0.01)


def test_goal_tolerance_unknown_joint_or_illegal_value():
    defaults = default_tolerances({'j1': {'goal': 0.02}}, joints=JOINTS)
    with pytest.raises(GoalRejected) as info:
        goal_tolerances(defaults, [NS(name='jX', position=0.1, velocity=0.0, acceleration=0.0)], [], 0.0)
    assert info.value.error_code == INVALID_GOAL and "'jX'" in str(info.value)
    with pytest.raises(GoalRejected) as info:
        goal_tolerances(defaults, [], [NS(name='j1', position=-0.5, velocity=0.0, acceleration=0.0)], 0.0)
    assert info.value.error_code == INVALID_GOAL and "'j1'" in str(info.value) and 'position' in str(info.value)
    with pytest.raises(GoalRejected):
        goal_tolerances(defaults, [], [], -2.0)
    # JTC behaviour (strict=False): fall back to the defaults
    fallback = goal_tolerances(defaults, [NS(name='jX', position=0.1, velocity=0.0, acceleration=0.0)], [],
                               5.0, strict=False)
    assert fallback == defaults


def test_resolve_tolerance():
    assert resolve_tolerance(0.2, 0.0) == 0.2
    assert resolve_tolerance(0.2, 0.5) == 0.5
    assert resolve_tolerance(0.2, -1.0) == 0.0
    with pytest.raises(GoalRejected):
        resolve_tolerance(0.2, -0.5)
    with pytest.raises(GoalRejected):
        resolve_tolerance(0.2, float('nan'))


def test_check_state():
    tol = {'j1': StateTolerance(position=0.1), 'j2': StateTolerance(position=0.1, velocity=0.2),
           'j3': StateTolerance()}
    assert check_state(JOINTS, [0, 0, 0], [0, 0, 0], [0.05, -0.05, 5.0], [0, 0.1, 9.0], tol) is None
    text = check_state(JOINTS, [0, 0, 0], [0, 0, 0], [0.05, 0.0, 0.0], [0, 0.3, 0], tol)
    assert "'j2'" in text and 'velocity' in text and '0.2' in text
    text = check_state(JOINTS, [0, 0, 0], [0, 0, 0], [0.15, 0.0, 0.0], [0, 0.3, 0], tol)
    assert "'j1'" in text and 'position' in text and '0.1' in text  # first violating joint
    # no velocity available: velocity not checked
    assert check_state(JOINTS, [0, 0, 0], None, [0, 0, 0], [0, 9, 0], tol) is None
    # wraparound for continuous joints
    assert check_state(['j1'], [3.1], None, [-3.1], None, tol) is not None
    assert check_state(['j1'], [3.1], None, [-3.1], None, tol, wraparound={'j1'}) is None
    # NaN counts as a violation
    assert check_state(['j1'], [0.0], None, [float('nan')], None, tol) is not None
    with pytest.raises(ValueError):
        check_state(JOINTS, [0, 0], None, [0, 0, 0], None, tol)


def test_check_path():
    tol = default_tolerances({'j1': {'trajectory': 0.1}}, joints=JOINTS)
    assert check_path(JOINTS, [0, 0, 0], None, [0.05, 1, 1], None, tol) == RUNNING_VERDICT
    verdict = check_path(JOINTS, [0, 0, 0], None, [0.2, 0, 0], None, tol)
    assert isinstance(verdict, Verdict)
    assert (verdict.outcome, verdict.code) == (GoalOutcome.ABORTED, PATH_TOLERANCE_VIOLATED)
    assert "'j1'" in verdict.message


def test_verdict_aborted_defaults_to_invalid_goal():
    assert Verdict.aborted('preempted') == (GoalOutcome.ABORTED, INVALID_GOAL, 'preempted')
    assert Verdict.aborted('off', PATH_TOLERANCE_VIOLATED).code == PATH_TOLERANCE_VIOLATED


def test_check_goal_running_then_succeeded():
    tol = default_tolerances({'goal_time': 1.0, 'j1': {'goal': 0.02}, 'j2': {'goal': 0.02}}, joints=JOINTS)
    target = [0.5, 0.3, 0.0]
    # before the end: running, nothing checked
    assert check_goal(JOINTS, target, [0, 0, 0], [1, 1, 1], tol, -0.1) == RUNNING_VERDICT
    # at the end, not yet within position tolerance
    state, code, text = check_goal(JOINTS, target, [0.45, 0.3, 0.9], [0, 0, 0], tol, 0.2)
    assert (state, code) == (GoalOutcome.RUNNING, SUCCESSFUL) and "'j1'" in text
    # within position tolerance but still moving (stopped_velocity 0.01)
    state, code, text = check_goal(JOINTS, target, [0.49, 0.3, 0.9], [0, 0.05, 0], tol, 0.4)
    assert (state, code) == (GoalOutcome.RUNNING, SUCCESSFUL) and "'j2'" in text and 'velocity' in text
    # settled (j3 has no position tolerance)
    state, code, _ = check_goal(JOINTS, target, [0.49, 0.31, 0.9], [0.005, 0, 0.0], tol, 0.6)
    assert (state, code) == (GoalOutcome.SUCCEEDED, SUCCESSFUL)


def test_check_goal_aborts_after_goal_time():
    tol = default_tolerances({'goal_time': 1.0, 'j1': {'goal': 0.02}}, joints=JOINTS)
    target = [0.5, 0.0, 0.0]
    actual = [0.4, 0.0, 0.0]
    assert check_goal(JOINTS, target, actual, [0, 0, 0], tol, 1.0)[0] == GoalOutcome.RUNNING   # not yet past goal_time
    state, code, text = check_goal(JOINTS, target, actual, [0, 0, 0], tol, 1.01)
    assert (state, code) == (GoalOutcome.ABORTED, GOAL_TOLERANCE_VIOLATED)
    assert "'j1'" in text and 'position' in text and '1.000 s' in text


def test_check_goal_zero_goal_time_waits_indefinitely():
    tol = default_tolerances({'j1': {'goal': 0.02}}, joints=JOINTS)
    assert tol.goal_time == 0.0
    state, code, _ = check_goal(JOINTS, [0.5, 0, 0], [0.0, 0, 0], [0, 0, 0], tol, 1e6)
    assert (state, code) == (GoalOutcome.RUNNING, SUCCESSFUL)


def test_check_goal_velocity_erased_or_unavailable():
    defaults = default_tolerances({'j1': {'goal': 0.02}}, joints=JOINTS)
    moving = [0.5, 0, 0]
    assert check_goal(JOINTS, [0, 0, 0], [0, 0, 0], moving, defaults, 0.1)[0] == GoalOutcome.RUNNING
    erased = goal_tolerances(defaults, [], [NS(name='j1', position=0.0, velocity=-1.0, acceleration=0.0)], 0.0)
    assert check_goal(['j1'], [0], [0], [0.5], erased, 0.1)[0] == GoalOutcome.SUCCEEDED
    assert check_goal(JOINTS, [0, 0, 0], [0, 0, 0], None, defaults, 0.1)[0] == GoalOutcome.SUCCEEDED


def test_tolerances_unlisted_joint_defaults():
    tol = Tolerances(path={}, goal={})
    assert tol.path_for('x') == StateTolerance() and tol.goal_for('x') == StateTolerance(0.0, 0.01, 0.0)


# -- real ROS messages ---------------------------------------------------------------------
def test_real_follow_joint_trajectory_goal_tolerances():
    action = pytest.importorskip('control_msgs.action')
    cm = pytest.importorskip('control_msgs.msg')
    bi = pytest.importorskip('builtin_interfaces.msg')
    defaults = default_tolerances({'goal_time': 0.5, 'j1': {'trajectory': 0.2, 'goal': 0.02}}, joints=JOINTS)
    goal = action.FollowJointTrajectory.Goal()
    goal.path_tolerance = [cm.JointTolerance(name='j1', position=-1.0, velocity=0.3)]
    goal.goal_tolerance = [cm.JointTolerance(name='j2', position=0.05)]
    goal.goal_time_tolerance = bi.Duration(sec=2, nanosec=500_000_000)
    tol = tolerances_from_goal(defaults, goal)
    assert tol.path['j1'] == StateTolerance(0.0, 0.3, 0.0)
    assert tol.goal['j2'] == StateTolerance(0.05, 0.01, 0.0)
    assert tol.goal_time == pytest.approx(2.5)
