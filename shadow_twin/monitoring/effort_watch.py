"""External-force watch: each arm joint's measured effort against the effort the model predicts
along the measured motion, with a debounced OK / WARN / ERROR status per joint.

The one implementation behind the twin monitor's live watch (``shadow_twin.ros.monitor.effort``)
and the offline ``shadow-twin evaluate --effort`` (:meth:`EffortWatch.run` over arrays), so both
flag the same samples. Everything is judged on the samples' stamps.

Per sample (positions q in rad, velocities qd in rad/s, efforts in the recording's unit, A or N m):

* **Acceleration** (causal, centred): a quadratic least-squares fit (Savitzky-Golay on the
  samples' own, possibly uneven, stamps) over the last ``window`` samples (odd, >= 3) of the
  measured velocities (of the positions where a message has no velocities), differentiated at
  the window's centre sample. The residual is therefore that of the centre sample: it is known
  ``(window - 1) / 2`` samples late (``window`` 3: one sample, 8 ms at the UR's 125 Hz, 10 ms at
  100 Hz). q, qd and the measured effort are the centre sample's own. A stamp gap above
  ``max_gap`` restarts the window.
* **Prediction**: :class:`shadow_twin.simulation.effort.InverseDynamics` (rigid-body inverse
  dynamics plus armature, damping and frictionloss, N m) through the drive parameters
  (:class:`~shadow_twin.simulation.effort.DriveParameters`: torque / drive gain + offset). The
  friction's presliding state (:class:`~shadow_twin.simulation.friction.FrictionState`, each joint's
  ``presliding_distance``) is carried from centre sample to centre sample: at rest the predicted
  friction is what the last motion left; a restarted window starts it from 0 (unknown). The drive
  measures its effort late: the measured effort of the centre sample is compared with the
  prediction ``effort_delay`` before it, interpolated between the predictions of the last centre
  samples (:meth:`~shadow_twin.simulation.effort.DriveParameters.measured`; held at the window's
  first prediction after a restart).
* **Residual** = measured - predicted (the recording's unit).
* **Status**: a sample is over WARN when ``|residual| >= k_warn * sigma + band``, over ERROR from
  ``k_error * sigma + band``; ``band`` is the static friction the watch cannot know: a joint that
  has not moved since the window (re)started holds whatever friction it had before, up to its
  frictionloss (over its drive gain); the band shrinks as ``exp(-travel / presliding_distance)``
  (:class:`~shadow_twin.simulation.friction.FrictionState`: 5 % after three distances of travel);
  sigma = the identification's ``residual_sigma`` of the joint, else the first matching glob of
  ``sigma_overrides``, else ``fallback_sigma``. A joint enters a level
  after ``debounce_samples`` consecutive samples over it, or once it has been over it for
  ``debounce_time`` s of stamps (0: samples only); it leaves it (to the highest level seen
  meanwhile) once the samples have stayed under it for ``hold_time`` s of stamps.

Bad samples never raise: a NaN or infinite value, a stamp not after the previous one, an effort
field that does not match the names, are dropped, counted in :attr:`EffortWatch.dropped` and
reported once per kind through ``on_warning``. A message without the watched joints (another
driver's) is ignored silently.

Detection delay (the benchmark's figure): :func:`detection_delay` of an :class:`EffortRun` from
the stamp a force began.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from shadow_twin.common.errors import ConfigError
from shadow_twin.monitoring.effort_settings import EffortSettings, glob_value
from shadow_twin.monitoring.thresholds import ERROR, LEVEL_NAMES, OK, WARN
from shadow_twin.simulation.effort import DriveParameters, InverseDynamics
from shadow_twin.simulation.friction import FrictionState

#: s: stamp differences this close to a debounce or hold time count as reaching it (float stamps).
STAMP_EPS = 1e-9


@dataclass(frozen=True)
class EffortSample:
    """One evaluated sample: the residual of the stamp ``t`` (s), known at ``known_at`` (s, the
    newest sample of the acceleration window). (J,) arrays in the watch's joint order, effort unit;
    ``levels``: the debounced level of each joint after this sample; ``stamp``: the centre
    sample's original stamp object (e.g. a ROS ``Time``), or None; ``band``: (J,) the static
    friction the watch cannot know yet, added to both thresholds (effort unit)."""

    t: float
    known_at: float
    measured: np.ndarray
    predicted: np.ndarray
    residual: np.ndarray
    levels: tuple[int, ...]
    stamp: object = None
    band: np.ndarray | None = None


@dataclass(frozen=True)
class Transition:
    """A joint's debounced level changed at residual stamp ``t``, known at ``known_at`` (s)."""

    joint: str
    t: float
    known_at: float
    level: int
    previous: int
    residual: float


@dataclass(frozen=True)
class FlaggedInterval:
    """A joint at WARN or worse from ``start`` to ``end`` (residual stamps, s; ``end`` the last
    evaluated stamp when it never recovered), ``worst`` level, ``peak`` |residual| (effort unit)."""

    joint: str
    start: float
    end: float
    worst: int
    peak: float


@dataclass
class EffortRun:
    """A whole recording through :meth:`EffortWatch.run`: M evaluated samples.

    Attributes:
        joints: J names.
        t, known_at: (M,) s.  measured, predicted, residual: (M, J), effort unit.
        levels: (M, J) debounced levels.  transitions: every level change.
        dropped: {reason: samples dropped}.  sigma, warn, error: (J,) effort unit.
    """

    joints: list[str]
    t: np.ndarray
    known_at: np.ndarray
    measured: np.ndarray
    predicted: np.ndarray
    residual: np.ndarray
    levels: np.ndarray
    transitions: list[Transition]
    dropped: dict[str, int]
    sigma: np.ndarray
    warn: np.ndarray
    error: np.ndarray

    def rmse(self) -> dict[str, float]:
        """{joint: RMS residual}, effort unit (NaN without samples)."""
        if not len(self.t):
            return {j: math.nan for j in self.joints}
        return dict(zip(self.joints, np.sqrt(np.mean(self.residual ** 2, axis=0)).tolist()))

    def intervals(self) -> list[FlaggedInterval]:
        """The flagged (WARN or worse) intervals, by joint then start."""
        out = []
        for j, joint in enumerate(self.joints):
            flagged = self.levels[:, j] >= WARN
            k = 0
            while k < len(flagged):
                if not flagged[k]:
                    k += 1
                    continue
                end = k
                while end + 1 < len(flagged) and flagged[end + 1]:
                    end += 1
                out.append(FlaggedInterval(joint, float(self.t[k]), float(self.t[end]),
                                           int(self.levels[k:end + 1, j].max()),
                                           float(np.abs(self.residual[k:end + 1, j]).max())))
                k = end + 1
        return out


def detection_delay(run: EffortRun, onset: float, level: int = WARN, joints: Sequence[str] | None = None) -> float:
    """Seconds from ``onset`` (the stamp an external force began, s) to the first sample stamp at
    which any of ``joints`` (default all) was known to be at ``level`` or worse (its ``known_at``:
    what a live monitor could publish then); ``inf`` when none was."""
    names = run.joints if joints is None else list(joints)
    for tr in run.transitions:
        if tr.joint in names and tr.level >= level and tr.known_at >= onset:
            return tr.known_at - onset
    return math.inf


class _JointLevel:
    """The debounced level of one joint (see the module doc)."""

    __slots__ = ('level', 'counts', 'since', 'below_since', 'below_peak')

    def __init__(self) -> None:
        self.level = OK
        self.counts = {WARN: 0, ERROR: 0}
        self.since = {WARN: math.nan, ERROR: math.nan}
        self.below_since = math.nan
        self.below_peak = OK

    def update(self, t: float, raw: int, s: EffortSettings) -> int:
        for lv in (WARN, ERROR):
            if raw >= lv:
                if self.counts[lv] == 0:
                    self.since[lv] = t
                self.counts[lv] += 1
            else:
                self.counts[lv] = 0
        entered = [lv for lv in (WARN, ERROR) if lv > self.level and (
            self.counts[lv] >= s.debounce_samples
            or (s.debounce_time > 0 and self.counts[lv] and t - self.since[lv] >= s.debounce_time - STAMP_EPS))]
        if entered:
            self.level = max(entered)
            self.below_since = math.nan
            return self.level
        if raw >= self.level:
            self.below_since = math.nan
            return self.level
        if math.isnan(self.below_since):
            self.below_since, self.below_peak = t, raw
        self.below_peak = max(self.below_peak, raw)
        if t - self.below_since >= s.hold_time - STAMP_EPS:
            self.level = self.below_peak
            self.below_since = math.nan
        return self.level


def _centre_derivatives(t: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and second derivative at the centre sample of a quadratic least-squares fit of
    (W, J) ``values`` over (W,) stamps ``t`` (s)."""
    dt = t - t[len(t) // 2]
    basis = np.stack([np.ones_like(dt), dt, dt * dt], axis=1)
    coef = np.linalg.lstsq(basis, values, rcond=None)[0]
    return coef[1], 2.0 * coef[2]


class EffortWatch:
    """The external-force watch of J joints (see the module doc).

    Args:
        inverse: inverse dynamics of the model at the joints' MJCF names, in the order of ``joints``.
        drive: the recording's drive parameters (unit, gains, offsets, residual sigmas).
        settings: thresholds, debounce, acceleration window.
        joints: J names in the recordings / messages (default ``inverse.joints``).
        on_warning: called with one line the first time each kind of bad sample is dropped.
    """

    def __init__(self, inverse: InverseDynamics, drive: DriveParameters, settings: EffortSettings | None = None,
                 joints: Sequence[str] | None = None, on_warning: Callable[[str], None] | None = None) -> None:
        self.inverse, self.drive = inverse, drive
        self.settings = settings or EffortSettings()
        self.joints = list(inverse.joints if joints is None else joints)
        if len(self.joints) != len(inverse.joints):
            raise ConfigError(f'effort watch: {len(self.joints)} joint names for {len(inverse.joints)} model joints')
        self.on_warning = on_warning
        self.dropped: dict[str, int] = {}
        self.sigma = np.empty(len(self.joints))
        self.set_settings(self.settings)
        self.reset()

    def set_settings(self, settings: EffortSettings) -> None:
        """New thresholds / debounce (the window and levels are kept)."""
        self.settings = settings
        ident = self.drive.residual_sigma
        self.sigma = np.array([float(ident[j]) if j in ident else
                               glob_value(settings.sigma_overrides, j, settings.fallback_sigma) for j in self.joints])

    @property
    def thresholds(self) -> tuple[np.ndarray, np.ndarray]:
        """(J,) WARN and ERROR thresholds of |residual|, effort unit."""
        return self.settings.k_warn * self.sigma, self.settings.k_error * self.sigma

    def reset(self) -> None:
        """Forget the window and every level (back to OK)."""
        self._t: list[float] = []
        self._q: list[np.ndarray] = []
        self._qd: list[np.ndarray | None] = []
        self._effort: list[np.ndarray] = []
        self._stamps: list[object] = []
        self._levels = [_JointLevel() for _ in self.joints]
        self._columns: tuple | None = None
        self._friction = FrictionState(self.drive.presliding_distances(self.joints))
        self._delays = self.drive.effort_delays(self.joints)
        self._past: list[tuple[float, np.ndarray]] = []     # (stamp, prediction) of the last centre samples
        # effort per unit of the friction's state: the band of an unknown state
        self._friction_effort = np.abs(self.inverse.joint_dynamics.frictionloss / self.drive.gains(self.joints))
        self.transitions: list[Transition] = []

    def levels(self) -> tuple[int, ...]:
        """The current debounced level of each joint."""
        return tuple(jl.level for jl in self._levels)

    # -- input ------------------------------------------------------------------------------------
    def _drop(self, reason: str, detail: str) -> None:
        first = reason not in self.dropped
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        if first and self.on_warning is not None:
            self.on_warning(f'effort watch: dropping samples with {reason} ({detail}); counted, said once')

    def _index(self, names: Sequence[str]) -> list[int] | None:
        key = tuple(names)
        if self._columns is not None and self._columns[0] == key:
            return self._columns[1]
        lookup = {n: k for k, n in enumerate(key)}
        cols = [lookup.get(j) for j in self.joints]
        out = None if any(c is None for c in cols) else cols
        self._columns = (key, out)
        return out

    def add(self, t: float, names: Sequence[str], position: Sequence[float], velocity: Sequence[float],
            effort: Sequence[float], stamp: object = None) -> EffortSample | None:
        """One joint state message: stamp ``t`` (s), ``names`` and their positions (rad),
        velocities (rad/s; empty = none, estimated from positions) and efforts (effort unit).
        Returns the evaluated sample of the window's centre, or None (window not full, message
        without the joints, or a dropped sample). Never raises for bad values."""
        cols = self._index(names)
        if cols is None:
            return None
        n = len(names)
        if len(effort) != n:
            self._drop('no effort field', f'{len(effort)} efforts for {n} names')
            return None
        if len(position) != n or (len(velocity) and len(velocity) != n):
            self._drop('fields that do not match the names', f'{len(position)} positions, {len(velocity)} '
                       f'velocities for {n} names')
            return None
        q = np.asarray(position, dtype=float)[cols]
        e = np.asarray(effort, dtype=float)[cols]
        qd = np.asarray(velocity, dtype=float)[cols] if len(velocity) else None
        t = float(t)
        if not math.isfinite(t) or not (np.isfinite(q).all() and np.isfinite(e).all()
                                        and (qd is None or np.isfinite(qd).all())):
            self._drop('NaN or infinite values', f'stamp {t:.6f}')
            return None
        if self._t and t <= self._t[-1]:
            self._drop('stamps not after the previous one', f'{t:.6f} after {self._t[-1]:.6f}')
            return None
        if self._t and (t - self._t[-1] > self.settings.max_gap or (qd is None) != (self._qd[-1] is None)):
            self._t, self._q, self._qd, self._effort, self._stamps, self._past = [], [], [], [], [], []
            self._friction.reset()
        for buf, value in ((self._t, t), (self._q, q), (self._qd, qd), (self._effort, e), (self._stamps, stamp)):
            buf.append(value)
            if len(buf) > self.settings.window:
                del buf[0]
        if len(self._t) < self.settings.window:
            return None
        return self._evaluate()

    def _evaluate(self) -> EffortSample:
        c = self.settings.window // 2
        t = np.asarray(self._t)
        if self._qd[0] is not None:
            qd = self._qd[c]
            qdd = _centre_derivatives(t, np.asarray(self._qd))[0]
        else:
            qd, qdd = _centre_derivatives(t, np.asarray(self._q))
        if self._friction.last_q is None:       # a new window: its samples before the centre are the path so far
            for q in self._q[:c]:
                self._friction.advance(q)
        friction = self._friction.advance(self._q[c])
        torque = self.inverse.torques(self._q[c][None], qd[None], qdd[None], friction[None])
        tc = float(t[c])
        self._past.append((tc, self.drive.to_effort(torque, self.joints)[0]))
        while len(self._past) > 2 and self._past[1][0] <= tc - self._delays.max():
            del self._past[0]
        # as measured: the prediction effort_delay before the centre sample
        predicted = self.drive.measured(np.array([p[0] for p in self._past]), np.array([p[1] for p in self._past]),
                                        self.joints)[-1]
        measured = self._effort[c]
        residual = measured - predicted
        warn, error = self.thresholds
        band = self._friction.unknown * self._friction_effort
        warn, error = warn + band, error + band
        size = np.abs(residual)
        known = float(t[-1])
        for j, jl in enumerate(self._levels):
            raw = ERROR if size[j] >= error[j] else WARN if size[j] >= warn[j] else OK
            before = jl.level
            if jl.update(tc, raw, self.settings) != before:
                self.transitions.append(Transition(self.joints[j], tc, known, jl.level, before, float(residual[j])))
        return EffortSample(tc, known, measured, predicted, residual, self.levels(), self._stamps[c], band)

    # -- offline ----------------------------------------------------------------------------------
    def run(self, t: np.ndarray, q: np.ndarray, qd: np.ndarray | None, effort: np.ndarray) -> EffortRun:
        """A whole recording of the watch's joints, sample by sample as live (from a fresh state):
        (N,) stamps (s), (N, J) positions (rad), velocities (rad/s; None = from positions) and
        efforts (effort unit). Returns the :class:`EffortRun`. Bad samples are dropped as live."""
        self.reset()
        self.dropped = {}
        t = np.asarray(t, dtype=float)
        q, effort = np.atleast_2d(np.asarray(q, dtype=float)), np.atleast_2d(np.asarray(effort, dtype=float))
        qd = None if qd is None else np.atleast_2d(np.asarray(qd, dtype=float))
        if q.shape != effort.shape or q.shape[0] != t.shape[0] or (qd is not None and qd.shape != q.shape):
            raise ValueError(f'effort watch: shapes t {t.shape}, q {q.shape}, qd '
                             f'{None if qd is None else qd.shape}, effort {effort.shape} do not match')
        empty = np.empty(0)
        samples = []
        for k in range(len(t)):
            out = self.add(t[k], self.joints, q[k], empty if qd is None else qd[k], effort[k])
            if out is not None:
                samples.append(out)
        J = len(self.joints)

        def stack(attr: str) -> np.ndarray:
            return np.array([getattr(s, attr) for s in samples]).reshape(len(samples), J)
        warn, error = self.thresholds
        return EffortRun(self.joints, np.array([s.t for s in samples]), np.array([s.known_at for s in samples]),
                         stack('measured'), stack('predicted'), stack('residual'),
                         np.array([s.levels for s in samples], dtype=int).reshape(len(samples), J),
                         list(self.transitions), dict(self.dropped), self.sigma.copy(), warn, error)


def level_name(level: int) -> str:
    """``OK``, ``WARN`` or ``ERROR``."""
    return LEVEL_NAMES[level]
