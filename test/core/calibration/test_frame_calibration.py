"""shadow_twin.calibration.recordings.frame: the floor frame of a motion-capture system from three recorded
points (MiR250 + UR5 digital twin, IMECE 2023).

Every expectation is built here from a known floor frame (a rotation given as axis and angle,
with its quaternion and Rodrigues matrix written out in this file) placed in the capture frame,
never from the code under test.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest
import yaml

from shadow_twin.calibration.recordings.frame import FrameCalibration
from shadow_twin.common.errors import ConfigError, ShadowTwinError


# -- a known floor frame in the capture frame ----------------------------------------------------
def axis_angle_quaternion(axis, angle) -> np.ndarray:
    """Unit quaternion (x, y, z, w) of a rotation by ``angle`` about ``axis``."""
    axis = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    return np.append(axis * math.sin(angle / 2), math.cos(angle / 2))


def axis_angle_matrix(axis, angle) -> np.ndarray:
    """Rodrigues: R = I + sin(a) K + (1 - cos(a)) K^2, K the cross-product matrix of the unit axis."""
    kx, ky, kz = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    k = np.array([[0, -kz, ky], [kz, 0, -kx], [-ky, kx, 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * k @ k


def quaternion_product(p, q) -> np.ndarray:
    """Hamilton product p q of quaternions (x, y, z, w), row by row."""
    p, q = np.atleast_2d(p), np.atleast_2d(q)
    (px, py, pz, pw), (qx, qy, qz, qw) = p.T, q.T
    return np.column_stack([pw * qx + px * qw + py * qz - pz * qy,
                            pw * qy - px * qz + py * qw + pz * qx,
                            pw * qz + px * qy - py * qx + pz * qw,
                            pw * qw - px * qx - py * qy - pz * qz])


def rotate_by_quaternion(q, v) -> np.ndarray:
    """v' = v + 2 w (u x v) + 2 u x (u x v), q = (u, w)."""
    u, w = np.asarray(q[:3]), q[3]
    return v + 2 * w * np.cross(u, v) + 2 * np.cross(u, np.cross(u, v))


def rpy_matrix(roll, pitch, yaw) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch),
                              math.cos(yaw), math.sin(yaw))
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    return rz @ ry @ rx


def random_frame(seed):
    """(axis, angle, rotation, offset): a random floor frame placed in the capture frame."""
    rng = np.random.default_rng(seed)
    axis, angle = rng.normal(size=3), rng.uniform(0.1, math.pi - 0.1)
    return axis, angle, axis_angle_matrix(axis, angle), rng.uniform(-5, 5, 3)


def to_capture(rotation, offset, floor_points) -> np.ndarray:
    return np.asarray(floor_points, dtype=float) @ rotation.T + offset


SEEDS = [0, 1, 2, 3, 7]
# A at the floor origin, B on +x, C in the x-y plane on +y: the recovered frame is the floor frame.
FLOOR_ABC = np.array([[0.0, 0.0, 0.0], [2.5, 0.0, 0.0], [0.7, 1.9, 0.0]])


# -- from_points ----------------------------------------------------------------------------------
@pytest.mark.parametrize('seed', SEEDS)
def test_from_points_recovers_a_rotated_and_translated_floor_frame(seed):
    _, _, rotation, offset = random_frame(seed)
    a, b, c = to_capture(rotation, offset, FLOOR_ABC)
    frame = FrameCalibration.from_points(a, b, c)
    assert np.allclose(frame.rotation, rotation, atol=1e-9, rtol=0)
    assert np.allclose(frame.origin, offset, atol=1e-9, rtol=0)
    assert np.allclose(frame.to_frame(np.array([a, b, c])), FLOOR_ABC, atol=1e-9, rtol=0)
    cloud = np.random.default_rng(seed + 100).uniform(-3, 3, (50, 3))
    assert np.allclose(frame.to_frame(to_capture(rotation, offset, cloud)), cloud, atol=1e-9, rtol=0)


@pytest.mark.parametrize('seed', SEEDS)
def test_origin_is_a_and_axes_follow_b_and_c_anywhere_in_the_floor(seed):
    """A away from the floor origin, C on the far side of x: the frame is the floor frame moved to A
    (x still along B - A, z still up since C is on +y)."""
    _, _, rotation, offset = random_frame(seed)
    floor_a = np.array([1.2, -0.8, 0.0])
    floor = floor_a + np.array([[0.0, 0.0, 0.0], [0.9, 0.0, 0.0], [-4.0, 0.3, 0.0]])
    frame = FrameCalibration.from_points(*to_capture(rotation, offset, floor))
    assert np.allclose(frame.origin, to_capture(rotation, offset, floor_a), atol=1e-9, rtol=0)
    assert np.allclose(frame.rotation, rotation, atol=1e-9, rtol=0)
    assert np.allclose(frame.to_frame(to_capture(rotation, offset, floor[2])), [-4.0, 0.3, 0.0], atol=1e-9)


def test_c_on_the_minus_y_side_turns_the_frame_upside_down():
    """z = (B - A) x (C - A): with C on -y the z axis points down and y = z x x flips with it."""
    frame = FrameCalibration.from_points([0, 0, 0], [1, 0, 0], [0.3, -2, 0])
    assert np.allclose(frame.rotation, np.diag([1.0, -1.0, -1.0]), atol=1e-15)


@pytest.mark.parametrize('seed', SEEDS)
def test_the_frame_is_a_proper_rotation_and_read_only(seed):
    rng = np.random.default_rng(seed)
    frame = FrameCalibration.from_points(*rng.uniform(-10, 10, (3, 3)))
    assert np.allclose(frame.rotation.T @ frame.rotation, np.eye(3), atol=1e-12)
    assert np.linalg.det(frame.rotation) == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(dataclasses.FrozenInstanceError):
        frame.origin = np.zeros(3)
    with pytest.raises(ValueError):
        frame.rotation[0, 0] = 2.0


def test_to_frame_keeps_the_shape_of_one_point_and_of_many():
    frame = FrameCalibration.from_points([1, 2, 3], [1, 4, 3], [0, 2, 3])   # x = +y, y = -x
    assert frame.to_frame([2.0, 2.0, 3.0]).shape == (3,)
    assert np.allclose(frame.to_frame([2.0, 2.0, 3.0]), [0.0, -1.0, 0.0])
    assert frame.to_frame(np.zeros((4, 3))).shape == (4, 3)
    for bad in ([1.0, 2.0], np.zeros((4, 2)), [[np.nan, 0, 0]], 'abc'):
        with pytest.raises(ConfigError, match='points'):
            frame.to_frame(bad)


# -- quaternion and rpy ------------------------------------------------------------------------
@pytest.mark.parametrize('seed', SEEDS)
def test_quaternion_rotates_as_the_matrix_and_matches_the_known_rotation(seed):
    axis, angle, rotation, offset = random_frame(seed)
    frame = FrameCalibration.from_points(*to_capture(rotation, offset, FLOOR_ABC))
    q = frame.quaternion
    assert q.shape == (4,) and np.linalg.norm(q) == pytest.approx(1.0) and q[3] >= 0
    assert np.allclose(q, axis_angle_quaternion(axis, angle), atol=1e-9)   # angle < pi: w > 0
    for v in np.eye(3):
        assert np.allclose(rotate_by_quaternion(q, v), rotation @ v, atol=1e-9)


@pytest.mark.parametrize('axis', [[-1, 0.2, 0.1], [0.1, -1, 0.3], [0.2, 0.1, -1], [-0.3, -0.4, -0.5]])
@pytest.mark.parametrize('angle', [0.3, 2.0, 2.9])
def test_quaternion_has_w_non_negative_whichever_axis_dominates(axis, angle):
    """Each branch of the matrix-to-quaternion conversion (trace or a diagonal term largest) gives w >= 0."""
    frame = FrameCalibration(np.zeros(3), axis_angle_matrix(axis, angle))
    assert np.allclose(frame.quaternion, axis_angle_quaternion(axis, angle), atol=1e-12)


@pytest.mark.parametrize('angle', [math.pi, math.pi - 1e-9])
def test_quaternion_of_half_turns(angle):
    """Near w = 0 the quaternion still rotates as the matrix (the trace branch would divide by ~0)."""
    axis = [0.3, -0.5, 0.8]
    rotation = axis_angle_matrix(axis, angle)
    frame = FrameCalibration(np.zeros(3), rotation)
    expected = axis_angle_quaternion(axis, angle)
    assert min(np.abs(frame.quaternion - expected).max(), np.abs(frame.quaternion + expected).max()) < 1e-8


@pytest.mark.parametrize('roll, pitch, yaw', [(0.0, 0.0, 0.5236), (0.2, -0.4, 2.9), (-3.0, 1.2, -1.7),
                                              (0.0, 0.0, -math.pi / 2)])
def test_rpy_rebuilds_the_rotation(roll, pitch, yaw):
    rotation = rpy_matrix(roll, pitch, yaw)
    frame = FrameCalibration(np.zeros(3), rotation)
    assert np.allclose(frame.rpy, [roll, pitch, yaw], atol=1e-12)
    assert np.allclose(rpy_matrix(*frame.rpy), rotation, atol=1e-12)


@pytest.mark.parametrize('pitch', [math.pi / 2, -math.pi / 2])
def test_rpy_at_gimbal_lock_still_rebuilds_the_rotation(pitch):
    rotation = rpy_matrix(0.4, pitch, 1.1)
    rpy = FrameCalibration(np.zeros(3), rotation).rpy
    assert rpy[0] == 0.0 and rpy[1] == pytest.approx(pitch)
    assert np.allclose(rpy_matrix(*rpy), rotation, atol=1e-9)


def test_a_floor_turned_30_degrees_about_the_vertical():
    frame = FrameCalibration.from_points([0.5, 0.5, 0.1], [0.5 + math.sqrt(3), 1.5, 0.1], [0.0, 1.5, 0.1])
    assert np.allclose(frame.rpy, [0.0, 0.0, math.radians(30)], atol=1e-12)
    assert np.allclose(frame.quaternion, [0, 0, math.sin(math.radians(15)), math.cos(math.radians(15))])


# -- pose2d --------------------------------------------------------------------------------------
def base_path(n=400):
    """A base driving a spiral in the floor frame, turning 1.5 times (yaw beyond +-pi), slightly tilted."""
    t = np.linspace(0.0, 1.0, n)
    yaw = -2.8 + 3 * math.pi * t
    radius = 1.0 + t
    xy = np.column_stack([radius * np.sin(yaw), -radius * np.cos(yaw)])
    return t, xy, yaw


@pytest.mark.parametrize('seed', SEEDS)
def test_pose2d_recovers_the_base_path_in_a_rotated_and_translated_capture_frame(seed):
    axis, angle, rotation, offset = random_frame(seed)
    t, xy, yaw = base_path()
    z = 0.2 + 0.01 * np.sin(20 * t)                                      # marker height, bouncing
    positions = to_capture(rotation, offset, np.column_stack([xy, z]))
    # body orientation in the floor frame: yaw about z, then a small pitch and roll (uneven floor)
    q_yaw = np.column_stack([np.zeros((len(t), 2)), np.sin(yaw / 2), np.cos(yaw / 2)])
    q_pitch = axis_angle_quaternion([0, 1, 0], 0.04)
    q_roll = axis_angle_quaternion([1, 0, 0], -0.03)
    q_body = quaternion_product(quaternion_product(q_yaw, q_pitch), q_roll)
    q_capture = quaternion_product(axis_angle_quaternion(axis, angle), q_body)
    q_capture[::3] *= -1                                                 # q and -q: the same orientation
    q_capture[1::5] *= 2.5                                               # not normalised
    frame = FrameCalibration.from_points(*to_capture(rotation, offset, FLOOR_ABC))
    pose = frame.pose2d(positions, q_capture)
    assert pose.shape == (len(t), 3)
    assert np.allclose(pose[:, :2], xy, atol=1e-9)
    assert np.allclose(pose[:, 2], yaw, atol=1e-9)                       # unwrapped: past +pi without a jump
    assert pose[-1, 2] > math.pi


def test_pose2d_yaw_is_measured_from_the_calibrated_x_axis():
    """Frame x = capture +y: a body facing capture +y has yaw 0, one facing capture -x has yaw +pi/2."""
    frame = FrameCalibration.from_points([0, 0, 0], [0, 3, 0], [-1, 0, 0])
    facing = {0.0: [0, 0, math.sin(math.pi / 4), math.cos(math.pi / 4)],   # body x -> capture +y
              math.pi / 2: [0, 0, 1, 0]}                                    # body x -> capture -x
    pose = frame.pose2d([[1.0, 2.0, 0.0], [1.0, 2.0, 0.0]], list(facing.values()))
    assert np.allclose(pose[:, :2], [[2.0, -1.0], [2.0, -1.0]])
    assert np.allclose(pose[:, 2], list(facing))


@pytest.mark.parametrize('positions, orientations, words', [
    (np.zeros((3, 3)), np.tile([0, 0, 0, 1.0], (2, 1)), 'orientations: shape'),
    (np.zeros((3, 2)), np.tile([0, 0, 0, 1.0], (3, 1)), 'positions: shape'),
    (np.zeros((1, 3)), [[0, 0, 0, 0.0]], 'is zero'),
    (np.zeros((1, 3)), [[0, 0, np.inf, 1]], 'not finite'),
    (np.zeros((1, 3)), [[0, -math.sin(math.pi / 4), 0, math.cos(math.pi / 4)]], 'perpendicular'),  # x up
])
def test_pose2d_bad_input(positions, orientations, words):
    frame = FrameCalibration.from_points([0, 0, 0], [1, 0, 0], [0, 1, 0])
    with pytest.raises(ConfigError, match=words):
        frame.pose2d(positions, orientations)


# -- errors --------------------------------------------------------------------------------------
def offset_mm(message: str) -> float:
    match = re.search(r'C is ([0-9.]+) mm from line AB', message)
    assert match, message
    return float(match.group(1))


@pytest.mark.parametrize('seed', SEEDS)
def test_c_within_a_millimetre_of_line_ab_is_collinear(seed):
    _, _, rotation, offset = random_frame(seed)
    floor = [[0, 0, 0], [2.0, 0, 0], [5.0, 0.0004, 0.0003]]                # 0.5 mm off the line, beyond B
    with pytest.raises(ConfigError) as error:
        FrameCalibration.from_points(*to_capture(rotation, offset, floor))
    message = str(error.value)
    assert 'collinear' in message and '\n' not in message
    assert offset_mm(message) == pytest.approx(0.5, abs=1e-3)
    assert isinstance(error.value, ShadowTwinError)


@pytest.mark.parametrize('c, distance_mm', [([0, 0, 0], 0.0), ([1.0, 0, 0], 0.0), ([-3.0, 0, 0], 0.0),
                                            ([0.4, 0.0009, 0], 0.9)])
def test_collinear_points_name_the_distance(c, distance_mm):
    with pytest.raises(ConfigError, match='collinear') as error:
        FrameCalibration.from_points([0, 0, 0], [1.0, 0, 0], c)
    assert offset_mm(str(error.value)) == pytest.approx(distance_mm, abs=1e-3)


def test_a_tiny_angle_far_away_is_collinear_too():
    """2 mm from the line but 5 km along it: the sine of angle BAC is 4e-7 < 1e-6."""
    with pytest.raises(ConfigError, match='collinear') as error:
        FrameCalibration.from_points([0, 0, 0], [1.0, 0, 0], [5000.0, 0.002, 0])
    assert offset_mm(str(error.value)) == pytest.approx(2.0, abs=1e-3)


def test_c_just_over_a_millimetre_off_the_line_is_accepted():
    frame = FrameCalibration.from_points([0, 0, 0], [1.0, 0, 0], [0.5, 0.0011, 0])
    assert np.allclose(frame.rotation, np.eye(3))


@pytest.mark.parametrize('b', [[0, 0, 0], [0.0004, 0.0005, 0.0], [0.0, 0.0, -0.0009]])
def test_a_and_b_closer_than_a_millimetre_coincide(b):
    with pytest.raises(ConfigError, match=r'^points A and B coincide') as error:
        FrameCalibration.from_points([0, 0, 0], b, [0, 1, 0])
    assert '\n' not in str(error.value)


@pytest.mark.parametrize('a, words', [([0, 0], 'point A: shape'), ([[0, 0, 0]], 'point A: shape'),
                                      ([0, np.nan, 0], 'point A: not finite'), ([0, 0, np.inf], 'not finite'),
                                      (['x', 0, 0], 'point A: not numbers')])
def test_malformed_points(a, words):
    with pytest.raises(ConfigError, match=words):
        FrameCalibration.from_points(a, [1, 0, 0], [0, 1, 0])


def test_a_rotation_that_is_not_one_is_refused():
    with pytest.raises(ConfigError, match='not orthonormal'):
        FrameCalibration(np.zeros(3), np.diag([1.0, 1.0, 1.01]))
    with pytest.raises(ConfigError, match='reflection'):
        FrameCalibration(np.zeros(3), np.diag([1.0, 1.0, -1.0]))


# -- YAML ----------------------------------------------------------------------------------------
@pytest.mark.parametrize('seed', SEEDS)
def test_yaml_round_trip_is_exact(seed):
    _, _, rotation, offset = random_frame(seed)
    frame = FrameCalibration.from_points(*to_capture(rotation, offset, FLOOR_ABC))
    data = yaml.safe_load(yaml.safe_dump(frame.to_dict()))
    assert 'IMECE 2023' in data['source']
    assert np.allclose(data['quaternion'], frame.quaternion) and np.allclose(data['rpy'], frame.rpy)
    back = FrameCalibration.from_dict(data)
    assert np.array_equal(back.origin, frame.origin) and np.array_equal(back.rotation, frame.rotation)
    assert np.array_equal(np.array(data['rotation'])[:, 0], frame.rotation[:, 0])  # rows written; columns = axes


def test_from_dict_needs_origin_and_rotation_and_a_matching_quaternion():
    data = FrameCalibration.from_points([0, 0, 0], [1, 0, 0], [0, 1, 0]).to_dict()
    for key in ('origin', 'rotation'):
        with pytest.raises(ConfigError, match=f'missing {key}'):
            FrameCalibration.from_dict({k: v for k, v in data.items() if k != key})
    with pytest.raises(ConfigError, match='does not match'):
        FrameCalibration.from_dict({**data, 'quaternion': [0, 0, 1, 0]})
    assert np.allclose(FrameCalibration.from_dict({**data, 'quaternion': [0, 0, 0, -2.0]}).rotation, np.eye(3))
    with pytest.raises(ConfigError, match='expected a mapping'):
        FrameCalibration.from_dict([1, 2, 3])
    with pytest.raises(ConfigError, match='rotation: shape'):
        FrameCalibration.from_dict({**data, 'rotation': [[1, 0, 0], [0, 1, 0]]})
