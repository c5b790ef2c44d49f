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
from scipy.spatial.transform import Rotation


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
        parent = Rotation.from_quat(xquat[self.parent_ids], scalar_first=True).inv()
        pos = parent.apply(xpos[self.bodies] - xpos[self.parent_ids])
        quat = (parent * Rotation.from_quat(xquat[self.bodies], scalar_first=True)).as_quat(scalar_first=True)
        return RelativePoses(self.parents, self.children, pos, quat)
