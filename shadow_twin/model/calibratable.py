"""Calibratable model parameters, ROS-free: addressed by :class:`ParameterTarget` (a joint, actuator,
geom or body name and an attribute), read and set directly in the compiled ``mujoco.MjModel`` arrays, so
an evaluation never re-parses XML (:func:`get_parameter`, :func:`set_parameter`,
:func:`apply_parameters`). Writing them into an MJCF is :mod:`shadow_twin.model.mjcf`'s.

Joint attributes map to compiled fields as documented in the MuJoCo XML
reference (``mjModel``): damping -> ``dof_damping``, frictionloss ->
``dof_frictionloss``, armature -> ``dof_armature``, stiffness ->
``jnt_stiffness``, springref -> ``qpos_spring``, range_lower/range_upper ->
``jnt_range``. Actuator attributes kp/kd are the gains of a PD servo written as
an affine-bias actuator (force = kp*ctrl - kp*length - kd*velocity), which is
how MuJoCo's own ``<position>`` actuator is built.

Geom attributes (contact parameters; MuJoCo's ``geom_friction``, ``geom_solref``, ``geom_solimp``):
friction and friction_torsional (``friction[0]``, ``[1]``), solref_timeconst and solref_dampratio
(``solref[0]``, ``[1]``: s, and the ratio; standard solref), solimp_width (``solimp[2]``, m). With
``priority`` or MuJoCo's mixing rule (the larger friction, the solref and solimp averaged by
``solmix``) they become the contact's. Body attributes: mass (kg; the inertia scales with it, as a
body of the same shape and density) and ipos_x/ipos_y/ipos_z (m: the centre of mass in the body frame).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from shadow_twin.common.errors import ModelError

JOINT_ATTRIBUTES = ('damping', 'frictionloss', 'armature', 'stiffness', 'springref',
                    'range_lower', 'range_upper')
#: kp, kd: position servo (kp N m/rad, kd N m s/rad); kv: velocity servo gain (N m s/rad; the MiR's wheels).
ACTUATOR_ATTRIBUTES = ('kp', 'kd', 'kv')
#: friction: sliding (Coulomb) friction coefficient of a geom, MuJoCo's ``friction[0]`` (with ``priority``
#: it is the contact's: the MiR250's wheel geoms have priority 1 over the floor).
GEOM_ATTRIBUTES = ('friction', 'friction_torsional', 'solref_timeconst', 'solref_dampratio', 'solimp_width')
#: mass (kg, inertia scaled with it) and centre of mass (m, body frame) of a body: a held object's.
BODY_ATTRIBUTES = ('mass', 'ipos_x', 'ipos_y', 'ipos_z')
#: Compiled array and column of each geom attribute.
GEOM_FIELDS = {'friction': ('geom_friction', 0), 'friction_torsional': ('geom_friction', 1),
               'solref_timeconst': ('geom_solref', 0), 'solref_dampratio': ('geom_solref', 1),
               'solimp_width': ('geom_solimp', 2)}


@dataclass(frozen=True)
class ParameterTarget:
    """One calibratable scalar: ``kind`` 'joint', 'actuator', 'geom' or 'body', element name, attribute."""

    kind: str
    name: str
    attribute: str

    def __str__(self) -> str:
        return f'{self.name}.{self.attribute}'


def _joint_slot(model: mujoco.MjModel, target: ParameterTarget) -> tuple[np.ndarray, tuple]:
    jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, target.name)
    if jid < 0:
        raise ModelError(f'no joint named {target.name!r}')
    dof, qpos = model.jnt_dofadr[jid], model.jnt_qposadr[jid]
    return {
        'damping': (model.dof_damping, (dof,)),
        'frictionloss': (model.dof_frictionloss, (dof,)),
        'armature': (model.dof_armature, (dof,)),
        'stiffness': (model.jnt_stiffness, (jid,)),
        'springref': (model.qpos_spring, (qpos,)),
        'range_lower': (model.jnt_range, (jid, 0)),
        'range_upper': (model.jnt_range, (jid, 1)),
    }[target.attribute]


def get_parameter(model: mujoco.MjModel, target: ParameterTarget) -> float:
    """Current value of ``target`` in a compiled model (SI units: N m s/rad, N m, rad...)."""
    if target.kind == 'joint':
        array, index = _joint_slot(model, target)
        return float(array[index])
    if target.kind == 'geom':
        field, column = GEOM_FIELDS[target.attribute]
        return float(getattr(model, field)[_geom_id(model, target.name), column])
    if target.kind == 'body':
        bid = _body_id(model, target.name)
        return float(model.body_mass[bid] if target.attribute == 'mass' else
                     model.body_ipos[bid, 'xyz'.index(target.attribute[-1])])
    aid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, target.name)
    if aid < 0:
        raise ModelError(f'no actuator named {target.name!r}')
    return float(-model.actuator_biasprm[aid, 1 if target.attribute == 'kp' else 2])


def _geom_id(model: mujoco.MjModel, name: str) -> int:
    gid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, name)
    if gid < 0:
        raise ModelError(f'no geom named {name!r}')
    return gid


def _body_id(model: mujoco.MjModel, name: str) -> int:
    bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
    if bid < 0:
        raise ModelError(f'no body named {name!r}')
    return bid


def set_parameter(model: mujoco.MjModel, target: ParameterTarget, value: float) -> None:
    """Set ``target`` in a compiled model in place (no recompilation).

    kp sets both the gain and the position bias of the servo, so that
    force = kp*(ctrl - q) - kd*qdot keeps holding; kv likewise sets the gain and the
    velocity bias of a velocity servo (force = kv*(ctrl - qdot)). A geom's friction sets
    its sliding coefficient; a body's mass scales its inertia with it (call :func:`apply_parameters`,
    which refreshes the constants MuJoCo derives from masses). Raises ModelError for an unknown name,
    kp/kv <= 0 or a mass <= 0.
    """
    value = float(value)
    if target.kind == 'joint':
        array, index = _joint_slot(model, target)
        array[index] = value
        if target.attribute in ('range_lower', 'range_upper'):
            jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, target.name)
            model.jnt_limited[jid] = 1
        return
    if target.kind == 'geom':
        field, column = GEOM_FIELDS[target.attribute]
        getattr(model, field)[_geom_id(model, target.name), column] = value
        return
    if target.kind == 'body':
        bid = _body_id(model, target.name)
        if target.attribute == 'mass':
            if value <= 0:
                raise ModelError(f'{target}: mass must be positive, got {value}')
            model.body_inertia[bid] *= value / model.body_mass[bid]
            model.body_mass[bid] = value
        else:
            model.body_ipos[bid, 'xyz'.index(target.attribute[-1])] = value
            model.body_sameframe[bid] = 0          # the inertial frame leaves the body frame: MuJoCo's general path
            model.body_simple[bid] = 0
        return
    aid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, target.name)
    if aid < 0:
        raise ModelError(f'no actuator named {target.name!r}')
    if target.attribute in ('kp', 'kv') and value <= 0:
        raise ModelError(f'{target}: {target.attribute} must be positive, got {value}')
    if target.attribute == 'kp':
        model.actuator_gainprm[aid, 0] = value
        model.actuator_biasprm[aid, 1] = -value
    elif target.attribute == 'kv':
        model.actuator_gainprm[aid, 0] = value
        model.actuator_biasprm[aid, 2] = -value
    else:
        model.actuator_biasprm[aid, 2] = -value


#: The MuJoCo object type of each target kind.
OBJECT_TYPES = {'joint': mujoco.mjtObj.mjOBJ_JOINT, 'actuator': mujoco.mjtObj.mjOBJ_ACTUATOR,
                'geom': mujoco.mjtObj.mjOBJ_GEOM, 'body': mujoco.mjtObj.mjOBJ_BODY}


def has_target(model: mujoco.MjModel, target: ParameterTarget) -> bool:
    """Whether ``model`` has the element ``target`` names (a reduced model lacks the removed parts')."""
    kind = OBJECT_TYPES.get(target.kind)
    return kind is not None and mujoco.mj_name2id(model, kind, target.name) >= 0


def apply_parameters(model: mujoco.MjModel, values: dict[ParameterTarget, float], missing_ok: bool = False) -> None:
    """Set several parameters in place; see :func:`set_parameter`. With ``missing_ok`` the targets ``model``
    does not have are skipped (:func:`has_target`: a reduced or frozen model lacks the removed parts'); without
    it they raise as :func:`set_parameter` does.

    Armature and bodies' masses and centres of mass enter constants that MuJoCo derives at
    compile time (``dof_M0``, the inverse weights, ``actuator_acc0``, ``body_subtreemass``);
    when they change they are recomputed with ``mj_setConst``, as the compiler does, so the
    in-place model moves as the recompiled MJCF would.
    """
    if missing_ok:
        values = {t: v for t, v in values.items() if has_target(model, t)}
    for target, value in values.items():
        set_parameter(model, target, value)
    if any((t.kind == 'joint' and t.attribute == 'armature') or t.kind == 'body' for t in values):
        spring = model.qpos_spring.copy()
        mujoco.mj_setConst(model, mujoco.MjData(model))
        model.qpos_spring[:] = spring
