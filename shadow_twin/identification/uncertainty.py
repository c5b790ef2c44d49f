"""How well the data determine the identified parameters (``shadow-twin identify``).

Same formulas and thresholds as ``shadow-twin calibrate`` (:mod:`shadow_twin.calibration.search.identifiability`):
the covariance s^2 (J^T J)^-1 of the weighted residual's Jacobian J in the fit's unknowns
(:mod:`~shadow_twin.identification.fit`; s^2 = SSR / (R - D)), 95 % t intervals of the physical
parameters by the delta method (the drive gain k = 1 / (1/k), armature = (Ia/k) / (1/k)...);
directions with a collinearity index over 15 (Brun et al., Water Res. 35(4), 2001) in the
column-normalised J are reported as not identifiable. Samples are correlated in time, so the
intervals are lower bounds of the uncertainty.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import scipy.stats

from shadow_twin.calibration.search.identifiability import Direction, combination, covariance, normalised_svd


def identifiability(Jw: np.ndarray, rw: np.ndarray, x: np.ndarray, names: Sequence[str], joints: Sequence[str],
                    has_gain: bool, npj: int, payload: bool) -> tuple[dict, list[Direction], list[float]]:
    """Intervals of the reported parameters and the directions the data cannot identify.

    Args:
        Jw: (R, D) the weighted residual's Jacobian in the fit's unknowns at ``x`` (D,); rw: (R,)
            the weighted residual; names: D names of the unknowns.
        joints: J joint names; has_gain: efforts in A (each joint's first unknown is 1/k);
            npj: unknowns per joint; payload: the last four unknowns are (m, m c).
    Returns:
        ({name: {'value', 'sd', 'low', 'high'}} 95 % of 'joint.parameter' and 'payload.*',
        the unidentified directions, the singular values of the column-normalised system).
    """
    rows, nx = Jw.shape
    dof = rows - nx
    s2 = float(rw @ rw) / dof
    # J = Q R: R (D, D) has J's singular values and right singular vectors and its column norms
    r_factor = np.linalg.qr(Jw, mode='r')
    cov, infinite = covariance(r_factor, s2)
    t = float(scipy.stats.t.ppf(0.975, dof))
    intervals = {}

    def add(name, value, gradient):
        idx = np.flatnonzero(gradient)
        if infinite[idx].any():
            sd = np.inf
        else:
            sd = float(np.sqrt(max(gradient[idx] @ cov[np.ix_(idx, idx)] @ gradient[idx], 0.0)))
        intervals[name] = {'value': float(value), 'sd': sd, 'low': float(value - t * sd), 'high': float(value + t * sd)}

    for j, joint in enumerate(joints):
        base = j * npj
        a = x[base] if has_gain else 1.0
        off = 1 if has_gain else 0
        if has_gain:
            grad = np.zeros(nx)
            grad[base] = -1.0 / a ** 2
            add(f'{joint}.drive_gain', 1.0 / a, grad)
        for p, name in enumerate(('armature', 'damping', 'frictionloss')):
            grad = np.zeros(nx)
            grad[base + off + p] = 1.0 / a
            if has_gain:
                grad[base] = -x[base + off + p] / a ** 2
            add(f'{joint}.{name}', x[base + off + p] / a, grad)
        grad = np.zeros(nx)
        grad[base + off + 3] = 1.0
        add(f'{joint}.offset', x[base + off + 3], grad)
    if payload:
        m0 = npj * len(joints)
        mass = x[m0]
        grad = np.zeros(nx)
        grad[m0] = 1.0
        add('payload.mass', mass, grad)
        for i, axis in enumerate('xyz'):
            grad = np.zeros(nx)
            if mass > 0:
                grad[m0 + 1 + i] = 1.0 / mass
                grad[m0] = -x[m0 + 1 + i] / mass ** 2
                add(f'payload.com_{axis}', x[m0 + 1 + i] / mass, grad)
            else:
                intervals[f'payload.com_{axis}'] = {'value': 0.0, 'sd': np.inf, 'low': -np.inf, 'high': np.inf}
    singular, directions = normalised_svd(r_factor, np.linalg.norm(r_factor, axis=0))
    unidentified = []
    for value, vector, kind in directions:
        coefficients = {name: float(c) for name, c in zip(names, vector) if abs(c) >= 0.01}
        index = float(1.0 / value) if kind == 'collinear' and value > 0 else float('inf')
        unidentified.append(Direction(combination(coefficients), coefficients, float(value), index, kind))
    return intervals, unidentified, [float(v) for v in singular]
