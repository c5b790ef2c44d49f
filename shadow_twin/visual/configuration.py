"""A robot's configuration put into a model for its kinematics: the joint angles of joint states (by ROS
name, through the joint map) and the mobile base's planar pose from odometry. The monitor draws the real
robots through the sim's model with it; the video draws a recording's real motion.

Units: rad, m.
"""

from __future__ import annotations

from typing import Mapping

import mujoco
import numpy as np

from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.simulation.mobile_base import SimMobileBase

#: The joint types set by angle (hinge) or travel (slide).
_SCALAR = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))


class RobotConfiguration:
    """Sets joint states and a base pose into a :class:`mujoco.MjData` of ``model`` and runs its kinematics.

    Args:
        model: the model (the sim's).
        joint_map: ROS -> MJCF joint names (None: identity).
    Raises:
        ModelError: a base whose wheels are not drivable (``SimMobileBase.find``).
    """

    def __init__(self, model: mujoco.MjModel, joint_map: JointNameMap | None = None) -> None:
        self.model = model
        joint_map = joint_map or JointNameMap()
        self.addresses = {joint_map.to_ros(model.joint(j).name): int(model.jnt_qposadr[j])
                          for j in range(model.njnt) if int(model.jnt_type[j]) in _SCALAR and model.joint(j).name}
        self.base = SimMobileBase.find(model)

    def apply(self, data: mujoco.MjData, positions: Mapping[str, float],
              base: tuple[float, float, float] | None = None) -> list[str]:
        """Put ``positions`` ({ROS joint name: rad or m}; non-finite ones skipped) and ``base`` ((x m, y m,
        yaw rad) in the world; None: left as is) into ``data`` and run ``mj_kinematics``; returns the names
        ``model`` lacks (ignored)."""
        unknown = []
        for name, value in positions.items():
            address = self.addresses.get(name)
            if address is None:
                unknown.append(name)
            elif np.isfinite(value):
                data.qpos[address] = float(value)
        if base is not None and self.base is not None and all(np.isfinite(base)):
            self.base.place(data, *base)
        mujoco.mj_kinematics(self.model, data)
        return unknown


def link_errors(sim: mujoco.MjData, real: mujoco.MjData, bodies: np.ndarray | None = None) -> np.ndarray:
    """(B,) m: how far each body of ``bodies`` (ids; None: every body but the world) stands in ``sim`` from
    where it stands in ``real``: the distance between its two centres of mass (``xipos``, world frame; both
    after kinematics of one model). The centre of mass, not the body's origin: the origin sits on the body's
    own joint, which would leave a link's own angle out of its error (a distal phalanx turned about J1 keeps
    its origin); a massless body's centre is its origin."""
    ids = np.arange(1, sim.xipos.shape[0]) if bodies is None else np.asarray(bodies, dtype=int)
    return np.linalg.norm(sim.xipos[ids] - real.xipos[ids], axis=1)
