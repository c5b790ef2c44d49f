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
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .errors import RecordingError

JOINT_STATE = 'sensor_msgs/msg/JointState'
QUANTITIES = ('position', 'velocity', 'effort')


def typestore():
    """The rosbags typestore pinned to ROS 2 Jazzy."""
    from rosbags.typesys import Stores, get_typestore
    return get_typestore(Stores.ROS2_JAZZY)


@dataclass
class JointStateRecording:
    """Joint states of one topic.

    Attributes:
        frame: DataFrame, index ``time`` (s, strictly increasing), columns
            MultiIndex (quantity, joint name).
        topic: topic the states came from.
        source: file they were read from (or a label).
    """

    frame: pd.DataFrame
    topic: str = '/joint_states'
    source: str = ''

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

        Raises RecordingError if a joint is absent or a sample is NaN/inf.
        """
        missing = [j for j in joints if j not in self.joint_names]
        if missing:
            raise RecordingError(f'{self.label}: joint(s) {missing} not recorded; recorded: {self.joint_names}')
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


def _open_reader(path: Path):
    from rosbags.highlevel import AnyReader
    if not path.exists():
        raise RecordingError(f'bag not found: {path}')
    try:
        reader = AnyReader([path], default_typestore=typestore())
        reader.open()
    except Exception as exc:
        raise RecordingError(f'{path}: not a readable ROS 1 or ROS 2 bag ({" ".join(str(exc).split())})') from None
    return reader


def joint_state_topics(path: str | Path) -> list[str]:
    """Topics of type ``sensor_msgs/JointState`` in a bag."""
    reader = _open_reader(Path(path))
    try:
        return sorted({c.topic for c in reader.connections if c.msgtype == JOINT_STATE})
    finally:
        reader.close()


def read_joint_states(path: str | Path, topic: str | None = None) -> JointStateRecording:
    """Read one ``sensor_msgs/JointState`` topic of a ROS 1 or ROS 2 bag.

    Args:
        path: ``.bag`` file (ROS 1) or ROS 2 bag directory / ``.mcap`` / ``.db3``.
        topic: topic to read; default: the only JointState topic, or ``/joint_states``.
    Returns:
        JointStateRecording; joints missing from some messages are NaN there.
    Raises:
        RecordingError: missing or unreadable bag; no JointState topic; topic
        ambiguous or absent; empty topic; duplicate or unsorted stamps; a message
        whose name and position sizes differ.
    """
    path = Path(path)
    reader = _open_reader(path)
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
        for connection, bag_time, raw in reader.messages(connections=connections):
            msg = reader.deserialize(raw, connection.msgtype)
            stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
            stamps.append(stamp if stamp > 0 else bag_time * 1e-9)
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
    finally:
        reader.close()
    if not rows:
        raise RecordingError(f'{path}: topic {topic} has no messages (empty bag)')
    times = np.array(stamps)
    steps = np.diff(times)
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
    return JointStateRecording(frame, topic, str(path))


def write_joint_states(path: str | Path, recordings: Sequence[JointStateRecording],
                       storage: str = 'mcap') -> Path:
    """Write recordings (one topic each) as a new ROS 2 bag directory.

    The bag is written into a temporary directory beside ``path`` and renamed
    into place when complete. Raises RecordingError if ``path`` exists (a
    recording is never overwritten) or ``storage`` is not 'mcap'/'sqlite3'.
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    path = Path(path)
    if path.exists():
        raise RecordingError(f'{path} exists; a recording is never overwritten')
    plugins = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}
    if storage not in plugins:
        raise RecordingError(f'unknown bag storage {storage!r}; use mcap or sqlite3')
    store = typestore()
    JointState = store.types[JOINT_STATE]
    Header = store.types['std_msgs/msg/Header']
    Time = store.types['builtin_interfaces/msg/Time']
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_root = Path(tempfile.mkdtemp(prefix=f'.{path.name}.', dir=path.parent))
    tmp = tmp_root / path.name
    try:
        with Writer(tmp, version=9, storage_plugin=plugins[storage]) as writer:
            for rec in recordings:
                connection = writer.add_connection(rec.topic, JOINT_STATE, typestore=store)
                joints = rec.joint_names
                blocks = {q: rec.frame[q][joints].to_numpy(dtype=float) for q in QUANTITIES}
                for k, t in enumerate(rec.times):
                    sec = int(np.floor(t))
                    nanosec = min(int(round((t - sec) * 1e9)), 999_999_999)
                    fields = {q: (np.array([], dtype=np.float64) if np.isnan(blocks[q][k]).all()
                                  else blocks[q][k].astype(np.float64)) for q in QUANTITIES}
                    msg = JointState(header=Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=''),
                                     name=list(joints), **fields)
                    writer.write(connection, sec * 1_000_000_000 + nanosec,
                                 store.serialize_cdr(msg, JOINT_STATE))
        tmp.rename(path)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    return path
