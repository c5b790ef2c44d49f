"""Sampled signals read at other times: linear interpolation between samples, held at the ends.

The one implementation behind reading a prediction ``effort_delay`` earlier (the drive measures
its effort late: :meth:`shadow_twin.simulation.effort.DriveParameters.measured`, the live effort
watch, ``Regressors.late`` of the identification) and the sim read at a trial lag
(:func:`shadow_twin.monitoring.lag.lag_shares`).
"""

from __future__ import annotations

import numpy as np


def shifted(t: np.ndarray, values: np.ndarray, shift, at: np.ndarray | None = None) -> np.ndarray:
    """``values`` sampled at (M,) increasing times ``t`` (s), read ``shift`` s later than the times
    ``at`` ((N,), default ``t``): ``values(at + shift)`` by linear interpolation, held at the first
    and last sample. ``values``: (M, J, ...); ``shift``: s, a scalar or (J,), one per column j
    (negative: earlier). Returns (N, J, ...)."""
    t = np.asarray(t, dtype=float)
    values = np.asarray(values, dtype=float)
    at = t if at is None else np.asarray(at, dtype=float)
    shift = np.broadcast_to(np.asarray(shift, dtype=float), (values.shape[1],))
    x = at[:, None] + shift[None, :]                                 # (N, J) times read
    last = t.size - 1
    i = np.clip(np.searchsorted(t, x, side='right') - 1, 0, last)
    i1 = np.minimum(i + 1, last)
    span = t[i1] - t[i]
    w = np.where(span > 0, np.clip((x - t[i]) / np.where(span > 0, span, 1.0), 0.0, 1.0), 0.0)
    columns = np.arange(values.shape[1])
    low, high = values[i, columns], values[i1, columns]
    w = w.reshape(w.shape + (1,) * (values.ndim - 2))
    return low + w * (high - low)
