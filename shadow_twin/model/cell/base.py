"""The MiR250's figures of :class:`~shadow_twin.model.cell.config.BaseConfig` set in its spec (element
names of ``builtin/mir250.xml``): mass, wheel radius and separation, the wheels' velocity loops and
torque limit, the command latency, the drive-wheel suspension and the wheels' friction. Used by
:mod:`shadow_twin.model.cell.assembly` before the base is attached to the cell."""

from __future__ import annotations

import mujoco
import numpy as np

from shadow_twin.common.errors import ConfigError, ModelError
from shadow_twin.model.cell.config import BaseConfig
from shadow_twin.model.cell.names import LATENCY_NUMERIC


def apply_base_config(spec: mujoco.MjSpec, base: BaseConfig) -> None:
    """Set the :class:`BaseConfig` figures in the MiR250 spec (element names of mir250.xml)."""
    def element(kind: str, name: str):
        found = getattr(spec, kind)(name)
        if found is None:
            raise ModelError(f'mir250.xml: no {kind} named {name!r}')
        return found

    chassis = element('body', 'base_link')
    others = sum(b.mass for b in spec.bodies if b.name not in ('world', 'base_link', 'base_footprint'))
    mass = base.mass - others
    if mass <= 0:
        raise ConfigError(f'cell.base.mass {base.mass} kg is not above the wheels and casters ({others:g} kg)')
    chassis.inertia = np.asarray(chassis.inertia) * (mass / chassis.mass)
    chassis.mass = mass
    for side, sign in (('left', 1.0), ('right', -1.0)):
        wheel = element('body', f'{side}_wheel_link')
        wheel.pos = np.array([wheel.pos[0], sign * base.wheel_separation / 2, base.wheel_radius])
        for geom in wheel.geoms:
            size = np.array(geom.size)
            size[0] = base.wheel_radius
            geom.size = size
        actuator = element('actuator', f'{side}_wheel_joint')
        gain, bias = np.array(actuator.gainprm), np.array(actuator.biasprm)
        gain[0], bias[2] = base.wheel_kv, -base.wheel_kv
        actuator.gainprm, actuator.biasprm = gain, bias
        if base.wheel_torque_limit > 0:
            actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
            actuator.forcerange = np.array([-base.wheel_torque_limit, base.wheel_torque_limit])
        integral = element('actuator', f'{side}_wheel_integral')
        if base.wheel_ki > 0:
            gain, bias = np.array(integral.gainprm), np.array(integral.biasprm)
            gain[0], bias[1] = base.wheel_ki, -base.wheel_ki
            integral.gainprm, integral.biasprm = gain, bias
        else:                           # a P loop: no integral actuator
            spec.delete(integral)
    if base.command_latency > 0:
        spec.add_numeric(name=LATENCY_NUMERIC, data=[base.command_latency])
    if base.suspension_stiffness > 0:
        for side in ('left', 'right'):
            _add_suspension(spec, element('body', f'{side}_wheel_link'), element('joint', f'{side}_wheel_joint'), base)
    for geom in spec.geoms:
        if geom.name.endswith('_contact'):
            friction = np.array(geom.friction)
            friction[0] = base.friction
            geom.friction = friction


#: Attributes of a drive wheel's hinge kept when it is re-added after its suspension slide.
_HINGE_FIELDS = ('axis', 'pos', 'armature', 'damping', 'frictionloss', 'stiffness', 'springref', 'ref', 'limited',
                 'range', 'actfrclimited', 'actfrcrange', 'group')


def _add_suspension(spec: mujoco.MjSpec, wheel, hinge, base: BaseConfig) -> None:
    """Give the drive ``wheel`` body a suspension slide along the chassis' z before its ``hinge``
    (MuJoCo applies a body's joints in order: the slide must not turn with the wheel), spring
    ``base.suspension_stiffness`` N/m, preload ``base.suspension_preload`` N at qpos 0 (springref
    -preload / stiffness), damping ``base.suspension_damping`` N s/m, travel +-``suspension_travel`` m.
    The hinge is removed and added again after it with its name and attributes."""
    kept = {name: np.array(getattr(hinge, name)) if isinstance(getattr(hinge, name), np.ndarray)
            else getattr(hinge, name) for name in _HINGE_FIELDS}
    name = hinge.name
    spec.delete(hinge)
    wheel.add_joint(name=name.replace('_wheel_joint', '_wheel_suspension_joint'), type=mujoco.mjtJoint.mjJNT_SLIDE,
                    axis=[0.0, 0.0, 1.0], stiffness=[base.suspension_stiffness, 0.0, 0.0],
                    springref=-base.suspension_preload / base.suspension_stiffness,
                    damping=[base.suspension_damping, 0.0, 0.0], limited=mujoco.mjtLimited.mjLIMITED_TRUE,
                    range=[-base.suspension_travel, base.suspension_travel])
    joint = wheel.add_joint(name=name, type=mujoco.mjtJoint.mjJNT_HINGE)
    for field_name, value in kept.items():
        setattr(joint, field_name, value)
