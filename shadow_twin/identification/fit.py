"""Solve the effort model (:mod:`~shadow_twin.identification.regressor`) for its parameters.

Unknowns per joint j: drive gain k_j (N m per effort unit; 1 for N m), armature Ia_j (kg m^2),
damping b_j (N m s/rad), frictionloss fc_j (N m), offset o_j (effort unit); a payload at the
flange: mass m (kg) and centre of mass c (m, flange frame), its inertia that of a point mass.
The residual is the error of the predicted effort (the measurement's noise is on the effort)::

    r_j = (tau_links_j + Y_j pi(m, c) + Ia_j qdd_j + b_j qd_j + fc_j s_j) / k_j + o_j - e_j

each joint's rows weighted by 1 / the RMS of its residual. For a fixed payload, r_j is linear in
(1/k_j, Ia_j/k_j, b_j/k_j, fc_j/k_j, o_j), and for fixed gains it is linear in everything else:

1. per joint, no payload: bounded linear least squares (``scipy.optimize.lsq_linear``, ``bvls``;
   1/k > 0, Ia, b, fc >= 0), columns scaled to unit norm;
2. gains fixed: all joints and the payload's (m, m c) together, linear; repeated with the
   payload's inertia and the weights refreshed;
3. the nonlinear polish: the payload (m, c) by ``scipy.optimize.least_squares`` (trf, m >= 0)
   with every joint's unknowns solved exactly (bounded, linear) for each payload tried, i.e.
   variable projection (Golub & Pereyra, SIAM J. Numer. Anal. 10(2), 1973).

The presliding distance d of the friction's state s (:mod:`shadow_twin.simulation.friction`: it
follows the motion's sign over a travel of a few d and holds at rest) and the effort's delay (the
drive measures its effort late) are chosen per joint from the candidates, the pair whose joint fit
is best with the payload fixed: a coordinate search over the grid once the payload is polished
(stage 3; on a rough payload a delay would compensate its error), then the polish again and a
search among the neighbours while that changes a pair (:data:`POLISH_ROUNDS`); without a payload,
after stage 2. A delay reads the joint's regressors that much earlier
(:meth:`~shadow_twin.identification.regressor.Regressors.late`): the model's side is shifted, never
the measurement (interpolating the measured effort would average its noise, and a fit would take
the smaller residual for a better model).
With the links' inertial parameters fixed to the model's, the gains are identifiable: the
links' gravity and inertia torques set the scale.

Identifiability: :mod:`~shadow_twin.identification.uncertainty` (intervals and the directions
the data cannot identify).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import scipy.optimize
import threadpoolctl

from shadow_twin.calibration.search.identifiability import Direction
from shadow_twin.common.errors import RecordingError
from shadow_twin.identification.priors import GainPrior
from shadow_twin.identification.regressor import Regressors, point_mass_inertia
from shadow_twin.identification.uncertainty import identifiability

#: Per-joint parameters, in the order of the unknown vector.
JOINT_PARAMETERS = ('drive_gain', 'armature', 'damping', 'frictionloss', 'offset')
#: Payload parameters of the unknown vector (mass, first moment m c in the flange frame).
PAYLOAD_UNKNOWNS = ('mass', 'mx', 'my', 'mz')
#: Most rounds of the payload's polish, each followed by the search of the joints' presliding
#: distances and effort delays (a round ends the loop when the search changes none).
POLISH_ROUNDS = 3


@dataclass
class DynamicsParameters:
    """Values of the effort model, (J,) arrays in the order of ``joints``.

    Attributes:
        joints: J joint names.
        effort_unit: 'A' or 'Nm'.
        drive_gain: N m per effort unit; armature kg m^2; damping N m s/rad; frictionloss N m;
        offset: effort unit.
        payload_mass: kg; payload_com: (3,) m in the flange frame (zeros without a payload).
        presliding_distance: (J,) rad, each joint's presliding distance (one of the regressors'
            ``distances``), or None (their first); effort_delay: (J,) s, how late its effort is
            measured (:meth:`predict` reads the regressors that much earlier), or None (0).
    """

    joints: list[str]
    effort_unit: str
    drive_gain: np.ndarray
    armature: np.ndarray
    damping: np.ndarray
    frictionloss: np.ndarray
    offset: np.ndarray
    payload_mass: float = 0.0
    payload_com: np.ndarray = field(default_factory=lambda: np.zeros(3))
    presliding_distance: np.ndarray | None = None
    effort_delay: np.ndarray | None = None

    def sign(self, reg: Regressors) -> np.ndarray:
        """(N, J) the friction's presliding states with :attr:`presliding_distance`. Raises
        ValueError: a distance ``reg`` was not evaluated for."""
        if self.presliding_distance is None:
            return reg.friction()
        return reg.friction([reg.index_of(d) for d in self.presliding_distance])

    def payload_vector(self) -> np.ndarray:
        """(10,) the payload's inertial parameters (point mass) of :data:`PAYLOAD_PARAMETERS`."""
        h = self.payload_mass * np.asarray(self.payload_com, dtype=float)
        return np.concatenate([[self.payload_mass], h, point_mass_inertia(self.payload_mass, h)])

    def torque(self, reg: Regressors) -> np.ndarray:
        """(N, J) N m the joints need along ``reg``, as measured (:attr:`effort_delay` late)."""
        if self.effort_delay is not None:
            reg = reg.late(self.effort_delay)
        return (reg.tau_links + reg.payload @ self.payload_vector() + self.armature * reg.qdd
                + self.damping * reg.qd + self.frictionloss * self.sign(reg))

    def predict(self, reg: Regressors) -> np.ndarray:
        """(N, J) efforts in ``effort_unit`` as measured: torque / drive_gain + offset."""
        return self.torque(reg) / self.drive_gain + self.offset


@dataclass
class FitResult:
    """Parameters and what the data say about them.

    Attributes:
        parameters: the estimate.
        intervals: {name: {'value', 'sd', 'low', 'high'}} (95 %; names 'joint.parameter' and
            'payload.mass', 'payload.com_x'...).
        unidentified: directions the data cannot identify.
        singular_values: of the column-normalised weighted system, descending.
        rows: equations used; samples: samples used (after decimation); decimation: every
            how many samples were used; evaluations: residual evaluations of the polish.
        fit_sigma: (J,) RMS residual on the fit's samples, effort unit.
        gain_prior: the drive gains' prior used, or None; prior_share: per joint its share of the
            information on the gain (0-1), None where none (:meth:`GainPrior.share`).
    """

    parameters: DynamicsParameters
    intervals: dict[str, dict]
    unidentified: list[Direction]
    singular_values: list[float]
    rows: int
    samples: int
    decimation: int
    evaluations: int
    fit_sigma: np.ndarray
    gain_prior: GainPrior | None = None
    prior_share: list[float | None] = field(default_factory=list)


def solve(reg: Regressors, effort: np.ndarray, joints: Sequence[str], effort_unit: str, payload: bool = True,
          max_samples: int = 20000, iterations: int = 3,
          choose_distance: bool = True, gain_prior: GainPrior | None = None,
          delays: Sequence[float] | None = None) -> FitResult:
    """Fit the effort model to (N, J) measured efforts along ``reg`` (stages: module doc).

    BLAS runs on one thread here (``threadpoolctl``): the problems are many and small (QR factors
    of N x 6 and N J x 34), where more threads only wait for each other, and badly so on a PC
    whose cores are busy (four 60 s runs: 1.5 s -> 0.9 s quiet, 6.3 s -> 1.5 s beside two busy
    processes, on this 2-core PC).

    Args:
        max_samples: the fit uses every ``ceil(N / max_samples)``-th sample (decimation).
        iterations: rounds of stage 2 (reweighting, payload inertia).
        choose_distance: choose each joint's presliding distance among the regressors'
            ``reg.distances`` and its effort delay among ``delays`` (s; None: 0 only, which needs no
            stamps in ``reg``); False: the first of each.
        gain_prior: the drive gains' prior (:mod:`~shadow_twin.identification.priors`; efforts in
            A only), one more equation per joint on 1/k from the first reweighting on; None: none.
    Raises:
        RecordingError: fewer equations than unknowns.
    """
    with threadpoolctl.threadpool_limits(limits=1, user_api='blas'):
        return _solve(reg, effort, joints, effort_unit, payload, max_samples, iterations, choose_distance,
                      gain_prior, delays)


def _solve(prompt, effort, joints, effort_unit, payload, max_samples, iterations, choose_distance,
           gain_prior, delays) -> FitResult:
    effort = np.asarray(effort, dtype=float)
    delays = np.zeros(1) if delays is None else np.asarray(delays, dtype=float).reshape(-1)
    n, nj = effort.shape
    step = max(1, int(np.ceil(n / max_samples)))
    every = slice(None, None, step)
    effort = effort[::step]
    n = effort.shape[0]
    late_regs: dict[int, Regressors] = {}
    mixed: list = [None, None]                  # the last mix: (key, regressors)

    def at_delays(m):
        """The decimated regressors with joint j read ``delays[m[j]]`` late (each delay's, and the
        last mix, computed once)."""
        key = tuple(int(i) for i in m)
        if mixed[0] != key:
            for i in set(key) - set(late_regs):
                late_regs[i] = prompt.late(delays[i]).take(every)
            mixed[:] = [key, Regressors.per_joint([late_regs[i] for i in key])]
        return mixed[1]

    reg = at_delays(np.zeros(nj, dtype=int))    # the regressors at each joint's chosen delay, decimated
    has_gain = effort_unit == 'A'
    per_joint = [p for p in JOINT_PARAMETERS if has_gain or p != 'drive_gain']
    npj = len(per_joint)
    nx = npj * nj + (len(PAYLOAD_UNKNOWNS) if payload else 0)
    if n * nj <= nx:
        raise RecordingError(f'{n} samples of {nj} joints cannot identify {nx} parameters')
    g = 1 if has_gain else 0        # index of armature/k in a joint's block
    p0 = npj * nj
    lower = np.full(nx, -np.inf)
    for j in range(nj):
        if has_gain:
            lower[j * npj] = 1e-9
        lower[j * npj + g:j * npj + g + 3] = 0.0
    if payload:
        lower[p0] = 0.0
    x = np.zeros(nx)
    inertia = np.zeros(6)
    signs = np.array(reg.friction())
    prior_sigma = np.full(nj, np.nan)       # the residual's RMS the prior's equations are weighted with
    prior = gain_prior if has_gain else None

    def joint_columns(j, known):
        cols = [known] if has_gain else []
        return np.column_stack(cols + [reg.qdd[:, j], reg.qd[:, j], signs[:, j], np.ones(n)])

    def payload_torque(xv):
        if not payload:
            return np.zeros((n, nj))
        return reg.payload[:, :, :4] @ xv[p0:p0 + 4] + reg.payload[:, :, 4:] @ inertia

    def inner(pv, xv):
        """Per joint, the best (bounded) joint unknowns for payload ``pv``: writes them into ``xv``,
        returns the (n, J) residual."""
        if payload:
            tp = reg.payload[:, :, :4] @ pv + reg.payload[:, :, 4:] @ point_mass_inertia(max(pv[0], 0.0), pv[1:4])
        else:
            tp = np.zeros((n, nj))
        out = np.empty((n, nj))
        for j in range(nj):
            known = reg.tau_links[:, j] + tp[:, j]
            cols = joint_columns(j, known)
            target = effort[:, j] - (0.0 if has_gain else known)
            a, y = cols, target
            row = None if prior is None else prior.row(j, prior_sigma[j])
            if row is not None:             # the gain's prior: one more equation on 1/k
                a = np.vstack([cols, np.eye(1, npj) * row[0]])
                y = np.append(target, row[1])
            xv[j * npj:(j + 1) * npj] = bounded_lstsq(a, y, lower[j * npj:(j + 1) * npj])
            out[:, j] = cols @ xv[j * npj:(j + 1) * npj] - target
        return out

    choice = np.zeros(nj, dtype=int)            # each joint's presliding distance (index)
    late = np.zeros(nj, dtype=int)              # each joint's effort delay (index)
    distances = reg.distances.size
    choose_distance = choose_distance and distances * delays.size > 1

    def choose_presliding_distance(pv, near: bool = False):
        """Per joint, the (presliding distance, effort delay) whose (linear) fit is best, payload
        ``pv`` fixed: the distance, then the delay, then the distance again (a coordinate search
        over the grid: 2 K + M fits instead of K M; ``near``: among each joint's neighbours only)."""
        nonlocal reg
        for axis in (0, 1, 0):
            best = np.full(nj, np.inf)
            size = distances if axis == 0 else delays.size
            current = choice if axis == 0 else late
            for i in (-1, 0, 1) if near else range(size):
                trial = np.clip(current + i, 0, size - 1) if near else np.full(nj, i)
                trial_k, trial_m = (trial, late) if axis == 0 else (choice, trial)
                reg = at_delays(trial_m)
                signs[:] = reg.friction(trial_k)
                rms = _rms(inner(pv, x))
                better = rms < best
                best[better] = rms[better]
                choice[better], late[better] = trial_k[better], trial_m[better]
        reg = at_delays(late)
        signs[:] = reg.friction(choice)

    # stage 1: per joint, no payload (linear)
    sigma = _rms(inner(np.zeros(4), x))
    prior_sigma[:] = sigma
    # stage 2: gains fixed, the payload and the rest together (linear), reweighted
    for _ in range(max(1, iterations) if payload else 0):
        a = x[[j * npj for j in range(nj)]] if has_gain else np.ones(nj)
        free = [i for i in range(nx) if not (has_gain and i < p0 and i % npj == 0)]
        A = np.zeros((n, nj, nx))
        for j in range(nj):
            A[:, j, j * npj + g:(j + 1) * npj] = joint_columns(j, reg.tau_links[:, j])[:, g:]
        A[:, :, p0:] = a[None, :, None] * reg.payload[:, :, :4]
        y = effort - a * (reg.tau_links + reg.payload[:, :, 4:] @ inertia)
        Aw = (A / sigma[None, :, None]).reshape(n * nj, nx)[:, free]
        x[free] = bounded_lstsq(Aw, (y / sigma).reshape(-1), lower[free])
        if x[p0] > 0:
            inertia = point_mass_inertia(x[p0], x[p0 + 1:p0 + 4])
        sigma = _rms(inner(x[p0:p0 + 4], x))
        prior_sigma[:] = sigma
    if choose_distance and not payload:
        choose_presliding_distance(np.zeros(4))
        sigma = _rms(inner(np.zeros(4), x))
    # stage 3 (polish, variable projection: Golub & Pereyra, SIAM J. Numer. Anal. 10(2), 1973):
    # the payload (which multiplies the gains) by nonlinear least squares, every joint's
    # unknowns solved exactly (bounded, linear) for each payload tried.
    evaluations = 0
    if payload:
        scratch = x.copy()

        def payload_of(mc):   # (m, c) -> (m, m c): the point-mass inertia stays bounded as m -> 0
            return np.concatenate([[mc[0]], mc[0] * mc[1:]])

        def projected(mc):
            return (inner(payload_of(mc), scratch) / sigma).reshape(-1)

        for polished in range(POLISH_ROUNDS):     # again while the search changes a joint's (distance, delay)
            chosen = np.concatenate([choice, late])
            mass0 = max(x[p0], 1e-3)
            start = np.concatenate([[mass0], x[p0 + 1:p0 + 4] / mass0 if x[p0] > 0 else np.zeros(3)])
            result = scipy.optimize.least_squares(projected, start, bounds=([0.0, -np.inf, -np.inf, -np.inf], np.inf),
                                                  method='trf', x_scale=np.array([1.0, 0.05, 0.05, 0.05]),
                                                  diff_step=1e-4)
            x[p0:p0 + 4] = payload_of(result.x)
            evaluations += int(result.nfev)
            if not choose_distance:
                break
            # the first search once the payload is polished (a rough payload is compensated by a delay)
            choose_presliding_distance(x[p0:p0 + 4], near=polished > 0)
            if (np.concatenate([choice, late]) == chosen).all():
                break
            sigma = _rms(inner(x[p0:p0 + 4], x))
        inertia = point_mass_inertia(x[p0], x[p0 + 1:p0 + 4])
    inner(x[p0:p0 + 4] if payload else np.zeros(4), x)

    def fun(xv):
        return (_residual(xv, reg, effort, payload_torque, joint_columns, npj, nj, has_gain) / sigma).reshape(-1)

    def jac(xv):
        J = np.zeros((n, nj, nx))
        tp = payload_torque(xv)
        for j in range(nj):
            J[:, j, j * npj:(j + 1) * npj] = joint_columns(j, reg.tau_links[:, j] + tp[:, j])
            if payload:
                J[:, j, p0:] = (xv[j * npj] if has_gain else 1.0) * reg.payload[:, j, :4]
        return (J / sigma[None, :, None]).reshape(n * nj, nx)

    Jw, rw = jac(x), fun(x)
    names = []
    for joint in joints:
        names += ([f'{joint}.1/drive_gain'] if has_gain else []) + [
            f'{joint}.armature/drive_gain', f'{joint}.damping/drive_gain', f'{joint}.frictionloss/drive_gain',
            f'{joint}.offset']
    names += [f'payload.{p}' for p in PAYLOAD_UNKNOWNS] if payload else []
    params = _parameters(x, joints, effort_unit, per_joint, payload)
    params.presliding_distance, params.effort_delay = reg.distances[choice], delays[late]
    shares = [None] * nj
    if prior is not None:
        tp = payload_torque(x)
        shares = [prior.share(j, reg.tau_links[:, j] + tp[:, j], prior_sigma[j]) for j in range(nj)]
    intervals, unidentified, singular = identifiability(Jw, rw, x, names, joints, has_gain, npj, payload)
    fit_sigma = _rms(params.predict(prompt)[every] - effort)
    return FitResult(params, intervals, unidentified, singular, n * nj, n, step, evaluations, fit_sigma,
                     prior, shares)


def bounded_lstsq(a: np.ndarray, y: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """argmin ||a x - y|| subject to x >= ``lower`` ((D,), -inf: free) for an (R, D) ``a``, R >> D.

    The columns are scaled to unit norm and the problem is reduced to its D x D triangle first: the
    QR factor of ``[a | y]`` gives ``||a x - y||^2 = ||R x - z||^2 + const`` (Golub & Van Loan,
    *Matrix Computations*, 4th ed., 5.3), so the bounded solver (``scipy.optimize.lsq_linear``,
    ``bvls``) works on D rows instead of R: the same minimiser, at the cost of one QR.
    """
    norms = np.maximum(np.linalg.norm(a, axis=0), 1e-12)
    d = a.shape[1]
    r = np.linalg.qr(np.column_stack([a / norms, y]), mode='r')
    sol = scipy.optimize.lsq_linear(r[:d, :d], r[:d, d], bounds=(lower * norms, np.inf), method='bvls')
    return sol.x / norms


def _rms(r: np.ndarray) -> np.ndarray:
    return np.maximum(np.sqrt(np.mean(r ** 2, axis=0)), 1e-12)


def _residual(x, reg, effort, payload_torque, joint_columns, npj, nj, has_gain):
    """(n, J) predicted - measured effort."""
    tp = payload_torque(x)
    out = np.empty_like(effort)
    for j in range(nj):
        known = reg.tau_links[:, j] + tp[:, j]
        pred = joint_columns(j, known) @ x[j * npj:(j + 1) * npj] + (0.0 if has_gain else known)
        out[:, j] = pred - effort[:, j]
    return out


def _parameters(x, joints, effort_unit, per_joint, payload) -> DynamicsParameters:
    """Physical parameters from the unknowns (1/k, Ia/k, b/k, fc/k, o; m, m c)."""
    nj, npj = len(joints), len(per_joint)
    block = x[:npj * nj].reshape(nj, npj)
    has_gain = 'drive_gain' in per_joint
    inv = block[:, 0] if has_gain else np.ones(nj)
    rest = block[:, 1:] if has_gain else block
    gain = 1.0 / inv
    mass, com = 0.0, np.zeros(3)
    if payload:
        mass = float(x[npj * nj])
        com = x[npj * nj + 1:npj * nj + 4] / mass if mass > 0 else np.zeros(3)
    return DynamicsParameters(list(joints), effort_unit, gain, rest[:, 0] * gain, rest[:, 1] * gain,
                              rest[:, 2] * gain, rest[:, 3].copy(), mass, com)
