"""The plain least-squares baseline every identification is reported beside: the floor the method
must never go under.

Per joint j, ordinary least squares (no bounds, no priors, no payload, no weights) of the measured
effort on the nominal model's rigid-body torque and the joint's own terms::

    e_j = a_j tau_links_j + c1_j qdd_j + c2_j qd_j + c3_j s(qd_j) + o_j

``tau_links`` the nominal model's link torque (:class:`~shadow_twin.identification.regressor.Regressors`,
N m), ``s(qd) = tanh(qd / 0.005 rad/s)`` the textbook smooth sign (no memory); ``a_j`` is 1 / drive gain, ``c1..c3`` armature, viscous
and Coulomb friction over the gain, ``o_j`` the offset: the textbook model of a joint drive
(Khalil & Dombre, *Modeling, Identification and Control of Robots*, 2002, ch. 12), fitted as a
lab would in a few lines (``numpy.linalg.lstsq``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shadow_twin.identification.regressor import Regressors

#: Columns of the baseline per joint, in the order of :attr:`Baseline.coefficients`.
COLUMNS = ('tau_links', 'qdd', 'qd', 'sign', 'offset')
#: rad/s: the band of the baseline's smooth sign of the velocity.
SIGN_VELOCITY = 0.005


def _columns(reg: Regressors, j: int) -> np.ndarray:
    return np.column_stack([reg.tau_links[:, j], reg.qdd[:, j], reg.qd[:, j], np.tanh(reg.qd[:, j] / SIGN_VELOCITY),
                            np.ones(reg.qd.shape[0])])


@dataclass(frozen=True)
class Baseline:
    """Per joint coefficients (J, 5) of :data:`COLUMNS` (effort unit per N m, per rad/s^2, per rad/s,
    per unit sign, effort unit)."""

    coefficients: np.ndarray

    @classmethod
    def fit(cls, reg: Regressors, effort: np.ndarray) -> Baseline:
        """OLS of the (N, J) measured ``effort`` along ``reg``, joint by joint (a column the data do
        not excite gets lstsq's minimum-norm value)."""
        effort = np.asarray(effort, dtype=float)
        coefficients = np.stack([np.linalg.lstsq(_columns(reg, j), effort[:, j], rcond=None)[0]
                                 for j in range(effort.shape[1])])
        return cls(coefficients)

    def predict(self, reg: Regressors) -> np.ndarray:
        """(N, J) efforts along ``reg``."""
        return np.column_stack([_columns(reg, j) @ c for j, c in enumerate(self.coefficients)])


def explained_variance(residual: np.ndarray, effort: np.ndarray) -> np.ndarray:
    """(J,) 1 - SSE / SST of an (N, J) ``residual`` of (N, J) ``effort``; NaN where the effort does
    not vary."""
    sst = np.sum((effort - effort.mean(axis=0)) ** 2, axis=0)
    sse = np.sum(residual ** 2, axis=0)
    with np.errstate(divide='ignore', invalid='ignore'):
        return np.where(sst > 0, 1.0 - sse / np.where(sst > 0, sst, 1.0), np.nan)
