"""The simulated mobile base: velocity commands in, odometry out (ROS-free).

A model holds a differential-drive base when it has the two drive wheel joints
(``left_wheel_joint``, ``right_wheel_joint``: hinges driven by MJCF ``<velocity>``
actuators) on a free-floating body. :class:`SimMobileBase` finds them, reads the
drive geometry off the compiled model (wheel radius from the wheel's collision
geom, separation from the wheel bodies' positions) and

* turns the latest body twist command (v, omega) into wheel rates with the
  differential-drive inverse kinematics (:mod:`shadow_twin.control.diff_drive`,
  the MiR250 twin study's Eq. 1), saturated to the top speed keeping the
  curvature. A command older than ``command_timeout`` s (sim time) stops the
  wheels, as the MiR's own velocity interface does when commands stop coming;
* with a command latency (the model's custom numeric ``base_command_latency``, s;
  none: 0) holds each command until ``latency`` s after the time it was sent (its
  stamp), as a drive whose controller buffers its input: the response to a stamped
  command then does not depend on when the transport and the scheduler deliver it
  (within the latency), so a replay of the recorded stamps moves the same way;
* reads the base's odometry (pose in the world frame, which is the sim's ``odom``
  frame, and the body twist) from the free joint: exact, not integrated from the
  wheels, so slip shows as a difference to the real robot's wheel odometry.

The live bridge (``LiveSimulation``) calls it every step; the ROS layer turns
``geometry_msgs/TwistStamped`` into :meth:`SimMobileBase.command` and
:meth:`SimMobileBase.odometry` into ``nav_msgs/Odometry`` and TF.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import mujoco
import numpy as np

from shadow_twin.common.errors import ModelError
from shadow_twin.control.base.trajectory import yaw_from_quaternion
from shadow_twin.control.diff_drive import (MIR250_TOP_SPEED, ZERO_TWIST, BodyTwist, DiffDriveGeometry, Pose2D,
                                            WheelRates, saturate_twist, wheel_rates)
from shadow_twin.model.cell.assembly import LATENCY_NUMERIC

#: Joint names of the drive wheels (DFKI's mir_description, the real MiR's joint states).
LEFT_WHEEL, RIGHT_WHEEL = 'left_wheel_joint', 'right_wheel_joint'
#: A velocity command older than this (s of sim time) stops the base.
COMMAND_TIMEOUT = 0.5
_ROLLING_GEOMS = tuple(int(t) for t in (mujoco.mjtGeom.mjGEOM_CYLINDER, mujoco.mjtGeom.mjGEOM_SPHERE,
                                        mujoco.mjtGeom.mjGEOM_ELLIPSOID))


@dataclass(frozen=True)
class BaseOdometry:
    """The base's state in the ``odom`` frame at ``sim_time`` (s).

    Attributes:
        pose: (x, y, yaw) of the free body's frame, m and rad.
        position: (3,) position of that frame, m (z included).
        orientation: (4,) its orientation quaternion (w, x, y, z), MuJoCo's order.
        twist: body-frame forward speed (m/s) and yaw rate (rad/s).
        lateral: body-frame sideways speed, m/s (slip; 0 for an ideal diff drive).
    """

    sim_time: float
    pose: Pose2D
    position: np.ndarray
    orientation: np.ndarray
    twist: BodyTwist
    lateral: float


def _free_joint_of(model: mujoco.MjModel, body: int) -> int:
    """Id of the free joint of ``body`` or of its nearest ancestor; ModelError when none."""
    while body > 0:
        for j in range(model.body_jntadr[body], model.body_jntadr[body] + model.body_jntnum[body]):
            if int(model.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE):
                return j
        body = int(model.body_parentid[body])
    raise ModelError('the drive wheels are not on a free-floating body (no free joint above them)')


def _wheel_radius(model: mujoco.MjModel, body: int, joint_name: str) -> float:
    """Radius (m) of the largest colliding cylinder/sphere/ellipsoid geom of a wheel body."""
    radii = [float(model.geom_size[g, 0]) for g in range(model.ngeom)
             if model.geom_bodyid[g] == body and (model.geom_contype[g] or model.geom_conaffinity[g])
             and int(model.geom_type[g]) in _ROLLING_GEOMS]
    if not radii:
        raise ModelError(f'{joint_name}: its body has no colliding cylinder or sphere geom to roll on')
    return max(radii)


def command_latency_of(model: mujoco.MjModel) -> float:
    """The model's base command latency, s: its custom numeric ``base_command_latency``, 0 when
    it has none. Raises ModelError for a negative or non-finite value."""
    nid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_NUMERIC, LATENCY_NUMERIC)
    if nid < 0:
        return 0.0
    value = float(model.numeric_data[model.numeric_adr[nid]])
    if not (math.isfinite(value) and value >= 0):
        raise ModelError(f'the model\'s {LATENCY_NUMERIC} is {value}; it must be a latency >= 0 s')
    return value


class SimMobileBase:
    """The differential-drive base of a compiled model (see module doc).

    Args:
        model: compiled model holding both drive wheel joints.
        left_wheel, right_wheel: MJCF names of the drive wheel joints.
        max_speed: top rim speed of a wheel, m/s (commands are scaled down to it,
            keeping the curvature).
        command_timeout: a command older than this stops the base, s of sim time.
    Attributes:
        command_latency: s from a command's sending (its stamp) to its effect
            (:func:`command_latency_of` the model).
        late_commands: how many commands with a latency arrived after it had passed (they take
            effect late: the response then depends on delivery); ``latest_late`` s, the last one's
            delay past its stamp.
    Raises:
        ModelError: a wheel joint is missing, is not a hinge, has no velocity
        actuator, or the wheels do not sit on a free body; a bad command latency.
    """

    def __init__(self, model: mujoco.MjModel, left_wheel: str = LEFT_WHEEL, right_wheel: str = RIGHT_WHEEL,
                 max_speed: float = MIR250_TOP_SPEED, command_timeout: float = COMMAND_TIMEOUT) -> None:
        self.wheel_names = (left_wheel, right_wheel)
        self.max_speed, self.command_timeout = float(max_speed), float(command_timeout)
        ids = []
        for name in self.wheel_names:
            jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
            if jid < 0:
                raise ModelError(f'the model has no drive wheel joint {name!r}')
            if int(model.jnt_type[jid]) != int(mujoco.mjtJoint.mjJNT_HINGE):
                raise ModelError(f'drive wheel joint {name!r} is not a hinge')
            driven = any(int(model.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT)
                         and model.actuator_trnid[a, 0] == jid
                         and int(model.actuator_biastype[a]) == int(mujoco.mjtBias.mjBIAS_AFFINE)
                         and model.actuator_biasprm[a, 1] == 0 and model.actuator_biasprm[a, 2] < 0
                         for a in range(model.nu))
            if not driven:
                raise ModelError(f'drive wheel joint {name!r} has no <velocity> actuator')
            ids.append(jid)
        bodies = [int(model.jnt_bodyid[j]) for j in ids]
        self.free_joint = _free_joint_of(model, bodies[0])
        if _free_joint_of(model, bodies[1]) != self.free_joint:
            raise ModelError('the two drive wheels are not on the same free-floating body')
        self._qpos = int(model.jnt_qposadr[self.free_joint])
        self._dof = int(model.jnt_dofadr[self.free_joint])
        self.geometry = self._geometry(model, bodies)
        self.command_latency = command_latency_of(model)
        self._command = ZERO_TWIST
        self._command_time = -math.inf      # when the command in force took effect, s
        self._command_sent = -math.inf      # when it was sent, s
        self._pending: list[tuple[float, float, BodyTwist]] = []   # (takes effect, sent, twist), by effect
        self.late_commands, self.latest_late = 0, 0.0

    @classmethod
    def find(cls, model: mujoco.MjModel, **kwargs) -> 'SimMobileBase | None':
        """The model's base, or None when it has neither drive wheel joint (ModelError when
        it has only one, or they are not drivable: see the class doc)."""
        names = (kwargs.get('left_wheel', LEFT_WHEEL), kwargs.get('right_wheel', RIGHT_WHEEL))
        present = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) >= 0 for n in names]
        if not any(present):
            return None
        return cls(model, **kwargs)

    def _geometry(self, model: mujoco.MjModel, bodies: list[int]) -> DiffDriveGeometry:
        """Wheel radius and separation measured on the model at ``qpos0``."""
        data = mujoco.MjData(model)
        mujoco.mj_kinematics(model, data)
        radius = np.mean([_wheel_radius(model, b, n) for b, n in zip(bodies, self.wheel_names)])
        # separation along the base's lateral axis (the free body's y axis)
        base = int(model.jnt_bodyid[self.free_joint])
        lateral = data.xmat[base].reshape(3, 3)[:, 1]
        separation = abs(float((data.xpos[bodies[0]] - data.xpos[bodies[1]]) @ lateral))
        return DiffDriveGeometry(wheel_radius=float(radius), wheel_separation=separation)

    # -- commands ------------------------------------------------------------------------------
    def command(self, twist: BodyTwist | tuple[float, float], sim_time: float,
                received: float | None = None) -> BodyTwist:
        """Take a body twist command (m/s, rad/s) sent at ``sim_time`` (s, its stamp) and
        ``received`` at that sim time (None: when sent). It takes effect ``command_latency`` s
        after it was sent, or when received if that is later, unless a command sent after it
        has taken effect by then. Returns it as applied (non-finite values give zero; scaled to
        the top speed, keeping the curvature)."""
        applied = saturate_twist(BodyTwist(*map(float, twist)), self.geometry, self.max_speed)
        sent = float(sim_time)
        effect = max(sent + self.command_latency, sent if received is None else float(received))
        if self.command_latency > 0 and effect > sent + self.command_latency:
            self.late_commands, self.latest_late = self.late_commands + 1, effect - sent
        pending = self._pending
        while pending and pending[-1][0] == effect:     # superseded before it takes effect (paused sim)
            pending.pop()
        bisect.insort(pending, (effect, sent, applied), key=lambda entry: entry[0])
        return applied

    def keep_command_of(self, other: 'SimMobileBase') -> None:
        """Take over the command in force of ``other`` (the base of the model before a reload)
        and those it holds back."""
        self._command = saturate_twist(other._command, self.geometry, self.max_speed)
        self._command_time, self._command_sent = other._command_time, other._command_sent
        self._pending = [(effect, sent, saturate_twist(twist, self.geometry, self.max_speed))
                         for effect, sent, twist in other._pending]
        self.late_commands, self.latest_late = other.late_commands, other.latest_late

    def stop(self) -> None:
        """Drop the current command and those held back: the wheels stop."""
        self._command, self._command_time, self._command_sent = ZERO_TWIST, -math.inf, -math.inf
        self._pending.clear()

    def current_command(self, sim_time: float) -> BodyTwist:
        """The command in force at ``sim_time`` (zero once older than ``command_timeout``);
        commands due by then take effect, in the order they were sent."""
        pending = self._pending
        while pending and pending[0][0] <= sim_time + 1e-12:
            effect, sent, twist = pending.pop(0)
            if sent >= self._command_sent:              # a late command never undoes a newer one
                self._command, self._command_time, self._command_sent = twist, effect, sent
        if sim_time - self._command_time > self.command_timeout:
            return ZERO_TWIST
        return self._command

    def wheel_rates(self, sim_time: float) -> WheelRates:
        """Drive wheel rates (rad/s) for the command in force at ``sim_time``."""
        return wheel_rates(self.current_command(sim_time), self.geometry)

    # -- state ---------------------------------------------------------------------------------
    def place(self, data: mujoco.MjData, x: float, y: float, yaw: float) -> None:
        """Put the base at (``x`` m, ``y`` m, ``yaw`` rad) in the world (its height, roll and
        pitch kept: yaw turns the free joint's quaternion about the world z axis), at rest; its
        command is dropped. Call :func:`mujoco.mj_forward` after."""
        quat = data.qpos[self._qpos + 3:self._qpos + 7]
        turn = np.empty(4)
        mujoco.mju_axisAngle2Quat(turn, np.array([0.0, 0.0, 1.0]), float(yaw) - yaw_from_quaternion(
            quat[1], quat[2], quat[3], quat[0]))
        mujoco.mju_mulQuat(quat, turn, quat.copy())
        data.qpos[self._qpos:self._qpos + 2] = (float(x), float(y))
        data.qvel[self._dof:self._dof + 6] = 0.0
        self.stop()

    def odometry(self, data: mujoco.MjData) -> BaseOdometry:
        """Pose and body twist of the base from its free joint (module doc)."""
        position = data.qpos[self._qpos:self._qpos + 3].copy()
        w, x, y, z = data.qpos[self._qpos + 3:self._qpos + 7]
        yaw = yaw_from_quaternion(x, y, z, w)
        vx, vy = data.qvel[self._dof:self._dof + 2]           # world frame (MuJoCo's free joint)
        forward = vx * math.cos(yaw) + vy * math.sin(yaw)
        lateral = -vx * math.sin(yaw) + vy * math.cos(yaw)
        # angular velocity is in the body frame; its world z component is the yaw rate
        rotation = np.empty(9)
        mujoco.mju_quat2Mat(rotation, data.qpos[self._qpos + 3:self._qpos + 7])
        yaw_rate = float(rotation.reshape(3, 3)[2] @ data.qvel[self._dof + 3:self._dof + 6])
        return BaseOdometry(float(data.time), Pose2D(float(position[0]), float(position[1]), yaw), position,
                            data.qpos[self._qpos + 3:self._qpos + 7].copy(), BodyTwist(float(forward), yaw_rate),
                            float(lateral))


@dataclass(frozen=True)
class TwistCommands:
    """Velocity commands of the base over time, as recorded (``cmd_vel``).

    Attributes:
        times: (C,) sim time at which each command was sent (its stamp), s, non-decreasing.
        twists: (C, 2) forward speed v (m/s) and yaw rate omega (rad/s).
    Raises:
        ValueError: shapes that disagree, non-finite values or decreasing times.
    """

    times: np.ndarray
    twists: np.ndarray

    def __post_init__(self) -> None:
        times = np.asarray(self.times, dtype=float).reshape(-1)
        twists = np.asarray(self.twists, dtype=float).reshape(-1, 2) if len(times) else np.zeros((0, 2))
        if len(twists) != len(times):
            raise ValueError(f'{len(times)} command times but {len(twists)} twists')
        if not (np.all(np.isfinite(times)) and np.all(np.isfinite(twists))):
            raise ValueError('command times and twists must be finite')
        if np.any(np.diff(times) < 0):
            raise ValueError('command times must not decrease')
        object.__setattr__(self, 'times', times)
        object.__setattr__(self, 'twists', twists)


def wheel_rate_schedule(base: SimMobileBase, commands: TwistCommands, step_times: np.ndarray) -> np.ndarray:
    """(N, 2) drive wheel rates (left, right; rad/s) at each of ``step_times`` (N,) s, as the live
    simulation derives them: every command goes to ``base.command`` at its own time, in order,
    and the rate at a step is ``base.wheel_rates`` of the step's time (saturation and the
    command timeout included). ``base`` is left holding the last command applied."""
    out = np.zeros((len(step_times), 2))
    k = 0
    for n, t in enumerate(np.asarray(step_times, dtype=float)):
        while k < len(commands.times) and commands.times[k] <= t + 1e-12:
            base.command(tuple(commands.twists[k]), float(commands.times[k]))
            k += 1
        out[n] = base.wheel_rates(float(t))
    return out

