"""The following methods of :class:`~shadow_twin.simulation.live.simulation.LiveSimulation` (a mixin; every
public one takes its lock): the sim's joints track another robot, by its measured state
(:meth:`FollowingCommands.follow`) or by the trajectory its controller runs
(:meth:`FollowingCommands.follow_trajectory`), one entry per source (:mod:`.following`).
A shadowing bridge (``mujoco_bridge.shadow``) and a mock robot that mirrors another's arm use them."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from shadow_twin.common.errors import TrajectoryError
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.simulation.following import FollowedTrajectory, Followed, follow_target


class FollowingCommands:
    """Following another robot (mixin of ``LiveSimulation``: uses its lock, data, controlled joints,
    ``_followed`` {source: followed}, ``_hold``, ``_desired`` and ``_stamp_time``)."""

    def follow(self, positions: Mapping[str, float], velocities: Mapping[str, float] | None = None,
               at: float | None = None, source: str = '', measured: Mapping[str, float] | None = None) -> list[str]:
        """Let the controlled joints named in ``positions`` ({ROS joint: rad}) track another robot's
        state from now on: their desired position is the given one, moved on at ``velocities``
        ({joint: rad/s}, default 0; accelerating as they changed since the previous state) for at
        most :data:`FOLLOW_EXTRAPOLATION` s from ``at``, the sim time the state is of (its stamp,
        see :meth:`_stamp_time`), until the next call: a state that arrives late is extrapolated
        to now, one of a sim time still to come (the sim lagging the stamps' clock) back to it, so
        the joints neither lag nor lead by the delay.
        The target starts from where it was (for the first call: where the joints are held) and
        joins the new state within :data:`FOLLOW_MAX_SPEED` and :data:`FOLLOW_MAX_ACCELERATION`
        however long the source was silent, so a state far away is approached, not jumped to
        (:func:`~shadow_twin.simulation.following.follow_target`). ``measured`` ({joint: rad}, the
        other robot's measured positions at ``at``, e.g. a JTC's ``feedback``) moves the target by
        a slow, bounded integral of measured minus the sim's positions, so the sim's servo holds the
        pose the real one holds (its weight on a weak wrist, a controller's own integral term).
        A trajectory on the same joints takes precedence while it runs. E.g. a mock MiR250
        whose arm mirrors the mock UR5's ``joint_states``, so that its base feels the arm
        move as the real cell's does. Each ``source`` (e.g. a topic) is followed on its own, so
        that the arm's and the hand's controllers can be followed at once; where two name the same
        joint, the one followed first wins. Names the model does not drive are ignored; returns
        those followed. The following ends with a reset or a reload."""
        with self.lock:
            names = [n for n in positions if n in self.controlled_joints]
            if not names:
                return []
            columns = np.array([self._controlled_index[n] for n in names], dtype=int)
            at = self._stamp_time(at)
            previous = self._followed.get(source)
            previous = previous if isinstance(previous, Followed) else None
            actual = None
            if measured is not None:       # the sim's positions at ``at``, moved on (or back) at their speed
                dof = self.controller.dof_adr[columns]
                actual = self.data.qpos[self.controller.qpos_adr[columns]] + \
                    self.data.qvel[dof] * (at - float(self.data.time))
            self._follow(source, follow_target(previous, names, columns, positions, velocities, at, self._hold,
                                               measured, actual))
            return names

    def follow_trajectory(self, trajectory: JointTrajectory, start_time: float | None = None,
                          source: str = '') -> list[str]:
        """Let the controlled joints of ``trajectory`` follow it from sim time ``start_time`` (s;
        its stamp, see :meth:`_stamp_time`; None: now) on its own clock, as another robot's
        controller runs it (a trajectory sent on its ``~/joint_trajectory`` topic): it starts
        where the joints' desired state is at that time, and replaces what ``source`` followed
        before. Joints the model does not drive are left out; returns those followed.
        Raises TrajectoryError when none of its joints is driven."""
        with self.lock:
            names = [n for n in trajectory.joint_names if n in self.controlled_joints]
            if not names:
                raise TrajectoryError(f'none of the joints {list(trajectory.joint_names)} is driven by the sim')
            keep = [trajectory.joint_names.index(n) for n in names]
            columns = np.array([self._controlled_index[n] for n in names], dtype=int)
            start = self._stamp_time(start_time)
            current = self._desired(np.array([start]))[0][0][columns]
            part = JointTrajectory(names, trajectory.times, trajectory.positions[:, keep],
                                   None if trajectory.velocities is None else trajectory.velocities[:, keep],
                                   None if trajectory.accelerations is None else trajectory.accelerations[:, keep])
            self._follow(source, FollowedTrajectory(columns, part.with_start(current), start))
            return names

    def _follow(self, source: str, followed) -> None:
        """Follow ``followed`` for ``source``; the joints no longer followed hold where their
        desired state is now (lock held)."""
        previous = self._followed.pop(source, None)
        if previous is not None:
            was = previous.at(np.array([float(self.data.time)]))[0][0]
            for k, column in enumerate(previous.columns):
                if column not in followed.columns:
                    self._hold[column] = was[k]
        self._followed[source] = followed
