"""Step 4 of a twin goal (screen -> preview -> dispatch -> follow): the goal followed while it runs.

At each of the server's periods :class:`GoalFollower` takes the results of the controller goals
that have ended and marks gone a controller whose joint states stopped or that stopped answering
(:meth:`~GoalFollower.collect_results`), then checks the joints on the actual state
(:func:`check_joints`, the twin's own path/goal tolerance check), builds the feedback and decides
(:func:`~shadow_twin.twin.verdict.decide`): :meth:`~GoalFollower.step`. The preview's verdict on a
running goal is the preview's (``preview.py``). The order and the rules: ``docs/goal_lifecycle.md``.
"""

from __future__ import annotations

import time

import numpy as np
from control_msgs.action import FollowJointTrajectory

from shadow_twin.common.stamps import from_nanoseconds
from shadow_twin.control import jtc
from shadow_twin.ros.action_server import PREEMPTED, feedback_message, outcome_of_status
from shadow_twin.ros.conversions import time_msg_ns
from shadow_twin.ros.twin.context import ANSWER_TIMEOUT, GoalContext
from shadow_twin.ros.twin.goal import SubGoal, TwinGoalState, describe_part
from shadow_twin.twin.desired import state_arrays
from shadow_twin.twin.verdict import ControllerResult, decide
from shadow_twin.ros.twin.parameters import TwinSettings

#: Seconds a controller silent for longer than ``feedback_timeout`` gets before it counts as gone:
#: feedback that came while this process was not running waits in the executor's queue, and the
#: other executor threads take it meanwhile (as ``wait_for_turn`` for the joint states).
FEEDBACK_GRACE = 0.1


class GoalFollower:
    """Follows running twin goals: their controller goals, the twin's own check, feedback, verdict.

    Args:
        context: the goal path's :class:`~shadow_twin.ros.twin.context.GoalContext`.
    """

    def __init__(self, context: GoalContext) -> None:
        self.context = context

    def step(self, plan: TwinGoalState, settings: TwinSettings, now_ns: int
             ) -> tuple[FollowJointTrajectory.Feedback, jtc.Verdict]:
        """The goal's feedback at ``now_ns`` (the node's clock, ns) and its verdict (RUNNING while
        it runs): the twin's check of the joints on the actual state, the controllers' and the
        bases' results (call :meth:`collect_results` first)."""
        context = self.context
        now = from_nanoseconds(now_ns)
        check = jtc.RUNNING_VERDICT
        if plan.trajectory is None:
            empty = np.zeros(0)
            fb = feedback_message(time_msg_ns(now_ns), [], now - plan.start_s, (empty, empty, empty), (empty, empty))
        else:
            scaling = plan.sampler.scaling if context.speed_scaling is None else context.speed_scaling.fraction
            if scaling != plan.sampler.scaling:
                plan.sampler.set_scaling(now, scaling)        # the lag so far is integrated at the old one
            desired, desired_vel, desired_acc, t = plan.sampler.at(now)
            names = list(plan.trajectory.joint_names)
            pos, vel = state_arrays(names, context.actual())
            fb = feedback_message(time_msg_ns(now_ns), names, t, (desired, desired_vel, desired_acc), (pos, vel))
            check = check_joints(plan, now, t, names, (desired, desired_vel), (pos, vel))
        actual_run = next((r for r in plan.base_runs if r.endpoint.side == context.actual_source), None)
        if actual_run is not None:
            context.base.fill_feedback(fb, actual_run, now, plan.base_goal.trajectory.joint_name)
        results = {s.name: s.result for s in plan.subs}
        results.update((run.name, run.result()) for run in plan.base_runs)
        return fb, decide(check, plan.reached, results, plan.reached_text)

    def collect_results(self, plan: TwinGoalState, settings: TwinSettings) -> None:
        """Take the results of the controller goals that have ended, and mark gone (aborted,
        INVALID_GOAL, logged) each controller whose joint states stopped or that sent no feedback
        for ``feedback_timeout`` s (+ ``FEEDBACK_GRACE``; past the trajectory's end
        ``ANSWER_TIMEOUT`` more). Sets ``sub.result`` of ``plan.subs``."""
        quiet_limit = settings.feedback_timeout
        if plan.trajectory is not None and self.context.now_s() >= plan.start_s + plan.trajectory.duration:
            # past the trajectory's end a controller that reached its goal sends no more feedback,
            # and its result may still be on its way: give it ANSWER_TIMEOUT more (its joint states
            # still show whether it is there)
            quiet_limit += ANSWER_TIMEOUT
        for sub in plan.subs:
            if sub.result is not None:
                continue
            if sub.result_future is not None and sub.result_future.done():
                response = sub.result_future.result()
                sub.result = ControllerResult(outcome_of_status(response.status), int(response.result.error_code),
                                              self._explained(sub, plan, response.result.error_string, settings))
                continue
            why = self.context.staleness(sub.source, sub.joints, settings)
            silent = time.monotonic() - sub.last_heard
            if why is None and silent > quiet_limit:
                time.sleep(FEEDBACK_GRACE)
                silent = time.monotonic() - sub.last_heard
            if why is None and silent > quiet_limit + FEEDBACK_GRACE:
                after_end = '' if quiet_limit == settings.feedback_timeout else \
                    f' + {ANSWER_TIMEOUT:g} s for its result after the trajectory end'
                why = (f'its action server stopped answering: no feedback for {silent:.2f} s '
                       f'(feedback_timeout {settings.feedback_timeout:g} s{after_end})')
            if why is not None:
                sub.gone = True
                sub.result = ControllerResult(jtc.GoalOutcome.ABORTED, jtc.INVALID_GOAL,
                                              f'{describe_part(sub.name, self.context.action_names)} is gone: {why}',
                                              gone=True)
                self.context.log.error(sub.result.message)

    def _explained(self, sub: SubGoal, plan: TwinGoalState, message: str, settings: TwinSettings) -> str:
        """``message`` of a controller goal of ``plan``, with the cause when a refused goal's
        part preempted it there (canceled by the twin, but after its start)."""
        refused_start = self.context.handouts.refused_start(sub.name, plan.order)
        if message != PREEMPTED or refused_start is None or refused_start <= plan.start_s:
            return message
        return (f'{message}: the part of a refused goal, whose cancel reached the controller after its start '
                f'(accept_margin {settings.accept_margin:g} s is too short for this PC)')


def check_joints(plan: TwinGoalState, now: float, t: float, names: list[str], desired: tuple,
                 actual: tuple) -> jtc.Verdict:
    """The twin's own path/goal tolerance check of the joints on the actual state.

    Args:
        plan: the running goal (its sampler, trajectory, tolerances); ``plan.reached`` is set
            once the goal tolerance has held after the end.
        now: the node's time, s.
        t: the trajectory time the desired state is sampled at, s (negative before the start).
        names: the J goal joints.
        desired: (positions rad, velocities rad/s), arrays (J,).
        actual: (positions rad, velocities rad/s), arrays (J,).

    Returns:
        the verdict: RUNNING while it runs within its path tolerance (and after the end while
        the goal tolerance has held once, waiting for the controllers), else the check's.
    """
    (desired_pos, desired_vel), (pos, vel) = desired, actual
    if now < plan.sampler.end_s:
        if t >= 0:
            return jtc.check_path(names, desired_pos, desired_vel, pos, vel, plan.tolerances)
        return jtc.RUNNING_VERDICT
    target_vel = None if plan.trajectory.velocities is None else plan.trajectory.velocities[-1]
    check = jtc.check_goal(names, plan.trajectory.positions[-1], pos, vel, plan.tolerances,
                           now - plan.sampler.end_s, target_vel=target_vel)
    if check.outcome is jtc.GoalOutcome.SUCCEEDED:
        plan.reached = True
    elif plan.reached and check.outcome is jtc.GoalOutcome.ABORTED:
        check = jtc.Verdict(jtc.GoalOutcome.RUNNING, jtc.SUCCESSFUL, check.message)   # wait for the controllers
    return check
