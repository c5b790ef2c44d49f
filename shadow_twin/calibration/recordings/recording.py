"""Recordings of ``sensor_msgs/JointState``: read ROS 1 / ROS 2 bags, write ROS 2 bags.

Reading and writing use the ``rosbags`` library (ROS 1 ``.bag``; ROS 2 sqlite3
and MCAP), with message definitions from its ROS 2 Jazzy typestore.
A recording is a pandas DataFrame indexed by time (s, float, from the header
stamps; the bag's receive time where a stamp is zero) with one column per
(quantity, joint): quantities ``position`` (rad), ``velocity`` (rad/s),
``effort`` (N m, as reported).
"""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from rosbags.rosbag2 import StoragePlugin, Writer

from shadow_twin.calibration.recordings.bag_reader import bag_errors, open_bag_reader, typestore
from shadow_twin.common.errors import RecordingError, TrajectoryError
from shadow_twin.common.stamps import from_nanoseconds, split_nanoseconds, to_nanoseconds, to_sec_nanosec, to_seconds
from shadow_twin.control.trajectory import JointTrajectory

JOINT_STATE = 'sensor_msgs/msg/JointState'
QUANTITIES = ('position', 'velocity', 'effort')
TRAJECTORY = 'trajectory_msgs/msg/JointTrajectory'


@dataclass
class JointStateRecording:
    """Joint states of one topic.

    Attributes:
        frame: DataFrame, index ``time`` (s, strictly increasing), columns
            MultiIndex (quantity, joint name).
        topic: topic the states came from.
        source: file they were read from (or a label).
        absent: {joint: (messages that did not name it, time of the first one in s)} for
            joints missing from some messages (their samples are NaN there).
    """

    frame: pd.DataFrame
    topic: str = '/joint_states'
    source: str = ''
    absent: dict[str, tuple[int, float]] = field(default_factory=dict)

    @property
    def times(self) -> np.ndarray:
        """(N,) sample times, s."""
        return self.frame.index.to_numpy(dtype=float)

    @property
    def joint_names(self) -> list[str]:
        """Joints present (those with positions)."""
        return list(self.frame['position'].columns)

    @property
    def duration(self) -> float:
        """Time from first to last sample, s."""
        return float(self.times[-1] - self.times[0]) if len(self.frame) else 0.0

    def values(self, joints: Sequence[str], quantity: str = 'position') -> np.ndarray:
        """(N, J) samples of ``quantity`` for ``joints``.

        Raises RecordingError if a joint is not recorded, missing from some messages (named,
        with how many and the first), or a sample is NaN/inf.
        """
        missing = [j for j in joints if j not in self.joint_names]
        if missing:
            raise RecordingError(f'{self.label}: joint(s) {missing} not recorded; recorded: {self.joint_names}')
        gaps = [f'{j} (absent from {self.absent[j][0]} of {len(self.frame)} messages, first at '
                f't={self.absent[j][1]:.3f} s)' for j in joints if j in self.absent]
        if gaps:
            raise RecordingError(f'{self.label}: joint(s) missing from some messages: {", ".join(gaps)}')
        data = self.frame[quantity][list(joints)].to_numpy(dtype=float)
        bad = ~np.isfinite(data)
        if bad.any():
            row, col = np.argwhere(bad)[0]
            raise RecordingError(f'{self.label}: {bad.sum()} NaN/inf {quantity} sample(s), first at '
                                 f'{joints[col]} t={self.times[row]:.3f} s')
        return data

    @property
    def label(self) -> str:
        return f'{self.source or "recording"} {self.topic}'

    @classmethod
    def from_arrays(cls, times, joint_names: Sequence[str], positions, velocities=None,
                    efforts=None, topic: str = '/joint_states', source: str = '') -> 'JointStateRecording':
        """Build from (N,) times and (N, J) arrays (missing quantities are NaN)."""
        times = np.asarray(times, dtype=float)
        shape = (times.size, len(joint_names))
        blocks = {}
        for quantity, arr in zip(QUANTITIES, (positions, velocities, efforts)):
            arr = np.full(shape, np.nan) if arr is None else np.asarray(arr, dtype=float).reshape(shape)
            for k, joint in enumerate(joint_names):
                blocks[(quantity, joint)] = arr[:, k]
        frame = pd.DataFrame(blocks, index=pd.Index(times, name='time'))
        frame.columns = pd.MultiIndex.from_tuples(frame.columns, names=['quantity', 'joint'])
        return cls(frame, topic, source)


def joint_state_topics(path: str | Path) -> list[str]:
    """Topics of type ``sensor_msgs/JointState`` in a bag."""
    reader = open_bag_reader(Path(path))
    try:
        return sorted({c.topic for c in reader.connections if c.msgtype == JOINT_STATE})
    finally:
        reader.close()


def bag_topics(path: str | Path) -> dict[str, str]:
    """{topic: message type} of a ROS 1 or ROS 2 bag. Raises RecordingError for a missing or
    unreadable bag."""
    reader = open_bag_reader(Path(path))
    try:
        return {c.topic: c.msgtype for c in reader.connections}
    finally:
        reader.close()


def read_joint_states(path: str | Path, topic: str | None = None, strict: bool = True) -> JointStateRecording:
    """Read one ``sensor_msgs/JointState`` topic of a ROS 1 or ROS 2 bag.

    Args:
        path: ``.bag`` file (ROS 1) or ROS 2 bag directory / ``.mcap`` / ``.db3``.
        topic: topic to read; default: the only JointState topic, or ``/joint_states``.
        strict: refuse duplicate or unsorted stamps; False: keep the messages in the bag's order,
            stamps as recorded (a clock that jumps back; the caller drops and counts them, as
            ``shadow-twin identify`` does: the frame's index is then not increasing).
    Returns:
        JointStateRecording; joints missing from some messages are NaN there.
    Raises:
        RecordingError: missing or unreadable bag; no JointState topic; topic
        ambiguous or absent; empty topic; duplicate or unsorted stamps; a message
        whose name and position sizes differ.
    """
    path = Path(path)
    reader = open_bag_reader(path)
    try:
        topics = sorted({c.topic for c in reader.connections if c.msgtype == JOINT_STATE})
        if not topics:
            others = sorted({f'{c.topic} ({c.msgtype})' for c in reader.connections})
            raise RecordingError(f'{path}: no sensor_msgs/JointState topic (topics: {others or "none"})')
        if topic is None:
            topic = topics[0] if len(topics) == 1 else '/joint_states'
        if topic not in topics:
            raise RecordingError(f'{path}: no JointState topic {topic!r}; JointState topics: {topics}')
        connections = [c for c in reader.connections if c.topic == topic]
        stamps, rows = [], []
        with bag_errors(path, f'reading {topic}'):
            _read_rows(reader, connections, path, topic, stamps, rows)
    finally:
        reader.close()
    if not rows:
        raise RecordingError(f'{path}: topic {topic} has no messages (empty bag)')
    times = np.array(stamps)
    steps = np.diff(times) if strict else np.ones(max(times.size - 1, 0))
    if np.any(steps == 0):
        k = int(np.argmax(steps == 0)) + 1
        raise RecordingError(f'{path}: duplicate stamp {times[k]:.9f} s at message {k} on {topic}')
    if np.any(steps < 0):
        k = int(np.argmax(steps < 0)) + 1
        raise RecordingError(f'{path}: unsorted stamps: message {k} on {topic} is earlier than message {k - 1}')
    frame = pd.DataFrame(rows, index=pd.Index(times, name='time'))
    joints = list(dict.fromkeys(n for q, n in frame.columns if q == 'position'))
    columns = pd.MultiIndex.from_tuples([(q, j) for q in QUANTITIES for j in joints],
                                        names=['quantity', 'joint'])
    frame = frame.reindex(columns=columns)
    return JointStateRecording(frame, topic, str(path), absent=_absent_joints(rows, joints, times))


def _read_rows(reader, connections, path: Path, topic: str, stamps: list, rows: list) -> None:
    """Append each JointState message's stamp (s) and {(quantity, joint): value} row."""
    for connection, bag_time, raw in reader.messages(connections=connections):
        msg = reader.deserialize(raw, connection.msgtype)
        stamp = to_seconds(msg.header.stamp)
        stamps.append(stamp if stamp > 0 else from_nanoseconds(bag_time))
        names = list(msg.name)
        if len(msg.position) != len(names):
            raise RecordingError(f'{path}: message {len(rows)} on {topic} has {len(names)} names '
                                 f'but {len(msg.position)} positions')
        row = {}
        for quantity in QUANTITIES:
            values = getattr(msg, quantity)
            if len(values) == len(names):
                row.update({(quantity, n): float(v) for n, v in zip(names, values)})
        rows.append(row)


def _absent_joints(rows: list[dict], joints: list[str], times: np.ndarray) -> dict[str, tuple[int, float]]:
    """{joint: (messages without its position, time of the first, s)} of joints some messages lack."""
    out = {}
    for joint in joints:
        without = [k for k, row in enumerate(rows) if ('position', joint) not in row]
        if without:
            out[joint] = (len(without), float(times[without[0]]))
    return out


@contextmanager
def _new_bag(path: Path, storage: str):
    """A rosbags ``Writer`` on a temporary directory beside ``path``, renamed to ``path`` on success.

    Raises RecordingError if ``path`` exists (never overwritten) or ``storage`` is unknown.
    """
    if path.exists():
        raise RecordingError(f'{path} exists; a recording is never overwritten')
    plugins = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}
    if storage not in plugins:
        raise RecordingError(f'unknown bag storage {storage!r}; use mcap or sqlite3')
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_root = Path(tempfile.mkdtemp(prefix=f'.{path.name}.', dir=path.parent))
    tmp = tmp_root / path.name
    try:
        with Writer(tmp, version=9, storage_plugin=plugins[storage]) as writer:
            yield writer
        tmp.rename(path)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)


def joint_state_messages(recording: JointStateRecording) -> list[tuple[str, int, bytes]]:
    """The recording as CDR-serialized ``sensor_msgs/JointState`` messages: (topic, stamp ns, bytes).

    Quantities that are NaN for every joint of a sample are left empty in its message.
    """
    store = typestore()
    JointState = store.types[JOINT_STATE]
    Header = store.types['std_msgs/msg/Header']
    Time = store.types['builtin_interfaces/msg/Time']
    joints = recording.joint_names
    blocks = {q: recording.frame[q][joints].to_numpy(dtype=float) for q in QUANTITIES}
    out = []
    for k, t in enumerate(recording.times):
        stamp_ns = to_nanoseconds(t)
        sec, nanosec = split_nanoseconds(stamp_ns)
        fields = {q: (np.array([], dtype=np.float64) if np.isnan(blocks[q][k]).all()
                      else blocks[q][k].astype(np.float64)) for q in QUANTITIES}
        msg = JointState(header=Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=''), name=list(joints),
                         **fields)
        out.append((recording.topic, stamp_ns, bytes(store.serialize_cdr(msg, JOINT_STATE))))
    return out


def write_joint_states(path: str | Path, recordings: Sequence[JointStateRecording],
                       storage: str = 'mcap') -> Path:
    """Write recordings (one topic each) as a new ROS 2 bag directory.

    The bag is written into a temporary directory beside ``path`` and renamed
    into place when complete. Raises RecordingError if ``path`` exists (a
    recording is never overwritten) or ``storage`` is not 'mcap'/'sqlite3'.
    """
    messages = [m for rec in recordings for m in joint_state_messages(rec)]
    messages.sort(key=lambda m: m[1])
    return write_serialized_bag(path, {rec.topic: JOINT_STATE for rec in recordings}, messages, storage)


def largest_gap(recording: JointStateRecording) -> tuple[float, float]:
    """(longest interval between consecutive samples, s; the time it starts, s). (0, t0) for
    fewer than two samples."""
    times = recording.times
    if times.size < 2:
        return 0.0, float(times[0]) if times.size else 0.0
    steps = np.diff(times)
    k = int(np.argmax(steps))
    return float(steps[k]), float(times[k])


def write_serialized_bag(path: str | Path, topics: Mapping[str, str],
                         messages: Iterable[tuple[str, int, bytes]], storage: str = 'mcap') -> Path:
    """Write CDR-serialized messages (as received by a raw rclpy subscription) as a new ROS 2 bag.

    Args:
        path: bag directory to create (written beside it, renamed when complete).
        topics: {topic: message type, e.g. 'sensor_msgs/msg/JointState'}; types must be in
            the Jazzy typestore.
        messages: (topic, receive time ns, CDR bytes) in time order.
        storage: 'mcap' (default) or 'sqlite3'.
    Raises:
        RecordingError: ``path`` exists, unknown storage, a message on a topic not in ``topics``,
        or a type unknown to the typestore.
    """
    path = Path(path)
    store = typestore()
    unknown = sorted(t for t in topics.values() if t not in store.types)
    if unknown:
        raise RecordingError(f'message type(s) {unknown} are not in the ROS 2 Jazzy typestore')
    with _new_bag(path, storage) as writer:
        connections = {topic: writer.add_connection(topic, msgtype, typestore=store)
                       for topic, msgtype in topics.items()}
        for topic, time_ns, data in messages:
            if topic not in connections:
                raise RecordingError(f'message on topic {topic!r}, which is not among the bag\'s topics '
                                     f'{sorted(connections)}')
            writer.write(connections[topic], int(time_ns), bytes(data))
    return path


def trajectory_cdr(trajectory: JointTrajectory, start: float) -> bytes:
    """``trajectory`` as a CDR-serialized ``trajectory_msgs/JointTrajectory`` stamped ``start`` (s).

    Serialized with the rosbags typestore (rclpy's ``serialize_message`` of this wheel
    returns its buffer with trailing bytes, which strict readers reject).
    """
    store = typestore()
    t = store.types
    e = np.array([], dtype=np.float64)

    def duration(seconds: float):
        sec, nanosec = to_sec_nanosec(seconds)
        return t['builtin_interfaces/msg/Duration'](sec=sec, nanosec=nanosec)

    def row(arr, k):
        return e if arr is None else np.asarray(arr[k], dtype=np.float64)
    points = [t['trajectory_msgs/msg/JointTrajectoryPoint'](
        positions=row(trajectory.positions, k), velocities=row(trajectory.velocities, k),
        accelerations=row(trajectory.accelerations, k), effort=e, time_from_start=duration(tk))
        for k, tk in enumerate(trajectory.times)]
    sec, nanosec = to_sec_nanosec(start)
    stamp = t['builtin_interfaces/msg/Time'](sec=sec, nanosec=nanosec)
    msg = t[TRAJECTORY](header=t['std_msgs/msg/Header'](stamp=stamp, frame_id=''),
                        joint_names=list(trajectory.joint_names), points=points)
    return bytes(store.serialize_cdr(msg, TRAJECTORY))


def read_commanded_trajectory(path: str | Path, topic: str | None = None) -> tuple[JointTrajectory, float]:
    """The commanded trajectory stored in a bag and its start time.

    Bags recorded by the calibration node hold the goal's trajectory as one
    ``trajectory_msgs/JointTrajectory`` message whose ``header.stamp`` is the time
    the trajectory started (the same clock as the joint-state stamps).

    Args:
        path: ROS 1 or ROS 2 bag.
        topic: the trajectory topic (default: the only JointTrajectory topic).
    Returns:
        (trajectory named after the bag, start time in s).
    Raises:
        RecordingError: unreadable bag, no or several JointTrajectory topics, an empty topic,
        an unstamped or malformed trajectory.
    """
    path = Path(path)
    reader = open_bag_reader(path)
    try:
        topics = sorted({c.topic for c in reader.connections if c.msgtype == TRAJECTORY})
        if topic is None and len(topics) != 1:
            raise RecordingError(f'{path}: expected one {TRAJECTORY} topic with the commanded trajectory, '
                                 f'found {topics or "none"}')
        topic = topic or topics[0]
        connections = [c for c in reader.connections if c.topic == topic and c.msgtype == TRAJECTORY]
        if not connections:
            raise RecordingError(f'{path}: no {TRAJECTORY} topic {topic!r}; found {topics or "none"}')
        msg = None
        with bag_errors(path, f'reading {topic}'):
            for connection, _, raw in reader.messages(connections=connections):
                msg = reader.deserialize(raw, connection.msgtype)
                break
    finally:
        reader.close()
    if msg is None:
        raise RecordingError(f'{path}: topic {topic} has no messages')
    start = to_seconds(msg.header.stamp)
    if start <= 0:
        raise RecordingError(f'{path}: the commanded trajectory on {topic} is not stamped with its start time')
    try:
        trajectory = JointTrajectory.from_msg(msg, name=path.stem)
    except TrajectoryError as exc:
        raise RecordingError(f'{path}: commanded trajectory on {topic}: {exc}') from None
    return trajectory, float(start)
