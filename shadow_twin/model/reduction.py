"""The smallest model that gives the same compared joints (issue 39): which bodies can act on them, and the
model without the others.

A calibration compares a few joints (e.g. the first finger's J1-J4), yet every rollout of the whole model
steps every joint and every contact of the robot. :func:`plan_reduction` keeps the compared joints' bodies,
their subtrees and their ancestors, and looks at each other subtree hanging from them for a way to act on
the compared joints; :func:`reduced_spec` removes the subtrees that have none.

A subtree acts on the compared joints (a *coupling*; each is named in ``Reduction.couplings``) through

* **contact**: one of its geoms can touch a geom of a kept body that moves (MuJoCo's collision rules:
  ``contype``/``conaffinity``, explicit ``<pair>``, ``<exclude>``, bodies welded together, the parent filter;
  contacts with bodies welded to the world move nothing that is compared);
* **an equality constraint** or **a tendon** (with its actuators) between it and a kept body;
* **its load**: it hangs from a body that moves (a joint between the world and that body). Its weight and
  inertia are carried by those joints, so its motion moves them and, through them, the compared joints.
  Removing it changes what the compared joints do: the Shadow hand's wrist carries the other fingers (their
  load moves the wrist by 7 mrad when they are removed, the first finger's joints by 0.25 mrad).

Removing a subtree without a coupling is exact: the compared joints move as in the whole model (tested to
1e-9 in the objective). A load coupling is an approximation; ``allow_load`` removes such subtrees too, and
the caller measures what it changes (:mod:`shadow_twin.calibration.scoring.reduced`). Contact, equality and
tendon couplings always keep their subtree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import mujoco
import numpy as np

from shadow_twin.common.errors import ModelError

#: Kinds of coupling (the first word of each ``Reduction.couplings`` entry).
CONTACT, EQUALITY, TENDON, LOAD = 'contact', 'equality', 'tendon', 'load'


@dataclass(frozen=True)
class Reduction:
    """What :func:`plan_reduction` found.

    Attributes:
        compared: the compared joints (MJCF names).
        removed: root bodies of the subtrees to remove (MJCF names), model order.
        approximate: those among ``removed`` whose only coupling is their load (removed under ``allow_load``).
        couplings: {root body: [why it acts on the compared joints, one line each]} of every subtree not
            removed for a reason, and of the approximate ones.
        kept_dofs, total_dofs: degrees of freedom left and in the whole model.
    """

    compared: tuple[str, ...]
    removed: tuple[str, ...] = ()
    approximate: tuple[str, ...] = ()
    couplings: dict[str, list[str]] = field(default_factory=dict)
    kept_dofs: int = 0
    total_dofs: int = 0

    @property
    def exact(self) -> bool:
        """True when nothing removed acts on the compared joints (the reduced model gives the same motion)."""
        return not self.approximate

    def describe(self) -> str:
        """One line: what is removed and kept, and what couples."""
        if not self.removed:
            why = '; '.join(f'{root}: {reasons[0]}' for root, reasons in self.couplings.items()) or 'nothing else'
            return f'the whole model ({self.total_dofs} dofs): every other part acts on {", ".join(self.compared)} ({why})'
        text = (f'{self.kept_dofs} of {self.total_dofs} dofs: removed {", ".join(self.removed)} (their subtrees)')
        if self.approximate:
            text += (f'; approximate: {", ".join(self.approximate)} act through their load '
                     f'({self.couplings[self.approximate[0]][0]})')
        kept = [root for root in self.couplings if root not in self.approximate]
        if kept:
            text += f'; kept {", ".join(kept)} ({self.couplings[kept[0]][0]})'
        return text


def _ancestors(model: mujoco.MjModel, body: int) -> list[int]:
    out = []
    while body != 0:
        body = int(model.body_parentid[body])
        out.append(body)
    return out


def _subtree(model: mujoco.MjModel, root: int) -> set[int]:
    """Bodies of the subtree rooted at ``root`` (bodies are numbered depth first: a subtree is contiguous)."""
    out = {root}
    for b in range(root + 1, model.nbody):
        if int(model.body_parentid[b]) in out:
            out.add(b)
    return out


def _moving_joints(model: mujoco.MjModel, body: int) -> list[str]:
    """Names of the joints between the world and ``body`` (the body's own included)."""
    names = []
    for b in [body, *_ancestors(model, body)]:
        for j in range(model.body_jntadr[b], model.body_jntadr[b] + model.body_jntnum[b]):
            names.append(model.joint(j).name or f'joint {j}')
    return names[::-1]


def _can_collide(model: mujoco.MjModel, g1: int, g2: int, pairs: set[tuple[int, int]], excluded: set[int]) -> bool:
    """Whether MuJoCo may make a contact between geoms ``g1`` and ``g2`` (mj_collision's filters); ``pairs``: the
    explicit pairs' geoms (lower id first), ``excluded``: the ``<exclude>`` signatures."""
    if (min(g1, g2), max(g1, g2)) in pairs:
        return True
    if not ((model.geom_contype[g1] & model.geom_conaffinity[g2]) or (model.geom_contype[g2] & model.geom_conaffinity[g1])):
        return False
    b1, b2 = int(model.geom_bodyid[g1]), int(model.geom_bodyid[g2])
    w1, w2 = int(model.body_weldid[b1]), int(model.body_weldid[b2])
    if w1 == w2:
        return False
    if not model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_FILTERPARENT:
        p1, p2 = int(model.body_weldid[model.body_parentid[w1]]), int(model.body_weldid[model.body_parentid[w2]])
        if (p1 == w2 and w2 != 0) or (p2 == w1 and w1 != 0):
            return False
    signature = (min(b1, b2) << 16) + max(b1, b2)
    return signature not in excluded


def _equality_bodies(model: mujoco.MjModel, e: int) -> list[int]:
    """Bodies an equality constraint ties (its two objects' bodies; the world for a missing second one)."""
    kind, out = model.eq_type[e], []
    for obj in (model.eq_obj1id[e], model.eq_obj2id[e]):
        if obj < 0:
            out.append(0)
        elif kind == mujoco.mjtEq.mjEQ_JOINT:
            out.append(int(model.jnt_bodyid[obj]))
        elif kind == mujoco.mjtEq.mjEQ_TENDON:
            out.extend(_tendon_bodies(model, obj))
        elif model.eq_objtype[e] == mujoco.mjtObj.mjOBJ_SITE:
            out.append(int(model.site_bodyid[obj]))
        elif model.eq_objtype[e] == mujoco.mjtObj.mjOBJ_BODY:
            out.append(int(obj))
        else:                       # a flex, or what this module does not know: ties everything
            out.extend(range(model.nbody))
    return out


def _tendon_bodies(model: mujoco.MjModel, t: int) -> list[int]:
    """Bodies a tendon's path runs through (its joints', sites' and wrapping geoms' bodies)."""
    out = []
    for w in range(model.tendon_adr[t], model.tendon_adr[t] + model.tendon_num[t]):
        # ints: a numpy int is == to a MuJoCo enum, but never `in` a tuple of them
        kind, obj = int(model.wrap_type[w]), model.wrap_objid[w]
        if kind == int(mujoco.mjtWrap.mjWRAP_JOINT):
            out.append(int(model.jnt_bodyid[obj]))
        elif kind == int(mujoco.mjtWrap.mjWRAP_SITE):
            out.append(int(model.site_bodyid[obj]))
        elif kind in (int(mujoco.mjtWrap.mjWRAP_SPHERE), int(mujoco.mjtWrap.mjWRAP_CYLINDER)):
            out.append(int(model.geom_bodyid[obj]))
    return out


def plan_reduction(model: mujoco.MjModel, compared_joints: Sequence[str], allow_load: bool = False) -> Reduction:
    """Which subtrees of ``model`` can be removed without changing ``compared_joints`` (module doc).

    Args:
        model: the compiled model.
        compared_joints: MJCF joint names whose motion must be kept.
        allow_load: also remove subtrees whose only coupling is their load (an approximation).
    Returns:
        The :class:`Reduction`; nothing removed when every other subtree couples.
    Raises:
        ModelError: a compared joint the model does not have.
    """
    joints = []
    for name in compared_joints:
        j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if j < 0:
            raise ModelError(f'no joint {name!r} in the model to reduce it for')
        joints.append(j)
    compared = {int(model.jnt_bodyid[j]) for j in joints}
    kept = set().union(*(_subtree(model, b) for b in compared)) | {a for b in compared for a in _ancestors(model, b)}
    kept.add(0)
    roots = [b for b in range(1, model.nbody) if b not in kept and int(model.body_parentid[b]) in kept]
    moving_kept = {b for b in kept if model.body_weldid[b] != 0}
    pairs = {(min(int(a), int(b)), max(int(a), int(b))) for a, b in zip(model.pair_geom1, model.pair_geom2)}
    excluded = {int(s) for s in model.exclude_signature}
    contacts_on = not model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONTACT
    kept_geoms = [g for g in range(model.ngeom) if int(model.geom_bodyid[g]) in moving_kept]
    equalities = [(e, set(_equality_bodies(model, e))) for e in range(model.neq)]
    tendons = [(t, set(_tendon_bodies(model, t))) for t in range(model.ntendon)]
    removed, approximate, couplings = [], [], {}
    for root in roots:
        tree = _subtree(model, root)
        name = model.body(root).name or f'body {root}'
        reasons = []
        if contacts_on:
            geoms = [g for g in range(model.ngeom) if int(model.geom_bodyid[g]) in tree]
            touching = next(((g, h) for g in geoms for h in kept_geoms if _can_collide(model, g, h, pairs, excluded)), None)
            if touching is not None:
                g, h = touching
                reasons.append(f'{CONTACT}: geom {model.geom(g).name or g} can touch '
                               f'{model.geom(h).name or h} (contype/conaffinity)')
        for e, bodies in equalities:
            if bodies & tree and bodies - tree:
                reasons.append(f'{EQUALITY}: constraint {model.equality(e).name or e} ties it to the kept bodies')
        for t, bodies in tendons:
            if bodies & tree and bodies - tree:
                reasons.append(f'{TENDON}: tendon {model.tendon(t).name or t} spans it and the kept bodies')
        parent = int(model.body_parentid[root])
        if model.body_weldid[parent] != 0:
            reasons.append(f'{LOAD}: it hangs from {model.body(parent).name}, which moves with '
                           f'{", ".join(_moving_joints(model, parent))}')
        named = bool(model.body(root).name)
        if not reasons and named:
            removed.append(name)
            continue
        if not named:
            reasons.append('unnamed: a body without a name cannot be removed from the MJCF')
        couplings[name] = reasons
        if allow_load and named and all(r.startswith(LOAD) for r in reasons):
            removed.append(name)
            approximate.append(name)
    removed_bodies = set().union(*(_subtree(model, mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n))
                                   for n in removed)) if removed else set()
    dofs = int(np.sum([model.body_dofnum[b] for b in range(model.nbody) if b not in removed_bodies]))
    return Reduction(tuple(compared_joints), tuple(removed), tuple(approximate), couplings, dofs, int(model.nv))


def reduced_spec(spec: mujoco.MjSpec, reduction: Reduction) -> mujoco.MjSpec:
    """A copy of ``spec`` without the subtrees ``reduction`` removes (MjSpec deletes their joints'
    actuators and tendons with them) and without keyframes (their sizes are the whole model's).

    Raises:
        ModelError: a removed body the spec does not have.
    """
    out = spec.copy()
    for name in reduction.removed:
        body = out.body(name)
        if body is None:
            raise ModelError(f'no body {name!r} in the model to remove')
        out.delete(body)
    for key in list(out.keys):
        out.delete(key)
    return out


def subtree_joints(model: mujoco.MjModel, body: str) -> list[str]:
    """Names of the joints of ``body`` and every body below it, model order. Raises ModelError for an
    unknown body."""
    root = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
    if root < 0:
        raise ModelError(f'no body {body!r} in the model')
    tree = _subtree(model, root)
    return [model.joint(j).name for j in range(model.njnt) if int(model.jnt_bodyid[j]) in tree]


def _pose_at(model: mujoco.MjModel, body: int, positions: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """(pos, quat) of ``body`` in its parent's frame with its hinge and slide joints at ``positions`` (rad, m;
    absent ones at their reference), as ``mj_kinematics`` moves a body: a hinge turns it about its axis through
    its anchor by (q - ref), a slide shifts it along its axis."""
    pos, quat = model.body_pos[body].copy(), model.body_quat[body].copy()
    for j in range(model.body_jntadr[body], model.body_jntadr[body] + model.body_jntnum[body]):
        name, kind = model.joint(j).name, int(model.jnt_type[j])
        if name not in positions:
            continue
        if kind not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            raise ModelError(f'joint {name}: only hinge and slide joints are frozen at a position')
        q = float(positions[name]) - float(model.qpos0[model.jnt_qposadr[j]])
        axis, anchor_local = model.jnt_axis[j], model.jnt_pos[j]
        if kind == int(mujoco.mjtJoint.mjJNT_SLIDE):
            shift = np.empty(3)
            mujoco.mju_rotVecQuat(shift, axis * q, quat)
            pos = pos + shift
            continue
        anchor = np.empty(3)
        mujoco.mju_rotVecQuat(anchor, anchor_local, quat)
        anchor += pos
        turn, turned = np.empty(4), np.empty(4)
        mujoco.mju_axisAngle2Quat(turn, axis, q)
        mujoco.mju_mulQuat(turned, quat, turn)
        quat = turned
        offset = np.empty(3)
        mujoco.mju_rotVecQuat(offset, anchor_local, quat)
        pos = anchor - offset
    return pos, quat


def frozen_spec(spec: mujoco.MjSpec, joints: Sequence[str], positions: Mapping[str, float] | None = None,
                model: mujoco.MjModel | None = None) -> mujoco.MjSpec:
    """A copy of ``spec`` with ``joints`` welded at ``positions`` (rad, m; by joint; absent ones, or all
    without ``positions``, where the MJCF places them: their reference), ``model`` being ``spec`` compiled
    (needed with ``positions``): the bodies,
    their masses and inertias and their geoms stay, the joints, the actuators on them and the tendons through
    them go (and the keyframes: their sizes are the whole model's). A frozen part still loads its parents
    (issue 39: "the arm runs on the arm and the hand's load"); where it would have moved, freezing it is an
    approximation that the caller measures.

    Raises:
        ModelError: a joint the spec does not have, or one an equality constraint ties (it would tie nothing).
    """
    out = spec.copy()
    names = set(joints)
    if positions:
        if model is None:
            raise ValueError('frozen_spec: positions need the compiled model')
        moved = {int(model.jnt_bodyid[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j)])
                 for j in positions if j in names and mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j) >= 0}
        for body in sorted(moved):
            pos, quat = _pose_at(model, body, {j: q for j, q in positions.items() if j in names})
            target = out.body(model.body(body).name)
            if target is None:
                raise ModelError(f'body {body} has no name: its joints cannot be frozen at a position')
            target.pos, target.quat = pos, quat
            target.alt.type = mujoco.mjtOrientation.mjORIENTATION_QUAT
    found = {j.name for j in out.joints if j.name in names}
    if found != names:
        raise ModelError(f'no joint(s) {sorted(names - found)} in the model to freeze')
    tied = [e.name or 'an equality' for e in out.equalities if {e.name1, e.name2} & names]
    if tied:
        raise ModelError(f'cannot freeze joints an equality constraint ties ({", ".join(tied)})')
    tendons = {t.name for t in out.tendons               # a tendon through a frozen joint goes with it
               if any(w.type == mujoco.mjtWrap.mjWRAP_JOINT and w.target.name in names for w in t.path)}
    for actuator in list(out.actuators):
        if actuator.target in names or actuator.target in tendons:
            out.delete(actuator)
    for tendon in [t for t in out.tendons if t.name in tendons]:
        out.delete(tendon)
    for joint in [j for j in out.joints if j.name in names]:
        out.delete(joint)
    for key in list(out.keys):
        out.delete(key)
    return out
