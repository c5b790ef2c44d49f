"""The gate of an object's pose source (motion capture, AprilTag detections): which samples the twin
follows, which it drops and why, and whether the source is silent. Pure: no MuJoCo, no ROS, no clock;
every time is a stamp or the ``now`` it is given (s, sim time: the ROS layer maps a message's header
stamp to sim time as it does for the robots' states).

A sample (stamp, position (3,) m, quaternion (4,) w x y z) is **dropped**, never followed, when (in
this order of checks, each a *kind* of problem, :data:`KINDS`):

* ``not finite``: the stamp, a coordinate or a quaternion component is NaN or inf, or the arrays are
  not of 3 and 4 numbers;
* ``not a unit quaternion``: its norm is off 1 by more than ``unit_tolerance`` (the quaternion of an
  accepted sample is normalised);
* ``stamp in the future``: more than ``max_lead`` s after ``now`` (a clock that does not match the
  sim's; the live simulation's ``MAX_STAMP_LEAD`` is the same figure for the robots' states);
* ``stamp too old``: more than ``timeout`` s before ``now`` (it could not make the source live: it
  would be silent at once);
* ``stamp not after the previous``: not later than the last accepted sample's (a repeat, or a stamp
  going back);
* ``jump``: farther from the last accepted sample than ``max_speed`` (m/s) times the time between
  their stamps plus ``jump_tolerance`` (m), or turned more than ``max_angular_speed`` (rad/s) times
  it plus ``angle_tolerance`` (rad): faster than the object can move (a marker swap, a tag seen
  upside down). The tolerances cover the source's noise between two close stamps.

**Silent** (:meth:`PoseGate.silent`): no accepted sample stamped within the last ``timeout`` s of
``now`` (or none yet). The follower then releases the object to physics. The next good sample
*restarts* the source (:attr:`Verdict.started`): it is accepted without the jump check (it is judged
against nothing older than the silence), so an object that was moved while it was not seen (a
marker occluded, every sample a "jump" from the last good one) is followed again ``timeout`` s after
its last good sample, while a single glitch is dropped.

**The warning budget**: each kind of problem (silence included) is reported once
(:attr:`Verdict.report`, and :meth:`PoseGate.poll` for silence) until the source is good again: its
accepted samples have spanned ``rearm`` s with nothing dropped. The counts of every kind, and of the
accepted samples, are kept (:attr:`PoseGate.counts`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from shadow_twin.common.errors import ConfigError
from shadow_twin.simulation.objects.poses import PoseSample, angle_between

NOT_FINITE = 'not finite'
NOT_UNIT = 'not a unit quaternion'
FUTURE = 'stamp in the future'
STALE = 'stamp too old'
NOT_AFTER = 'stamp not after the previous'
JUMP = 'jump'
SILENT = 'silent'
#: The kinds of problems, in the order samples are checked (:data:`SILENT` last: it is no sample's).
KINDS = (NOT_FINITE, NOT_UNIT, FUTURE, STALE, NOT_AFTER, JUMP, SILENT)
#: The count of accepted samples in :attr:`PoseGate.counts`.
ACCEPTED = 'accepted'


def check_sample(stamp, position, quat, unit_tolerance: float) -> tuple[str, str, PoseSample | None]:
    """The checks of a pose sample that need no history (the gate's first two kinds, and the twin
    monitor's, :mod:`shadow_twin.monitoring.object_error`): ``stamp`` s, ``position`` (3,) m, ``quat``
    (4,) w x y z, given as anything numpy reads. Returns (:data:`NOT_FINITE` or :data:`NOT_UNIT`, a
    one-line detail, None) for the first problem, else ('', '', the sample, its quaternion
    normalised). Never raises for what the sample holds."""
    try:
        stamp = float(stamp)
        position = np.asarray(position, dtype=float).reshape(-1)
        quat = np.asarray(quat, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        return NOT_FINITE, 'the stamp, position or orientation is not made of numbers', None
    if position.shape != (3,) or quat.shape != (4,):
        return NOT_FINITE, (f'expected a position of 3 and an orientation of 4 numbers, got {position.size} '
                            f'and {quat.size}'), None
    if not math.isfinite(stamp):
        return NOT_FINITE, f'stamp {stamp} is not finite', None
    if not np.all(np.isfinite(position)):
        return NOT_FINITE, f'position {position.tolist()} is not finite', None
    if not np.all(np.isfinite(quat)):
        return NOT_FINITE, f'orientation {quat.tolist()} is not finite', None
    norm = float(np.linalg.norm(quat))
    if abs(norm - 1.0) > unit_tolerance:
        return NOT_UNIT, f'orientation {quat.tolist()} has norm {norm:.4g}, not 1', None
    return '', '', PoseSample(stamp, position, quat / norm)


@dataclass(frozen=True)
class GateLimits:
    """What a pose source may do (module doc). Defaults:

    * ``max_speed`` 3 m/s, ``max_angular_speed`` 4 pi rad/s (2 turns/s): faster than a UR5's tool
      (its joints turn at most pi rad/s, the tool moves about 1 m/s) or a hand turning an object;
    * ``jump_tolerance`` 5 mm, ``angle_tolerance`` 0.05 rad: ten times a motion-capture system's noise
      (0.5 mm, the mock hardware's figure), a few times an AprilTag's orientation noise (about 1 deg);
    * ``timeout`` 0.5 s: the twin monitor's ``shadow_source_timeout`` (50 missed samples at 100 Hz);
    * ``max_lead`` 0.5 s: the live simulation's ``MAX_STAMP_LEAD``;
    * ``unit_tolerance`` 1e-3: the entities' check of a set pose (``simulation.live.entities``);
    * ``rearm`` 1 s of good samples before a kind of problem is reported again.

    Raises ConfigError (one line) for a value that is not finite or not positive.
    """

    max_speed: float = 3.0
    max_angular_speed: float = 4.0 * math.pi
    jump_tolerance: float = 0.005
    angle_tolerance: float = 0.05
    timeout: float = 0.5
    max_lead: float = 0.5
    unit_tolerance: float = 1e-3
    rearm: float = 1.0

    def __post_init__(self) -> None:
        for name in ('max_speed', 'max_angular_speed', 'jump_tolerance', 'angle_tolerance', 'timeout',
                     'max_lead', 'unit_tolerance', 'rearm'):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise ConfigError(f'object source limit {name}: expected a positive finite number, got {value!r}')


@dataclass(frozen=True)
class Verdict:
    """What the gate made of a sample.

    Attributes:
        accepted: the sample may be followed.
        kind: the kind of problem (:data:`KINDS`) of a dropped sample; '' when accepted.
        message: one line naming the source and what was wrong (or, for a restart, how long it was
            silent); '' when there is nothing to say.
        report: log ``message`` (a warning for a drop): the first of its kind since the source was last
            good, or the restart of a source whose silence was reported.
        started: accepted, and it (re)starts the source: its first sample, or the first after a silence.
        sample: the accepted sample, its quaternion normalised (None when dropped).
    """

    accepted: bool
    kind: str = ''
    message: str = ''
    report: bool = False
    started: bool = False
    sample: PoseSample | None = None


@dataclass
class PoseGate:
    """The gate of one pose source (module doc).

    Args:
        source: its name in messages (a topic, a TF frame, or the object's name).
        limits: :class:`GateLimits`.
    """

    source: str
    limits: GateLimits = field(default_factory=GateLimits)
    #: The last accepted sample (None before the first).
    last: PoseSample | None = None
    #: {kind or :data:`ACCEPTED`: number of samples (for :data:`SILENT`: of silences)}.
    counts: dict = field(default_factory=lambda: dict.fromkeys(KINDS + (ACCEPTED,), 0))
    _reported: set = field(default_factory=set, repr=False)
    _good_since: float | None = field(default=None, repr=False)
    _silence_counted: bool = field(default=False, repr=False)
    _silence_announced: bool = field(default=False, repr=False)
    _first_now: float | None = field(default=None, repr=False)

    def silent(self, now: float) -> bool:
        """Whether no accepted sample is stamped within ``timeout`` s before ``now`` (s), or none came."""
        return self.last is None or now - self.last.stamp > self.limits.timeout

    def offer(self, stamp, position, quat, now: float) -> Verdict:
        """Judge a sample: ``stamp`` (s, sim time), ``position`` (3,) m, ``quat`` (4,) w x y z, at sim time
        ``now`` (s). Never raises for what the sample holds; returns the :class:`Verdict`."""
        self._seen(now)
        kind, detail, sample = self._check(stamp, position, quat, now)
        if kind:
            self.counts[kind] += 1
            self._good_since = None
            report = kind not in self._reported
            self._reported.add(kind)
            return Verdict(False, kind, f'object source {self.source}: {detail}; dropped', report)
        started = self.silent(now)
        message, report = '', False
        if started and self.last is not None and self._silence_announced:
            message, report = f'object source {self.source}: back after {now - self.last.stamp:.2f} s silent', True
        if started:
            self._silence_counted = self._silence_announced = False
        self.last = sample
        self.counts[ACCEPTED] += 1
        if self._good_since is None:
            self._good_since = sample.stamp
        elif sample.stamp - self._good_since >= self.limits.rearm:
            self._reported.clear()
        return Verdict(True, '', message, report, started, sample)

    def poll(self, now: float) -> str | None:
        """The one-line warning when the source has gone silent at ``now`` (s) and this silence is not
        reported yet (then it is, and counted); else None. Call it as time goes on (each update)."""
        self._seen(now)
        if not self.silent(now) or self._silence_counted:
            return None
        if self.last is None and now - self._first_now <= self.limits.timeout:
            return None                                            # not heard yet, but not for long
        self._silence_counted = True
        self._good_since = None
        self.counts[SILENT] += 1
        if SILENT in self._reported:
            return None
        self._reported.add(SILENT)
        self._silence_announced = True
        if self.last is None:
            return f'object source {self.source}: silent, nothing received in {now - self._first_now:.2f} s'
        return f'object source {self.source}: silent for {now - self.last.stamp:.2f} s; the object is left to physics'

    def _seen(self, now: float) -> None:
        if self._first_now is None:
            self._first_now = float(now)

    def _check(self, stamp, position, quat, now: float) -> tuple[str, str, PoseSample | None]:
        """(kind, detail, None) of the first problem of a sample, or ('', '', the normalised sample)."""
        limits = self.limits
        kind, detail, sample = check_sample(stamp, position, quat, limits.unit_tolerance)
        if sample is None:
            return kind, detail, None
        stamp, position = sample.stamp, sample.position
        if stamp > now + limits.max_lead:
            return FUTURE, f'stamp {stamp:.3f} s is {stamp - now:.3f} s ahead of the sim ({now:.3f} s)', None
        if stamp < now - limits.timeout:
            return STALE, (f'stamp {stamp:.3f} s is {now - stamp:.3f} s old (more than the timeout '
                           f'{limits.timeout:g} s)'), None
        last = self.last
        if last is None:
            return '', '', sample
        if stamp <= last.stamp:
            return NOT_AFTER, f'stamp {stamp:.6f} s is not after the previous {last.stamp:.6f} s', None
        if self.silent(now):
            return '', '', sample                                   # a restart: nothing recent to judge it by
        elapsed = stamp - last.stamp
        distance = float(np.linalg.norm(position - last.position))
        if distance > limits.max_speed * elapsed + limits.jump_tolerance:
            return JUMP, (f'moved {distance * 1e3:.1f} mm in {elapsed * 1e3:.1f} ms (more than '
                          f'{limits.max_speed:g} m/s + {limits.jump_tolerance * 1e3:g} mm)'), None
        angle = angle_between(last.quat, sample.quat)
        if angle > limits.max_angular_speed * elapsed + limits.angle_tolerance:
            return JUMP, (f'turned {angle:.3f} rad in {elapsed * 1e3:.1f} ms (more than '
                          f'{limits.max_angular_speed:g} rad/s + {limits.angle_tolerance:g} rad)'), None
        return '', '', sample
