"""shadow_twin.control.trajectory: waypoint YAML, validation, spline sampling, message conversion."""

from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from conftest import README_JOINTS

from shadow_twin.common.errors import TrajectoryError
from shadow_twin.control.trajectory import JointTrajectory, load_waypoint_yaml, parse_trajectory_arg, validate_arrays


# -- waypoint YAML -----------------------------------------------------------------------------
def test_hand_closing_from_real_yaml(trajectories_yaml):
    traj = load_waypoint_yaml(trajectories_yaml, 'hand_closing')
    assert traj.name == 'hand_closing'
    assert traj.joint_names == README_JOINTS  # hand_joints_order with the rh_ prefix
    np.testing.assert_allclose(traj.times, [0.1, 3.1, 6.1], atol=1e-12)  # cumulative interpolate_time
    assert traj.positions.shape == (3, 24)
    assert traj.velocities is None and traj.accelerations is None
    closed = dict(zip(traj.joint_names, traj.positions[1]))
    assert closed['rh_FFJ1'] == closed['rh_FFJ3'] == closed['rh_MFJ2'] == pytest.approx(1.5707)
    assert closed['rh_FFJ4'] == 0.0
    assert closed['rh_WRJ1'] == pytest.approx(0.012) and closed['rh_WRJ2'] == pytest.approx(0.007)
    assert np.all(traj.positions[0] == 0) and np.all(traj.positions[2] == 0)
    assert traj.duration == pytest.approx(6.1)
    assert traj.motion_start() == pytest.approx(0.1)  # first waypoint repeats the rest pose


def test_unknown_name_lists_the_known_ones(trajectories_yaml):
    with pytest.raises(TrajectoryError) as info:
        load_waypoint_yaml(trajectories_yaml, 'hand_opening')
    message = str(info.value)
    assert 'hand_opening' in message
    for known in ('hand_closing', 'index_closing', 'j4_calibration', 'arm_trajectory'):
        assert known in message


def _write_waypoints(path, waypoints, order=('FFJ1', 'FFJ2')):
    path.write_text(yaml.safe_dump({'hand_joints_order': list(order),
                                    'hand_trajectories': {'t': waypoints}}))
    return path


def test_small_waypoint_file(tmp_path):
    path = _write_waypoints(tmp_path / 'w.yaml', [
        {'joint_angles': [0.1, 0.2], 'interpolate_time': 0.5},
        {'joint_angles': [1.0, 2.0], 'interpolate_time': 2}], order=('FFJ1', 'rh_FFJ2'))
    traj = load_waypoint_yaml(path, 't')
    assert traj.joint_names == ['rh_FFJ1', 'rh_FFJ2']  # prefix added once, not twice
    np.testing.assert_allclose(traj.times, [0.5, 2.5])
    np.testing.assert_allclose(traj.positions, [[0.1, 0.2], [1.0, 2.0]])
    assert load_waypoint_yaml(path, 't', prefix='lh_').joint_names == ['lh_FFJ1', 'lh_rh_FFJ2']


def test_wrong_vector_length(tmp_path):
    path = _write_waypoints(tmp_path / 'w.yaml', [{'joint_angles': [0.1, 0.2, 0.3], 'interpolate_time': 1}])
    with pytest.raises(TrajectoryError, match=r'waypoint 0 has 3 joint_angles for 2 joints'):
        load_waypoint_yaml(path, 't')


@pytest.mark.parametrize('step', [0, -1.0, None])
def test_non_positive_interpolate_time(tmp_path, step):
    waypoint = {'joint_angles': [0.1, 0.2]}
    if step is not None:
        waypoint['interpolate_time'] = step
    path = _write_waypoints(tmp_path / 'w.yaml', [{'joint_angles': [0, 0], 'interpolate_time': 1}, waypoint])
    with pytest.raises(TrajectoryError, match='waypoint 1 needs a positive interpolate_time'):
        load_waypoint_yaml(path, 't')


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(TrajectoryError, match='not found'):
        load_waypoint_yaml(tmp_path / 'absent.yaml', 'hand_closing')
    bad = tmp_path / 'bad.yaml'
    bad.write_text('hand_trajectories: [unclosed\n')
    with pytest.raises(TrajectoryError, match='not valid YAML'):
        load_waypoint_yaml(bad, 'x')
    empty = _write_waypoints(tmp_path / 'empty.yaml', [])
    with pytest.raises(TrajectoryError, match='no waypoints'):
        load_waypoint_yaml(empty, 't')


def test_file_colon_name_argument(tmp_path):
    folder = tmp_path / 'with:colon'
    folder.mkdir()
    path = _write_waypoints(folder / 'w.yaml', [{'joint_angles': [0.3, 0.4], 'interpolate_time': 1}])
    traj = parse_trajectory_arg(f'{path}:t')  # the last colon separates the name
    assert traj.name == 't' and traj.joint_names == ['rh_FFJ1', 'rh_FFJ2']
    with pytest.raises(TrajectoryError, match='FILE.yaml:NAME'):
        parse_trajectory_arg('trajectories.yaml')
    with pytest.raises(TrajectoryError, match='not found'):
        parse_trajectory_arg(f'{tmp_path / "nope.yaml"}:t')
    with pytest.raises(TrajectoryError, match="no trajectory named 'u'"):
        parse_trajectory_arg(f'{path}:u')


# -- sampling ----------------------------------------------------------------------------------
TIMES = np.array([0.5, 1.5, 3.0, 3.5])
POS = np.array([[0.0, 1.0], [1.0, -1.0], [0.5, 0.5], [2.0, 0.0]])
VEL = np.array([[0.0, 0.5], [1.0, -2.0], [-0.5, 0.0], [0.3, 0.2]])
ACC = np.array([[0.0, 1.0], [2.0, 0.0], [-1.0, 3.0], [0.5, -0.5]])


def test_linear_passes_through_points_with_slope_velocity():
    traj = JointTrajectory(['a', 'b'], TIMES, POS)
    pos, vel, acc = traj.sample(TIMES)
    np.testing.assert_allclose(pos, POS, atol=1e-12)
    rng = np.random.default_rng(0)
    for k in range(len(TIMES) - 1):
        t = rng.uniform(TIMES[k], TIMES[k + 1], 5)
        p, v, a = traj.sample(t)
        slope = (POS[k + 1] - POS[k]) / (TIMES[k + 1] - TIMES[k])
        np.testing.assert_allclose(v, np.tile(slope, (5, 1)), atol=1e-12)
        np.testing.assert_allclose(p, POS[k] + np.outer(t - TIMES[k], slope), atol=1e-12)
        np.testing.assert_array_equal(a, 0.0)
    # scalar time -> (J,) arrays
    p, v, a = traj.sample(1.0)
    assert p.shape == v.shape == a.shape == (2,)
    np.testing.assert_allclose(p, 0.5 * (POS[0] + POS[1]))


def _left_right(traj, t, interpolation, eps=1e-7):
    left = traj.sample(np.array([t - eps]), interpolation)
    right = traj.sample(np.array([t + eps]), interpolation)
    return left, right


def test_cubic_hits_positions_and_velocities_and_is_continuous():
    traj = JointTrajectory(['a', 'b'], TIMES, POS, VEL)
    pos, vel, _ = traj.sample(TIMES)  # 'auto' -> cubic (velocities given)
    np.testing.assert_allclose(pos, POS, atol=1e-12)
    np.testing.assert_allclose(vel, VEL, atol=1e-12)
    for t in TIMES[1:-1]:
        (pl, vl, _), (pr, vr, _) = _left_right(traj, t, 'cubic')
        np.testing.assert_allclose(pl, pr, atol=1e-5)
        np.testing.assert_allclose(vl, vr, atol=1e-4)
    # velocity is the derivative of position inside a segment
    t, h = 2.2, 1e-6
    p1, p2 = traj.sample(t - h)[0], traj.sample(t + h)[0]
    np.testing.assert_allclose((p2 - p1) / (2 * h), traj.sample(t)[1], atol=1e-6)
    # differs from linear interpolation (velocities matter)
    assert not np.allclose(traj.sample(2.2, 'cubic')[0], traj.sample(2.2, 'linear')[0])


def test_quintic_hits_positions_velocities_accelerations_and_is_continuous():
    traj = JointTrajectory(['a', 'b'], TIMES, POS, VEL, ACC)
    pos, vel, acc = traj.sample(TIMES)  # 'auto' -> quintic
    np.testing.assert_allclose(pos, POS, atol=1e-12)
    np.testing.assert_allclose(vel, VEL, atol=1e-11)
    np.testing.assert_allclose(acc, ACC, atol=1e-10)
    for t in TIMES[1:-1]:
        (pl, vl, al), (pr, vr, ar) = _left_right(traj, t, 'quintic')
        np.testing.assert_allclose(pl, pr, atol=1e-5)
        np.testing.assert_allclose(vl, vr, atol=1e-5)
        np.testing.assert_allclose(al, ar, atol=1e-4)
    t, h = 1.1, 1e-5
    (p1, v1, _), (p2, v2, _) = traj.sample(t - h), traj.sample(t + h)
    _, v, a = traj.sample(t)
    np.testing.assert_allclose((p2 - p1) / (2 * h), v, atol=1e-6)
    np.testing.assert_allclose((v2 - v1) / (2 * h), a, atol=1e-5)


def test_quintic_without_given_fields_uses_zero_velocity_and_acceleration():
    traj = JointTrajectory(['a', 'b'], TIMES, POS)
    pos, vel, acc = traj.sample(TIMES, 'quintic')
    np.testing.assert_allclose(pos, POS, atol=1e-12)
    np.testing.assert_allclose(vel, 0.0, atol=1e-12)
    np.testing.assert_allclose(acc, 0.0, atol=1e-10)


@pytest.mark.parametrize('interpolation', ['linear', 'cubic', 'quintic'])
def test_holds_before_and_after(interpolation):
    traj = JointTrajectory(['a', 'b'], TIMES, POS, VEL, ACC)
    pos, vel, acc = traj.sample(np.array([0.0, 0.2, 3.6, 10.0]), interpolation)
    np.testing.assert_allclose(pos[:2], POS[[0, 0]], atol=1e-12)
    np.testing.assert_allclose(pos[2:], POS[[-1, -1]], atol=1e-12)
    np.testing.assert_array_equal(vel, 0.0)
    np.testing.assert_array_equal(acc, 0.0)


def test_unknown_interpolation():
    traj = JointTrajectory(['a', 'b'], TIMES, POS)
    with pytest.raises(TrajectoryError, match='unknown interpolation'):
        traj.sample(1.0, 'spline')


def test_single_point_trajectory_holds():
    traj = JointTrajectory(['a'], [2.0], [[0.7]])
    pos, vel, _ = traj.sample(np.array([0.0, 2.0, 5.0]))
    np.testing.assert_allclose(pos, 0.7)
    np.testing.assert_array_equal(vel, 0.0)


def test_with_start_prepends_t0():
    traj = JointTrajectory(['a', 'b'], TIMES, POS, VEL, ACC)
    started = traj.with_start([0.3, -0.2], [0.1, 0.0])
    np.testing.assert_allclose(started.times, np.concatenate([[0.0], TIMES]))
    np.testing.assert_allclose(started.positions[0], [0.3, -0.2])
    np.testing.assert_allclose(started.velocities[0], [0.1, 0.0])
    np.testing.assert_allclose(started.accelerations[0], 0.0)
    np.testing.assert_allclose(started.positions[1:], POS)
    np.testing.assert_allclose(started.sample(0.0)[0], [0.3, -0.2])
    # the original is unchanged; a start state is only prepended when t0 > 0
    assert traj.times[0] == 0.5
    from_zero = JointTrajectory(['a', 'b'], [0.0, 1.0], POS[:2])
    assert from_zero.with_start([5.0, 5.0]) is from_zero
    with pytest.raises(TrajectoryError, match='start state has 3 positions'):
        traj.with_start([0, 0, 0])


def test_position_only_with_start_ramps_linearly_from_start():
    traj = JointTrajectory(['a'], [2.0], [[1.0]]).with_start([0.0])
    pos, vel, _ = traj.sample(np.array([0.5, 1.0]))
    np.testing.assert_allclose(pos[:, 0], [0.25, 0.5])
    np.testing.assert_allclose(vel[:, 0], [0.5, 0.5])


def test_motion_start_follows_the_jtc_from_the_start_state():
    """The JTC moves from the start state to point 0 over point 0's time_from_start: a start state
    away from point 0 starts the motion at t = 0, one at point 0 when the waypoints first change."""
    traj = JointTrajectory(['a', 'b'], [0.5, 2.0, 3.0], [[0.2, 0.0], [0.2, 0.0], [1.0, 0.4]])
    assert traj.motion_start() == pytest.approx(2.0)    # between waypoints: after the hold
    assert traj.motion_start([0.2, 0.0]) == pytest.approx(2.0)
    assert traj.motion_start([0.23, -0.02]) == pytest.approx(2.0)   # rest offsets under the tolerance
    assert traj.motion_start([0.8, 0.0]) == 0.0
    assert traj.motion_start([0.2, -0.3]) == 0.0
    assert traj.motion_start([0.23, 0.0], start_tolerance=0.01) == 0.0
    assert traj.motion_start([np.nan, 0.0]) == pytest.approx(2.0)   # unknown joints do not count
    assert traj.motion_start([np.nan, 0.6]) == 0.0
    still = JointTrajectory(['a'], [1.0, 2.0], [[0.5], [0.5]])
    assert still.motion_start() == 0.0 and still.motion_start([0.5]) == 0.0
    assert still.motion_start([0.0]) == 0.0
    with pytest.raises(TrajectoryError, match='start state has 1 positions'):
        traj.motion_start([0.0])


def test_subset():
    traj = JointTrajectory(['a', 'b'], TIMES, POS, VEL)
    sub = traj.subset(['b'])
    np.testing.assert_allclose(sub.positions, POS[:, [1]])
    np.testing.assert_allclose(sub.velocities, VEL[:, [1]])
    with pytest.raises(TrajectoryError, match='no joint'):
        traj.subset(['c'])


# -- validation --------------------------------------------------------------------------------
def test_validate_arrays_rejects_bad_input():
    good = dict(joint_names=['a', 'b'], times=np.array([0.0, 1.0]), positions=np.zeros((2, 2)))
    validate_arrays(**good)  # no exception
    nan = np.zeros((2, 2))
    nan[1, 0] = np.nan
    cases = [
        (dict(good, positions=nan), 'positions contain NaN'),
        (dict(good, velocities=np.array([[0.0, np.inf], [0, 0]])), 'velocities contain NaN or inf'),
        (dict(good, joint_names=['a', 'a']), r"duplicate joint name\(s\) \['a'\]"),
        (dict(good, times=np.array([0.0, 0.0])), 'strictly increasing'),
        (dict(good, times=np.array([1.0, 0.5])), 'strictly increasing'),
        (dict(good, times=np.array([-0.1, 0.5])), 'non-negative'),
        (dict(good, times=np.array([0.0, np.nan])), 'NaN'),
        (dict(good, positions=np.zeros((2, 3))), r'positions have shape \(2, 3\)'),
        (dict(good, accelerations=np.zeros((3, 2))), r'accelerations have shape \(3, 2\)'),
        (dict(good, joint_names=[]), 'no joint names'),
        (dict(good, times=np.array([]), positions=np.zeros((0, 2))), 'no points'),
    ]
    for kwargs, message in cases:
        with pytest.raises(TrajectoryError, match=message):
            validate_arrays(**kwargs)


def test_constructor_validates():
    with pytest.raises(TrajectoryError, match='strictly increasing'):
        JointTrajectory(['a'], [1.0, 1.0], [[0.0], [1.0]])
    with pytest.raises(TrajectoryError, match='shape'):
        JointTrajectory(['a', 'b'], [1.0], [[0.0]])


# -- ROS messages ------------------------------------------------------------------------------
def _point(t, positions, velocities=(), accelerations=()):
    sec = int(t)
    return SimpleNamespace(positions=list(positions), velocities=list(velocities),
                           accelerations=list(accelerations),
                           time_from_start=SimpleNamespace(sec=sec, nanosec=int(round((t - sec) * 1e9))))


def test_from_msg_positions_only():
    msg = SimpleNamespace(joint_names=['rh_FFJ1', 'rh_FFJ2'],
                          points=[_point(0.25, [0.1, 0.2]), _point(2.5, [1.0, 1.5])])
    traj = JointTrajectory.from_msg(msg, name='goal1')
    assert traj.name == 'goal1' and traj.joint_names == ['rh_FFJ1', 'rh_FFJ2']
    np.testing.assert_allclose(traj.times, [0.25, 2.5], atol=1e-12)
    np.testing.assert_allclose(traj.positions, [[0.1, 0.2], [1.0, 1.5]])
    assert traj.velocities is None and traj.accelerations is None


def test_from_msg_with_velocities_and_accelerations():
    msg = SimpleNamespace(joint_names=['a', 'b'], points=[
        _point(1.0, [0, 1], [0.5, 0.5], [0, 0]), _point(2.0, [1, 2], [0, 0], [1, 1])])
    traj = JointTrajectory.from_msg(msg)
    np.testing.assert_allclose(traj.velocities, [[0.5, 0.5], [0, 0]])
    np.testing.assert_allclose(traj.accelerations, [[0, 0], [1, 1]])


@pytest.mark.parametrize('msg, message', [
    (SimpleNamespace(joint_names=[], points=[_point(1, [0])]), 'no joint names'),
    (SimpleNamespace(joint_names=['a'], points=[]), 'no points'),
    (SimpleNamespace(joint_names=['a', 'b'], points=[_point(1, [0, 1]), _point(2, [0])]), 'point 1 has 1 positions'),
    (SimpleNamespace(joint_names=['a'], points=[_point(1, [])]), 'no positions'),
    (SimpleNamespace(joint_names=['a'], points=[_point(2, [0]), _point(1, [1])]), 'strictly increasing'),
    (SimpleNamespace(joint_names=['a'], points=[_point(1, [float('nan')])]), 'NaN'),
    (SimpleNamespace(joint_names=['a', 'a'], points=[_point(1, [0, 0])]), 'duplicate'),
])
def test_from_msg_rejects(msg, message):
    with pytest.raises(TrajectoryError, match=message):
        JointTrajectory.from_msg(msg)


def test_from_msg_ignores_velocities_not_on_every_point():
    msg = SimpleNamespace(joint_names=['a', 'b'], points=[
        _point(1.0, [0, 1], [0.5, 0.5]), _point(2.0, [1, 2])])
    traj = JointTrajectory.from_msg(msg)
    assert traj.velocities is None
