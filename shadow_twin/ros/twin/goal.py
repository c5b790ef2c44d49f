"""The state of one twin goal: :class:`TwinGoalState` (what screening decided, what dispatch sent)
and its controller goals, :class:`SubGoal`.

The life cycle they go through: ``docs/goal_lifecycle.md``.
"""

from __future__ import annotations

import time
from typing import Callable
from dataclasses import dataclass, field

from rclpy.action.client import ClientGoalHandle
from rclpy.task import Future

from shadow_twin.control import jtc
from shadow_twin.twin.config import SIM
from shadow_twin.twin.desired import DesiredSampler
from shadow_twin.twin.split import GoalSplit
from shadow_twin.twin.verdict import ControllerResult, REACHED_JOINTS
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.ros.action_client import LockedActionClient
from shadow_twin.ros.twin.base.driver import BaseGoal, BaseRun


def part_source(name: str) -> str:
    """Whose joint states show the joints of controller ``name``: 'sim' for ``SIM``, else 'real'."""
    return 'sim' if name == SIM else 'real'


def describe_part(name: str, action_names: dict[str, str]) -> str:
    """Controller ``name`` as messages name it: 'sim', or '<name> controller (<action>)'.

    Args:
        name: the controller (``SIM`` for the sim).
        action_names: {controller name: its action}; raises KeyError for a name not in it.
    """
    return 'sim' if name == SIM else f'{name} controller ({action_names[name]})'


@dataclass
class SubGoal:
    """A goal sent to one controller (real or sim).

    Attributes:
        source: whose joint states show this controller's joints: 'real' or 'sim'.
        last_heard: monotonic s of its last answer or feedback.
        gone: the twin gave up on the controller (its data stopped): cancels to it
            are sent but not waited for.
    """

    name: str
    client: LockedActionClient
    joints: list[str]
    source: str
    handle: ClientGoalHandle | None = None
    result_future: Future | None = None
    result: ControllerResult | None = None      # once its goal has ended (or the controller is gone)
    last_heard: float = field(default_factory=time.monotonic)
    gone: bool = False

    def heard(self, _feedback=None) -> None:
        """Feedback callback: the controller is answering."""
        self.last_heard = time.monotonic()


@dataclass
class TwinGoalState:
    """The goal state the twin keeps for an accepted goal (what the screening decided, then its parts).

    Attributes:
        stamp_s: the goal's ``header.stamp``, s (0: start when accepted).
        trajectory: the joint part (ROS joint names; times s from its start), None for a
            base-only goal.
        goal_split: which controllers get which joints.
        tolerances: its path/goal tolerances (None without joints).
        base_goal: the base part (``multi_dof_trajectory``), None without one.
        subs: the controller goals, accepted by every controller.
        base_runs: the base followers started for it (real and/or sim).
        start_s: the common start, s.
        sampler: the desired joint state over time (None without joints).
        order: its place among the goals handed out (1, 2, ...; 0 until all parts are accepted).
        taken_over: the controllers a goal that preempted this one took over (their parts
            end there; the others are canceled).
        reached: the goal tolerance of the joints has held once after the end (true from
            the start for a goal without joints).
        watch: its preview's watch (``shadow_twin.simulation.preview.windows.GoalWatch``), None
            when the preview is off.
        preview_request: for a ``/twin/preview`` goal, its queued request
            (``shadow_twin.ros.twin.preview.PreviewRequest``).
        wake: wakes the goal's thread (the watch's failure is decided at once), None until it runs.
    """

    stamp_s: float = 0.0
    trajectory: JointTrajectory | None = None
    goal_split: GoalSplit = field(default_factory=lambda: GoalSplit([], {}))
    tolerances: jtc.Tolerances | None = None
    base_goal: BaseGoal | None = None
    subs: list[SubGoal] = field(default_factory=list)
    base_runs: list[BaseRun] = field(default_factory=list)
    start_s: float = 0.0
    sampler: DesiredSampler | None = None
    reached: bool = False
    order: int = 0
    taken_over: frozenset = frozenset()
    watch: object = None
    preview_request: object = None
    wake: Callable[[], None] | None = None

    @property
    def reached_text(self) -> str:
        """What the goal's success reached (for its result message)."""
        if self.base_goal is None:
            return REACHED_JOINTS
        base = 'the base within its goal tolerances'
        return base if self.trajectory is None else f'{REACHED_JOINTS}, {base}'

    @property
    def parts(self) -> list[str]:
        """Names of everything that takes part: the controllers, then the bases."""
        return list(self.goal_split.groups) + [run.name for run in self.base_runs]
