"""The twin's dispatch of a screened goal: its parts sent to the controllers, and their goals followed.

:meth:`GoalDispatch.dispatch_goal` sends every part, stamped with one start, and waits until all
have accepted (or takes back those that did, and rejects the goal); :meth:`GoalDispatch.collect_results`
follows the controller goals while the twin goal runs; :func:`cancel_and_wait` cancels them. The
order and the rules: ``docs/goal_lifecycle.md``.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from control_msgs.action import FollowJointTrajectory
from rclpy.task import Future
from trajectory_msgs.msg import JointTrajectoryPoint

from shadow_twin.control import jtc
from shadow_twin.control import twin_split as split
from shadow_twin.control.scaled_time import scaled_mask
from shadow_twin.ros.action_client import LockedActionClient
from shadow_twin.ros.action_server import PREEMPTED, outcome_of_status
from shadow_twin.ros.twin.base.driver import BaseDriver
from shadow_twin.ros.conversions import time_msg
from shadow_twin.ros.spinning import all_done_within
from shadow_twin.ros.twin.goal import SubGoal, TwinGoalState, describe_part, part_source
from shadow_twin.ros.twin.inputs import SpeedScaling

#: Seconds a controller silent for longer than ``feedback_timeout`` gets before it counts as gone:
#: feedback that came while this process was not running waits in the executor's queue, and the
#: other executor threads take it meanwhile (as ``wait_for_turn`` for the joint states).
FEEDBACK_GRACE = 0.1
#: Seconds to wait for the controllers to answer a goal / a cancel.
ANSWER_TIMEOUT = 3.0


class GoalDispatch:
    """Sends screened twin goals to the controllers, one goal at a time, and follows their goals.

    Args:
        clients: {controller name (``split.SIM`` for the sim): its action client}.
        action_names: {controller name: its action} (for messages).
        base: the base driver, None without a base.
        base_sides: the bases a base goal drives ('real' and/or 'sim').
        speed_scaling: the node's :class:`SpeedScaling`, None when not followed.
        actual: returns the actual joint states, {joint: (position rad, velocity rad/s)}.
        now_s: the node's clock, s.
        preempt_running: preempts the running twin goal by a plan whose parts are all accepted.
        staleness: ``(source, joints, settings) -> why or None``: whether a controller's joint
            states stopped (:meth:`~shadow_twin.ros.twin.screening.GoalScreening.staleness`).
        log: the node's logger.
    """

    def __init__(self, clients: dict[str, LockedActionClient], action_names: dict[str, str], base: BaseDriver | None,
                 base_sides: list[str], speed_scaling: SpeedScaling | None, actual: Callable[[], dict],
                 now_s: Callable[[], float], preempt_running: Callable[[TwinGoalState], None],
                 staleness: Callable[[str, list[str], dict], str | None], log) -> None:
        self.clients = clients
        self.action_names = action_names
        self.base = base
        self.base_sides = base_sides
        self.speed_scaling = speed_scaling
        self.actual = actual
        self.now_s = now_s
        self.preempt_running = preempt_running
        self.staleness = staleness
        self.log = log
        self._lock = threading.Lock()
        self._dispatching = 0        # goals being sent to the controllers (guarded by self._lock)
        self._handing_out = threading.Lock()      # one goal at a time is sent to the controllers
        self._handed_out = 0                       # goals whose parts were all accepted
        #: {controller: start (s) of the latest refused goal whose part there was canceled}: a
        #: cancel that came after that start let the part preempt the running goal's part
        self._taken_back: dict[str, float] = {}

    @property
    def busy(self) -> bool:
        """A goal's parts are being sent to the controllers (it preempts the running goal once accepted)."""
        with self._lock:
            return self._dispatching > 0

    def dispatch_goal(self, request, plan: TwinGoalState, settings: dict) -> None:
        """Send each controller its part, stamped with one start time, and wait until all have
        accepted, by :func:`split.acceptance_deadline` (``accept_margin`` before the start); then
        start the base followers at that time. Fills ``plan`` (subs, start_s, sampler, base_runs,
        order).

        One goal at a time: a goal that comes while another is being sent is rejected
        at once (a burst of goals runs one goal everywhere or none).
        A part rejected or not accepted in time: the parts accepted so far are canceled
        (before the start, so nothing moves) and the goal is rejected with the reason. Once
        all have accepted, this goal preempts the running one.

        Raises:
            jtc.GoalRejected: with the reason (INVALID_GOAL).
        """
        if not self._handing_out.acquire(blocking=False):
            raise jtc.GoalRejected(jtc.INVALID_GOAL, 'another goal is being accepted (its parts are being sent to '
                                                     'the controllers): send goals one at a time')
        try:
            self._send_parts(request, plan, settings)
        finally:
            self._handing_out.release()

    def _send_parts(self, request, plan: TwinGoalState, settings: dict) -> None:
        """:meth:`dispatch_goal`'s work, holding ``_handing_out``."""
        goals = {name: sub_goal(request, plan.goal_split, name) for name in plan.goal_split.groups}
        plan.subs = [SubGoal(name, self.clients[name], plan.goal_split.joints_of(name), part_source(name))
                     for name in plan.goal_split.groups]
        now_s, now_mono = self.now_s(), time.monotonic()
        points = len(request.trajectory.points) + len(request.multi_dof_trajectory.points)
        lead = settings['start_lead'] + settings['start_lead_per_point'] * points
        start_s = plan.start_s = split.start_stamp(plan.stamp_s, now_s, lead)
        margin = settings['accept_margin']
        accept_by = split.acceptance_deadline(start_s, now_s, lead, margin, ANSWER_TIMEOUT)
        if plan.trajectory is not None:
            names = list(plan.trajectory.joint_names)
            scaled = scaled_mask(names, settings['speed_scaled_joints'])
            scaling = 1.0 if self.speed_scaling is None else self.speed_scaling.fraction
            plan.sampler = split.DesiredSampler(plan.trajectory, split.state_arrays(names, self.actual())[0],
                                                start_s, scaled, scaling, now_s)
        with self._lock:
            self._dispatching += 1
        sends = []
        try:
            for sub in plan.subs:
                goal = goals[sub.name]
                goal.trajectory.header.stamp = time_msg(start_s)
                sends.append((sub, sub.client.send_goal_async(goal, feedback_callback=sub.heard)))
            all_done_within([f for _, f in sends], max(0.0, accept_by - now_s) - (time.monotonic() - now_mono))
            problems = []
            for sub, future in sends:
                if not future.done():
                    problems.append(f'{describe_part(sub.name, self.action_names)} did not accept its part within '
                                    f'{accept_by - now_s:.3f} s (start_lead {settings["start_lead"]:g} s + '
                                    f'{settings["start_lead_per_point"]:g} s per point)')
                    future.add_done_callback(cancel_when_accepted)     # it may still accept: undo that
                    continue
                sub.handle = future.result()
                if not sub.handle.accepted:
                    sub.handle = None
                    problems.append(f'{describe_part(sub.name, self.action_names)} rejected its part of the goal')
            if problems:
                accepted = [s for s in plan.subs if s.handle is not None]
                with self._lock:
                    self._taken_back.update({sub.name: start_s for sub, _ in sends})
                cancel_and_wait(accepted, results=False, timeout=margin)
                undone = f'; canceled before the start: {", ".join(s.name for s in accepted)}' if accepted else ''
                raise jtc.GoalRejected(jtc.INVALID_GOAL, '; '.join(problems) + undone)
            for sub in plan.subs:
                sub.result_future = sub.handle.get_result_async()
                sub.heard()
            if plan.base_goal is not None:
                plan.base_runs = self.base.start(plan.base_goal, start_s, self.base_sides, PREEMPTED)
            self._handed_out += 1
            plan.order = self._handed_out
            self.preempt_running(plan)
        except jtc.GoalRejected:
            raise
        except BaseException:
            cancel_and_wait([s for s in plan.subs if s.handle is not None], results=False, timeout=0.0)
            for _, future in sends:
                future.add_done_callback(cancel_when_accepted)
            if plan.base_runs:
                self.base.abort(plan.base_runs, 'the goal failed to start')
            raise
        finally:
            with self._lock:
                self._dispatching -= 1

    def collect_results(self, plan: TwinGoalState, settings: dict) -> None:
        """Take the results of the controller goals that have ended, and mark gone (aborted,
        INVALID_GOAL, logged) each controller whose joint states stopped or that sent no feedback
        for ``feedback_timeout`` s (+ ``FEEDBACK_GRACE``; past the trajectory's end
        ``ANSWER_TIMEOUT`` more). Sets ``sub.result`` of ``plan.subs``."""
        quiet_limit = settings['feedback_timeout']
        if plan.trajectory is not None and self.now_s() >= plan.start_s + plan.trajectory.duration:
            # past the trajectory's end a controller that reached its goal sends no more feedback,
            # and its result may still be on its way: give it ANSWER_TIMEOUT more (its joint states
            # still show whether it is there)
            quiet_limit += ANSWER_TIMEOUT
        for sub in plan.subs:
            if sub.result is not None:
                continue
            if sub.result_future is not None and sub.result_future.done():
                response = sub.result_future.result()
                sub.result = split.ControllerResult(outcome_of_status(response.status),
                                                    int(response.result.error_code),
                                                    self._explained(sub, plan, response.result.error_string, settings))
                continue
            why = self.staleness(sub.source, sub.joints, settings)
            silent = time.monotonic() - sub.last_heard
            if why is None and silent > quiet_limit:
                time.sleep(FEEDBACK_GRACE)
                silent = time.monotonic() - sub.last_heard
            if why is None and silent > quiet_limit + FEEDBACK_GRACE:
                after_end = '' if quiet_limit == settings['feedback_timeout'] else \
                    f' + {ANSWER_TIMEOUT:g} s for its result after the trajectory end'
                why = (f'its action server stopped answering: no feedback for {silent:.2f} s '
                       f'(feedback_timeout {settings["feedback_timeout"]:g} s{after_end})')
            if why is not None:
                sub.gone = True
                sub.result = split.ControllerResult(jtc.GoalOutcome.ABORTED, jtc.INVALID_GOAL,
                                                    f'{describe_part(sub.name, self.action_names)} is gone: {why}',
                                                    gone=True)
                self.log.error(sub.result.message)


    def _explained(self, sub: SubGoal, plan: TwinGoalState, message: str, settings: dict) -> str:
        """``message`` of a controller goal of ``plan``, with the cause when a refused goal's
        part preempted it there (canceled by the twin, but after its start)."""
        with self._lock:
            refused_start = self._taken_back.get(sub.name)
            latest = plan.order == self._handed_out
        if message != PREEMPTED or refused_start is None or refused_start <= plan.start_s or not latest:
            return message
        return (f'{message}: the part of a refused goal, whose cancel reached the controller after its start '
                f'(accept_margin {settings["accept_margin"]:g} s is too short for this PC)')


def sub_goal(request, goal_split: split.GoalSplit, name: str) -> FollowJointTrajectory.Goal:
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
            JointTrajectoryPoint(positions=split.pick(pt.positions, idx), velocities=split.pick(pt.velocities, idx),
                                 accelerations=split.pick(pt.accelerations, idx),
                                 time_from_start=pt.time_from_start)
            for pt in request.trajectory.points]
    out.path_tolerance = split.filter_tolerances(request.path_tolerance, joints)
    out.goal_tolerance = split.filter_tolerances(request.goal_tolerance, joints)
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


def cancel_when_accepted(future: Future) -> None:
    """Done callback of a goal request given up on: cancel the goal if it was accepted late."""
    try:
        handle = future.result()
    except Exception:      # the request failed: nothing runs
        return
    if handle is not None and handle.accepted:
        handle.cancel_goal_async()
