"""Contacts of a predicted run: the robot against itself and against the scene (ROS-free).

The live model lets few geoms collide (``contype``/``conaffinity``: the arm's and the hand's
only with the floor, the cabinet with nothing), so that the sim's dynamics stay as calibrated.
:class:`ContactChecker` works on a *copy* of the preview model in which every collision geom
(one with a non-zero ``contype`` or ``conaffinity`` in the model) collides with every other, and
runs MuJoCo's collision detection (``mj_kinematics`` + ``mj_collision``) on predicted states: the
dynamics of the prediction (and of the live sim) are unchanged. Allowed:

* pairs of bodies MuJoCo never checks (a body and its parent, geoms of one body);
* geom pairs already in contact in the model's reference pose ``qpos0`` (neighbouring links
  that overlap by construction, the base on its wheels);
* the configured body-glob pairs (:attr:`PreviewConfig.allowed_contacts`);
* a free scene object and anything but the robot's moving links outside the hand (a body that a hinge
  or slide joint moves, not below the hand's root, ``rh_forearm``): a grasp touches what it holds (whether the object
  stays held is the grasp check's, :mod:`shadow_twin.simulation.preview.grasp`), and an object set
  down touches the table, the tote or another object; the arm, a wheel or a caster striking one is a
  contact failure.

A contact counts when its penetration is deeper than ``contact_min_depth``.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass

import mujoco
import numpy as np

from shadow_twin.simulation.preview.config import PreviewConfig
from shadow_twin.simulation.preview.grasp import free_objects, hand_bodies


def robot_links_and_free_objects(model: mujoco.MjModel) -> tuple[set[int], set[int]]:
    """(the robot's moving links outside the hand: body ids that a hinge or slide joint on their chain to
    the world moves, none of :func:`~shadow_twin.simulation.preview.grasp.hand_bodies`; body ids of the free
    scene objects) of ``model``."""
    scalar = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    jointed = {int(model.jnt_bodyid[j]) for j in range(model.njnt) if int(model.jnt_type[j]) in scalar}
    links = set()
    for body in range(1, model.nbody):
        b = body
        while b > 0 and b not in jointed:
            b = int(model.body_parentid[b])
        if b > 0:
            links.add(body)
    return links - hand_bodies(model), set(free_objects(model).values())


@dataclass(frozen=True)
class ContactHit:
    """The first disallowed contact: ``body1``/``body2`` (body names), ``geom1``/``geom2`` (geom
    names or ``geom <id>``), ``time`` s from the start, ``depth`` m of penetration (> 0)."""

    body1: str
    body2: str
    geom1: str
    geom2: str
    time: float
    depth: float

    @property
    def pair(self) -> str:
        """``body1/body2``."""
        return f'{self.body1}/{self.body2}'


def _name(model: mujoco.MjModel, kind: mujoco.mjtObj, index: int) -> str:
    return mujoco.mj_id2name(model, kind, index) or f'{kind.name[6:].lower()} {index}'


class ContactChecker:
    """Finds the first disallowed contact in predicted states (module doc).

    Args:
        model: the preview model (compiled; not modified).
        config: ``allowed_contacts``, ``contact_min_depth``, ``contact_period``.
    """

    def __init__(self, model: mujoco.MjModel, config: PreviewConfig) -> None:
        self.config = config
        self.model = copy.copy(model)
        collides = (model.geom_contype != 0) | (model.geom_conaffinity != 0)
        self.model.geom_contype[:] = np.where(collides, 1, 0)
        self.model.geom_conaffinity[:] = np.where(collides, 1, 0)
        if hasattr(self.model, 'body_contype'):      # the broadphase's per-body filter (MuJoCo >= 3.2)
            bodies = np.unique(model.geom_bodyid[collides])
            self.model.body_contype[:] = 0
            self.model.body_conaffinity[:] = 0
            self.model.body_contype[bodies] = 1
            self.model.body_conaffinity[bodies] = 1
        self.model.geom_margin[:] = 0.0
        self.model.geom_gap[:] = 0.0
        self._scratch = threading.local()         # each thread its own MjData (the watch and requests)
        self._links, self._free = robot_links_and_free_objects(model)
        data = mujoco.MjData(self.model)
        self._allowed: dict[tuple[int, int], bool] = {}
        mujoco.mj_kinematics(self.model, data)
        mujoco.mj_collision(self.model, data)
        for k in range(data.ncon):
            g1, g2 = int(data.contact.geom1[k]), int(data.contact.geom2[k])
            self._allowed[(min(g1, g2), max(g1, g2))] = True
        #: Geom pairs touching in ``qpos0`` (allowed).
        self.touching_at_rest = len(self._allowed)

    def allowed(self, g1: int, g2: int) -> bool:
        """True if geoms ``g1`` and ``g2`` may touch (module doc)."""
        key = (min(g1, g2), max(g1, g2))
        hit = self._allowed.get(key)
        if hit is None:
            i1, i2 = (int(self.model.geom_bodyid[g]) for g in key)
            b1, b2 = (_name(self.model, mujoco.mjtObj.mjOBJ_BODY, i) for i in (i1, i2))
            touched = (i1 in self._free and i2 not in self._links) or (i2 in self._free and i1 not in self._links)
            hit = self._allowed[key] = touched or self.config.contact_allowed(b1, b2)
        return hit

    def first_hit(self, times: np.ndarray, qpos: np.ndarray) -> ContactHit | None:
        """The first disallowed contact in the states ``qpos`` ((N, nq)) at ``times`` ((N,) s),
        checked every ``contact_period`` s (and the last state); None when there is none."""
        if len(times) == 0:
            return None
        dt = float(times[1] - times[0]) if len(times) > 1 else 1.0
        stride = max(1, int(round(self.config.contact_period / dt)))
        rows = list(range(stride - 1, len(times), stride))
        if rows[-1] != len(times) - 1:
            rows.append(len(times) - 1)
        data = getattr(self._scratch, 'data', None)
        if data is None:
            data = self._scratch.data = mujoco.MjData(self.model)
        model, depth = self.model, self.config.contact_min_depth
        for n in rows:
            data.qpos[:] = qpos[n]
            mujoco.mj_kinematics(model, data)
            mujoco.mj_collision(model, data)
            worst = None
            # only the deep contacts are looked at one by one (the fingers touch each other often:
            # a loop over every contact held the interpreter lock long enough to delay the node)
            for k in np.flatnonzero(data.contact.dist[:data.ncon] < -depth):
                dist = float(data.contact.dist[k])
                g1, g2 = int(data.contact.geom1[k]), int(data.contact.geom2[k])
                if self.allowed(g1, g2):
                    continue
                if worst is None or dist < worst[0]:
                    worst = (dist, g1, g2)
            if worst is not None:
                dist, g1, g2 = worst
                body = [_name(model, mujoco.mjtObj.mjOBJ_BODY, int(model.geom_bodyid[g])) for g in (g1, g2)]
                return ContactHit(body[0], body[1], _name(model, mujoco.mjtObj.mjOBJ_GEOM, g1),
                                  _name(model, mujoco.mjtObj.mjOBJ_GEOM, g2), float(times[n]), -dist)
        return None
