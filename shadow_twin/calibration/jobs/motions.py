"""The motions of a cell protocol run (ROS-free): the base's velocity profile (:class:`BaseMotion`:
trapezoidal speed, constant curvature), what the arm does (:class:`ArmMotion`: hold the rest pose,
swing one joint, or a named waypoint trajectory), and the ``FollowJointTrajectory`` goal they make
(:class:`RunGoal`, :func:`base_goal`). The protocol that names the runs is
:mod:`shadow_twin.calibration.jobs.protocol`'s.

Units: m, rad, m/s, rad/s, m/s^2, s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.paths import config_path
from shadow_twin.control.base.trajectory import DEFAULT_MAX_YAW_RATE
from shadow_twin.control.diff_drive import MIR250_TOP_SPEED
from shadow_twin.control.trajectory import JointTrajectory, load_waypoint_yaml

#: Time between the points of a generated goal (base poses, arm swing), s. The base's points carry
#: velocities, so they are interpolated as cubic Hermite splines (base_trajectory's rule).
GOAL_POINT_PERIOD = 0.05
#: Integration step of a base profile, s.
_PROFILE_STEP = 0.001


def checked_number(value, what: str, low: float = -math.inf, high: float = math.inf, positive: bool = False) -> float:
    """``value`` as a float; ConfigError naming ``what`` unless it is a finite number (not a bool) in
    [``low``, ``high``] (and > 0 with ``positive``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f'{what} must be a finite number, got {value!r}')
    if positive and value <= 0 or not low <= value <= high:
        raise ConfigError(f'{what} must be {"> 0 and " if positive else ""}in [{low:g}, {high:g}], got {value}')
    return float(value)


@dataclass(frozen=True)
class BaseMotion:
    """A base run's velocity profile, from rest to rest.

    The forward speed ramps up at ``accel`` to ``speed``, holds it for ``cruise`` s and ramps
    down at ``accel``; the yaw rate is speed / ``radius`` throughout (an arc of constant
    curvature; ``radius`` 0 = straight). A still base (``speed`` 0) holds for ``cruise`` s.

    Attributes:
        speed: cruise speed, m/s (0..2, the MiR250's top speed; may be negative: backwards).
        accel: acceleration of the ramps, m/s^2 (> 0; high values make the wheels slip, which
            shows the wheel-floor friction and the rotor inertia).
        cruise: s at ``speed``.
        radius: turning radius, m (> 0: left, < 0: right, 0: straight).
    Raises:
        ConfigError: a value out of range, or a yaw rate above 1.5 rad/s.
    """

    speed: float = 0.0
    accel: float = 1.0
    cruise: float = 0.0
    radius: float = 0.0

    def __post_init__(self) -> None:
        checked_number(self.speed, 'base speed (m/s)', -MIR250_TOP_SPEED, MIR250_TOP_SPEED)
        checked_number(self.accel, 'base accel (m/s^2)', 0.0, 20.0, positive=True)
        checked_number(self.cruise, 'base cruise (s)', 0.0, 600.0)
        checked_number(self.radius, 'base radius (m)')
        if self.radius and abs(self.speed / self.radius) > DEFAULT_MAX_YAW_RATE:
            raise ConfigError(f'base arc: speed {self.speed} m/s on radius {self.radius} m turns at '
                              f'{abs(self.speed / self.radius):.2f} rad/s, above {DEFAULT_MAX_YAW_RATE} rad/s')

    @property
    def still(self) -> bool:
        return self.speed == 0.0

    @property
    def duration(self) -> float:
        """Length of the profile, s."""
        return self.cruise + (2.0 * abs(self.speed) / self.accel if not self.still else 0.0)

    def twist(self, t: np.ndarray) -> np.ndarray:
        """(N, 2) body twist (forward speed m/s, yaw rate rad/s) at times ``t`` (N,) s."""
        t = np.asarray(t, dtype=float)
        magnitude = np.clip(np.minimum(t, self.duration - t) * self.accel, 0.0, abs(self.speed))
        v = np.sign(self.speed) * magnitude
        omega = v / self.radius if self.radius else np.zeros_like(v)
        return np.column_stack([v, omega])

    def path(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """((N, 3) poses x, y m, yaw rad, (N, 3) their time derivatives) at times ``t`` (N,) s,
        relative to the start pose (integrated at 1 ms, exact for straight runs)."""
        t = np.asarray(t, dtype=float)
        fine = np.arange(0.0, max(self.duration, float(t.max(initial=0.0))) + 2 * _PROFILE_STEP, _PROFILE_STEP)
        twist = self.twist(fine)
        yaw = np.concatenate([[0.0], np.cumsum((twist[1:, 1] + twist[:-1, 1]) / 2.0 * _PROFILE_STEP)])
        vx, vy = twist[:, 0] * np.cos(yaw), twist[:, 0] * np.sin(yaw)
        x = np.concatenate([[0.0], np.cumsum((vx[1:] + vx[:-1]) / 2.0 * _PROFILE_STEP)])
        y = np.concatenate([[0.0], np.cumsum((vy[1:] + vy[:-1]) / 2.0 * _PROFILE_STEP)])
        columns = [np.interp(t, fine, c) for c in (x, y, yaw, vx, vy, twist[:, 1])]
        return np.column_stack(columns[:3]), np.column_stack(columns[3:])


@dataclass(frozen=True)
class ArmMotion:
    """What the arm does during a run, starting and ending at the protocol's rest pose.

    Attributes:
        kind: ``'hold'`` (the rest pose), ``'swing'`` (one joint: rest + amplitude
            sin(2 pi t / period), faded in and out over the first and last period, so it starts
            and ends at rest with zero velocity) or ``'trajectory'`` (a named waypoint
            trajectory, ``FILE.yaml:NAME``; FILE relative to ``config/trajectories``).
        joint: the swinging joint (``swing``).
        amplitude: swing amplitude, rad.
        period: swing period, s.
        cycles: swing cycles (the first and last are the fades).
        trajectory: ``FILE.yaml:NAME`` (``trajectory``).
    Raises:
        ConfigError: unknown kind, missing field, or a swing faster than pi rad/s (the UR5's limit).
    """

    kind: str = 'hold'
    joint: str = ''
    amplitude: float = 0.0
    period: float = 2.0
    cycles: int = 3
    trajectory: str = ''

    def __post_init__(self) -> None:
        if self.kind not in ('hold', 'swing', 'trajectory'):
            raise ConfigError(f"arm motion kind must be 'hold', 'swing' or 'trajectory', got {self.kind!r}")
        if self.kind == 'swing':
            if not self.joint:
                raise ConfigError('an arm swing needs a joint')
            checked_number(self.amplitude, 'arm swing amplitude (rad)', 0.0, math.pi, positive=True)
            checked_number(self.period, 'arm swing period (s)', 0.0, 60.0, positive=True)
            if not isinstance(self.cycles, int) or self.cycles < 2:
                raise ConfigError(f'an arm swing needs at least 2 cycles (fade in and out), got {self.cycles!r}')
            peak = self.amplitude * 2.0 * math.pi / self.period
            if peak > math.pi:
                raise ConfigError(f'arm swing of {self.joint}: peak speed {peak:.2f} rad/s is above the '
                                  f"UR5's pi rad/s")
        if self.kind == 'trajectory' and ':' not in self.trajectory:
            raise ConfigError(f'an arm trajectory must be FILE.yaml:NAME, got {self.trajectory!r}')

    @property
    def moves(self) -> bool:
        return self.kind != 'hold'

    def trajectory_for(self, rest: Mapping[str, float], duration: float) -> JointTrajectory:
        """The arm's trajectory over every joint of ``rest`` ({joint: rad}), lasting at least
        ``duration`` s (holding the rest pose at the end). Raises ConfigError (unknown joint)
        or TrajectoryError (trajectory file)."""
        joints = list(rest)
        home = np.array([rest[j] for j in joints])
        if self.kind == 'trajectory':
            file, name = self.trajectory.rsplit(':', 1)
            path = Path(file) if Path(file).is_absolute() else config_path('trajectories', file)
            loaded = load_waypoint_yaml(path, name, prefix='')
            unknown = [j for j in loaded.joint_names if j not in rest]
            if unknown:
                raise ConfigError(f'arm trajectory {self.trajectory}: joints {unknown} are not arm joints {joints}')
            positions = np.tile(home, (len(loaded.times), 1))
            for k, j in enumerate(loaded.joint_names):
                positions[:, joints.index(j)] = loaded.positions[:, k]
            times = loaded.times
            if duration > times[-1] + 1e-9:
                times, positions = np.append(times, duration), np.vstack([positions, positions[-1]])
            return JointTrajectory(joints, times, positions, name=name)
        length = max(duration, self.period * self.cycles if self.kind == 'swing' else 0.0, GOAL_POINT_PERIOD)
        times = np.arange(1, int(math.ceil(length / GOAL_POINT_PERIOD - 1e-9)) + 1) * GOAL_POINT_PERIOD
        positions, velocities = np.tile(home, (len(times), 1)), np.zeros((len(times), len(joints)))
        if self.kind == 'swing':
            if self.joint not in rest:
                raise ConfigError(f'arm swing joint {self.joint!r} is not one of {joints}')
            q, qd = self.swing(times)
            positions[:, joints.index(self.joint)] += q
            velocities[:, joints.index(self.joint)] = qd
            return JointTrajectory(joints, times, positions, velocities, name='swing')
        return JointTrajectory(joints, times[-1:], positions[-1:], name='hold')

    def swing(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(offset from rest rad, velocity rad/s) of the swinging joint at times ``t`` (N,) s."""
        t = np.asarray(t, dtype=float)
        total, w = self.period * self.cycles, 2.0 * math.pi / self.period
        fade = np.clip(np.minimum(t, total - t) / self.period, 0.0, 1.0)
        envelope = 0.5 * (1.0 - np.cos(math.pi * fade))
        denvelope = np.where((fade > 0) & (fade < 1), 0.5 * math.pi * np.sin(math.pi * fade) / self.period
                             * np.where(t < total / 2, 1.0, -1.0), 0.0)
        q = self.amplitude * np.sin(w * t) * envelope
        qd = self.amplitude * (w * np.cos(w * t) * envelope + np.sin(w * t) * denvelope)
        inside = (t >= 0) & (t <= total)
        return np.where(inside, q, 0.0), np.where(inside, qd, 0.0)


@dataclass(frozen=True)
class RunGoal:
    """What one run's ``FollowJointTrajectory`` goal carries.

    Attributes:
        arm: the arm's trajectory (every arm joint; time_from_start s).
        base_times: (K,) time_from_start of the base points, s (empty: the base is not part of the goal).
        base_poses: (K, 3) x, y (m), yaw (rad) relative to the base's start pose.
        base_velocities: (K, 3) their time derivatives in the start frame (m/s, rad/s).
    """

    arm: JointTrajectory
    base_times: np.ndarray
    base_poses: np.ndarray
    base_velocities: np.ndarray

    @property
    def duration(self) -> float:
        return max(self.arm.duration, float(self.base_times[-1]) if len(self.base_times) else 0.0)


def base_goal(base: BaseMotion, arm: JointTrajectory) -> RunGoal:
    """The goal of ``base``'s profile (points every :data:`GOAL_POINT_PERIOD` s; none for a
    still base) with the arm following ``arm``."""
    if base.still:
        empty = np.zeros((0, 3))
        return RunGoal(arm, np.zeros(0), empty, empty)
    n = int(math.ceil(base.duration / GOAL_POINT_PERIOD - 1e-9))
    times = np.arange(1, n + 1) * GOAL_POINT_PERIOD
    times[-1] = base.duration
    poses, velocities = base.path(times)
    return RunGoal(arm, times, poses, velocities)
