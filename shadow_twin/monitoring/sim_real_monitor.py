"""The sim-vs-real monitor as the twin monitor node uses it: the sim and one or more real joint-state
streams in, time-aligned errors and a level per joint (with a summary) out.

Part of the twin monitor's core; :mod:`shadow_twin.monitoring.joint.error` has the overview.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, Sequence

from shadow_twin.monitoring.joint.comparison import (ErrorWindow, JointError, JointStats, aligned, joint_error,
                                                     merge_errors)
from shadow_twin.monitoring.joint.samples import JointSample, JointStateHistory
from shadow_twin.monitoring.thresholds import ERROR, LEVEL_NAMES, STALE, WARN, Threshold, Thresholds


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
        #: Called with (stream index, real sample, sim state at its stamp, error) after each
        #: comparison (the drift watch and the lag share of the twin monitor); None: nobody.
        self.on_compare: Callable[[int, JointSample, JointSample, JointError], None] | None = None

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

    def _compare(self, k: int, stream: RealStream, excluded: frozenset) -> JointError | None:
        pair = aligned(stream.history, self.sim, stream.last_t, self.max_gap)
        if pair is None:
            return None
        real, sim = pair
        error = joint_error(sim, real, excluded)
        stream.last_t = real.t
        stream.latest_error = error
        stream.errors.add(error)
        if self.on_compare is not None:
            self.on_compare(k, real, sim, error)
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
        for k, stream in enumerate(self.streams):
            if self._compare(k, stream, _union(tuple(owners))) is not None:
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
