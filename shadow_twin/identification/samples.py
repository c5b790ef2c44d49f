"""Recordings turned into fit samples: filtered motion, its regressors, raw and filtered efforts.

Each contiguous segment of a recording is filtered and differentiated on its own
(:mod:`~shadow_twin.identification.signals`); the first and last ``padlen`` samples of a segment,
where the zero-phase filter's start-up is still felt, are left out (``edge_rows``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shadow_twin.identification.recordings import EffortRecording
from shadow_twin.identification.regressor import EffortRegressor, Regressors
from shadow_twin.identification.signals import FilterSettings, differentiate, sample_rate


@dataclass
class Samples:
    """The usable samples of one recording.

    Attributes:
        recording: the recording.
        index: (n,) indices into the recording's arrays.
        regressors: along those samples.
        effort: (n, J) raw measured efforts (the unit of the recording; the fit's target).
        rate_hz: median sample rate.
        edge_rows: samples left out at the segments' ends.
    """

    recording: EffortRecording
    index: np.ndarray
    regressors: Regressors
    effort: np.ndarray
    rate_hz: float
    edge_rows: int

    @property
    def times(self) -> np.ndarray:
        """(n,) s."""
        return self.recording.times[self.index]


def prepare(recording: EffortRecording, regressor: EffortRegressor, settings: FilterSettings,
            links: bool = False) -> Samples:
    """Filter, differentiate and evaluate the regressors of every segment of ``recording``
    (``links``: with the links' columns)."""
    pad = settings.padlen()
    parts, index = [], []
    rate = sample_rate(recording.times)
    for a, b in recording.segments:
        if b - a <= 3 * pad:
            continue
        t = recording.times[a:b]
        q, qd, qdd = differentiate(t, recording.positions[a:b], settings)
        keep = slice(pad, b - a - pad)
        # the friction's state runs along the measured positions from the segment's first sample
        parts.append(regressor.evaluate(q[keep], qd[keep], qdd[keep], links,
                                        path=recording.positions[a:a + keep.stop], times=t[keep]))
        index.append(np.arange(a + pad, b - pad))
    index = np.concatenate(index) if index else np.zeros(0, dtype=int)
    empty = np.zeros((0, len(recording.joints)))
    regs = Regressors.concatenate(parts) if parts else regressor.evaluate(empty, empty, empty, links)
    return Samples(recording, index, regs, recording.efforts[index], rate, int(recording.times.size - index.size))
