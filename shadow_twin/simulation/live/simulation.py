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

Model-parameter overrides (mock hardware that must behave differently from the twin) are applied
in place after every (re)compile (:class:`ParameterOverrides`, in ``overrides``). The trajectory
commands (:mod:`.trajectories`), following (:mod:`.following`) and the mobile-base commands
(:mod:`.base`) are mixins; a :class:`~shadow_twin.simulation.live.reload.ModelReloader` builds the
model (a scene's objects added) and carries the state over on a reload. All public methods take
:attr:`LiveSimulation.lock`: the ROS node steps in one thread and reloads, resets or reads from others.
"""

from __future__ import annotations

import math
import os
import threading
from pathlib import Path
from typing import Mapping, Sequence

import mujoco
import numpy as np

from shadow_twin.control.controller import ControllerGains
from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.model.scene import SceneConfig
from shadow_twin.simulation.live.base import MobileBaseCommands
from shadow_twin.simulation.live.following import FollowingCommands
from shadow_twin.simulation.live.objects import ObjectFollowingCommands
from shadow_twin.simulation.live.reload import UNCHANGED, ModelReloader, model_joints
from shadow_twin.simulation.live.trajectories import TrajectoryCommands, ActiveTrajectory
from shadow_twin.simulation.mobile_base import COMMAND_TIMEOUT, SimMobileBase
from shadow_twin.simulation.overrides import ParameterOverrides
from shadow_twin.simulation.samples import JointStateSample, PreparedReload, ReloadReport
from shadow_twin.simulation.trajectory_queue import STOPPED, TrajectoryQueue

#: Farthest a stamp (a base command's, a followed state's) may be ahead of the sim, s: a bridge whose
#: ticks run late lags the clock of the stamps by their lateness, so a state stamped now is of a sim
#: time still to come (and held or moved back to it); a stamp farther ahead comes from a clock that
#: does not match, and is taken as now.
MAX_STAMP_LEAD = 0.5


# ------------------------------------------------------------------------------ simulation
class LiveSimulation(TrajectoryCommands, FollowingCommands, MobileBaseCommands, ObjectFollowingCommands):
    """A model stepped live under the simulated controller.

    Args:
        model_path: MJCF file; None for the built-in Shadow Hand E.
        gains: drive gains (:class:`ControllerGains`), or a YAML path (re-read on :meth:`reload`),
            or None for the defaults (p 4.0, d 0.1).
        joint_map: ROS <-> MJCF joint names (identity by default).
        overrides: model-parameter overrides (:class:`ParameterOverrides`, a mapping, or None).
        scene: objects added to the model (:class:`~shadow_twin.model.scene.SceneConfig`; None: none);
            ``followed``: those of them that follow a pose source (:mod:`.objects`).
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
                 overrides: ParameterOverrides | Mapping | None = None, interpolation: str = 'auto',
                 base_command_timeout: float = COMMAND_TIMEOUT, scene: SceneConfig | None = None,
                 followed: Sequence[str] = ()) -> None:
        self.lock = threading.RLock()
        self.base_command_timeout = float(base_command_timeout)
        self.joint_map = joint_map or JointNameMap()
        #: What the model is built from (overrides, gains source); builds it, and carries the state on a reload.
        self._reloader = ModelReloader(self.joint_map, overrides, gains, scene, tuple(followed))
        self.interpolation = interpolation
        #: When True, :meth:`step` and :meth:`step_to` do nothing.
        self.paused = False
        #: Speed scaling (fraction, 0..1) of the joints matching ``speed_scaled_joints`` (globs):
        #: their trajectory time runs this fast (:meth:`set_speed_scaling`).
        self.speed_scaling = 1.0
        self.speed_scaled_joints: tuple[str, ...] = ()
        self._active: ActiveTrajectory | None = None
        self._finished: ActiveTrajectory | None = None
        #: What the joints follow, by source (:meth:`follow`, :meth:`follow_trajectory`).
        self._followed: dict[str, object] = {}
        self._queue = TrajectoryQueue()
        self._token = 0
        self.twin, self.controller, self.applied_overrides = self._reloader.build(model_path)
        self.data = mujoco.MjData(self.model)
        self._index()
        self._reset_state(keep_time=False)

    # -- construction -------------------------------------------------------------------------
    def _index(self) -> None:
        """Rebuild every name -> index map from the current model and controller."""
        joints = model_joints(self.model)
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
        self._index_objects()

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
    def overrides(self) -> ParameterOverrides:
        """The model-parameter overrides of the model running now (a reload replaces them)."""
        return self._reloader.overrides

    @overrides.setter
    def overrides(self, overrides: ParameterOverrides) -> None:
        self._reloader.overrides = overrides

    @property
    def scene(self) -> SceneConfig:
        """The scene whose objects the running model holds (a reload with another replaces it)."""
        return self._reloader.scene

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
        for followed in self._followed.values():
            q[:, followed.columns], qd[:, followed.columns] = followed.at(times)
        active = self._active
        if active is not None:
            pos, vel, _ = self._sample(active, times)
            q[:, active.columns] = pos
            qd[:, active.columns] = vel
        return q, qd

    def _stamp_time(self, stamp: float | None) -> float:
        """The sim time (s) a stamp (sim time, s) stands for: the stamp itself, up to
        :data:`MAX_STAMP_LEAD` s ahead of now; now for None or a stamp farther ahead (a clock that
        does not match the sim's). Call with the lock held."""
        now = float(self.data.time)
        return now if stamp is None or not float(stamp) <= now + MAX_STAMP_LEAD else float(stamp)

    # -- stepping ---------------------------------------------------------------------------
    def step(self, n: int = 1, while_paused: bool = False) -> int:
        """Advance ``n`` physics steps (``n * dt`` s of sim time) unless paused (``while_paused``:
        even then: a single step of a paused simulation, ``StepSimulation``).

        Desired states for the steps are sampled at the times ``data.time``
        will have at each step (accumulated as MuJoCo does) and converted to
        ``ctrl`` in one vectorised call per batch; a batch ends where a queued
        trajectory starts (:meth:`set_trajectory`), which then takes over. Returns
        the number of steps taken.
        """
        n = int(n)
        with self.lock:
            if (self.paused and not while_paused) or n <= 0:
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
            self._follow_objects()
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

    def reference(self) -> tuple[float, tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The controller's setpoint now, as a JTC's ``controller_state`` reports it: (sim time s,
        :attr:`controlled_joints` (J,), desired positions (J,) rad and velocities (J,) rad/s,
        actual positions (J,) rad and velocities (J,) rad/s)."""
        with self.lock:
            t = float(self.data.time)
            q, qd = self._desired(np.array([t]))
            columns = [self._controlled_index[n] for n in self.controlled_joints]
            adr = self.controller.qpos_adr[columns]
            dof = self.controller.dof_adr[columns]
            return (t, self.controlled_joints, q[0, columns], qd[0, columns], self.data.qpos[adr].copy(),
                    self.data.qvel[dof].copy())

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
            self.controller.hold_integrators(self.model, self.data)
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
        self.controller.hold_integrators(self.model, self.data)
        mujoco.mj_forward(self.model, self.data)
        for current in (self._active, self._finished):
            if current is not None:
                self._queue.end(current.token, STOPPED)
        self._queue.clear(STOPPED)
        self._active = self._finished = None
        self._followed = {}
        self._hold = self._hold_positions()
        self._rejoin_objects()

    def reset(self) -> None:
        """Back to keyframe 0 if the model has one, else ``qpos0``, at rest; no trajectory. Sim time
        keeps running (it is not set back to 0): clocks and stamps derived from it stay monotonic."""
        with self.lock:
            self._reset_state(keep_time=True)

    def reload(self, path: str | os.PathLike | None = None,
               overrides: ParameterOverrides | Mapping | None | object = UNCHANGED,
               gains: ControllerGains | str | os.PathLike | None | object = UNCHANGED) -> ReloadReport:
        """Recompile the MJCF (re-read from disk) and carry the state over by joint name:
        :meth:`prepare_reload` then :meth:`apply_reload`. Positions and velocities of joints present in
        both models are copied by name; the controller (gains re-read when given as a file), every name
        -> index map and the overrides are rebuilt. Sim time continues. The active trajectory continues
        if the new controller drives all its joints, else every joint holds its position.

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
                       overrides: ParameterOverrides | Mapping | None | object = UNCHANGED,
                       gains: ControllerGains | str | os.PathLike | None | object = UNCHANGED,
                       max_bytes: int | None = None, scene: SceneConfig | object = UNCHANGED) -> PreparedReload:
        """Build the model a reload would swap in, without the lock and without touching the running
        simulation (stepping goes on meanwhile; safe from another thread). Args: as :meth:`reload`;
        ``max_bytes`` refuses an MJCF whose files (with includes) hold more bytes, before parsing (None:
        no limit); ``scene`` the objects of the new model (omitted: the current ones; a spawn or delete,
        :mod:`shadow_twin.simulation.live.entities`). Raises: as :meth:`reload` (ModelError also for a
        model over ``max_bytes`` or an object that does not fit it)."""
        return self._reloader.prepare(self.path, path, overrides, gains, max_bytes, scene)

    def apply_reload(self, prepared: PreparedReload) -> ReloadReport:
        """Swap in a model built by :meth:`prepare_reload` (under the lock; milliseconds):
        state carried over by joint name as described in :meth:`reload`."""
        with self.lock:
            data, report = self._reloader.carry_state(self.model, self.data, prepared)
            old_hold = dict(zip(self.controller.joint_names, self._hold))
            active = self._active or self._finished
            self.twin, self.controller, self.applied_overrides = prepared.twin, prepared.controller, prepared.applied
            self.data = data
            self._reloader.adopt(prepared)
            self._index()
            self._followed = {}                    # its columns are the old model's
            self._hold = self._hold_positions()
            for k, name in enumerate(self.controller.joint_names):
                if name in old_hold:
                    self._hold[k] = old_hold[name]
            if active is not None:
                report.trajectory_kept = self._rebind(active)
            return report
