"""Homogeneous transforms (4x4 numpy arrays, m and rad) for the model tests, independent of
MuJoCo's own kinematics: elementary rotations and translations, URDF roll-pitch-yaw, the pose of a
site or body of a MuJoCo model/data pair, and the error between two poses (test/core/model)."""

from __future__ import annotations

import math

import numpy as np


def rot_x(t):
    """The rotation by ``t`` rad about x."""
    c, s = math.cos(t), math.sin(t)
    return np.array([[1, 0, 0, 0], [0, c, -s, 0], [0, s, c, 0], [0, 0, 0, 1.0]])


def rot_y(t):
    """The rotation by ``t`` rad about y."""
    c, s = math.cos(t), math.sin(t)
    return np.array([[c, 0, s, 0], [0, 1, 0, 0], [-s, 0, c, 0], [0, 0, 0, 1.0]])


def rot_z(t):
    """The rotation by ``t`` rad about z."""
    c, s = math.cos(t), math.sin(t)
    return np.array([[c, -s, 0, 0], [s, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])


def trans(x, y, z):
    """The translation by (x, y, z) m."""
    out = np.eye(4)
    out[:3, 3] = (x, y, z)
    return out


def rpy(r, p, y):
    """URDF roll-pitch-yaw: Rz(y) Ry(p) Rx(r)."""
    return rot_z(y) @ rot_y(p) @ rot_x(r)


def _pose(xmat, xpos):
    """The 4x4 pose of a MuJoCo frame given its rotation matrix (9 values) and position."""
    out = np.eye(4)
    out[:3, :3] = xmat.reshape(3, 3)
    out[:3, 3] = xpos
    return out


def site_pose(model, data, name):
    """Site ``name``'s pose in the world (after ``mj_kinematics`` or ``mj_forward``)."""
    sid = model.site(name).id
    return _pose(data.site_xmat[sid], data.site_xpos[sid])


def body_pose(model, data, name):
    """Body ``name``'s pose in the world (after ``mj_kinematics`` or ``mj_forward``)."""
    bid = model.body(name).id
    return _pose(data.xmat[bid], data.xpos[bid])


def pose_error(a, b):
    """(position error m, rotation error rad) between two 4x4 poses."""
    rel = a[:3, :3].T @ b[:3, :3]
    angle = math.acos(max(-1.0, min(1.0, (np.trace(rel) - 1) / 2)))
    return float(np.linalg.norm(a[:3, 3] - b[:3, 3])), angle
