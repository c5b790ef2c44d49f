"""Drift watch: a long-window trend of each joint's sim-real error, its baseline, and which
joints have drifted from it (the real hand wears: grease, tendon tension), persisted in a file.

Part of the twin monitor's core (:mod:`shadow_twin.monitoring.joint.error` has the overview).

* Buckets: the comparisons (sim - real position error, rad, at real stamps, s) are summed per
  joint into buckets of ``bucket`` s by stamp: sum of squared errors, count, and the span of
  the joint's real position in the bucket. A joint *moved* in a bucket when that span is at
  least ``min_motion`` rad; only such buckets count, so a robot standing still (whose error is
  its steady offset, often near zero) does not dilute the trend.
* Trend of a joint: the RMS error over its moved buckets of the last ``window`` s (rad);
  NaN without any.
* Baseline of a joint: its trend over its first full ``window`` of stamps from its first moved
  bucket after the baseline was (re)started: at the first start ever (nothing persisted), after
  a calibration was installed (the caller says so: :meth:`DriftTrend.restart_baseline`; the
  trend restarts too, since the buckets before it measured the old model), or set by hand from
  the current trend (:meth:`DriftTrend.set_baseline_now`). Counting from each joint's first
  motion keeps a robot that idles after start (or moves one finger only) from getting a baseline
  out of a few start-up buckets.
* Drifted: trend >= max(``ratio`` x baseline, ``min_error``) (the floor keeps noise on a
  near-zero baseline from alarming).
* Idle windows (:class:`IdleWatch`): robot and sim still for ``idle_time`` s of stamps, when an
  automatic calibration may start.
* Persistence: :meth:`DriftTrend.to_dict` / :meth:`DriftTrend.from_dict` (JSON-able), written
  with :func:`save_state` atomically (``shadow_twin.common.files``) and read with
  :func:`load_state` (a corrupt or hostile file: one line, moved aside, a fresh trend).

Times are the comparisons' stamps (s, the robot's clock), so a trend persisted across a restart
goes on where it stopped; buckets older than ``window`` s behind the newest stamp are dropped.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.files import sha256_of, write_text_atomic
from shadow_twin.common.state_files import read_state

#: Version of the state file's layout.
STATE_VERSION = 1
DEFAULT_WINDOW, DEFAULT_BUCKET = 86400.0, 60.0
DEFAULT_RATIO, DEFAULT_MIN_ERROR, DEFAULT_MIN_MOTION = 2.0, 0.02, 0.05


@dataclass(frozen=True)
class DriftSettings:
    """Drift watch settings.

    Attributes:
        window: trend window, s (>= bucket).
        bucket: bucket length, s (> 0).
        ratio: a trend this many times its baseline has drifted (> 1).
        min_error: nor below this trend, rad (>= 0).
        min_motion: a joint moved in a bucket when its real position spans this much, rad (>= 0).
    Raises:
        ConfigError: out of range (see :meth:`checked`).
    """

    window: float = DEFAULT_WINDOW
    bucket: float = DEFAULT_BUCKET
    ratio: float = DEFAULT_RATIO
    min_error: float = DEFAULT_MIN_ERROR
    min_motion: float = DEFAULT_MIN_MOTION

    def __post_init__(self) -> None:
        if not self.bucket > 0:
            raise ConfigError(f'drift.bucket must be > 0 s, got {self.bucket!r}')
        if not self.window >= self.bucket:
            raise ConfigError(f'drift.window ({self.window:g} s) must be >= drift.bucket ({self.bucket:g} s)')
        if not self.ratio > 1:
            raise ConfigError(f'drift.ratio must be > 1, got {self.ratio!r}')
        if not (self.min_error >= 0 and self.min_motion >= 0):
            raise ConfigError(f'drift.min_error and drift.min_motion must be >= 0 rad, got {self.min_error!r}, '
                              f'{self.min_motion!r}')


@dataclass(frozen=True)
class JointDrift:
    """One joint's drift verdict: trend and baseline (rad, NaN when unknown), moved buckets in the
    window, the trend / baseline ratio (NaN without both) and whether it drifted."""

    name: str
    trend: float
    baseline: float
    buckets: int
    ratio: float
    drifted: bool


class _OpenBucket:
    """The bucket being filled: per joint-name tuple, sums as arrays."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.groups: dict[tuple, list] = {}     # names: [sum e^2 (J,), count, min pos (J,), max pos (J,)]

    def add(self, names: tuple, error: np.ndarray, position: np.ndarray) -> None:
        acc = self.groups.get(names)
        if acc is None:
            self.groups[names] = [error * error, 1, position.copy(), position.copy()]
            return
        acc[0] += error * error
        acc[1] += 1
        np.minimum(acc[2], position, out=acc[2])
        np.maximum(acc[3], position, out=acc[3])

    def closed(self, min_motion: float) -> dict[str, list]:
        """{joint: [sum e^2, count]} of the joints that moved at least ``min_motion`` rad."""
        out: dict[str, list] = {}
        for names, (sq, n, lo, hi) in self.groups.items():
            for name, s, moved in zip(names, sq, hi - lo >= min_motion):
                if moved and math.isfinite(s):
                    acc = out.setdefault(name, [0.0, 0])
                    acc[0] += float(s)
                    acc[1] += n
        return out


class DriftTrend:
    """The drift watch's state (see the module doc).

    Args:
        settings: :class:`DriftSettings` (attribute; replace to change them).
    """

    def __init__(self, settings: DriftSettings | None = None) -> None:
        self.settings = settings or DriftSettings()
        self.buckets: list[tuple[float, dict[str, list]]] = []     # (start s, {joint: [sum e^2, n]})
        self.baseline: dict[str, float] = {}
        self.first_moved: dict[str, float] = {}      # joint: start of its first moved bucket since the restart
        self.baseline_source = 'first full window after start'
        self.baseline_set_at: float | None = None
        self.model: str | None = None               # the installed model the baseline belongs to (path)
        self.model_id: str | None = None            # its identity (see model_identity)
        self._open: _OpenBucket | None = None
        self.newest: float | None = None

    # -- input -------------------------------------------------------------------------------
    def add(self, t: float, names: Sequence[str], error, position) -> bool:
        """One comparison at stamp ``t`` (s): (J,) sim - real position error and real position
        (rad) of ``names``. Returns True when a bucket closed (the trend changed): then call
        :meth:`report`. A stamp before the open bucket drops that bucket (the stream restarted)."""
        names = names if isinstance(names, tuple) else tuple(names)
        bucket = self.settings.bucket
        closed = False
        if self._open is not None and t < self._open.start:
            self._open = None
        if self._open is not None and t >= self._open.start + bucket:
            self._close()
            closed = True
        if self._open is None:
            self._open = _OpenBucket(math.floor(t / bucket) * bucket)
        self._open.add(names, np.asarray(error, dtype=float), np.asarray(position, dtype=float))
        self.newest = t if self.newest is None else max(self.newest, t)
        return closed

    def _close(self) -> None:
        moved = self._open.closed(self.settings.min_motion)
        end = self._open.start + self.settings.bucket
        self._open = None
        if moved:
            start = end - self.settings.bucket
            self.buckets.append((start, moved))
            for name in moved:
                if name not in self.baseline:
                    self.first_moved.setdefault(name, start)
        self._expire(end)
        self._update_baseline(end)

    def _expire(self, now: float) -> None:
        cut = now - self.settings.window
        while self.buckets and self.buckets[0][0] < cut:
            self.buckets.pop(0)

    def _update_baseline(self, now: float) -> None:
        """Set the baseline of each joint without one whose window from its first motion is full."""
        full = [n for n, since in self.first_moved.items() if now - since >= self.settings.window - 1e-9]
        if not full:
            return
        trend = self.trend()
        for name in full:
            del self.first_moved[name]
            if name in trend:
                self.baseline[name] = trend[name]
                self.baseline_set_at = now

    # -- baseline ----------------------------------------------------------------------------
    def restart_baseline(self, source: str, model: str | None = None, model_id: str | None = None) -> None:
        """Forget the trend and the baseline; the baseline becomes the first full window from
        the next comparison (``source`` says why, e.g. ``calibration installed: <model>``)."""
        self.buckets.clear()
        self._open = None
        self.baseline = {}
        self.first_moved = {}
        self.baseline_set_at = None
        self.baseline_source = source
        if model is not None:
            self.model, self.model_id = model, model_id or model

    def set_baseline_now(self, source: str = 'set by hand') -> list[str]:
        """The baseline := the current trend of every joint with one (others: at their next
        moved bucket). Returns the joints set."""
        trend = self.trend()
        self.baseline = dict(trend)
        self.first_moved = {}
        self.baseline_set_at = self.newest
        self.baseline_source = source
        return sorted(trend)

    # -- output ------------------------------------------------------------------------------
    def trend(self) -> dict[str, float]:
        """{joint: RMS error over its moved buckets in the window}, rad."""
        sums: dict[str, list] = {}
        for start, joints in self.buckets:
            for name, (sq, n) in joints.items():
                acc = sums.setdefault(name, [0.0, 0, 0])
                acc[0] += sq
                acc[1] += n
                acc[2] += 1
        return {name: math.sqrt(sq / n) for name, (sq, n, _) in sums.items() if n}

    def report(self) -> list[JointDrift]:
        """The verdict of every joint with a trend or a baseline, by name."""
        s = self.settings
        counts: dict[str, int] = {}
        for _, joints in self.buckets:
            for name in joints:
                counts[name] = counts.get(name, 0) + 1
        trend = self.trend()
        out = []
        for name in sorted(set(trend) | set(self.baseline)):
            value, base = trend.get(name, math.nan), self.baseline.get(name, math.nan)
            ratio = value / base if base > 0 and math.isfinite(value) else math.nan
            drifted = math.isfinite(value) and math.isfinite(base) and value >= max(s.ratio * base, s.min_error)
            out.append(JointDrift(name, value, base, counts.get(name, 0), ratio, drifted))
        return out

    def pending(self) -> float | None:
        """Seconds of stamps still needed until every joint that moved has its baseline (0: none
        waits; None: no joint without a baseline has moved yet)."""
        if not self.first_moved:
            return 0.0 if self.baseline else None
        newest = self.newest if self.newest is not None else max(self.first_moved.values())
        return max(0.0, self.settings.window - (newest - min(self.first_moved.values())))

    # -- persistence -------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The persistent state as JSON-able data (closed buckets only)."""
        return {'version': STATE_VERSION, 'window_s': self.settings.window, 'bucket_s': self.settings.bucket,
                'model': self.model, 'model_id': self.model_id, 'baseline': self.baseline, 'first_moved': self.first_moved,
                'baseline_source': self.baseline_source, 'baseline_set_at': self.baseline_set_at,
                'buckets': [[start, joints] for start, joints in self.buckets]}

    @classmethod
    def from_dict(cls, data: dict, settings: DriftSettings | None = None) -> 'DriftTrend':
        """The state of :meth:`to_dict` under ``settings`` (buckets of another length are
        dropped; the baseline is kept). Raises ConfigError for data of another layout, of the
        wrong types, or with values that are not finite (NaN, inf) or negative where they cannot be."""
        trend = cls(settings)
        if not isinstance(data, dict):
            raise ConfigError('drift state is not a JSON object')
        try:
            if data.get('version') != STATE_VERSION:
                raise ConfigError(f'drift state version {data.get("version")!r}, expected {STATE_VERSION}')
            trend.model = _text(data.get('model'), 'model')
            trend.model_id = _text(data.get('model_id'), 'model_id') or trend.model
            trend.baseline = {str(k): _number(v, 'baseline', low=0.0) for k, v in _mapping(data, 'baseline').items()}
            trend.first_moved = {str(k): _number(v, 'first_moved') for k, v in _mapping(data, 'first_moved').items()}
            trend.baseline_source = _text(data.get('baseline_source'), 'baseline_source') or trend.baseline_source
            set_at = data.get('baseline_set_at')
            trend.baseline_set_at = None if set_at is None else _number(set_at, 'baseline_set_at')
            if math.isclose(_number(data.get('bucket_s', -1), 'bucket_s'), trend.settings.bucket):
                for start, joints in data.get('buckets') or []:
                    trend.buckets.append((_number(start, 'bucket start'), {
                        str(k): [_number(v[0], 'squared error', low=0.0), int(_number(v[1], 'count', low=0.0))]
                        for k, v in joints.items()}))
            if trend.buckets:
                trend.newest = trend.buckets[-1][0] + trend.settings.bucket
                trend._expire(trend.newest)
        except (AttributeError, TypeError, ValueError, IndexError, KeyError) as exc:
            raise ConfigError(f'drift state is malformed: {exc!r}') from None
        return trend


def _number(value, what: str, low: float = -math.inf) -> float:
    """``value`` as a finite float >= ``low``; ValueError naming ``what`` otherwise (bools and text included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f'{what} {value!r} is not a number')
    if not (math.isfinite(value) and value >= low):
        raise ValueError(f'{what} {value!r} is not a finite number >= {low:g}')
    return float(value)


def _text(value, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f'{what} {value!r} is not text')
    return value


def _mapping(data: dict, key: str) -> dict:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise ValueError(f'{key} is not a JSON object')
    return value


def model_identity(path: str) -> str:
    """What identifies an installed model: ``sha256:<hex>`` of the MJCF file's bytes when it is
    readable here (the same model copied to another path, as ``shadow-twin up --cell`` writes the
    cell's MJCF into a new temporary directory on each start, is the same model), else the path
    itself ('' for the built-in model)."""
    try:
        return 'sha256:' + sha256_of(path) if path and Path(path).is_file() else str(path)
    except OSError:
        return str(path)


def save_state(trend: DriftTrend, path: str | Path) -> Path:
    """Write ``trend``'s state to ``path`` (JSON, atomically). Raises OSError."""
    return write_text_atomic(path, json.dumps(trend.to_dict(), separators=(',', ':')))


def load_state(path: str | Path, settings: DriftSettings | None, report: Callable[[str], None]
               ) -> DriftTrend | None:
    """The trend saved at ``path``, or None: there is no file, or it is not a drift state (random
    bytes, too deeply nested, too large, the wrong layout or types, NaN, a directory, unreadable):
    then ``report`` gets one line naming it and the problem, and the file is moved aside to
    ``<name>.corrupt-<UTC time>`` (:func:`shadow_twin.common.state_files.read_state`), so that the
    caller starts a fresh trend and its next save does not replace the user's file."""
    return read_state(path, lambda text: DriftTrend.from_dict(json.loads(text), settings), 'drift state', report)


class IdleWatch:
    """Whether the robot and the sim have been still for ``idle_time`` s (on stamps): the idle
    window in which an automatic calibration may start (no goal running).

    Args:
        idle_time: s of stillness needed (> 0).
        still: a position change below this from the last moving position is still, rad (> 0).
    Raises:
        ValueError: a bound not > 0.
    """

    def __init__(self, idle_time: float, still: float = 0.01) -> None:
        if not (idle_time > 0 and still > 0):
            raise ValueError(f'idle_time and still must be > 0, got {idle_time!r}, {still!r}')
        self.idle_time, self.still = float(idle_time), float(still)
        self._reference: dict[int, tuple] = {}      # stream: (names, real, sim) at the last motion
        self.last_motion: float | None = None
        self.newest: float | None = None

    def add(self, stream: int, t: float, names: tuple, real, sim) -> None:
        """(J,) real and sim positions (rad) of ``names`` at stamp ``t`` (s) of real stream ``stream``."""
        real, sim = np.asarray(real, dtype=float), np.asarray(sim, dtype=float)
        ref = self._reference.get(stream)
        moved = (ref is None or ref[0] != names or np.max(np.abs(real - ref[1]), initial=0.0) > self.still
                 or np.max(np.abs(sim - ref[2]), initial=0.0) > self.still)
        if moved:
            self._reference[stream] = (names, real.copy(), sim.copy())
            self.last_motion = t
        self.newest = t if self.newest is None else max(self.newest, t)

    def idle(self) -> bool:
        """True once nothing moved for ``idle_time`` s of stamps."""
        return self.last_motion is not None and self.newest - self.last_motion >= self.idle_time

