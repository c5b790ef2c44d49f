"""The live twin's physics, without ROS: a model stepped in (simulated) time
under the simulated controller, following one trajectory at a time.

:class:`LiveSimulation` owns a :class:`~shadow_twin.model.mjcf.TwinModel`, its
``MjData`` and a :class:`~shadow_twin.control.controller.SimController`. Each physics step
it samples the active trajectory at ``data.time`` and sets ``ctrl`` with
:meth:`SimController.ctrl`, exactly as :class:`~shadow_twin.simulation.offline.TrajectorySimulator`
does offline, so the live motion equals the offline one (a test checks this to
1e-9 rad). The ROS node (``mujoco_bridge``) decides *when* to step (wall clock
x real-time factor) and what to publish; everything here is in simulated time.

Desired state per controlled joint:

* no trajectory: hold a position (the reset position, the end of the last
  trajectory, or where the joint was when a trajectory was cancelled), zero velocity;
* a trajectory started at sim time ``t0``: ``trajectory.sample(t - t0)`` for its
  joints (from their positions when it was set, as the JTC interpolates from
  the current state), the other joints keep their desired position;
  after the last point the last positions are held.

Physical-parameter overrides (for mock hardware that must behave differently
from the twin) are applied in place after every (re)compile, see
:class:`ParameterOverrides`.

All public methods take :attr:`LiveSimulation.lock`, so the ROS node can step
in one thread and reload, reset or read states from others.
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import mujoco
import numpy as np
import yaml

from shadow_twin.common.errors import ConfigError, TrajectoryError
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.control.scaled_time import ScaledClock, scaled_mask
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.model.mjcf import (GEOM_ATTRIBUTES, JOINT_ATTRIBUTES, ParameterTarget, TwinModel, apply_parameters,
                                    get_parameter)
from shadow_twin.simulation.mobile_base import COMMAND_TIMEOUT, BaseOdometry, SimMobileBase
from shadow_twin.simulation.trajectory_queue import (CANCELED, PREEMPTED, QUEUED, RUNNING, STOPPED, UNKNOWN,
                                                     QueuedTrajectory, TrajectoryQueue)

_SCALE = re.compile(r'^\s*[x*]\s*([-+0-9.eE]+)\s*$')
_UNCHANGED = object()
#: Prefix of an override key that globs geom names (MJCF) instead of joint names (ROS).
GEOM_PREFIX = 'geom:'
#: Longest a followed state is moved on at its velocity, s: past it the joints hold (e.g. the
#: followed robot's ``joint_states`` stopped). Five periods of a 50 Hz stream.
FOLLOW_EXTRAPOLATION = 0.1
#: Fastest a followed target moves, rad/s: the UR5's joint speed limit (pi rad/s). A followed
#: state far from the joints' (the first message, a stream that resumes after a stall) is
#: approached at this speed instead of being jumped to: a stand-in base whose 30 kg arm jumped
#: from the rest pose to the arm stand-in's start tipped over (2 benchmark runs of 7).
FOLLOW_MAX_SPEED = math.pi
#: Farthest a stamp (a base command's, a followed state's) may be ahead of the sim, s: a bridge whose
#: ticks run late lags the clock of the stamps by their lateness, so a state stamped now is of a sim
#: time still to come (and held or moved back to it); a stamp farther ahead comes from a clock that
#: does not match, and is taken as now.
MAX_STAMP_LEAD = 0.5
#: A followed state's acceleration comes from the velocities of consecutive states at least this
#: far apart (s), and is clipped to :data:`FOLLOW_MAX_ACCELERATION` (rad/s^2): a stand-in whose
#: process is not scheduled for 40 ms moves its followed arm on that long from the last state it
#: got, and without the acceleration term a swinging elbow's target was 7 mrad off when the next
#: state arrived, a jerk that made a slipping base's path diverge from its replay.
FOLLOW_MIN_INTERVAL = 0.002
FOLLOW_MAX_ACCELERATION = 50.0


# --------------------------------------------------------------------------------- overrides
@dataclass(frozen=True)
class OverrideRule:
    """One ``glob: {attribute: value}`` entry: ``pattern`` is a joint glob, or ``geom:GLOB``.

    ``value`` is absolute (SI units of the attribute: N m s/rad for damping,
    N m for frictionloss, kg m^2 for armature, N m/rad for stiffness, rad for
    springref/range; the sliding coefficient, no unit, for a geom's friction)
    unless ``scale`` is True, when it multiplies the value the compiled model has.
    """

    pattern: str
    attribute: str
    value: float
    scale: bool

    @property
    def kind(self) -> str:
        """'geom' for a ``geom:GLOB`` pattern, else 'joint'."""
        return 'geom' if self.pattern.startswith(GEOM_PREFIX) else 'joint'

    @property
    def glob(self) -> str:
        """The glob itself (``pattern`` without ``geom:``)."""
        return self.pattern[len(GEOM_PREFIX):] if self.kind == 'geom' else self.pattern

    def describe(self) -> str:
        return f'{self.pattern}.{self.attribute} {"x" if self.scale else "="}{self.value:g}'


class ParameterOverrides:
    """Physical-parameter overrides applied to a freshly compiled model.

    Form (a mapping, or the same as YAML text)::

        rh_[FMRL]FJ[123]: {damping: x3, frictionloss: x0.5}   # scale the model's value
        rh_WRJ1: {damping: 2.0}                                # absolute value
        'geom:*_wheel_contact': {friction: x0.6}               # geoms by MJCF name

    Keys are shell globs over ROS joint names (translated to MJCF names with the
    joint map), attributes those of :data:`shadow_twin.model.mjcf.JOINT_ATTRIBUTES`;
    or ``geom:GLOB``, a glob over the model's (MJCF) geom names, attributes those of
    :data:`shadow_twin.model.mjcf.GEOM_ATTRIBUTES` (``friction``: the sliding
    coefficient, ``geom_friction[:, 0]``). A value is a number (absolute) or a
    string ``'xF'`` / ``'*F'`` (multiply by F). Rules are applied in the order
    given; two rules on one element compound.

    Raises:
        ConfigError: not a mapping, an empty ``geom:`` glob, unknown attribute, or a
            value that is neither a number nor ``xF``.
    """

    def __init__(self, spec: Mapping | None = None) -> None:
        self.rules: list[OverrideRule] = []
        if spec is None:
            return
        if not isinstance(spec, Mapping):
            raise ConfigError(f'overrides must map joint (or geom:) globs to {{attribute: value}}, got {spec!r}')
        for pattern, attributes in spec.items():
            if not isinstance(attributes, Mapping) or not attributes:
                raise ConfigError(f'overrides[{pattern!r}] must be a non-empty mapping of attribute: value')
            geom = str(pattern).startswith(GEOM_PREFIX)
            if geom and not str(pattern)[len(GEOM_PREFIX):]:
                raise ConfigError(f'overrides[{pattern!r}]: empty geom glob')
            known = GEOM_ATTRIBUTES if geom else JOINT_ATTRIBUTES
            for attribute, raw in attributes.items():
                if attribute not in known:
                    raise ConfigError(f'overrides[{pattern!r}]: unknown attribute {attribute!r}; known: {known}')
                self.rules.append(OverrideRule(str(pattern), attribute, *self._value(pattern, attribute, raw)))

    @staticmethod
    def _value(pattern, attribute, raw) -> tuple[float, bool]:
        if isinstance(raw, bool):
            raise ConfigError(f'overrides[{pattern!r}].{attribute}: expected a number or "xF", got {raw!r}')
        if isinstance(raw, (int, float)):
            value, scale = float(raw), False
        else:
            match = _SCALE.match(str(raw))
            if not match:
                raise ConfigError(f'overrides[{pattern!r}].{attribute}: expected a number or "xF" '
                                  f'(scale factor), got {raw!r}')
            try:
                value, scale = float(match.group(1)), True
            except ValueError:
                raise ConfigError(f'overrides[{pattern!r}].{attribute}: bad scale {raw!r}') from None
        if not math.isfinite(value):
            raise ConfigError(f'overrides[{pattern!r}].{attribute}: value must be finite, got {raw!r}')
        return value, scale

    @classmethod
    def from_yaml_text(cls, text: str | None) -> 'ParameterOverrides':
        """Parse YAML text (empty or blank gives no overrides). Raises ConfigError."""
        if text is None or not str(text).strip():
            return cls()
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f'overrides are not valid YAML: {" ".join(str(exc).split())}') from None
        if data is None:
            return cls()
        if isinstance(data, Mapping) and 'overrides' in data and len(data) == 1:
            data = data['overrides']
        return cls(data)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def apply(self, model: mujoco.MjModel, ros_joint_names: Sequence[str],
              joint_map: JointNameMap) -> list[tuple[str, float, float]]:
        """Apply the rules in place to ``model`` (with :func:`~shadow_twin.model.mjcf.apply_parameters`,
        which recomputes the derived constants when an armature changes).

        Args:
            model: compiled model (modified in place).
            ros_joint_names: ROS names of the model's joints, to match joint globs against.
            joint_map: ROS -> MJCF names.
        Returns:
            ``(joint.attribute, old, new)`` for every value set, ``(geom:name.attribute, old, new)``
            for a geom's.
        Raises:
            ConfigError: a glob that matches no joint (or no geom).
        """
        geoms = [name for name in (model.geom(g).name for g in range(model.ngeom)) if name]
        values: dict[ParameterTarget, float] = {}
        changes = []
        for rule in self.rules:
            names = geoms if rule.kind == 'geom' else ros_joint_names
            hits = [n for n in names if fnmatch.fnmatchcase(n, rule.glob)]
            if not hits:
                raise ConfigError(f'override {rule.describe()}: no {rule.kind} matches {rule.glob!r}')
            for name in hits:
                if rule.kind == 'geom':
                    target, label = ParameterTarget('geom', name, rule.attribute), GEOM_PREFIX + name
                else:
                    target, label = ParameterTarget('joint', joint_map.to_mjcf(name), rule.attribute), name
                old = values[target] if target in values else get_parameter(model, target)
                new = old * rule.value if rule.scale else rule.value
                values[target] = new
                changes.append((f'{label}.{rule.attribute}', old, new))
        apply_parameters(model, values)
        return changes


# ----------------------------------------------------------------------------------- states
@dataclass(frozen=True)
class JointStateSample:
    """Joint state at one sim time: ROS names, positions (rad or m), velocities
    (rad/s or m/s), efforts (N m or N: actuator force on the joint)."""

    sim_time: float
    names: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


@dataclass(frozen=True)
class TrackingSample:
    """Desired and actual state of the active trajectory's joints at ``sim_time``.

    ``start_time`` and ``end_time`` are the trajectory's sim times (s);
    ``token`` identifies the trajectory (see :meth:`LiveSimulation.set_trajectory`).
    """

    sim_time: float
    token: int
    joint_names: tuple[str, ...]
    desired_position: np.ndarray
    desired_velocity: np.ndarray
    desired_acceleration: np.ndarray
    actual_position: np.ndarray
    actual_velocity: np.ndarray
    start_time: float
    end_time: float


@dataclass
class ReloadReport:
    """What :meth:`LiveSimulation.reload` did."""

    path: Path
    joints: int
    actuators: int
    kept_state: list[str] = field(default_factory=list)
    new_joints: list[str] = field(default_factory=list)
    dropped_joints: list[str] = field(default_factory=list)
    overrides: list[tuple[str, float, float]] = field(default_factory=list)
    trajectory_kept: bool | None = None

    def summary(self) -> str:
        """One line for the log / the service answer."""
        parts = [f'reloaded {self.path}: {self.joints} joints, {self.actuators} actuators',
                 f'state kept for {len(self.kept_state)} joints by name']
        if self.new_joints:
            parts.append(f'new joints start at their reset position: {self.new_joints}')
        if self.dropped_joints:
            parts.append(f'joints no longer in the model: {self.dropped_joints}')
        if self.overrides:
            parts.append(f'{len(self.overrides)} parameter overrides applied')
        if self.trajectory_kept is not None:
            parts.append('active trajectory continues' if self.trajectory_kept
                         else 'active trajectory dropped (its joints changed); holding position')
        return '; '.join(parts)


@dataclass(frozen=True)
class PreparedReload:
    """A model built by :meth:`LiveSimulation.prepare_reload`, not yet swapped in."""

    twin: TwinModel
    controller: SimController
    applied: list
    overrides: ParameterOverrides
    gains_source: object


@dataclass(frozen=True)
class _Followed:
    """The state :meth:`LiveSimulation.follow` tracks: (K,) controller columns, positions (rad),
    velocities (rad/s), accelerations (rad/s^2), and the sim time it is of (s)."""

    columns: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray
    accelerations: np.ndarray
    since: float

    def at(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(N, K) positions and velocities moved on (or back) to sim ``times`` (N,), s, at most
        :data:`FOLLOW_EXTRAPOLATION` s from ``since``."""
        ahead = np.clip(np.asarray(times, dtype=float) - self.since, -FOLLOW_EXTRAPOLATION,
                        FOLLOW_EXTRAPOLATION)[:, None]
        return (self.positions + (self.velocities + 0.5 * self.accelerations * ahead) * ahead,
                self.velocities + self.accelerations * ahead)


@dataclass
class _ActiveTrajectory:
    trajectory: JointTrajectory   # with the start state prepended
    columns: np.ndarray           # its joints' indices in controller.joint_names
    token: int
    scaled: np.ndarray            # (J,) bool: its joints whose time runs at the speed scaling
    clock: ScaledClock            # its start (sim time of its t = 0, s) and the scaled joints' lag

    @property
    def start(self) -> float:
        return self.clock.start

    @property
    def end(self) -> float:
        """Sim time of its end as far as the scaled joints' lag is integrated (``step``), s."""
        return self.start + self.trajectory.duration + (self.clock.lag if self.scaled.any() else 0.0)


def _model_joints(model: mujoco.MjModel) -> list[tuple[int, str]]:
    """(id, MJCF name) of the named hinge and slide joints, model order."""
    kinds = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    return [(j, model.joint(j).name) for j in range(model.njnt)
            if model.joint(j).name and int(model.jnt_type[j]) in kinds]


def _carry_free_joints(old_model: mujoco.MjModel, old_data: mujoco.MjData,
                       model: mujoco.MjModel, data: mujoco.MjData) -> None:
    """Copy the pose and velocity of free joints present (by name) in both models (a mobile
    base keeps its place across a reload)."""
    free = int(mujoco.mjtJoint.mjJNT_FREE)
    for j in range(model.njnt):
        name = model.joint(j).name
        old = mujoco.mj_name2id(old_model, mujoco.mjtObj.mjOBJ_JOINT, name) if name else -1
        if int(model.jnt_type[j]) != free or old < 0 or int(old_model.jnt_type[old]) != free:
            continue
        q, q_old = model.jnt_qposadr[j], old_model.jnt_qposadr[old]
        v, v_old = model.jnt_dofadr[j], old_model.jnt_dofadr[old]
        data.qpos[q:q + 7] = old_data.qpos[q_old:q_old + 7]
        data.qvel[v:v + 6] = old_data.qvel[v_old:v_old + 6]


# ------------------------------------------------------------------------------ simulation
class LiveSimulation:
    """A model stepped live under the simulated controller.

    Args:
        model_path: MJCF file; None for the built-in Shadow Hand E.
        gains: controller gains, or a YAML path (re-read on :meth:`reload`),
            or None for the defaults (p 4.0, d 0.1).
        joint_map: ROS <-> MJCF joint names (identity by default).
        overrides: physical-parameter overrides (:class:`ParameterOverrides`,
            a mapping, or None).
        interpolation: trajectory sampling, see :meth:`JointTrajectory.sample`.
        base_command_timeout: a base velocity command lapses after this many s of sim time
            (models with a mobile base; see :meth:`command_base`).
    Raises:
        ModelError: the model is missing or does not compile (MuJoCo's text).
        ConfigError: bad gains, joint map or overrides.
    """

    def __init__(self, model_path: str | os.PathLike | None = None,
                 gains: ControllerGains | str | os.PathLike | None = None,
                 joint_map: JointNameMap | None = None,
                 overrides: ParameterOverrides | Mapping | None = None,
                 interpolation: str = 'auto', base_command_timeout: float = COMMAND_TIMEOUT) -> None:
        self.lock = threading.RLock()
        self.base_command_timeout = float(base_command_timeout)
        self.joint_map = joint_map or JointNameMap()
        self.overrides = overrides if isinstance(overrides, ParameterOverrides) else ParameterOverrides(overrides)
        self.interpolation = interpolation
        self._gains_source = gains
        #: When True, :meth:`step` and :meth:`step_to` do nothing.
        self.paused = False
        #: Speed scaling (fraction, 0..1) of the joints matching ``speed_scaled_joints`` (globs):
        #: their trajectory time runs this fast (:meth:`set_speed_scaling`).
        self.speed_scaling = 1.0
        self.speed_scaled_joints: tuple[str, ...] = ()
        self._active: _ActiveTrajectory | None = None
        self._finished: _ActiveTrajectory | None = None
        self._followed: _Followed | None = None
        self._queue = TrajectoryQueue()
        self._token = 0
        self.twin, self.controller, self.applied_overrides = self._build(model_path, self.overrides, gains)
        self.data = mujoco.MjData(self.model)
        self._index()
        self._reset_state(keep_time=False)

    # -- construction -------------------------------------------------------------------------
    @staticmethod
    def _gains(source) -> ControllerGains:
        if source is None or isinstance(source, ControllerGains):
            return source or ControllerGains()
        return ControllerGains.from_yaml(source)

    def _build(self, path, overrides: ParameterOverrides, gains_source,
               max_bytes: int | None = None) -> tuple[TwinModel, SimController, list]:
        """Compile ``path`` and build its controller and overrides; touches no state of ``self``."""
        twin = TwinModel(path, max_bytes)
        controller = SimController(twin.model, self._gains(gains_source), self.joint_map)
        names = [self.joint_map.to_ros(name) for _, name in _model_joints(twin.model)]
        applied = overrides.apply(twin.model, names, self.joint_map)
        return twin, controller, applied

    def _index(self) -> None:
        """Rebuild every name -> index map from the current model and controller."""
        joints = _model_joints(self.model)
        #: ROS names of the published joints (named hinge/slide joints, model order).
        self.joint_names: tuple[str, ...] = tuple(self.joint_map.to_ros(n) for _, n in joints)
        self._state_qpos = np.array([self.model.jnt_qposadr[j] for j, _ in joints], dtype=int)
        self._state_dof = np.array([self.model.jnt_dofadr[j] for j, _ in joints], dtype=int)
        previous = getattr(self, 'base', None)
        #: The model's mobile base (velocity commands, odometry), None when it has none.
        self.base: SimMobileBase | None = SimMobileBase.find(self.model, command_timeout=self.base_command_timeout)
        if previous is not None and self.base is not None:   # a reload keeps the command in force
            self.base.keep_command_of(previous)
        wheels = [self.joint_map.to_ros(n) for n in self.base.wheel_names] if self.base is not None else []
        #: Columns of the controller's joints (its order), wheels included.
        self._controlled_index = {name: k for k, name in enumerate(self.controller.joint_names)}
        #: ROS names of the joints trajectories drive (the controller's joints except the
        #: base's drive wheels, which follow :meth:`command_base`).
        self.controlled_joints: tuple[str, ...] = tuple(n for n in self.controller.joint_names if n not in wheels)
        #: Columns of the (left, right) drive wheels.
        self._wheel_columns = np.array([self._controlled_index[n] for n in wheels], dtype=int)
        self.dt = float(self.model.opt.timestep)

    # -- properties ----------------------------------------------------------------------------
    @property
    def model(self) -> mujoco.MjModel:
        """The compiled model (converted by the controller, overrides applied)."""
        return self.twin.model

    @property
    def path(self) -> Path:
        """The MJCF file the model was compiled from."""
        return self.twin.path

    @property
    def time(self) -> float:
        """Current sim time, s."""
        return float(self.data.time)

    @property
    def trajectory_active(self) -> bool:
        """True while a trajectory is set and its last point is not reached."""
        with self.lock:
            return self._active is not None

    # -- desired state -------------------------------------------------------------------------
    def _hold_positions(self) -> np.ndarray:
        return self.data.qpos[self.controller.qpos_adr].copy()

    def _desired(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(N, J) desired positions and velocities of the controlled joints at sim ``times``."""
        q = np.repeat(self._hold[None], len(times), axis=0)
        qd = np.zeros_like(q)
        followed = self._followed
        if followed is not None:
            q[:, followed.columns], qd[:, followed.columns] = followed.at(times)
        active = self._active
        if active is not None:
            pos, vel, _ = self._sample(active, times)
            q[:, active.columns] = pos
            qd[:, active.columns] = vel
        return q, qd

    def _sample(self, active: _ActiveTrajectory, times) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Desired (N, J) positions, velocities, accelerations of ``active``'s joints at sim
        ``times``; its speed-scaled joints at their own, lagging trajectory time, with velocity
        and acceleration scaled as the scaled JTC commands them."""
        times = np.atleast_1d(np.asarray(times, dtype=float))
        rel = self._relative(times, active.start)
        pos, vel, acc = active.trajectory.sample(rel, self.interpolation)
        if active.scaled.any():
            s = self.speed_scaling
            slow = active.trajectory.sample(rel - active.clock.lags(times, s), self.interpolation)
            pos[:, active.scaled] = slow[0][:, active.scaled]
            vel[:, active.scaled] = s * slow[1][:, active.scaled]
            acc[:, active.scaled] = s * s * slow[2][:, active.scaled]
        return pos, vel, acc

    def _stamp_time(self, stamp: float | None) -> float:
        """The sim time (s) a stamp (sim time, s) stands for: the stamp itself, up to
        :data:`MAX_STAMP_LEAD` s ahead of now; now for None or a stamp farther ahead (a clock that
        does not match the sim's). Call with the lock held."""
        now = float(self.data.time)
        return now if stamp is None or not float(stamp) <= now + MAX_STAMP_LEAD else float(stamp)

    def follow(self, positions: Mapping[str, float], velocities: Mapping[str, float] | None = None,
               at: float | None = None) -> list[str]:
        """Let the controlled joints named in ``positions`` ({ROS joint: rad}) track another robot's
        state from now on: their desired position is the given one, moved on at ``velocities``
        ({joint: rad/s}, default 0; accelerating as they changed since the previous state) for at
        most :data:`FOLLOW_EXTRAPOLATION` s from ``at``, the sim time the state is of (its stamp,
        see :meth:`_stamp_time`), until the next call: a state that arrives late is extrapolated
        to now, one of a sim time still to come (the sim lagging the stamps' clock) back to it, so
        the joints neither lag nor lead by the delay.
        The target moves at most :data:`FOLLOW_MAX_SPEED` from where it was (for the first call:
        where the joints are held), so a state far away is approached, not jumped to.
        A trajectory on the same joints takes precedence while it runs. E.g. a stand-in MiR250
        whose arm mirrors the UR5 stand-in's ``joint_states``, so that its base feels the arm
        move as the real cell's does. Names the model does not drive are ignored; returns those
        followed. The following ends with a reset or a reload."""
        with self.lock:
            names = [n for n in positions if n in self.controlled_joints]
            if not names:
                return []
            columns = np.array([self._controlled_index[n] for n in names], dtype=int)
            rates = velocities or {}
            at = self._stamp_time(at)
            previous = self._followed
            given = np.clip(np.array([float(rates.get(n, 0.0)) for n in names]), -FOLLOW_MAX_SPEED, FOLLOW_MAX_SPEED)
            acceleration = np.zeros(len(names))
            if previous is not None and np.array_equal(previous.columns, columns):
                elapsed = max(0.0, at - previous.since)
                start = previous.at(np.array([at]))[0][0]
                if FOLLOW_MIN_INTERVAL <= elapsed <= FOLLOW_EXTRAPOLATION:   # from consecutive states
                    acceleration = np.clip((given - previous.velocities) / elapsed, -FOLLOW_MAX_ACCELERATION,
                                           FOLLOW_MAX_ACCELERATION)
            else:
                elapsed, start = 0.0, self._hold[columns].copy()
            step = FOLLOW_MAX_SPEED * elapsed
            target = start + np.clip(np.array([float(positions[n]) for n in names]) - start, -step, step)
            self._followed = _Followed(columns, target, given, acceleration, at)
            return names

    def set_speed_scaling(self, scaling: float, joints: Sequence[str] | None = None) -> None:
        """Run the trajectory time of joints matching ``joints`` (ROS-name globs; None keeps the
        current ones) at ``scaling`` (fraction 0..1, e.g. the UR's speed slider / 100) from now on,
        as ur_robot_driver's scaled joint trajectory controller does. Raises ConfigError outside 0..1."""
        if not 0.0 <= scaling <= 1.0:
            raise ConfigError(f'speed scaling must be within 0..1, got {scaling}')
        with self.lock:
            active = self._active
            if active is not None:          # the lag so far is integrated at the old scaling
                active.clock.set_scaling(float(self.data.time), scaling)
            self.speed_scaling = float(scaling)
            if joints is not None:
                self.speed_scaled_joints = tuple(joints)

    def _scaled_mask(self, joints: Sequence[str]) -> np.ndarray:
        return scaled_mask(joints, self.speed_scaled_joints)

    def _relative(self, times, start: float):
        """``times - start`` (s), snapped onto the step grid ``k * dt`` when within
        1e-4 steps of it. ``data.time`` accumulates ``dt`` with rounding noise
        (~1e-16 s per step); snapping makes a knot at ``k * dt`` fall on the same
        side as in the offline simulator, which samples at exact ``k * dt``
        (at a knot the velocity of a linear segment is discontinuous)."""
        rel = np.asarray(times, dtype=float) - start
        grid = np.round(rel / self.dt) * self.dt
        return np.where(np.abs(rel - grid) < 1e-4 * self.dt, grid, rel)

    def _retire_if_finished(self) -> None:
        """After the last point: hold the last positions and forget the trajectory."""
        active = self._active
        if active is not None and self._relative(self.data.time, active.start) > active.end - active.start:
            self._hold[active.columns] = active.trajectory.positions[-1]
            self._finished, self._active = active, None

    # -- stepping ---------------------------------------------------------------------------
    def step(self, n: int = 1) -> int:
        """Advance ``n`` physics steps (``n * dt`` s of sim time) unless paused.

        Desired states for the steps are sampled at the times ``data.time``
        will have at each step (accumulated as MuJoCo does) and converted to
        ``ctrl`` in one vectorised call per batch; a batch ends where a queued
        trajectory starts (:meth:`set_trajectory`), which then takes over. Returns
        the number of steps taken.
        """
        n = int(n)
        with self.lock:
            if self.paused or n <= 0:
                return 0
            done = 0
            while done < n:
                self._start_due()
                batch = n - done
                upcoming = self._queue.next_start()
                if upcoming is not None:
                    batch = min(batch, max(1, self.steps_until(upcoming)))
                self._step_batch(batch)
                done += batch
            self._start_due()
            return n

    def _step_batch(self, n: int) -> None:
        """``n`` physics steps on one vectorised desired state (lock held)."""
        times = np.empty(n)
        t = self.data.time
        for k in range(n):
            times[k] = t
            t += self.model.opt.timestep
        q, qd = self._desired(times)
        if self.base is not None:   # the drive wheels follow the base's velocity command
            qd[:, self._wheel_columns] = [self.base.wheel_rates(t) for t in times]
        ctrl = self.controller.ctrl(self.model, q, qd)
        model, data = self.model, self.data
        for k in range(n):
            data.ctrl[:] = ctrl[k]
            mujoco.mj_step(model, data)
        active = self._active
        if active is not None and active.scaled.any():
            active.clock.advance(float(times[-1] + self.dt))
        self._retire_if_finished()

    def steps_until(self, sim_time: float) -> int:
        """Number of whole steps from now to ``sim_time`` (s); 0 if it is not ahead."""
        with self.lock:
            return max(0, int(math.floor((sim_time - self.data.time) / self.dt + 1e-6)))

    def step_to(self, sim_time: float, max_steps: int | None = None) -> int:
        """Step until ``data.time`` is within one step below ``sim_time`` (s).

        Args:
            sim_time: target sim time, s.
            max_steps: at most this many steps (catch-up cap); None for no cap.
        Returns:
            Steps taken (0 when paused or already there).
        """
        with self.lock:
            n = self.steps_until(sim_time)
            if max_steps is not None:
                n = min(n, int(max_steps))
            return self.step(n)

    # -- trajectories ---------------------------------------------------------------------
    def reserve_token(self) -> int:
        """A token for a trajectory to be set later (:meth:`set_trajectory`'s ``token``): its place
        in the order of trajectories is now, e.g. when its goal is accepted."""
        with self.lock:
            self._token += 1
            return self._token

    def set_trajectory(self, trajectory: JointTrajectory, start_time: float | None = None,
                       token: int | None = None) -> int:
        """Follow ``trajectory`` from sim time ``start_time`` (None: now).

        The current positions of its joints are prepended as the point at
        t = 0 (``with_start``), so the motion starts where the joints are.
        Joints it does not name keep their current desired position. A
        ``start_time`` in the past (a stamped goal that arrived late) is joined
        mid-way, as the JTC does: the current positions are the point at now, and
        the motion runs on the goal's own clock, so that its timing does not depend
        on when it was delivered.

        A ``start_time`` ahead is queued (``shadow_twin.simulation.trajectory_queue``):
        whatever runs goes on until then, and at its start the trajectory preempts
        every trajectory set before it, from the joints' positions then (when nothing
        runs, its joints hold from now where they are and it starts from there); :meth:`cancel` with its token before then
        leaves the running one untouched. Otherwise it preempts at once. ``token``
        (from :meth:`reserve_token`) places it in the order where it was reserved: a
        trajectory whose token is older than the running one's is preempted at once.

        Returns:
            A token identifying this trajectory (see :class:`TrackingSample`,
            :meth:`trajectory_state`); tokens increase with each call.
        Raises:
            TrajectoryError: a joint the controller does not drive.
        """
        with self.lock:
            self._check_driven(trajectory)
            now = float(self.data.time)
            start = now if start_time is None else float(start_time)
            if token is None:
                token = self.reserve_token()
            current = self._active or self._finished
            if current is not None and current.token > token:
                self._queue.end(token, PREEMPTED)          # a newer one runs already
            elif start > now + 0.5 * self.dt:
                held = None
                if self._active is None:
                    # nothing runs: its joints hold where they are now and start from there (the
                    # JTC's state at arrival), as a trajectory set ahead always did
                    held = self._actual(trajectory)
                    self._hold[[self._controlled_index[j] for j in trajectory.joint_names]] = held
                self._queue.add(QueuedTrajectory(token, trajectory, start, held))
            else:
                self._install(trajectory, start, token)
            return token

    def _check_driven(self, trajectory: JointTrajectory) -> None:
        unknown = [j for j in trajectory.joint_names if j not in self.controlled_joints]
        if unknown:
            raise TrajectoryError(f'trajectory joint(s) {unknown} are not driven by the model '
                                  f'(driven: {list(self.controlled_joints)})')

    def _actual(self, trajectory: JointTrajectory) -> np.ndarray:
        """(J,) current positions of ``trajectory``'s joints, rad (lock held)."""
        columns = np.array([self._controlled_index[j] for j in trajectory.joint_names], dtype=int)
        return self.data.qpos[self.controller.qpos_adr[columns]].copy()

    def _install(self, trajectory: JointTrajectory, start: float, token: int,
                 held_from: np.ndarray | None = None) -> None:
        """Make ``trajectory`` (started at sim time ``start``, s) the running one; it preempts
        the running one and those queued before it (lock held). It starts from the joints'
        current positions, or from ``held_from`` ((J,) rad, where they were when it was queued)
        when no trajectory ran meanwhile."""
        now = float(self.data.time)
        q_now, _ = self._desired(np.array([now]))
        self._hold = q_now[0]
        columns = np.array([self._controlled_index[j] for j in trajectory.joint_names], dtype=int)
        current = self._actual(trajectory) if held_from is None or self._active is not None else held_from
        for previous in (self._active, self._finished):
            if previous is not None:
                self._queue.end(previous.token, PREEMPTED)
        self._queue.preempt_before(token)
        self._active = _ActiveTrajectory(trajectory.with_start(current, at=now - start), columns, token,
                                         self._scaled_mask(trajectory.joint_names),
                                         ScaledClock(start, self.speed_scaling, since=now))
        self._finished = None

    def _start_due(self) -> None:
        """Start the queued trajectory whose start has come (within half a step; lock held)."""
        entry = self._queue.take_due(float(self.data.time) + 0.5 * self.dt)
        if entry is None:
            return
        try:
            self._check_driven(entry.trajectory)
        except TrajectoryError:           # a reload in between dropped its joints
            self._queue.end(entry.token, STOPPED)
            return
        self._install(entry.trajectory, entry.start, entry.token, entry.payload)

    def cancel(self, token: int | None = None) -> None:
        """Stop trajectory ``token`` (None: every trajectory, queued ones too): a queued one
        never starts; a running one stops and every joint holds its current position. A token
        that has ended already changes nothing."""
        with self.lock:
            if token is None:
                self._queue.clear(CANCELED)
            elif self._queue.drop(token, CANCELED):
                return
            current = self._active or self._finished
            if token is not None and (current is None or current.token != token):
                return
            if current is not None:
                self._queue.end(current.token, CANCELED)
            self._active = self._finished = None
            self._hold = self._hold_positions()

    def trajectory_state(self, token: int) -> str:
        """Where trajectory ``token`` stands: ``queued``, ``running`` (running, or finished and
        holding its end), ``preempted`` (by a trajectory set after it), ``canceled``,
        ``stopped`` (reset, reload) or ``unknown``."""
        with self.lock:
            if self._queue.get(token) is not None:
                return QUEUED
            current = self._active or self._finished
            if current is not None and current.token == token:
                return RUNNING
            return self._queue.ended_why(token) or UNKNOWN

    def tracking(self, token: int | None = None) -> TrackingSample | None:
        """Desired/actual state of the active (or just finished) trajectory.

        Args:
            token: only report the trajectory with this token (None: any).
        Returns:
            The sample at the current sim time (of a queued ``token``: its joints' desired state is
            what they follow now), or None when there is no such trajectory (never set, cancelled,
            replaced, reset or dropped by a reload: :meth:`trajectory_state` says which).
        """
        with self.lock:
            t = float(self.data.time)
            queued = None if token is None else self._queue.get(token)
            if queued is not None:
                return self._queued_sample(queued, t)
            current = self._active or self._finished
            if current is None or (token is not None and current.token != token):
                return None
            pos, vel, acc = (a[0] for a in self._sample(current, t))
            adr = self.controller.qpos_adr[current.columns]
            dof = self.controller.dof_adr[current.columns]
            return TrackingSample(t, current.token, tuple(current.trajectory.joint_names), pos, vel, acc,
                                  self.data.qpos[adr].copy(), self.data.qvel[dof].copy(),
                                  current.start, current.end)

    def _queued_sample(self, queued: QueuedTrajectory, t: float) -> TrackingSample:
        """A queued trajectory's sample: its joints' desired state is what they follow now."""
        names = tuple(queued.trajectory.joint_names)
        columns = np.array([self._controlled_index[j] for j in names], dtype=int)
        q, qd = self._desired(np.array([t]))
        return TrackingSample(t, queued.token, names, q[0, columns], qd[0, columns], np.zeros(len(names)),
                              self.data.qpos[self.controller.qpos_adr[columns]].copy(),
                              self.data.qvel[self.controller.dof_adr[columns]].copy(),
                              queued.start, queued.start + queued.trajectory.duration)

    # -- mobile base ------------------------------------------------------------------------
    def command_base(self, v: float, omega: float, sent: float | None = None) -> tuple[float, float]:
        """Velocity command for the base: forward ``v`` (m/s), yaw rate ``omega`` (rad/s), sent
        at sim time ``sent`` (s; its stamp, see :meth:`_stamp_time`). It takes effect the base's
        command latency after it was sent, or now if that has passed (on arrival for a model
        without latency), and lapses ``base.command_timeout`` s of sim time later.
        Returns the command as applied (saturated). Raises ConfigError when the model has no base."""
        with self.lock:
            if self.base is None:
                raise ConfigError(f'{self.path.name} has no mobile base (no drive wheel joints)')
            now = float(self.data.time)
            sent = self._stamp_time(sent)
            if not self.base.command_latency:       # without latency a command takes effect when it arrives
                sent = min(sent, now)
            return tuple(self.base.command((v, omega), sent, received=now))

    def place_base(self, x: float, y: float, yaw: float) -> None:
        """Put the base at (``x`` m, ``y`` m, ``yaw`` rad) in its odometry frame (the world), at
        rest and without a command (re-anchoring the sim base to the real one). Raises ConfigError
        when the model has no base, ValueError for a value that is not finite."""
        if not all(math.isfinite(float(v)) for v in (x, y, yaw)):
            raise ValueError(f'base pose ({x}, {y}, {yaw}) is not finite')
        with self.lock:
            if self.base is None:
                raise ConfigError(f'{self.path.name} has no mobile base (no drive wheel joints)')
            self.base.place(self.data, x, y, yaw)
            mujoco.mj_forward(self.model, self.data)

    def stop_base(self) -> None:
        """Drop the base's velocity command in force and those held back (the wheels stop);
        nothing without a base."""
        with self.lock:
            if self.base is not None:
                self.base.stop()

    def set_base_command_timeout(self, seconds: float) -> None:
        """From now on a base velocity command lapses after ``seconds`` s of sim time."""
        with self.lock:
            self.base_command_timeout = float(seconds)
            if self.base is not None:
                self.base.command_timeout = self.base_command_timeout

    def base_odometry(self) -> BaseOdometry | None:
        """The base's pose and twist now (see ``SimMobileBase.odometry``); None without a base."""
        with self.lock:
            return None if self.base is None else self.base.odometry(self.data)

    # -- state ------------------------------------------------------------------------------
    def joint_state(self) -> JointStateSample:
        """Positions, velocities and efforts of :attr:`joint_names` at the current sim time."""
        with self.lock:
            d = self.data
            return JointStateSample(float(d.time), self.joint_names, d.qpos[self._state_qpos].copy(),
                                    d.qvel[self._state_dof].copy(), d.qfrc_actuator[self._state_dof].copy())

    def positions(self, names: Sequence[str]) -> np.ndarray:
        """Current positions of ROS joints ``names`` (rad). KeyError for unknown names."""
        with self.lock:
            index = {n: k for k, n in enumerate(self.joint_names)}
            return self.data.qpos[self._state_qpos[[index[n] for n in names]]].copy()

    def set_positions(self, positions: Mapping[str, float]) -> None:
        """Place joints (ROS names -> rad) at rest and hold them there; clears the trajectory.

        Values are clipped to limited joints' ranges. Raises KeyError for an unknown joint.
        """
        with self.lock:
            index = {n: k for k, n in enumerate(self.joint_names)}
            for name, value in positions.items():
                jid = self._joint_id(name)
                lo, hi = self.model.jnt_range[jid]
                value = float(np.clip(value, lo, hi)) if self.model.jnt_limited[jid] else float(value)
                self.data.qpos[self._state_qpos[index[name]]] = value
                self.data.qvel[self._state_dof[index[name]]] = 0.0
            mujoco.mj_forward(self.model, self.data)
            self.cancel()

    def _joint_id(self, ros_name: str) -> int:
        jid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, self.joint_map.to_mjcf(ros_name))
        if jid < 0:
            raise KeyError(ros_name)
        return jid

    def joint_limits(self) -> dict[str, tuple[float, float] | None]:
        """{ROS joint: (lower, upper)} of the controlled joints; None when unlimited."""
        with self.lock:
            out = {}
            for name, jid in zip(self.controller.joint_names, self.controller.joint_ids):
                if name in self.controlled_joints:
                    out[name] = (tuple(float(v) for v in self.model.jnt_range[jid])
                                 if self.model.jnt_limited[jid] else None)
            return out

    # -- reset and reload ----------------------------------------------------------------------
    def _reset_state(self, keep_time: bool) -> None:
        time = float(self.data.time)
        if self.model.nkey > 0:
            mujoco.mj_resetDataKeyframe(self.model, self.data, 0)
        else:
            mujoco.mj_resetData(self.model, self.data)
        if keep_time:
            self.data.time = time
        mujoco.mj_forward(self.model, self.data)
        for current in (self._active, self._finished):
            if current is not None:
                self._queue.end(current.token, STOPPED)
        self._queue.clear(STOPPED)
        self._active = self._finished = self._followed = None
        self._hold = self._hold_positions()

    def reset(self) -> None:
        """Back to keyframe 0 if the model has one, else ``qpos0``, at rest; no trajectory.

        Sim time keeps running (it is not set back to 0), so clocks and stamps
        derived from it stay monotonic.
        """
        with self.lock:
            self._reset_state(keep_time=True)

    def reload(self, path: str | os.PathLike | None = None,
               overrides: ParameterOverrides | Mapping | None | object = _UNCHANGED,
               gains: ControllerGains | str | os.PathLike | None | object = _UNCHANGED) -> ReloadReport:
        """Recompile the MJCF (re-read from disk) and carry the state over by joint name:
        :meth:`prepare_reload` then :meth:`apply_reload`.

        Positions and velocities of joints present in both models are copied by
        name; the controller (gains re-read when given as a file), every
        name -> index map and the overrides are rebuilt. Sim time continues.
        The active trajectory continues if the new controller drives all its
        joints, else every joint holds its position.

        Args:
            path: MJCF file; None recompiles the current file.
            overrides: new overrides; omitted keeps the current ones.
            gains: new gains (object or YAML path); omitted keeps the current
                source (a file is re-read).
        Returns:
            A :class:`ReloadReport`.
        Raises:
            ModelError: the new model is missing or does not compile (MuJoCo's
                text); ConfigError: bad gains or overrides. In both cases the
                old model keeps running untouched.
        """
        return self.apply_reload(self.prepare_reload(path, overrides, gains))

    def prepare_reload(self, path: str | os.PathLike | None = None,
                       overrides: ParameterOverrides | Mapping | None | object = _UNCHANGED,
                       gains: ControllerGains | str | os.PathLike | None | object = _UNCHANGED,
                       max_bytes: int | None = None) -> PreparedReload:
        """Build the model a reload would swap in, without the lock and without touching
        the running simulation (stepping goes on meanwhile; safe from another thread).

        Args: as :meth:`reload`; ``max_bytes`` refuses an MJCF whose files (with its
        includes) hold more bytes, before parsing (None: no limit).
        Raises: as :meth:`reload` (ModelError also for a model over ``max_bytes``).
        """
        overrides = (self.overrides if overrides is _UNCHANGED else
                     overrides if isinstance(overrides, ParameterOverrides) else ParameterOverrides(overrides))
        gains = self._gains_source if gains is _UNCHANGED else gains
        twin, controller, applied = self._build(path if path is not None else self.path, overrides, gains,
                                                max_bytes)
        return PreparedReload(twin, controller, applied, overrides, gains)

    def apply_reload(self, prepared: PreparedReload) -> ReloadReport:
        """Swap in a model built by :meth:`prepare_reload` (under the lock; milliseconds):
        state carried over by joint name as described in :meth:`reload`."""
        twin, controller, applied = prepared.twin, prepared.controller, prepared.applied
        with self.lock:
            old_model, old_data = self.model, self.data
            old_joints = {name: jid for jid, name in _model_joints(old_model)}
            old_hold = dict(zip(self.controller.joint_names, self._hold))
            data = mujoco.MjData(twin.model)
            if twin.model.nkey > 0:
                mujoco.mj_resetDataKeyframe(twin.model, data, 0)
            new_names = [name for _, name in _model_joints(twin.model)]
            kept = []
            for jid, name in _model_joints(twin.model):
                old = old_joints.get(name)
                if old is None or old_model.jnt_type[old] != twin.model.jnt_type[jid]:
                    continue
                data.qpos[twin.model.jnt_qposadr[jid]] = old_data.qpos[old_model.jnt_qposadr[old]]
                data.qvel[twin.model.jnt_dofadr[jid]] = old_data.qvel[old_model.jnt_dofadr[old]]
                kept.append(self.joint_map.to_ros(name))
            _carry_free_joints(old_model, old_data, twin.model, data)
            data.time = old_data.time
            mujoco.mj_forward(twin.model, data)

            report = ReloadReport(
                twin.path, len(new_names), twin.model.nu, kept,
                [self.joint_map.to_ros(n) for n in new_names if n not in old_joints],
                [self.joint_map.to_ros(n) for n in old_joints if n not in new_names], applied)
            active = self._active or self._finished
            self.twin, self.controller, self.applied_overrides, self.data = twin, controller, applied, data
            self.overrides, self._gains_source = prepared.overrides, prepared.gains_source
            self._index()
            self._followed = None                  # its columns are the old model's
            self._hold = self._hold_positions()
            for k, name in enumerate(self.controller.joint_names):
                if name in old_hold:
                    self._hold[k] = old_hold[name]
            if active is not None:
                if all(j in self._controlled_index for j in active.trajectory.joint_names):
                    active.columns = np.array([self._controlled_index[j]
                                               for j in active.trajectory.joint_names], dtype=int)
                    report.trajectory_kept = True
                else:
                    self._queue.end(active.token, STOPPED)
                    self._active = self._finished = None
                    self._hold = self._hold_positions()
                    report.trajectory_kept = False
            return report
