"""Trajectory commands of :class:`~shadow_twin.simulation.live.simulation.LiveSimulation`: a trajectory set
now, joined mid-way or queued ahead, preemption in the order of acceptance, cancelling, a
trajectory's state and its tracking samples; sampling the running trajectory (speed-scaled joints
on their own lagging clock, :meth:`TrajectoryCommands.set_speed_scaling`), retiring it at its end
and keeping it across a reload. :class:`TrajectoryCommands` is a mixin of ``LiveSimulation``: its
methods use the simulation's lock, data, controller, held positions and trajectory queue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from shadow_twin.common.errors import ConfigError, TrajectoryError
from shadow_twin.control.scaled_time import ScaledClock, scaled_mask
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.simulation.samples import TrackingSample
from shadow_twin.simulation.trajectory_queue import (CANCELED, PREEMPTED, QUEUED, RUNNING, STOPPED, UNKNOWN,
                                                     QueuedTrajectory)


@dataclass
class ActiveTrajectory:
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


class TrajectoryCommands:
    """The trajectory methods of :class:`~shadow_twin.simulation.live.simulation.LiveSimulation` (a mixin;
    every public one takes its lock)."""

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
        self._active = ActiveTrajectory(trajectory.with_start(current, at=now - start), columns, token,
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

    def hold(self, positions: Mapping[str, float]) -> None:
        """Stop every trajectory (as :meth:`cancel`) and hold the joints of ``positions`` ({driven joint:
        rad}) there, the others where they stand, moving nothing now: what the controllers held when a
        physics state now restored with ``mj_setState`` was saved (a hand closed on an object holds its
        grip's targets, short of which its fingers stopped). Raises KeyError: a joint that is not driven."""
        with self.lock:
            columns = [self._controlled_index[name] for name in positions]
            self.cancel()
            self._hold[columns] = [float(v) for v in positions.values()]

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

    # -- sampling, speed scaling, the end of a trajectory (lock held) ---------------------------
    def _sample(self, active: ActiveTrajectory, times) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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

    def _rebind(self, active: ActiveTrajectory) -> bool:
        """After a reload (lock held, the new model's maps built): ``active`` (the running or finished
        trajectory of the old model) continues on the new controller's columns when it drives all its
        joints (True); else it stops and every joint holds its position (False)."""
        if all(j in self._controlled_index for j in active.trajectory.joint_names):
            active.columns = np.array([self._controlled_index[j] for j in active.trajectory.joint_names], dtype=int)
            return True
        self._queue.end(active.token, STOPPED)
        self._active = self._finished = None
        self._hold = self._hold_positions()
        return False
