"""How much of the sim-real error is lag (a time shift) and how much is model: the lag share.

Part of the twin monitor's core (:mod:`shadow_twin.monitoring.joint.error` has the overview).
Over a comparison window with the real positions ``real(t)`` and the sim's at the same stamps
``sim(t)``, per joint::

    e(tau)  = mean over t of (sim(t + tau) - real(t))^2        (rad^2)
    share   = 1 - min over tau in [-max_lag, max_lag] of e(tau) / e(0),  clipped to 0..1

A sim that does what the robot does, only ``d`` s late, has ``e(d) = 0``: share 1 (all lag,
e.g. a slow transport or a late goal start); a sim that moves with the robot but not as far
(a wrong damping or gain) is not helped by any shift: share near 0 (all model). ``sim(t +
tau)`` is interpolated linearly between the window's samples; the mean runs over the samples
``t`` with ``t - max_lag >= t_first`` and ``t + max_lag <= t_last``, the same samples for every
shift, so ``e(0)`` is one of the candidates and the share is never negative before clipping.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from shadow_twin.common.interpolation import shifted

#: Default largest shift tried, s.
DEFAULT_MAX_LAG = 0.2
#: Fewest samples in the middle of the window for a share (fewer: NaN).
MIN_SAMPLES = 5


@dataclass(frozen=True)
class LagShare:
    """Lag share of one joint.

    Attributes:
        share: fraction of the mean squared error a time shift removes, 0..1 (NaN: not enough
            samples, or no error at all).
        lag: the best shift tau, s (sim(t + tau) matches real(t) best; > 0: the sim is late).
        rms: RMS position error without shift over the samples used, rad.
        rms_shifted: RMS position error at the best shift, rad.
    """

    share: float
    lag: float
    rms: float
    rms_shifted: float


def lag_shares(t, sim, real, max_lag: float = DEFAULT_MAX_LAG, step: float | None = None) -> list[LagShare]:
    """The lag share of each joint (see the module doc).

    Args:
        t: (N,) strictly increasing stamps, s.
        sim: (N,) or (N, J) sim positions at ``t``, rad.
        real: the same shape: real positions at ``t``, rad.
        max_lag: largest shift tried either way, s (>= 0).
        step: spacing of the shifts tried, s; default the median sample period, at most max_lag / 20.
    Returns:
        One :class:`LagShare` per joint (J; one for 1-D input). Share NaN when fewer than
        :data:`MIN_SAMPLES` samples lie ``max_lag`` inside both ends of the window, or the
        unshifted error is exactly zero.
    Raises:
        ValueError: shapes that differ, ``t`` not strictly increasing or not (N,), max_lag < 0.
    """
    t = np.asarray(t, dtype=float)
    sim = np.asarray(sim, dtype=float)
    real = np.asarray(real, dtype=float)
    if sim.ndim == 1:
        sim, real = sim[:, None], real[:, None] if real.ndim == 1 else real
    if t.ndim != 1 or sim.shape != real.shape or sim.shape[0] != len(t):
        raise ValueError(f'lag_shares needs t (N,) and sim, real (N, J) alike; got {t.shape}, {sim.shape}, '
                         f'{real.shape}')
    if not max_lag >= 0:
        raise ValueError(f'max_lag must be >= 0 s, got {max_lag!r}')
    joints = sim.shape[1]
    nan = [LagShare(math.nan, math.nan, math.nan, math.nan)] * joints
    if len(t) < 2:
        return nan
    dt = np.diff(t)
    if not np.all(dt > 0):
        raise ValueError('lag_shares needs strictly increasing stamps')
    inner = (t - max_lag >= t[0]) & (t + max_lag <= t[-1])
    if inner.sum() < MIN_SAMPLES:
        return nan
    step = min(float(np.median(dt)), max_lag / 20) if step is None else float(step)
    count = int(math.floor(max_lag / step + 1e-9)) if step > 0 and max_lag > 0 else 0
    taus = np.arange(-count, count + 1) * step
    ti, ri = t[inner], real[inner]
    errors = np.array([np.mean((shifted(t, sim, tau, at=ti) - ri) ** 2, axis=0) for tau in taus])   # (S, J)
    e0 = np.mean((sim[inner] - ri) ** 2, axis=0)
    best = np.argmin(errors, axis=0)
    out = []
    for j in range(joints):
        e_best = min(float(errors[best[j], j]), float(e0[j]))
        share = math.nan if e0[j] == 0 else min(1.0, max(0.0, 1.0 - e_best / float(e0[j])))
        lag = float(taus[best[j]]) if errors[best[j], j] < e0[j] else 0.0
        out.append(LagShare(share, lag, math.sqrt(float(e0[j])), math.sqrt(e_best)))
    return out


class LagWindow:
    """The compared positions of one real stream over the last ``window`` s, for :func:`lag_shares`.

    Args:
        window: length, s (> 0; attribute, may be changed).
        max_samples: hard bound on the samples kept.
    Raises:
        ValueError: ``window`` not > 0.

    Samples are (stamp s, joint names, real positions rad, sim positions rad at that stamp);
    a stamp not newer than the newest empties the window first (the stream restarted).
    """

    def __init__(self, window: float = 2.0, max_samples: int = 20_000) -> None:
        if not window > 0:
            raise ValueError(f'window must be > 0 s, got {window!r}')
        self.window = float(window)
        self._samples: deque = deque(maxlen=max_samples)

    def __len__(self) -> int:
        return len(self._samples)

    def add(self, t: float, names: tuple, real, sim) -> None:
        """One comparison: (J,) real and sim positions (rad) of ``names`` at stamp ``t`` (s)."""
        if self._samples and t <= self._samples[-1][0]:
            self._samples.clear()
        self._samples.append((float(t), names, np.asarray(real, dtype=float), np.asarray(sim, dtype=float)))
        while self._samples and self._samples[0][0] <= t - self.window:
            self._samples.popleft()

    def shares(self, max_lag: float = DEFAULT_MAX_LAG) -> dict[str, LagShare]:
        """{joint: LagShare} over the window's samples that have the newest sample's joints
        (in its order); empty without samples."""
        if not self._samples:
            return {}
        names = self._samples[-1][1]
        rows = [s for s in self._samples if s[1] is names or s[1] == names]
        t = np.array([s[0] for s in rows])
        real = np.array([s[2] for s in rows]).reshape(len(rows), len(names))
        sim = np.array([s[3] for s in rows]).reshape(len(rows), len(names))
        return dict(zip(names, lag_shares(t, sim, real, max_lag)))
