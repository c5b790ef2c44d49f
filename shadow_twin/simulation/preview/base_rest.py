"""Where the preview model's mobile base rests on its wheels (ROS-free).

An MJCF places a mobile base's free joint level at its reference height (``qpos0``); on its tyres'
soft contacts and its drive wheels' suspension the cell's MiR250 rests 0.26 mm lower and pitched
4 mrad towards the arm (this model). A live sim's base has long since settled there. A preview
started at the reference pose instead drops and rocks in its first 0.1 s, and that jolt reaches the
arm's reaction and whatever the hand holds: a held can's predicted slide differed from the same
model's live run by 2.7 mm (standard deviation over 15 random transports) for it, 0.28 mm with the
base at rest (``benchmarks/grasp_preview.py``, 29 Nov).

:func:`rest_base` settles a copy of the model once, every driven joint held where it is, and makes
that rest the model's reference pose for the base's height, roll and pitch and its passive joints
(suspension slides, casters). The base's x, y and yaw stay the reference's: a start state's
odometry places them.

Units: m, rad, s.
"""

from __future__ import annotations

import mujoco
import numpy as np

from shadow_twin.control.base.trajectory import yaw_from_quaternion
from shadow_twin.control.controller import SimController
from shadow_twin.simulation.mobile_base import SimMobileBase

#: s the model is settled for (the cell's base is still to 1e-6 m after 0.3 s).
REST_TIME = 1.0


def base_passive_joints(model: mujoco.MjModel, base: SimMobileBase, controller: SimController) -> list[int]:
    """Joint ids of the base's subtree that no controller drives (suspension slides, caster swivels and
    wheels), its free joint excluded."""
    root = int(model.jnt_bodyid[base.free_joint])
    driven = set(int(j) for j in controller.joint_ids)
    out = []
    for joint in range(model.njnt):
        body = int(model.jnt_bodyid[joint])
        while body not in (0, root):
            body = int(model.body_parentid[body])
        if body == root and joint != base.free_joint and joint not in driven:
            out.append(joint)
    return out


def rest_base(model: mujoco.MjModel, controller: SimController, seconds: float = REST_TIME) -> bool:
    """Set ``model.qpos0`` of the base to where it rests (module doc): its free joint's height, roll and
    pitch (x, y and yaw kept) and the passive joints of its subtree. Returns False (nothing changed) for
    a model without a mobile base. Changes ``model`` in place: call it on the preview's own copy."""
    base = SimMobileBase.find(model)
    if base is None:
        return False
    data = mujoco.MjData(model)
    controller.hold_integrators(model, data)
    mujoco.mj_forward(model, data)
    hold = data.qpos[controller.qpos_adr].copy()
    data.ctrl[:] = controller.ctrl(model, hold, np.zeros_like(hold))
    mujoco.mj_step(model, data, nstep=int(np.ceil(seconds / model.opt.timestep)))
    adr = int(model.jnt_qposadr[base.free_joint])
    reference = mujoco.MjData(model)
    reference.qpos[adr:adr + 7] = data.qpos[adr:adr + 7]
    x, y, z, w = model.qpos0[adr + 4], model.qpos0[adr + 5], model.qpos0[adr + 6], model.qpos0[adr + 3]
    base.place(reference, float(model.qpos0[adr]), float(model.qpos0[adr + 1]), yaw_from_quaternion(x, y, z, w))
    model.qpos0[adr:adr + 7] = reference.qpos[adr:adr + 7]
    for joint in base_passive_joints(model, base, controller):
        first = int(model.jnt_qposadr[joint])
        size = {mujoco.mjtJoint.mjJNT_FREE: 7, mujoco.mjtJoint.mjJNT_BALL: 4}.get(model.jnt_type[joint], 1)
        model.qpos0[first:first + size] = data.qpos[first:first + size]
    return True

