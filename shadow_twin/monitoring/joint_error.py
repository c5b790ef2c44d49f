"""ROS-free core of the twin monitor (``shadow_twin.ros.twin_monitor``): how far the sim is from the robot.

* :class:`JointSample`: one joint state of a stream: stamp ``t`` (s), joint names
  (J,), positions (J,) rad, velocities (J,) rad/s (NaN where a message had none).
* :class:`JointStateHistory`: the recent samples of one stream, time-ordered and
  bounded in age and length; :meth:`JointStateHistory.at` interpolates positions
  and velocities linearly at a time ``t``.
* :func:`joint_error`: sim minus real for the joints in both samples, in the
  real sample's joint order.
* :class:`ErrorWindow`: per joint, over the last ``window`` s of errors: RMS of
  the position error (rad) and of the velocity error (rad/s), max |position
  error| (rad) and the sample count.
* :class:`Thresholds`: warn / error levels (rad, RMS position error), a default
  pair and per-joint-glob overrides (fnmatch on ROS joint names, case-sensitive),
  validated (error >= warn > 0).
* :class:`SimRealMonitor`: all of it together, as the node uses it: feed both
  streams, :meth:`SimRealMonitor.update` computes the time-aligned error of the
  newest real sample, :meth:`SimRealMonitor.report` gives a level per joint and
  a summary.

Levels are those of ``diagnostic_msgs/DiagnosticStatus``: :data:`OK` 0,
:data:`WARN` 1, :data:`ERROR` 2, :data:`STALE` 3. A joint is OK below its warn
threshold, WARN from warn (inclusive) to below error, ERROR from error
(inclusive); STALE when a stream has been silent for ``stale_after`` s, nothing
has arrived yet, or the window holds no error sample of the joint.

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
def _pairing(sim_names: tuple[str, ...], real_names: tuple[str, ...]) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    index = {n: k for k, n in enumerate(sim_names)}
    real_idx = [k for k, n in enumerate(real_names) if n in index]
    names = tuple(real_names[k] for k in real_idx)
    return names, np.array([index[n] for n in names], dtype=int), np.array(real_idx, dtype=int)


def joint_error(sim: JointSample, real: JointSample) -> JointError:
    """Sim minus real for the joints present in both samples.

    Args:
        sim: the simulated state (normally interpolated at ``real.t``).
        real: the robot's state.
    Returns:
        JointError stamped with ``real``'s time and stamp; joints in ``real``'s order
        (a joint only in one of them is left out; none in common gives empty arrays).
    """
    names, si, ri = _pairing(tuple(sim.names), tuple(real.names))
    return JointError(real.t, names, sim.position[si] - real.position[ri], sim.velocity[si] - real.velocity[ri],
                      real.stamp)


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


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f'{what} must be a finite number (rad), got {value!r}')
    return float(value)


def _checked(warn, error, where: str) -> Threshold:
    warn = _number(warn, f'warn threshold of {where}')
    error = _number(error, f'error threshold of {where}')
    if not warn > 0:
        raise ConfigError(f'warn threshold of {where} must be > 0 rad, got {warn:g}')
    if not error >= warn:
        raise ConfigError(f'thresholds of {where}: error ({error:g} rad) must be >= warn ({warn:g} rad)')
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
        self.default = _checked(warn, error, 'the default (thresholds.warn, thresholds.error)')
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
            self.overrides.append((glob, _checked(entry.get('warn', self.default.warn),
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


class SimRealMonitor:
    """Compares a simulated and a real joint-state stream over time.

    Args:
        thresholds: the levels (attribute, may be replaced).
        window: RMS window, s.
        stale_after: a stream with no sample for this long (on the ``arrival`` clock
            given to :meth:`add_real` / :meth:`add_sim`) is stale, s.
        max_gap: a real stamp outside the sim history by at most this much is compared
            with the nearest sim sample, s.
        history_age: how much of each stream is kept, s (> ``max_gap``).
        real_label, sim_label: how the streams are named in messages (e.g. topics).
    Raises:
        ValueError: non-positive window, history_age or stale_after.
    """

    def __init__(self, thresholds: Thresholds, window: float = 2.0, stale_after: float = 0.5,
                 max_gap: float = 0.05, history_age: float = 1.0, real_label: str = 'real',
                 sim_label: str = 'sim') -> None:
        if not stale_after > 0:
            raise ValueError(f'stale_after must be > 0 s, got {stale_after!r}')
        self.thresholds = thresholds
        self.errors = ErrorWindow(window)
        self.stale_after = float(stale_after)
        self.max_gap = float(max_gap)
        self.real = JointStateHistory(history_age)
        self.sim = JointStateHistory(history_age)
        self.labels = {'real': real_label, 'sim': sim_label}
        self._arrival: dict[str, float | None] = {'real': None, 'sim': None}
        self._last_t: float | None = None
        self._order: tuple[str, ...] = ()

    @property
    def window(self) -> float:
        """RMS window, s."""
        return self.errors.window

    @window.setter
    def window(self, value: float) -> None:
        if not value > 0:
            raise ValueError(f'window must be > 0 s, got {value!r}')
        self.errors.window = float(value)

    def add_real(self, sample: JointSample, arrival: float) -> None:
        """A sample of the robot, received at ``arrival`` (s, the clock of ``report``'s ``now``)."""
        if self.real.latest() is not None and sample.t < self.real.latest().t:
            self._last_t = None           # the stream restarted
        self.real.add(sample)
        self._arrival['real'] = arrival

    def add_sim(self, sample: JointSample, arrival: float) -> None:
        """A sample of the sim, received at ``arrival`` s."""
        self.sim.add(sample)
        self._arrival['sim'] = arrival

    def update(self) -> JointError | None:
        """Compare the newest real sample with the sim at the same stamp and add the
        result to the window.

        The real sample is the newest one, or, when the sim's newest stamp is older,
        the newest real sample that the sim history covers (so that the sim is
        interpolated, not held). Returns None when there is nothing new (no real sample
        newer than the last compared one) or no sim state within ``max_gap`` s of it.
        """
        real = self.real.latest()
        sim_span = self.sim.span()
        if real is None or sim_span is None:
            return None
        if real.t > sim_span[1]:
            covered = self.real.newest_not_after(sim_span[1])
            if covered is not None and (self._last_t is None or covered.t > self._last_t):
                real = covered
        if self._last_t is not None and real.t <= self._last_t:
            return None
        sim = self.sim.at(real.t, self.max_gap)
        if sim is None:
            return None
        error = joint_error(sim, real)
        self._last_t = real.t
        self._order = error.names
        self.errors.add(error)
        return error

    def stale_streams(self, now: float) -> list[str]:
        """Why the comparison is stale at ``now`` (arrival clock, s): one phrase per
        silent stream; empty when both are flowing."""
        out = []
        for which in ('real', 'sim'):
            last = self._arrival[which]
            label = self.labels[which]
            if last is None:
                out.append(f'nothing received on {label} yet')
            elif now - last > self.stale_after:
                out.append(f'nothing received on {label} for {now - last:.1f} s')
        return out

    def report(self, now: float) -> MonitorReport:
        """Levels per joint (joints of the newest error, in its order) and the summary at
        ``now`` (arrival clock, s). The summary level is the worst joint level; its
        message names the worst joint (highest level, then highest RMS error)."""
        stale = self.stale_streams(now)
        stats = self.errors.stats()
        names = list(self._order) + [n for n in stats if n not in self._order]
        window = self.errors.window
        joints = []
        for name in names:
            threshold = self.thresholds.for_joint(name)
            st = stats.get(name)
            if st is None:
                level, message = STALE, f'no comparison in the last {window:.1f} s'
            else:
                level = threshold.level(st.rms_position)
                message = f'RMS error {st.rms_position:.3f} rad over {window:.1f} s'
            if stale:
                level, message = STALE, '; '.join(stale) + (f' (last: {message})' if st is not None else '')
            joints.append(JointReport(name, level, message, st, threshold))
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
        if stale:
            message = '; '.join(stale) + '; ' + message
        return MonitorReport(joints, worst.level, message, worst.name, stale)
