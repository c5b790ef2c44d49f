"""What of a MuJoCo model is drawn: each visible geom as the primitives a viewer draws (RViz's and
Foxglove's markers, a browser scene), in its body's frame.

A geom is visible when its group is one MuJoCo's viewer shows by default (0, 1, 2) and its colour is not
transparent. Shapes: a box, sphere or cylinder is one part; a capsule three (a cylinder and a sphere at each
end: viewers have no capsule); an ellipsoid a scaled sphere; a plane a 1 mm slab (10 m square where MuJoCo's
is infinite); a mesh one part whose file holds the compiled mesh (MuJoCo's vertices, already centred and
scaled as the geom uses them, written once as binary STL by ``trimesh`` into a folder: a ``file://`` URI
loads it; the geom's own pose places it). Height fields and SDFs are left out.

Units: m; quaternions (w, x, y, z) as MuJoCo's.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import mujoco
import numpy as np

from shadow_twin.common.files import write_bytes_atomic

#: Geom groups drawn (MuJoCo's viewer shows these by default; Shadow's collision geoms are group 3).
VISIBLE_GROUPS = (0, 1, 2)
#: m: the side of a plane MuJoCo makes infinite (size 0), and every plane's thickness.
PLANE_SIDE, PLANE_THICKNESS = 10.0, 0.001
_T = mujoco.mjtGeom


def mesh_folder(given: str | os.PathLike = '') -> Path:
    """Where mesh STL files go: ``given``, else ``$XDG_CACHE_HOME/shadow_twin/meshes`` (``~/.cache/...``)."""
    if str(given):
        return Path(given).expanduser()
    cache = os.environ.get('XDG_CACHE_HOME') or Path.home() / '.cache'
    return Path(cache) / 'shadow_twin' / 'meshes'


@dataclass(frozen=True)
class Part:
    """One drawn primitive of geom ``geom`` (``geom_name``) of body ``body`` (``body_name``).

    ``shape``: 'box', 'sphere', 'cylinder' (along its z axis), 'mesh' or 'plane' (a slab); ``scale`` (3,) m:
    the full extents along x, y, z (a mesh: 1, 1, 1: its file is in metres); ``pos`` (3,) m and ``quat``
    (4,) w, x, y, z: its pose in the body's frame; ``rgba`` (4,) 0-1; ``mesh_file``: the STL of a mesh."""

    body: int
    body_name: str
    geom: int
    geom_name: str
    shape: str
    scale: np.ndarray
    pos: np.ndarray
    quat: np.ndarray
    rgba: np.ndarray
    mesh_file: str | None = None


def geom_rgba(model: mujoco.MjModel, geom: int) -> np.ndarray:
    """(4,) the colour MuJoCo draws ``geom`` in: its material's when it has one, else its own."""
    material = int(model.geom_matid[geom])
    return np.array(model.mat_rgba[material] if material >= 0 else model.geom_rgba[geom], dtype=float)


def visible_geoms(model: mujoco.MjModel, groups: Sequence[int] = VISIBLE_GROUPS) -> list[int]:
    """The ids of ``model``'s geoms drawn (module doc), in model order."""
    return [g for g in range(model.ngeom)
            if int(model.geom_group[g]) in groups and geom_rgba(model, g)[3] > 0.0
            and int(model.geom_type[g]) not in (_T.mjGEOM_HFIELD, _T.mjGEOM_SDF)]


def geom_parts(model: mujoco.MjModel, mesh_dir: str | Path | None = None,
               groups: Sequence[int] = VISIBLE_GROUPS) -> list[Part]:
    """The parts of every visible geom of ``model`` (module doc), in model order.

    Args:
        model: the model.
        mesh_dir: where mesh geoms' STL files are written (made if missing; a file already there with the
            same content is reused: its name holds the content's hash). None: mesh geoms are left out.
        groups: the geom groups drawn.
    Raises:
        OSError: ``mesh_dir`` cannot be written.
    """
    parts: list[Part] = []
    for g in visible_geoms(model, groups):
        kind = int(model.geom_type[g])
        if kind == _T.mjGEOM_MESH and mesh_dir is None:
            continue
        body = int(model.geom_bodyid[g])
        base = dict(body=body, body_name=model.body(body).name, geom=g, geom_name=model.geom(g).name,
                    rgba=geom_rgba(model, g))
        pos, quat, size = model.geom_pos[g].copy(), model.geom_quat[g].copy(), model.geom_size[g]
        for shape, scale, offset, file in _primitives(model, g, kind, size, mesh_dir):
            parts.append(Part(shape=shape, scale=scale, pos=pos + _rotate(quat, offset), quat=quat, mesh_file=file,
                              **base))
    return parts


def _primitives(model: mujoco.MjModel, geom: int, kind: int, size: np.ndarray, mesh_dir) -> list[tuple]:
    """[(shape, scale (3,), offset (3,) in the geom's frame, mesh file or None)] of one geom."""
    zero = np.zeros(3)
    if kind == _T.mjGEOM_BOX:
        return [('box', 2 * size[:3].copy(), zero, None)]
    if kind == _T.mjGEOM_SPHERE:
        return [('sphere', np.full(3, 2 * size[0]), zero, None)]
    if kind == _T.mjGEOM_ELLIPSOID:
        return [('sphere', 2 * size[:3].copy(), zero, None)]
    if kind == _T.mjGEOM_CYLINDER:
        return [('cylinder', np.array([2 * size[0], 2 * size[0], 2 * size[1]]), zero, None)]
    if kind == _T.mjGEOM_CAPSULE:
        r, h = size[0], size[1]
        return [('cylinder', np.array([2 * r, 2 * r, 2 * h]), zero, None),
                ('sphere', np.full(3, 2 * r), np.array([0.0, 0.0, h]), None),
                ('sphere', np.full(3, 2 * r), np.array([0.0, 0.0, -h]), None)]
    if kind == _T.mjGEOM_PLANE:
        sides = [2 * s if s > 0 else PLANE_SIDE for s in size[:2]]
        return [('plane', np.array([*sides, PLANE_THICKNESS]), np.array([0.0, 0.0, -PLANE_THICKNESS / 2]), None)]
    if kind == _T.mjGEOM_MESH:
        return [('mesh', np.ones(3), zero, str(mesh_file(model, int(model.geom_dataid[geom]), Path(mesh_dir))))]
    return []


def mesh_file(model: mujoco.MjModel, mesh: int, folder: Path) -> Path:
    """The binary STL of ``model``'s compiled mesh ``mesh`` in ``folder`` (written atomically unless a file
    of the same content is there: named ``<mesh name>-<content hash>.stl``). Raises OSError."""
    start, count = int(model.mesh_vertadr[mesh]), int(model.mesh_vertnum[mesh])
    face_start, faces = int(model.mesh_faceadr[mesh]), int(model.mesh_facenum[mesh])
    vertices = np.asarray(model.mesh_vert[start:start + count], dtype=float)
    triangles = np.asarray(model.mesh_face[face_start:face_start + faces], dtype=np.int64)
    import trimesh      # lazy: ~70 ms of imports, only where meshes are written
    data = trimesh.Trimesh(vertices, triangles, process=False).export(file_type='stl')
    name = model.mesh(mesh).name or f'mesh{mesh}'
    path = folder / f'{name}-{hashlib.sha256(data).hexdigest()[:12]}.stl'
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, data)
    return path


def _rotate(quat: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """(3,) ``vector`` turned by ``quat`` (w, x, y, z)."""
    out = np.zeros(3)
    mujoco.mju_rotVecQuat(out, np.asarray(vector, float), np.asarray(quat, float))
    return out
