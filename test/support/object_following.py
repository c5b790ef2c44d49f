"""Helpers of the object-following tests (test/core/simulation/test_object_following.py): a model of boxes
made followable (on a floor, by a wall, on a tray that carries them), and a pose source streamed as a
motion-capture system gives it (a rate, a latency, noise) while the model steps."""

from __future__ import annotations

from typing import Callable

import mujoco
import numpy as np
from support.scene import floor_spec

from shadow_twin.model.scene import ObjectConfig, SceneConfig, add_objects
from shadow_twin.simulation.objects import ObjectFollower, add_following

IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])
#: The boxes' half-size (m) and mass (kg).
HALF, MASS = 0.02, 0.1


def box(name: str = 'box', xyz=(0.0, 0.0, 0.5)) -> ObjectConfig:
    """A free 0.1 kg box of 40 mm at ``xyz`` (m, world)."""
    return ObjectConfig.from_mapping({'name': name, 'shape': 'box', 'size': [HALF] * 3, 'mass': MASS,
                                      'xyz': list(xyz)}, 'test')


def followed_model(objects=None, floor: bool = True, wall: float | None = None, tray: bool = False,
                   **follow) -> tuple[mujoco.MjModel, mujoco.MjData]:
    """A 2 ms, implicitfast model (the cell's) with ``objects`` (default one box at z 0.5 m) made
    followable (``follow``: :func:`add_following`'s keywords); a floor at z 0; a fixed wall whose face is
    at x = ``wall`` (m); a 0.2 m tray (its top at z 0.31 m, 50 kg, friction 1) on a slide joint
    ``tray_x`` along x, to be moved by setting its qpos and qvel."""
    spec = floor_spec() if floor else mujoco.MjSpec()
    spec.option.timestep = 0.002
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    if wall is not None:
        spec.worldbody.add_geom(name='wall', type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.05, 0.5, 0.5],
                                pos=[wall + 0.05, 0.0, 0.5])
    if tray:
        body = spec.worldbody.add_body(name='tray', pos=[0.0, 0.0, 0.3])
        body.add_joint(name='tray_x', type=mujoco.mjtJoint.mjJNT_SLIDE, axis=[1.0, 0.0, 0.0])
        body.add_geom(name='tray', type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.1, 0.1, 0.01], mass=50.0,
                      friction=[1.0, 0.005, 0.0001])
    objects = objects or [box()]
    add_objects(spec, SceneConfig(tuple(objects)))
    add_following(spec, [obj.name for obj in objects], **follow)
    model = spec.compile()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    return model, data


def stream(model, data, follower: ObjectFollower, path: Callable, until: float, name: str = 'box',
           rate: float = 100.0, latency: float = 0.005, noise: float = 0.0, seed: int = 0,
           before: Callable | None = None, after: Callable | None = None, start: float | None = None) -> None:
    """Step ``model`` until sim time ``until`` (s) while object ``name``'s source gives ``path(t)``
    (position (3,) m, quat (4,)) at ``rate`` Hz from ``start`` (s; default now), each sample ``latency``
    s after its stamp, its position with ``noise`` (m, standard deviation per axis); before each step the
    follower updates and ``before(data)`` runs, after it ``after(data)``."""
    rng = np.random.default_rng(seed)
    stamp = float(data.time) if start is None else float(start)
    while data.time < until - 1e-9:
        while stamp <= data.time - latency + 1e-9:
            position, quat = path(stamp)
            follower.offer(name, stamp, np.asarray(position) + rng.normal(0.0, noise, 3), quat, float(data.time))
            stamp += 1.0 / rate
        follower.update(data)
        if before is not None:
            before(data)
        mujoco.mj_step(model, data)
        if after is not None:
            after(data)


def contact_normal_force(model, data, geom: str) -> float:
    """N: the sum of the normal forces of the contacts of geom ``geom`` (``mj_contactForce``)."""
    index = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, geom)
    force, total = np.zeros(6), 0.0
    for k in range(data.ncon):
        if index in (data.contact[k].geom1, data.contact[k].geom2):
            mujoco.mj_contactForce(model, data, k, force)
            total += force[0]
    return total
