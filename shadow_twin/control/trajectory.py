"""Joint trajectories: waypoint YAML and ``trajectory_msgs/JointTrajectory``, sampled with splines.

Sampling follows ros2_controllers' joint trajectory controller
(``joint_trajectory_controller/trajectory.cpp``, ``interpolate_between_points``):
a segment whose points carry only positions is interpolated linearly (velocity
is the segment slope), with positions and velocities by a cubic Hermite
polynomial, and with accelerations too by a quintic polynomial. Before the
first point the controller interpolates from the state at the trajectory's
start time; after the last point it holds the last position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import yaml

from shadow_twin.common.errors import ConfigError, TrajectoryError
from shadow_twin.common.files import read_text_limited
from shadow_twin.common.stamps import to_seconds

INTERPOLATIONS = ('auto', 'linear', 'cubic', 'quintic')
#: YAML's safe loader, libyaml's where PyYAML was built with it (the same documents, about ten
#: times faster: the UR5's calibration trajectories are 1,000 lines, read once per protocol run).
SAFE_LOADER = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)
#: The largest waypoint file read (bytes) and trajectory taken (waypoints): a 10^6-point trajectory
#: grew a calibration past 11 GB before it was refused.
MAX_TRAJECTORY_BYTES = 64 * 1024 * 1024
MAX_WAYPOINTS = 100_000
#: Difference between a start state and point 0 above which the JTC's first segment is a motion,
#: rad (see :meth:`JointTrajectory.motion_start`).
START_TOLERANCE = 0.05


@dataclass
class JointTrajectory:
    """A joint-space trajectory.

    Attributes:
        joint_names: J joint names (ROS names).
        times: (K,) strictly increasing ``time_from_start`` of each point, s.
        positions: (K, J) positions, rad (m for prismatic joints).
        velocities: (K, J) velocities, rad/s, or None when not given.
        accelerations: (K, J) accelerations, rad/s^2, or None when not given.
    """

    joint_names: list[str]
    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None = None
    accelerations: np.ndarray | None = None
    name: str = field(default='trajectory')

    def __post_init__(self) -> None:
        self.times = np.asarray(self.times, dtype=float).reshape(-1)
        self.positions = np.asarray(self.positions, dtype=float)
        validate_arrays(self.joint_names, self.times, self.positions,
                        self.velocities, self.accelerations)
        if self.velocities is not None:
            self.velocities = np.asarray(self.velocities, dtype=float)
        if self.accelerations is not None:
            self.accelerations = np.asarray(self.accelerations, dtype=float)

    @property
    def duration(self) -> float:
        """``time_from_start`` of the last point, s."""
        return float(self.times[-1])

    def with_start(self, start_positions: Sequence[float],
                   start_velocities: Sequence[float] | None = None, at: float = 0.0) -> 'JointTrajectory':
        """Return a copy with the start state prepended as a point at t = ``at`` (s, default 0).

        This is what the joint trajectory controller does when a goal arrives:
        it interpolates from the current state to the first point. ``at`` > 0 is a goal
        that arrived that long after its stamped start (joined mid-way, as the JTC does): the
        current state is the point at its arrival. ``start_positions``: (J,) rad. Returned
        unchanged if the first point is at or before ``at`` (the JTC then interpolates between
        the goal's own points). Raises TrajectoryError on a size mismatch.
        """
        start = np.asarray(start_positions, dtype=float).reshape(-1)
        if start.size != len(self.joint_names):
            raise TrajectoryError(f'start state has {start.size} positions, trajectory has '
                                  f'{len(self.joint_names)} joints')
        at = max(0.0, float(at))
        if self.times[0] <= at:
            return self
        velocity = (np.zeros_like(start) if start_velocities is None
                    else np.asarray(start_velocities, dtype=float).reshape(-1))

        def stack(first, rest):
            return None if rest is None else np.vstack([first, rest])
        return JointTrajectory(
            list(self.joint_names), np.concatenate([[at], self.times]),
            np.vstack([start, self.positions]),
            stack(velocity, self.velocities),
            stack(np.zeros_like(start), self.accelerations), name=self.name)

    def sample(self, t: float | np.ndarray, interpolation: str = 'auto'
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Desired state at time(s) ``t`` (s from trajectory start).

        Args:
            t: scalar or (N,) times, s.
            interpolation: 'auto' (by the fields present, as the JTC does),
                'linear', 'cubic' or 'quintic' (missing velocities or
                accelerations are taken as zero at the points).
        Returns:
            positions, velocities, accelerations, each (N, J) (or (J,) for a
            scalar ``t``), in rad, rad/s, rad/s^2.
        Raises:
            TrajectoryError: unknown interpolation.
        """
        if interpolation not in INTERPOLATIONS:
            raise TrajectoryError(f'unknown interpolation {interpolation!r}; use one of {INTERPOLATIONS}')
        scalar = np.ndim(t) == 0
        t = np.atleast_1d(np.asarray(t, dtype=float))
        if interpolation == 'auto':
            interpolation = ('linear' if self.velocities is None else
                             'cubic' if self.accelerations is None else 'quintic')
        pos, vel, acc = _sample(self.times, self.positions, self.velocities,
                                self.accelerations, t, interpolation)
        if scalar:
            return pos[0], vel[0], acc[0]
        return pos, vel, acc

    def motion_start(self, start_positions: Sequence[float] | None = None, tolerance: float = 1e-6,
                     start_tolerance: float = START_TOLERANCE) -> float:
        """When the desired position first changes, s from the trajectory start.

        The joint trajectory controller interpolates from the state at the trajectory's
        start to point 0 over point 0's ``time_from_start`` (see :meth:`with_start`), so
        if the start state differs from point 0 the motion starts at t = 0; otherwise it
        starts at the first point after which a waypoint changes.

        Args:
            start_positions: (J,) the joints' positions when the trajectory started, rad
                (e.g. the recorded rest state before the motion); NaN for a joint whose
                state is unknown (ignored). None: not known, only the waypoints count.
            tolerance: change between waypoints that counts as motion, rad.
            start_tolerance: difference between the start state and point 0 that counts
                as motion, rad (default :data:`START_TOLERANCE`, 0.05 rad: above the rest
                offsets of real joint sensors, e.g. up to 0.024 rad between the resting
                Shadow Hand E and a commanded all-zero pose, and far above their noise).
        Returns:
            Motion start, s: 0.0 when the start state is away from point 0 or nothing moves.
        Raises:
            TrajectoryError: ``start_positions`` of the wrong size.
        """
        if start_positions is not None:
            start = np.asarray(start_positions, dtype=float).reshape(-1)
            if start.size != len(self.joint_names):
                raise TrajectoryError(f'start state has {start.size} positions, trajectory has '
                                      f'{len(self.joint_names)} joints')
            away = np.abs(start - self.positions[0]) > start_tolerance  # NaN compares False
            if away.any():
                return 0.0
        moving = np.any(np.abs(np.diff(self.positions, axis=0)) > tolerance, axis=1)
        if not moving.any():
            return 0.0
        return float(self.times[int(np.argmax(moving))])

    def subset(self, joint_names: Sequence[str]) -> 'JointTrajectory':
        """The trajectory of the named joints only (same points)."""
        missing = [j for j in joint_names if j not in self.joint_names]
        if missing:
            raise TrajectoryError(f'trajectory has no joint(s) {missing}')
        idx = [self.joint_names.index(j) for j in joint_names]

        def pick(arr):
            return None if arr is None else arr[:, idx]
        return JointTrajectory(list(joint_names), self.times.copy(), self.positions[:, idx],
                               pick(self.velocities), pick(self.accelerations), name=self.name)

    # ROS message conversion (duck-typed so the core needs no ROS import) ------------
    @classmethod
    def from_msg(cls, msg, name: str = 'goal') -> 'JointTrajectory':
        """Build from a ``trajectory_msgs/JointTrajectory`` message.

        Velocities/accelerations are used only if every point carries them.
        Raises TrajectoryError for empty names or points, size mismatches,
        NaN/inf or non-increasing ``time_from_start``.
        """
        points = list(msg.points)
        if not msg.joint_names:
            raise TrajectoryError('trajectory has no joint names')
        if not points:
            raise TrajectoryError('trajectory has no points')
        times = [to_seconds(p.time_from_start) for p in points]

        def field_or_none(attr):
            rows = [list(getattr(p, attr)) for p in points]
            if all(len(r) == 0 for r in rows):
                return None
            if any(len(r) == 0 for r in rows) and attr != 'positions':
                return None  # not on every point: sampled as if absent
            if any(len(r) != len(msg.joint_names) for r in rows):
                bad = next(i for i, r in enumerate(rows) if len(r) != len(msg.joint_names))
                raise TrajectoryError(f'point {bad} has {len(rows[bad])} {attr} for '
                                      f'{len(msg.joint_names)} joints')
            return np.array(rows, dtype=float)
        positions = field_or_none('positions')
        if positions is None:
            raise TrajectoryError('trajectory points carry no positions')
        return cls(list(msg.joint_names), np.array(times), positions,
                   field_or_none('velocities'), field_or_none('accelerations'), name=name)


def validate_arrays(joint_names, times, positions, velocities=None, accelerations=None) -> None:
    """Check a trajectory's shapes and values as the JTC does.

    Raises TrajectoryError naming the problem: empty joint names or points,
    duplicate joints, size mismatch, NaN/inf, non-increasing times.
    """
    if len(joint_names) == 0:
        raise TrajectoryError('trajectory has no joint names')
    duplicates = sorted({j for j in joint_names if list(joint_names).count(j) > 1})
    if duplicates:
        raise TrajectoryError(f'duplicate joint name(s) {duplicates}')
    if times.size == 0:
        raise TrajectoryError('trajectory has no points')
    for label, arr in (('positions', positions), ('velocities', velocities),
                       ('accelerations', accelerations)):
        if arr is None:
            continue
        arr = np.asarray(arr, dtype=float)
        if arr.shape != (times.size, len(joint_names)):
            raise TrajectoryError(f'{label} have shape {arr.shape}, expected '
                                  f'({times.size} points, {len(joint_names)} joints)')
        if not np.all(np.isfinite(arr)):
            raise TrajectoryError(f'{label} contain NaN or inf')
    if not np.all(np.isfinite(times)):
        raise TrajectoryError('time_from_start contains NaN or inf')
    if times[0] < 0 or np.any(np.diff(times) <= 0):
        raise TrajectoryError('time_from_start must be non-negative and strictly increasing')


def _sample(times, pos, vel, acc, t, interpolation):
    """Vectorised piecewise interpolation; returns (N, J) pos, vel, acc.

    Cost O(N (log K + J)) for N times on K points: only the N segments used are read
    (missing velocities/accelerations are zeros of those segments, not of all K points),
    so a long goal costs the live loop no more per step than a short one."""
    n_joints = pos.shape[1]
    if len(times) == 1:
        out_p = np.repeat(pos[:1], t.size, axis=0)
        return out_p, np.zeros((t.size, n_joints)), np.zeros((t.size, n_joints))
    t_clamped = np.clip(t, times[0], times[-1])
    seg = np.clip(np.searchsorted(times, t_clamped, side='right') - 1, 0, len(times) - 2)
    h = (times[seg + 1] - times[seg])[:, None]
    s = (t_clamped - times[seg])[:, None]
    p0, p1 = pos[seg], pos[seg + 1]

    def at(arr, index):
        return np.zeros_like(p0) if arr is None else arr[index]
    if interpolation == 'linear':
        slope = (p1 - p0) / h
        out_p, out_v, out_a = p0 + slope * s, slope, np.zeros_like(p0)
    elif interpolation == 'cubic':
        v0, v1 = at(vel, seg), at(vel, seg + 1)
        a2 = (3 * (p1 - p0) - (2 * v0 + v1) * h) / h**2
        a3 = (2 * (p0 - p1) + (v0 + v1) * h) / h**3
        out_p = p0 + v0 * s + a2 * s**2 + a3 * s**3
        out_v = v0 + 2 * a2 * s + 3 * a3 * s**2
        out_a = 2 * a2 + 6 * a3 * s
    else:  # quintic
        v0, v1, ac0, ac1 = at(vel, seg), at(vel, seg + 1), at(acc, seg), at(acc, seg + 1)
        c3 = (20 * (p1 - p0) - (8 * v1 + 12 * v0) * h - (3 * ac0 - ac1) * h**2) / (2 * h**3)
        c4 = (30 * (p0 - p1) + (14 * v1 + 16 * v0) * h + (3 * ac0 - 2 * ac1) * h**2) / (2 * h**4)
        c5 = (12 * (p1 - p0) - 6 * (v1 + v0) * h - (ac0 - ac1) * h**2) / (2 * h**5)
        out_p = p0 + v0 * s + ac0 / 2 * s**2 + c3 * s**3 + c4 * s**4 + c5 * s**5
        out_v = v0 + ac0 * s + 3 * c3 * s**2 + 4 * c4 * s**3 + 5 * c5 * s**4
        out_a = ac0 + 6 * c3 * s + 12 * c4 * s**2 + 20 * c5 * s**3
    # Hold the end points outside the trajectory: no motion before/after.
    outside = (t < times[0]) | (t > times[-1])
    out_v = np.where(outside[:, None], 0.0, out_v)
    out_a = np.where(outside[:, None], 0.0, out_a)
    return out_p, out_v, out_a


def load_waypoint_yaml(path: str | Path, name: str, prefix: str = 'rh_') -> JointTrajectory:
    """Load a named trajectory from a Shadow-style waypoint YAML (``trajectories.yaml``).

    The file has ``hand_joints_order`` / ``arm_joints_order`` (joint names, to
    which ``prefix`` is added unless already present) and sections
    ``*_trajectories`` mapping names to lists of ``{joint_angles: [...],
    interpolate_time: s}``; ``interpolate_time`` is the time from the previous
    waypoint (from the start state for the first). Returns positions only, so the
    trajectory samples linearly, as the JTC does for position-only points.

    Raises TrajectoryError: missing file, not a regular file or over :data:`MAX_TRAJECTORY_BYTES`,
    unknown name (lists the known ones), more than :data:`MAX_WAYPOINTS` waypoints, wrong vector
    length, non-positive interpolate_time.
    """
    path = Path(path)
    if not path.exists():
        raise TrajectoryError(f'trajectory file not found: {path}')
    try:
        data = yaml.load(read_text_limited(path, 'trajectory file', MAX_TRAJECTORY_BYTES), Loader=SAFE_LOADER) or {}
    except ConfigError as exc:
        raise TrajectoryError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise TrajectoryError(f'{path}: not valid YAML ({exc})') from None
    sections = {k: v for k, v in data.items() if k.endswith('_trajectories') and isinstance(v, dict)}
    known = {traj: section for section, trajs in sections.items() for traj in trajs}
    if name not in known:
        raise TrajectoryError(f'{path}: no trajectory named {name!r}; known: {sorted(known)}')
    section = known[name]
    group = section[:-len('_trajectories')]
    order = data.get(f'{group}_joints_order')
    if order is None and group == 'arm_and_hand':
        order = list(data.get('arm_joints_order', [])) + list(data.get('hand_joints_order', []))
    if not order:
        raise TrajectoryError(f'{path}: no {group}_joints_order for trajectory {name!r}')
    joints = [j if j.startswith(prefix) or group != 'hand' else prefix + j for j in order]
    waypoints = sections[section][name] or []
    if not waypoints:
        raise TrajectoryError(f'{path}: trajectory {name!r} has no waypoints')
    if len(waypoints) > MAX_WAYPOINTS:
        raise TrajectoryError(f'{path}: trajectory {name!r} has {len(waypoints)} waypoints, more than '
                              f'{MAX_WAYPOINTS} (each is simulated and compared: split it)')
    times, positions = [], []
    elapsed = 0.0
    for k, wp in enumerate(waypoints):
        angles = wp.get('joint_angles')
        step = wp.get('interpolate_time')
        if angles is None or len(angles) != len(joints):
            raise TrajectoryError(f'{path}: {name} waypoint {k} has {0 if angles is None else len(angles)} '
                                  f'joint_angles for {len(joints)} joints')
        if step is None or float(step) <= 0:
            raise TrajectoryError(f'{path}: {name} waypoint {k} needs a positive interpolate_time')
        elapsed += float(step)
        times.append(elapsed)
        positions.append([float(a) for a in angles])
    return JointTrajectory(joints, np.array(times), np.array(positions), name=name)


def parse_trajectory_arg(spec: str, prefix: str = 'rh_') -> JointTrajectory:
    """Parse the CLI form ``FILE.yaml:NAME`` into a trajectory (see load_waypoint_yaml)."""
    if ':' not in spec:
        raise TrajectoryError(f'--trajectory must be FILE.yaml:NAME, got {spec!r}')
    file, name = spec.rsplit(':', 1)
    return load_waypoint_yaml(file, name, prefix=prefix)
