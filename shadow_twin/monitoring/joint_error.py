"""ROS-free core of the twin monitor (``shadow_twin.ros.twin_monitor``): how far the sim is from the robot.

* :class:`JointSample`: one joint state of a stream: stamp ``t`` (s), joint names
  (J,), positions (J,) rad, velocities (J,) rad/s (NaN where a message had none).
* :class:`JointStateHistory`: the recent samples of one stream, time-ordered and
  bounded in age and length; :meth:`JointStateHistory.at` interpolates positions
  and velocities linearly at a time ``t``.
* :func:`joint_error`: sim minus real for the joints in both samples, in the
  real sample's joint order; :func:`merge_errors`: the errors of several real
  streams in one; :func:`aligned`: which real sample to compare next, and the sim
  interpolated at its stamp.
* :class:`ErrorWindow`: per joint, over the last ``window`` s of errors: RMS of
  the position error (rad) and of the velocity error (rad/s), max |position
  error| (rad) and the sample count.
* :class:`Thresholds`: warn / error levels (rad, RMS position error), a default
  pair and per-joint-glob overrides (fnmatch on ROS joint names, case-sensitive),
  validated (error >= warn > 0).
* :class:`SimRealMonitor`: all of it together, as the node uses it: feed the sim
  and one or more real streams (e.g. a UR driver's ``/joint_states`` at 125 Hz and
  a hand driver's ``/rh/joint_states`` at 250 Hz), :meth:`SimRealMonitor.update`
  computes the time-aligned error of each real stream's newest sample (each on its
  own stamps) and returns the newest comparison of every joint,
  :meth:`SimRealMonitor.report` gives a level per joint and a summary.

Levels are those of ``diagnostic_msgs/DiagnosticStatus``: :data:`OK` 0,
:data:`WARN` 1, :data:`ERROR` 2, :data:`STALE` 3. A joint is OK below its warn
threshold, WARN from warn (inclusive) to below error, ERROR from error
(inclusive); STALE when the joint's real stream or the sim has been silent for
``stale_after`` s, nothing has arrived yet, or the window holds no error sample of
the joint. The mobile base's pose error is :mod:`shadow_twin.monitoring.base_error`.

Units: positions rad, velocities rad/s, times s.
"""

from __future__ import annotations

import functools
import math
from bisect import bisect_left, bisect_right
from collections import deque
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import yaml

from shadow_twin.common.errors import ConfigError

OK, WARN, ERROR, STALE = 0, 1, 2, 3
LEVEL_NAMES = {OK: 'OK', WARN: 'WARN', ERROR: 'ERROR', STALE: 'STALE'}
#: Default thresholds of the RMS position error, rad.
DEFAULT_WARN, DEFAULT_ERROR = 0.05, 0.2


# ----------------------------------------------------------------------------------- samples
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


# ------------------------------------------------------------------------------------- errors
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


# --------------------------------------------------------------------------------- thresholds
@dataclass(frozen=True)
class Threshold:
    """Warn and error level of a joint's RMS position error, rad (error >= warn > 0)."""

    warn: float
    error: float

    def level(self, rms: float) -> int:
        """OK below ``warn``, WARN from ``warn`` to below ``error``, ERROR from ``error``;
        STALE for NaN."""
        if math.isnan(rms):
            return STALE
        if rms >= self.error:
            return ERROR
        if rms >= self.warn:
            return WARN
        return OK


def _number(value, what: str, unit: str = 'rad') -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f'{what} must be a finite number ({unit}), got {value!r}')
    return float(value)


def checked_threshold(warn, error, where: str, unit: str = 'rad') -> Threshold:
    """A :class:`Threshold` of ``warn`` and ``error`` (in ``unit``), validated: finite
    numbers, error >= warn > 0. Raises ConfigError naming ``where``."""
    warn = _number(warn, f'warn threshold of {where}', unit)
    error = _number(error, f'error threshold of {where}', unit)
    if not warn > 0:
        raise ConfigError(f'warn threshold of {where} must be > 0 {unit}, got {warn:g}')
    if not error >= warn:
        raise ConfigError(f'thresholds of {where}: error ({error:g} {unit}) must be >= warn ({warn:g} {unit})')
    return Threshold(warn, error)



class Thresholds:
    """Warn / error thresholds of the RMS position error per joint.

    Args:
        warn: default warn threshold, rad.
        error: default error threshold, rad.
        overrides: ``{joint_glob: {warn: rad, error: rad}}`` (either key may be left
            out: the default is used); the first glob (in the given order) that
            matches a joint name (fnmatch, case-sensitive) sets that joint's pair.
    Raises:
        ConfigError: a value that is not a finite number, warn <= 0, error < warn
            (after filling in defaults), an unknown key, an empty glob; the message
            names the glob (or the default).
    """

    def __init__(self, warn: float = DEFAULT_WARN, error: float = DEFAULT_ERROR,
                 overrides: Mapping[str, Mapping[str, float]] | None = None) -> None:
        self.default = checked_threshold(warn, error, 'the default (thresholds.warn, thresholds.error)')
        self.overrides: list[tuple[str, Threshold]] = []
        if overrides is None:
            overrides = {}
        if not isinstance(overrides, Mapping):
            raise ConfigError(f'threshold overrides must map joint globs to {{warn: rad, error: rad}}, '
                              f'got {overrides!r}')
        for glob, entry in overrides.items():
            glob = str(glob).strip()
            if not glob:
                raise ConfigError('threshold overrides: a joint glob is empty')
            where = f'joints {glob!r} (threshold_overrides)'
            if not isinstance(entry, Mapping):
                raise ConfigError(f'{where} must be {{warn: rad, error: rad}}, got {entry!r}')
            unknown = sorted(str(k) for k in entry if k not in ('warn', 'error'))
            if unknown:
                raise ConfigError(f'{where}: unknown key(s) {unknown} (allowed: warn, error)')
            self.overrides.append((glob, checked_threshold(entry.get('warn', self.default.warn),
                                                           entry.get('error', self.default.error), where)))
        self._cache: dict[str, Threshold] = {}

    @classmethod
    def from_config(cls, warn: float, error: float, overrides_yaml: str | None) -> 'Thresholds':
        """Thresholds from the node's parameters: ``overrides_yaml`` is YAML text of the
        overrides mapping (empty or None: none). Raises ConfigError (also for bad YAML)."""
        overrides = None
        if overrides_yaml and overrides_yaml.strip():
            try:
                overrides = yaml.safe_load(overrides_yaml)
            except yaml.YAMLError as exc:
                raise ConfigError(f'threshold_overrides is not valid YAML: {" ".join(str(exc).split())}') from None
        return cls(warn, error, overrides)

    def for_joint(self, joint: str) -> Threshold:
        """The pair of ``joint``: the first matching override, else the default."""
        found = self._cache.get(joint)
        if found is None:
            found = next((t for glob, t in self.overrides if fnmatchcase(joint, glob)), self.default)
            self._cache[joint] = found
        return found

    def level(self, joint: str, rms: float) -> int:
        """Level of ``joint`` at RMS position error ``rms`` rad (see :meth:`Threshold.level`)."""
        return self.for_joint(joint).level(rms)

    def unused_globs(self, joints: Iterable[str]) -> list[str]:
        """Override globs that set the thresholds of none of ``joints``: they match none
        (a typo?), or an earlier glob takes every joint they match."""
        used = set()
        for joint in joints:
            k = next((k for k, (glob, _) in enumerate(self.overrides) if fnmatchcase(joint, glob)), None)
            if k is not None:
                used.add(k)
        return [glob for k, (glob, _) in enumerate(self.overrides) if k not in used]


# ------------------------------------------------------------------------------------ monitor
@dataclass(frozen=True)
class JointReport:
    """One joint's verdict: level, one-line message, statistics (None without samples), thresholds."""

    name: str
    level: int
    message: str
    stats: JointStats | None
    threshold: Threshold


@dataclass(frozen=True)
class MonitorReport:
    """Per-joint verdicts (in the error's joint order) and the summary: the worst level,
    a message naming the worst joint, and that joint (None without joints)."""

    joints: list[JointReport]
    level: int
    message: str
    worst: str | None = None
    stale: list[str] = field(default_factory=list)


def stale_phrase(label: str, last_arrival: float | None, now: float, stale_after: float) -> str | None:
    """Why a stream named ``label`` is stale at ``now`` (s, arrival clock): nothing received
    yet, or nothing for more than ``stale_after`` s since ``last_arrival``; None if it flows."""
    if last_arrival is None:
        return f'nothing received on {label} yet'
    if now - last_arrival > stale_after:
        return f'nothing received on {label} for {now - last_arrival:.1f} s'
    return None


class RealStream:
    """One real joint-state stream (topic) of :class:`SimRealMonitor`: its samples, its
    errors and the newest of them, the stamp compared last (s) and the last arrival (s)."""

    def __init__(self, label: str, history_age: float, window: float) -> None:
        self.label = label
        self.history = JointStateHistory(history_age)
        self.errors = ErrorWindow(window)
        self.latest_error: JointError | None = None
        self.last_t: float | None = None
        self.arrival: float | None = None

    def restart(self) -> None:
        """Forget what was compared (the stream's stamps went back)."""
        self.latest_error = None
        self.last_t = None


@functools.lru_cache(maxsize=64)
def _union(names: tuple[tuple[str, ...], ...]) -> frozenset:
    return frozenset(n for group in names for n in group)


class SimRealMonitor:
    """Compares a simulated joint-state stream with one or more real ones over time.

    Args:
        thresholds: the levels (attribute, may be replaced).
        window: RMS window, s.
        stale_after: a stream with no sample for this long (on the ``arrival`` clock
            given to :meth:`add_real` / :meth:`add_sim`) is stale, s.
        max_gap: a real stamp outside the sim history by at most this much is compared
            with the nearest sim sample, s.
        history_age: how much of each stream is kept, s (> ``max_gap``).
        real_label, sim_label: how the streams are named in messages (e.g. topics).
        real_labels: several real streams (e.g. ``/joint_states`` of a UR driver at
            125 Hz and ``/rh/joint_states`` of a hand's driver at 250 Hz), in this order;
            replaces ``real_label``.
    Raises:
        ValueError: non-positive window, history_age or stale_after; no real stream or
            a repeated label.

    Several real streams: each is compared on its own stamps with the sim interpolated
    at them (:func:`aligned`), so every comparison is exact in time whatever the
    streams' rates and phases; merging the streams into one real state first would
    hold one stream's joints up to one of its periods (8 ms at 125 Hz) while comparing
    them at the other's stamp. A joint in more than one real stream is compared from
    the first stream (in the given order) whose newest sample has it. Each stream keeps
    its own error window (an error older than the newest one restarts a window: one
    window over interleaved streams would see that all the time), and
    :meth:`report` takes each joint's statistics from its stream's window.
    :meth:`update` returns the newest comparison of every stream in one error
    (:func:`merge_errors`), stamped with the newest of them.
    """

    def __init__(self, thresholds: Thresholds, window: float = 2.0, stale_after: float = 0.5,
                 max_gap: float = 0.05, history_age: float = 1.0, real_label: str = 'real',
                 sim_label: str = 'sim', real_labels: Sequence[str] | None = None) -> None:
        if not stale_after > 0:
            raise ValueError(f'stale_after must be > 0 s, got {stale_after!r}')
        if not window > 0:
            raise ValueError(f'window must be > 0 s, got {window!r}')
        labels = [real_label] if real_labels is None else [str(label) for label in real_labels]
        if not labels or len(set(labels)) != len(labels):
            raise ValueError(f'real streams must be one or more distinct labels, got {labels!r}')
        self.thresholds = thresholds
        self.stale_after = float(stale_after)
        self.max_gap = float(max_gap)
        self.streams = [RealStream(label, history_age, window) for label in labels]
        self.sim = JointStateHistory(history_age)
        self.sim_label = sim_label
        self._sim_arrival: float | None = None
        self._window = float(window)
        self._published_t: float | None = None

    @property
    def window(self) -> float:
        """RMS window, s."""
        return self._window

    @window.setter
    def window(self, value: float) -> None:
        if not value > 0:
            raise ValueError(f'window must be > 0 s, got {value!r}')
        self._window = float(value)
        for stream in self.streams:
            stream.errors.window = self._window

    @property
    def real(self) -> JointStateHistory:
        """The first real stream's history."""
        return self.streams[0].history

    def add_real(self, sample: JointSample, arrival: float, stream: int = 0) -> None:
        """A sample of real stream number ``stream`` (in the order of ``real_labels``),
        received at ``arrival`` (s, the clock of ``report``'s ``now``)."""
        real = self.streams[stream]
        latest = real.history.latest()
        if latest is not None and sample.t < latest.t:        # the stream restarted
            real.restart()
            self._published_t = None
        real.history.add(sample)
        real.arrival = arrival

    def add_sim(self, sample: JointSample, arrival: float) -> None:
        """A sample of the sim, received at ``arrival`` s."""
        self.sim.add(sample)
        self._sim_arrival = arrival

    def _compare(self, stream: RealStream, excluded: frozenset) -> JointError | None:
        pair = aligned(stream.history, self.sim, stream.last_t, self.max_gap)
        if pair is None:
            return None
        real, sim = pair
        error = joint_error(sim, real, excluded)
        stream.last_t = real.t
        stream.latest_error = error
        stream.errors.add(error)
        return error

    def update(self) -> JointError | None:
        """Compare each real stream's next sample (:func:`aligned`) with the sim at its
        stamp, add the results to the windows, and return the newest comparison of every
        stream merged (:func:`merge_errors`; with one stream, that comparison).

        A stream whose newest comparison is older than the newest one by more than
        ``stale_after`` s is left out. Returns None when no stream has a new comparison
        or the merged stamp would not be newer than the last one returned (stamps
        strictly increase, except after a real stream restarted).
        """
        new = False
        owners: list[tuple[str, ...]] = []
        for stream in self.streams:
            if self._compare(stream, _union(tuple(owners))) is not None:
                new = True
            latest = stream.history.latest()
            if latest is not None:
                owners.append(latest.names)
        if not new:
            return None
        errors = [s.latest_error for s in self.streams if s.latest_error is not None]
        newest = max(e.t for e in errors)
        if self._published_t is not None and newest <= self._published_t:
            return None
        self._published_t = newest
        return merge_errors([e for e in errors if e.t >= newest - self.stale_after])

    def stale_streams(self, now: float) -> list[str]:
        """Why the comparison is stale at ``now`` (arrival clock, s): one phrase per
        silent stream (real streams first); empty when all are flowing."""
        phrases = [stale_phrase(s.label, s.arrival, now, self.stale_after) for s in self.streams]
        phrases.append(stale_phrase(self.sim_label, self._sim_arrival, now, self.stale_after))
        return [p for p in phrases if p is not None]

    def report(self, now: float) -> MonitorReport:
        """Levels per joint and the summary at ``now`` (arrival clock, s).

        Joints: stream by stream (in order), those of its newest comparison in its order,
        then joints seen only earlier in its window. A joint is STALE while its stream or
        the sim is silent (see :meth:`stale_streams`). The summary level is the worst joint
        level, STALE when any stream is silent; its message names the worst joint (highest
        level, then highest RMS error)."""
        sim_stale = stale_phrase(self.sim_label, self._sim_arrival, now, self.stale_after)
        window = self._window
        joints: list[JointReport] = []
        seen: set[str] = set()
        for stream in self.streams:
            stats = stream.errors.stats()
            order = stream.latest_error.names if stream.latest_error is not None else ()
            why = [p for p in (stale_phrase(stream.label, stream.arrival, now, self.stale_after), sim_stale) if p]
            for name in list(order) + [n for n in stats if n not in order]:
                if name in seen:
                    continue
                seen.add(name)
                joints.append(self._joint_report(name, stats.get(name), why, window))
        stale = self.stale_streams(now)
        if not joints:
            reason = '; '.join(stale) if stale else 'no joint is in both streams'
            return MonitorReport([], STALE, reason, None, stale)

        def badness(j: JointReport):
            return j.level, j.stats.rms_position if j.stats is not None else -1.0
        worst = max(joints, key=badness)
        counts = {lvl: sum(1 for j in joints if j.level == lvl) for lvl in (WARN, ERROR)}
        what = (f'RMS error {worst.stats.rms_position:.3f} rad' if worst.stats is not None else 'no comparison')
        message = (f'worst joint {worst.name}: {what} ({LEVEL_NAMES[worst.level]}); '
                   f'{counts[ERROR]} ERROR, {counts[WARN]} WARN of {len(joints)} joints over {window:.1f} s')
        level = worst.level
        if stale:
            message = '; '.join(stale) + '; ' + message
            level = STALE
        return MonitorReport(joints, level, message, worst.name, stale)

    def _joint_report(self, name: str, st: JointStats | None, stale: list[str], window: float) -> JointReport:
        threshold = self.thresholds.for_joint(name)
        if st is None:
            level, message = STALE, f'no comparison in the last {window:.1f} s'
        else:
            level = threshold.level(st.rms_position)
            message = f'RMS error {st.rms_position:.3f} rad over {window:.1f} s'
        if stale:
            level, message = STALE, '; '.join(stale) + (f' (last: {message})' if st is not None else '')
        return JointReport(name, level, message, st, threshold)
