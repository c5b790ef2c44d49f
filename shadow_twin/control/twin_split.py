"""ROS-free logic of the twin's trajectory action server (``shadow_twin.ros.twin.server``).

* :class:`ControllerSpec` / :func:`controllers_from_config`: the real trajectory
  controllers and the joints (fnmatch globs on ROS names) each one drives.
* :func:`split_goal`: which goal joints go to which real controller (first
  matching controller wins) and to the sim (which gets every joint).
* :func:`pick` / :func:`filter_tolerances`: per-controller slices of point
  fields and JointTolerance lists (duck-typed, no message types needed).
* :func:`goal_stamp`: the stamp of a goal whose joints and base (``multi_dof_trajectory``)
  may both carry one; :func:`start_stamp`: the one stamped start time all controllers
  (and the base followers) get; :func:`acceptance_deadline`: when they must all have
  accepted it.
* :func:`base_sides`: which bases (real, sim) a base goal drives in a mode.
* :class:`DesiredSampler`: the desired state of a goal at a given time, as the
  JTC interpolates it (from the state at acceptance to the first point), the speed-scaled
  (UR) joints on the scaled clock.
* :func:`state_arrays`: actual state in goal joint order (sim minus real per
  joint is ``shadow_twin.monitoring.joint.error.joint_error``, published by the twin monitor).
* :func:`oldest_state`: the liveness rule, how old a controller's newest data for
  its joints is (a controller is gone when that exceeds ``joint_state_timeout``).
* :class:`ControllerResult` / :func:`decide`: the twin's verdict from its own
  tolerance check and how the controller goals it started ended.

Units: positions rad, velocities rad/s, times s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.globs import matches
from shadow_twin.control import jtc
from shadow_twin.control.scaled_time import ScaledClock
from shadow_twin.control.trajectory import JointTrajectory

MODES = ('sim', 'real', 'both')
#: Controller name used for the simulation in splits and outcomes.
SIM = 'sim'


def parse_mode(mode: str) -> str:
    """``mode`` lower-cased; ConfigError unless one of sim, real, both."""
    value = str(mode).strip().lower()
    if value not in MODES:
        raise ConfigError(f'mode must be one of {list(MODES)}, got {mode!r}')
    return value


@dataclass(frozen=True)
class ControllerSpec:
    """A real joint trajectory controller: its name, action and joint globs."""

    name: str
    action: str
    joints: tuple[str, ...]

    def matches(self, joint: str) -> bool:
        """True if ``joint`` matches one of the globs (case-sensitive)."""
        return matches(joint, self.joints)


def controllers_from_config(names: Sequence[str], entries: Mapping[str, Mapping[str, Any]]) -> list[ControllerSpec]:
    """Controllers ``names`` (in order) from ``{name: {action: str, joints: [globs]}}``.

    Raises ConfigError: a name listed twice, or without an action or joints.
    """
    out = []
    seen = set()
    for name in names:
        name = str(name)
        if name in seen:
            raise ConfigError(f'real controller {name!r} is listed twice')
        seen.add(name)
        entry = entries.get(name) or {}
        action = str(entry.get('action') or '').strip()
        joints = tuple(str(j) for j in (entry.get('joints') or ()) if str(j).strip())
        if not action:
            raise ConfigError(f'real controller {name!r} has no action (controllers.{name}.action)')
        if not joints:
            raise ConfigError(f'real controller {name!r} has no joints (controllers.{name}.joints)')
        out.append(ControllerSpec(name, action, joints))
    return out


@dataclass
class GoalSplit:
    """Where each goal joint goes.

    Attributes:
        joint_names: the goal's joints, in goal order.
        groups: {controller name: indices into ``joint_names``} for every real
            controller that gets part of the goal (in config order); the sim, when
            it takes part, is under :data:`SIM` with every index.
    """

    joint_names: list[str]
    groups: dict[str, list[int]]

    def joints_of(self, controller: str) -> list[str]:
        """The goal joints sent to ``controller``."""
        return [self.joint_names[i] for i in self.groups[controller]]

    @property
    def real(self) -> list[str]:
        """Names of the real controllers taking part."""
        return [name for name in self.groups if name != SIM]


def split_goal(joint_names: Sequence[str], controllers: Sequence[ControllerSpec], mode: str) -> GoalSplit:
    """Split goal joints by controller.

    In ``real`` and ``both`` mode every joint must match a real controller
    (the first matching one in ``controllers`` takes it); ``sim`` and ``both``
    send all joints to the sim.
    Raises GoalRejected(INVALID_JOINTS) for a joint no real controller drives.
    """
    mode = parse_mode(mode)
    names = [str(j) for j in joint_names]
    groups: dict[str, list[int]] = {}
    if mode in ('real', 'both'):
        unmatched = []
        for i, joint in enumerate(names):
            owner = next((c for c in controllers if c.matches(joint)), None)
            if owner is None:
                unmatched.append(joint)
            else:
                groups.setdefault(owner.name, []).append(i)
        if unmatched:
            raise jtc.GoalRejected(jtc.INVALID_JOINTS, f'no real controller drives joint(s) {unmatched} '
                                                       f'(controllers: {[c.name for c in controllers]})')
        order = [c.name for c in controllers]
        groups = {name: groups[name] for name in order if name in groups}
    if mode in ('sim', 'both'):
        groups[SIM] = list(range(len(names)))
    return GoalSplit(names, groups)


def pick(values: Sequence, indices: Sequence[int]) -> list:
    """``values`` at ``indices`` ([] if ``values`` is empty: an absent point field)."""
    if values is None or len(values) == 0:
        return []
    return [values[i] for i in indices]


def filter_tolerances(tolerances: Iterable | None, joints: Iterable[str]) -> list:
    """The JointTolerance entries (objects or mappings with ``name``) of ``joints``."""
    keep = set(joints)
    out = []
    for tol in tolerances or ():
        name = tol.get('name') if isinstance(tol, Mapping) else getattr(tol, 'name', None)
        if name in keep:
            out.append(tol)
    return out


def base_sides(mode: str) -> list[str]:
    """The bases a goal's ``multi_dof_trajectory`` drives: 'real' (mode real, both) and 'sim'
    (mode sim, both), in that order."""
    mode = parse_mode(mode)
    return [side for side, modes in (('real', ('real', 'both')), ('sim', ('sim', 'both'))) if mode in modes]


#: Largest difference between the stamps of a goal's joint and base trajectories, s.
STAMP_MATCH = 1e-6


def goal_stamp(joint_stamp_s: float | None, base_stamp_s: float | None) -> float:
    """The ``header.stamp`` (s; 0 = start when accepted) of a goal whose ``trajectory`` and
    ``multi_dof_trajectory`` may each be given (None: that part is absent). Both parts start
    together, so two non-zero stamps must agree (within :data:`STAMP_MATCH`); a zero stamp
    takes the other's. Raises GoalRejected(INVALID_GOAL) for two different stamps."""
    stamps = [s for s in (joint_stamp_s, base_stamp_s) if s is not None and s != 0.0]
    if len(stamps) == 2 and abs(stamps[0] - stamps[1]) > STAMP_MATCH:
        raise jtc.GoalRejected(jtc.INVALID_GOAL, f'trajectory and multi_dof_trajectory are stamped to start at '
                                                 f'different times ({stamps[0]:.9f} s and {stamps[1]:.9f} s); '
                                                 f'the twin starts all parts at one time')
    return stamps[0] if stamps else 0.0


def start_stamp(goal_stamp_s: float, now_s: float, lead_s: float) -> float:
    """The common start time, s: ``now + lead`` for an unstamped goal (stamp 0),
    else the goal's own stamp (a future one delays the start; a past one, already
    validated to end in the future, is joined mid-way as the JTC does)."""
    if goal_stamp_s == 0.0:
        return now_s + lead_s
    return goal_stamp_s


def acceptance_deadline(start_s: float, now_s: float, lead_s: float, margin_s: float, longest_s: float) -> float:
    """The time (s, the clock of ``now_s``) by which every controller must have accepted its
    part of a goal starting at ``start_s``: ``margin_s`` before the start, so that cancels
    still reach the controllers before anything moves; for a start less than ``lead_s``
    ahead (a stamped goal sent late) ``now + lead - margin``; at most ``longest_s`` from now."""
    return min(max(start_s, now_s + lead_s) - margin_s, now_s + longest_s)


class DesiredSampler:
    """Desired state of a goal trajectory over time; the trajectory time of its speed-scaled
    joints runs at the arm's speed scaling, as on the UR's scaled JTC (:class:`ScaledClock`).

    Args:
        trajectory: the goal (JointTrajectory, times from its start).
        start_positions: (J,) positions at acceptance, rad; prepended at t = 0
            (as the JTC does) when the first point is later; NaN entries take
            the first point's value.
        start_s: start time, s (same clock as the ``now`` passed to :meth:`at`).
        scaled: (J,) bool, the joints whose trajectory time runs at the speed scaling
            (:func:`~shadow_twin.control.scaled_time.scaled_mask`); None: none.
        scaling: the speed scaling at acceptance, fraction 0..1 (:meth:`set_scaling` for changes).
        now_s: the time of acceptance, s (a start in the past is joined mid-way); None: ``start_s``.
    """

    def __init__(self, trajectory: JointTrajectory, start_positions: Sequence[float], start_s: float,
                 scaled: Sequence[bool] | None = None, scaling: float = 1.0, now_s: float | None = None) -> None:
        start = np.asarray(start_positions, dtype=float).reshape(-1)
        start = np.where(np.isfinite(start), start, trajectory.positions[0])
        self.trajectory = trajectory.with_start(start)
        self.start_s = float(start_s)
        self.duration = trajectory.duration
        self.scaled = (np.zeros(len(trajectory.joint_names), dtype=bool) if scaled is None
                       else np.asarray(scaled, dtype=bool).reshape(-1))
        self.clock = ScaledClock(self.start_s, scaling, since=now_s)
        self._end_s: float | None = None          # the scaled end, once passed

    @property
    def scaling(self) -> float:
        """The speed scaling the scaled joints run at now, fraction 0..1."""
        return self.clock.scaling

    @property
    def end_s(self) -> float:
        """When the trajectory ends, s: its last point's time, for the scaled joints on their
        clock at the current scaling (``inf`` while it is 0 short of the end)."""
        if self._end_s is not None:
            return self._end_s
        if not self.scaled.any():
            return self.start_s + self.duration
        return max(self.start_s + self.duration, self.clock.reaches(self.duration))

    def set_scaling(self, now_s: float, scaling: float) -> None:
        """The speed scaling (fraction 0..1) is ``scaling`` from ``now_s`` (s) on; the scaled
        joints' lag so far is integrated at the old one; an end already passed stays."""
        if self._end_s is None and self.scaled.any() and now_s >= self.end_s:
            self._end_s = self.end_s
        self.clock.set_scaling(now_s, scaling)

    def _state(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(J,) positions, velocities, accelerations at trajectory time ``t`` (s): before the start
        the start state at rest, after the end the last point."""
        pos, vel, acc = self.trajectory.sample(min(max(t, 0.0), self.duration))
        if t < 0 or t > self.duration:
            vel, acc = np.zeros_like(vel), np.zeros_like(acc)
            if t > self.duration and self.trajectory.velocities is not None:
                vel = np.array(self.trajectory.velocities[-1], dtype=float)
        return pos, vel, acc

    def at(self, now_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """(positions, velocities, accelerations, s since start) at ``now_s``; before the
        start the start state (at rest) is desired, after the end the last point. The scaled
        joints are sampled at their own trajectory time, velocities times the scaling s and
        accelerations times s^2 (as the scaled JTC commands them); the s since start is the
        unscaled one."""
        t = now_s - self.start_s
        pos, vel, acc = self._state(t)
        if self.scaled.any():
            s, k = self.clock.scaling, self.scaled
            slow = self._state(float(self.clock.trajectory_time(np.array([now_s]))[0]))
            pos[k], vel[k], acc[k] = slow[0][k], s * slow[1][k], s * s * slow[2][k]
        return pos, vel, acc, t


def state_arrays(joint_names: Sequence[str], state: Mapping[str, tuple[float, float]]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(positions, velocities) of ``joint_names`` from ``{joint: (position, velocity)}``;
    NaN where a joint has no state (a NaN counts as a tolerance violation)."""
    pos = np.array([state[j][0] if j in state else math.nan for j in joint_names], dtype=float)
    vel = np.array([state[j][1] if j in state else math.nan for j in joint_names], dtype=float)
    return pos, vel


def oldest_state(received: Mapping[str, float], joints: Sequence[str], now: float) -> tuple[str, float]:
    """The joint of ``joints`` whose last state arrived longest ago, and how long ago (s).

    Args:
        received: {joint: monotonic time its last state arrived, s}.
        joints: the joints a controller drives in a goal (non-empty).
        now: monotonic time, s.
    Returns:
        (joint, age s); age is ``inf`` for a joint never received.
    Raises:
        ValueError: ``joints`` is empty.
    """
    if not joints:
        raise ValueError('oldest_state needs at least one joint')
    ages = [(now - received[j]) if j in received else math.inf for j in joints]
    k = int(np.argmax(ages))
    return joints[k], float(ages[k])


@dataclass(frozen=True)
class ControllerResult:
    """How a controller goal ended: its outcome (SUCCEEDED, ABORTED or CANCELED) and
    the code and message of its Result; ``gone`` when the twin gave up on the
    controller (its joint states stopped or its action server stopped answering):
    ABORTED, and the message says why."""

    outcome: jtc.GoalOutcome
    code: int = jtc.SUCCESSFUL
    message: str = ''
    gone: bool = False


#: What a reached goal reached, by default (a goal of joints).
REACHED_JOINTS = 'all joints within their goal tolerances'


def decide(check: jtc.Verdict, reached: bool, results: Mapping[str, ControllerResult | None],
           reached_text: str = REACHED_JOINTS) -> jtc.Verdict:
    """The twin goal's verdict from its own check and the controller goals' results.

    Args:
        check: ``jtc.check_path``/``check_goal`` on the actual state (real; sim in sim mode).
        reached: the twin's check has succeeded at some point after the end.
        results: {controller: ControllerResult, or None while its goal runs}; the base
            followers' runs count as controllers.
        reached_text: what the success message says was reached.
    Returns:
        A controller that is gone aborts with its message (INVALID_GOAL); a
        controller goal that ended other than succeeded aborts (with its code,
        INVALID_GOAL if it had none); a failed own check aborts; success needs
        ``reached`` and every controller succeeded; else running.
    """
    for name, result in results.items():
        if result is not None and result.gone:
            return jtc.Verdict.aborted(result.message)
        if result is not None and result.outcome is not jtc.GoalOutcome.SUCCEEDED:
            code = result.code if result.code != jtc.SUCCESSFUL else jtc.INVALID_GOAL
            text = f'{name} controller goal {result.outcome.value}'
            if result.code != jtc.SUCCESSFUL:
                text += f' ({jtc.result_name(result.code)})'
            if result.message:
                text += f': {result.message}'
            return jtc.Verdict.aborted(text, code)
    if check.outcome is jtc.GoalOutcome.ABORTED:
        return check
    if reached and all(r is not None for r in results.values()):
        return jtc.Verdict(jtc.GoalOutcome.SUCCEEDED, jtc.SUCCESSFUL,
                           f'goal reached: {reached_text}; controllers succeeded: {", ".join(results) or "none"}')
    return jtc.Verdict(jtc.GoalOutcome.RUNNING, jtc.SUCCESSFUL, check.message)
