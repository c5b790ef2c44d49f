"""PNGs of real vs simulated joint positions of a bag (``shadow-twin plot``), drawn from a
:class:`BagComparison` (read by :func:`shadow_twin.calibration.recordings.bag_comparison.compare_bag`):

* ``<joint>.png`` per joint: upper panel real vs sim position (rad), lower
  panel sim - real (rad) with its RMS;
* ``overview.png``: a grid of all plotted joints (real vs sim).

Time axes are seconds from the first real sample. A comparison of a single JointState
stream is plotted alone (no error panel). Library use: :func:`write_plots` (or
:func:`shadow_twin.calibration.recordings.bag_comparison.plot_bag`, which reads the bag too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.files import write_bytes_atomic
from shadow_twin.plots.figures import figure_png

OVERVIEW = 'overview'
_BAG_SUFFIXES = ('.bag', '.mcap', '.db3')


@dataclass
class JointTrace:
    """One joint's streams, ready to plot.

    Attributes:
        joint: ROS joint name.
        real_t, real_q: (N,) s from the first real sample, (N,) rad; empty if
            the joint is not in the real stream (or there is none).
        sim_t, sim_q: (M,) s (same clock origin), (M,) rad; empty likewise.
        err_t, err: (K,) s, (K,) rad: sim - real at the real sample times that
            the sim stream covers; empty without both streams.
    """

    joint: str
    real_t: np.ndarray
    real_q: np.ndarray
    sim_t: np.ndarray
    sim_q: np.ndarray
    err_t: np.ndarray = field(default_factory=lambda: np.empty(0))
    err: np.ndarray = field(default_factory=lambda: np.empty(0))

    @property
    def rms(self) -> float:
        """RMS of sim - real, rad (NaN when there is nothing to compare)."""
        return float(np.sqrt(np.mean(self.err ** 2))) if self.err.size else float('nan')

    @property
    def max_abs(self) -> float:
        """Largest |sim - real|, rad (NaN when there is nothing to compare)."""
        return float(np.max(np.abs(self.err))) if self.err.size else float('nan')

    @property
    def range(self) -> float:
        """Largest position range (max - min) over both streams, rad."""
        spans = [float(q.max() - q.min()) for q in (self.real_q, self.sim_q) if q.size]
        return max(spans) if spans else 0.0


@dataclass
class BagComparison:
    """Real and simulated joint streams of one bag, per joint.

    Attributes:
        bag: the bag read.
        real_topic / sim_topic: topics plotted; one of them is None when the
            bag is plotted as a single stream.
        start: s, bag clock: time origin of every trace (the first real sample,
            or the first sample of the single stream).
        traces: one per plotted joint, in recording order.
    """

    bag: Path
    real_topic: str | None
    sim_topic: str | None
    start: float
    traces: list[JointTrace]

    @property
    def rms(self) -> dict[str, float]:
        """{joint: RMS of sim - real, rad} (NaN where a stream lacks the joint)."""
        return {t.joint: t.rms for t in self.traces}

    @property
    def paired(self) -> bool:
        """True when both a real and a sim stream are plotted."""
        return self.real_topic is not None and self.sim_topic is not None


def _bag_root(bag: Path) -> Path:
    """The ROS 2 bag directory holding ``bag``, or ``bag`` itself for a ROS 1 file."""
    bag = bag.resolve()
    if bag.is_dir():
        return bag
    if bag.suffix in ('.mcap', '.db3') and (bag.parent / 'metadata.yaml').exists():
        return bag.parent
    return bag


def check_out_dir(out_dir: str | Path, bag: str | Path) -> Path:
    """Validate an output directory: not inside the bag, not an existing file.

    Returns the path. Raises ConfigError.
    """
    out_dir = Path(out_dir)
    resolved, root = out_dir.resolve(), _bag_root(Path(bag))
    if resolved == root or root in resolved.parents:
        raise ConfigError(f'output directory {out_dir} is inside the bag {root}; choose another --out')
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f'output directory {out_dir} exists and is not a directory')
    return out_dir


def default_out_dir(bag: str | Path) -> Path:
    """``<bag name without .bag/.mcap/.db3>_plots`` in the current directory."""
    name = Path(bag).name
    for suffix in _BAG_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[:-len(suffix)]
            break
    return Path.cwd() / f'{name or "bag"}_plots'


def _file_names(joints: Sequence[str]) -> list[str]:
    """Distinct file stems for joints (unsafe characters -> '_'; never 'overview')."""
    used, names = {OVERVIEW}, []
    for joint in joints:
        stem = re.sub(r'[^A-Za-z0-9_.-]', '_', joint).lstrip('.') or 'joint'
        candidate, k = stem, 1
        while candidate.lower() in used:
            candidate, k = f'{stem}_{k}', k + 1
        used.add(candidate.lower())
        names.append(candidate)
    return names


def _png(fig) -> bytes:
    return figure_png(fig)


def _labels(cmp: BagComparison) -> tuple[str, str]:
    return (f'real {cmp.real_topic}' if cmp.real_topic else '', f'sim {cmp.sim_topic}' if cmp.sim_topic else '')


def _draw_streams(ax, trace: JointTrace, cmp: BagComparison, lw: float = 1.4) -> None:
    real_label, sim_label = _labels(cmp)
    if trace.real_t.size:
        ax.plot(trace.real_t, trace.real_q, color='k', lw=lw, label=real_label)
    if trace.sim_t.size:
        ax.plot(trace.sim_t, trace.sim_q, color='C0', lw=lw * 0.8, ls='--' if cmp.paired else '-',
                label=sim_label)
    ax.grid(True, alpha=0.3)


def _time_label(cmp: BagComparison) -> str:
    return f'time from first {"real " if cmp.real_topic else ""}sample (s)'


def _joint_figure(trace: JointTrace, cmp: BagComparison):
    import matplotlib.pyplot as plt  # lazy: heavy (~0.5 s), only needed when figures are drawn
    if not cmp.paired:
        fig, ax = plt.subplots(figsize=(8, 3.6), layout='constrained')
        _draw_streams(ax, trace, cmp)
        ax.set_ylabel('position (rad)')
        ax.set_xlabel(_time_label(cmp))
        ax.legend(fontsize=8)
        ax.set_title(f'{trace.joint}: {cmp.real_topic or cmp.sim_topic} ({cmp.bag.name})')
        return fig
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.6), sharex=True,
                                      gridspec_kw={'height_ratios': [3, 2]}, layout='constrained')
    _draw_streams(top, trace, cmp)
    top.set_ylabel('position (rad)')
    top.legend(fontsize=8)
    top.set_title(f'{trace.joint}: real vs sim ({cmp.bag.name})')
    bottom.axhline(0.0, color='0.5', lw=0.8)
    if trace.err.size:
        bottom.plot(trace.err_t, trace.err, color='C3', lw=1.1, label=f'sim - real, RMS {trace.rms:.4g} rad')
        bottom.legend(fontsize=8)
        bottom.set_title(f'sim - real: RMS {trace.rms:.4g} rad, max |error| {trace.max_abs:.4g} rad', fontsize=10)
    else:
        only = 'real' if trace.real_t.size else 'sim'
        bottom.set_title(f'sim - real: n/a (joint only in the {only} stream)', fontsize=10)
    bottom.set_ylabel('sim - real (rad)')
    bottom.set_xlabel(_time_label(cmp))
    bottom.grid(True, alpha=0.3)
    return fig


def _overview_figure(cmp: BagComparison):
    import matplotlib.pyplot as plt  # lazy: heavy (~0.5 s), only needed when figures are drawn
    n = len(cmp.traces)
    cols = min(4, n)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.5 * rows), sharex=True, squeeze=False,
                             layout='constrained')
    for ax, trace in zip(axes.flat, cmp.traces):
        _draw_streams(ax, trace, cmp, lw=1.1)
        title = trace.joint if np.isnan(trace.rms) else f'{trace.joint}  RMS {trace.rms:.3g} rad'
        ax.set_title(title, fontsize=9)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel('time (s)')
    for ax in axes[:, 0]:
        ax.set_ylabel('position (rad)')
    axes.flat[0].legend(fontsize=7)
    what = 'real vs sim' if cmp.paired else (cmp.real_topic or cmp.sim_topic)
    fig.suptitle(f'{cmp.bag.name}: {what}, {n} joint(s)')
    return fig


def write_plots(cmp: BagComparison, out_dir: str | Path) -> list[Path]:
    """Write ``overview.png`` and one ``<joint>.png`` per trace into ``out_dir``.

    Each file is written atomically; ``out_dir`` is created if missing (other
    files in it are left alone). Returns the paths written, overview first.
    Raises ConfigError if ``out_dir`` lies inside the bag or is a file, or
    there is nothing to plot; OSError if it cannot be written.
    """
    import matplotlib  # lazy: heavy (~0.5 s), only needed when figures are drawn
    matplotlib.use('Agg')
    out_dir = check_out_dir(out_dir, cmp.bag)
    if not cmp.traces:
        raise ConfigError(f'{cmp.bag}: no joint to plot')
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [write_bytes_atomic(out_dir / f'{OVERVIEW}.png', _png(_overview_figure(cmp)))]
    for trace, stem in zip(cmp.traces, _file_names([t.joint for t in cmp.traces])):
        written.append(write_bytes_atomic(out_dir / f'{stem}.png', _png(_joint_figure(trace, cmp))))
    return written
