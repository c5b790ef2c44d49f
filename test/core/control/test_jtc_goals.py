"""Tests of shadow_twin.control.jtc's goal validation (no ROS needed): what a JTC goal must be to be
accepted, one test per rejection rule, the result codes, and the joint limits it is checked
against (JointLimits, joint_limits_from_model). Tolerances: test_jtc_tolerances.py.

Messages are types.SimpleNamespace stand-ins; where trajectory_msgs is importable, the same
checks run on real messages too.
"""

from pathlib import Path
from types import SimpleNamespace as NS

import mujoco
import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError, ModelError, ShadowTwinError
from shadow_twin.common.stamps import to_sec_nanosec
from shadow_twin.control.jtc import (GOAL_TOLERANCE_VIOLATED, INVALID_GOAL, INVALID_JOINTS, OLD_HEADER_TIMESTAMP,
                                     PATH_TOLERANCE_VIOLATED, SUCCESSFUL, GoalRejected, JointLimits, ResultCode,
                                     joint_limits_from_model, result_name, validate_goal, validate_goal_msg)
from shadow_twin.control.trajectory import JointTrajectory


MODEL_PATH = Path(__file__).parents[3] / 'shadow_twin' / 'model' / 'builtin' / 'shadow_hand_e.xml'
JOINTS = ['j1', 'j2', 'j3']
LIMITS = {'j1': JointLimits(-1.0, 1.0, 2.0), 'j2': JointLimits(0.0, 1.5), 'j3': JointLimits(max_velocity=1.0)}
NOW = 1000.0


def duration(t):
    sec, nanosec = to_sec_nanosec(t)
    return NS(sec=sec, nanosec=nanosec)


def point(t, positions, velocities=(), accelerations=(), effort=()):
    return NS(time_from_start=duration(t), positions=list(positions), velocities=list(velocities),
              accelerations=list(accelerations), effort=list(effort))


def msg(points, joint_names=JOINTS, stamp=0.0):
    return NS(header=NS(stamp=duration(stamp), frame_id=''), joint_names=list(joint_names), points=list(points))


def good_points():
    return [point(1.0, [0.1, 0.2, 0.3]), point(2.0, [0.2, 0.4, 0.6])]


def reject(m, code, *needles, **kwargs):
    """Assert validate_goal_msg rejects ``m`` with ``code`` and a message naming ``needles``."""
    kwargs.setdefault('known_joints', JOINTS)
    kwargs.setdefault('limits', LIMITS)
    kwargs.setdefault('now', NOW)
    with pytest.raises(GoalRejected) as info:
        validate_goal_msg(m, **kwargs)
    exc = info.value
    assert exc.error_code == code, str(exc)
    assert isinstance(exc, ShadowTwinError)
    text = str(exc)
    assert '\n' not in text
    for needle in needles:
        assert needle in text, (needle, text)
    return exc


# -- acceptance ----------------------------------------------------------------------------
def test_valid_goal_is_converted():
    traj = validate_goal_msg(msg(good_points()), JOINTS, LIMITS, NOW)
    assert isinstance(traj, JointTrajectory)
    assert traj.joint_names == JOINTS
    np.testing.assert_allclose(traj.times, [1.0, 2.0])
    np.testing.assert_allclose(traj.positions[1], [0.2, 0.4, 0.6])
    assert traj.velocities is None


def test_partial_goal_allowed_by_default_and_any_order():
    validate_goal_msg(msg([point(1.0, [0.5, 0.1])], joint_names=['j3', 'j1']), JOINTS, LIMITS, NOW)


def test_validate_goal_accepts_jointtrajectory():
    traj = JointTrajectory(JOINTS, [1.0, 2.0], [[0.1, 0.2, 0.3], [0.2, 0.4, 0.6]],
                           velocities=[[0.1, 0.2, 0.3], [0.0, 0.0, 0.0]])
    validate_goal(traj, JOINTS, LIMITS, NOW)
    validate_goal(traj, JOINTS, LIMITS, NOW, start_time=NOW - 1.5)  # started in the past, still running


# -- one test per rejection rule -------------------------------------------------------------
def test_reject_empty_joint_names():
    reject(msg(good_points(), joint_names=[]), INVALID_JOINTS, 'no joint names')


def test_reject_empty_points():
    reject(msg([]), INVALID_GOAL, 'no points')


def test_reject_unknown_joint():
    exc = reject(msg([point(1.0, [0.0, 0.0, 0.0])], joint_names=['j1', 'jX', 'j3']), INVALID_JOINTS, "'jX'")
    assert exc.error_name == 'INVALID_JOINTS'


def test_validate_goal_rejects_unknown_joint():
    traj = JointTrajectory(['j1', 'jX'], [1.0], [[0.0, 0.0]])
    with pytest.raises(GoalRejected) as info:
        validate_goal(traj, JOINTS, LIMITS, NOW)
    assert info.value.error_code == INVALID_JOINTS and 'jX' in str(info.value)


def test_reject_duplicate_joint():
    reject(msg([point(1.0, [0.0, 0.0, 0.0])], joint_names=['j1', 'j2', 'j1']), INVALID_JOINTS, "'j1'",
           'more than once')


def test_reject_missing_joints_when_partial_not_allowed():
    m = msg([point(1.0, [0.0, 0.0])], joint_names=['j1', 'j2'])
    reject(m, INVALID_JOINTS, "'j3'", 'partial', allow_partial_joints_goal=False)
    validate_goal_msg(m, JOINTS, LIMITS, NOW, allow_partial_joints_goal=True)


@pytest.mark.parametrize('field', ['positions', 'velocities', 'accelerations'])
def test_reject_size_mismatch(field):
    p = good_points()
    setattr(p[1], field, [0.0, 0.0])
    reject(msg(p), INVALID_GOAL, 'point 1', f'2 {field}', '3 joints')


def test_reject_missing_positions():
    p = good_points()
    p[0].positions = []
    reject(msg(p), INVALID_GOAL, 'point 0', '0 positions')


def test_reject_effort_as_jtc_and_check_size_when_allowed():
    p = good_points()
    p[0].effort = [0.0, 0.0, 0.0]
    reject(msg(p), INVALID_GOAL, 'point 0', 'effort')
    validate_goal_msg(msg(p), JOINTS, LIMITS, NOW, allow_effort=True)
    p[0].effort = [0.0]
    reject(msg(p), INVALID_GOAL, 'point 0', '1 effort', allow_effort=True)


@pytest.mark.parametrize('bad', [float('nan'), float('inf')])
def test_reject_nan_inf(bad):
    p = good_points()
    p[1].positions = [0.2, bad, 0.6]
    reject(msg(p), INVALID_GOAL, 'point 1', 'positions', "'j2'", 'NaN or inf')
    p = good_points()
    p[0].velocities = [0.0, 0.0, bad]
    reject(msg(p), INVALID_GOAL, 'point 0', 'velocities', "'j3'")


def test_reject_non_increasing_time():
    p = [point(1.0, [0.1, 0.2, 0.3]), point(1.0, [0.2, 0.4, 0.6])]
    reject(msg(p), INVALID_GOAL, 'strictly increasing', 'point 0', 'point 1')
    p = [point(2.0, [0.1, 0.2, 0.3]), point(1.0, [0.2, 0.4, 0.6])]
    reject(msg(p), INVALID_GOAL, 'strictly increasing')


def test_reject_negative_first_time():
    p = [NS(time_from_start=NS(sec=-1, nanosec=0), positions=[0, 0, 0], velocities=[], accelerations=[],
            effort=[])]
    reject(msg(p), INVALID_GOAL, 'point 0', 'negative')


def test_reject_position_below_and_above_limits():
    p = good_points()
    p[1].positions = [1.2, 0.4, 0.6]
    reject(msg(p), INVALID_GOAL, 'point 1', "'j1'", 'limits', '1.2')
    p = good_points()
    p[0].positions = [0.0, -0.1, 0.0]
    reject(msg(p), INVALID_GOAL, 'point 0', "'j2'", 'limits')


def test_position_on_the_limit_is_accepted():
    validate_goal_msg(msg([point(1.0, [1.0, 0.0, 0.0]), point(2.0, [-1.0, 1.5, 0.0])]), JOINTS, LIMITS, NOW)


def test_reject_explicit_velocity_above_limit():
    p = [point(1.0, [0.1, 0.2, 0.3], velocities=[2.5, 0.0, 0.0]), point(2.0, [0.2, 0.4, 0.6], [0, 0, 0])]
    reject(msg(p), INVALID_GOAL, 'point 0', "'j1'", 'velocity', '2.5', 'limit 2')


def test_reject_implied_segment_velocity_above_limit():
    # j3 moves 0.6 rad in 0.5 s = 1.2 rad/s > 1.0 rad/s, with no velocities given
    p = [point(1.0, [0.0, 0.0, 0.0]), point(1.5, [0.0, 0.0, 0.6])]
    reject(msg(p), INVALID_GOAL, 'point 0 to point 1', "'j3'", '1.2 rad/s', 'limit 1')


def test_reject_implied_velocity_from_current_state():
    # first point 0.9 rad from the current state in 0.5 s (1.8 rad/s > 1.0 rad/s)
    p = [point(0.5, [0.0, 0.0, 0.9]), point(5.0, [0.0, 0.0, 0.9])]
    validate_goal_msg(msg(p), JOINTS, LIMITS, NOW)  # without the current state: not checked
    reject(msg(p), INVALID_GOAL, 'current state', "'j3'", current_positions={'j1': 0.0, 'j2': 0.0, 'j3': 0.0})
    validate_goal_msg(msg(p), JOINTS, LIMITS, NOW, current_positions={'j3': 0.8})


def test_reject_nonzero_velocity_at_end_unless_allowed():
    p = [point(1.0, [0.1, 0.2, 0.3]), point(2.0, [0.2, 0.4, 0.6], velocities=[0.0, 0.1, 0.0])]
    reject(msg(p), INVALID_GOAL, 'last point', "'j2'", 'allow_nonzero_velocity_at_trajectory_end')
    p[0].velocities = [0.0, 0.0, 0.0]
    validate_goal_msg(msg(p), JOINTS, LIMITS, NOW, allow_nonzero_velocity_at_trajectory_end=True)


def test_old_header_timestamp_only_if_whole_trajectory_is_over():
    # last point at 2 s; stamped 5 s ago -> ended 3 s ago
    exc = reject(msg(good_points(), stamp=NOW - 5.0), OLD_HEADER_TIMESTAMP, 'ends at', 'before now')
    assert exc.error_name == 'OLD_HEADER_TIMESTAMP'
    validate_goal_msg(msg(good_points(), stamp=NOW - 1.0), JOINTS, LIMITS, NOW)  # still running: joined
    validate_goal_msg(msg(good_points(), stamp=NOW + 3.0), JOINTS, LIMITS, NOW)  # future start
    validate_goal_msg(msg(good_points(), stamp=0.0), JOINTS, LIMITS, NOW)       # 0 = start now
    traj = JointTrajectory(JOINTS, [1.0, 2.0], [[0.1, 0.2, 0.3], [0.2, 0.4, 0.6]])
    with pytest.raises(GoalRejected) as info:
        validate_goal(traj, JOINTS, LIMITS, NOW, start_time=NOW - 2.5)
    assert info.value.error_code == OLD_HEADER_TIMESTAMP


def test_velocities_on_some_points_only_are_accepted_and_sampled_as_absent():
    # the JTC accepts velocities on some points only; JointTrajectory then ignores them
    p = [point(1.0, [0.1, 0.2, 0.3], velocities=[0.1, 0.1, 0.1]), point(2.0, [0.2, 0.4, 0.6])]
    traj = validate_goal_msg(msg(p), JOINTS, LIMITS, now=0.0)
    assert traj.velocities is None and traj.positions.shape == (2, 3)


def test_goal_rejected_needs_error_code():
    for not_an_error in (SUCCESSFUL, -9, 'INVALID_GOAL', None):
        with pytest.raises(ValueError):
            GoalRejected(not_an_error, 'fine')
    exc = GoalRejected(-2, 'two\nlines')
    assert str(exc) == 'two lines' == exc.error_string
    assert exc.error_code is ResultCode.INVALID_JOINTS and exc.error_name == 'INVALID_JOINTS'


def test_result_codes_are_the_control_msgs_values():
    assert [int(c) for c in ResultCode] == [0, -1, -2, -3, -4, -5]
    assert (SUCCESSFUL, INVALID_GOAL, PATH_TOLERANCE_VIOLATED) == (0, -1, -4)
    assert result_name(GOAL_TOLERANCE_VIOLATED) == 'GOAL_TOLERANCE_VIOLATED'
    assert result_name(-42) == '-42'                 # a controller's own code, named by its number


def test_joint_limits_validation():
    with pytest.raises(ConfigError):
        JointLimits(1.0, -1.0)
    with pytest.raises(ConfigError):
        JointLimits(max_velocity=0.0)


# -- real ROS messages ---------------------------------------------------------------------
def test_real_trajectory_msgs():
    tm = pytest.importorskip('trajectory_msgs.msg')
    bi = pytest.importorskip('builtin_interfaces.msg')
    m = tm.JointTrajectory()
    m.joint_names = list(JOINTS)
    for t, q in ((1, [0.1, 0.2, 0.3]), (2, [0.2, 0.4, 0.6])):
        pt = tm.JointTrajectoryPoint()
        pt.positions = q
        pt.time_from_start = bi.Duration(sec=t, nanosec=0)
        m.points.append(pt)
    traj = validate_goal_msg(m, JOINTS, LIMITS, NOW)
    np.testing.assert_allclose(traj.positions, [[0.1, 0.2, 0.3], [0.2, 0.4, 0.6]])
    m.header.stamp = bi.Time(sec=int(NOW) - 10, nanosec=0)
    with pytest.raises(GoalRejected) as info:
        validate_goal_msg(m, JOINTS, LIMITS, NOW)
    assert info.value.error_code == OLD_HEADER_TIMESTAMP
    m.header.stamp = bi.Time(sec=0, nanosec=0)
    m.points[1].positions = [0.2, 0.4, float('nan')]
    with pytest.raises(GoalRejected) as info:
        validate_goal_msg(m, JOINTS, LIMITS, NOW)
    assert info.value.error_code == INVALID_GOAL and "'j3'" in str(info.value)


# -- limits from the built-in model ------------------------------------------------------------
def test_joint_limits_from_builtin_model():
    model = mujoco.MjModel.from_xml_path(str(MODEL_PATH))
    limits = joint_limits_from_model(model, ['rh_FFJ3', 'rh_WRJ2', 'rh_THJ5'], {'rh_FFJ3': 2.0})
    assert (limits['rh_FFJ3'].lower, limits['rh_FFJ3'].max_velocity) == (0.0, 2.0)
    assert limits['rh_FFJ3'].upper == pytest.approx(1.5708)
    assert limits['rh_WRJ2'].lower == pytest.approx(-0.523599)
    assert limits['rh_WRJ2'].upper == pytest.approx(0.174533)
    assert limits['rh_WRJ2'].max_velocity is None
    assert limits['rh_THJ5'].lower == pytest.approx(-1.0472)
    everything = joint_limits_from_model(model)
    assert len(everything) == model.njnt and all(lim.lower is not None for lim in everything.values())
    # goal validation against the model's limits
    traj = JointTrajectory(['rh_FFJ3'], [1.0], [[1.7]])
    with pytest.raises(GoalRejected) as info:
        validate_goal(traj, list(everything), everything, NOW)
    assert 'rh_FFJ3' in str(info.value) and info.value.error_code == INVALID_GOAL


def test_joint_limits_unlimited_and_errors():
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><joint name="free_hinge" type="hinge"/><geom size="0.1"/>'
        '<body><joint name="ball" type="ball"/><geom size="0.1"/></body></body></worldbody></mujoco>')
    assert joint_limits_from_model(model, ['free_hinge']) == {'free_hinge': JointLimits()}
    with pytest.raises(ModelError):
        joint_limits_from_model(model, ['nope'])
    with pytest.raises(ModelError):
        joint_limits_from_model(model, ['ball'])
    with pytest.raises(ConfigError):
        joint_limits_from_model(model, ['free_hinge'], {'other': 1.0})
    with pytest.raises(ConfigError):
        joint_limits_from_model(model, ['free_hinge'], {'free_hinge': -1.0})


def test_joint_limits_keyed_by_ros_names():
    from shadow_twin.model.joint_map import JointNameMap
    model = mujoco.MjModel.from_xml_path(str(MODEL_PATH))
    limits = joint_limits_from_model(model, ['rh_FFJ3'], {'ffj3': 1.0}, joint_map=JointNameMap({'ffj3': 'rh_FFJ3'}))
    assert list(limits) == ['ffj3'] and limits['ffj3'].max_velocity == 1.0
