"""The bodies of a MuJoCo model as a tree of frames, as TF holds a robot: each body's pose relative to its
parent body, under a name prefix (``sim/`` for the simulation, ``real/`` for the robots seen through the
same model), so that one model gives both trees and a viewer resolves every body from the root frame.

The root is the model's world body (``<prefix>world``); the caller hangs it under a frame of its own
(``world``) with an identity transform so that sim and real share a fixed frame.

Units: m; quaternions (w, x, y, z) as MuJoCo's (ROS's messages hold x, y, z, w: the ROS layer swaps).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np


@dataclass(frozen=True)
class RelativePoses:
    """One instant of a :class:`BodyTree`: ``parents`` and ``children`` (B,) frame names, ``pos`` (B, 3) m and
    ``quat`` (B, 4) w, x, y, z: each child's pose in its parent's frame."""

    parents: tuple[str, ...]
    children: tuple[str, ...]
    pos: np.ndarray
    quat: np.ndarray


class BodyTree:
    """The frames of ``model``'s bodies (every body but the world), named ``prefix + body name``; a body
    without a name is ``prefix + 'body<id>'``.

    Args:
        model: the model (its body names and parents).
        prefix: put before every frame name ('sim/', 'real/'; '' for none).
    """

    def __init__(self, model: mujoco.MjModel, prefix: str = '') -> None:
        names = [model.body(b).name or f'body{b}' for b in range(model.nbody)]
        self.prefix = prefix
        self.bodies = np.arange(1, model.nbody)
        self.parent_ids = np.asarray(model.body_parentid[1:], dtype=int)
        self.frames = tuple(prefix + n for n in names)
        self.children = self.frames[1:]
        self.parents = tuple(self.frames[p] for p in self.parent_ids)

    @property
    def root(self) -> str:
        """The world body's frame (``<prefix>world``)."""
        return self.frames[0]

    def frame(self, body: int) -> str:
        """The frame name of body ``body`` (id)."""
        return self.frames[body]

    def relative(self, xpos: np.ndarray, xquat: np.ndarray) -> RelativePoses:
        """Each body's pose in its parent's frame, from the world poses ``xpos`` (nbody, 3) m and ``xquat``
        (nbody, 4) (``MjData.xpos``, ``MjData.xquat`` after kinematics)."""
        inverse = xquat[self.parent_ids] * _CONJUGATE
        pos = rotate(inverse, xpos[self.bodies] - xpos[self.parent_ids])
        return RelativePoses(self.parents, self.children, pos, multiply(inverse, xquat[self.bodies]))


#: Multiplies a unit quaternion (w, x, y, z) into its inverse.
_CONJUGATE = np.array([1.0, -1.0, -1.0, -1.0])


# numpy rather than scipy's Rotation: this runs on the bridge's stepping thread at the TF rate, and building
# Rotation objects for the cell's 45 bodies costs about twice the arithmetic itself.
def multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, 4) the Hamilton products ``a`` x ``b`` of (N, 4) quaternions (w, x, y, z)."""
    aw, ax, ay, az = a.T
    bw, bx, by, bz = b.T
    return np.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], axis=1)


def rotate(quat: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """(N, 3) ``vectors`` (N, 3) turned by the unit quaternions ``quat`` (N, 4) (w, x, y, z):
    v + 2 w (u x v) + 2 u x (u x v), u the vector part (Rodrigues' formula in quaternion form)."""
    w, u = quat[:, :1], quat[:, 1:]
    t = 2.0 * np.cross(u, vectors)
    return vectors + w * t + np.cross(u, t)
