"""A scene object's geom (shape, mass or density, contact parameters) and its inertial properties, as
MuJoCo computes them.

The inertia is MuJoCo's own: the object alone is compiled in a model of its own (a body with the
object's geom) and its body's mass, centre of mass and principal inertia are read back
(:func:`object_inertial`); the object's body then carries them as an explicit ``<inertial>``, so its
mass does not depend on the compiler settings of the model it joins (``inertiafromgeom``,
``boundmass``...) and the written MJCF states it. MuJoCo computes a mesh's volume with its default
mesh inertia (``legacy``: right for a closed mesh).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from shadow_twin.common.errors import ModelError, one_line
from shadow_twin.model.scene.config import ObjectConfig
from shadow_twin.model.scene.names import mesh_name

#: MuJoCo geom types of the shapes.
GEOM_TYPES = {'box': mujoco.mjtGeom.mjGEOM_BOX, 'cylinder': mujoco.mjtGeom.mjGEOM_CYLINDER,
              'sphere': mujoco.mjtGeom.mjGEOM_SPHERE, 'capsule': mujoco.mjtGeom.mjGEOM_CAPSULE,
              'mesh': mujoco.mjtGeom.mjGEOM_MESH}
#: Contact bits of an object's geom: those of the cell's floor (contype 1, conaffinity 3), so an object
#: touches the floor, the hand (contype 1), the base, cabinet and arm (contype 2) and the other objects;
#: the robots' geoms have conaffinity 0 and never touch each other.
CONTYPE, CONAFFINITY = 1, 3
#: Geom priority of an object: above the robots' 0, so that every contact of an object with the robot or
#: the floor takes the object's friction, condim, solref and solimp (MuJoCo: the geom of higher priority
#: gives the contact's parameters; between two objects, of equal priority, the friction is the larger of
#: the two, condim the larger, solref and solimp the mean).
PRIORITY = 1


@dataclass(frozen=True)
class Inertial:
    """An object body's inertial properties in its frame: ``mass`` (kg), ``pos`` (3,) centre of mass (m),
    ``quat`` (4,) orientation of the principal axes (w x y z), ``inertia`` (3,) principal moments (kg m^2)."""

    mass: float
    pos: np.ndarray
    quat: np.ndarray
    inertia: np.ndarray


def add_object_geom(spec: mujoco.MjSpec, body, obj: ObjectConfig):
    """Add ``obj``'s geom (named like the object, at ``body``'s origin) to ``body`` of ``spec``, and its
    mesh asset (the file's absolute path, so that a written MJCF compiles from anywhere) for a mesh.

    The geom has the object's shape and size, mass or density, friction, condim, solref, solimp and rgba,
    contact bits :data:`CONTYPE` / :data:`CONAFFINITY` and priority :data:`PRIORITY`. Returns the geom.
    """
    geom = body.add_geom(name=obj.name, type=GEOM_TYPES[obj.shape])
    if obj.shape == 'mesh':
        spec.add_mesh(name=mesh_name(obj.name), file=str(obj.mesh), scale=list(obj.scale))
        geom.meshname = mesh_name(obj.name)
    else:
        size = np.zeros(3)
        size[:len(obj.size)] = obj.size
        geom.size = size
    if obj.mass is not None:
        geom.mass = obj.mass
    else:
        geom.density = obj.density
    geom.friction = list(obj.friction)
    geom.condim = obj.condim
    geom.solref = list(obj.solref)
    geom.solimp = list(obj.solimp)
    geom.contype, geom.conaffinity, geom.priority = CONTYPE, CONAFFINITY, PRIORITY
    if obj.rgba is not None:
        geom.rgba = list(obj.rgba)
    return geom


def object_inertial(obj: ObjectConfig) -> Inertial:
    """``obj``'s mass, centre of mass and principal inertia in its frame (module doc): MuJoCo's figures
    of a uniform solid of the shape (mass given, or density x volume), or with ``obj.inertia`` those
    moments along the object's axes about MuJoCo's centre of mass.

    Raises ModelError (one line) when MuJoCo cannot build the object (a mesh file it cannot read,
    a mesh without volume...).
    """
    alone = mujoco.MjSpec()
    alone.modelname = f'scene_object_{obj.name}'
    body = alone.worldbody.add_body(name=obj.name)
    body.add_freejoint()
    add_object_geom(alone, body, obj)
    try:
        model = alone.compile()
    except Exception as exc:  # mujoco raises ValueError with its own message
        raise ModelError(f'scene object {obj.name!r}: MuJoCo cannot build it: {one_line(exc)}') from None
    if obj.inertia is not None:
        return Inertial(float(obj.mass), model.body_ipos[1].copy(), np.array([1.0, 0.0, 0.0, 0.0]),
                        np.array(obj.inertia, dtype=float))
    return Inertial(float(model.body_mass[1]), model.body_ipos[1].copy(), model.body_iquat[1].copy(),
                    model.body_inertia[1].copy())
