"""The figure of a contact calibration (``shadow-twin calibrate --contacts``: ``runs.png`` in its output): one
column per protocol run, the recording against its replay with the model as given and as fitted.

Top: how far the object moved in the palm's frame since the run began (mm) over the run's time (s), the
slip onset's distance dotted (a tilt run's title gives its rate). Bottom: the effort of the grip joint whose
recorded effort changed most in the run (N m; for a push, the pushing joint's: friction times weight), each
curve less its value at the run's start, as the fit compares them (``effort_change``). Drawn with
matplotlib's Agg backend and written atomically.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Protocol, Sequence

import numpy as np

from shadow_twin.plots.figures import write_figure


class TiltRecord(Protocol):
    """What a run's figure reads of a record (:class:`shadow_twin.calibration.contacts.tilt.TiltRecord`, which the
    plots may not import: they come before the calibration in the core's order)."""

    times: np.ndarray       # (N,) s from the run's start
    joints: tuple           # the J grip joints
    effort: np.ndarray      # (N, J) N m

    def displacement(self) -> np.ndarray:
        """(N,) m: how far the object moved in the palm's frame since the run began."""

#: Labels of the two replays, in the order ``replays`` gives them ('before', 'after').
MODELS = {'before': 'sim, model as given', 'after': 'sim, calibrated'}


def _effort_column(record: TiltRecord) -> int | None:
    """The grip joint whose effort changed most over ``record`` (None without efforts)."""
    if not record.joints or record.effort.size == 0:
        return None
    return int(np.argmax(np.ptp(record.effort, axis=0)))


def contact_runs_figure(recordings: Mapping[str, TiltRecord], replays: Mapping[str, Mapping[str, TiltRecord]],
                        held_out: Sequence[str] = (), onset_m: float | None = None, rates: Mapping[str, float] = {}):
    """The matplotlib figure of the module doc.

    Args:
        recordings: {run: record} of the robot (the runs drawn, in this order).
        replays: {'before', 'after'}: {run: replayed record} (a run missing from one is drawn without it).
        held_out: the hold-out runs' names (their titles say so).
        onset_m: the protocol's slip onset distance, m (drawn dotted; None: not drawn).
        rates: {run: tilt rate, rad/s} (in the titles; a push has none).
    Raises:
        ValueError: no recording to draw.
    """
    if not recordings:
        raise ValueError('no run to draw')
    import matplotlib  # lazy: heavy, only needed when figures are drawn
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    names = list(recordings)
    fig, axes = plt.subplots(2, len(names), figsize=(3.6 * len(names), 6.2), squeeze=False, sharex='col')
    styles = {'before': dict(color='C3', ls='--', lw=1.2), 'after': dict(color='C2', ls='-', lw=1.3)}
    for k, name in enumerate(names):
        recorded, top, bottom = recordings[name], axes[0][k], axes[1][k]
        top.plot(recorded.times, recorded.displacement() * 1e3, color='k', lw=2.2, alpha=0.5, label='robot')
        column = _effort_column(recorded)
        if column is not None:
            bottom.plot(recorded.times, recorded.effort[:, column] - recorded.effort[0, column], color='k', lw=2.2,
                        alpha=0.5, label='robot')
        for which, label in MODELS.items():
            replay = replays.get(which, {}).get(name)
            if replay is None:
                continue
            top.plot(replay.times, replay.displacement() * 1e3, label=label, **styles[which])
            if column is not None and replay.effort.size:
                bottom.plot(replay.times, replay.effort[:, column] - replay.effort[0, column], label=label,
                            **styles[which])
        if onset_m:
            top.axhline(onset_m * 1e3, color='0.5', ls=':', lw=1.0, label='slip onset')
        rate = rates.get(name, 0.0)
        top.set_title(f'{name}{" (held out)" if name in held_out else ""}\n'
                      + (f'tilt {np.degrees(rate):g} deg/s' if rate else 'push'), fontsize=9)
        top.set_ylabel('object moved in the palm, mm')
        bottom.set_ylabel(f'{recorded.joints[column]} effort change, N m' if column is not None else 'no efforts')
        bottom.set_xlabel('time from the run start, s')
        for ax in (top, bottom):
            ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle('contact calibration: the runs, robot against sim')
    fig.tight_layout()
    return fig


def plot_contact_runs(path: str | Path, recordings: Mapping[str, TiltRecord],
                      replays: Mapping[str, Mapping[str, TiltRecord]], held_out: Sequence[str] = (),
                      onset_m: float | None = None, rates: Mapping[str, float] = {}) -> Path:
    """Write :func:`contact_runs_figure` as a PNG at ``path`` (atomically; parents created); returns the path.
    Raises ValueError: no recording to draw."""
    fig = contact_runs_figure(recordings, replays, held_out, onset_m, rates)
    path = Path(path)
    return write_figure(path, fig)
