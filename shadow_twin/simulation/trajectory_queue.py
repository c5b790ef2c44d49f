"""Trajectories accepted for a later start, and how each trajectory ended.

A goal stamped for a later start does not preempt the running trajectory when it is
accepted, but at its start: until then the running one goes on, and a goal canceled
before its start (the twin gave up on one of its other parts) leaves it untouched.
At its start a trajectory preempts every trajectory accepted before it (running or
still waiting); one accepted after it that starts later waits on. This is the order
ros2_controllers' joint_trajectory_controller gives goals (the newest accepted wins),
with the preemption moved to the start so that a goal can be taken back before it
moves anything.

:class:`TrajectoryQueue` holds the waiting trajectories (tokens increase with
acceptance) and remembers, for a bounded number of tokens, why a trajectory ended
(:data:`PREEMPTED`, :data:`CANCELED`, :data:`STOPPED`), so that its action goal can
end with the right reason. ROS-free; :class:`~shadow_twin.simulation.live.simulation.LiveSimulation`
uses it under its lock.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

#: Trajectory states (:meth:`TrajectoryQueue.ended_why` and ``LiveSimulation.trajectory_state``).
QUEUED = 'queued'
RUNNING = 'running'
PREEMPTED = 'preempted'
CANCELED = 'canceled'
STOPPED = 'stopped'
UNKNOWN = 'unknown'
#: How many ended tokens are remembered (a goal asks within a feedback period of the end).
ENDED_MEMORY = 256


@dataclass(frozen=True)
class QueuedTrajectory:
    """A trajectory waiting for its start.

    Attributes:
        token: its token (acceptance order).
        trajectory: the trajectory (ROS joint names; times s from its start).
        start: sim time of its start, s.
        payload: what the caller keeps with it (e.g. the controller columns).
    """

    token: int
    trajectory: Any
    start: float
    payload: Any = None


class TrajectoryQueue:
    """Waiting trajectories and the reasons ended ones ended (module doc). Not thread-safe:
    the owner locks."""

    def __init__(self) -> None:
        self._waiting: list[QueuedTrajectory] = []
        self._ended: OrderedDict[int, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._waiting)

    def __iter__(self):
        return iter(list(self._waiting))

    def add(self, entry: QueuedTrajectory) -> None:
        """Queue ``entry`` (its token places it in the order)."""
        self._waiting.append(entry)

    def get(self, token: int) -> QueuedTrajectory | None:
        """The waiting entry with ``token``, or None."""
        return next((e for e in self._waiting if e.token == token), None)

    def next_start(self) -> float | None:
        """The earliest start of a waiting trajectory (sim time, s), None when none waits."""
        return min((e.start for e in self._waiting), default=None)

    def take_due(self, now: float) -> QueuedTrajectory | None:
        """The trajectory to start at sim time ``now`` (s): of those whose start has come, the
        one accepted last. It and every trajectory accepted before it leave the queue; those
        are marked :data:`PREEMPTED`. None when no start has come."""
        due = [e for e in self._waiting if e.start <= now]
        if not due:
            return None
        chosen = max(due, key=lambda e: e.token)
        self._waiting.remove(chosen)
        self.preempt_before(chosen.token)
        return chosen

    def preempt_before(self, token: int) -> None:
        """A trajectory with ``token`` starts now: the waiting ones accepted before it are preempted."""
        for entry in self._waiting:
            if entry.token < token:
                self.end(entry.token, PREEMPTED)
        self._waiting = [e for e in self._waiting if e.token > token]

    def drop(self, token: int, why: str) -> bool:
        """Take a waiting trajectory out (``why``: e.g. :data:`CANCELED`); False if it was not waiting."""
        if self.get(token) is None:
            return False
        self._waiting = [e for e in self._waiting if e.token != token]
        self.end(token, why)
        return True

    def clear(self, why: str) -> None:
        """Take every waiting trajectory out (a reset: :data:`STOPPED`)."""
        for entry in self._waiting:
            self.end(entry.token, why)
        self._waiting = []

    def end(self, token: int, why: str) -> None:
        """Remember that the trajectory ``token`` ended, and why (the first reason is kept)."""
        if token and token not in self._ended:
            self._ended[token] = why
            while len(self._ended) > ENDED_MEMORY:
                self._ended.popitem(last=False)

    def ended_why(self, token: int) -> str | None:
        """Why trajectory ``token`` ended (:data:`PREEMPTED`, ...), None if not known to have ended."""
        return self._ended.get(token)
