"""What an identification may assume before the data, and what it must not believe after: the
drive gains' prior and the plausibility of the identified parameters.

* **Prior** (:class:`GainPrior`): each UR joint's drive gain k is near UR's nominal value
  (:data:`~shadow_twin.monitoring.effort_settings.NOMINAL_UR_DRIVE_GAINS`, the motor torque
  constant times the gear ratio), with a relative standard deviation :data:`GAIN_PRIOR_SD`. The fit
  adds it as one more equation per joint on 1/k (a Gaussian prior, i.e. Tikhonov regularisation
  towards the nominal value: maximum a posteriori with the residual's noise): where the data
  determine the gain, the prior weighs nothing; where they cannot (a direction the data do not
  identify), the gain stays near the nominal value. Its weight, the prior's share of the
  information on 1/k, is in the report per joint. Joints without a nominal gain get no prior.
* **Plausibility** (:func:`implausible`): a drive gain outside 1/:data:`PLAUSIBLE_GAIN_FACTOR` to
  :data:`PLAUSIBLE_GAIN_FACTOR` times its nominal value, or a payload heavier than
  :data:`MAX_PAYLOAD_KG`, is not a robot: the recording's units or columns are wrong (currents
  scaled, positions in degrees, ``--joints`` not matching the columns, a filter cut-off that
  leaves nothing). ``shadow-twin identify`` refuses such a fit (exit 2, nothing written).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from shadow_twin.monitoring.effort_settings import NOMINAL_UR_DRIVE_GAINS, glob_value

#: Relative standard deviation of the drive gain's prior (UR's drives of one size differ from
#: their nominal gain by well under this; published identifications of UR5e drives are within
#: about 10 % of the torque constant times the gear ratio, Clochiatti et al., Robotica 2024).
GAIN_PRIOR_SD = 0.25
#: An identified drive gain outside [nominal / F, nominal x F] is implausible.
PLAUSIBLE_GAIN_FACTOR = 3.0
#: kg: a heavier payload is implausible (the heaviest UR, the UR30, carries 30 kg).
MAX_PAYLOAD_KG = 40.0


@dataclass(frozen=True)
class GainPrior:
    """Per joint the nominal drive gain (J,) N m/A (NaN: no prior for that joint) and the relative
    standard deviation ``sd``."""

    nominal: np.ndarray
    sd: float = GAIN_PRIOR_SD

    @classmethod
    def for_joints(cls, joints: Sequence[str]) -> GainPrior:
        """UR's nominal gains of the joints whose names match :data:`NOMINAL_UR_DRIVE_GAINS`."""
        return cls(np.array([glob_value(NOMINAL_UR_DRIVE_GAINS, j, math.nan) for j in joints], dtype=float))

    def row(self, j: int, sigma: float) -> tuple[float, float] | None:
        """The prior's equation on joint ``j``'s 1/k, weighted like a residual of standard deviation
        ``sigma`` (effort unit): (coefficient, right-hand side), or None without a prior."""
        k = self.nominal[j]
        if not (math.isfinite(k) and k > 0 and math.isfinite(sigma) and sigma > 0):
            return None
        weight = sigma / (self.sd / k)           # 1/k ~ N(1/k_nom, (sd / k_nom)^2)
        return weight, weight / k

    def share(self, j: int, known: np.ndarray, sigma: float) -> float | None:
        """The prior's share of the information on joint ``j``'s 1/k (0-1): its precision over its
        own plus the data's, ``sum(known^2) / sigma^2`` (``known``: (N,) N m, the torque 1/k
        multiplies), correlations with the other unknowns ignored; None without a prior."""
        found = self.row(j, sigma)
        if found is None:
            return None
        prior = (found[0] / sigma) ** 2
        return float(prior / (prior + float(np.sum(np.asarray(known) ** 2)) / sigma ** 2))


def implausible(joints: Sequence[str], gains: np.ndarray | None, payload_mass: float,
                prior: GainPrior) -> list[str]:
    """What is implausible in an identification: one text per drive gain (N m/A; None for efforts
    in N m) outside its plausible range and for a payload over :data:`MAX_PAYLOAD_KG`."""
    found = []
    if gains is not None:
        for j, joint in enumerate(joints):
            k, nominal = float(gains[j]), prior.nominal[j]
            if not math.isfinite(k) or (math.isfinite(nominal) and not
                                        nominal / PLAUSIBLE_GAIN_FACTOR <= k <= nominal * PLAUSIBLE_GAIN_FACTOR):
                found.append(f'{joint} drive gain {k:.4g} N m/A (nominal {nominal:g})')
    if not math.isfinite(payload_mass) or payload_mass > MAX_PAYLOAD_KG:
        found.append(f'payload {payload_mass:.4g} kg (at most {MAX_PAYLOAD_KG:g})')
    return found
