"""Real and simulated joint streams of a bag, per joint: what ``shadow-twin plot`` draws.

Reads the real and the simulated ``sensor_msgs/JointState`` streams of a ROS 1 or ROS 2
bag (default topics ``/joint_states`` and ``/sim/joint_states``) into a
:class:`~shadow_twin.plots.bag_plots.BagComparison`: times in s from the first real
sample, positions in rad, and the error sim - real taken at the real sample times, the
sim stream linearly interpolated onto them (:func:`shadow_twin.calibration.recordings.alignment.resample`),
where both streams cover the time. A bag with a single JointState topic is read alone.

Library use: :func:`plot_bag` (or :func:`compare_bag` +
:func:`shadow_twin.plots.bag_plots.write_plots`); command line:
:mod:`shadow_twin.cli.plot`. No ROS installation is needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from shadow_twin.calibration.recordings.alignment import resample
from shadow_twin.calibration.recordings.recording import JointStateRecording, joint_state_topics, read_joint_states
from shadow_twin.common.errors import RecordingError
from shadow_twin.common.globs import matching, unmatched
from shadow_twin.plots.bag_plots import BagComparison, JointTrace, check_out_dir, write_plots

REAL_TOPIC = '/joint_states'
SIM_TOPIC = '/sim/joint_states'
MOVING_RANGE = 1e-3  # rad: a joint whose position range exceeds this in either stream "moves"


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
    missing = unmatched(patterns, available)
    if missing:
        raise RecordingError(f'joint pattern(s) {missing} match no recorded joint; recorded: {list(available)}')
    return matching(available, patterns)


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
        :func:`shadow_twin.calibration.recordings.recording.read_joint_states`; a glob matching no
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
