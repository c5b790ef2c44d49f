"""Settings of the external-force watch (:mod:`shadow_twin.monitoring.effort_watch`): thresholds,
debounce, the acceleration fit's window, and the nominal UR drive gains used without an
identification's ``parameters.yaml``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.globs import first_match
from shadow_twin.simulation.effort import DriveParameters

#: Drive gains (N m/A) a UR5 plausibly has: motor torque constant x gear ratio 101, with torque
#: constants of about 0.135 N m/A (size-3 drives: base, shoulder, elbow) and 0.09 N m/A (size-1
#: wrist drives), the order of published UR5 identifications (e.g. Clochiatti et al., "Electro-
#: mechanical modeling and identification of the UR5 e-series robot", Robotica 2024). Nominal
#: figures for the mock UR and for the monitor without ``parameters.yaml``; identify the real arm's.
NOMINAL_UR_DRIVE_GAINS = {'*shoulder_pan_joint': 13.6, '*shoulder_lift_joint': 13.7, '*elbow_joint': 13.7,
                          '*wrist_1_joint': 9.7, '*wrist_2_joint': 8.7, '*wrist_3_joint': 9.0}

def glob_value(table: Mapping[str, float], name: str, default: float | None = None) -> float | None:
    """The value of the first glob of ``table`` (fnmatch, case-sensitive) matching ``name``, else ``default``."""
    value = first_match(name, table)
    return default if value is None else float(value)


def nominal_drive(joints: Sequence[str], effort_unit: str = 'A',
                  gains: Mapping[str, float] | None = None) -> DriveParameters:
    """Drive parameters of ``joints`` from glob ``gains`` (N m/A; default
    :data:`NOMINAL_UR_DRIVE_GAINS`; 1.0 for ``Nm`` or a joint no glob matches), no offsets, no sigma.
    Raises ConfigError (unknown unit, a gain <= 0)."""
    table = NOMINAL_UR_DRIVE_GAINS if gains is None else gains
    values = {} if effort_unit == 'Nm' else {j: glob_value(table, j, 1.0) for j in joints}
    return DriveParameters(effort_unit, values)


@dataclass(frozen=True)
class EffortSettings:
    """How residuals become statuses (see the module doc).

    Attributes:
        k_warn, k_error: thresholds in residual sigmas (0 < k_warn <= k_error).
        fallback_sigma: sigma of a joint the identification gives none for, effort unit (> 0).
        sigma_overrides: {joint glob: sigma} before ``fallback_sigma``.
        debounce_samples: consecutive samples over a level to enter it (>= 1).
        debounce_time: or this long over it, s of stamps (0: samples only).
        hold_time: under a level this long to leave it, s of stamps (>= 0).
        window: samples of the acceleration fit (odd, >= 3).
        max_gap: a larger stamp gap restarts the window, s (> 0).
    Raises:
        ConfigError: a value out of range.
    """

    k_warn: float = 4.0
    k_error: float = 6.0
    fallback_sigma: float = 0.1
    sigma_overrides: Mapping[str, float] = field(default_factory=dict)
    debounce_samples: int = 3
    debounce_time: float = 0.0
    hold_time: float = 0.5
    window: int = 3
    max_gap: float = 0.1

    def __post_init__(self) -> None:
        checks = (('k_warn', self.k_warn > 0), ('k_error', self.k_error >= self.k_warn),
                  ('fallback_sigma', self.fallback_sigma > 0), ('debounce_samples', self.debounce_samples >= 1),
                  ('debounce_time', self.debounce_time >= 0), ('hold_time', self.hold_time >= 0),
                  ('window', self.window >= 3 and self.window % 2 == 1), ('max_gap', self.max_gap > 0))
        needs = {'k_warn': '> 0', 'k_error': '>= k_warn', 'fallback_sigma': '> 0', 'debounce_samples': '>= 1',
                 'debounce_time': '>= 0', 'hold_time': '>= 0', 'window': 'odd and >= 3', 'max_gap': '> 0'}
        for name, ok in checks:
            value = getattr(self, name)
            if not ok or not math.isfinite(float(value)):
                raise ConfigError(f'effort watch: {name} = {value!r} must be {needs[name]}')
        for glob, sigma in self.sigma_overrides.items():
            if not isinstance(sigma, (int, float)) or isinstance(sigma, bool) or not (math.isfinite(sigma)
                                                                                     and sigma > 0):
                raise ConfigError(f'effort watch: sigma of {glob!r} = {sigma!r} must be a number > 0')
