"""Markers (RViz's: boxes, spheres, cylinders and meshes in a TF frame) drawn in a browser scene under the
nodes of a :class:`~shadow_twin.visual.browser_frames.FrameTree`, so that they move with their frames.

Each marker is keyed by its namespace and id, as RViz keys them: one with a known key replaces the old
one, and when only its colour changed (the real robots' ghost recoloured by its error) only the colour is
sent; an arrow's new ends and colour are sent to the same node. An array that clears a namespace and adds
its markers again (how the bridge and the monitor send theirs) removes only the markers it does not add
again: the others are kept, or recoloured, in place (:meth:`MarkerLayer.apply`). A marker whose frame is not
drawn yet waits, and is drawn when its frame is (:meth:`MarkerLayer.frames_remade`).

Shapes: ``box`` (full extents ``scale``), ``sphere`` (an ellipsoid of diameters ``scale``), ``cylinder``
(along z: diameters x, y, height z), ``mesh`` (an STL file's vertices times ``scale``), ``arrow`` (from
``points[0]`` to ``points[1]``: ``scale`` x the shaft's diameter, y the head's, z the head's length) and
``text`` (a label facing the camera, ``scale`` z its height, black). A mesh file is read once
(:class:`MeshCache`); one that cannot be read is reported (``on_error``) and not drawn.

Units: m; quaternions (w, x, y, z); colours rgba 0-1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import trimesh

from shadow_twin.visual.browser_frames import FrameTree

#: The shapes a marker may have.
SHAPES = ('box', 'sphere', 'cylinder', 'mesh', 'arrow', 'text')


@dataclass(frozen=True)
class MarkerPart:
    """One marker: ``namespace`` and ``id`` its key; drawn in ``frame`` at ``position`` (3,) m, ``wxyz``
    (4,); ``shape`` one of :data:`SHAPES`, ``scale`` (3,) m (module doc), ``rgba`` (4,) 0-1, ``mesh_file``
    the STL of a mesh (a path), ``text`` a text's, ``points`` (2, 3) m an arrow's ends."""

    namespace: str
    id: int
    frame: str
    shape: str
    scale: np.ndarray
    position: np.ndarray
    wxyz: np.ndarray
    rgba: np.ndarray
    mesh_file: str | None = None
    text: str = ''
    points: np.ndarray | None = None

    @property
    def key(self) -> tuple[str, int]:
        return self.namespace, self.id

    def same_geometry(self, other: 'MarkerPart') -> bool:
        """Whether ``other`` differs from this one by its colour at most."""
        return (self.frame == other.frame and self.shape == other.shape and self.mesh_file == other.mesh_file
                and self.text == other.text
                and np.array_equal(self.scale, other.scale) and np.array_equal(self.position, other.position)
                and np.array_equal(self.wxyz, other.wxyz))


@dataclass(frozen=True)
class MarkerDelete:
    """Remove the marker ``namespace``, ``id`` (RViz's DELETE)."""

    namespace: str
    id: int


@dataclass(frozen=True)
class MarkerClear:
    """Remove every marker of ``namespace`` ('': all; RViz's DELETEALL)."""

    namespace: str = ''


class MeshCache:
    """The vertices and faces of STL files, read once each: ``get(path)`` -> (V (n, 3) float32 m, F (m, 3)
    uint32). Raises OSError or ValueError: a file that cannot be read or holds no triangles."""

    def __init__(self) -> None:
        self._meshes: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def get(self, path: str) -> tuple[np.ndarray, np.ndarray]:
        if path not in self._meshes:
            if not Path(path).is_file():
                raise OSError(f'no mesh file {path}')
            mesh = trimesh.load(path, file_type=Path(path).suffix.lstrip('.').lower() or 'stl', force='mesh',
                                process=False)
            if len(mesh.faces) == 0:
                raise ValueError(f'mesh file {path} holds no triangles')
            self._meshes[path] = (np.asarray(mesh.vertices, dtype=np.float32),
                                  np.asarray(mesh.faces, dtype=np.uint32))
        return self._meshes[path]


def rgb_opacity(rgba: np.ndarray) -> tuple[tuple[int, int, int], float | None]:
    """A colour as viser takes it: (r, g, b) 0-255 and an opacity (None when opaque)."""
    rgba = np.clip(np.asarray(rgba, dtype=float), 0.0, 1.0)
    rgb = tuple(int(round(255 * c)) for c in rgba[:3])
    return rgb, (None if rgba[3] >= 1.0 else float(rgba[3]))


class MarkerLayer:
    """The markers of a scene, drawn under ``tree``'s frames.

    Args:
        scene: a ``viser.SceneApi`` (``server.scene``).
        tree: the frames the markers hang on (call :meth:`frames_remade` from its ``on_remade``).
        on_error: called with a line when a marker cannot be drawn (a mesh file that cannot be read).
    """

    def __init__(self, scene, tree: FrameTree, on_error: Callable[[str], None] | None = None) -> None:
        self.scene = scene
        self.tree = tree
        self.on_error = on_error or (lambda line: None)
        self.meshes = MeshCache()
        #: {key: the marker}, drawn or waiting for its frame.
        self.markers: dict[tuple[str, int], MarkerPart] = {}
        self.handles: dict[tuple[str, int], object] = {}
        self._failed: set[str] = set()

    def drawn(self, namespace: str | None = None) -> list[MarkerPart]:
        """The markers drawn now (of ``namespace``; None: all)."""
        return [self.markers[k] for k in self.handles if namespace is None or k[0] == namespace]

    def apply(self, operations: Iterable[MarkerPart | MarkerDelete | MarkerClear]) -> None:
        """Apply a marker array's operations in their order: add or replace a :class:`MarkerPart`, remove a
        :class:`MarkerDelete`'s marker, clear a :class:`MarkerClear`'s namespace. A cleared marker that the
        array adds again is replaced (or recoloured) in place, not removed and made again."""
        cleared: set[tuple[str, int]] = set()
        for op in operations:
            if isinstance(op, MarkerDelete):
                cleared.discard((op.namespace, op.id))
                self.remove(op.namespace, op.id)
            elif isinstance(op, MarkerClear):
                cleared |= {k for k in self.markers if not op.namespace or k[0] == op.namespace}
            else:
                cleared.discard(op.key)
                self.set([op])
        for key in cleared:
            self.remove(*key)

    def set(self, parts: Iterable[MarkerPart]) -> None:
        """Add or replace ``parts`` (by key); a part differing only by its colour is recoloured."""
        for part in parts:
            old, handle = self.markers.get(part.key), self.handles.get(part.key)
            self.markers[part.key] = part
            if old is not None and handle is not None and old.shape == part.shape == 'arrow' and \
                    old.frame == part.frame and np.array_equal(old.scale, part.scale):
                handle.points = _arrow_points(part)
                handle.colors = np.array([rgb_opacity(part.rgba)[0]], dtype=np.uint8)
                handle.position, handle.wxyz = tuple(map(float, part.position)), tuple(map(float, part.wxyz))
                continue
            if old is not None and handle is not None and old.same_geometry(part):
                if not np.array_equal(old.rgba, part.rgba) and part.shape != 'text':
                    (rgb, opacity), (old_rgb, old_opacity) = rgb_opacity(part.rgba), rgb_opacity(old.rgba)
                    if rgb != old_rgb:
                        handle.color = rgb
                    if opacity != old_opacity:
                        handle.opacity = opacity
                continue
            if handle is not None:
                self.handles.pop(part.key).remove()
            self._draw(part)

    def remove(self, namespace: str, marker_id: int) -> None:
        """Remove the marker ``namespace``, ``marker_id`` (nothing when there is none)."""
        self.markers.pop((namespace, marker_id), None)
        handle = self.handles.pop((namespace, marker_id), None)
        if handle is not None:
            handle.remove()

    def clear(self, namespace: str | None = None) -> None:
        """Remove every marker of ``namespace`` (None or '': all)."""
        for key in [k for k in self.markers if not namespace or k[0] == namespace]:
            self.remove(*key)

    def frames_remade(self, frames: set[str]) -> None:
        """``frames`` were made again (their old nodes, and the markers on them, are gone): draw their
        markers, those waiting for them included."""
        for key, part in self.markers.items():
            if part.frame in frames:
                self.handles.pop(key, None)          # removed with its frame's old node
                self._draw(part)

    def _draw(self, part: MarkerPart) -> None:
        parent = self.tree.path(part.frame)
        if parent is None:
            return                                   # waits for its frame
        name = f'{parent}/{part.namespace or "_"}-{part.id}'
        rgb, opacity = rgb_opacity(part.rgba)
        pose = dict(position=tuple(map(float, part.position)), wxyz=tuple(map(float, part.wxyz)))
        scale = np.asarray(part.scale, dtype=float)
        look = dict(color=rgb, opacity=opacity, cast_shadow=False, receive_shadow=False)   # shadows: slow without a GPU
        if part.shape == 'box':
            handle = self.scene.add_box(name, dimensions=tuple(map(float, scale)), **look, **pose)
        elif part.shape == 'sphere':
            handle = self.scene.add_icosphere(name, radius=0.5, subdivisions=2, scale=tuple(map(float, scale)),
                                              **look, **pose)
        elif part.shape == 'cylinder':
            handle = self.scene.add_cylinder(name, radius=0.5, height=1.0, radial_segments=24,
                                             scale=tuple(map(float, scale)), **look, **pose)
        elif part.shape == 'mesh':
            try:
                vertices, faces = self.meshes.get(str(part.mesh_file))
            except (OSError, ValueError) as exc:
                if str(part.mesh_file) not in self._failed:      # once per file
                    self._failed.add(str(part.mesh_file))
                    self.on_error(f'marker {part.namespace}/{part.id}: {exc}; not drawn')
                return
            handle = self.scene.add_mesh_simple(name, vertices, faces, scale=tuple(map(float, scale)),
                                                flat_shading=False, **look, **pose)
        elif part.shape == 'arrow':
            handle = self.scene.add_arrows(name, _arrow_points(part), rgb, shaft_radius=float(scale[0]) / 2,
                                           head_radius=float(scale[1]) / 2, head_length=float(scale[2]), **pose)
        elif part.shape == 'text':
            handle = self.scene.add_label(name, part.text, font_size_mode='scene',
                                          font_scene_height=float(scale[2]) or 0.05, anchor='center-center', **pose)
        else:
            raise ValueError(f'marker {part.namespace}/{part.id}: unknown shape {part.shape!r}')
        self.handles[part.key] = handle


def _arrow_points(part: MarkerPart) -> np.ndarray:
    """(1, 2, 3) float32: an arrow's ends as viser takes them."""
    return np.asarray(part.points, dtype=np.float32).reshape(1, 2, 3)
