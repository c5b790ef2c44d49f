"""The scene's objects in a live simulation, as ROS 2's ``simulation_interfaces`` sees entities:
spawn, delete, and the state (pose and twist) of each, read and set.

A spawn or a delete is a reload with another scene (:meth:`LiveSimulation.prepare_reload` off the
lock, :meth:`LiveSimulation.apply_reload` under it): the model is rebuilt from its MJCF with the
scene's objects (:func:`shadow_twin.model.scene.add_objects`) and every joint present before keeps
its position and velocity by name, free objects and the mobile base included, so nothing else
loses its live state.

Poses and twists are in the world frame (the sim's ``odom`` frame, :data:`WORLD_FRAME`):
position m, orientation a unit quaternion (w, x, y, z), linear velocity m/s and angular velocity
rad/s, both of the object's frame origin, world axes (MuJoCo's ``mj_objectVelocity`` of the body
frame, ``flg_local`` 0). A free object's free joint holds its angular velocity in its own axes
(MuJoCo's convention): :func:`set_object_motion` converts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import mujoco
import numpy as np
from scipy.spatial.transform import Rotation

from shadow_twin.common.errors import ConfigError
from shadow_twin.model.scene import ObjectConfig, SceneConfig, free_joint_name, object_kinds
from shadow_twin.model.scene.config import WORLD_FRAMES
from shadow_twin.simulation.samples import ReloadReport

#: The frame entity poses are given and read in (the sim's odom frame is its world frame).
WORLD_FRAME = 'world'


@dataclass(frozen=True)
class EntityMotion:
    """Pose and twist of an entity in the world frame: ``position`` (3,) m, ``quat`` (4,) w x y z,
    ``linear`` (3,) m/s and ``angular`` (3,) rad/s (world axes, at the entity's frame origin)."""

    position: np.ndarray
    quat: np.ndarray
    linear: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(3))
    angular: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(3))


def _body(model: mujoco.MjModel, name: str) -> int:
    """Body id of scene object ``name``; ConfigError (one line) naming the objects if it is none."""
    kinds = object_kinds(model)
    if name not in kinds:
        raise ConfigError(f'no object {name!r} in the simulation; objects: {sorted(kinds) or "none"}')
    return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)


def object_motion(sim, name: str) -> EntityMotion:
    """The world pose and twist of object ``name`` of ``sim`` (a ``LiveSimulation``) now (its
    kinematics recomputed from the state: after ``mj_step`` MuJoCo's are a step old).
    Raises ConfigError: no such object."""
    with sim.lock:
        model, data = sim.model, sim.data
        body = _body(model, name)
        # the positions and velocities of now: after mj_step, xpos and cvel are those of the step's start
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_comVel(model, data)
        velocity = np.zeros(6)
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, body, velocity, 0)
        return EntityMotion(data.xpos[body].copy(), data.xquat[body].copy(), velocity[3:].copy(),
                            velocity[:3].copy())


def _normalised(quat) -> np.ndarray:
    quat = np.asarray(quat, dtype=float)
    norm = float(np.linalg.norm(quat))
    if not np.all(np.isfinite(quat)) or abs(norm - 1.0) > 1e-3:
        raise ConfigError(f'orientation {quat.tolist()} is not a unit quaternion (norm {norm:.4g})')
    return quat / norm


def set_object_motion(sim, name: str, motion: EntityMotion) -> None:
    """Put object ``name`` at ``motion``'s world pose with its twist (a free object), or move a
    fixed object to that pose relative to the body it is fixed to (it stays fixed to it; its twist
    must be zero). The rest of the state is untouched; positions are forwarded (``mj_forward``).

    Raises:
        ConfigError: no such object; a value that is not finite; a quaternion whose norm is not
            1 (within 1e-3); a twist given for a fixed object.
    """
    values = np.concatenate([motion.position, motion.linear, motion.angular]).astype(float)
    if values.shape != (9,) or not np.all(np.isfinite(values)):
        raise ConfigError(f'object {name!r}: position and twist must be 3 finite numbers each')
    quat = _normalised(motion.quat)
    with sim.lock:
        model, data = sim.model, sim.data
        body = _body(model, name)
        joint = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, free_joint_name(name))
        if joint >= 0:
            q, v = model.jnt_qposadr[joint], model.jnt_dofadr[joint]
            data.qpos[q:q + 3], data.qpos[q + 3:q + 7] = motion.position, quat
            rotation = np.empty(9)
            mujoco.mju_quat2Mat(rotation, quat)
            data.qvel[v:v + 3] = motion.linear
            data.qvel[v + 3:v + 6] = rotation.reshape(3, 3).T @ np.asarray(motion.angular, dtype=float)
        else:
            if np.any(np.asarray(motion.linear) != 0.0) or np.any(np.asarray(motion.angular) != 0.0):
                raise ConfigError(f'object {name!r} is fixed to {model.body(model.body_parentid[body]).name!r}: '
                                  'it cannot be given a twist')
            parent = model.body_parentid[body]
            parent_rotation = data.xmat[parent].reshape(3, 3)
            model.body_pos[body] = parent_rotation.T @ (np.asarray(motion.position, dtype=float) - data.xpos[parent])
            inverse = np.empty(4)
            mujoco.mju_negQuat(inverse, data.xquat[parent])
            relative = np.empty(4)
            mujoco.mju_mulQuat(relative, inverse, quat)
            model.body_quat[body] = relative
        mujoco.mj_forward(model, data)


def world_placement(sim, obj: ObjectConfig) -> ObjectConfig:
    """``obj`` with its pose in the world frame: a free object declared in a body's frame is placed
    where that body is now (not where it was at the start, as a scene file's objects are); a fixed
    object or one in the world frame is returned as it is. Raises ConfigError: an unknown frame."""
    if obj.frame in WORLD_FRAMES or not obj.free:
        return obj
    with sim.lock:
        model, data = sim.model, sim.data
        parent = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, obj.frame)
        if parent < 0:
            raise ConfigError(f'object {obj.name!r}: frame {obj.frame!r} is neither world, odom nor a body '
                              'of the model')
        rotation = Rotation.from_matrix(data.xmat[parent].reshape(3, 3))
        position = data.xpos[parent] + rotation.apply(obj.xyz)
    orientation = rotation * Rotation.from_euler('xyz', obj.rpy)       # URDF rpy: extrinsic x, y, z
    return dataclasses.replace(obj, frame=WORLD_FRAME, xyz=tuple(float(x) for x in position),
                               rpy=tuple(float(a) for a in orientation.as_euler('xyz')))


def spawn_object(sim, obj: ObjectConfig, max_bytes: int | None = None) -> ReloadReport:
    """Add ``obj`` to ``sim``'s scene (placed by :func:`world_placement`) and swap in the model that
    holds it, every other state kept (module doc). Raises ConfigError: an object of that name
    exists already, or a bad frame; ModelError: the object does not fit the model (a name clash
    with a body, joint or geom; MuJoCo's compile error); the running model is then untouched."""
    if obj.name in object_kinds(sim.model):
        raise ConfigError(f'an object named {obj.name!r} exists already')
    scene = SceneConfig(sim.scene.objects + (world_placement(sim, obj),))
    return sim.apply_reload(sim.prepare_reload(max_bytes=max_bytes, scene=scene))


def delete_objects(sim, names: list[str], max_bytes: int | None = None) -> list[str]:
    """Remove the objects ``names`` from ``sim``'s scene, and those declared in their frames (fixed
    to them), and swap in the model without them, every other state kept; returns the names
    removed, in scene order. Raises ConfigError: a name that is no object of the simulation."""
    kinds = object_kinds(sim.model)
    for name in names:
        if name not in kinds:
            raise ConfigError(f'no object {name!r} in the simulation; objects: {sorted(kinds) or "none"}')
        if name not in sim.scene.names:
            raise ConfigError(f'object {name!r} is part of the model file {sim.path.name}, not of the scene: '
                              'it is not deleted')
    removed = set(names)
    for obj in sim.scene.objects:           # declared after their frame's object: one pass
        if obj.frame in removed:
            removed.add(obj.name)
    kept = tuple(obj for obj in sim.scene.objects if obj.name not in removed)
    sim.apply_reload(sim.prepare_reload(max_bytes=max_bytes, scene=SceneConfig(kept)))
    return [name for name in kinds if name in removed]
