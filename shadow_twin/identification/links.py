"""``--links``: the links' inertial parameters as base parameters, after the standard fit.

The links' torques are linear in their 10 inertial parameters each (B bodies, 10 B columns,
:attr:`~shadow_twin.identification.regressor.Regressors.links`), but not all combinations show
in the joint efforts: e.g. the first link's inertia about the first joint's axis acts exactly as
that joint's armature, and the last links' parameters only in sums. The identifiable ones are
the **base parameters** (Gautier & Khalil, *Numerical calculation of the base inertial parameters
of robots*, J. Robotic Systems 7(1), 1990, by QR with column pivoting; Khalil & Dombre 2002,
ch. 12): the link columns are first projected off the joint terms' columns (armature, damping,
friction, offset keep their meaning), then a column-pivoted QR picks r independent columns;
each base parameter is an independent parameter plus a combination of the dependent ones,
beta = pi_i + K pi_d with K = R11^-1 R12.

With the drive gains, the payload and the friction bands of the standard fit fixed (the
nominal link inertias set the torque scale there), the effort is linear in the base
parameters' deviations from the model's and the joint terms: one bounded linear least squares
(Ia, b, fc >= 0). The base parameters are reported (values, intervals); they do not map back
to one set of link inertias, so ``calibrated.xml`` keeps the model's links.
"""

from __future__ import annotations

import dataclasses

from typing import Sequence

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.stats

from shadow_twin.common.errors import RecordingError
from shadow_twin.identification.fit import DynamicsParameters
from shadow_twin.identification.regressor import PAYLOAD_PARAMETERS, Regressors

#: |R_kk| / |R_00| below which a pivoted column counts as dependent.
RANK_TOLERANCE = 1e-4
#: Coefficients of dependent parameters below this are left out of a base parameter's name.
NAME_CUTOFF = 1e-3


def solve_links(reg: Regressors, effort: np.ndarray, params: DynamicsParameters, bodies: Sequence[str],
                nominal: np.ndarray, max_samples: int = 20000) -> dict:
    """Base parameters of the links (see the module doc).

    Args:
        reg: regressors with ``links`` (N samples); effort: (N, J) measured efforts.
        params: the standard fit (gains, payload, friction bands kept).
        bodies: the B link bodies; nominal: (10 B,) the model's link parameters.
    Returns:
        JSON-ready {'rank', 'parameters': {name: {'nominal', 'value', 'sd', 'low', 'high'}},
        'joints': {joint: {armature, damping, frictionloss, offset}}, 'fit_sigma': {joint}}.
    Raises:
        RecordingError: no link columns, or fewer equations than unknowns.
    """
    if reg.links is None:
        raise RecordingError('--links: the regressors hold no link columns')
    effort = np.asarray(effort, dtype=float)
    step = max(1, int(np.ceil(effort.shape[0] / max_samples)))
    if params.effort_delay is not None:      # the regressors as measured, once
        reg, params = reg.late(params.effort_delay), dataclasses.replace(params, effort_delay=None)
    reg, effort = reg.take(slice(None, None, step)), effort[::step]
    n, nj = effort.shape
    a = 1.0 / params.drive_gain
    known = reg.tau_links + reg.payload @ params.payload_vector()
    y = effort - a * known
    sign = params.sign(reg)
    P = np.zeros((n, nj, 4 * nj))
    for j in range(nj):
        P[:, j, 4 * j:4 * j + 4] = np.column_stack([reg.qdd[:, j], reg.qd[:, j], sign[:, j], np.ones(n)])
    W = a[None, :, None] * reg.links
    sigma = np.maximum(np.sqrt(np.mean((params.predict(reg) - effort) ** 2, axis=0)), 1e-12)
    Pw = (P / sigma[None, :, None]).reshape(n * nj, -1)
    Ww = (W / sigma[None, :, None]).reshape(n * nj, -1)
    yw = (y / sigma).reshape(-1)
    if Pw.shape[0] <= Pw.shape[1] + Ww.shape[1]:
        raise RecordingError(f'--links: {n} samples cannot identify {Ww.shape[1]} link parameters')
    projected = Ww - Pw @ np.linalg.lstsq(Pw, Ww, rcond=None)[0]
    _, R, piv = scipy.linalg.qr(projected, mode='economic', pivoting=True)
    diag = np.abs(np.diag(R))
    rank = int(np.sum(diag > RANK_TOLERANCE * diag[0])) if diag.size and diag[0] > 0 else 0
    independent, dependent = piv[:rank], piv[rank:]
    K = scipy.linalg.solve_triangular(R[:rank, :rank], R[:rank, rank:]) if rank else np.zeros((0, dependent.size))
    A = np.hstack([Ww[:, independent], Pw])
    norms = np.maximum(np.linalg.norm(A, axis=0), 1e-12)
    lower = np.full(A.shape[1], -np.inf)
    for j in range(nj):
        lower[rank + 4 * j:rank + 4 * j + 3] = 0.0
    sol = scipy.optimize.lsq_linear(A / norms, yw, bounds=(lower * norms, np.inf), method='bvls')
    x = sol.x / norms
    r = A @ x - yw
    dof = A.shape[0] - A.shape[1]
    s2 = float(r @ r) / dof
    cov = s2 * np.linalg.pinv(A.T @ A)
    t = float(scipy.stats.t.ppf(0.975, dof))
    names = [f'{body}.{p}' for body in bodies for p in PAYLOAD_PARAMETERS]
    out = {}
    for i, col in enumerate(independent):
        terms = [names[col]] + [f'{K[i, k]:+.4g} {names[d]}' for k, d in enumerate(dependent)
                                if abs(K[i, k]) >= NAME_CUTOFF]
        base_nominal = float(nominal[col] + K[i] @ nominal[dependent]) if dependent.size else float(nominal[col])
        value = base_nominal + float(x[i])
        sd = float(np.sqrt(max(cov[i, i], 0.0)))
        out[' '.join(terms)] = {'nominal': base_nominal, 'value': value, 'sd': sd,
                                'low': value - t * sd, 'high': value + t * sd}
    joints = {}
    for j, joint in enumerate(params.joints):
        ia, b, fc, o = x[rank + 4 * j:rank + 4 * j + 4]
        k = params.drive_gain[j]
        joints[joint] = {'armature': float(ia * k), 'damping': float(b * k), 'frictionloss': float(fc * k),
                         'offset': float(o)}
    residual = (A @ x - yw).reshape(n, nj) * sigma
    return {'rank': rank, 'columns': int(Ww.shape[1]), 'decimation': step, 'parameters': out, 'joints': joints,
            'fit_sigma': dict(zip(params.joints, np.sqrt(np.mean(residual ** 2, axis=0)).tolist()))}
