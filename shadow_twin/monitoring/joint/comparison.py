"""Comparing sim with real joint samples: the error (sim minus real), which samples to compare
next, merging the errors of several streams, and the error statistics over a sliding window.

Part of the twin monitor's core; :mod:`shadow_twin.monitoring.joint.error` has the overview.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from shadow_twin.monitoring.joint.samples import JointSample, JointStateHistory


@dataclass(frozen=True, eq=False)
class JointError:
    """Sim minus real at one time.

    Attributes:
        t: stamp of the real sample compared, s.
        names: joints in both samples, in the real sample's order (K,).
        position: (K,) sim - real position, rad.
        velocity: (K,) sim - real velocity, rad/s (NaN where either is unknown).
        stamp: the real sample's original stamp object (or None).
    """

    t: float
    names: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    stamp: Any = None


@functools.lru_cache(maxsize=64)
def _pairing(sim_names: tuple[str, ...], real_names: tuple[str, ...],
             excluded: frozenset = frozenset()) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    index = {n: k for k, n in enumerate(sim_names)}
    real_idx = [k for k, n in enumerate(real_names) if n in index and n not in excluded]
    names = tuple(real_names[k] for k in real_idx)
    return names, np.array([index[n] for n in names], dtype=int), np.array(real_idx, dtype=int)


def joint_error(sim: JointSample, real: JointSample, excluded: frozenset = frozenset()) -> JointError:
    """Sim minus real for the joints present in both samples.

    Args:
        sim: the simulated state (normally interpolated at ``real.t``).
        real: the robot's state.
        excluded: joints left out (those another real stream owns, see :class:`SimRealMonitor`).
    Returns:
        JointError stamped with ``real``'s time and stamp; joints in ``real``'s order
        (a joint only in one of them is left out; none in common gives empty arrays).
    """
    names, si, ri = _pairing(tuple(sim.names), tuple(real.names), excluded)
    return JointError(real.t, names, sim.position[si] - real.position[ri], sim.velocity[si] - real.velocity[ri],
                      real.stamp)


def merge_errors(errors: Sequence[JointError]) -> JointError:
    """One error holding every joint of ``errors`` (each the newest comparison of one real stream).

    Joints in the given order (stream by stream, each in its own order); the stamp (``t``
    and ``stamp``) is that of the newest error, so the other streams' joints are as of
    their own, older stamps (at most one of their periods older while they flow). One
    error is returned as it is. Raises ValueError without errors.
    """
    if not errors:
        raise ValueError('merge_errors needs at least one error')
    if len(errors) == 1:
        return errors[0]
    newest = max(errors, key=lambda e: e.t)
    names = tuple(n for e in errors for n in e.names)
    return JointError(newest.t, names, np.concatenate([e.position for e in errors]),
                      np.concatenate([e.velocity for e in errors]), newest.stamp)


def aligned(real: JointStateHistory, sim: JointStateHistory, last_t: float | None,
            max_gap: float) -> tuple[JointSample, JointSample] | None:
    """(real sample, sim state at its stamp) to compare next, or None.

    The real sample is the newest one, or, when the sim's newest stamp is older, the
    newest real sample that the sim history covers (so that the sim is interpolated,
    not held); it must be newer than ``last_t`` (the stamp compared last, s; None:
    none yet). The sim state is :meth:`JointStateHistory.at` the real stamp, within
    ``max_gap`` s outside the sim history. None when there is nothing new or no sim
    state within ``max_gap`` s of it.
    """
    newest = real.latest()
    sim_span = sim.span()
    if newest is None or sim_span is None:
        return None
    if newest.t > sim_span[1]:
        covered = real.newest_not_after(sim_span[1])
        if covered is not None and (last_t is None or covered.t > last_t):
            newest = covered
    if last_t is not None and newest.t <= last_t:
        return None
    state = sim.at(newest.t, max_gap)
    return None if state is None else (newest, state)


@dataclass(frozen=True)
class JointStats:
    """Error statistics of one joint over a window.

    Attributes:
        rms_position: RMS of the position error, rad.
        rms_velocity: RMS of the finite velocity errors, rad/s (NaN if none).
        max_abs_position: largest |position error|, rad.
        samples: number of error samples (each one comparison).
        window: the window length, s.
    """

    rms_position: float
    rms_velocity: float
    max_abs_position: float
    samples: int
    window: float


class ErrorWindow:
    """Errors of the last ``window`` s, by their stamps.

    Args:
        window: length, s (> 0); may be changed later (attribute ``window``).
        max_samples: hard bound on the errors kept.
    Raises:
        ValueError: ``window`` not > 0.

    An error older than the newest one added means the stream restarted: the window
    is emptied first.
    """

    def __init__(self, window: float = 2.0, max_samples: int = 100_000) -> None:
        if not window > 0:
            raise ValueError(f'window must be > 0 s, got {window!r}')
        self.window = float(window)
        self._errors: deque[JointError] = deque(maxlen=max_samples)

    def __len__(self) -> int:
        return len(self._errors)

    def clear(self) -> None:
        self._errors.clear()

    def add(self, error: JointError) -> None:
        """Add one comparison; drops the errors that left the window."""
        if self._errors and error.t < self._errors[-1].t:
            self._errors.clear()
        self._errors.append(error)
        self._expire(error.t)

    def _expire(self, now: float) -> None:
        while self._errors and self._errors[0].t <= now - self.window:
            self._errors.popleft()

    def stats(self, now: float | None = None) -> dict[str, JointStats]:
        """{joint: JointStats} over the errors with ``now - window < t <= now``
        (``now`` defaults to the newest error's stamp), in the newest error's joint
        order (then joints seen only earlier). Empty if no error is in the window."""
        if not self._errors:
            return {}
        now = self._errors[-1].t if now is None else float(now)
        self._expire(now)
        sums: dict[str, list] = {}   # joint: [sum dp^2, sum dv^2, count dv finite, max |dp|, count]
        for err in reversed(self._errors):
            if err.t > now:
                continue
            for name, dp, dv in zip(err.names, err.position, err.velocity):
                acc = sums.get(name)
                if acc is None:
                    acc = sums[name] = [0.0, 0.0, 0, 0.0, 0]
                acc[0] += dp * dp
                if math.isfinite(dv):
                    acc[1] += dv * dv
                    acc[2] += 1
                acc[3] = max(acc[3], abs(dp))
                acc[4] += 1
        out = {}
        for name, (sp, sv, nv, mx, n) in sums.items():
            out[name] = JointStats(math.sqrt(sp / n), math.sqrt(sv / nv) if nv else math.nan, mx, n, self.window)
        return out
