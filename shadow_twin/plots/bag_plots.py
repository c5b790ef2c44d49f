"""``shadow-twin plot``: PNGs of real vs simulated joint positions from any recording.

For people without rqt: reads the real and the simulated ``sensor_msgs/JointState``
streams of a ROS 1 or ROS 2 bag (default topics ``/joint_states`` and
``/sim/joint_states``) and writes, into an output directory,

* ``<joint>.png`` per joint: upper panel real vs sim position (rad), lower
  panel sim - real (rad) with its RMS;
* ``overview.png``: a grid of all plotted joints (real vs sim).

Time axes are seconds from the first real sample. The error sim - real is
taken at the real sample times, the sim stream linearly interpolated onto them
(:func:`shadow_twin.calibration.alignment.resample`), where both streams cover the time.
A bag with a single JointState topic is plotted alone (no error panel).

Library use: :func:`plot_bag` (or :func:`compare_bag` + :func:`write_plots`);
command line: :func:`main`. No ROS installation is needed.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from shadow_twin.calibration.alignment import resample
from shadow_twin.calibration.recording import JointStateRecording, joint_state_topics, read_joint_states
from shadow_twin.calibration.report import figure_png
from shadow_twin.common.errors import ConfigError, RecordingError
from shadow_twin.common.files import write_bytes_atomic

REAL_TOPIC = '/joint_states'
SIM_TOPIC = '/sim/joint_states'
MOVING_RANGE = 1e-3  # rad: a joint whose position range exceeds this in either stream "moves"
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


# -- reading -----------------------------------------------------------------------------------
def resolve_topics(bag: str | Path, real_topic: str | None = None,
                   sim_topic: str | None = None) -> tuple[str | None, str | None]:
    """Choose the (real, sim) JointState topics of a bag.

    Topics given are used as they are; otherwise the defaults ``/joint_states``
    and ``/sim/joint_states`` when present. A bag with a single JointState topic
    is plotted alone (returned as the real topic unless it is the sim default).
    With a topic given for only one stream and the other stream's default
    absent, that one stream is plotted alone.

    Returns:
        (real topic or None, sim topic or None); never both None.
    Raises:
        RecordingError: missing or unreadable bag; no JointState topic; a given
        topic absent; several JointState topics and the defaults absent.
    """
    bag = Path(bag)
    topics = joint_state_topics(bag)
    if not topics:
        read_joint_states(bag)  # raises with the bag's topics listed
        raise RecordingError(f'{bag}: no sensor_msgs/JointState topic')
    for flag, topic in (('--real-topic', real_topic), ('--sim-topic', sim_topic)):
        if topic is not None and topic not in topics:
            raise RecordingError(f'{bag}: no JointState topic {topic!r} ({flag}); JointState topics: {topics}')
    if real_topic is None and sim_topic is None:
        if len(topics) == 1:
            only = topics[0]
            return (None, only) if only == SIM_TOPIC else (only, None)
        if REAL_TOPIC in topics and SIM_TOPIC in topics:
            return REAL_TOPIC, SIM_TOPIC
        raise RecordingError(f'{bag}: several JointState topics {topics} but not both {REAL_TOPIC} and '
                             f'{SIM_TOPIC}; choose them with --real-topic and --sim-topic')
    if real_topic is None:
        real_topic = REAL_TOPIC if REAL_TOPIC in topics and REAL_TOPIC != sim_topic else None
    if sim_topic is None:
        sim_topic = SIM_TOPIC if SIM_TOPIC in topics and SIM_TOPIC != real_topic else None
    return real_topic, sim_topic


def _finite(rec: JointStateRecording | None, joint: str, start: float) -> tuple[np.ndarray, np.ndarray]:
    """(times s from ``start``, positions rad) of a joint's finite samples; empty if absent."""
    if rec is None or joint not in rec.joint_names:
        return np.empty(0), np.empty(0)
    q = rec.frame['position'][joint].to_numpy(dtype=float)
    ok = np.isfinite(q)
    return rec.times[ok] - start, q[ok]


def select_joints(available: Sequence[str], patterns: Sequence[str]) -> list[str]:
    """Joints of ``available`` (in its order) matching any fnmatch glob of ``patterns``.

    Raises RecordingError naming the globs that match no joint.
    """
    unmatched = [p for p in patterns if not fnmatch.filter(available, p)]
    if unmatched:
        raise RecordingError(f'joint pattern(s) {unmatched} match no recorded joint; recorded: {list(available)}')
    return [j for j in available if any(fnmatch.fnmatchcase(j, p) for p in patterns)]


def compare_bag(bag: str | Path, real_topic: str | None = None, sim_topic: str | None = None,
                joints: Sequence[str] | None = None, moving_only: bool = True) -> BagComparison:
    """Read the real and simulated JointState streams of a bag, per joint.

    Args:
        bag: ROS 1 ``.bag`` or ROS 2 bag (directory, ``.mcap`` or ``.db3``).
        real_topic, sim_topic: see :func:`resolve_topics`.
        joints: fnmatch globs on ROS joint names; every matching joint is
            plotted. Default: every joint of the real stream, then the sim-only
            ones, filtered by ``moving_only``.
        moving_only: without ``joints``, keep only joints whose position range
            exceeds 1e-3 rad in either stream.
    Returns:
        BagComparison; times in s from the first real sample, positions rad.
    Raises:
        RecordingError: see :func:`resolve_topics` and
        :func:`shadow_twin.calibration.recording.read_joint_states`; a glob matching no
        joint; no joint moving; real and sim streams that do not overlap in time.
    """
    bag = Path(bag)
    real_topic, sim_topic = resolve_topics(bag, real_topic, sim_topic)
    real = read_joint_states(bag, real_topic) if real_topic else None
    sim = read_joint_states(bag, sim_topic) if sim_topic else None
    first = real if real is not None else sim
    start = float(first.times[0])
    available = list(dict.fromkeys([*(real.joint_names if real else []), *(sim.joint_names if sim else [])]))

    traces = []
    for joint in available:
        real_t, real_q = _finite(real, joint, start)
        sim_t, sim_q = _finite(sim, joint, start)
        trace = JointTrace(joint, real_t, real_q, sim_t, sim_q)
        if real_t.size and sim_t.size:
            keep = (real_t >= sim_t[0]) & (real_t <= sim_t[-1])
            if keep.any():
                trace.err_t = real_t[keep]
                trace.err = resample(sim_t, sim_q, trace.err_t)[:, 0] - real_q[keep]
        traces.append(trace)

    common = [t for t in traces if t.real_t.size and t.sim_t.size]
    if common and not any(t.err.size for t in common):
        raise RecordingError(f'{bag}: {real_topic} ([{real.times[0]:.3f}, {real.times[-1]:.3f}] s) and '
                             f'{sim_topic} ([{sim.times[0]:.3f}, {sim.times[-1]:.3f}] s) do not overlap in '
                             f'time (stamped with different clocks?)')
    if joints is not None:
        chosen = set(select_joints(available, list(joints)))
        traces = [t for t in traces if t.joint in chosen]
    elif moving_only:
        moving = [t for t in traces if t.range > MOVING_RANGE]
        if not moving:
            raise RecordingError(f'{bag}: none of the {len(traces)} joints moves more than {MOVING_RANGE} rad; '
                                 f'plot them anyway with --all-joints')
        traces = moving
    return BagComparison(bag, real_topic, sim_topic, start, traces)


# -- writing -----------------------------------------------------------------------------------
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


def plot_bag(bag: str | Path, out_dir: str | Path, real_topic: str | None = None, sim_topic: str | None = None,
             joints: Sequence[str] | None = None, moving_only: bool = True) -> list[Path]:
    """Plot real vs simulated joint positions of a bag as PNGs.

    Args:
        bag: ROS 1 ``.bag`` or ROS 2 bag (directory, ``.mcap`` or ``.db3``).
        out_dir: output directory (created if missing; never inside the bag).
        real_topic, sim_topic: JointState topics (default ``/joint_states``,
            ``/sim/joint_states``; a bag's only JointState topic is plotted alone).
        joints: fnmatch globs of ROS joint names (default: all joints).
        moving_only: without ``joints``, skip joints whose position range is
            at most 1e-3 rad in both streams.
    Returns:
        Paths written: ``overview.png`` first, then ``<joint>.png`` per joint.
    Raises:
        RecordingError: see :func:`compare_bag`. ConfigError: bad ``out_dir``.
    """
    check_out_dir(out_dir, bag)
    return write_plots(compare_bag(bag, real_topic, sim_topic, joints, moving_only), out_dir)
