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
  (:func:`~shadow_twin.simulation.friction.presliding_states`), for each of C candidate
  (presliding distance, effort delay) pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import mujoco
import numpy as np

from shadow_twin.common.errors import ModelError
from shadow_twin.simulation.effort import InverseDynamics
from shadow_twin.simulation.friction import (EFFORT_DELAYS, PRESLIDING_DISTANCES, delayed_positions,
                                             presliding_states)

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
        sign: (N, J, C) the friction's presliding state for each of the C ``candidates`` (the
            column of frictionloss; each contiguous motion starts from 0, unknown).
        candidates: (C, 2) the (presliding distance rad, effort delay s) of each column of ``sign``.
        links: (N, J, 10 B) N m per inertial parameter of each of the B moving bodies of the arm
            (:attr:`EffortRegressor.link_bodies`, each body's :data:`PAYLOAD_PARAMETERS` in its
            own frame, about its origin), or None (not asked for).
    """

    tau_links: np.ndarray
    payload: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    sign: np.ndarray
    candidates: np.ndarray
    links: np.ndarray | None = None

    def take(self, index) -> Regressors:
        """The samples ``index`` (a slice or index array)."""
        return Regressors(self.tau_links[index], self.payload[index], self.qd[index], self.qdd[index],
                          self.sign[index], self.candidates, None if self.links is None else self.links[index])

    def friction(self, choice: np.ndarray | None = None) -> np.ndarray:
        """(N, J) the presliding states of ``choice``: (J,) indices into :attr:`candidates`, one
        per joint; None: the first candidate for every joint."""
        if choice is None:
            return self.sign[:, :, 0]
        return self.sign[:, np.arange(self.sign.shape[1]), np.asarray(choice, dtype=int)]

    def candidate_of(self, distance: float, delay: float) -> int:
        """The index of (``distance`` rad, ``delay`` s) in :attr:`candidates`.

        Raises:
            ValueError: not among them.
        """
        hit = np.flatnonzero(np.isclose(self.candidates[:, 0], distance, rtol=1e-9, atol=0.0)
                             & np.isclose(self.candidates[:, 1], delay, rtol=0.0, atol=1e-9))
        if not hit.size:
            raise ValueError(f'presliding distance {distance:g} rad with effort delay {delay:g} s was not evaluated')
        return int(hit[0])

    @staticmethod
    def concatenate(parts: Sequence[Regressors]) -> Regressors:
        """Samples of several recordings one after another (the same :attr:`distances`)."""
        links = None if any(p.links is None for p in parts) else np.concatenate([p.links for p in parts])
        return Regressors(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                            ('tau_links', 'payload', 'qd', 'qdd', 'sign')), parts[0].candidates, links)


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
        effort_delays: (M,) s, the candidate effort delays (default
            :data:`~shadow_twin.simulation.friction.EFFORT_DELAYS`); every pair is a candidate.
    Raises:
        ModelError: a joint missing, or no flange frame (:data:`FLANGE_SITES`, :data:`FLANGE_BODIES`).
    """

    def __init__(self, model: mujoco.MjModel, joints: Sequence[str],
                 presliding_distances: Sequence[float] = PRESLIDING_DISTANCES,
                 effort_delays: Sequence[float] = EFFORT_DELAYS) -> None:
        self.dynamics = InverseDynamics(model, joints)     # no contact or joint-limit forces
        self.joints = list(joints)
        self.distances = np.asarray(presliding_distances, dtype=float).reshape(-1)
        self.delays = np.asarray(effort_delays, dtype=float).reshape(-1)
        #: (C, 2) every (distance, delay) pair, delay-major.
        self.candidates = np.array([(d, s) for s in self.delays for d in self.distances]).reshape(-1, 2)
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
        start) from 0 at its first row, each delayed by its candidate's effort delay along
        ``times`` ((M,) s); ``path`` None: along ``q`` from its first sample; ``times`` None: no
        delay (every candidate's delay taken as 0). ``links``: also the columns of the links' inertial parameters (:attr:`Regressors.links`)."""
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
        return Regressors(tau, payload, qd, qdd, self._friction(q if path is None else path, times, n),
                          self.candidates, link_columns)

    def _friction(self, path: np.ndarray, times: np.ndarray | None, n: int) -> np.ndarray:
        """(n, J, C) presliding states of :attr:`candidates` for the last n rows of ``path``."""
        path = np.atleast_2d(np.asarray(path, dtype=float))
        nj = path.shape[1]
        # every delay's path side by side: one pass over the samples for all candidates
        paths = np.hstack([path if times is None or delay == 0.0 else delayed_positions(times, path, delay)
                           for delay in self.delays])
        states = presliding_states(paths, np.broadcast_to(self.distances, (paths.shape[1], self.distances.size)))
        states = states[path.shape[0] - n:].reshape(n, self.delays.size, nj, self.distances.size)
        return states.transpose(0, 2, 1, 3).reshape(n, nj, -1)      # (n, J, delay-major candidates)


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
