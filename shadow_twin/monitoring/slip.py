"""Slip watch and contact agreement, ROS-free: the monitor's view of what the hand holds.

**Slip watch** (:class:`SlipWatch`). Per label (a fingertip, the palm: the labels of
:mod:`shadow_twin.simulation.contact_sensing`), fed samples (stamp s, slip m/s, in contact): a
sample *slides* when it is in contact and its slip exceeds ``threshold``. The label starts
slipping (an event, a WARN in ``/diagnostics``) once its samples have slid without a break for
``hold`` s of stamps, and stops (an event) once they have not slid for ``release`` s of stamps (a
lost contact counts as not sliding: the object was let go or dropped). Everything is judged on the
samples' stamps, never the wall clock. Bad samples never raise: a stamp not after the label's
previous one, a NaN or infinite stamp, a NaN, infinite or negative slip in contact, are dropped and
counted in :attr:`SlipWatch.dropped` (a sample out of contact needs no slip: NaN is fine there).

How far an object slides before the warning: one accelerating at a (m/s^2) from rest has slid
v^2 / (2 a) when it reaches the threshold v, and slides ``v hold + a hold^2 / 2`` more during
``hold`` (plus up to one sample period at its speed): with the defaults (0.01 m/s, 0.02 s) 0.3 mm
at 0.5 m/s^2, 1.2 mm at 5 m/s^2, 2.2 mm at g (free fall). Held objects in MuJoCo creep (soft
contacts): a box (0.3 kg) at rest on a slope, friction 1, creeps at 1-2 mm/s up to 23 degrees
and 6.5 mm/s at 40 degrees with pyramidal cones (0.5-2 mm/s with elliptic ones); it passes the
threshold only near the friction limit (43 degrees: 10 mm/s), where the object is about to go.

**Contact agreement** (:func:`contact_agreement`, :class:`ContactAgreement`): two sources of the
same labels' contact state (the sim and the real hand or its mock) compared sample by sample: each
reference sample (the real one) is matched with the other source's sample nearest in stamp (within
``tolerance``); the agreement is the fraction of matched samples whose contact states are equal.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from shadow_twin.common.errors import ConfigError

#: m/s: default slip over which a held object is sliding.
DEFAULT_THRESHOLD = 0.01
#: s: default time (of stamps) the slip must stay over the threshold before the watch warns
#: (5 samples at the bridge's 250 Hz).
DEFAULT_HOLD = 0.02
#: s: default time (of stamps) without sliding before the warning ends (a stick-slip does not flap).
DEFAULT_RELEASE = 0.2
#: s: stamp differences this close to ``hold`` or ``release`` count as reaching it (float stamps).
STAMP_EPS = 1e-9
#: The reasons a sample is dropped (keys of :attr:`SlipWatch.dropped`).
BAD_STAMP, STAMP_BACK, BAD_SLIP = 'stamp not finite', 'stamp not after the previous', 'slip not a finite speed'


def _seconds(value, what: str, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (positive and value == 0):
        raise ConfigError(f'{what} must be a finite number {">" if positive else ">="} 0, got {value!r}')
    return float(value)


@dataclass(frozen=True)
class SlipEvent:
    """A label started (``slipping`` True) or stopped slipping at sample stamp ``stamp`` (s).

    ``since``: the stamp its samples began to slide (start) or stopped sliding (stop), s; ``peak``:
    the fastest slip (m/s) from the first sliding sample to this event."""

    label: str
    slipping: bool
    stamp: float
    since: float
    peak: float


@dataclass(frozen=True)
class SlipState:
    """A label's state after its last sample: ``slipping`` (debounced), ``slip`` (m/s, the last
    sample's; 0 out of contact), ``in_contact``, ``stamp`` (s, the last sample's), ``peak`` (m/s,
    the fastest slip of the current or last episode; 0 before any)."""

    slipping: bool
    slip: float
    in_contact: bool
    stamp: float
    peak: float


@dataclass
class _Label:
    slipping: bool = False
    stamp: float = -math.inf
    slide_since: float = math.nan           # first stamp of the current run of sliding samples
    still_since: float = math.nan           # first stamp of the current run of samples not sliding
    peak: float = 0.0
    slip: float = 0.0
    in_contact: bool = False


class SlipWatch:
    """Debounced slip warnings per label (module doc).

    Args:
        threshold: m/s (> 0): a sample in contact slides above it.
        hold: s (>= 0) of sliding stamps before a label is slipping (0: its first sliding sample).
        release: s (>= 0) of stamps without sliding before it stops.
    Raises:
        ConfigError: (one line) a value not a finite number in range.
    """

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, hold: float = DEFAULT_HOLD,
                 release: float = DEFAULT_RELEASE) -> None:
        self.threshold = _seconds(threshold, 'slip threshold (m/s)', positive=True)
        self.hold = _seconds(hold, 'slip hold (s)')
        self.release = _seconds(release, 'slip release (s)')
        #: {reason: samples dropped} (module doc; the reasons :data:`BAD_STAMP`, :data:`STAMP_BACK`, :data:`BAD_SLIP`).
        self.dropped: dict[str, int] = {}
        self._labels: dict[str, _Label] = {}

    def _drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def update(self, label: str, stamp: float, slip: float, in_contact: bool) -> SlipEvent | None:
        """One sample of ``label``: ``stamp`` s, ``slip`` m/s, ``in_contact``. Returns the event it
        causes (the label starts or stops slipping), else None (also for a dropped sample)."""
        stamp = float(stamp)
        if not math.isfinite(stamp):
            self._drop(BAD_STAMP)
            return None
        state = self._labels.setdefault(label, _Label())
        if stamp <= state.stamp:
            self._drop(STAMP_BACK)
            return None
        in_contact = bool(in_contact)
        slip = float(slip) if in_contact else 0.0
        if in_contact and not (math.isfinite(slip) and slip >= 0):
            self._drop(BAD_SLIP)
            return None
        state.stamp, state.slip, state.in_contact = stamp, slip, in_contact
        if in_contact and slip > self.threshold:
            state.still_since = math.nan
            if math.isnan(state.slide_since):
                state.slide_since = stamp
                if not state.slipping:
                    state.peak = 0.0
            state.peak = max(state.peak, slip)
            if not state.slipping and stamp - state.slide_since >= self.hold - STAMP_EPS:
                state.slipping = True
                return SlipEvent(label, True, stamp, state.slide_since, state.peak)
            return None
        state.slide_since = math.nan
        if math.isnan(state.still_since):
            state.still_since = stamp
        if state.slipping and stamp - state.still_since >= self.release - STAMP_EPS:
            state.slipping = False
            return SlipEvent(label, False, stamp, state.still_since, state.peak)
        return None

    def feed(self, label: str, stamps, slips, contacts) -> list[SlipEvent]:
        """:meth:`update` over (N,) arrays of one label's samples (stamps s, slips m/s, contacts
        bool), in order; the events they caused.

        Raises:
            ValueError: arrays of different lengths.
        """
        stamps, slips, contacts = np.asarray(stamps, float), np.asarray(slips, float), np.asarray(contacts, bool)
        if not stamps.shape == slips.shape == contacts.shape or stamps.ndim != 1:
            raise ValueError(f'feed needs (N,) stamps, slips and contacts alike; got {stamps.shape}, '
                             f'{slips.shape}, {contacts.shape}')
        events = (self.update(label, t, s, c) for t, s, c in zip(stamps.tolist(), slips.tolist(), contacts.tolist()))
        return [e for e in events if e is not None]

    def slipping(self) -> list[str]:
        """The labels slipping now, in the order they were first fed."""
        return [label for label, state in self._labels.items() if state.slipping]

    def state(self, label: str) -> SlipState | None:
        """``label``'s :class:`SlipState`, or None before its first sample."""
        s = self._labels.get(label)
        return None if s is None else SlipState(s.slipping, s.slip, s.in_contact, s.stamp, s.peak)

    def states(self) -> dict[str, SlipState]:
        """{label: SlipState} of every label fed."""
        return {label: self.state(label) for label in self._labels}


@dataclass(frozen=True)
class Agreement:
    """Contact agreement of one label: ``agreed`` of ``matched`` reference samples had the same
    contact state as the other source's nearest sample; ``fraction`` = agreed / matched (NaN
    without a matched sample); ``unmatched``: reference samples without one within the tolerance."""

    fraction: float
    agreed: int
    matched: int
    unmatched: int


def contact_agreement(t_ref, ref, t_other, other, tolerance: float) -> Agreement:
    """The agreement of ``ref`` (the reference source, e.g. the real hand) with ``other`` (the sim).

    Args:
        t_ref: (N,) stamps of the reference samples, s, non-decreasing.  ref: (N,) contact states (bool).
        t_other: (M,) stamps of the other source, s, non-decreasing.  other: (M,) contact states.
        tolerance: s (>= 0): the largest stamp difference of a match. Each reference sample is
            matched with the other sample nearest in stamp (the earlier one on a tie).
    Raises:
        ValueError: shapes that do not match, stamps not finite or decreasing, tolerance < 0.
    """
    t_ref, t_other = np.asarray(t_ref, dtype=float), np.asarray(t_other, dtype=float)
    ref, other = np.asarray(ref, dtype=bool), np.asarray(other, dtype=bool)
    if t_ref.ndim != 1 or t_ref.shape != ref.shape or t_other.ndim != 1 or t_other.shape != other.shape:
        raise ValueError(f'contact_agreement needs (N,) stamps and states per source; got {t_ref.shape}, '
                         f'{ref.shape}, {t_other.shape}, {other.shape}')
    for t in (t_ref, t_other):
        if not np.all(np.isfinite(t)) or np.any(np.diff(t) < 0):
            raise ValueError('contact_agreement needs finite, non-decreasing stamps')
    if not tolerance >= 0:
        raise ValueError(f'tolerance must be >= 0 s, got {tolerance!r}')
    if not len(t_ref):
        return Agreement(math.nan, 0, 0, 0)
    if not len(t_other):
        return Agreement(math.nan, 0, 0, len(t_ref))
    after = np.clip(np.searchsorted(t_other, t_ref, side='left'), 0, len(t_other) - 1)
    before = np.clip(after - 1, 0, None)
    nearest = np.where(np.abs(t_other[before] - t_ref) <= np.abs(t_other[after] - t_ref), before, after)
    matched = np.abs(t_other[nearest] - t_ref) <= tolerance
    agreed = int(np.count_nonzero(matched & (other[nearest] == ref)))
    n = int(np.count_nonzero(matched))
    return Agreement(agreed / n if n else math.nan, agreed, n, len(t_ref) - n)


class ContactAgreement:
    """:func:`contact_agreement` per label over the last ``window`` s of the reference source's stamps.

    Args:
        window: s (> 0), of the newest reference stamp of the label.
        tolerance: s (>= 0): the largest stamp difference of a match.
        reference, other: the two sources' names (the reference's samples are the ones counted).
        max_samples: most samples kept per label and source.
    Raises:
        ConfigError: (one line) window not > 0, tolerance not >= 0.

    A sample whose stamp is not after its source's previous one for that label, or not finite, is
    dropped and counted in :attr:`dropped` ({reason: count}).
    """

    def __init__(self, window: float = 10.0, tolerance: float = 0.02, reference: str = 'real',
                 other: str = 'sim', max_samples: int = 50_000) -> None:
        self.window = _seconds(window, 'contact agreement window (s)', positive=True)
        self.tolerance = _seconds(tolerance, 'contact agreement tolerance (s)')
        self.sources = (reference, other)
        self.max_samples = int(max_samples)
        #: {reason: samples dropped}: :data:`BAD_STAMP`, :data:`STAMP_BACK`.
        self.dropped: dict[str, int] = {}
        self._labels: dict[str, dict[str, deque]] = {}

    def add(self, source: str, label: str, stamp: float, in_contact: bool) -> bool:
        """One sample of ``source`` (one of :attr:`sources`) for ``label``: ``stamp`` s,
        ``in_contact``. Returns False when it was dropped.

        Raises:
            ValueError: an unknown source (a programming error).
        """
        if source not in self.sources:
            raise ValueError(f'contact agreement: source {source!r} is not one of {", ".join(self.sources)}')
        stamp = float(stamp)
        reason = None if math.isfinite(stamp) else BAD_STAMP
        streams = self._labels.setdefault(label, {s: deque(maxlen=self.max_samples) for s in self.sources})
        samples = streams[source]
        if reason is None and samples and stamp <= samples[-1][0]:
            reason = STAMP_BACK
        if reason is not None:
            self.dropped[reason] = self.dropped.get(reason, 0) + 1
            return False
        samples.append((stamp, bool(in_contact)))
        newest = streams[self.sources[0]][-1][0] if streams[self.sources[0]] else stamp
        start = newest - self.window - self.tolerance
        for kept in streams.values():
            while kept and kept[0][0] < start:
                kept.popleft()
        return True

    def agreement(self, label: str) -> Agreement:
        """The :class:`Agreement` of ``label`` over the reference samples within ``window`` s of its
        newest reference stamp (NaN fraction without samples)."""
        streams = self._labels.get(label)
        if streams is None or not streams[self.sources[0]]:
            return Agreement(math.nan, 0, 0, 0)
        ref = np.array(streams[self.sources[0]], dtype=float).reshape(-1, 2)
        other = np.array(streams[self.sources[1]], dtype=float).reshape(-1, 2)
        inside = ref[:, 0] > ref[-1, 0] - self.window
        return contact_agreement(ref[inside, 0], ref[inside, 1] > 0, other[:, 0], other[:, 1] > 0, self.tolerance)

    def agreements(self) -> dict[str, Agreement]:
        """{label: Agreement} of every label seen."""
        return {label: self.agreement(label) for label in self._labels}
