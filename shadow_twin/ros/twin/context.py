"""What every step of a twin goal's path reads: :class:`GoalContext`.

A goal goes screen -> preview -> dispatch -> follow (``docs/goal_lifecycle.md``), one file per
step (``screening.py``, ``preview.py``, ``dispatch.py``, ``follow.py``). Each step is given the one
context the twin server builds: its mode, the controllers and their action clients, the joint
limits, the joint states, the base, the speed scaling, the clock, the current settings, and the
record of the goals handed out (:class:`Handouts`). No step calls back into the server or into
another step.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from control_msgs.action import FollowJointTrajectory
from rclpy.node import Node

from shadow_twin.control import jtc
from shadow_twin.ros.action_client import LockedActionClient
from shadow_twin.ros.twin.base.driver import BaseDriver
from shadow_twin.ros.twin.inputs import JointStateCache, SpeedScaling
from shadow_twin.twin.config import ControllerSpec, base_sides
from shadow_twin.ros.twin.parameters import TwinSettings

#: Seconds to wait for the controllers to answer a goal / a cancel.
ANSWER_TIMEOUT = 3.0


class Handouts:
    """The goals whose parts were all handed out to the controllers, and the parts of refused goals
    taken back: written by the dispatch, read when a controller's result is explained. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        #: {controller: start (s) of the latest refused goal whose part there was canceled}: a
        #: cancel that came after that start let the part preempt the running goal's part
        self._taken_back: dict[str, float] = {}

    def next_order(self) -> int:
        """A goal whose parts were all accepted: its place among the goals handed out (1, 2, ...)."""
        with self._lock:
            self._count += 1
            return self._count

    def taken_back(self, controllers: list[str], start_s: float) -> None:
        """The parts on ``controllers`` of a refused goal starting at ``start_s`` (s) were canceled."""
        with self._lock:
            self._taken_back.update(dict.fromkeys(controllers, start_s))

    def refused_start(self, controller: str, order: int) -> float | None:
        """The start (s) of the latest refused goal whose part on ``controller`` was canceled, when
        the goal of ``order`` is the latest handed out; else None."""
        with self._lock:
            return self._taken_back.get(controller) if order == self._count else None


@dataclass
class GoalContext:
    """What the steps of a twin goal read (module doc).

    Attributes:
        mode: ``sim``, ``real`` or ``both`` (mode shadow screens as ``sim``).
        controllers: the real controllers (joint globs).
        limits: {joint: JointLimits} of the model's joints (position limits, rad).
        action_names: {controller name (``SIM`` for the sim): its action}.
        states: the node's joint states.
        settings: the twin's current settings (``shadow_twin.ros.twin.parameters.read_settings``).
        now_s: the node's clock, s.
        log: the node's logger.
        base: the base driver, None without a base.
        speed_scaling: the arm's speed scaling, None when not followed.
        started: monotonic s of the server's start (the screening's start-up grace).
        clients: {controller name: its action client}, made by :meth:`connect`.
        handouts: the goals handed out (:class:`Handouts`).
    """

    mode: str
    controllers: list[ControllerSpec]
    limits: dict[str, jtc.JointLimits]
    action_names: dict[str, str]
    states: JointStateCache
    settings: Callable[[], TwinSettings]
    now_s: Callable[[], float]
    log: object
    base: BaseDriver | None = None
    speed_scaling: SpeedScaling | None = None
    started: float = field(default_factory=time.monotonic)
    clients: dict[str, LockedActionClient] = field(default_factory=dict)
    handouts: Handouts = field(default_factory=Handouts)

    def connect(self, node: Node, callback_group) -> None:
        """Create the action client of every controller in :attr:`action_names` on ``node``."""
        self.clients = {name: LockedActionClient(node, FollowJointTrajectory, action, callback_group=callback_group)
                        for name, action in self.action_names.items()}

    @property
    def joints(self) -> list[str]:
        """The model's joints, in model order."""
        return list(self.limits)

    @property
    def actual_source(self) -> str:
        """Where "actual" comes from: 'sim' in mode sim, else 'real'."""
        return 'sim' if self.mode == 'sim' else 'real'

    @property
    def base_sides(self) -> list[str]:
        """The bases a base goal drives ('real' and/or 'sim')."""
        return base_sides(self.mode)

    def actual(self) -> dict[str, tuple[float, float]]:
        """The actual joint states, {joint: (position rad, velocity rad/s)}."""
        return self.states.get(self.actual_source)

    def staleness(self, source: str, joints: list[str], settings: TwinSettings) -> str | None:
        """Why the ``source`` joint states of ``joints`` count as stopped, or None.

        Judged only on data the listener had the chance to take: when the newest state is
        older than ``joint_state_timeout`` (s; the sim's: ``sim_joint_state_timeout``), the
        listener is given one more turn (up to 0.1 s) and the age is read again, so that a stall
        of this process is not blamed on the controller."""
        name = 'sim_joint_state_timeout' if source == 'sim' else 'joint_state_timeout'
        timeout = getattr(settings, name)
        joint, age = self.states.oldest(source, joints)
        if age <= timeout:
            return None
        self.states.wait_for_turn(0.1)
        joint, age = self.states.oldest(source, joints)
        if age <= timeout:
            return None
        since = 'never received' if age == float('inf') else f'last one {age:.3f} s ago'
        return (f'its joint states stopped: {joint} {since} ({name} {timeout:g} s, '
                f'from {self.states.topic_of(source, joint)})')
