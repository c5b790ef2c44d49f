"""Poses of followed objects: unit quaternions (w, x, y, z, MuJoCo's order), rotation vectors, a pose
source's sample, and the error between two poses (sim vs source, for the twin monitor).

Conventions: positions in m, world frame; a rotation vector ``r`` (rad) is the axis times the angle of a
rotation; angular velocities (rad/s) are in world axes, so an orientation turning at ``w`` from ``q0``
is ``exp(w t) * q0`` (the rotation applied on the left, in the world frame). ``q`` and ``-q`` are the
same orientation: the functions take the shorter way. One pose at a time goes through MuJoCo's own
quaternion functions (``mju_mulQuat``, ``mju_axisAngle2Quat``, ``mju_quat2Vel``: the follower calls them
at every physics step), arrays of them through scipy's ``Rotation``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np
from scipy.spatial.transform import Rotation


@dataclass(frozen=True)
class PoseSample:
    """One pose of an object as its source gave it: ``stamp`` (s, sim time), ``position`` (3,) m and a
    unit ``quat`` (4,) w x y z, both in the world frame (the sim's odom frame)."""

    stamp: float
    position: np.ndarray
    quat: np.ndarray


def _rotations(q) -> Rotation:
    """scipy ``Rotation``(s) of unit quaternions (..., 4) w x y z (scipy orders them x y z w)."""
    return Rotation.from_quat(np.asarray(q, dtype=float)[..., [1, 2, 3, 0]])


def quat_to_rotvec(q) -> np.ndarray:
    """(..., 3) rotation vector (axis times angle, rad, angle in [0, pi]) of unit quaternions (..., 4)."""
    return _rotations(q).as_rotvec()


def rotvec_to_quat(r) -> np.ndarray:
    """(..., 4) unit quaternion w x y z of rotation vectors ``r`` (..., 3), rad."""
    return Rotation.from_rotvec(np.asarray(r, dtype=float)).as_quat()[..., [3, 0, 1, 2]]


def rotate(q, r) -> np.ndarray:
    """(4,) the orientation ``q`` (4,) turned by the rotation vector ``r`` (3,) rad in the world frame:
    ``exp(r) * q``."""
    r = np.asarray(r, dtype=float)
    angle = math.sqrt(float(r @ r))
    if angle < 1e-12:
        return np.array(q, dtype=float)
    turn, out = np.empty(4), np.empty(4)
    mujoco.mju_axisAngle2Quat(turn, r / angle, angle)
    mujoco.mju_mulQuat(out, turn, np.asarray(q, dtype=float))
    return out


def relative_rotvec(q, q_from) -> np.ndarray:
    """(..., 3) rotation vector (rad, world axes) turning ``q_from`` into ``q``: ``log(q * q_from^-1)``."""
    q, q_from = np.asarray(q, dtype=float), np.asarray(q_from, dtype=float)
    if q.shape == q_from.shape == (4,):
        inverse, difference, out = np.empty(4), np.empty(4), np.empty(3)
        mujoco.mju_negQuat(inverse, q_from)
        mujoco.mju_mulQuat(difference, q, inverse)
        mujoco.mju_quat2Vel(out, difference, 1.0)
        return out
    return (_rotations(q) * _rotations(q_from).inv()).as_rotvec()


def angle_between(q1, q2) -> float:
    """The angle (rad, in [0, pi]) of the rotation from unit quaternion ``q1`` (4,) to ``q2`` (4,):
    ``2 acos(|<q1, q2>|)``, which scipy's ``Rotation.magnitude`` computes as ``2 atan2(|vec|, |w|)`` of
    ``q1^-1 q2`` (exact near 0, where acos is not); ``q`` and ``-q`` are the same orientation."""
    return float((_rotations(q1).inv() * _rotations(q2)).magnitude())


def pose_error(position, quat, reference_position, reference_quat) -> tuple[float, float]:
    """(position error m, angle error rad) of a pose ((3,) m, (4,) unit w x y z) against a reference
    pose: the distance between the positions and :func:`angle_between` the orientations. The sim-vs-
    source error of a followed object (:meth:`ObjectFollower.errors`)."""
    distance = float(np.linalg.norm(np.asarray(position, dtype=float) - np.asarray(reference_position, dtype=float)))
    return distance, angle_between(np.asarray(quat, dtype=float), np.asarray(reference_quat, dtype=float))
