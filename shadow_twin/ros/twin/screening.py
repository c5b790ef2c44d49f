"""The twin's screening of a goal: the checks that accept, reject or abort it and send nothing.

:meth:`GoalScreening.screen_goal` runs in the goal callback before anything is sent (the
joints and the base part validated, the actual state waited for, the liveness of every part
it needs); :meth:`GoalScreening.staleness` judges a controller's joint states, at intake and
while its part runs; :func:`check_joints` is the twin's own path/goal tolerance check on the
actual state. The order and the rules: ``docs/goal_lifecycle.md``.
"""

from __future__ import annotations

import time
from typing import Callable

from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.common.stamps import to_seconds
from shadow_twin.control import jtc
from shadow_twin.control import twin_split as split
from shadow_twin.ros.action_client import LockedActionClient
from shadow_twin.ros.twin.base.anchor import AnchorError
from shadow_twin.ros.twin.base.driver import BaseDriver, base_goal_from_request, has_base_part
from shadow_twin.ros.twin.goal import TwinGoalState, describe_part, part_source
from shadow_twin.ros.twin.inputs import JointStateCache

#: Seconds after the start within which a goal waits for joint states or odometry that have not
#: arrived yet (discovery), s.
STARTUP_GRACE = 10.0


class GoalScreening:
    """Screens twin goals: every check before a goal's parts are sent; it sends nothing.

    Args:
        mode: ``sim``, ``real`` or ``both``.
        controllers: the real controllers (joint globs).
        limits: {joint: JointLimits} of the model's joints (position limits, rad).
        action_names: {controller name (``split.SIM`` for the sim): its action}.
        clients: {controller name: its action client} (``wait_for_server`` only).
        states: the node's :class:`JointStateCache`.
        actual_source: where "actual" comes from: 'sim' or 'real'.
        base: the base driver, None without a base.
        base_sides: the bases a base goal drives ('real' and/or 'sim').
        now_s: the node's clock, s.
        started: monotonic s of the server's start (for :data:`STARTUP_GRACE`).
    """

    def __init__(self, mode: str, controllers: list[split.ControllerSpec], limits: dict[str, jtc.JointLimits],
                 action_names: dict[str, str], clients: dict[str, LockedActionClient], states: JointStateCache,
                 actual_source: str, base: BaseDriver | None, base_sides: list[str], now_s: Callable[[], float],
                 started: float) -> None:
        self.mode = mode
        self.controllers = controllers
        self.limits = limits
        self.joints = list(limits)
        self.action_names = action_names
        self.clients = clients
        self.states = states
        self.actual_source = actual_source
        self.base = base
        self.base_sides = base_sides
        self.now_s = now_s
        self.started = started

    def screen_goal(self, request, settings: dict, preview: bool = False) -> TwinGoalState:
        """Check the goal (joints, base), then the liveness of every part it needs; returns its
        plan (stamp, trajectory, tolerances, split, base goal; nothing sent yet).

        Args:
            request: the ``FollowJointTrajectory.Goal``.
            settings: the twin's current settings (see :class:`~shadow_twin.ros.twin.server.TwinTrajectoryServer`).
            preview: screen for a preview (``/twin/preview``): the same checks of the goal itself,
                but nothing is done (the sim base is not re-anchored) and no controller needs to
                be there (their liveness is not checked).

        Raises:
            jtc.GoalRejected: with the reason (error code and message).
        """
        with_base = has_base_part(request)
        with_joints = not with_base or bool(len(request.trajectory.joint_names) or len(request.trajectory.points))
        if with_base and self.base is None:
            raise jtc.GoalRejected(jtc.INVALID_JOINTS, (
                f'the goal has a multi_dof_trajectory (joints {list(request.multi_dof_trajectory.joint_names)}) '
                f'but this twin drives no base (base.enabled is false)'))
        plan = TwinGoalState(split.goal_stamp(to_seconds(request.trajectory.header.stamp) if with_joints else None,
                                         to_seconds(request.multi_dof_trajectory.header.stamp) if with_base else None))
        if with_joints:
            self._screen_joints(request, plan, settings)
        else:
            plan.reached = True
        if with_base:
            self._screen_base(request, plan, settings, anchor=not preview)
        if not preview:
            self._check_alive(plan, settings)
        return plan

    def staleness(self, source: str, joints: list[str], settings: dict) -> str | None:
        """Why the ``source`` joint states of ``joints`` count as stopped, or None.

        Judged only on data the listener had the chance to take: when the newest state is
        older than ``joint_state_timeout`` (s; the sim's: ``sim_joint_state_timeout``), the
        listener is given one more turn (up to 0.1 s) and the age is read again, so that a stall
        of this process is not blamed on the controller."""
        name = 'sim_joint_state_timeout' if source == 'sim' else 'joint_state_timeout'
        timeout = settings[name]
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

    def _screen_joints(self, request, plan: TwinGoalState, settings: dict) -> None:
        """The joint part: JTC rules against the model, tolerances, the split by controller."""
        try:
            limits = {j: jtc.JointLimits(lim.lower, lim.upper, settings['velocity_limits'].get(j))
                      for j, lim in self.limits.items()}
        except ShadowTwinError as exc:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'velocity_limits parameter is invalid: {exc}') from None
        names = list(request.trajectory.joint_names)
        known = set(self.joints)
        # just started: give the joint states a moment to arrive
        self._wait_for_first_states(self.actual_source, [j for j in names if j in known], settings)
        actual = self.states.get(self.actual_source)
        current = {j: actual[j][0] for j in names if j in actual} or None
        plan.trajectory = jtc.validate_goal_msg(request.trajectory, self.joints, limits, self.now_s(),
                                                settings['allow_partial_joints_goal'], current_positions=current)
        plan.tolerances = jtc.tolerances_for_goal(settings['constraints'], request, self.joints)
        plan.goal_split = split.split_goal(names, self.controllers, self.mode)
        missing = [j for j in names if j not in actual]
        if missing:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'no {self.actual_source} joint state for {missing} yet')

    def _screen_base(self, request, plan: TwinGoalState, settings: dict, anchor: bool = True) -> None:
        """The base part: re-anchor the sim base first when the bases stand apart (mode both,
        :class:`~shadow_twin.ros.twin.base.anchor.BaseAnchor`; ``anchor`` False: not), then
        ``base_goal_from_request`` from the actual base's pose. A goal that moves the bases
        (``anchor``) is judged only on fresh odometry: a base that is missing is named first."""
        if anchor:
            self._check_bases(settings)
        if anchor and self.base.anchor is not None and not self.base.busy():
            try:
                self.base.anchor.anchor_if_apart(*settings['base'].anchor_offsets)
            except AnchorError as exc:
                raise jtc.GoalRejected(jtc.INVALID_GOAL, f'the sim base stands apart from the real base and could '
                                                         f'not be re-anchored: {exc}') from None
        pose = self.base.current_pose(self.actual_source,
                                      wait_s=max(0.0, self._first_data_deadline(settings) - time.monotonic()))
        plan.base_goal = base_goal_from_request(request, settings['base'], self.now_s(), pose)

    def _first_data_deadline(self, settings: dict) -> float:
        """Until when (monotonic s) a goal waits for data that has never arrived: ``server_timeout``
        s from now, and within ``STARTUP_GRACE`` s of this server's start (DDS discovery of every
        publisher takes seconds on a loaded machine; a goal sent as soon as the twin answers would
        otherwise be rejected for data that is on its way)."""
        return max(time.monotonic() + settings['server_timeout'], self.started + STARTUP_GRACE)

    def _wait_for_first_states(self, source: str, joints: list[str], settings: dict) -> None:
        """Wait, until :meth:`_first_data_deadline`, while a joint of ``joints`` has never had a
        ``source`` state."""
        deadline = self._first_data_deadline(settings)
        while joints and self.states.oldest(source, joints)[1] == float('inf') and time.monotonic() < deadline:
            time.sleep(0.01)

    def _check_alive(self, plan: TwinGoalState, settings: dict) -> None:
        """Every controller and base the goal needs is there (data fresh, action server found).
        Just after a start, a source whose joint states have not arrived yet (DDS discovery of a
        publisher takes a moment) is waited for, up to ``server_timeout`` s."""
        for name in plan.goal_split.groups:
            self._wait_for_first_states(part_source(name), plan.goal_split.joints_of(name), settings)
        for name in plan.goal_split.groups:
            gone = self.staleness(part_source(name), plan.goal_split.joints_of(name), settings)
            if gone is not None:
                raise jtc.GoalRejected(jtc.INVALID_GOAL, f'{describe_part(name, self.action_names)} is gone: {gone}')
            if not self.clients[name].wait_for_server(timeout_sec=settings['server_timeout']):
                raise jtc.GoalRejected(jtc.INVALID_GOAL, f'{describe_part(name, self.action_names)}: action server '
                                                         f'is not available (waited {settings["server_timeout"]:g} s)')
        if plan.base_goal is not None:
            self._check_bases(settings)

    def _check_bases(self, settings: dict) -> None:
        """Every base the twin drives has fresh odometry and a subscriber to its commands (just
        after a start, the first odometry is waited for, up to ``server_timeout`` s)."""
        for side in self.base_sides:
            self.base.current_pose(side, wait_s=max(0.0, self._first_data_deadline(settings) - time.monotonic()))
            why = self.base.missing(side)
            if why is not None:
                raise jtc.GoalRejected(jtc.INVALID_GOAL, f'{self.base.describe(side)} is missing: {why}')


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
