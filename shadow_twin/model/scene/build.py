"""Adding a scene's objects to a model with ``MjSpec``, and removing one.

Where an object goes (its ``frame``):

* ``world`` or ``odom``: a child of the world body, at ``xyz``/``rpy`` in the world frame. The sim's
  ``odom`` frame is its world frame: the base's odometry is its free joint's pose in the world
  (:mod:`shadow_twin.simulation.mobile_base`), and the base starts at the world origin.
* a body of the model (``cabinet``, ``base_link``: the MiR's top plate is at z 0.352 m in it,
  ``rh_palm``, an object added before...): a **fixed** object becomes a child of that body at
  ``xyz``/``rpy`` in its frame, and moves with it. A **free** object becomes a child of the world
  (MuJoCo allows a free joint only in a child of the world body: "free joint can only be used on top
  level"), placed where that body is when the simulation starts: the model is compiled as it stands,
  put in keyframe 0 when it has keyframes (as the sim's reset), else in ``qpos0``, and
  ``mj_kinematics`` gives the body's pose, which is composed with the object's (``mju_mulPose``).

A free object's joint comes after every joint of the model (its body is the world's last child), so
the joints already there keep their ``qpos``/``qvel`` addresses. MuJoCo (4.x) fills the object's
entries of existing keyframes with its ``qpos0`` (the declared pose, at rest) and drops them when the
object is removed.

Names and the marker that finds the objects: :mod:`shadow_twin.model.scene.names`; the geom and the
inertia: :mod:`shadow_twin.model.scene.geometry`.
"""

from __future__ import annotations

import mujoco
import numpy as np

from shadow_twin.common.errors import ModelError, one_line
from shadow_twin.model.scene.config import WORLD_FRAMES, ObjectConfig, SceneConfig
from shadow_twin.model.scene.geometry import add_object_geom, object_inertial
from shadow_twin.model.scene.names import FIXED, FREE, free_joint_name, marker_name, mesh_name, object_kinds


def add_objects(spec: mujoco.MjSpec, scene: SceneConfig) -> list[str]:
    """Add ``scene``'s objects, in order, to ``spec`` (any model of the project: the hand, the cell...).

    Each object is a body and a geom named after it, with a free joint ``<name>_free`` when free, and its
    marker (:mod:`shadow_twin.model.scene.names`); see the module doc for where it goes. The spec is
    changed in place and not compiled at the end (it is compiled to place a free object in a body's frame).

    Returns:
        The names of the bodies added (the objects' names), in order.
    Raises:
        ModelError (one line): a frame that is neither world, odom nor a body of the model; an object name
            (or its free joint's, mesh's or marker's) already used by a body, geom, joint, mesh or text of
            the model; a model that does not compile when a free object must be placed in a body's frame;
            an object MuJoCo cannot build (:func:`shadow_twin.model.scene.geometry.object_inertial`).
    """
    added = []
    for obj in scene.objects:
        _check_names(spec, obj)
        parent, pos, quat = _placement(spec, obj)
        inertial = object_inertial(obj)
        body = parent.add_body(name=obj.name, pos=pos, quat=quat)
        body.mass, body.ipos, body.iquat = inertial.mass, inertial.pos, inertial.quat
        body.inertia = inertial.inertia
        body.explicitinertial = True
        if obj.free:
            body.add_freejoint(name=free_joint_name(obj.name))
        add_object_geom(spec, body, obj)
        spec.add_text(name=marker_name(obj.name), data=FREE if obj.free else FIXED)
        added.append(obj.name)
    return added


def remove_object(spec: mujoco.MjSpec, name: str) -> list[str]:
    """Remove scene object ``name`` from ``spec``: its body (with everything below it), marker and mesh,
    and those of the objects fixed to it (they were children of its body).

    Returns:
        The names of the objects removed (``name`` and those fixed to it), in the order they were added.
    Raises:
        ModelError: ``spec`` has no scene object ``name`` (a body without the marker is not one).
    """
    kinds = object_kinds(spec)
    if name not in kinds:
        raise ModelError(f'no scene object named {name!r} in the model; objects: {list(kinds)}')
    root = spec.body(name)
    removed = [other for other in kinds if _below(spec.body(other), root)]
    spec.delete(root)
    for other in removed:
        spec.delete(spec.text(marker_name(other)))
        mesh = spec.mesh(mesh_name(other))
        if mesh is not None:
            spec.delete(mesh)
    return removed


def _below(body, root) -> bool:
    """Whether ``body`` is ``root`` or one of its descendants."""
    while body is not None and body.name != 'world':
        if body.name == root.name:
            return True
        body = body.parent
    return False


def _check_names(spec: mujoco.MjSpec, obj: ObjectConfig) -> None:
    """ModelError when the object's name is taken by a body, geom or joint of ``spec``, or a name it adds
    (free joint, mesh, marker) is."""
    taken = [('body', obj.name, spec.body), ('geom', obj.name, spec.geom), ('joint', obj.name, spec.joint),
             ('custom text', marker_name(obj.name), spec.text)]
    if obj.free:
        taken.append(('joint', free_joint_name(obj.name), spec.joint))
    if obj.shape == 'mesh':
        taken.append(('mesh', mesh_name(obj.name), spec.mesh))
    for kind, name, find in taken:
        if find(name) is not None:
            raise ModelError(f'scene object {obj.name!r}: the model already has a {kind} named {name!r}; '
                             'rename the object')


def _placement(spec: mujoco.MjSpec, obj: ObjectConfig):
    """(parent body, pos (3,), quat (4,)) of the object's body (module doc)."""
    quat = obj.quat
    if obj.frame in WORLD_FRAMES:
        return spec.worldbody, np.array(obj.xyz), quat
    frame = spec.body(obj.frame)
    if frame is None:
        raise ModelError(f'scene object {obj.name!r}: frame {obj.frame!r} is neither world, odom nor a body of '
                         'the model')
    if not obj.free:
        return frame, np.array(obj.xyz), quat
    try:
        model = spec.compile()
    except Exception as exc:  # mujoco raises ValueError with its own message
        raise ModelError(f'scene object {obj.name!r}: cannot place it in frame {obj.frame!r}: the model does not '
                         f'compile: {one_line(exc)}') from None
    data = mujoco.MjData(model)
    if model.nkey > 0:
        mujoco.mj_resetDataKeyframe(model, data, 0)
    mujoco.mj_kinematics(model, data)
    index = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, obj.frame)
    pos, out = np.zeros(3), np.zeros(4)
    mujoco.mju_mulPose(pos, out, data.xpos[index], data.xquat[index], np.array(obj.xyz), quat)
    return spec.worldbody, pos, out
