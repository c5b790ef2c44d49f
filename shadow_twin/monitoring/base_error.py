"""ROS-free core of the twin monitor's mobile-base check: how far the sim's base is from the robot's.

Both bases report odometry (``nav_msgs/Odometry``): the robot's wheel odometry in its
``odom`` frame (MiR bridge: ``odom`` -> ``base_footprint``), the sim's exact free-body
pose in its own (``sim/odom`` -> ``sim/base_footprint``). Both start at the origin, so the
two ``odom`` frames coincide at start and the poses compare directly.

* :class:`PlanarPose`: stamp ``t`` (s), position ``x``, ``y`` (m) and ``yaw`` (rad) of a
  base in its odom frame; :func:`planar_pose` makes one from an odometry's position and
  orientation quaternion (yaw = ``atan2(2 (w z + x y), 1 - 2 (y^2 + z^2))``, the z-y-x
  Euler angle, :func:`shadow_twin.control.base.trajectory.yaw_from_quaternion`).
* :class:`PoseHistory`: the recent poses of one stream, interpolated linearly at a time
  (yaw along the shorter arc: the history keeps yaw unwrapped, each yaw within pi of the
  previous one: continuous for 50 Hz odometry turning slower than 157 rad/s). It is a
  :class:`~shadow_twin.monitoring.joint.error.JointStateHistory` of three "joints"
  (``x``, ``y``, ``yaw``), so poses are interpolated in time as joint states are.
* :func:`base_error`: sim minus real at one stamp: ``x``, ``y`` (m, odom frame), ``yaw``
  (rad, wrapped into [-pi, pi), :func:`shadow_twin.control.diff_drive.wrap_angle`) and
  the position error ``hypot(x, y)`` (m).
* :class:`BaseThresholds`: warn / error levels of the RMS position error (m) and of the
  RMS yaw error (rad), validated (error >= warn > 0).
* :class:`BaseMonitor`: feed both streams; :meth:`BaseMonitor.update` compares every
  new real pose with the sim interpolated at its stamp (the sim's newest pose held for a
  real pose at most ``max_gap`` s after it, as for the joints); :meth:`BaseMonitor.report`
  gives the RMS errors over the last ``window`` s and a level: the worse of the
  position and the yaw level (OK < warn <= WARN < error <= ERROR, levels of
  ``diagnostic_msgs/DiagnosticStatus``), STALE while a stream is silent for
  ``stale_after`` s, has sent nothing, or the window is empty.

RMS position error over the window: ``sqrt(mean(x^2 + y^2))`` (m); RMS yaw error:
``sqrt(mean(yaw^2))`` (rad).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from shadow_twin.control.base.trajectory import yaw_from_quaternion
from shadow_twin.control.diff_drive import wrap_angle
from shadow_twin.monitoring.joint.comparison import ErrorWindow, JointError
from shadow_twin.monitoring.joint.samples import JointSample, JointStateHistory
from shadow_twin.monitoring.sim_real_monitor import stale_phrase
from shadow_twin.monitoring.thresholds import Threshold, checked_threshold, windowed_verdict

#: Default thresholds: RMS position error, m, and RMS yaw error, rad.
DEFAULT_POSITION_WARN, DEFAULT_POSITION_ERROR = 0.05, 0.2
DEFAULT_YAW_WARN, DEFAULT_YAW_ERROR = 0.1, 0.3
#: The "joints" of a pose in a :class:`PoseHistory`.
POSE_FIELDS = ('x', 'y', 'yaw')
#: The names of the two errors in a :class:`BaseMonitor`'s window.
POSITION, YAW = 'position', 'yaw'
_NO_VELOCITY = np.full(3, math.nan)
_NO_VELOCITY.setflags(write=False)


@dataclass(frozen=True)
class PlanarPose:
    """A base's pose in its odom frame at one time.

    Attributes:
        t: stamp, s (the same clock for both streams).
        x, y: position, m.
        yaw: heading, rad (any value; compared modulo 2 pi).
        stamp: the original stamp object, carried through (may be None).
    """

    t: float
    x: float
    y: float
    yaw: float
    stamp: Any = None

    def __post_init__(self) -> None:
        if not all(math.isfinite(v) for v in (self.t, self.x, self.y, self.yaw)):
            raise ValueError(f'pose must be finite: t {self.t!r}, x {self.x!r}, y {self.y!r}, yaw {self.yaw!r}')


def planar_pose(t: float, x: float, y: float, qx: float, qy: float, qz: float, qw: float,
                stamp: Any = None) -> PlanarPose:
    """The planar pose of an odometry: position ``x``, ``y`` (m), yaw of the orientation
    quaternion (``qx, qy, qz, qw``, ROS order). Raises ValueError for a non-finite value
    or a zero quaternion."""
    if not any(q != 0.0 for q in (qx, qy, qz, qw)):
        raise ValueError('odometry orientation is a zero quaternion')
    return PlanarPose(float(t), float(x), float(y), yaw_from_quaternion(qx, qy, qz, qw), stamp)


class PoseHistory:
    """The recent poses of one stream (see the module doc).

    Args:
        max_age: poses older than the newest by more than this are dropped, s (> 0).
        max_samples: at most this many are kept (>= 2).
    """

    def __init__(self, max_age: float = 1.0, max_samples: int = 1000) -> None:
        self.samples = JointStateHistory(max_age, max_samples)

    def __len__(self) -> int:
        return len(self.samples)

    def add(self, pose: PlanarPose) -> None:
        """Append ``pose``, its yaw unwrapped to within pi of the newest pose's (a pose older
        than the newest restarts the history, as :meth:`JointStateHistory.add`)."""
        yaw = pose.yaw
        last = self.samples.latest()
        if last is not None and pose.t >= last.t:
            yaw = last.position[2] + wrap_angle(yaw - last.position[2])
        self.samples.add(JointSample(pose.t, POSE_FIELDS, np.array([pose.x, pose.y, yaw]), _NO_VELOCITY,
                                     pose.stamp))

    def latest(self) -> PlanarPose | None:
        """The newest pose (yaw unwrapped), or None."""
        last = self.samples.latest()
        return None if last is None else _pose(last)

    def at(self, t: float, max_gap: float = 0.0) -> PlanarPose | None:
        """The pose at ``t`` (linear interpolation; see :meth:`JointStateHistory.at`), or None."""
        sample = self.samples.at(t, max_gap)
        return None if sample is None else _pose(sample)


def _pose(sample: JointSample) -> PlanarPose:
    x, y, yaw = (float(v) for v in sample.position)
    return PlanarPose(sample.t, x, y, yaw, sample.stamp)


@dataclass(frozen=True)
class BaseError:
    """Sim minus real pose at one time.

    Attributes:
        t: stamp of the real pose compared, s.
        x, y: position error in the (common) odom frame, m.
        yaw: yaw error, rad, in [-pi, pi).
        stamp: the real pose's original stamp (or None).
    """

    t: float
    x: float
    y: float
    yaw: float
    stamp: Any = None

    @property
    def position(self) -> float:
        """Distance between the two positions, m: ``hypot(x, y)``."""
        return math.hypot(self.x, self.y)


def base_error(sim: PlanarPose, real: PlanarPose) -> BaseError:
    """Sim minus real (the sim normally interpolated at ``real.t``), stamped with ``real``'s stamp."""
    return BaseError(real.t, sim.x - real.x, sim.y - real.y, wrap_angle(sim.yaw - real.yaw), real.stamp)


@dataclass(frozen=True)
class BaseStats:
    """The base's errors over a window.

    Attributes:
        rms_position: ``sqrt(mean(x^2 + y^2))``, m.
        rms_yaw: ``sqrt(mean(yaw^2))``, rad.
        max_position: largest ``hypot(x, y)``, m.
        max_abs_yaw: largest ``|yaw|``, rad.
        samples: comparisons in the window.
        window: its length, s.
    """

    rms_position: float
    rms_yaw: float
    max_position: float
    max_abs_yaw: float
    samples: int
    window: float


@dataclass(frozen=True)
class BaseThresholds:
    """Warn / error levels of the RMS position error (m) and RMS yaw error (rad).

    Use :meth:`from_config` for values from parameters (validated)."""

    position: Threshold = Threshold(DEFAULT_POSITION_WARN, DEFAULT_POSITION_ERROR)
    yaw: Threshold = Threshold(DEFAULT_YAW_WARN, DEFAULT_YAW_ERROR)

    @classmethod
    def from_config(cls, position_warn: float, position_error: float, yaw_warn: float,
                    yaw_error: float) -> 'BaseThresholds':
        """Validated thresholds (finite, error >= warn > 0). Raises ConfigError naming the pair."""
        return cls(checked_threshold(position_warn, position_error, 'the base position '
                                     '(base_thresholds.position.warn, .error)', 'm'),
                   checked_threshold(yaw_warn, yaw_error, 'the base yaw (base_thresholds.yaw.warn, .error)', 'rad'))

    def levels(self, stats: BaseStats) -> tuple[int, int]:
        """(position level, yaw level) of ``stats`` (see :meth:`Threshold.level`)."""
        return self.position.level(stats.rms_position), self.yaw.level(stats.rms_yaw)


@dataclass(frozen=True)
class BaseReport:
    """The base's verdict: level (the worse of position and yaw, or STALE), a one-line
    message, the statistics (None without comparisons), the thresholds and why it is stale."""

    level: int
    message: str
    stats: BaseStats | None
    thresholds: BaseThresholds
    stale: list[str]


class BaseMonitor:
    """Compares the sim's base odometry with the robot's over time.

    Args:
        thresholds: the levels (attribute, may be replaced).
        window: RMS window, s (attribute ``window``, may be changed).
        stale_after: a stream with no pose for this long (arrival clock) is stale, s.
        max_gap: a real stamp outside the sim history by at most this much is compared
            with the nearest sim pose, s.
        history_age: how much of each stream is kept, s.
        real_label, sim_label: the streams' names in messages (e.g. topics).
    Raises:
        ValueError: non-positive window or stale_after.
    """

    def __init__(self, thresholds: BaseThresholds | None = None, window: float = 2.0, stale_after: float = 0.5,
                 max_gap: float = 0.05, history_age: float = 1.0, real_label: str = 'real',
                 sim_label: str = 'sim') -> None:
        if not stale_after > 0:
            raise ValueError(f'stale_after must be > 0 s, got {stale_after!r}')
        self.thresholds = thresholds or BaseThresholds()
        self.errors = ErrorWindow(window)
        self.stale_after = float(stale_after)
        self.max_gap = float(max_gap)
        self.real = PoseHistory(history_age)
        self.sim = PoseHistory(history_age)
        self.labels = (real_label, sim_label)
        self._arrival: list[float | None] = [None, None]
        self._last_t: float | None = None

    @property
    def window(self) -> float:
        """RMS window, s."""
        return self.errors.window

    @window.setter
    def window(self, value: float) -> None:
        if not value > 0:
            raise ValueError(f'window must be > 0 s, got {value!r}')
        self.errors.window = float(value)

    def add_real(self, pose: PlanarPose, arrival: float) -> None:
        """A pose of the robot's odometry, received at ``arrival`` (s, the clock of ``report``'s ``now``)."""
        latest = self.real.samples.latest()
        if latest is not None and pose.t < latest.t:
            self._last_t = None           # the stream restarted
        self.real.add(pose)
        self._arrival[0] = arrival

    def add_sim(self, pose: PlanarPose, arrival: float) -> None:
        """A pose of the sim's odometry, received at ``arrival`` s."""
        self.sim.add(pose)
        self._arrival[1] = arrival

    def update(self) -> list[BaseError]:
        """Compare every real pose not compared yet with the sim interpolated at its stamp, oldest
        first, add the results to the window and return them (empty: nothing new).

        A real pose before the sim history (by more than ``max_gap`` s) is skipped; one after
        it by at most ``max_gap`` s is compared with the newest sim pose, further after it
        waits for the sim (with the poses after it). Unlike the joints (250 Hz, one
        comparison per call), every pose of a 50 Hz odometry is compared: the node's timer and
        the odometry tick at the same rate, and one per call would skip poses whenever two
        arrive between calls.
        """
        out: list[BaseError] = []
        oldest = self.sim.samples.span()
        if oldest is None:
            return out
        for sample in self.real.samples.after(self._last_t):
            state = self.sim.samples.at(sample.t, self.max_gap)
            if state is None:
                if sample.t < oldest[0]:
                    continue                      # before the sim history: never comparable
                break                             # after it: wait for the sim
            error = base_error(_pose(state), _pose(sample))
            self._last_t = sample.t
            self.errors.add(JointError(error.t, (POSITION, YAW), np.array([error.position, error.yaw]),
                                       np.array([math.nan, math.nan])))
            out.append(error)
        return out

    def stats(self) -> BaseStats | None:
        """The errors of the window (ending at the newest comparison), or None if it is empty."""
        found = self.errors.stats()
        if POSITION not in found:
            return None
        position, yaw = found[POSITION], found[YAW]
        return BaseStats(position.rms_position, yaw.rms_position, position.max_abs_position,
                         yaw.max_abs_position, position.samples, self.errors.window)

    def stale_streams(self, now: float) -> list[str]:
        """Why the comparison is stale at ``now`` (arrival clock, s): one phrase per silent stream."""
        phrases = (stale_phrase(label, arrival, now, self.stale_after)
                   for label, arrival in zip(self.labels, self._arrival))
        return [p for p in phrases if p is not None]

    def report(self, now: float) -> BaseReport:
        """The level and message at ``now`` (arrival clock, s), e.g. ``RMS error 0.012 m, 0.004 rad
        over 2.0 s``, with ``(position WARN)`` or ``(yaw ERROR)`` appended for what is not OK."""
        stale = self.stale_streams(now)
        stats = self.stats()
        window = self.errors.window
        levels = None if stats is None else dict(zip((POSITION, YAW), self.thresholds.levels(stats)))
        figures = '' if stats is None else (f'RMS error {stats.rms_position:.3f} m, {stats.rms_yaw:.3f} rad over '
                                            f'{window:.1f} s')
        level, message = windowed_verdict(levels, figures, f'{window:.1f}', stale)
        return BaseReport(level, message, stats, self.thresholds, stale)
