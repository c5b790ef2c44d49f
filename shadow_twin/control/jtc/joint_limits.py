"""Joint limits for the goal checks of :mod:`shadow_twin.control.jtc`: :class:`JointLimits` (a joint's
position range and largest speed) and :func:`joint_limits_from_model` (those of an MJCF model, speeds
from the URDF). The twin's position and velocity limit rules (:mod:`.goal_validation`) check goals
against them.

Part of :mod:`shadow_twin.control.jtc` (ROS-free).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import mujoco

from shadow_twin.common.errors import ConfigError, ModelError

#: Slack on position/velocity limit comparisons (rad, rad/s), for float round-off.
LIMIT_SLACK = 1e-9


@dataclass
class JointLimits:
    """Limits of one joint; None = unlimited.

    Attributes:
        lower, upper: position range, rad (m for prismatic joints).
        max_velocity: largest |velocity|, rad/s (m/s), > 0.
    Raises:
        ConfigError: NaN, lower > upper, or max_velocity <= 0.
    """

    lower: float | None = None
    upper: float | None = None
    max_velocity: float | None = None

    def __post_init__(self) -> None:
        for name in ('lower', 'upper', 'max_velocity'):
            value = getattr(self, name)
            if value is None:
                continue
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise ConfigError(f'joint limit {name} must be a number, got {value!r}') from None
            if math.isnan(value):
                raise ConfigError(f'joint limit {name} is NaN')
            setattr(self, name, value)
        if self.lower is not None and self.upper is not None and self.lower > self.upper:
            raise ConfigError(f'joint limits: lower {self.lower} is above upper {self.upper}')
        if self.max_velocity is not None and not self.max_velocity > 0:
            raise ConfigError(f'joint limits: max_velocity must be > 0, got {self.max_velocity}')


def joint_limits_from_model(model, joint_names: Sequence[str] | None = None,
                            velocity_limits: Mapping[str, float] | None = None, *,
                            joint_map=None) -> dict[str, JointLimits]:
    """Joint limits of an MJCF model.

    Args:
        model: compiled ``mujoco.MjModel``.
        joint_names: MJCF joint names; None = every hinge and slide joint.
        velocity_limits: {joint name: rad/s (m/s)}, keyed by ROS or MJCF name
            (MuJoCo has no joint velocity limit; take them from the URDF).
        joint_map: optional ``JointNameMap`` to key the result by ROS names
            (default: the MJCF names).
    Returns:
        {name: JointLimits}: limited joints get ``jnt_range``, unlimited ones
        lower = upper = None; max_velocity from ``velocity_limits`` or None.
    Raises:
        ModelError: unknown joint, or a free/ball joint (no scalar limits).
        ConfigError: a velocity limit for a joint not listed, or not > 0.
    """
    scalar_types = {int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)}
    if joint_names is None:
        joint_names = [model.joint(j).name for j in range(model.njnt) if int(model.jnt_type[j]) in scalar_types]
    velocity_limits = dict(velocity_limits or {})
    used: set[str] = set()
    out: dict[str, JointLimits] = {}
    for mjcf in joint_names:
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, mjcf)
        if jid < 0:
            raise ModelError(f'model has no joint {mjcf!r}')
        if int(model.jnt_type[jid]) not in scalar_types:
            raise ModelError(f'joint {mjcf!r} is a free or ball joint; only hinge and slide joints have limits')
        key = joint_map.to_ros(mjcf) if joint_map is not None else mjcf
        lower = upper = None
        if model.jnt_limited[jid]:
            lower, upper = (float(x) for x in model.jnt_range[jid])
        vmax = None
        for candidate in (key, mjcf):
            if candidate in velocity_limits:
                vmax = velocity_limits[candidate]
                used.update({key, mjcf} & set(velocity_limits))
                break
        try:
            out[key] = JointLimits(lower, upper, vmax)
        except ConfigError as exc:
            raise ConfigError(f'joint {key!r}: {exc}') from None
    unused = sorted(set(velocity_limits) - used)
    if unused:
        raise ConfigError(f'velocity limits given for joint(s) {unused} that are not among {list(joint_names)}')
    return out
