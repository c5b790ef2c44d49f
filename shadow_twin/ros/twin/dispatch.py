"""Step 3 of a twin goal (screen -> preview -> dispatch -> follow): what is sent.

:class:`GoalDispatch` hands out one goal at a time (:meth:`~GoalDispatch.one_at_a_time`): it
re-anchors the sim base on the real one when they stand apart (:meth:`~GoalDispatch.anchor_base`,
before the preview reads the sim), then sends every part, stamped with one start, and waits until
all have accepted, or takes back those that did and rejects the goal (:meth:`~GoalDispatch.send`).
:func:`cancel_and_wait` cancels the parts. The order and the rules: ``docs/goal_lifecycle.md``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator

from control_msgs.action import FollowJointTrajectory
from rclpy.task import Future
from trajectory_msgs.msg import JointTrajectoryPoint

from shadow_twin.control import jtc
from shadow_twin.control.scaled_time import scaled_mask
from shadow_twin.ros.action_server import PREEMPTED
from shadow_twin.ros.conversions import time_msg
from shadow_twin.ros.spinning import all_done_within
from shadow_twin.ros.twin.base.anchor import AnchorError
from shadow_twin.ros.twin.context import ANSWER_TIMEOUT, GoalContext
from shadow_twin.ros.twin.goal import SubGoal, TwinGoalState, describe_part, part_source
from shadow_twin.twin.desired import DesiredSampler, state_arrays
from shadow_twin.twin.split import GoalSplit, filter_tolerances, pick
from shadow_twin.twin.timing import acceptance_deadline, start_stamp
from shadow_twin.ros.twin.parameters import TwinSettings


class GoalDispatch:
    """Sends screened twin goals to the controllers, one goal at a time.

    Args:
        context: the goal path's :class:`~shadow_twin.ros.twin.context.GoalContext`.
    """

    def __init__(self, context: GoalContext) -> None:
        self.context = context
        self._lock = threading.Lock()
        self._dispatching = 0        # goals being sent to the controllers (guarded by self._lock)
        self._handing_out = threading.Lock()      # one goal at a time is sent to the controllers

    @property
    def busy(self) -> bool:
        """A goal's parts are being sent to the controllers (it preempts the running goal once accepted)."""
        with self._lock:
            return self._dispatching > 0

    @contextlib.contextmanager
    def one_at_a_time(self) -> Iterator[None]:
        """Hold the hand-out for one goal: a goal that comes while another is being handed out is
        rejected at once (a burst of goals runs one goal everywhere or none).

        Raises:
            jtc.GoalRejected: another goal is being handed out (INVALID_GOAL).
        """
        if not self._handing_out.acquire(blocking=False):
            raise jtc.GoalRejected(jtc.INVALID_GOAL, 'another goal is being accepted (its parts are being sent to '
                                                     'the controllers): send goals one at a time')
        try:
            yield
        finally:
            self._handing_out.release()

    @contextlib.contextmanager
    def sending(self) -> Iterator[None]:
        """While the parts are sent and the goal takes over from the running one: :attr:`busy`."""
        with self._lock:
            self._dispatching += 1
        try:
            yield
        finally:
            with self._lock:
                self._dispatching -= 1

    def anchor_base(self, plan: TwinGoalState, settings: TwinSettings) -> None:
        """A goal with a base part, in mode both: put the sim base on the real one when they stand
        apart (:class:`~shadow_twin.ros.twin.base.anchor.BaseAnchor`), unless a goal drives them.

        Raises:
            jtc.GoalRejected: the sim base could not be re-anchored (INVALID_GOAL).
        """
        base = self.context.base
        if plan.base_goal is None or base is None or base.anchor is None or base.busy():
            return
        try:
            base.anchor.anchor_if_apart(*settings.base.anchor_offsets)
        except AnchorError as exc:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'the sim base stands apart from the real base and could '
                                                     f'not be re-anchored: {exc}') from None

    def send(self, request, plan: TwinGoalState, settings: TwinSettings) -> None:
        """Send each controller its part, stamped with one start time, and wait until all have
        accepted, by :func:`~shadow_twin.twin.timing.acceptance_deadline` (``accept_margin`` before
        the start); then start the base followers at that time. Fills ``plan`` (subs, start_s,
        sampler, base_runs, order). Call within :meth:`one_at_a_time` and :meth:`sending`.

        A part rejected or not accepted in time: the parts accepted so far are canceled
        (before the start, so nothing moves) and the goal is rejected with the reason.

        Raises:
            jtc.GoalRejected: with the reason (INVALID_GOAL).
        """
        context = self.context
        goals = {name: sub_goal(request, plan.goal_split, name) for name in plan.goal_split.groups}
        plan.subs = [SubGoal(name, context.clients[name], plan.goal_split.joints_of(name), part_source(name))
                     for name in plan.goal_split.groups]
        now_s, now_mono = context.now_s(), time.monotonic()
        points = len(request.trajectory.points) + len(request.multi_dof_trajectory.points)
        lead = settings.start_lead + settings.start_lead_per_point * points
        start_s = plan.start_s = start_stamp(plan.stamp_s, now_s, lead)
        margin = settings.accept_margin
        accept_by = acceptance_deadline(start_s, now_s, lead, margin, ANSWER_TIMEOUT)
        if plan.trajectory is not None:
            names = list(plan.trajectory.joint_names)
            scaled = scaled_mask(names, settings.speed_scaled_joints)
            scaling = 1.0 if context.speed_scaling is None else context.speed_scaling.fraction
            plan.sampler = DesiredSampler(plan.trajectory, state_arrays(names, context.actual())[0],
                                          start_s, scaled, scaling, now_s)
        sends, ids = [], {}
        try:
            for sub in plan.subs:
                goal = goals[sub.name]
                goal.trajectory.header.stamp = time_msg(start_s)
                ids[sub.name] = sub.client.new_goal_id()
                sends.append((sub, sub.client.send_goal_async(goal, feedback_callback=sub.heard,
                                                              goal_uuid=ids[sub.name])))
            all_done_within([f for _, f in sends], max(0.0, accept_by - now_s) - (time.monotonic() - now_mono))
            problems = []
            for sub, future in sends:
                if not future.done():
                    problems.append(f'{describe_part(sub.name, context.action_names)} did not accept its part within '
                                    f'{accept_by - now_s:.3f} s (start_lead {settings.start_lead:g} s + '
                                    f'{settings.start_lead_per_point:g} s per point)')
                    take_back(sub, ids[sub.name], future)
                    continue
                sub.handle = future.result()
                if not sub.handle.accepted:
                    sub.handle = None
                    problems.append(f'{describe_part(sub.name, context.action_names)} rejected its part of the goal')
            if problems:
                accepted = [s for s in plan.subs if s.handle is not None]
                context.handouts.taken_back([sub.name for sub, _ in sends], start_s)
                cancel_and_wait(accepted, results=False, timeout=margin)
                undone = f'; canceled before the start: {", ".join(s.name for s in accepted)}' if accepted else ''
                raise jtc.GoalRejected(jtc.INVALID_GOAL, '; '.join(problems) + undone)
            for sub in plan.subs:
                sub.result_future = sub.handle.get_result_async()
                sub.heard()
            if plan.base_goal is not None:
                plan.base_runs = context.base.start(plan.base_goal, start_s, context.base_sides, PREEMPTED)
            plan.order = context.handouts.next_order()
        except jtc.GoalRejected:
            raise
        except BaseException:
            cancel_and_wait([s for s in plan.subs if s.handle is not None], results=False, timeout=0.0)
            for sub, future in sends:
                if not future.done():
                    take_back(sub, ids[sub.name], future)
            if plan.base_runs:
                context.base.abort(plan.base_runs, 'the goal failed to start')
            raise


def sub_goal(request, goal_split: GoalSplit, name: str) -> FollowJointTrajectory.Goal:
    """The part of ``request`` (a ``FollowJointTrajectory.Goal``) for controller ``name``: its
    joints' positions, velocities and accelerations, path and goal tolerances, and the goal's
    ``goal_time_tolerance`` (its stamp is set when it is sent)."""
    idx = goal_split.groups[name]
    joints = goal_split.joints_of(name)
    out = FollowJointTrajectory.Goal()
    out.trajectory.header.frame_id = request.trajectory.header.frame_id
    out.trajectory.joint_names = joints
    if len(idx) == len(goal_split.joint_names):
        out.trajectory.points = request.trajectory.points       # all joints: the points as they are
    else:
        out.trajectory.points = [
            JointTrajectoryPoint(positions=pick(pt.positions, idx), velocities=pick(pt.velocities, idx),
                                 accelerations=pick(pt.accelerations, idx),
                                 time_from_start=pt.time_from_start)
            for pt in request.trajectory.points]
    out.path_tolerance = filter_tolerances(request.path_tolerance, joints)
    out.goal_tolerance = filter_tolerances(request.goal_tolerance, joints)
    out.goal_time_tolerance = request.goal_time_tolerance
    return out


def cancel_and_wait(subs: list[SubGoal], results: bool, timeout: float = ANSWER_TIMEOUT) -> list[str]:
    """Cancel the goals of ``subs`` still running (gone controllers included: a stalled one
    takes the cancel when it resumes); wait up to ``timeout`` s for the cancel answers (and
    with ``results`` for the goals to end) of the controllers not gone. Returns the names
    of the controllers sent a cancel (gone ones marked so)."""
    running = [sub for sub in subs if sub.handle is not None and (sub.result is None or sub.gone)]
    answers = [(sub, sub.handle.cancel_goal_async()) for sub in running]
    all_done_within([f for sub, f in answers if not sub.gone], timeout)
    if results:
        all_done_within([s.result_future for s in running if not s.gone and s.result_future is not None],
                        timeout)
    return [f'{sub.name} (gone: not waited for)' if sub.gone else sub.name for sub in running]


def take_back(sub: SubGoal, goal_id, future: Future) -> None:
    """Cancel the part sent to ``sub``'s controller as ``goal_id`` whose goal response (``future``) has not
    come: by its id at once (the controller may have accepted it, and its answer waits behind this node's
    busy executor: a loaded PC, where the part would otherwise start and run), and again when a late
    acceptance comes (the controller heard the cancel first: an unknown goal then)."""
    sub.client.cancel_by_id(goal_id)
    future.add_done_callback(cancel_when_accepted)


def cancel_when_accepted(future: Future) -> None:
    """Done callback of a goal request given up on: cancel the goal if it was accepted late."""
    try:
        handle = future.result()
    except Exception:      # the request failed: nothing runs
        return
    if handle is not None and handle.accepted:
        handle.cancel_goal_async()
