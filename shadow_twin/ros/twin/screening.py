"""Step 1 of a twin goal (screen -> preview -> dispatch -> follow): the checks that accept or reject
it, and send nothing.

:meth:`GoalScreening.screen_goal` runs in the goal callback before anything is sent: the joints and
the base part validated, the actual state waited for, the liveness of every part it needs (the
context's :meth:`~shadow_twin.ros.twin.context.GoalContext.staleness`). ``/twin/preview`` screens
its requests with it too. The order and the rules: ``docs/goal_lifecycle.md``.
"""

from __future__ import annotations

import time

from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.common.stamps import to_seconds
from shadow_twin.control import jtc
from shadow_twin.ros.twin.base.driver import base_goal_from_request, has_base_part
from shadow_twin.ros.twin.context import GoalContext
from shadow_twin.ros.twin.goal import TwinGoalState, describe_part, part_source
from shadow_twin.twin.split import split_goal
from shadow_twin.twin.timing import goal_stamp
from shadow_twin.ros.twin.parameters import TwinSettings

#: Seconds after the start within which a goal waits for joint states or odometry that have not
#: arrived yet (discovery), s.
STARTUP_GRACE = 10.0


class GoalScreening:
    """Screens twin goals: every check before a goal's parts are sent; it sends nothing (the sim
    base's re-anchoring is the dispatch's, the first thing it sends).

    Args:
        context: the goal path's :class:`~shadow_twin.ros.twin.context.GoalContext`.
    """

    def __init__(self, context: GoalContext) -> None:
        self.context = context

    def screen_goal(self, request, settings: TwinSettings, preview: bool = False) -> TwinGoalState:
        """Check the goal (joints, base), then the liveness of every part it needs; returns its
        plan (stamp, trajectory, tolerances, split, base goal; nothing sent yet).

        Args:
            request: the ``FollowJointTrajectory.Goal``.
            settings: the twin's current settings (:class:`~shadow_twin.ros.twin.parameters.TwinSettings`).
            preview: screen for a preview (``/twin/preview``): the same checks of the goal itself,
                but no controller or base needs to be there (their liveness is not checked).

        Raises:
            jtc.GoalRejected: with the reason (error code and message).
        """
        with_base = has_base_part(request)
        with_joints = not with_base or bool(len(request.trajectory.joint_names) or len(request.trajectory.points))
        if with_base and self.context.base is None:
            raise jtc.GoalRejected(jtc.INVALID_JOINTS, (
                f'the goal has a multi_dof_trajectory (joints {list(request.multi_dof_trajectory.joint_names)}) '
                f'but this twin drives no base (base.enabled is false)'))
        plan = TwinGoalState(goal_stamp(to_seconds(request.trajectory.header.stamp) if with_joints else None,
                                         to_seconds(request.multi_dof_trajectory.header.stamp) if with_base else None))
        if with_joints:
            self._screen_joints(request, plan, settings)
        else:
            plan.reached = True
        if with_base:
            self._screen_base(request, plan, settings, moves=not preview)
        if not preview:
            self._check_alive(plan, settings)
        return plan

    def _screen_joints(self, request, plan: TwinGoalState, settings: TwinSettings) -> None:
        """The joint part: JTC rules against the model, tolerances, the split by controller."""
        try:
            limits = {j: jtc.JointLimits(lim.lower, lim.upper, settings.velocity_limits.get(j))
                      for j, lim in self.context.limits.items()}
        except ShadowTwinError as exc:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'velocity_limits parameter is invalid: {exc}') from None
        names = list(request.trajectory.joint_names)
        context = self.context
        known = set(context.joints)
        # just started: give the joint states a moment to arrive
        self._wait_for_first_states(context.actual_source, [j for j in names if j in known], settings)
        actual = context.actual()
        current = {j: actual[j][0] for j in names if j in actual} or None
        plan.trajectory = jtc.validate_goal_msg(request.trajectory, context.joints, limits, context.now_s(),
                                                settings.allow_partial_joints_goal, current_positions=current)
        plan.tolerances = jtc.tolerances_for_goal(settings.constraints, request, context.joints)
        plan.goal_split = split_goal(names, context.controllers, context.mode)
        missing = [j for j in names if j not in actual]
        if missing:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'no {context.actual_source} joint state for {missing} yet')

    def _screen_base(self, request, plan: TwinGoalState, settings: TwinSettings, moves: bool = True) -> None:
        """The base part: ``base_goal_from_request`` from the actual base's pose. A goal that moves
        the bases (``moves``; not a preview) is judged only on fresh odometry: a base that is missing
        is named first."""
        if moves:
            self._check_bases(settings)
        pose = self.context.base.current_pose(
            self.context.actual_source, wait_s=max(0.0, self._first_data_deadline(settings) - time.monotonic()))
        plan.base_goal = base_goal_from_request(request, settings.base, self.context.now_s(), pose)

    def _first_data_deadline(self, settings: TwinSettings) -> float:
        """Until when (monotonic s) a goal waits for data that has never arrived: ``server_timeout``
        s from now, and within ``STARTUP_GRACE`` s of this server's start (DDS discovery of every
        publisher takes seconds on a loaded machine; a goal sent as soon as the twin answers would
        otherwise be rejected for data that is on its way)."""
        return max(time.monotonic() + settings.server_timeout, self.context.started + STARTUP_GRACE)

    def _wait_for_first_states(self, source: str, joints: list[str], settings: TwinSettings) -> None:
        """Wait, until :meth:`_first_data_deadline`, while a joint of ``joints`` has never had a
        ``source`` state."""
        deadline = self._first_data_deadline(settings)
        while joints and self.context.states.oldest(source, joints)[1] == float('inf') and time.monotonic() < deadline:
            time.sleep(0.01)

    def _check_alive(self, plan: TwinGoalState, settings: TwinSettings) -> None:
        """Every controller and base the goal needs is there (data fresh, action server found).
        Just after a start, a source whose joint states have not arrived yet (DDS discovery of a
        publisher takes a moment) is waited for, up to ``server_timeout`` s."""
        for name in plan.goal_split.groups:
            self._wait_for_first_states(part_source(name), plan.goal_split.joints_of(name), settings)
        for name in plan.goal_split.groups:
            gone = self.context.staleness(part_source(name), plan.goal_split.joints_of(name), settings)
            if gone is not None:
                part = describe_part(name, self.context.action_names)
                raise jtc.GoalRejected(jtc.INVALID_GOAL, f'{part} is gone: {gone}')
            if not self.context.clients[name].wait_for_server(timeout_sec=settings.server_timeout):
                part = describe_part(name, self.context.action_names)
                raise jtc.GoalRejected(jtc.INVALID_GOAL, f'{part}: action server is not available (waited '
                                                         f'{settings.server_timeout:g} s)')
        if plan.base_goal is not None:
            self._check_bases(settings)

    def _check_bases(self, settings: TwinSettings) -> None:
        """Every base the twin drives has fresh odometry and a subscriber to its commands (just
        after a start, the first odometry is waited for, up to ``server_timeout`` s)."""
        base = self.context.base
        for side in self.context.base_sides:
            base.current_pose(side, wait_s=max(0.0, self._first_data_deadline(settings) - time.monotonic()))
            why = base.missing(side)
            if why is not None:
                raise jtc.GoalRejected(jtc.INVALID_GOAL, f'{base.describe(side)} is missing: {why}')

