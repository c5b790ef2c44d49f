"""The sim-real error of a link as a colour: green at no error, yellow at half the scale, red at the scale
and beyond (a traffic-light scale: what a lab reads at a glance; its legend gives the values).

Units: m.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: The scale's colour stops (fraction of the full scale, r, g, b).
STOPS = ((0.0, 0.10, 0.75, 0.25), (0.5, 0.95, 0.85, 0.10), (1.0, 0.90, 0.10, 0.10))


@dataclass(frozen=True)
class ErrorScale:
    """Colours for errors from 0 to ``full_scale`` m (red at and above it); ``alpha`` 0-1, the colours'
    opacity (a ghost's). Raises ValueError: a scale that is not positive and finite, an alpha outside 0-1."""

    full_scale: float = 0.02
    alpha: float = 0.4

    def __post_init__(self) -> None:
        if not (np.isfinite(self.full_scale) and self.full_scale > 0):
            raise ValueError(f'error colour scale must be positive, got {self.full_scale}')
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f'ghost alpha must be within 0-1, got {self.alpha}')

    def rgba(self, errors: np.ndarray) -> np.ndarray:
        """(N, 4) the colours of ``errors`` (N,) m (NaN: grey, nothing known)."""
        errors = np.atleast_1d(np.asarray(errors, dtype=float))
        fraction = np.clip(errors / self.full_scale, 0.0, 1.0)
        stops = np.array(STOPS)
        out = np.empty((len(errors), 4))
        for k in range(3):
            out[:, k] = np.interp(fraction, stops[:, 0], stops[:, k + 1])
        out[~np.isfinite(errors), :3] = 0.5
        out[:, 3] = self.alpha
        return out

    def legend(self, steps: int = 5) -> list[tuple[float, np.ndarray]]:
        """[(error m, rgba (4,))] at ``steps`` evenly spaced errors from 0 to the full scale."""
        values = np.linspace(0.0, self.full_scale, max(2, steps))
        return list(zip(values.tolist(), self.rgba(values)))
