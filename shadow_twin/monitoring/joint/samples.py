"""Joint-state samples of one stream and their recent history, interpolated at any stamp.

Part of the twin monitor's core; :mod:`shadow_twin.monitoring.joint.error` has the overview.
"""

from __future__ import annotations

import functools

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np


@dataclass(frozen=True, eq=False)
class JointSample:
    """One joint state of a stream.

    Attributes:
        t: stamp, s (any clock, the same for both streams).
        names: joint names (J,).
        position: (J,) float64, rad.
        velocity: (J,) float64, rad/s; NaN where unknown.
        stamp: the original stamp object (e.g. ``builtin_interfaces/Time``), carried
            through unchanged so that it can be republished exactly; may be None.
    """

    t: float
    names: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    stamp: Any = None

    @classmethod
    def make(cls, t: float, names: Sequence[str], position: Sequence[float],
             velocity: Sequence[float] | None = None, stamp: Any = None) -> 'JointSample':
        """A sample from plain sequences; ``velocity`` empty or None gives NaN velocities.

        Raises ValueError if ``position`` (or a non-empty ``velocity``) does not have
        one value per name, or ``t`` is not finite.
        """
        names = names if isinstance(names, tuple) else tuple(names)
        pos = np.asarray(position, dtype=float).reshape(-1)
        if velocity is None or len(velocity) == 0:
            vel = np.full(len(names), math.nan)
        else:
            vel = np.asarray(velocity, dtype=float).reshape(-1)
        if len(pos) != len(names) or len(vel) != len(names):
            raise ValueError(f'joint state with {len(names)} names has {len(pos)} positions and '
                             f'{len(vel)} velocities')
        if not math.isfinite(t):
            raise ValueError(f'joint state stamp must be finite, got {t!r}')
        return cls(float(t), names, pos, vel, stamp)


class JointStateHistory:
    """The recent samples of one stream, ordered by stamp.

    Args:
        max_age: samples older than the newest one by more than this are dropped, s (> 0).
        max_samples: at most this many samples are kept (>= 2).
    Raises:
        ValueError: bad bounds.

    A sample with the newest stamp replaces the newest sample (a repeated state); a
    sample older than the newest means the stream restarted (e.g. a simulation
    reset to an earlier time): the history starts again from it.
    """

    def __init__(self, max_age: float = 1.0, max_samples: int = 2000) -> None:
        if not max_age > 0 or max_samples < 2:
            raise ValueError(f'history needs max_age > 0 and max_samples >= 2, got {max_age!r}, {max_samples!r}')
        self.max_age = float(max_age)
        self.max_samples = int(max_samples)
        self._times: list[float] = []
        self._samples: list[JointSample] = []

    def __len__(self) -> int:
        return len(self._samples)

    def clear(self) -> None:
        self._times.clear()
        self._samples.clear()

    def add(self, sample: JointSample) -> None:
        """Append ``sample`` (see the class doc for repeated and older stamps), then drop
        what is too old or too many."""
        times = self._times
        if times and sample.t <= times[-1]:
            if sample.t == times[-1]:
                self._samples[-1] = sample
                return
            self.clear()
        times.append(sample.t)
        self._samples.append(sample)
        cut = max(bisect_left(times, sample.t - self.max_age), len(times) - self.max_samples)
        if cut > 0:
            del times[:cut]
            del self._samples[:cut]

    def latest(self) -> JointSample | None:
        """The newest sample, or None."""
        return self._samples[-1] if self._samples else None

    def span(self) -> tuple[float, float] | None:
        """(oldest, newest) stamp, s, or None when empty."""
        return (self._times[0], self._times[-1]) if self._times else None

    def newest_not_after(self, t: float) -> JointSample | None:
        """The newest sample with stamp <= ``t``, or None."""
        k = bisect_right(self._times, t)
        return self._samples[k - 1] if k > 0 else None

    def after(self, t: float | None) -> list[JointSample]:
        """The samples with stamp > ``t`` (all for None), oldest first."""
        return list(self._samples) if t is None else self._samples[bisect_right(self._times, t):]

    def at(self, t: float, max_gap: float = 0.0) -> JointSample | None:
        """The state at ``t``.

        Within the span: linear interpolation of positions and velocities between the
        two samples around ``t`` (a returned sample with stamp ``t`` and ``stamp`` None;
        the stored sample itself at an exact stamp; the nearer one if the two have
        different joints). Outside the span by at most ``max_gap`` s: the nearest
        (first or newest) sample, unchanged. Further outside, or empty: None.
        """
        times = self._times
        if not times:
            return None
        if t >= times[-1]:
            return self._samples[-1] if t - times[-1] <= max_gap else None
        if t <= times[0]:
            return self._samples[0] if times[0] - t <= max_gap else None
        k = bisect_right(times, t)          # times[k - 1] <= t < times[k]
        a, b = self._samples[k - 1], self._samples[k]
        if a.t == t:
            return a
        w = (t - a.t) / (b.t - a.t)
        if not (a.names is b.names or a.names == b.names):
            return a if w < 0.5 else b
        return JointSample(t, a.names, a.position + w * (b.position - a.position),
                           a.velocity + w * (b.velocity - a.velocity))


@functools.lru_cache(maxsize=64)
def _indices(names: tuple, subset: tuple) -> np.ndarray:
    where = {n: k for k, n in enumerate(names)}
    return np.array([where[n] for n in subset], dtype=int)


def positions_of(sample: JointSample, names: tuple[str, ...]) -> np.ndarray:
    """(K,) positions (rad) of ``names`` (a tuple, each in ``sample``) in ``sample``. Raises
    KeyError for a name it does not have."""
    if names is sample.names or names == sample.names:
        return sample.position
    return sample.position[_indices(sample.names, names)]

