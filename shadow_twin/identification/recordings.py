"""Effort recordings: joint positions and the efforts the drives report, from bags and CSV logs.

* **Bags** (ROS 1 / ROS 2): ``sensor_msgs/JointState`` with ``effort``, read by
  :func:`shadow_twin.calibration.recordings.recording.read_joint_states`. ``ur_robot_driver`` publishes the
  joint currents (A) as ``effort`` on CB3 and e-Series alike.
* **CSV logs**: a :class:`ColumnMap` names the columns of time, positions, velocities and
  efforts, by header name or by 0-based index (headerless files); the built-in ``rtde`` map reads
  the UR RTDE recorder's ``timestamp``, ``actual_q_0..5``, ``actual_qd_0..5``,
  ``actual_current_0..5``.

Bad samples are dropped and counted (:attr:`EffortRecording.dropped`): rows cut short or not
numeric (CSV), rows with a NaN/inf, rows whose time does not increase (a clock going back or a
duplicate stamp); a gap in time (a step over :data:`GAP_FACTOR` times the median) splits the
recording into segments, and segments too short to filter are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import mujoco
import numpy as np
import yaml

from shadow_twin.calibration.recordings.recording import read_joint_states
from shadow_twin.common.errors import ConfigError, RecordingError
from shadow_twin.common.files import read_text_limited
from shadow_twin.simulation.effort import EFFORT_UNITS

#: bytes: the largest column map read (a few lines of YAML).
MAX_SMALL_INPUT = 1024 * 1024
#: A step in time larger than this many median steps splits a recording (a gap).
GAP_FACTOR = 3.0
#: Smallest range of motion (rad) of the most moving joint for a recording to count as motion.
MIN_MOTION = 1e-3
#: A recording of which more than this fraction is dropped is refused (mostly unusable).
MAX_DROPPED_FRACTION = 0.5
#: rad (m for a slide joint): a recorded position this far outside its joint's range in the model is refused.
RANGE_MARGIN = 0.5
#: rad (m): bound on the recorded positions of a joint the model gives no range (far beyond the
#: turns of any recording): 1e300 is not a position.
UNLIMITED_BOUND = 1e4
#: The largest value in degrees a revolute joint's position takes (two turns): positions beyond the
#: joint's range by far but within this are reported as degrees.
DEGREES_BOUND = 720.0
#: An effort whose peak-to-peak over a fitted recording is at most this (its unit) is constant.
CONSTANT_EFFORT = 1e-9
#: Keys of :attr:`EffortRecording.dropped`.
DROP_KEYS = ('cut_rows', 'nan_rows', 'clock_back_rows', 'clock_gaps', 'short_segment_rows')


@dataclass
class EffortRecording:
    """One recording's usable samples, split into contiguous segments.

    Attributes:
        name: label (file name).
        source: file read.
        joints: J joint names, the columns of the arrays.
        times: (N,) s, increasing.
        positions: (N, J) rad.
        efforts: (N, J) in ``effort_unit``.
        effort_unit: 'A' or 'Nm'.
        segments: [(start, stop)) index ranges of contiguous pieces (split at gaps).
        dropped: counts per :data:`DROP_KEYS` (``clock_gaps`` counts gaps, the others rows).
        velocities: (N, J) rad/s as recorded, or None (the fit differentiates positions).
    """

    name: str
    source: str
    joints: list[str]
    times: np.ndarray
    positions: np.ndarray
    efforts: np.ndarray
    effort_unit: str
    segments: list[tuple[int, int]]
    dropped: dict[str, int] = field(default_factory=dict)
    velocities: np.ndarray | None = None

    @property
    def duration(self) -> float:
        """Seconds of usable samples (sum over segments)."""
        return float(sum(self.times[b - 1] - self.times[a] for a, b in self.segments))


def clean(name: str, source: str, joints: Sequence[str], times, positions, efforts, effort_unit: str,
          velocities=None, dropped: Mapping[str, int] | None = None, min_segment: int = 16,
          require_motion: bool = True) -> EffortRecording:
    """Drop bad samples (see the module doc) and split at gaps.

    Args:
        times: (N,) s; positions (N, J) rad; efforts (N, J); velocities (N, J) or None.
        dropped: counts already made by the reader (e.g. ``cut_rows``).
        min_segment: segments of at most this many samples are dropped.
        require_motion: refuse a recording whose joints do not move (identification needs motion).
    Raises:
        RecordingError: nothing usable left, more than MAX_DROPPED_FRACTION dropped, or no motion.
    """
    if effort_unit not in EFFORT_UNITS:
        raise ConfigError(f'effort unit {effort_unit!r}: expected one of {", ".join(EFFORT_UNITS)}')
    counts = {key: 0 for key in DROP_KEYS}
    counts.update(dropped or {})
    t = np.asarray(times, dtype=float).ravel()
    blocks = [np.asarray(positions, dtype=float), np.asarray(efforts, dtype=float)]
    if velocities is not None:
        blocks.append(np.asarray(velocities, dtype=float))
    total = t.size + counts['cut_rows']
    finite = np.isfinite(t) & np.all([np.isfinite(b).all(axis=1) for b in blocks], axis=0)
    counts['nan_rows'] += int((~finite).sum())
    t, blocks = t[finite], [b[finite] for b in blocks]
    if t.size:
        previous = np.concatenate(([-np.inf], np.maximum.accumulate(t)[:-1]))
        forward = t > previous
        counts['clock_back_rows'] += int((~forward).sum())
        t, blocks = t[forward], [b[forward] for b in blocks]
    segments: list[tuple[int, int]] = []
    if t.size > 1:
        steps = np.diff(t)
        cuts = np.flatnonzero(steps > GAP_FACTOR * np.median(steps)) + 1
        counts['clock_gaps'] += int(cuts.size)
        bounds = [0, *cuts.tolist(), t.size]
        for a, b in zip(bounds[:-1], bounds[1:]):
            if b - a > min_segment:
                segments.append((a, b))
            else:
                counts['short_segment_rows'] += b - a
    else:
        counts['short_segment_rows'] += int(t.size)
    keep = np.zeros(t.size, dtype=bool)
    for a, b in segments:
        keep[a:b] = True
    offsets = np.cumsum(~keep)
    segments = [(a - int(offsets[a]), b - int(offsets[b - 1])) for a, b in segments]
    t, blocks = t[keep], [b[keep] for b in blocks]
    lost = total - t.size
    if t.size == 0:
        raise RecordingError(f'{source}: no usable samples (dropped: {_counts_text(counts)})')
    if total and lost / total > MAX_DROPPED_FRACTION:
        raise RecordingError(f'{source}: {lost} of {total} samples are unusable ({_counts_text(counts)})')
    span = np.ptp(blocks[0], axis=0)
    if require_motion and float(span.max()) < MIN_MOTION:
        raise RecordingError(f'{source}: no usable motion (the joints move at most {span.max():.2e} rad; '
                             'identification needs an excitation run)')
    return EffortRecording(name, source, list(joints), t, blocks[0], blocks[1], effort_unit, segments, counts,
                           blocks[2] if velocities is not None else None)


def check_efforts(recording: EffortRecording) -> None:
    """Refuse a recording to fit whose effort on a joint is constant (a drive that reported nothing,
    zeros, or one value): nothing to fit, and the fit's drive gain would run to its bound.

    Raises:
        RecordingError: a joint's effort with a peak to peak of at most :data:`CONSTANT_EFFORT`.
    """
    flat = np.flatnonzero(np.ptp(recording.efforts, axis=0) <= CONSTANT_EFFORT)
    if flat.size:
        k = int(flat[0])
        raise RecordingError(f'{recording.source}: effort of {recording.joints[k]} is constant: '
                             f'{recording.efforts[0, k]:g} {recording.effort_unit} in all {recording.times.size} '
                             'samples (its drive reported no current; identification needs the measured effort '
                             'of every joint, or leave the joint out with --joints)')


def check_positions(model: mujoco.MjModel, joints: Sequence[str], times, positions, source: str,
                    names: Sequence[str] | None = None) -> None:
    """Refuse recorded positions far outside the model's joint ranges (degrees, a wrong scale, 1e300).

    Args:
        model: the model; ``joints`` J of its joint names (those it lacks are not checked).
        times: (N,) s; positions: (N, J) rad (m for a slide joint); NaN is not checked (dropped
            or refused by the readers).
        names: J names to print (e.g. the ROS names; default ``joints``).
    Raises:
        RecordingError: a position more than :data:`RANGE_MARGIN` outside its joint's range (beyond
            :data:`UNLIMITED_BOUND` for a joint without a range), naming the joint, the sample and
            its time, and saying "degrees" where the values fit angles in degrees.
    """
    positions = np.asarray(positions, dtype=float)
    for k, joint in enumerate(joints):
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint)
        if jid < 0:
            continue
        limited = bool(model.jnt_limited[jid])
        low, high = model.jnt_range[jid] if limited else (-UNLIMITED_BOUND, UNLIMITED_BOUND)
        margin = RANGE_MARGIN if limited else 0.0
        with np.errstate(invalid='ignore'):
            bad = np.flatnonzero((positions[:, k] < low - margin) | (positions[:, k] > high + margin))
        if not bad.size:
            continue
        i = int(bad[0])
        value = positions[i, k]
        revolute = model.jnt_type[jid] == mujoco.mjtJoint.mjJNT_HINGE
        unit = 'rad' if revolute else 'm'
        degrees = revolute and abs(value) <= DEGREES_BOUND
        hint = 'the positions look like degrees (the recording must hold rad)' if degrees else 'not a joint position'
        where = f"the model's range [{low:.4g}, {high:.4g}] {unit}" if limited else f'+-{UNLIMITED_BOUND:g} {unit}'
        raise RecordingError(f'{source}: {(names or joints)[k]} position {value:.6g} {unit} at sample {i} '
                             f'(t = {float(np.asarray(times)[i]):.3f} s) is far outside {where} ({bad.size} such '
                             f'sample(s)): {hint}')


def _counts_text(counts: Mapping[str, int]) -> str:
    return ', '.join(f'{k} {v}' for k, v in counts.items() if v) or 'none'


def from_bag(path: str | Path, joints: Sequence[str], effort_unit: str = 'A', topic: str | None = None,
             **options) -> EffortRecording:
    """Effort recording of ``joints`` from the JointState topic of a bag.

    Raises:
        RecordingError: unreadable bag (one line), a joint not recorded, no effort in the topic,
        and the cases of :func:`clean`.
    """
    rec = read_joint_states(path, topic, strict=False)     # a clock going back: dropped, counted
    missing = [j for j in joints if j not in rec.joint_names]
    if missing:
        raise RecordingError(f'{path}: joint(s) {", ".join(missing)} not in {rec.topic}; '
                             f'recorded: {", ".join(rec.joint_names)}')
    efforts = rec.frame['effort'][list(joints)].to_numpy(dtype=float)
    if np.isnan(efforts).all():
        raise RecordingError(f'{path}: {rec.topic} has no effort for {", ".join(joints)} '
                             '(identification needs the joint currents or torques)')
    velocities = rec.frame['velocity'][list(joints)].to_numpy(dtype=float)
    return clean(Path(path).name, str(path), joints, rec.times, rec.frame['position'][list(joints)].to_numpy(float),
                 efforts, effort_unit, velocities if np.isfinite(velocities).all() else None, **options)


@dataclass(frozen=True)
class ColumnMap:
    """Where a CSV log holds each quantity.

    Attributes:
        time: column name or 0-based index of the time.
        positions, efforts: J column names/indices (rad; effort unit).
        velocities: J column names/indices (rad/s) or None.
        time_scale: seconds per unit of the time column.
        header: the first non-comment line holds the column names.
        delimiter: ',', ';', '\\t', ' ' or 'auto' (from the first line).
    """

    time: str | int
    positions: tuple
    efforts: tuple
    velocities: tuple | None = None
    time_scale: float = 1.0
    header: bool = True
    delimiter: str = 'auto'

    @classmethod
    def from_mapping(cls, data: Mapping, joints: int) -> ColumnMap:
        """From ``{time, positions, velocities?, efforts, time_scale?, header?, delimiter?}``;
        ``positions`` etc. are lists of J columns or a pattern with ``{i}`` (0..J-1).

        Raises:
            ConfigError: not a mapping, a missing or unknown key, a list of the wrong length, a
            column that is neither a name nor an index >= 0, a malformed pattern, a ``header``
            that is not a boolean, a ``time_scale`` that is not a positive number.
        """
        if not isinstance(data, Mapping):
            raise ConfigError('column map: expected a mapping with time, positions, efforts')
        known = {'time', 'positions', 'velocities', 'efforts', 'time_scale', 'header', 'delimiter'}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f'column map: unknown key(s) {", ".join(sorted(map(str, unknown)))}; '
                              f'known: {", ".join(sorted(known))}')
        for key in ('time', 'positions', 'efforts'):
            if key not in data:
                raise ConfigError(f'column map: {key!r} missing')

        def column(key, value):
            if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
                return value
            raise ConfigError(f'column map: {key}: a column is a header name or a 0-based index, got {value!r}')

        def columns(key):
            value = data.get(key)
            if value is None and key == 'velocities':
                return None
            if isinstance(value, str):
                try:
                    names = tuple(value.format(i=i) for i in range(joints)) if '{i}' in value else None
                except (ValueError, IndexError, KeyError) as exc:
                    raise ConfigError(f'column map: {key} {value!r}: {exc} (a pattern holds {{i}} once)') from None
                if names is None:
                    raise ConfigError(f'column map: {key} {value!r} needs {{i}} or a list of {joints} columns')
                return names
            if not isinstance(value, (list, tuple)) or len(value) != joints:
                raise ConfigError(f'column map: {key} must list {joints} columns, got {value!r}')
            return tuple(column(key, v) for v in value)

        column('time', data['time'])
        header = data.get('header', not isinstance(data['time'], int))
        if not isinstance(header, bool):
            raise ConfigError(f'column map: header {header!r} must be true or false')
        scale = data.get('time_scale', 1.0)
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not np.isfinite(scale) or scale <= 0:
            raise ConfigError(f'column map: time_scale {scale!r} must be a positive number')
        delimiter = str(data.get('delimiter', 'auto'))
        if delimiter not in ('auto', ',', ';', '\t', ' '):
            raise ConfigError(f"column map: delimiter {delimiter!r}: use auto, ',', ';', tab or ' '")
        out = cls(data['time'], columns('positions'), columns('efforts'), columns('velocities'), float(scale),
                  bool(header), delimiter)
        names = [out.time, *out.positions, *out.efforts, *(out.velocities or ())]
        if not out.header and not all(isinstance(n, int) and n >= 0 for n in names):
            raise ConfigError('column map: a headerless file needs 0-based column indices')
        return out

    @classmethod
    def load(cls, spec: str | Path, joints: int) -> ColumnMap:
        """A built-in preset (:data:`PRESETS`, e.g. ``rtde``) or a YAML file.

        Raises:
            ConfigError: neither a preset nor a readable YAML file of the layout above.
        """
        if str(spec) in PRESETS:
            return cls.from_mapping(PRESETS[str(spec)], joints)
        path = Path(spec)
        try:
            data = yaml.safe_load(read_text_limited(path, '--columns', MAX_SMALL_INPUT))
        except FileNotFoundError:
            raise ConfigError(f'--columns {spec}: neither a preset ({", ".join(PRESETS)}) nor a file') from None
        except (OSError, yaml.YAMLError) as exc:       # (read_text_limited words the rest itself)
            raise ConfigError(f'--columns {spec}: cannot read: {" ".join(str(exc).split())}') from None
        return cls.from_mapping(data, joints)


#: Built-in column maps: the UR RTDE recorder (``record.py`` of UR's RTDE client, ur_rtde's
#: ``RTDEReceiveInterface.startFileRecording``): time in s, joint currents in A.
PRESETS = {'rtde': {'time': 'timestamp', 'positions': 'actual_q_{i}', 'velocities': 'actual_qd_{i}',
                    'efforts': 'actual_current_{i}'}}


def from_csv(path: str | Path, columns: ColumnMap, joints: Sequence[str], effort_unit: str = 'A',
             **options) -> EffortRecording:
    """Effort recording of ``joints`` (in the order of the map's columns) from a CSV log.

    Rows with fewer fields than needed or a field that is not a number are dropped and counted
    (``cut_rows``).

    Raises:
        RecordingError: missing/unreadable file, no header line, a mapped column not in the
        header, and the cases of :func:`clean`.
    """
    path = Path(path)
    try:
        text = read_text_limited(path, 'CSV log')
    except FileNotFoundError:
        raise RecordingError(f'{path}: no such file') from None
    except ConfigError as exc:
        raise RecordingError(str(exc)) from None
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith('#')]
    if not lines:
        raise RecordingError(f'{path}: empty CSV file')
    delimiter = columns.delimiter
    if delimiter == 'auto':
        delimiter = next((d for d in (',', ';', '\t') if d in lines[0]), None)

    def split(line):
        return [f.strip() for f in (line.split(delimiter) if delimiter not in (None, ' ') else line.split())]

    wanted = [columns.time, *columns.positions, *columns.efforts, *(columns.velocities or ())]
    if columns.header:
        names = split(lines[0])
        lines = lines[1:]
        missing = [c for c in wanted if c not in names]
        if missing:
            raise RecordingError(f'{path}: column(s) {", ".join(map(str, missing))} not in the header '
                                 f'({len(names)} columns: {", ".join(names[:8])}{", ..." if len(names) > 8 else ""})')
        index = [names.index(c) for c in wanted]
    else:
        index = [int(c) for c in wanted]
    need = max(index) + 1
    rows, cut = [], 0
    for line in lines:
        fields = split(line)
        if len(fields) < need:
            cut += 1
            continue
        try:
            rows.append([float(fields[k]) for k in index])
        except ValueError:
            cut += 1
    if not rows:
        raise RecordingError(f'{path}: no complete numeric row ({cut} cut short or not numeric)')
    data = np.array(rows)
    j = len(joints)
    velocities = data[:, 1 + 2 * j:1 + 3 * j] if columns.velocities else None
    return clean(path.name, str(path), joints, data[:, 0] * columns.time_scale, data[:, 1:1 + j],
                 data[:, 1 + j:1 + 2 * j], effort_unit, velocities, {'cut_rows': cut}, **options)


def column_map_text(columns: ColumnMap) -> str:
    """One-line description of a column map (for logs)."""
    def short(cols):
        return f'{cols[0]}..{cols[-1]}' if cols else '-'
    return (f'time {columns.time} (x{columns.time_scale:g} s), positions {short(columns.positions)}, '
            f'efforts {short(columns.efforts)}, velocities {short(columns.velocities or ())}')

