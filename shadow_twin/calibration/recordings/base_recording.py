"""Recordings of the mobile base: velocity commands in, planar pose out (ROS-free, ``rosbags``).

A base recording is what the calibration of the MiR250 compares the simulation with:

* the velocity commands the robot was given (``geometry_msgs/TwistStamped`` on ``cmd_vel``, as
  the MiR takes from software 2.7 on; plain ``geometry_msgs/Twist`` is read with the bag's
  receive times): forward speed v (m/s) and yaw rate omega (rad/s);
* the pose it went through: its wheel odometry (``nav_msgs/Odometry``) or, when the bag has
  one, a motion-capture pose topic (``geometry_msgs/PoseStamped``), as x, y (m) and yaw (rad,
  unwrapped), in the frame of those messages.

As the MiR250 + UR5 twin study (IMECE 2023) compared its runs, the calibration compares paths
relative to their start (:meth:`BaseRecording.relative_poses`): the real and the simulated base
start at the origin heading along x.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shadow_twin.calibration.recordings.frame import FrameCalibration
from shadow_twin.calibration.recordings.bag_reader import bag_errors, open_bag_reader, typestore
from shadow_twin.calibration.recordings.recording import write_serialized_bag
from shadow_twin.common.errors import RecordingError
from shadow_twin.common.stamps import from_nanoseconds, to_nanoseconds, to_sec_nanosec, to_seconds
from shadow_twin.control.base.trajectory import yaw_from_quaternion
from shadow_twin.simulation.mobile_base import TwistCommands

TWIST_STAMPED, TWIST = 'geometry_msgs/msg/TwistStamped', 'geometry_msgs/msg/Twist'
ODOMETRY, POSE_STAMPED = 'nav_msgs/msg/Odometry', 'geometry_msgs/msg/PoseStamped'
#: A path that moves less than this (m, and rad of yaw) never moved: nothing to compare.
MIN_TRAVEL, MIN_TURN = 0.02, 0.02


@dataclass(frozen=True)
class BaseRecording:
    """Velocity commands and poses of one drive of the base.

    Attributes:
        command_times: (C,) s, non-decreasing (the recording's clock).
        commands: (C, 2) forward speed v (m/s), yaw rate omega (rad/s).
        pose_times: (P,) s, strictly increasing.
        poses: (P, 3) x, y (m) and yaw (rad, unwrapped) in the pose messages' frame.
        pose_topic: topic of the poses (odometry or motion capture).
        source: bag (or label) they came from.
    Raises:
        RecordingError: shapes that disagree, non-finite values, unsorted times, fewer
            than two poses or no command.
    """

    command_times: np.ndarray
    commands: np.ndarray
    pose_times: np.ndarray
    poses: np.ndarray
    pose_topic: str = '/odom'
    source: str = ''

    def __post_init__(self) -> None:
        label = self.source or 'base recording'
        ct = np.asarray(self.command_times, dtype=float).reshape(-1)
        cmd = np.asarray(self.commands, dtype=float)
        pt = np.asarray(self.pose_times, dtype=float).reshape(-1)
        poses = np.asarray(self.poses, dtype=float)
        if len(ct) == 0:
            raise RecordingError(f'{label}: no velocity command')
        if cmd.shape != (len(ct), 2) or poses.shape != (len(pt), 3):
            raise RecordingError(f'{label}: commands {cmd.shape} for {len(ct)} times, poses {poses.shape} '
                                 f'for {len(pt)} times (need (C, 2) and (P, 3))')
        if len(pt) < 2:
            raise RecordingError(f'{label}: {len(pt)} pose(s); a path needs at least two')
        if not all(np.all(np.isfinite(a)) for a in (ct, cmd, pt, poses)):
            raise RecordingError(f'{label}: non-finite command or pose values')
        if np.any(np.diff(ct) < 0) or np.any(np.diff(pt) <= 0):
            raise RecordingError(f'{label}: command times must not decrease and pose times must increase')
        poses = poses.copy()
        poses[:, 2] = np.unwrap(poses[:, 2])
        for name, value in (('command_times', ct), ('commands', cmd), ('pose_times', pt), ('poses', poses)):
            object.__setattr__(self, name, value)

    @property
    def label(self) -> str:
        """A short name for messages and reports (the bag's name)."""
        return Path(self.source).name if self.source else self.pose_topic

    def relative_poses(self) -> np.ndarray:
        """(P, 3) poses in the frame of the first pose: x forward and y left of where the base
        started (m), yaw from its start heading (rad)."""
        return poses_relative_to(self.poses[0], self.poses)

    def twist_commands(self, start: float) -> TwistCommands:
        """The commands with times relative to ``start`` (s of the recording's clock)."""
        return TwistCommands(self.command_times - start, self.commands)

    def check_moves(self) -> None:
        """Raise RecordingError when the path never moves (less than ``MIN_TRAVEL`` m from its
        start and ``MIN_TURN`` rad of yaw): a calibration on it would fit nothing."""
        rel = self.relative_poses()
        travel = float(np.max(np.hypot(rel[:, 0], rel[:, 1])))
        turn = float(np.max(np.abs(rel[:, 2])))
        if travel < MIN_TRAVEL and turn < MIN_TURN:
            raise RecordingError(f'{self.label}: the base never moves on {self.pose_topic} (at most '
                                 f'{travel * 1e3:.1f} mm from its start and {turn:.3f} rad of yaw); nothing to fit')


def poses_relative_to(origin: np.ndarray, poses: np.ndarray) -> np.ndarray:
    """(N, 3) planar ``poses`` (x, y m; yaw rad) expressed in the frame of the pose ``origin`` (3,)."""
    x0, y0, yaw0 = origin
    c, s = np.cos(yaw0), np.sin(yaw0)
    dx, dy = poses[:, 0] - x0, poses[:, 1] - y0
    return np.column_stack([c * dx + s * dy, -s * dx + c * dy, poses[:, 2] - yaw0])


def _pose_of(msg, msgtype: str) -> tuple[float, float, float]:
    pose = msg.pose.pose if msgtype == ODOMETRY else msg.pose
    q = pose.orientation
    return float(pose.position.x), float(pose.position.y), yaw_from_quaternion(q.x, q.y, q.z, q.w)


def _pick(topics: dict[str, str], types: tuple[str, ...], wanted: str | None, what: str, path: Path) -> str:
    """The topic of one of ``types``: ``wanted`` (which must have such a type) or the only one."""
    candidates = sorted(t for t, m in topics.items() if m in types)
    if wanted is not None:
        if wanted not in candidates:
            raise RecordingError(f'{path}: no {what} topic {wanted!r} ({" or ".join(types)}); '
                                 f'such topics: {candidates or "none"}')
        return wanted
    if len(candidates) != 1:
        listing = ', '.join(f'{t} ({m})' for t, m in sorted(topics.items())) or 'none'
        reason = 'no' if not candidates else f'{len(candidates)} ({candidates}); name one:'
        raise RecordingError(f'{path}: {reason} {what} topic ({" or ".join(types)}); topics: {listing}')
    return candidates[0]


def read_base_recording(path: str | Path, cmd_vel_topic: str | None = None, odom_topic: str | None = None,
                        pose_topic: str | None = None, frame: FrameCalibration | None = None) -> BaseRecording:
    """Read a base recording from a ROS 1 or ROS 2 bag.

    Args:
        path: the bag.
        cmd_vel_topic: TwistStamped/Twist topic; default: the only one in the bag.
        odom_topic: Odometry topic; default: the only one. Used when no pose topic is read.
        pose_topic: PoseStamped topic (motion capture); default: the only PoseStamped topic if
            the bag has one, which then takes precedence over odometry.
        frame: the floor frame of the motion-capture system (``shadow-twin frame-calibration``):
            pose-topic poses are expressed in it (:meth:`FrameCalibration.pose2d`); odometry is
            already planar and is read as it is.
    Returns:
        BaseRecording (stamps from the messages' headers; the bag's receive time where a
        stamp is zero or the message has no header).
    Raises:
        RecordingError: missing or unreadable bag; no (or an ambiguous) velocity command topic;
            neither an odometry nor a pose topic; empty topics; a path that never moves.
    """
    path = Path(path)
    reader = open_bag_reader(path)
    try:
        topics = {c.topic: c.msgtype for c in reader.connections}
        commands_topic = _pick(topics, (TWIST_STAMPED, TWIST), cmd_vel_topic, 'velocity command', path)
        has_pose = pose_topic is not None or any(m == POSE_STAMPED for m in topics.values())
        if has_pose:
            poses_topic = _pick(topics, (POSE_STAMPED,), pose_topic, 'pose', path)
        elif any(m == ODOMETRY for m in topics.values()) or odom_topic is not None:
            poses_topic = _pick(topics, (ODOMETRY,), odom_topic, 'odometry', path)
        else:
            listing = ', '.join(f'{t} ({m})' for t, m in sorted(topics.items())) or 'none'
            raise RecordingError(f'{path}: a base recording needs odometry (nav_msgs/Odometry) or a pose topic '
                                 f'(geometry_msgs/PoseStamped); topics: {listing}')
        series: dict[str, tuple[list[float], list]] = {commands_topic: ([], []), poses_topic: ([], [])}
        connections = [c for c in reader.connections if c.topic in series]
        with bag_errors(path, 'reading the base topics'):
            for connection, bag_time, raw in reader.messages(connections=connections):
                msg = reader.deserialize(raw, connection.msgtype)
                header = getattr(msg, 'header', None)
                stamp = to_seconds(header.stamp) if header is not None else 0.0
                times, values = series[connection.topic]
                times.append(stamp if stamp > 0 else from_nanoseconds(bag_time))
                if connection.topic == commands_topic:
                    twist = msg.twist if connection.msgtype == TWIST_STAMPED else msg
                    values.append((float(twist.linear.x), float(twist.angular.z)))
                elif frame is not None and connection.msgtype == POSE_STAMPED:
                    p, q = msg.pose.position, msg.pose.orientation
                    values.append(((p.x, p.y, p.z), (q.x, q.y, q.z, q.w)))
                else:
                    values.append(_pose_of(msg, connection.msgtype))
    finally:
        reader.close()
    for topic, (times, _) in series.items():
        if not times:
            raise RecordingError(f'{path}: topic {topic} has no messages')
    (ct, cmd), (pt, poses) = series[commands_topic], series[poses_topic]
    if frame is not None and topics[poses_topic] == POSE_STAMPED:
        poses = frame.pose2d(np.array([p for p, _ in poses], dtype=float), np.array([q for _, q in poses], dtype=float))
    order = np.argsort(pt, kind='stable')
    pt_sorted = np.asarray(pt)[order]
    keep = np.concatenate([[True], np.diff(pt_sorted) > 0])           # drop repeated stamps
    recording = BaseRecording(np.asarray(ct), np.asarray(cmd), pt_sorted[keep], np.asarray(poses)[order][keep],
                              poses_topic, str(path))
    recording.check_moves()
    return recording


def base_recording_messages(recording: BaseRecording, cmd_vel_topic: str = '/cmd_vel', odom_topic: str = '/odom',
                            frame_id: str = 'odom', child_frame_id: str = 'base_footprint') -> list[tuple[str, int, bytes]]:
    """The recording as CDR-serialized ``TwistStamped`` commands and ``Odometry`` poses
    ((topic, stamp ns, bytes), in time order), e.g. for :func:`write_serialized_bag`."""
    store = typestore()
    t = store.types

    def header(seconds: float, frame: str):
        sec, nanosec = to_sec_nanosec(seconds)
        return t['std_msgs/msg/Header'](stamp=t['builtin_interfaces/msg/Time'](sec=sec, nanosec=nanosec),
                                        frame_id=frame)

    def vector(x: float = 0.0, y: float = 0.0, z: float = 0.0):
        return t['geometry_msgs/msg/Vector3'](x=float(x), y=float(y), z=float(z))
    out = []
    for time_s, (v, omega) in zip(recording.command_times, recording.commands):
        msg = t[TWIST_STAMPED](header=header(time_s, 'base_footprint'),
                               twist=t[TWIST](linear=vector(v), angular=vector(z=omega)))
        out.append((cmd_vel_topic, to_nanoseconds(time_s), bytes(store.serialize_cdr(msg, TWIST_STAMPED))))
    covariance = np.zeros(36)
    for time_s, (x, y, yaw) in zip(recording.pose_times, recording.poses):
        pose = t['geometry_msgs/msg/Pose'](
            position=t['geometry_msgs/msg/Point'](x=float(x), y=float(y), z=0.0),
            orientation=t['geometry_msgs/msg/Quaternion'](x=0.0, y=0.0, z=float(np.sin(yaw / 2)),
                                                          w=float(np.cos(yaw / 2))))
        msg = t[ODOMETRY](header=header(time_s, frame_id), child_frame_id=child_frame_id,
                          pose=t['geometry_msgs/msg/PoseWithCovariance'](pose=pose, covariance=covariance),
                          twist=t['geometry_msgs/msg/TwistWithCovariance'](
                              twist=t[TWIST](linear=vector(), angular=vector()), covariance=covariance))
        out.append((odom_topic, to_nanoseconds(time_s), bytes(store.serialize_cdr(msg, ODOMETRY))))
    return sorted(out, key=lambda m: m[1])


def write_base_recording(path: str | Path, recording: BaseRecording, cmd_vel_topic: str = '/cmd_vel',
                         odom_topic: str = '/odom') -> Path:
    """Write ``recording`` as a new ROS 2 bag (TwistStamped on ``cmd_vel_topic``, Odometry on
    ``odom_topic``). Raises RecordingError if ``path`` exists (never overwritten)."""
    return write_serialized_bag(path, {cmd_vel_topic: TWIST_STAMPED, odom_topic: ODOMETRY},
                                base_recording_messages(recording, cmd_vel_topic, odom_topic))
