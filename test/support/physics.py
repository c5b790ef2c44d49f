"""Physics readings the model tests share."""

from __future__ import annotations

import mujoco
import numpy as np


def normal_force(model: mujoco.MjModel, data: mujoco.MjData, geom: str) -> float:
    """N: the normal force of every contact of geom ``geom`` together (``mj_contactForce``)."""
    gid, force, total = model.geom(geom).id, np.zeros(6), 0.0
    for i in range(data.ncon):
        if gid in (data.contact[i].geom1, data.contact[i].geom2):
            mujoco.mj_contactForce(model, data, i, force)
            total += force[0]
    return total
