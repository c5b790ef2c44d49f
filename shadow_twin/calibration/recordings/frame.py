"""Floor frame of a motion-capture recording from three recorded points (ROS-free, numpy only).

Source: MiR250 + UR5 digital twin, IMECE 2023, frame calibration from three recorded points.
The study compares the mobile base's path recorded by a motion-capture system with the
simulation's; capture coordinates are in the capture system's own frame, so it defines the
floor frame from three recorded points ``A``, ``B``, ``C`` (markers on the floor, or the base's
positions at three moments), all in capture coordinates (m)::

    x = (B - A) / |B - A|
    z = ((B - A) x (C - A)) / |(B - A) x (C - A)|
    y = z x x
    origin = A

``R = [x y z]`` (the axes as columns) maps frame coordinates to capture coordinates, so a
capture point ``p`` is ``R^T (p - A)`` in the calibrated frame: ``A`` is its origin, ``B`` lies
on its +x axis and ``C`` in its x-y plane on the +y side.

* :class:`FrameCalibration`: the frame (``origin`` (3,) m, ``rotation`` (3, 3)), built with
  :meth:`FrameCalibration.from_points`; :meth:`~FrameCalibration.to_frame` maps capture points
  into it, :meth:`~FrameCalibration.pose2d` turns captured positions and orientations into the
  base's planar path (x, y, yaw), ``quaternion`` (x, y, z, w) and ``rpy`` give its rotation,
  :meth:`~FrameCalibration.to_dict` / :meth:`~FrameCalibration.from_dict` its YAML form.

Bad input raises :class:`~shadow_twin.common.errors.ConfigError` with a one-line message:
points that are not three finite numbers, ``A`` and ``B`` closer than 1 mm, or ``C`` on the
line ``AB`` (within 1 mm, or ``|(B - A) x (C - A)|`` below 1e-6 of ``|B - A| |C - A|``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import yaml

from shadow_twin.common.errors import ConfigError

#: Where the formulas come from (written into :meth:`FrameCalibration.to_dict`).
SOURCE = 'MiR250 + UR5 digital twin, IMECE 2023, frame calibration from three recorded points'
#: A and B closer than this (m) coincide.
MIN_BASELINE = 1e-3
#: C closer than this (m) to the line AB is collinear with A and B.
MIN_OFFSET = 1e-3
#: C is collinear with A and B when |(B - A) x (C - A)| < COLLINEAR_RELATIVE |B - A| |C - A| (sine of angle BAC).
COLLINEAR_RELATIVE = 1e-6
#: Largest deviation of a rotation read by :meth:`FrameCalibration.from_dict` from orthonormal.
ROTATION_TOLERANCE = 1e-6
#: A body x axis whose projection on the floor plane is shorter than this has no yaw.
MIN_HEADING_NORM = 1e-6


def _finite_array(value: Any, what: str, *shapes: tuple[int | None, ...]) -> np.ndarray:
    """``value`` as a finite float array of one of ``shapes`` (``None``: any length); ConfigError otherwise."""
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f'{what}: not numbers ({exc})') from None
    if not any(_fits(array.shape, shape) for shape in shapes):
        wanted = ' or '.join('(' + ', '.join('N' if n is None else str(n) for n in shape) + ')' for shape in shapes)
        raise ConfigError(f'{what}: shape {array.shape}, expected {wanted}')
    if not np.all(np.isfinite(array)):
        index = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
        where = index[0] if len(index) == 1 else list(index)
        raise ConfigError(f'{what}: not finite ({array[index]} at index {where})')
    return array


def _fits(actual: tuple[int, ...], shape: tuple[int | None, ...]) -> bool:
    return len(actual) == len(shape) and all(n is None or n == m for n, m in zip(shape, actual))


def _point(value: Any, name: str) -> np.ndarray:
    """One recorded point (3,) m, checked finite."""
    return _finite_array(value, f'point {name}', (3,))


def _check_baseline(ab: np.ndarray) -> float:
    """|B - A| (m); ConfigError if A and B are closer than :data:`MIN_BASELINE`."""
    length = float(np.linalg.norm(ab))
    if length < MIN_BASELINE:
        raise ConfigError(f'points A and B coincide: |B - A| = {length * 1e3:.3f} mm < '
                          f'{MIN_BASELINE * 1e3:g} mm; they must span the x axis')
    return length


def _check_not_collinear(ac: np.ndarray, normal: np.ndarray, baseline: float) -> None:
    """ConfigError naming the distance of C from the line AB (mm) if A, B and C are collinear."""
    area = float(np.linalg.norm(normal))
    offset = area / baseline
    if offset < MIN_OFFSET or area < COLLINEAR_RELATIVE * baseline * float(np.linalg.norm(ac)):
        raise ConfigError(f'points A, B and C are collinear: C is {offset * 1e3:.3f} mm from line AB (the floor '
                          f'plane needs at least {MIN_OFFSET * 1e3:g} mm and an angle BAC of at least '
                          f'{COLLINEAR_RELATIVE:g} rad)')


def _rotation_from_quaternions(quaternions: np.ndarray) -> np.ndarray:
    """(N, 3, 3) rotation matrices of (N, 4) unit quaternions in ROS order (x, y, z, w)."""
    x, y, z, w = quaternions.T
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], axis=-1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], axis=-1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], axis=-1),
    ], axis=-2)


def _unit_quaternions(orientations: Any, count: int) -> np.ndarray:
    """(N, 4) orientations (x, y, z, w) normalised; ConfigError on a wrong shape or a zero quaternion."""
    quaternions = _finite_array(orientations, 'orientations', (count, 4))
    norms = np.linalg.norm(quaternions, axis=1)
    if np.any(norms < 1e-9):
        raise ConfigError(f'orientations: quaternion {int(np.argmin(norms))} is zero')
    return quaternions / norms[:, None]


def _quaternion_of(rotation: np.ndarray) -> np.ndarray:
    """Unit quaternion (x, y, z, w), w >= 0, of a rotation matrix (Shepperd's method)."""
    m = rotation
    trace = float(np.trace(m))
    candidates = (trace, m[0, 0], m[1, 1], m[2, 2])
    largest = int(np.argmax(candidates))
    if largest == 0:
        s = 2.0 * math.sqrt(1.0 + trace)
        q = [(m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, s / 4]
    elif largest == 1:
        s = 2.0 * math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = [s / 4, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s, (m[2, 1] - m[1, 2]) / s]
    elif largest == 2:
        s = 2.0 * math.sqrt(1.0 - m[0, 0] + m[1, 1] - m[2, 2])
        q = [(m[0, 1] + m[1, 0]) / s, s / 4, (m[1, 2] + m[2, 1]) / s, (m[0, 2] - m[2, 0]) / s]
    else:
        s = 2.0 * math.sqrt(1.0 - m[0, 0] - m[1, 1] + m[2, 2])
        q = [(m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, s / 4, (m[1, 0] - m[0, 1]) / s]
    q = np.array(q, dtype=float)
    q /= np.linalg.norm(q)
    return -q if q[3] < 0 else q


def _check_rotation(rotation: np.ndarray) -> None:
    """ConfigError if ``rotation`` is not orthonormal with determinant +1 (within :data:`ROTATION_TOLERANCE`)."""
    deviation = float(np.max(np.abs(rotation.T @ rotation - np.eye(3))))
    if deviation > ROTATION_TOLERANCE:
        raise ConfigError(f'rotation is not orthonormal: |R^T R - I| = {deviation:.3g} > {ROTATION_TOLERANCE:g}')
    if np.linalg.det(rotation) < 0:
        raise ConfigError('rotation is a reflection (determinant -1), not a right-handed frame')


def _read_only(array: np.ndarray) -> np.ndarray:
    array = np.array(array, dtype=float)
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class FrameCalibration:
    """The calibrated floor frame in capture coordinates (see the module doc for the formulas).

    Attributes:
        origin: (3,) m, the frame's origin (point ``A``) in capture coordinates.
        rotation: (3, 3), columns the frame's x, y and z axes (unit vectors) in capture
            coordinates: it maps frame coordinates to capture coordinates.

    Both are read-only float arrays. Raises ConfigError (on construction) if ``origin`` is not
    three finite numbers or ``rotation`` is not a proper rotation within 1e-6.
    """

    origin: np.ndarray
    rotation: np.ndarray

    def __post_init__(self) -> None:
        origin = _finite_array(self.origin, 'origin', (3,))
        rotation = _finite_array(self.rotation, 'rotation', (3, 3))
        _check_rotation(rotation)
        object.__setattr__(self, 'origin', _read_only(origin))
        object.__setattr__(self, 'rotation', _read_only(rotation))

    @classmethod
    def from_points(cls, a: Any, b: Any, c: Any) -> FrameCalibration:
        """The floor frame of three recorded points, each (3,) m in capture coordinates.

        ``x = (B - A) / |B - A|``, ``z = ((B - A) x (C - A)) / |(B - A) x (C - A)|``, ``y = z x x``,
        origin ``A`` (MiR250 + UR5 digital twin, IMECE 2023, frame calibration from three
        recorded points).

        Raises:
            ConfigError: a point is not three finite numbers; A and B are closer than 1 mm
                ("points A and B coincide ..."); C is on the line AB (within 1 mm, or the
                sine of angle BAC below 1e-6: "... collinear: C is D mm from line AB ...").
        """
        a, b, c = _point(a, 'A'), _point(b, 'B'), _point(c, 'C')
        ab, ac = b - a, c - a
        baseline = _check_baseline(ab)
        normal = np.cross(ab, ac)
        _check_not_collinear(ac, normal, baseline)
        x_axis = ab / baseline
        z_axis = normal / np.linalg.norm(normal)
        y_axis = np.cross(z_axis, x_axis)
        return cls(a, np.column_stack([x_axis, y_axis, z_axis]))

    def to_frame(self, points: Any) -> np.ndarray:
        """Capture points, (N, 3) or (3,) m, in the calibrated frame: ``R^T (p - A)``, same shape, m.

        Raises:
            ConfigError: not (N, 3) or (3,), or not finite.
        """
        array = _finite_array(points, 'points', (3,), (None, 3))
        return (array - self.origin) @ self.rotation

    def pose2d(self, positions: Any, orientations: Any) -> np.ndarray:
        """The planar path (N, 3) in the calibrated frame: x, y (m) and yaw (rad) per sample.

        Args:
            positions: (N, 3) capture-frame positions of the body, m.
            orientations: (N, 4) capture-frame orientation quaternions in ROS order (x, y, z, w);
                normalised here, either sign.

        Yaw is the heading of the body's x axis projected into the calibrated x-y plane
        (``atan2`` of its frame y and x components), unwrapped along the sequence with
        :func:`numpy.unwrap`, so it is continuous and starts in [-pi, pi].

        Raises:
            ConfigError: wrong shapes or lengths, values not finite, a zero quaternion, or a
                body x axis perpendicular to the floor (no heading).
        """
        xyz = self.to_frame(_finite_array(positions, 'positions', (None, 3)))
        quaternions = _unit_quaternions(orientations, len(xyz))
        body_x = _rotation_from_quaternions(quaternions)[:, :, 0] @ self.rotation
        horizontal = np.hypot(body_x[:, 0], body_x[:, 1])
        if np.any(horizontal < MIN_HEADING_NORM):
            raise ConfigError(f'orientations: sample {int(np.argmin(horizontal))} has its x axis perpendicular '
                              'to the floor (no heading)')
        yaw = np.unwrap(np.arctan2(body_x[:, 1], body_x[:, 0]))
        return np.column_stack([xyz[:, 0], xyz[:, 1], yaw])

    @property
    def quaternion(self) -> np.ndarray:
        """The rotation as a unit quaternion (x, y, z, w), ROS order, w >= 0; (4,)."""
        return _quaternion_of(self.rotation)

    @property
    def rpy(self) -> np.ndarray:
        """The rotation as (roll, pitch, yaw), rad, with ``R = Rz(yaw) Ry(pitch) Rx(roll)``; (3,).

        Pitch is in [-pi/2, pi/2]; at pitch +-pi/2 roll is 0 and yaw takes the whole turn.
        """
        m = self.rotation
        pitch = math.atan2(-m[2, 0], math.hypot(m[0, 0], m[1, 0]))
        if math.hypot(m[0, 0], m[1, 0]) < 1e-8:   # gimbal lock: roll and yaw turn about one axis
            return np.array([0.0, pitch, math.atan2(-m[0, 1], m[1, 1])])
        return np.array([math.atan2(m[2, 1], m[2, 2]), pitch, math.atan2(m[1, 0], m[0, 0])])

    def to_dict(self) -> dict[str, Any]:
        """Plain mapping for YAML: ``origin`` [x, y, z] m, ``rotation`` as three rows (its columns
        are the axes), and for the reader ``quaternion`` [x, y, z, w], ``rpy`` [rad] and ``source``."""
        return {
            'source': SOURCE,
            'origin': [float(v) for v in self.origin],
            'rotation': [[float(v) for v in row] for row in self.rotation],
            'quaternion': [float(v) for v in self.quaternion],
            'rpy': [float(v) for v in self.rpy],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FrameCalibration:
        """Read :meth:`to_dict`'s mapping (e.g. ``yaml.safe_load`` of the file ``frame-calibration
        --out`` wrote). ``origin`` and ``rotation`` define the frame; other keys are ignored, but a
        ``quaternion`` given must agree with ``rotation`` (within 1e-6).

        Raises:
            ConfigError: not a mapping, ``origin`` or ``rotation`` missing or malformed, the
                rotation not a proper rotation, or the quaternion disagreeing with it.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(f'frame calibration: expected a mapping, got {type(data).__name__}')
        missing = [key for key in ('origin', 'rotation') if key not in data]
        if missing:
            raise ConfigError(f'frame calibration: missing {", ".join(missing)}')
        frame = cls(data['origin'], data['rotation'])
        if data.get('quaternion') is not None:
            _check_quaternion_matches(frame, data['quaternion'])
        return frame

    @classmethod
    def read(cls, path: str | Path) -> FrameCalibration:
        """The frame of the YAML file ``frame-calibration --out`` wrote (:meth:`from_dict`).

        Raises:
            ConfigError: the file cannot be read or is not YAML (naming it), or as :meth:`from_dict`.
        """
        try:
            data = yaml.safe_load(Path(path).read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f'frame file {path} cannot be read ({" ".join(str(exc).split())})') from None
        return cls.from_dict(data)


def _check_quaternion_matches(frame: FrameCalibration, quaternion: Any) -> None:
    """ConfigError if ``quaternion`` (x, y, z, w) is not ``frame``'s rotation (either sign, within 1e-6)."""
    given = _unit_quaternions([quaternion], 1)[0]
    error = min(np.max(np.abs(given - frame.quaternion)), np.max(np.abs(given + frame.quaternion)))
    if error > ROTATION_TOLERANCE:
        raise ConfigError(f'frame calibration: quaternion {given.tolist()} does not match rotation '
                          f'(its quaternion is {frame.quaternion.tolist()})')
