"""The effort model, linear in its parameters, along a measured motion.

Per joint j and sample (Khalil & Dombre, *Modeling, Identification and Control of Robots*, 2002,
ch. 12; Swevers et al., IEEE TRA 1997; the payload as in Atkeson, An & Hollerbach, *Estimation of
inertial parameters of manipulator loads and links*, IJRR 5(3), 1986)::

    k_j e_j = tau_links_j(q, qd, qdd) + Y_j(q, qd, qdd) pi + Ia_j qdd_j + b_j qd_j + fc_j s_j + k_j o_j

* ``e_j``: the measured effort (A or N m); ``k_j`` the drive gain (N m/A; 1 for N m) and
  ``o_j`` the offset (in the effort's unit);
* ``tau_links``: MuJoCo's inverse dynamics (``mj_inverse``) of the model without the joints'
  armature, damping and frictionloss (:class:`~shadow_twin.simulation.effort.InverseDynamics`);
* ``Y pi``: the torque of a payload rigidly fixed to the flange frame (the ``tool0`` site, else
  the ``wrist_3_link`` body), linear in its 10 standard inertial parameters
  ``pi = (m, m c_x, m c_y, m c_z, I_xx, I_xy, I_xz, I_yy, I_yz, I_zz)`` (c: centre of mass, I:
  inertia about the frame's origin, both in the flange frame). With the frame's angular velocity
  w, angular acceleration a_w and linear acceleration of its origin minus gravity a (all in the
  frame, from ``mj_objectVelocity`` / ``mj_objectAcceleration``), the Newton-Euler wrench at the
  origin is ``f = m a + a_w x h + w x (w x h)``, ``n = I a_w + w x (I w) + h x a`` (h = m c), and
  the joint torques are ``J_p^T R f + J_r^T R n`` (``mj_jacSite``);
* ``Ia, b, fc``: MJCF ``armature`` (kg m^2), ``damping`` (N m s/rad), ``frictionloss`` (N m);
  ``s`` the friction's presliding state along the motion
  (:func:`~shadow_twin.simulation.friction.presliding_states`), for each of K candidate presliding
  distances.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import mujoco
import numpy as np

from shadow_twin.common.errors import ModelError
from shadow_twin.common.interpolation import shifted
from shadow_twin.simulation.effort import InverseDynamics
from shadow_twin.simulation.friction import PRESLIDING_DISTANCES, presliding_states

#: Names of the payload's 10 inertial parameters (flange frame; kg, kg m, kg m^2).
PAYLOAD_PARAMETERS = ('mass', 'mx', 'my', 'mz', 'ixx', 'ixy', 'ixz', 'iyy', 'iyz', 'izz')
#: The flange frame the payload is fixed to: the first of these present in the model.
FLANGE_SITES = ('tool0', 'flange')
FLANGE_BODIES = ('wrist_3_link',)


@dataclass
class Regressors:
    """The model's known part and its regressors along N samples of J joints.

    Attributes:
        tau_links: (N, J) N m, rigid-body torques of the model's links (no payload).
        payload: (N, J, 10) N m per payload parameter (:data:`PAYLOAD_PARAMETERS`).
        qd, qdd: (N, J) rad/s, rad/s^2 (the columns of damping and armature).
        sign: (N, J, K) the friction's presliding state for each of the K ``distances`` (the
            column of frictionloss; each contiguous motion starts from 0, unknown).
        distances: (K,) rad, the presliding distance of each column of ``sign``.
        links: (N, J, 10 B) N m per inertial parameter of each of the B moving bodies of the arm
            (:attr:`EffortRegressor.link_bodies`, each body's :data:`PAYLOAD_PARAMETERS` in its
            own frame, about its origin), or None (not asked for).
        t: (N,) s, the samples' stamps, or None (unknown: no delay can be applied).
        block: (N,) int, the contiguous motion each sample belongs to (stamps increase within one).
    """

    tau_links: np.ndarray
    payload: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    sign: np.ndarray
    distances: np.ndarray
    links: np.ndarray | None = None
    t: np.ndarray | None = None
    block: np.ndarray | None = None

    #: The fields of one value per sample and joint (and column), in the constructor's order.
    COLUMNS = ('tau_links', 'payload', 'qd', 'qdd', 'sign')

    def take(self, index) -> Regressors:
        """The samples ``index`` (a slice or index array)."""
        def part(a):
            return None if a is None else a[index]
        return Regressors(*(getattr(self, f)[index] for f in self.COLUMNS), self.distances, part(self.links),
                          part(self.t), part(self.block))

    def late(self, delay) -> Regressors:
        """The regressors as the drive measures them ``delay`` s late (a scalar or (J,) s): each
        joint's columns read ``delay`` earlier within its contiguous motion (linear interpolation
        between samples, held at the motion's first; the effort model is linear in them, so this is
        its prediction read ``delay`` earlier).

        Raises:
            ValueError: a delay other than 0 without the samples' stamps.
        """
        delay = np.broadcast_to(np.asarray(delay, dtype=float), (self.qd.shape[1],))
        if not delay.any():
            return self
        if self.t is None or self.block is None:
            raise ValueError('an effort delay needs the samples\' stamps (Regressors.t)')
        fields = [getattr(self, f) for f in self.COLUMNS] + ([] if self.links is None else [self.links])
        out = [np.empty_like(a) for a in fields]
        for b in np.unique(self.block):
            rows = np.flatnonzero(self.block == b)
            for a, o in zip(fields, out):
                o[rows] = shifted(self.t[rows], a[rows], -delay)
        return Regressors(*out[:5], self.distances, out[5] if self.links is not None else None, self.t, self.block)

    def friction(self, choice: np.ndarray | None = None) -> np.ndarray:
        """(N, J) the presliding states of ``choice``: (J,) indices into :attr:`distances`, one
        per joint; None: the first distance for every joint."""
        if choice is None:
            return self.sign[:, :, 0]
        return self.sign[:, np.arange(self.sign.shape[1]), np.asarray(choice, dtype=int)]

    def index_of(self, distance: float) -> int:
        """The index of ``distance`` (rad) in :attr:`distances`.

        Raises:
            ValueError: not among them.
        """
        hit = np.flatnonzero(np.isclose(self.distances, distance, rtol=1e-9, atol=0.0))
        if not hit.size:
            raise ValueError(f'presliding distance {distance:g} rad was not evaluated')
        return int(hit[0])

    @staticmethod
    def per_joint(parts: Sequence[Regressors]) -> Regressors:
        """Joint j's columns from ``parts[j]`` (J regressors of the same samples, e.g. each read
        with another delay); the links' columns are left out."""
        if all(p is parts[0] for p in parts):
            return parts[0]
        j = np.arange(len(parts))
        fields = [np.stack([getattr(p, f)[:, k] for k, p in zip(j, parts)], axis=1) for f in Regressors.COLUMNS]
        return Regressors(*fields, parts[0].distances, None, parts[0].t, parts[0].block)

    @staticmethod
    def concatenate(parts: Sequence[Regressors]) -> Regressors:
        """Samples of several recordings one after another (the same :attr:`distances`; each part's
        motions stay apart in :attr:`block`)."""
        def joined(name):
            return None if any(getattr(p, name) is None for p in parts) else np.concatenate([getattr(p, name)
                                                                                             for p in parts])
        t, block = joined('t'), None
        if t is not None and all(p.block is not None for p in parts):
            offsets = np.cumsum([0] + [int(p.block.max()) + 1 if p.block.size else 0 for p in parts[:-1]])
            block = np.concatenate([p.block + o for p, o in zip(parts, offsets)])
        return Regressors(*(np.concatenate([getattr(p, f) for p in parts]) for f in Regressors.COLUMNS),
                          parts[0].distances, joined('links'), t if block is not None else None, block)


def point_mass_inertia(mass: float, h: np.ndarray, inertia_com: np.ndarray | None = None) -> np.ndarray:
    """(6,) (I_xx, I_xy, I_xz, I_yy, I_yz, I_zz) about the frame's origin of a body of ``mass`` (kg)
    with first moment ``h = m c`` (kg m) and (3, 3) inertia about its centre of mass (default 0):
    I_o = I_c + (|h|^2 1 - h h^T) / m (parallel axis theorem)."""
    h = np.asarray(h, dtype=float)
    inertia = np.zeros((3, 3)) if inertia_com is None else np.asarray(inertia_com, dtype=float)
    if mass > 0:
        inertia = inertia + (h @ h * np.eye(3) - np.outer(h, h)) / mass
    return inertia[[0, 0, 0, 1, 1, 2], [0, 1, 2, 1, 2, 2]]


class EffortRegressor:
    """Evaluates :class:`Regressors` of a model's joints along motions.

    Args:
        model: compiled MJCF (copied).
        joints: J hinge joints (the arm's), the columns of every array.
        presliding_distances: (K,) rad, the candidate presliding distances of the friction state
            (default :data:`~shadow_twin.simulation.friction.PRESLIDING_DISTANCES`).
    Raises:
        ModelError: a joint missing, or no flange frame (:data:`FLANGE_SITES`, :data:`FLANGE_BODIES`).
    """

    def __init__(self, model: mujoco.MjModel, joints: Sequence[str],
                 presliding_distances: Sequence[float] = PRESLIDING_DISTANCES) -> None:
        self.dynamics = InverseDynamics(model, joints)     # no contact or joint-limit forces
        self.joints = list(joints)
        self.distances = np.asarray(presliding_distances, dtype=float).reshape(-1)
        m = self.dynamics.model
        self.frame = None
        for name in FLANGE_SITES:
            sid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, name)
            if sid >= 0:
                self.frame = ('site', name, sid)
                break
        else:
            for name in FLANGE_BODIES:
                bid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)
                if bid >= 0:
                    self.frame = ('body', name, bid)
                    break
        if self.frame is None:
            raise ModelError(f'no flange frame for the payload: neither site {"/".join(FLANGE_SITES)} '
                             f'nor body {"/".join(FLANGE_BODIES)} in the model')
        #: The arm's moving bodies (those of the joints), base to tool: the links of ``links=True``.
        self.link_bodies = [m.body(int(m.jnt_bodyid[m.joint(j).id])).name for j in self.joints]

    def link_parameters(self) -> np.ndarray:
        """(10 B,) the model's inertial parameters of :attr:`link_bodies` (each body's frame,
        about its origin; :data:`PAYLOAD_PARAMETERS`)."""
        m = self.dynamics.model
        out = []
        for name in self.link_bodies:
            b = m.body(name).id
            mass, com = float(m.body_mass[b]), m.body_ipos[b].copy()
            rot = np.zeros(9)
            mujoco.mju_quat2Mat(rot, m.body_iquat[b])
            rot = rot.reshape(3, 3)
            inertia_com = rot @ np.diag(m.body_inertia[b]) @ rot.T
            out.append(np.concatenate([[mass], mass * com, point_mass_inertia(mass, mass * com, inertia_com)]))
        return np.concatenate(out)

    def evaluate(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, links: bool = False,
                 path: np.ndarray | None = None, times: np.ndarray | None = None) -> Regressors:
        """Regressors for (N, J) positions (rad), velocities (rad/s), accelerations (rad/s^2) of
        one contiguous motion. The friction states run along ``path`` ((M >= N, J) measured
        positions, rad, whose last N rows are these samples: the motion since the recording's
        start) from 0 at its first row; ``path`` None: along ``q`` from its first sample.
        ``times``: (N,) s, the samples' stamps (needed for :meth:`Regressors.late`).
        ``links``: also the columns of the links' inertial parameters (:attr:`Regressors.links`)."""
        q, qd, qdd = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (q, qd, qdd))
        m, d = self.dynamics.model, self.dynamics.data
        n, nj = q.shape
        kind, _, oid = self.frame
        objtype = mujoco.mjtObj.mjOBJ_SITE if kind == 'site' else mujoco.mjtObj.mjOBJ_XBODY
        qadr, dadr = self.dynamics.qpos_adr, self.dynamics.dof_adr
        tau = np.empty((n, nj))
        motion = np.empty((n, 3, 3))            # rows: w, a_w, a (frame coordinates)
        jac = np.empty((n, 2, 3, nj))           # J_p, J_r in frame coordinates
        jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
        vel, acc = np.zeros(6), np.zeros(6)
        bodies = [m.body(name).id for name in self.link_bodies] if links else []
        link_motion = np.empty((len(bodies), n, 3, 3))
        link_jac = np.empty((len(bodies), n, 2, 3, nj))
        d.qpos[:] = m.qpos0
        d.qvel[:] = 0.0
        d.qacc[:] = 0.0
        for k in range(n):
            d.qpos[qadr] = q[k]
            d.qvel[dadr] = qd[k]
            d.qacc[dadr] = qdd[k]
            mujoco.mj_inverse(m, d)
            tau[k] = d.qfrc_inverse[dadr]
            mujoco.mj_rnePostConstraint(m, d)
            mujoco.mj_objectVelocity(m, d, objtype, oid, vel, 1)
            mujoco.mj_objectAcceleration(m, d, objtype, oid, acc, 1)
            if kind == 'site':
                mujoco.mj_jacSite(m, d, jacp, jacr, oid)
                rot = d.site_xmat[oid].reshape(3, 3)
            else:
                mujoco.mj_jacBody(m, d, jacp, jacr, oid)
                rot = d.xmat[oid].reshape(3, 3)
            motion[k, 0], motion[k, 1], motion[k, 2] = vel[:3], acc[:3], acc[3:]
            jac[k, 0] = rot.T @ jacp[:, dadr]
            jac[k, 1] = rot.T @ jacr[:, dadr]
            for i, b in enumerate(bodies):
                mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_XBODY, b, vel, 1)
                mujoco.mj_objectAcceleration(m, d, mujoco.mjtObj.mjOBJ_XBODY, b, acc, 1)
                mujoco.mj_jacBody(m, d, jacp, jacr, b)
                rot = d.xmat[b].reshape(3, 3)
                link_motion[i, k, 0], link_motion[i, k, 1], link_motion[i, k, 2] = vel[:3], acc[:3], acc[3:]
                link_jac[i, k, 0] = rot.T @ jacp[:, dadr]
                link_jac[i, k, 1] = rot.T @ jacr[:, dadr]
        payload = payload_columns(motion, jac)
        link_columns = (np.concatenate([payload_columns(link_motion[i], link_jac[i]) for i in range(len(bodies))],
                                       axis=2) if links else None)
        t = None if times is None else np.asarray(times, dtype=float).reshape(n)
        return Regressors(tau, payload, qd, qdd, self._friction(q if path is None else path, n),
                          self.distances.copy(), link_columns, t, None if t is None else np.zeros(n, dtype=int))

    def _friction(self, path: np.ndarray, n: int) -> np.ndarray:
        """(n, J, K) presliding states of :attr:`distances` for the last n rows of ``path``."""
        path = np.atleast_2d(np.asarray(path, dtype=float))
        states = presliding_states(path, np.broadcast_to(self.distances, (path.shape[1], self.distances.size)))
        return states[path.shape[0] - n:]


def payload_columns(motion: np.ndarray, jac: np.ndarray) -> np.ndarray:
    """(N, J, 10) joint torques per payload parameter from (N, 3, 3) frame motions (w, a_w, a)
    and (N, 2, 3, J) frame Jacobians (J_p, J_r), all in frame coordinates."""
    w, aw, a = motion[:, 0], motion[:, 1], motion[:, 2]
    n = motion.shape[0]
    eye = np.eye(3)
    force = np.zeros((n, 10, 3))
    moment = np.zeros((n, 10, 3))
    force[:, 0] = a                                                   # mass
    for i in range(3):                                                # first moments h = m c
        e = np.broadcast_to(eye[i], (n, 3))
        force[:, 1 + i] = np.cross(aw, e) + np.cross(w, np.cross(w, e))
        moment[:, 1 + i] = np.cross(e, a)
    pairs = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))          # inertia about the origin
    for p, (r, c) in enumerate(pairs):
        basis = np.zeros((3, 3))
        basis[r, c] = basis[c, r] = 1.0
        moment[:, 4 + p] = aw @ basis.T + np.cross(w, w @ basis.T)
    return np.einsum('nxj,npx->njp', jac[:, 0], force) + np.einsum('nxj,npx->njp', jac[:, 1], moment)
