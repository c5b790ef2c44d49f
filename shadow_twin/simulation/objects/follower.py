"""Objects that follow the real world: :class:`ObjectFollower` moves each followed object's mocap target
(:mod:`.weld`) to where its pose source (:mod:`.gate`, :mod:`.track`) says the object is, and switches
its weld on and off. Call :meth:`ObjectFollower.update` before each physics step (or each batch of
steps, with the batch's middle time), under the simulation's lock.

Per object, at sim time ``t``:

* **silent source** (no accepted sample within the gate's ``timeout``, or none yet): the weld is off
  (``data.eq_active``), the object moves under physics alone (it falls, rests, is carried by the hand)
  and its target is parked on it;
* **live source**: the weld is on and the target is the *desired pose* put ahead by the weld's leads
  (:func:`~.weld.leads`) times the desired velocity and acceleration: MuJoCo's reference acceleration
  of the weld is then the desired acceleration while the object moves as desired, so the weld
  neither drags nor pushes an object that the hand carries as the source says, nor one resting on
  the table, and only what differs is pulled back (with the weld's time constant). On a **leash**:
  the target is at most ``max_push / K`` (m) and ``max_angular_push / K`` (rad) from the object's own
  pose put ahead by the velocity lead times its own velocity, ``K`` the weld's
  :func:`~.weld.push_stiffness`. The weld's ``aref`` is ``k`` times that offset, so an object something
  holds back (a table, a finger) is pushed with at most ``max_push`` (m/s^2) times its mass and
  ``max_angular_push`` (rad/s^2) times its inertia: contacts win, the object is not pushed through
  them (:mod:`.weld` gives the figures);
* **the desired pose** is the source's, moved on to ``t`` (:meth:`PoseTrack.at`) plus a *join*: when
  the weld engages (the source's first sample, its first after a silence, a reload) the object is
  wherever physics left it; the join starts the desired pose there and takes the gap to 0 along a
  minimum-jerk profile (Flash and Hogan, 1985: the fraction left is ``1 - 10 u^3 + 15 u^4 - 6 u^5``
  at ``u = elapsed / T``), whose speed and acceleration start and end at 0 and peak at ``1.875 gap /
  T`` and ``5.77 gap / T^2`` (10 / sqrt(3)); ``T`` is the shortest that keeps them within
  ``join_speed`` and ``join_acceleration`` (and their angular twins), at least :data:`JOIN_MIN_TIME`.
  The target never jumps, and the object is walked, not flung, to where the source says.

Cost (medians on a shared 2-core machine): an update about 35 us per followed object, some 0.6 of one
``mj_step`` of the cell (hand, UR5, MiR250); a sample offered about 160 us (the track's fit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import mujoco
import numpy as np

from shadow_twin.common.errors import ConfigError, ModelError
from shadow_twin.model.scene import free_joint_name
from shadow_twin.simulation.objects.gate import GateLimits, PoseGate, Verdict
from shadow_twin.simulation.objects.poses import pose_error, relative_rotvec, rotate
from shadow_twin.simulation.objects.track import MAX_EXTRAPOLATION, Motion, PoseTrack
from shadow_twin.simulation.objects.weld import follow_name, followed_objects, leads, push_stiffness, target_name

#: m/s^2: the most the weld pushes an object that something holds back, per kg (module doc): twice g,
#: so that it holds a free object against gravity with g to spare (at 10 m/s^2 a free box followed
#: from a moving source fell 0.23 m behind it), while a box it presses onto a table presses with
#: three times its weight (g + 20 m/s^2), 0.30 mm deep (:mod:`.weld`). With the weld's K of 20,000
#: /s^2 the leash is 1 mm.
MAX_PUSH = 20.0
#: rad/s^2: the same for turning, per kg m^2: a leash of 0.05 rad with the weld's K. A can (0.35 kg,
#: 33 mm radius: 1.9e-4 kg m^2 about its axis) held from turning is twisted with at most 0.19 N m.
MAX_ANGULAR_PUSH = 1000.0
#: The join (module doc): m/s and m/s^2, rad/s and rad/s^2, and its shortest time, s. A quarter of g (a
#: tenth of the leash's push), so that the weld follows the join within its leash whatever gravity
#: takes; an object that fell 0.3 m below its source is lifted back in 2.25 s.
JOIN_SPEED = 0.25
JOIN_ACCELERATION = 2.5
JOIN_ANGULAR_SPEED = 1.0
JOIN_ANGULAR_ACCELERATION = 10.0
JOIN_MIN_TIME = 0.05
#: The minimum-jerk profile's peak speed and acceleration for a unit gap over a unit time.
_PEAK_SPEED = 1.875
_PEAK_ACCELERATION = 10.0 / math.sqrt(3.0)


def _join_time(gap: float, speed: float, acceleration: float) -> float:
    """s: the shortest minimum-jerk time closing ``gap`` within ``speed`` and ``acceleration`` (module doc)."""
    return max(JOIN_MIN_TIME, _PEAK_SPEED * gap / speed, math.sqrt(_PEAK_ACCELERATION * gap / acceleration))


def _left(elapsed: float, duration: float) -> tuple[float, float, float]:
    """(fraction of the gap left, its rate, 1/s, and the rate's rate, 1/s^2) ``elapsed`` s into a minimum-jerk
    join of ``duration`` s."""
    u = min(max(elapsed / duration, 0.0), 1.0)
    return (1.0 - u ** 3 * (10.0 - 15.0 * u + 6.0 * u * u), -30.0 * (u * (1.0 - u)) ** 2 / duration,
            -60.0 * u * (1.0 - u) * (1.0 - 2.0 * u) / duration ** 2)


@dataclass
class _Join:
    """The gap (object minus source) when the weld engaged, at sim time ``since``: position (3,) m and
    rotation vector (3,) rad, world axes; and the time each is closed in, s."""

    since: float
    position: np.ndarray
    rotation: np.ndarray
    duration: float
    angular_duration: float


@dataclass
class _Followed:
    """One followed object: its ids in the model, the weld's leads (s, s^2) and leash (m, rad), gate, track,
    weld state and join."""

    name: str
    qpos: int
    dof: int
    mocap: int
    weld: int
    lead: float
    lead2: float
    leash: float
    angular_leash: float
    gate: PoseGate
    track: PoseTrack = field(default_factory=PoseTrack)
    engaged: bool = False
    join: _Join | None = None


class ObjectFollower:
    """The followed objects of a model (module doc).

    Args:
        model: a compiled model with followed objects (:func:`~.weld.add_following`).
        names: the objects to follow; None: every followed object of the model.
        limits: the gate's limits (:class:`GateLimits`), the same for each source.
        sources: {object: the name its source goes by in messages (a topic, a TF frame)}; default the
            object's name.
        max_push, max_angular_push: the leash's push bounds, m/s^2 and rad/s^2 (module doc).
        join_speed, join_acceleration, join_angular_speed, join_angular_acceleration: the join's bounds,
            m/s, m/s^2, rad/s, rad/s^2.
        max_extrapolation: s, longest a source's pose is moved on (:class:`PoseTrack`).
    Raises:
        ModelError: a name that is not a followed object of the model.
        ConfigError: a leash or join figure that is not a positive finite number.
    """

    def __init__(self, model: mujoco.MjModel, names: Iterable[str] | None = None, limits: GateLimits | None = None,
                 sources: Mapping[str, str] | None = None, max_push: float = MAX_PUSH,
                 max_angular_push: float = MAX_ANGULAR_PUSH, join_speed: float = JOIN_SPEED,
                 join_acceleration: float = JOIN_ACCELERATION, join_angular_speed: float = JOIN_ANGULAR_SPEED,
                 join_angular_acceleration: float = JOIN_ANGULAR_ACCELERATION,
                 max_extrapolation: float = MAX_EXTRAPOLATION) -> None:
        figures = {'max_push': max_push, 'max_angular_push': max_angular_push, 'join_speed': join_speed,
                   'join_acceleration': join_acceleration, 'join_angular_speed': join_angular_speed,
                   'join_angular_acceleration': join_angular_acceleration, 'max_extrapolation': max_extrapolation}
        for key, value in figures.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise ConfigError(f'object following {key}: expected a positive finite number, got {value!r}')
        self.max_push, self.max_angular_push = float(max_push), float(max_angular_push)
        self.join_speed, self.join_acceleration = float(join_speed), float(join_acceleration)
        self.join_angular_speed, self.join_angular_acceleration = float(join_angular_speed), \
            float(join_angular_acceleration)
        self.max_extrapolation = float(max_extrapolation)
        self.limits = limits or GateLimits()
        self.sources = dict(sources or {})
        self._objects: dict[str, _Followed] = {}
        self.rebind(model, names)

    @property
    def names(self) -> list[str]:
        """The followed objects, in order."""
        return list(self._objects)

    def gate(self, name: str) -> PoseGate:
        """The gate of object ``name``'s source (its counts, its last sample). Raises ConfigError."""
        return self._object(name).gate

    def rebind(self, model: mujoco.MjModel, names: Iterable[str] | None = None) -> None:
        """Follow in ``model`` (after a reload: a new model, its ``MjData`` with the state carried over):
        ``names`` (None: every followed object of it). A name followed before keeps its gate and its
        track; every weld re-engages with a join from where its object is. Raises ModelError: a name
        that is not a followed object of ``model`` (nothing is changed then)."""
        followed = followed_objects(model)
        names = followed if names is None else list(dict.fromkeys(names))
        for name in names:
            if name not in followed:
                raise ModelError(f'object {name!r} cannot follow in this model (no free scene object with its '
                                 f'target and weld); followable: {followed}')
        objects = {}
        for name in names:
            joint = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, free_joint_name(name))
            body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, target_name(name))
            weld = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_EQUALITY, follow_name(name))
            old = self._objects.get(name)
            gate = old.gate if old is not None else PoseGate(self.sources.get(name, name), self.limits)
            track = old.track if old is not None else PoseTrack(max_extrapolation=self.max_extrapolation)
            stiffness = push_stiffness(model, weld)
            objects[name] = _Followed(name, int(model.jnt_qposadr[joint]), int(model.jnt_dofadr[joint]),
                                      int(model.body_mocapid[body]), weld, *leads(model, weld),
                                      self.max_push / stiffness, self.max_angular_push / stiffness, gate, track)
        self._objects = objects

    def rejoin(self) -> None:
        """Re-engage every weld with a join from where its object is, at the next :meth:`update` (after a
        reset of the simulation's state, which puts the objects back where the scene file has them)."""
        for obj in self._objects.values():
            obj.engaged, obj.join = False, None

    def offer(self, name: str, stamp, position, quat, now: float) -> Verdict:
        """A pose of object ``name`` from its source: ``stamp`` (s, sim time), ``position`` (3,) m and
        ``quat`` (4,) w x y z in the world frame, received at sim time ``now`` (s). The gate judges it
        (:meth:`PoseGate.offer`; never raises for what the sample holds); an accepted one is followed
        from the next :meth:`update`. Returns the verdict (log its message when ``report``).
        Raises ConfigError: ``name`` is not followed."""
        obj = self._object(name)
        verdict = obj.gate.offer(stamp, position, quat, now)
        if verdict.accepted:
            if verdict.started:
                obj.track.reset()
                obj.engaged = False                   # the weld re-engages with a join from the object
            obj.track.add(verdict.sample)
        return verdict

    def update(self, data: mujoco.MjData, now: float | None = None) -> list[str]:
        """Set each followed object's weld and target for the step(s) from sim time ``now`` (s; None:
        ``data.time``), from the object's state in ``data`` (module doc). Returns the one-line warnings of
        sources that went silent (each once, :meth:`PoseGate.poll`)."""
        now = float(data.time) if now is None else float(now)
        reports = []
        for obj in self._objects.values():
            message = obj.gate.poll(now)
            if message:
                reports.append(message)
            position, quat, linear, angular = self._state(obj, data)
            if obj.gate.silent(now) or obj.track.latest is None:
                data.eq_active[obj.weld] = 0
                data.mocap_pos[obj.mocap], data.mocap_quat[obj.mocap] = position, quat
                obj.engaged, obj.join = False, None
                continue
            if not obj.engaged:
                source = obj.track.at(now)
                gap, turn = position - source.position, relative_rotvec(quat, source.quat)
                obj.join = _Join(now, gap, turn,
                                 _join_time(float(np.linalg.norm(gap)), self.join_speed, self.join_acceleration),
                                 _join_time(float(np.linalg.norm(turn)), self.join_angular_speed,
                                            self.join_angular_acceleration))
                obj.engaged = True
            data.eq_active[obj.weld] = 1                  # each time: a reset of the data switches it off
            goal = self._desired(obj, now)
            target = goal.position + obj.lead * goal.linear + obj.lead2 * goal.linear_acceleration
            target_quat = rotate(goal.quat, obj.lead * goal.angular + obj.lead2 * goal.angular_acceleration)
            # the leash: from the object's pose, put ahead by the velocity lead at its own velocity
            anchor = position + obj.lead * linear
            offset = target - anchor
            distance = float(np.linalg.norm(offset))
            if distance > obj.leash:
                target = anchor + offset * (obj.leash / distance)
            anchor_quat = rotate(quat, obj.lead * angular)
            turn = relative_rotvec(target_quat, anchor_quat)
            angle = float(np.linalg.norm(turn))
            if angle > obj.angular_leash:
                target_quat = rotate(anchor_quat, turn * (obj.angular_leash / angle))
            data.mocap_pos[obj.mocap] = target
            data.mocap_quat[obj.mocap] = target_quat / np.linalg.norm(target_quat)
        return reports

    def errors(self, data: mujoco.MjData, now: float | None = None) -> dict[str, tuple[float, float] | None]:
        """{object: (position error m, angle error rad)} of each object's pose in ``data`` against its
        source's pose at sim time ``now`` (s; None: ``data.time``; :meth:`PoseTrack.at`, no join): what
        the twin monitor publishes. None for an object whose source is silent."""
        now = float(data.time) if now is None else float(now)
        out: dict[str, tuple[float, float] | None] = {}
        for name, obj in self._objects.items():
            if obj.gate.silent(now) or obj.track.latest is None:
                out[name] = None
                continue
            position, quat, _, _ = self._state(obj, data)
            source = obj.track.at(now)
            out[name] = pose_error(position, quat, source.position, source.quat)
        return out

    def engaged(self, name: str) -> bool:
        """Whether object ``name``'s weld is on (its source live, as of the last :meth:`update`).
        Raises ConfigError: ``name`` is not followed."""
        return self._object(name).engaged

    # -- internals -------------------------------------------------------------------------------------
    def _object(self, name: str) -> _Followed:
        obj = self._objects.get(name)
        if obj is None:
            raise ConfigError(f'object {name!r} is not followed; followed: {list(self._objects) or "none"}')
        return obj

    @staticmethod
    def _state(obj: _Followed, data: mujoco.MjData):
        """(position (3,), quat (4,), linear (3,) m/s, angular (3,) rad/s world axes) of the object's frame:
        its free joint's (MuJoCo keeps a free joint's angular velocity in the body's axes)."""
        q, v = obj.qpos, obj.dof
        quat = data.qpos[q + 3:q + 7] / np.linalg.norm(data.qpos[q + 3:q + 7])
        rotation = np.empty(9)
        mujoco.mju_quat2Mat(rotation, quat)
        angular = rotation.reshape(3, 3) @ data.qvel[v + 3:v + 6]
        return data.qpos[q:q + 3].copy(), quat, data.qvel[v:v + 3].copy(), angular

    def _desired(self, obj: _Followed, now: float) -> Motion:
        """The :class:`Motion` the object is to have at ``now``: the source's, plus the join's."""
        motion = obj.track.at(now)
        join = obj.join
        if join is None:
            return motion
        elapsed = now - join.since
        if elapsed >= max(join.duration, join.angular_duration):
            obj.join = None
            return motion
        left, rate, rate2 = _left(elapsed, join.duration)
        turn, spin, spin2 = _left(elapsed, join.angular_duration)
        return Motion(motion.position + join.position * left, rotate(motion.quat, join.rotation * turn),
                      motion.linear + join.position * rate, motion.angular + join.rotation * spin,
                      motion.linear_acceleration + join.position * rate2,
                      motion.angular_acceleration + join.rotation * spin2)
