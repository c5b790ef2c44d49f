"""ROS-free core of the twin monitor's object check (issue 36): how far each scene object's pose in the
sim is from the real object's.

Two streams per object, both poses in one world frame, each stamped with the time the pose was true
(the same clock): the sim bridge's (``geometry_msgs/PoseStamped``, exact) and the real one's (motion
capture or AprilTag detections: noisy, delivered late, possibly broken).

* :class:`ObjectPose`: stamp ``t`` (s), ``position`` (3,) m and unit ``quat`` (4,) w x y z.
* :func:`interpolate`: the pose between two poses, position linear, orientation by slerp
  (``exp(a log(q1 q0^-1)) q0``, along the shorter arc; :func:`~shadow_twin.simulation.objects.poses.rotate`
  and :func:`~shadow_twin.simulation.objects.poses.relative_rotvec`, MuJoCo's quaternion functions).
* :class:`PoseBuffer`: the recent sim poses of one object, interpolated at a real stamp.
* :class:`SourceCheck`: what a source's samples may be. A sample is **dropped and counted**, never
  compared, when (in this order; the kinds of :data:`KINDS`) it is ``not finite`` (NaN or inf in the
  stamp, the position or the orientation), ``not a unit quaternion`` (norm off 1 by more than
  :data:`UNIT_TOLERANCE`; an accepted quaternion is normalised), in the ``wrong frame`` (not the
  monitor's ``frame``), or its ``stamp not after the previous`` accepted one (a repeat, stamps going
  back). Each kind is reported once per source (a one-line warning for the log). A source whose
  stamps went back for good (a restarted clock) is taken again once it has had no accepted sample
  for ``stale_after`` s (it is STALE meanwhile): its next good sample restarts it.
* :func:`object_error`: (position error m, angle error rad) of the sim pose against the real one:
  :func:`shadow_twin.simulation.objects.poses.pose_error` (the distance between the positions and the
  angle of the rotation between the orientations), the follower's and the benchmarks' one measure.
* :class:`ObjectThresholds`: warn / error levels of the RMS position error (m) and RMS angle error (rad).
* :class:`ObjectErrorMonitor`: one object. Every accepted real pose is compared once with the sim
  interpolated at its stamp, when the sim has reached that stamp (a real pose after the sim's newest
  waits for the sim, as the base's odometry does: motion capture arrives some ms after the sim's pose
  of the same time, so it seldom waits); a real pose before the sim history is not comparable and is
  skipped. :meth:`~ObjectErrorMonitor.report` gives the RMS and largest errors over the last
  ``window`` s of stamps and a level: the worse of the position and the angle level (OK < warn <=
  WARN < error <= ERROR, levels of ``diagnostic_msgs/DiagnosticStatus``); STALE while a source has had
  no accepted sample for ``stale_after`` s (arrival clock), has sent none, or the window is empty.

RMS position error over the window: ``sqrt(mean(d^2))`` (m), ``d`` the distance of each comparison;
RMS angle error ``sqrt(mean(a^2))`` (rad).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shadow_twin.monitoring.joint.comparison import ErrorWindow, JointError
from shadow_twin.monitoring.sim_real_monitor import stale_phrase
from shadow_twin.monitoring.thresholds import Threshold, checked_threshold, windowed_verdict
from shadow_twin.simulation.objects.gate import NOT_AFTER, NOT_FINITE, NOT_UNIT, GateLimits, check_sample
from shadow_twin.simulation.objects.poses import pose_error, relative_rotvec, rotate

WRONG_FRAME = 'wrong frame'
#: The kinds of dropped samples, in the order they are checked.
KINDS = (NOT_FINITE, NOT_UNIT, WRONG_FRAME, NOT_AFTER)
#: Largest ``| |q| - 1 |`` of an accepted quaternion: the object following's (``GateLimits.unit_tolerance``).
UNIT_TOLERANCE = GateLimits.unit_tolerance
#: Default thresholds: RMS position error, m, and RMS angle error, rad (the reasons: the ``objects.*``
#: parameters of ``shadow_twin.ros.monitor.parameters``).
DEFAULT_POSITION_WARN, DEFAULT_POSITION_ERROR = 0.005, 0.02
DEFAULT_ANGLE_WARN, DEFAULT_ANGLE_ERROR = 0.05, 0.2
#: The names of the two errors in an :class:`ObjectErrorMonitor`'s window.
POSITION, ANGLE = 'position', 'angle'
#: Most poses a :class:`PoseBuffer` keeps, and most real poses waiting for the sim.
MAX_SAMPLES = 1000
_NAN2 = np.full(2, math.nan)
_NAN2.setflags(write=False)


@dataclass(frozen=True)
class ObjectPose:
    """An object's pose at one time: ``t`` (s), ``position`` (3,) m and unit ``quat`` (4,) w x y z in the
    world frame; ``stamp``: the original stamp object, carried through (may be None)."""

    t: float
    position: np.ndarray
    quat: np.ndarray
    stamp: Any = None


def interpolate(before: ObjectPose, after: ObjectPose, t: float) -> ObjectPose:
    """The pose at ``t`` (s) between ``before`` and ``after`` (``before.t <= t <= after.t``): position
    linear in time, orientation by slerp along the shorter arc. Equal stamps give ``after``."""
    span = after.t - before.t
    if span <= 0.0:
        return ObjectPose(t, after.position, after.quat, after.stamp)
    a = (t - before.t) / span
    position = before.position + a * (after.position - before.position)
    quat = rotate(before.quat, a * relative_rotvec(after.quat, before.quat))
    return ObjectPose(t, position, quat / np.linalg.norm(quat))


class PoseBuffer:
    """The recent poses of one stream, stamps increasing.

    Args:
        max_age: poses older than the newest by more than this are dropped, s (> 0).
        max_samples: at most this many are kept (>= 2).
    """

    def __init__(self, max_age: float = 1.0, max_samples: int = MAX_SAMPLES) -> None:
        self.max_age = float(max_age)
        self._poses: deque[ObjectPose] = deque(maxlen=max(2, int(max_samples)))
        self._times: deque[float] = deque(maxlen=self._poses.maxlen)

    def __len__(self) -> int:
        return len(self._poses)

    def add(self, pose: ObjectPose) -> None:
        """Append ``pose``; one not after the newest restarts the buffer (the stream restarted)."""
        if self._times and pose.t <= self._times[-1]:
            self._poses.clear()
            self._times.clear()
        self._poses.append(pose)
        self._times.append(pose.t)
        while self._times[0] < pose.t - self.max_age:
            self._poses.popleft()
            self._times.popleft()

    def span(self) -> tuple[float, float] | None:
        """(oldest, newest) stamp, s, or None when empty."""
        return (self._times[0], self._times[-1]) if self._times else None

    def at(self, t: float) -> ObjectPose | None:
        """The pose at ``t`` (s) interpolated between the two around it (:func:`interpolate`); None
        outside the buffer's span."""
        if not self._times or not self._times[0] <= t <= self._times[-1]:
            return None
        k = bisect.bisect_left(self._times, t)
        if self._times[k] == t:
            return self._poses[k]
        return interpolate(self._poses[k - 1], self._poses[k], t)


@dataclass
class SourceCheck:
    """The check of one source's samples (module doc).

    Args:
        label: its name in warnings (a topic).
        frame: the frame its poses must be given in.
        stale_after: no accepted sample for this long (arrival clock, s) lets stamps restart.
    """

    label: str
    frame: str = 'world'
    stale_after: float = 0.5
    #: {kind: samples dropped}.
    counts: dict = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    #: Samples accepted.
    accepted: int = 0
    #: The stamp (s) and arrival (s) of the last accepted sample (None before the first).
    last_t: float | None = None
    last_arrival: float | None = None
    _reported: set = field(default_factory=set, repr=False)

    def check(self, t, position, quat, frame: str, arrival: float, stamp: Any = None
              ) -> tuple[ObjectPose | None, str | None]:
        """Judge a sample: stamp ``t`` (s), ``position`` (3,) m, ``quat`` (4,) w x y z, its ``frame``,
        received at ``arrival`` (s). Never raises for what the sample holds. Returns (the pose, its
        quaternion normalised, or None when dropped; a one-line warning when this kind of problem is
        the first of its kind from this source, else None)."""
        kind, detail, pose = self._problem(t, position, quat, frame, arrival, stamp)
        if pose is not None:
            self.accepted += 1
            self.last_t, self.last_arrival = pose.t, arrival
            return pose, None
        self.counts[kind] += 1
        if kind in self._reported:
            return None, None
        self._reported.add(kind)
        return None, f'{self.label}: {detail}; dropped (each such sample is counted, this is said once)'

    def dropped(self) -> int:
        """Samples dropped, all kinds."""
        return sum(self.counts.values())

    def _problem(self, t, position, quat, frame, arrival, stamp) -> tuple[str, str, ObjectPose | None]:
        kind, detail, sample = check_sample(t, position, quat, UNIT_TOLERANCE)
        if sample is None:
            return kind, detail, None
        if frame != self.frame:
            return WRONG_FRAME, f'frame {frame!r}, expected {self.frame!r}', None
        if self.last_t is not None and sample.stamp <= self.last_t and arrival - self.last_arrival <= self.stale_after:
            return NOT_AFTER, f'stamp {sample.stamp:.6f} s is not after the previous {self.last_t:.6f} s', None
        return '', '', ObjectPose(sample.stamp, sample.position, sample.quat, stamp)


@dataclass(frozen=True)
class ObjectError:
    """Sim against real at one time: ``t`` (stamp of the real pose compared, s), ``position`` (distance
    between the positions, m, >= 0), ``angle`` (angle of the rotation between the orientations, rad, in
    [0, pi]), ``stamp`` (the real pose's original stamp, or None)."""

    t: float
    position: float
    angle: float
    stamp: Any = None


def object_error(sim: ObjectPose, real: ObjectPose) -> ObjectError:
    """The error of ``sim`` (normally interpolated at ``real.t``) against ``real``, stamped with ``real``'s
    stamp: :func:`~shadow_twin.simulation.objects.poses.pose_error`."""
    distance, angle = pose_error(sim.position, sim.quat, real.position, real.quat)
    return ObjectError(real.t, distance, angle, real.stamp)


@dataclass(frozen=True)
class ObjectStats:
    """An object's errors over a window: ``rms_position`` (m), ``rms_angle`` (rad), ``max_position`` (m),
    ``max_angle`` (rad), ``samples`` (comparisons) and ``window`` (s)."""

    rms_position: float
    rms_angle: float
    max_position: float
    max_angle: float
    samples: int
    window: float


@dataclass(frozen=True)
class ObjectThresholds:
    """Warn / error levels of the RMS position error (m) and RMS angle error (rad); use :meth:`from_config`
    for values from parameters (validated)."""

    position: Threshold = Threshold(DEFAULT_POSITION_WARN, DEFAULT_POSITION_ERROR)
    angle: Threshold = Threshold(DEFAULT_ANGLE_WARN, DEFAULT_ANGLE_ERROR)

    @classmethod
    def from_config(cls, position_warn: float, position_error: float, angle_warn: float,
                    angle_error: float) -> 'ObjectThresholds':
        """Validated thresholds (finite, error >= warn > 0). Raises ConfigError naming the pair."""
        return cls(checked_threshold(position_warn, position_error, 'the object position '
                                     '(objects.warn_position, objects.error_position)', 'm'),
                   checked_threshold(angle_warn, angle_error, 'the object angle (objects.warn_angle, '
                                     'objects.error_angle)', 'rad'))

    def levels(self, stats: ObjectStats) -> tuple[int, int]:
        """(position level, angle level) of ``stats``."""
        return self.position.level(stats.rms_position), self.angle.level(stats.rms_angle)


@dataclass(frozen=True)
class ObjectReport:
    """An object's verdict: ``level`` (the worse of position and angle, or STALE), a one-line ``message``,
    the ``stats`` (None without comparisons), the ``thresholds`` and why it is ``stale``."""

    level: int
    message: str
    stats: ObjectStats | None
    thresholds: ObjectThresholds
    stale: list[str]


class ObjectErrorMonitor:
    """Compares one object's sim pose with its real pose over time (module doc).

    Args:
        thresholds: the levels (attribute, may be replaced).
        window: RMS window, s (> 0).
        stale_after: a source with no accepted sample for this long (arrival clock) is stale, s (> 0).
        history_age: how much of the sim stream is kept, s (and how far real poses may wait for it).
        frame: the frame both sources must give their poses in.
        real_label, sim_label: the sources' names in messages (topics).
    Raises:
        ValueError: non-positive window or stale_after.
    """

    def __init__(self, thresholds: ObjectThresholds | None = None, window: float = 2.0, stale_after: float = 0.5,
                 history_age: float = 1.0, frame: str = 'world', real_label: str = 'real',
                 sim_label: str = 'sim') -> None:
        if not stale_after > 0:
            raise ValueError(f'stale_after must be > 0 s, got {stale_after!r}')
        if not window > 0:
            raise ValueError(f'window must be > 0 s, got {window!r}')
        self.thresholds = thresholds or ObjectThresholds()
        self.errors = ErrorWindow(window)
        self.stale_after = float(stale_after)
        self.history_age = float(history_age)
        self.sim = PoseBuffer(history_age)
        self.pending: deque[ObjectPose] = deque(maxlen=MAX_SAMPLES)
        self.checks = {'real': SourceCheck(real_label, frame, stale_after),
                       'sim': SourceCheck(sim_label, frame, stale_after)}

    @property
    def window(self) -> float:
        """RMS window, s."""
        return self.errors.window

    def add_real(self, t, position, quat, frame: str, arrival: float, stamp: Any = None) -> str | None:
        """A real pose (see :meth:`SourceCheck.check`), received at ``arrival`` (s, the clock of
        ``report``'s ``now``); kept for :meth:`update` when accepted. Returns the warning to log, or None."""
        pose, warning = self.checks['real'].check(t, position, quat, frame, arrival, stamp)
        if pose is not None:
            if self.pending and pose.t <= self.pending[-1].t:
                self.pending.clear()                            # the source restarted
            self.pending.append(pose)
            while self.pending[0].t < pose.t - self.history_age:
                self.pending.popleft()                          # the sim is that far behind: never comparable
        return warning

    def add_sim(self, t, position, quat, frame: str, arrival: float, stamp: Any = None) -> str | None:
        """A sim pose (as :meth:`add_real`), into the buffer when accepted. Returns the warning, or None."""
        pose, warning = self.checks['sim'].check(t, position, quat, frame, arrival, stamp)
        if pose is not None:
            self.sim.add(pose)
        return warning

    def update(self) -> list[ObjectError]:
        """Compare every waiting real pose the sim has reached with the sim interpolated at its stamp,
        oldest first; add the results to the window and return them (empty: nothing new)."""
        out: list[ObjectError] = []
        span = self.sim.span()
        if span is None:
            return out
        while self.pending:
            real = self.pending[0]
            if real.t > span[1]:
                break                                           # wait for the sim
            self.pending.popleft()
            sim = self.sim.at(real.t)
            if sim is None:
                continue                                        # before the sim history: never comparable
            error = object_error(sim, real)
            self.errors.add(JointError(error.t, (POSITION, ANGLE), np.array([error.position, error.angle]), _NAN2))
            out.append(error)
        return out

    def stats(self) -> ObjectStats | None:
        """The errors of the window (ending at the newest comparison), or None if it is empty."""
        found = self.errors.stats()
        if POSITION not in found:
            return None
        position, angle = found[POSITION], found[ANGLE]
        return ObjectStats(position.rms_position, angle.rms_position, position.max_abs_position,
                           angle.max_abs_position, position.samples, self.errors.window)

    def stale_sources(self, now: float) -> list[str]:
        """Why the comparison is stale at ``now`` (arrival clock, s): one phrase per silent source."""
        phrases = (stale_phrase(check.label, check.last_arrival, now, self.stale_after)
                   for check in self.checks.values())
        return [p for p in phrases if p is not None]

    def report(self, now: float) -> ObjectReport:
        """The level and message at ``now`` (arrival clock, s), e.g. ``RMS error 1.2 mm, 0.50 deg over 2 s``,
        with ``(position WARN)`` or ``(angle ERROR)`` appended for what is not OK, and the samples dropped."""
        stale = self.stale_sources(now)
        stats = self.stats()
        window = self.errors.window
        levels = None if stats is None else dict(zip((POSITION, ANGLE), self.thresholds.levels(stats)))
        figures = '' if stats is None else (f'RMS error {stats.rms_position * 1e3:.1f} mm, '
                                            f'{math.degrees(stats.rms_angle):.2f} deg over {window:g} s')
        level, message = windowed_verdict(levels, figures, f'{window:g}', stale)
        dropped = {side: check.dropped() for side, check in self.checks.items() if check.dropped()}
        if dropped:
            message += '; dropped ' + ', '.join(f'{n} {side}' for side, n in dropped.items())
        return ObjectReport(level, message, stats, self.thresholds, stale)
