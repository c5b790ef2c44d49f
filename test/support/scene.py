"""Helpers of the scene tests (test/core/model/test_scene_*.py): a valid object mapping to alter, a
closed cube mesh written as OBJ, and a bare model with a floor to add objects to."""

from __future__ import annotations

import itertools
from pathlib import Path

import mujoco


def can_entry(**changes) -> dict:
    """The YAML mapping of a valid object (a 0.35 kg can on the floor), with ``changes`` applied (a value
    of None removes the key)."""
    entry = {'name': 'can', 'shape': 'cylinder', 'size': [0.033, 0.0575], 'mass': 0.35,
             'xyz': [0.0, 0.0, 0.0575]}
    entry.update(changes)
    return {key: value for key, value in entry.items() if value is not None}


def write_cube_obj(path: Path, side: float) -> Path:
    """Write a closed cube of edge ``side`` (m), centred on the origin, as a Wavefront OBJ (faces
    wound counter-clockwise seen from outside); returns ``path``."""
    half = side / 2
    corners = list(itertools.product((-half, half), repeat=3))          # index = 4 x + 2 y + z
    faces = ((0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3))
    lines = [f'v {x:.9g} {y:.9g} {z:.9g}' for x, y, z in corners]
    for a, b, c, d in faces:
        lines += [f'f {a + 1} {b + 1} {c + 1}', f'f {a + 1} {c + 1} {d + 1}']
    path.write_text('\n'.join(lines) + '\n')
    return path


def floor_spec(floor_friction: float = 1.0) -> mujoco.MjSpec:
    """A model of a floor only (plane at z 0 with the cell floor's contact bits, contype 1 and
    conaffinity 3), step 2 ms as the cell's."""
    spec = mujoco.MjSpec()
    spec.option.timestep = 0.002
    spec.worldbody.add_geom(name='floor', type=mujoco.mjtGeom.mjGEOM_PLANE, size=[5, 5, 0.1],
                            friction=[floor_friction, 0.005, 0.0001], contype=1, conaffinity=3)
    return spec
