"""A TF tree mirrored as the frames of a browser scene (``viser``), as RViz holds it: each frame a scene node
under its parent's node, posed relative to it, so that a transform that changes moves one node and the
client moves everything under it.

A frame is drawn once its chain of parents reaches the *fixed frame* (``world``), the scene's root at the
origin; until then it waits (a transform of ``sim/world`` that has not yet arrived keeps the sim's bodies
out, as RViz shows "no transform"). A frame whose parent changes, or whose chain becomes complete, is made
again under its new parent, with everything under it (:class:`FrameTree` tells its listener which frames
were made again, so that what hangs on them, the markers, is added again). A chain that loops is never
drawn. Frame names hold '/' (``sim/rh_palm``), which separates a scene node's path: a node is named
by its frame with '/' as ':' (``/world/sim:world/sim:rh_forearm/...``).

Transforms equal to the node's pose within :data:`POSE_TOLERANCE` send nothing (a fixed body's pose
relative to its parent, recomputed from world poses, changes only by rounding).

Units: m; quaternions (w, x, y, z).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np
from scipy.spatial.transform import Rotation

#: A pose change below this (m, and quaternion components) is not sent.
POSE_TOLERANCE = 1e-7


@dataclass(frozen=True)
class Transform:
    """``child``'s pose in ``parent``'s frame: ``position`` (3,) m, ``wxyz`` (4,) a unit quaternion."""

    parent: str
    child: str
    position: np.ndarray
    wxyz: np.ndarray


def node_name(frame: str) -> str:
    """The scene node name of ``frame`` under its parent ('/' in a frame name becomes ':')."""
    return frame.replace('/', ':')


class FrameTree:
    """The frames of a TF tree as nodes of a viser scene.

    Args:
        scene: a ``viser.SceneApi`` (``server.scene``) or an object with its ``add_frame``.
        fixed_frame: the frame at the scene's origin; everything drawn hangs under it.
        axes_length: m, the length of each frame's drawn axes (shown with :meth:`show_axes`).
        on_remade: called with the set of frames made again (new, moved under another parent, or whose
            chain just reached the fixed frame) after an update; what hung on them is gone.
    """

    def __init__(self, scene, fixed_frame: str = 'world', axes_length: float = 0.05,
                 on_remade: Callable[[set[str]], None] | None = None) -> None:
        self.scene = scene
        self.fixed_frame = fixed_frame
        self.axes_length = float(axes_length)
        self.on_remade = on_remade or (lambda frames: None)
        self.axes = False
        #: {child: its latest Transform}.
        self.edges: dict[str, Transform] = {}
        #: {frame: scene node path} of the drawn frames.
        self.paths: dict[str, str] = {}
        self.handles: dict[str, object] = {}
        self._root = scene.add_frame('/' + node_name(fixed_frame), show_axes=False)

    def path(self, frame: str) -> str | None:
        """The scene node path of ``frame``, or None while it is not drawn (its chain does not reach the
        fixed frame)."""
        if frame == self.fixed_frame:
            return self._root.name
        return self.paths.get(frame)

    def update(self, transforms: Iterable[Transform]) -> None:
        """Take ``transforms`` (newest last): move the nodes of known frames, make those of new or
        re-parented frames (and their subtrees) and tell ``on_remade`` which."""
        regraft = False
        latest: dict[str, Transform] = {}
        for t in transforms:
            if t.child == self.fixed_frame or t.child == t.parent:
                continue                         # the root stays at the origin; a self-loop is no edge
            known = self.edges.get(t.child)
            if known is None or known.parent != t.parent:
                regraft = True
            self.edges[t.child] = t
            latest[t.child] = t
        if regraft:
            self._regraft()
        for child, t in latest.items():
            handle = self.handles.get(child)
            if handle is not None:
                _set_pose(handle, t.position, t.wxyz)

    def show_axes(self, show: bool) -> None:
        """Draw every frame's axes (or not)."""
        self.axes = bool(show)
        for handle in self.handles.values():
            handle.show_axes = self.axes

    def world_pose(self, frame: str) -> tuple[np.ndarray, Rotation] | None:
        """``frame``'s pose in the fixed frame: (position (3,) m, rotation), or None when it is not drawn."""
        if frame != self.fixed_frame and frame not in self.paths:
            return None
        chain = []
        while frame != self.fixed_frame:
            chain.append(self.edges[frame])
            frame = chain[-1].parent
        position, rotation = np.zeros(3), Rotation.identity()
        for t in reversed(chain):
            position = position + rotation.apply(t.position)
            rotation = rotation * Rotation.from_quat(t.wxyz, scalar_first=True)
        return position, rotation

    def _resolved_paths(self) -> dict[str, str]:
        """{frame: node path} of every frame whose chain reaches the fixed frame without a loop."""
        paths = {self.fixed_frame: self._root.name}
        for start in self.edges:
            chain, frame = [], start
            while frame not in paths and frame in self.edges and frame not in chain:
                chain.append(frame)
                frame = self.edges[frame].parent
            if frame not in paths:
                continue                         # an unknown root, or a loop
            for child in reversed(chain):
                paths[child] = paths[self.edges[child].parent] + '/' + node_name(child)
        del paths[self.fixed_frame]
        return paths

    def _regraft(self) -> None:
        new = self._resolved_paths()
        moved = {f for f, p in self.paths.items() if new.get(f) != p}
        removed_paths: list[str] = []
        for frame in sorted(moved, key=lambda f: self.paths[f].count('/')):
            old = self.paths.pop(frame)
            handle = self.handles.pop(frame)
            if not any(old.startswith(p + '/') for p in removed_paths):
                handle.remove()                  # its subtree goes with it
                removed_paths.append(old)
        made = set()
        for frame in sorted((f for f in new if f not in self.paths), key=lambda f: new[f].count('/')):
            t = self.edges[frame]
            self.handles[frame] = self.scene.add_frame(
                new[frame], show_axes=self.axes, axes_length=self.axes_length, axes_radius=self.axes_length / 20,
                position=tuple(map(float, t.position)), wxyz=tuple(map(float, t.wxyz)))
            self.paths[frame] = new[frame]
            made.add(frame)
        if made:
            self.on_remade(made)


def _set_pose(handle, position: np.ndarray, wxyz: np.ndarray) -> None:
    """Move ``handle`` to ``position``, ``wxyz`` unless it stands there already (:data:`POSE_TOLERANCE`)."""
    if np.max(np.abs(np.asarray(handle.position) - position)) > POSE_TOLERANCE:
        handle.position = tuple(map(float, position))
    if np.max(np.abs(np.asarray(handle.wxyz) - wxyz)) > POSE_TOLERANCE:
        handle.wxyz = tuple(map(float, wxyz))
