"""One ``control_msgs/action/FollowJointTrajectory`` server: goal intake, preemption, cancel, finish.

:class:`FollowJointTrajectoryServer` is what the simulated controller
(``mujoco_bridge.trajectory_server``) and the twin (``shadow_twin.ros.twin.server``)
share. Like ros2/examples' ``minimal_action_server`` it registers explicit
callbacks on an ``ActionServer`` in a ``ReentrantCallbackGroup``; the goal's
lifecycle, as ros2_controllers' joint_trajectory_controller (``goal_received_callback``,
``goal_accepted_callback``, ``goal_cancelled_callback``) runs it:

1. **goal callback**: :meth:`validate` (JTC rules, ``shadow_twin.control.jtc``)
   either returns a plan or raises ``jtc.GoalRejected``: the goal is rejected,
   the reason logged, nothing moves.
2. **accepted callback**: the goal becomes the active one; a goal still running
   is **preempted**: it ends aborted, INVALID_GOAL, "preempted by a new goal"
   (the JTC's ``preempt_active_goal`` answers INVALID_GOAL too, with the status
   canceled). A goal that :meth:`~FollowJointTrajectoryServer.supersedes` says is older
   than the running one (it was accepted out of order) is preempted itself, at once.
   A server whose ``preempts_on_accept`` is False (the simulated controller) preempts
   nothing here: its goals preempt at their start (:meth:`start` and :meth:`step` end
   the goals they replace).
3. **execute callback** (the goal's own executor thread): once the goal it
   preempted has finished stopping, :meth:`start`, then :meth:`step` at the
   period :meth:`period` until a verdict; an aborted goal is then :meth:`stop`-ped
   (also one that never started).
4. **cancel callback**: accepted; the goal's thread runs :meth:`cancel` and ends
   the goal canceled.

A goal ends exactly once: the first verdict decided for it (by its own step, a
cancel, a preemption or :meth:`stop_active`) is kept under the server's lock,
later ones are ignored. A preemption is decided before the new goal starts, so a
preempted goal always ends "preempted", whatever its step sees afterwards.

:class:`shadow_twin.ros.action_client.LockedActionClient` is the action client for servers that forward goals
(the twin): rclpy's, without its lost-response race.
"""

from __future__ import annotations

import abc
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Time as TimeMsg
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from trajectory_msgs.msg import JointTrajectoryPoint

from shadow_twin.control import jtc
from shadow_twin.ros.action_qos import action_services_qos
from shadow_twin.ros.conversions import doubles, duration_msg

Result = FollowJointTrajectory.Result
#: Seconds to wait, after accepting a cancel, for the goal handle to show it (rclpy marks
#: the goal CANCELING only after the cancel callback returned).
CANCEL_STATE_TIMEOUT = 2.0
PREEMPTED = 'preempted by a new goal'
_OUTCOME_OF_STATUS = {GoalStatus.STATUS_SUCCEEDED: jtc.GoalOutcome.SUCCEEDED,
                      GoalStatus.STATUS_CANCELED: jtc.GoalOutcome.CANCELED}


def outcome_of_status(status: int) -> jtc.GoalOutcome:
    """The outcome of a finished goal from its ``action_msgs/GoalStatus`` status
    (SUCCEEDED, CANCELED, anything else ABORTED)."""
    return _OUTCOME_OF_STATUS.get(status, jtc.GoalOutcome.ABORTED)


def feedback_message(stamp: TimeMsg, joint_names: list[str], time_from_start: float, desired: tuple,
                     actual: tuple) -> FollowJointTrajectory.Feedback:
    """A FollowJointTrajectory feedback with ``desired``, ``actual`` and ``error`` = desired - actual.

    Args:
        stamp: the header stamp (the time the state refers to).
        joint_names: J joints, the order of the arrays.
        time_from_start: s since the trajectory's start (negative before it: 0).
        desired: (positions rad, velocities rad/s, accelerations rad/s^2), arrays (J,).
        actual: (positions rad, velocities rad/s), arrays (J,).
    """
    desired_pos, desired_vel, desired_acc = desired
    actual_pos, actual_vel = actual
    since = duration_msg(time_from_start)
    fb = FollowJointTrajectory.Feedback()
    fb.header.stamp = stamp
    fb.joint_names = list(joint_names)
    fb.desired = JointTrajectoryPoint(positions=doubles(desired_pos), velocities=doubles(desired_vel),
                                      accelerations=doubles(desired_acc), time_from_start=since)
    fb.actual = JointTrajectoryPoint(positions=doubles(actual_pos), velocities=doubles(actual_vel),
                                     time_from_start=since)
    fb.error = JointTrajectoryPoint(positions=doubles(desired_pos - actual_pos),
                                    velocities=doubles(desired_vel - actual_vel), time_from_start=since)
    return fb


@dataclass(eq=False)
class AcceptedGoal:
    """A goal from acceptance to its end.

    Attributes:
        handle: rclpy's goal handle.
        plan: what :meth:`FollowJointTrajectoryServer.validate` returned (the
            server's own per-goal state), None if the goal failed validation after
            acceptance (its verdict is then already set).
        previous: the goal this one preempted, until it has finished.
        verdict: how the goal ends, once decided (see the module doc).
        started: :meth:`FollowJointTrajectoryServer.start` was called.
        cancelling: a cancel was accepted (the handle may not show it yet).
        wake: set to end the wait between two steps early.
        done: set when the goal has stopped (its successor may start).
    """

    handle: ServerGoalHandle
    plan: Any
    previous: AcceptedGoal | None = None
    verdict: jtc.Verdict | None = None
    started: bool = False
    cancelling: bool = False
    wake: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)


class FollowJointTrajectoryServer(abc.ABC):
    """A FollowJointTrajectory action server at ``action_name`` on ``node``; subclasses
    supply the hooks :meth:`validate`, :meth:`start`, :meth:`step`, :meth:`stop`,
    :meth:`cancel` and :meth:`period` (see the module doc for when each runs).

    Args:
        node: the owning node (its logger is used).
        action_name: e.g. ``/sim/follow_joint_trajectory``.
        handover_timeout: s a new goal waits for the goal it preempted to stop
            before it starts anyway.
    """

    #: False: an accepted goal does not preempt the running one; the subclass ends the goals it
    #: replaces (the simulated controller: at the new goal's start).
    preempts_on_accept = True

    def __init__(self, node: Node, action_name: str, handover_timeout: float) -> None:
        self.node = node
        self.log = node.get_logger()
        self.handover_timeout = float(handover_timeout)
        #: Guards the goals, the active goal and each goal's verdict.
        self.lock = threading.Lock()
        self._pending: dict[int, Any] = {}               # id(goal request): plan, until accepted
        self._goals: dict[int, AcceptedGoal] = {}        # id(goal handle): goal, until finished
        self._active: AcceptedGoal | None = None
        self.group = ReentrantCallbackGroup()
        self.server = ActionServer(
            node, FollowJointTrajectory, action_name, execute_callback=self._execute,
            goal_callback=self._on_goal, handle_accepted_callback=self._on_accepted,
            cancel_callback=self._on_cancel, callback_group=self.group, **action_services_qos())

    # -- hooks ------------------------------------------------------------------------------------
    @abc.abstractmethod
    def validate(self, request: FollowJointTrajectory.Goal) -> Any:
        """The plan of a goal request (kept as ``AcceptedGoal.plan``); raises
        ``jtc.GoalRejected`` to reject it. Runs in the goal callback."""

    @abc.abstractmethod
    def start(self, goal: AcceptedGoal) -> str | None:
        """Start executing ``goal``; None, or why it could not start (the goal is
        then aborted, INVALID_GOAL, and :meth:`stop`-ped)."""

    @abc.abstractmethod
    def step(self, goal: AcceptedGoal) -> jtc.Verdict | None:
        """One control/check step of a started goal (publish feedback with
        :meth:`publish_feedback`); its verdict once it ends, else None."""

    @abc.abstractmethod
    def stop(self, goal: AcceptedGoal) -> None:
        """Stop a goal that is aborted (tolerance violated, preempted, a failed start,
        :meth:`stop_active`); it may not have started."""

    @abc.abstractmethod
    def cancel(self, goal: AcceptedGoal) -> str:
        """Stop a goal whose cancel was accepted; returns what was done (the result's
        error_string)."""

    @abc.abstractmethod
    def period(self) -> float:
        """Seconds between two steps (the feedback period)."""

    def supersedes(self, plan: Any, running: Any) -> bool:
        """Whether a goal with ``plan`` preempts the running goal with plan ``running`` (default:
        always, the newest accepted wins); False: it was accepted out of order and is preempted
        itself. Runs under :attr:`lock`."""
        return True

    def preempt(self, goal: AcceptedGoal, by_plan: Any) -> None:
        """End ``goal``, preempted by the goal with plan ``by_plan`` (with :attr:`lock` held);
        subclasses may note what the new goal takes over before calling this."""
        self._decide(goal, jtc.Verdict.aborted(PREEMPTED))

    # -- helpers for the hooks ----------------------------------------------------------------
    def is_active(self, goal: AcceptedGoal) -> bool:
        """True while ``goal`` is the newest accepted goal (not preempted, not finished) of a
        server that preempts on acceptance. Call with :attr:`lock` held to act on it atomically."""
        return self._active is goal

    def preempt_running(self, by_plan: Any) -> None:
        """Preempt every goal still running (:meth:`preempt`), for the goal with plan ``by_plan``
        that is about to be accepted."""
        with self.lock:
            for goal in self._goals.values():
                if goal.verdict is None and goal.plan is not None:
                    self.preempt(goal, by_plan)

    def publish_feedback(self, goal: AcceptedGoal, stamp: TimeMsg, joint_names: list[str], time_from_start: float,
                         desired: tuple, actual: tuple) -> None:
        """Publish ``desired``, ``actual`` and ``error`` = desired - actual for ``goal``
        (arguments: :func:`feedback_message`)."""
        goal.handle.publish_feedback(feedback_message(stamp, joint_names, time_from_start, desired, actual))

    # -- external events ------------------------------------------------------------------------
    def stop_active(self, reason: str, wait: float = 0.0) -> None:
        """Abort every goal still running (if any), INVALID_GOAL ``reason`` (e.g. a simulation
        reset, shutdown); wait up to ``wait`` s for them to have stopped."""
        with self.lock:
            goals = [g for g in self._goals.values() if g.verdict is None]
            for goal in goals:
                self._decide(goal, jtc.Verdict.aborted(reason))
        deadline = time.monotonic() + wait
        for goal in goals:
            goal.done.wait(max(0.0, deadline - time.monotonic()))

    @property
    def active(self) -> bool:
        """True while a goal is accepted and not finished or preempted."""
        with self.lock:
            return any(g.verdict is None for g in self._goals.values())

    # -- callbacks ----------------------------------------------------------------------------------
    def _on_goal(self, request) -> GoalResponse:
        """Validate a goal; any exception other than ``GoalRejected`` rejects it too, so a
        bug cannot take the server down."""
        try:
            plan = self.validate(request)
        except jtc.GoalRejected as exc:
            self.log.warning(f'rejected goal ({exc.error_name}): {exc}')
            return GoalResponse.REJECT
        except Exception as exc:
            self.log.error(f'rejected goal: validation failed unexpectedly: {exc!r}')
            return GoalResponse.REJECT
        with self.lock:
            self._pending[id(request)] = plan
        return GoalResponse.ACCEPT

    def _on_accepted(self, handle: ServerGoalHandle) -> None:
        with self.lock:
            plan = self._pending.pop(id(handle.request), None)
        failure = None
        if plan is None:     # accepted by rclpy without passing our goal callback: never run a hook twice
            failure = jtc.Verdict.aborted('goal accepted without a validated plan: not started')
        goal = AcceptedGoal(handle, None if failure else plan, verdict=failure)
        with self.lock:
            self._goals[id(handle)] = goal
            if failure is None and self.preempts_on_accept:
                running = self._active
                if running is not None and running.verdict is None and not self.supersedes(plan, running.plan):
                    self.preempt(goal, running.plan)        # accepted out of order: the running one is newer
                else:
                    goal.previous, self._active = running, goal
                    if running is not None:
                        self.preempt(running, plan)
        handle.execute()

    def _on_cancel(self, handle: ServerGoalHandle) -> CancelResponse:
        with self.lock:
            goal = self._goals.get(id(handle))
            if goal is not None:
                goal.cancelling = True
                goal.wake.set()
        self.log.info('cancel requested')
        return CancelResponse.ACCEPT

    def _decide(self, goal: AcceptedGoal, verdict: jtc.Verdict) -> None:
        """Keep ``verdict`` unless ``goal`` has one already; wake the goal. Call with the lock held."""
        if goal.verdict is None:
            goal.verdict = verdict
        goal.wake.set()

    def _verdict(self, goal: AcceptedGoal) -> jtc.Verdict | None:
        with self.lock:
            return goal.verdict

    # -- execution ----------------------------------------------------------------------------------
    def _execute(self, handle: ServerGoalHandle) -> Result:
        with self.lock:
            goal = self._goals[id(handle)]
        previous, goal.previous = goal.previous, None
        if previous is not None:
            # the preempted goal stops first, so that it cannot undo this goal's start
            previous.done.wait(self.handover_timeout)
        if self._verdict(goal) is None:
            goal.started = True
            problem = self.start(goal)
            if problem is not None:
                with self.lock:
                    self._decide(goal, jtc.Verdict.aborted(problem))
        while True:
            goal.wake.clear()
            verdict = self._verdict(goal)
            if verdict is not None:
                break
            ending = self._cancel(goal) if goal.cancelling or handle.is_cancel_requested else self.step(goal)
            if ending is None:
                goal.wake.wait(self.period())
            else:
                with self.lock:
                    self._decide(goal, ending)
        if verdict.outcome is jtc.GoalOutcome.ABORTED and goal.plan is not None:
            self.stop(goal)
        return self._finish(goal, verdict)

    def _cancel(self, goal: AcceptedGoal) -> jtc.Verdict:
        message = self.cancel(goal)
        deadline = time.monotonic() + CANCEL_STATE_TIMEOUT
        while not goal.handle.is_cancel_requested and time.monotonic() < deadline:
            time.sleep(0.001)
        if goal.handle.is_cancel_requested:
            return jtc.Verdict(jtc.GoalOutcome.CANCELED, jtc.SUCCESSFUL, message)
        return jtc.Verdict.aborted(message)

    def _finish(self, goal: AcceptedGoal, verdict: jtc.Verdict) -> Result:
        with self.lock:
            self._goals.pop(id(goal.handle), None)
            if self._active is goal:
                self._active = None
        goal.done.set()
        outcome, code, message = verdict
        try:
            if outcome is jtc.GoalOutcome.CANCELED:
                goal.handle.canceled()
                self.log.info(f'goal canceled: {message}')
            elif outcome is jtc.GoalOutcome.SUCCEEDED:
                goal.handle.succeed()
                self.log.info(f'goal succeeded: {message}')
            else:
                goal.handle.abort()
                self.log.warning(f'goal aborted ({jtc.result_name(code)}): {message}')
        except Exception:
            if self.node.context.ok():
                raise
            # ROS is shutting down under us: the goal handle is gone
        return Result(error_code=int(code), error_string=message)
