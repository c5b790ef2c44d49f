"""Contact protocol runs in bags: what ``shadow-twin calibrate --contacts`` reads (and what a recording of a
run holds), one bag per run, named after it.

A run's bag holds three topics (:class:`ContactTopics`; defaults for the Shadow Hand and a motion capture):

* ``joint_states`` (``sensor_msgs/JointState``, default ``/rh/joint_states``): the grip joints' efforts
  (N m), as the hand's driver publishes them;
* ``object_pose`` (``geometry_msgs/PoseStamped``, default ``/mocap/<object>/pose``): the object's pose in
  the capture's world frame (z up, gravity along -z);
* ``palm_pose`` (``PoseStamped``, default ``/mocap/<palm>/pose``): the palm body's frame in the same world
  frame (a capture's rigid body defined on the palm, or the arm's forward kinematics).

A run recorded on the robots (``calibrate --contacts --record``) holds the hand's contacts too, where it
publishes them (``contacts``, default ``/rh/contacts``: ``<prefix>/<label>/wrench``, ``WrenchStamped``, for
the fingertips and the palm, :data:`~shadow_twin.simulation.contact_sensing.DEFAULT_SENSORS`; the tactile
sensors mapped as ``docs/contacts.md`` says): which fingertips touched the object and how hard, beside its
path. The fit does not read them.

:func:`read_tilt_run` turns a bag into the :class:`~shadow_twin.calibration.contacts.tilt.TiltRecord` the
replay is compared with: the tilt (rad) is read from gravity in the palm's frame (the inverse of
:func:`~shadow_twin.calibration.contacts.tilt.gravity_at`); the tilt begins where it last passes
:data:`TILT_START` before it reaches :data:`TILT_BEGUN` (between two samples, linearly; minus that angle at the run's
rate: a capture's noise at rest does not start it; a push run's start is read so from its pushing joint's travel,
``joint_states``' positions); the object's position in the palm's frame and the
efforts are interpolated at the protocol's sample times from there. :func:`write_tilt_run` writes a
record as such a bag (the mock's runs in tests and benchmarks: the palm turned about its axis at the
world's origin, standing still for :data:`LEAD_S` before the tilt).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
from scipy.spatial.transform import Rotation, Slerp

from shadow_twin.calibration.contacts.protocol import ContactProtocol, TiltRun
from shadow_twin.calibration.contacts.tilt import G, TiltRecord, gravity_at, ramp_time, ramped_travel
from shadow_twin.calibration.recordings.bag_reader import bag_errors, open_bag_reader, typestore
from shadow_twin.calibration.recordings.base_recording import POSE_STAMPED
from shadow_twin.calibration.recordings.recording import JOINT_STATE, write_serialized_bag
from shadow_twin.common.errors import RecordingError
from shadow_twin.simulation.contact_sensing import DEFAULT_SENSORS
from shadow_twin.common.stamps import from_nanoseconds, to_nanoseconds, to_sec_nanosec, to_seconds

#: rad: the tilt at which a run's tilt is taken to have begun (then set back by this angle at the run's rate).
TILT_START = np.radians(0.5)
#: rad: a tilt that the capture's noise never reaches at rest (0.29 deg RMS per frame from the mock capture's
#: 0.005 rad): the run's tilt has surely begun; its start is the last passing of :data:`TILT_START` before it.
TILT_BEGUN = np.radians(2.0)
#: s of standing still that :func:`write_tilt_run` writes before the tilt.
LEAD_S = 1.0


@dataclass(frozen=True)
class ContactTopics:
    """The topics of a run's bag (module doc); None: the default for the protocol's object and palm;
    ``contacts``: the prefix of the hand's contact topics ('': none recorded)."""

    joint_states: str = '/rh/joint_states'
    object_pose: str | None = None
    palm_pose: str | None = None
    contacts: str = '/rh/contacts'

    def contact_topics(self) -> list[str]:
        """The hand's contact wrench topics (``<contacts>/<label>/wrench`` of each default sensor), [] without
        a prefix."""
        prefix = self.contacts.rstrip('/')
        return [f'{prefix}/{label}/wrench' for label in DEFAULT_SENSORS] if prefix else []

    def resolved(self, protocol: ContactProtocol) -> tuple[str, str, str]:
        """(joint states, object pose, palm pose) topics."""
        return (self.joint_states, self.object_pose or f'/mocap/{protocol.object}/pose',
                self.palm_pose or f'/mocap/{protocol.palm}/pose')


def tilt_of(palm: Rotation, axis: str) -> np.ndarray:
    """(N,) rad: the tilt about the palm's ``axis`` of palm orientations ``palm`` (N rotations, palm to
    world), from gravity in the palm's frame (the inverse of :func:`gravity_at`)."""
    g = palm.inv().apply([0.0, 0.0, -G])
    toward = gravity_at(np.pi / 2, axis) / G            # where gravity points in the palm's frame at 90 deg
    return np.arctan2(g @ toward, -g[:, 2])


def _stamped_messages(path: Path, topics: set[str], what: str, check=None) -> Iterator[tuple[str, float, object]]:
    """(topic, stamp s, message) of the bag's messages on ``topics``, in the bag's order: the header stamp,
    the bag's time where that is zero. ``check(connections)`` may refuse the bag first (raise). Raises
    RecordingError: no bag at ``path``, or one that cannot be read (``what`` names the reading)."""
    reader = open_bag_reader(path)
    try:
        if check is not None:
            check(reader.connections)
        with bag_errors(path, what):
            for connection, bag_time, raw in reader.messages([c for c in reader.connections if c.topic in topics]):
                msg = reader.deserialize(raw, connection.msgtype)
                stamp = to_seconds(msg.header.stamp)
                yield connection.topic, (stamp if stamp > 0 else from_nanoseconds(bag_time)), msg
    finally:
        reader.close()


def _read_topics(path: Path, topics: tuple[str, str, str]) -> dict[str, tuple[np.ndarray, list]]:
    """{topic: (stamps s, messages)} of the three topics (header stamps; the bag's time where zero)."""
    def check(connections) -> None:
        present = {c.topic: c.msgtype for c in connections}
        for topic, kind in zip(topics, (JOINT_STATE, POSE_STAMPED, POSE_STAMPED)):
            if present.get(topic) != kind:
                found = f'it holds {present[topic]}' if topic in present else 'no such topic'
                raise RecordingError(f'{path}: a contact run needs {topic} ({kind}); {found}')
    out: dict[str, tuple[list, list]] = {topic: ([], []) for topic in topics}
    for topic, stamp, msg in _stamped_messages(path, set(topics), 'reading the contact run', check):
        out[topic][0].append(stamp)
        out[topic][1].append(msg)
    for topic, (times, _) in out.items():
        if len(times) < 2:
            raise RecordingError(f'{path}: topic {topic} has {len(times)} message(s)')
    return {topic: (np.asarray(times), messages) for topic, (times, messages) in out.items()}


def read_contact_wrenches(path: str | Path,
                          topics: ContactTopics = ContactTopics()) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{topic: (stamps (N,) s, forces (N, 3) N)} of the hand's contact topics (``topics.contact_topics()``) that
    the bag at ``path`` holds, in stamp order (header stamps; the bag's time where zero): the net force on each fingertip or the palm, in
    its own frame, zero without contact. Raises RecordingError: no bag there, or one that cannot be read."""
    out: dict[str, tuple[list, list]] = {}
    for topic, stamp, msg in _stamped_messages(Path(path), set(topics.contact_topics()),
                                               'reading the contact wrenches'):
        times, forces = out.setdefault(topic, ([], []))
        times.append(stamp)
        forces.append((msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z))
    ordered = {}
    for topic, (times, forces) in out.items():
        order = np.argsort(times, kind='stable')
        ordered[topic] = (np.asarray(times)[order], np.asarray(forces, dtype=float)[order])
    return ordered


def _poses(times: np.ndarray, messages: list) -> tuple[np.ndarray, np.ndarray, Rotation]:
    """(stamps (N,) s, positions (N, 3) m, orientations) in stamp order, repeated stamps dropped."""
    order = np.argsort(times, kind='stable')
    times = times[order]
    keep = np.concatenate([[True], np.diff(times) > 0])
    msgs = [messages[k] for k in order[keep]]
    position = np.array([(m.pose.position.x, m.pose.position.y, m.pose.position.z) for m in msgs], float)
    quat = np.array([(m.pose.orientation.x, m.pose.orientation.y, m.pose.orientation.z, m.pose.orientation.w)
                     for m in msgs], float)
    if not (np.isfinite(position).all() and np.isfinite(quat).all()) or (np.linalg.norm(quat, axis=1) < 0.5).any():
        raise RecordingError('a pose that is not finite or whose quaternion is not a rotation')
    return times[keep], position, Rotation.from_quat(quat)


def read_tilt_run(path: str | Path, protocol: ContactProtocol, run: TiltRun,
                  topics: ContactTopics = ContactTopics()) -> TiltRecord:
    """The record of ``run`` in the bag ``path`` (module doc), sampled as the protocol samples its replay.

    Raises:
        RecordingError: a missing or unreadable bag; a topic missing or of another type; a pose that is
            not a rotation; a tilt that never begins (below :data:`TILT_BEGUN`) or a bag that ends before
            the run's duration; a grip joint without efforts.
    """
    path = Path(path)
    joint_topic, object_topic, palm_topic = topics.resolved(protocol)
    series = _read_topics(path, (joint_topic, object_topic, palm_topic))
    try:
        t_obj, p_obj, _ = _poses(*series[object_topic])
        t_palm, p_palm, r_palm = _poses(*series[palm_topic])
    except RecordingError as exc:
        raise RecordingError(f'{path}: {exc}') from None
    stamps, efforts, positions = _joint_rows(path, *series[joint_topic], tuple(protocol.grip))
    return sampled_run(protocol, run, (t_palm, p_palm, r_palm), (t_obj, p_obj), (stamps, efforts), str(path),
                       positions)


def sampled_run(protocol: ContactProtocol, run: TiltRun, palm: tuple, obj: tuple, efforts: tuple,
                where: str, positions: np.ndarray | None = None) -> TiltRecord:
    """The :class:`TiltRecord` of a run's series, sampled as the protocol samples its replay (module doc): the
    tilt read from the palm's orientation, its start where it last passes :data:`TILT_START` before :data:`TILT_BEGUN`
    (a push's: where its pushing joint last passes as far from where it stood, :func:`_push_start`).

    Args:
        palm: (stamps (N,) s, positions (N, 3) m, orientations: a scipy Rotation of N) of the palm's frame.
        obj: (stamps (M,) s, positions (M, 3) m) of the object, in the same world frame.
        efforts: (stamps (K,) s, (K, J) N m) of the protocol's grip joints.
        where: what the series come from, for the errors (a bag's path, a replay).
        positions: (K, J) rad of the grip joints at the efforts' stamps (a push run's start is read from them).
    Raises:
        RecordingError: a tilt (push) that never begins, or series that end before the run's duration.
    """
    t_palm, p_palm, r_palm = palm
    t_obj, p_obj = obj
    tilt = tilt_of(r_palm, run.axis)
    if run.push:
        start = _push_start(protocol, run, efforts[0], positions, where)
    else:
        start = _passed(t_palm, tilt, f'the palm never tilts {np.degrees(TILT_BEGUN):g} deg about its {run.axis} axis',
                        where, run) - TILT_START / run.rate
    count = int(round(run.duration / protocol.sample_s))
    times = np.arange(1, count + 1) * protocol.sample_s
    at = np.concatenate([[start], start + times])
    end = min(t_obj[-1], t_palm[-1], efforts[0].max())
    if at[-1] > end or start < max(t_obj[0], t_palm[0]):
        raise RecordingError(f'{where}: run {run.name!r} lasts {run.duration:g} s from the tilt\'s start; what '
                             f'it holds covers {max(0.0, end - start):.2f} s of it')
    palm_at = Slerp(t_palm, r_palm)(at)
    palm_pos = np.column_stack([np.interp(at, t_palm, p_palm[:, k]) for k in range(3)])
    obj_pos = np.column_stack([np.interp(at, t_obj, p_obj[:, k]) for k in range(3)])
    in_palm = palm_at.inv().apply(obj_pos - palm_pos)
    stamps, rows = efforts
    effort = np.column_stack([np.interp(at[1:], stamps, rows[:, j]) for j in range(rows.shape[1])])
    return TiltRecord(run.name, times, np.interp(at[1:], t_palm, tilt), in_palm[1:], in_palm[0],
                      tuple(protocol.grip), effort)


def _passed(times: np.ndarray, progress: np.ndarray, never: str, where: str, run: TiltRun) -> float:
    """s: where ``progress`` (rad; a tilt, a push's travel) last passes :data:`TILT_START` before it reaches
    :data:`TILT_BEGUN` (between two samples, linearly): a signal standing at about 0 passes 0.5 deg on a capture's
    noise alone (a live run's start read 0.65 s early so, its tilt 6 deg behind its replay's). Raises
    RecordingError (``never``) when it never reaches :data:`TILT_BEGUN`."""
    begun = np.flatnonzero(progress >= TILT_BEGUN)
    if not len(begun):
        raise RecordingError(f'{where}: {never} (run {run.name!r}; most {np.degrees(progress.max()):.2f} deg)')
    below = np.flatnonzero(progress[:begun[0]] < TILT_START)
    k = below[-1] + 1 if len(below) else 0
    return float(times[k] if k == 0 else np.interp(TILT_START, progress[k - 1:k + 1], times[k - 1:k + 1]))


def _push_start(protocol: ContactProtocol, run: TiltRun, stamps: np.ndarray, positions: np.ndarray | None,
                where: str) -> float:
    """s: the start of push ``run``'s goal, read from its pushing joint (the push joint that travels furthest
    from where it stood at the first sample): where its travel last passes :data:`TILT_START`, set back by the
    time its goal takes to travel that far (:func:`~shadow_twin.calibration.contacts.tilt.ramp_time`)."""
    columns = [list(protocol.grip).index(j) for j, _ in run.push]
    if positions is None or not np.isfinite(positions[:, columns]).all():
        raise RecordingError(f'{where}: push run {run.name!r}: joint_states without the pushing joints\' positions')
    origin = positions[0, columns]
    travel = np.array([t for _, t in run.push]) - origin
    lead = int(np.argmax(np.abs(travel)))
    progress = (positions[:, columns[lead]] - origin[lead]) * np.sign(travel[lead])
    speed = abs(travel[lead]) / run.push_s
    name = run.push[lead][0]
    crossed = _passed(stamps, progress, f'{name} never moves {np.degrees(TILT_BEGUN):g} deg towards its push target',
                      where, run)
    return crossed - ramp_time(TILT_START, speed)


def _joint_rows(path: Path, times: np.ndarray, messages: list,
                joints: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """((K,) stamps s, (K, J) N m, (K, J) rad): the joints' efforts and positions of the messages that carry
    the efforts of them all, in stamp order (positions NaN where a message has none)."""
    rows, angles, stamps = [], [], []
    for stamp, msg in zip(times, messages):
        if len(msg.effort) != len(msg.name):
            continue
        effort = dict(zip(msg.name, msg.effort))
        position = dict(zip(msg.name, msg.position)) if len(msg.position) == len(msg.name) else {}
        if all(j in effort for j in joints):
            rows.append([effort[j] for j in joints])
            angles.append([position.get(j, np.nan) for j in joints])
            stamps.append(stamp)
    if len(rows) < 2:
        raise RecordingError(f'{path}: no joint_states with the efforts of every grip joint {list(joints)}')
    order = np.argsort(stamps, kind='stable')
    return np.asarray(stamps)[order], np.asarray(rows, float)[order], np.asarray(angles, float)[order]


def write_tilt_run(path: str | Path, record: TiltRecord, protocol: ContactProtocol, run: TiltRun,
                   topics: ContactTopics = ContactTopics(), start: float = 100.0) -> Path:
    """Write ``record`` as a new bag of ``run`` (module doc); its tilt (a push's goal, its joints from 0 rad)
    begins at ``start`` s (stamps). Raises RecordingError if ``path`` exists (never overwritten)."""
    joint_topic, object_topic, palm_topic = topics.resolved(protocol)
    store, t = typestore(), typestore().types
    lead = np.arange(-LEAD_S, 0.0, protocol.sample_s)
    times = np.concatenate([lead, [0.0], record.times])
    tilt = np.concatenate([np.zeros(len(lead) + 1), record.tilt])
    axis = {'x': (1, 0, 0), '-x': (-1, 0, 0), 'y': (0, 1, 0), '-y': (0, -1, 0)}[run.axis]
    palm = Rotation.from_rotvec(np.outer(tilt, axis))
    in_palm = np.vstack([np.repeat(record.start[None], len(lead) + 1, axis=0), record.position])
    effort = np.vstack([np.repeat(record.effort[:1], len(lead) + 1, axis=0), record.effort])
    angles = np.zeros((len(times), len(record.joints)))
    for joint, target in run.push:          # a push's goal from 0 rad, as the run made it
        angles[:, record.joints.index(joint)] = target * ramped_travel(times, run.push_s) / run.push_s

    def header(seconds: float, frame: str):
        sec, nanosec = to_sec_nanosec(seconds)
        return t['std_msgs/msg/Header'](stamp=t['builtin_interfaces/msg/Time'](sec=sec, nanosec=nanosec), frame_id=frame)

    def pose(seconds: float, position, quat):
        x, y, z, w = (float(v) for v in quat)
        msg = t[POSE_STAMPED](header=header(seconds, 'world'), pose=t['geometry_msgs/msg/Pose'](
            position=t['geometry_msgs/msg/Point'](x=float(position[0]), y=float(position[1]), z=float(position[2])),
            orientation=t['geometry_msgs/msg/Quaternion'](x=x, y=y, z=z, w=w)))
        return bytes(store.serialize_cdr(msg, POSE_STAMPED))
    messages = []
    for k, dt in enumerate(times):
        stamp = start + float(dt)
        ns = to_nanoseconds(stamp)
        messages.append((palm_topic, ns, pose(stamp, (0.0, 0.0, 0.0), palm[k].as_quat())))
        messages.append((object_topic, ns, pose(stamp, palm[k].apply(in_palm[k]), (0.0, 0.0, 0.0, 1.0))))
        state = t[JOINT_STATE](header=header(stamp, ''), name=list(record.joints), position=angles[k],
                               velocity=np.zeros(0), effort=effort[k].astype(float))
        messages.append((joint_topic, ns, bytes(store.serialize_cdr(state, JOINT_STATE))))
    kinds = {joint_topic: JOINT_STATE, object_topic: POSE_STAMPED, palm_topic: POSE_STAMPED}
    return write_serialized_bag(path, kinds, messages)
