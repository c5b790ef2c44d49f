"""Poses of followed objects: unit quaternions (w, x, y, z, MuJoCo's order), rotation vectors, a pose
source's sample, and the error between two poses (sim vs source, for the twin monitor).

Conventions: positions in m, world frame; a rotation vector ``r`` (rad) is the axis times the angle of a
rotation; angular velocities (rad/s) are in world axes, so an orientation turning at ``w`` from ``q0``
is ``exp(w t) * q0`` (the rotation applied on the left, in the world frame). ``q`` and ``-q`` are the
same orientation: the functions take the shorter way. One pose at a time goes through MuJoCo's own
quaternion functions (``mju_mulQuat``, ``mju_axisAngle2Quat``, ``mju_quat2Vel``: the follower calls them
at every physics step), arrays of them through numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np


@dataclass(frozen=True)
class PoseSample:
    """One pose of an object as its source gave it: ``stamp`` (s, sim time), ``position`` (3,) m and a
    unit ``quat`` (4,) w x y z, both in the world frame (the sim's odom frame)."""

    stamp: float
    position: np.ndarray
    quat: np.ndarray


def quat_multiply(a, b) -> np.ndarray:
    """(..., 4) Hamilton product ``a * b`` of quaternions (..., 4) w x y z (numpy broadcasting)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape == b.shape == (4,):
        out = np.empty(4)
        mujoco.mju_mulQuat(out, a, b)
        return out
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def quat_conjugate(q) -> np.ndarray:
    """(..., 4) conjugate (the inverse of a unit quaternion) of ``q`` (..., 4) w x y z."""
    q = np.array(q, dtype=float)
    q[..., 1:] *= -1.0
    return q


def quat_to_rotvec(q) -> np.ndarray:
    """(..., 3) rotation vector (axis times angle, rad, angle in [0, pi]) of unit quaternions (..., 4)."""
    q = np.asarray(q, dtype=float)
    q = np.where(q[..., :1] < 0.0, -q, q)                    # the shorter way: w >= 0
    vector = q[..., 1:]
    sine = np.linalg.norm(vector, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(sine, q[..., :1])
    # angle / sin(angle / 2) -> 2 as the angle -> 0
    scale = np.where(sine > 1e-12, angle / np.where(sine > 1e-12, sine, 1.0), 2.0)
    return vector * scale


def rotvec_to_quat(r) -> np.ndarray:
    """(..., 4) unit quaternion w x y z of rotation vectors ``r`` (..., 3), rad."""
    r = np.asarray(r, dtype=float)
    angle = np.linalg.norm(r, axis=-1, keepdims=True)
    half = 0.5 * angle
    # sin(angle / 2) / angle -> 1/2 as the angle -> 0
    scale = np.where(angle > 1e-12, np.sin(half) / np.where(angle > 1e-12, angle, 1.0), 0.5)
    return np.concatenate([np.cos(half), r * scale], axis=-1)


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
    return quat_to_rotvec(quat_multiply(q, quat_conjugate(q_from)))


def angle_between(q1, q2) -> float:
    """The angle (rad, in [0, pi]) of the rotation from unit quaternion ``q1`` (4,) to ``q2`` (4,):
    ``2 acos(|<q1, q2>|)``, computed as ``2 atan2(|vec(q1^-1 q2)|, |w|)`` (exact near 0, where acos is
    not); ``q`` and ``-q`` are the same orientation."""
    product = quat_multiply(quat_conjugate(q1), q2)
    return float(2.0 * math.atan2(float(np.linalg.norm(product[1:])), abs(float(product[0]))))


def pose_error(position, quat, reference_position, reference_quat) -> tuple[float, float]:
    """(position error m, angle error rad) of a pose ((3,) m, (4,) unit w x y z) against a reference
    pose: the distance between the positions and :func:`angle_between` the orientations. The sim-vs-
    source error of a followed object (:meth:`ObjectFollower.errors`)."""
    distance = float(np.linalg.norm(np.asarray(position, dtype=float) - np.asarray(reference_position, dtype=float)))
    return distance, angle_between(np.asarray(quat, dtype=float), np.asarray(reference_quat, dtype=float))
