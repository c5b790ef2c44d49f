"""Judging a predicted run as the joint trajectory controller and the robots' limits would (ROS-free).

:func:`judge` turns a :class:`~shadow_twin.simulation.preview.goal.PredictedRun` into a
:class:`Prediction`: every failure found, each naming the joint (or contact pair, or the base),
the time from the start and by how much, and the figures published with every preview (per-joint
predicted error, first contact, peak effort per joint, predicted duration). The checks:

* ``position_limit``: a driven joint commanded past its MJCF range (the goal's spline overshoots a
  point near the limit), or predicted past it by more than ``position_limit_margin`` (INVALID_GOAL);
* ``path_tolerance``: a goal joint outside its path tolerance before the end (the JTC's
  ``state_tolerance``, :func:`shadow_twin.control.jtc.check_path`; PATH_TOLERANCE_VIOLATED);
* ``goal_tolerance``: the goal joints not within their goal tolerance ``goal_time`` after the end
  (:func:`shadow_twin.control.jtc.check_goal`; GOAL_TOLERANCE_VIOLATED);
* ``effort``: a joint's actuator effort above its published limit (INVALID_GOAL);
* ``contact``: a disallowed contact (:class:`~shadow_twin.simulation.preview.contacts.ContactChecker`;
  INVALID_GOAL);
* ``grasp``: a held object predicted to slide in the hand past ``grasp_slide_limit`` or to leave it
  (:class:`~shadow_twin.simulation.preview.grasp.GraspWatch`; INVALID_GOAL);
* ``base_speed`` / ``base_acceleration`` / ``base_yaw_rate``: the base's reference or predicted
  motion above the MiR250's limits (INVALID_GOAL); ``base_tolerance``: the twin's base follower
  would abort (its code); ``base_slip``: a base commanded to stand (no base part) sliding on its wheels
  past ``base.max_slip``, when set (:mod:`shadow_twin.simulation.preview.base_slip`; INVALID_GOAL).

The first failure (earliest in time) is the goal's verdict. Units: rad, rad/s, N m, m, m/s, s.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import numpy as np
from scipy.ndimage import uniform_filter1d

from shadow_twin.control import jtc
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.ur.arm import model_effort_limits
from shadow_twin.simulation.preview.goal import PredictedRun, PreviewGoal
from shadow_twin.simulation.preview.predictor import GoalPredictor
from shadow_twin.simulation.preview.config import PreviewConfig
from shadow_twin.simulation.preview.base_slip import WheelSlip
from shadow_twin.simulation.preview.contacts import ContactChecker, ContactHit
from shadow_twin.simulation.preview.grasp import GraspWatch


@dataclass(frozen=True)
class PreviewFailure:
    """One predicted failure.

    Attributes:
        kind: ``position_limit``, ``path_tolerance``, ``goal_tolerance``, ``effort``, ``contact``, ``grasp``,
            ``base_speed``, ``base_acceleration``, ``base_yaw_rate``, ``base_tolerance`` or ``base_slip``.
        code: the ``FollowJointTrajectory.Result`` error code the goal gets.
        subject: the joint, the contact pair (``body1/body2``), the held object or ``base``.
        time: s from the goal's start.
        amount: by how much the limit is exceeded (rad, N m, m, m/s, m/s^2, rad/s).
        message: one line naming all of it.
    """

    kind: str
    code: int
    subject: str
    time: float
    amount: float
    message: str


@dataclass
class Prediction:
    """The preview of one goal (module doc).

    Attributes:
        failures: every failure found, earliest first (at most one per kind).
        duration: s from the start until the goal is predicted to succeed (the goal tolerance
            holds), None when it fails or is not reached in the simulated time.
        joint_errors: {goal joint: largest |desired - predicted| position before the end, rad}.
        final_errors: {goal joint: target - predicted position at the end of the simulation, rad}.
        peak_efforts: {driven joint: largest |effort| averaged over ``effort_window``, N m}.
        first_contact: the first disallowed contact, None when there is none.
        grasp_slides: {held object: its largest predicted slide in the hand, m (up to its loss)}.
        base: {'peak_speed' m/s, 'peak_reference_speed' m/s, 'peak_reference_acceleration' m/s^2}
            when the model has a base, else {}.
        simulated: goal time the prediction reaches, s (from the goal's start).
        goal_end: goal time at which the goal and its goal-time window end, s: a prediction whose
            ``simulated`` reaches it has judged the whole goal.
    """

    failures: list[PreviewFailure] = field(default_factory=list)
    duration: float | None = None
    joint_errors: dict[str, float] = field(default_factory=dict)
    final_errors: dict[str, float] = field(default_factory=dict)
    peak_efforts: dict[str, float] = field(default_factory=dict)
    first_contact: ContactHit | None = None
    grasp_slides: dict[str, float] = field(default_factory=dict)
    base: dict[str, float] = field(default_factory=dict)
    simulated: float = 0.0
    goal_end: float = 0.0

    @property
    def ok(self) -> bool:
        """True when no failure is predicted."""
        return not self.failures

    @property
    def first(self) -> PreviewFailure | None:
        """The earliest failure, None when there is none."""
        return self.failures[0] if self.failures else None

    def verdict(self) -> jtc.Verdict:
        """SUCCEEDED, or ABORTED with the first failure's code and ``predicted to fail: <message>``."""
        if self.ok:
            done = 'in the simulated time' if self.duration is None else f'after {self.duration:.3f} s'
            return jtc.Verdict(jtc.GoalOutcome.SUCCEEDED, jtc.SUCCESSFUL, f'predicted to succeed {done}')
        return jtc.Verdict(jtc.GoalOutcome.ABORTED, self.first.code, f'predicted to fail: {self.first.message}')

    def summary(self) -> dict:
        """A JSON-ready dict of everything above (floats rounded to 6 digits)."""
        def r(v):
            return None if v is None else round(float(v), 6)
        return {
            'ok': self.ok,
            'verdict': self.verdict().message,
            'first_failure': None if self.first is None else asdict(self.first),
            'failures': [asdict(f) for f in self.failures],
            'predicted_duration': r(self.duration),
            'joint_errors': {k: r(v) for k, v in self.joint_errors.items()},
            'final_errors': {k: r(v) for k, v in self.final_errors.items()},
            'peak_efforts': {k: r(v) for k, v in self.peak_efforts.items()},
            'first_contact': None if self.first_contact is None else asdict(self.first_contact),
            'grasp_slides': {k: r(v) for k, v in self.grasp_slides.items()},
            'base': {k: r(v) for k, v in self.base.items()},
            'simulated': r(self.simulated),
            'goal_end': r(self.goal_end),
        }


def _first(mask: np.ndarray) -> int | None:
    """Index of the first True of ``mask``, None if none."""
    return int(np.argmax(mask)) if mask.any() else None


#: rad past a joint's range the commanded (desired) position may go (float round-off of a goal at the limit).
COMMAND_LIMIT_SLACK = 1e-3


def _past(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, limited: np.ndarray) -> np.ndarray:
    """(N, J) how far each value is past its joint's range (negative inside; -inf unlimited)."""
    past = np.maximum(values - hi, lo - values)
    past[:, ~limited] = -np.inf
    return past


def _limits(run: PredictedRun, model, controller, config: PreviewConfig,
            held: np.ndarray | None = None) -> PreviewFailure | None:
    """The first driven joint driven into its MJCF range's end: commanded past it (the goal's
    spline overshoots a point near the limit), or predicted past it by more than
    ``position_limit_margin`` (a stop hit hard). Only the excess the goal's own commands drive
    counts: with ``held`` ((N, J) positions, rad, of the same start with every joint holding:
    :meth:`GoalPredictor.hold_run`), the excess the start state's own motion reaches without the
    goal (a finger still swinging into its stop) is taken off the predicted one, step by step."""
    ids = controller.joint_ids
    limited = model.jnt_limited[ids].astype(bool)
    if not limited.any():
        return None
    lo, hi = model.jnt_range[ids, 0], model.jnt_range[ids, 1]
    found = []
    for values, slack, what in ((run.desired_positions, COMMAND_LIMIT_SLACK, 'the trajectory commands'),
                                (run.positions, config.position_limit_margin, 'predicted position')):
        past = _past(values, lo, hi, limited)
        if held is not None and values is run.positions:
            own = np.maximum(_past(held[:len(past)], lo, hi, limited), 0.0)
            past[:len(own)] -= own
            what = 'the goal drives the predicted position to'
        n = _first((past > slack).any(axis=1))
        if n is not None:
            found.append((n, past, values, what))
    if not found:
        return None
    n, past, values, what = min(found, key=lambda f: f[0])
    j = int(np.argmax(past[n]))
    joint, side = run.joint_names[j], 'upper' if values[n, j] > hi[j] else 'lower'
    bound = hi[j] if side == 'upper' else lo[j]
    return PreviewFailure('position_limit', jtc.INVALID_GOAL, joint, float(run.times[n]), float(past[n, j]), (
        f'joint {joint!r} is driven into its {side} limit at t = {run.times[n]:.3f} s: {what} '
        f'{values[n, j]:.4g} rad, {past[n, j]:.4g} rad past the limit {bound:.4g} rad'))


def averaged_efforts(run: PredictedRun, window: float) -> np.ndarray:
    """(N, J) the efforts averaged over ``window`` s (centred; 0 or one step: unchanged), N m."""
    dt = float(run.times[1] - run.times[0]) if len(run.times) > 1 else 1.0
    size = int(round(window / dt))
    if size <= 1:
        return run.efforts
    return uniform_filter1d(run.efforts, size, axis=0, mode='constant')   # zero outside the run


def effort_limit_of(joint: str, mjcf_joint: str, recorded: dict[str, float], config: PreviewConfig) -> float | None:
    """N m: the smaller of the arm's published limit recorded in the model (``recorded``, by MJCF
    joint name: :func:`shadow_twin.model.ur.arm.model_effort_limits`, from the arm type's
    joint_limits.yaml) and a lab's own limit in the preview config (by joint name); None: neither."""
    limits = [v for v in (recorded.get(mjcf_joint), config.effort_limit(joint)) if v is not None]
    return min(limits) if limits else None


def _efforts(run: PredictedRun, model, controller, config: PreviewConfig) -> PreviewFailure | None:
    """The first joint whose |effort| (averaged over ``effort_window``) exceeds its effort limit."""
    first = None
    efforts = averaged_efforts(run, config.effort_window)
    recorded = model_effort_limits(model)
    for j, joint in enumerate(run.joint_names):
        limit = effort_limit_of(joint, model.joint(int(controller.joint_ids[j])).name, recorded, config)
        if limit is None:
            continue
        n = _first(np.abs(efforts[:, j]) > limit)
        if n is not None and (first is None or n < first[0]):
            first = (n, j, limit)
    if first is None:
        return None
    n, j, limit = first
    joint, effort = run.joint_names[j], float(efforts[n, j])
    peak = float(np.max(np.abs(efforts[:, j])))
    return PreviewFailure('effort', jtc.INVALID_GOAL, joint, float(run.times[n]), abs(effort) - limit, (
        f'joint {joint!r} needs more effort than its limit at t = {run.times[n]:.3f} s: {abs(effort):.4g} N m '
        f'against {limit:.4g} N m (by {abs(effort) - limit:.4g} N m; peak {peak:.4g} N m; averaged over '
        f'{config.effort_window:g} s)'))


def _tolerances(run: PredictedRun, trajectory: JointTrajectory, tolerances: jtc.Tolerances,
                prediction: Prediction) -> PreviewFailure | None:
    """Path tolerance before the end, goal tolerance after it (the JTC's rules); sets the
    prediction's duration and errors."""
    names = list(trajectory.joint_names)
    cols = [run.joint_names.index(j) for j in names]
    t, q, qd = run.times, run.positions[:, cols], run.velocities[:, cols]
    dq, dqd = run.desired_positions[:, cols], run.desired_velocities[:, cols]
    before = t < run.end_time
    errors = dq - q
    if before.any():
        prediction.joint_errors = dict(zip(names, np.max(np.abs(errors[before]), axis=0).tolist()))
    target = trajectory.positions[-1]
    target_vel = np.zeros(len(names)) if trajectory.velocities is None else trajectory.velocities[-1]
    prediction.final_errors = dict(zip(names, (target - q[-1]).tolist()))
    if len(t) and t[-1] < run.end_time:
        before = np.ones(len(t), dtype=bool)          # a window before the end: path only
    path_pos = np.array([tolerances.path_for(j).position for j in names])
    path_vel = np.array([tolerances.path_for(j).velocity for j in names])
    bad = ((path_pos > 0) & (np.abs(errors) > path_pos)) | ((path_vel > 0) & (np.abs(dqd - qd) > path_vel))
    n = _first(bad.any(axis=1) & before)
    if n is not None:
        verdict = jtc.check_path(names, dq[n], dqd[n], q[n], qd[n], tolerances)
        j = int(np.argmax(bad[n]))
        amount = float(abs(errors[n, j]) - path_pos[j]) if path_pos[j] > 0 and abs(errors[n, j]) > path_pos[j] \
            else float(abs(dqd[n, j] - qd[n, j]) - path_vel[j])
        return PreviewFailure('path_tolerance', verdict.code, names[j], float(t[n]), amount,
                              f'at t = {t[n]:.3f} s, {verdict.message}')
    goal_pos = np.array([tolerances.goal_for(j).position for j in names])
    goal_vel = np.array([tolerances.goal_for(j).velocity for j in names])
    within = ~(((goal_pos > 0) & (np.abs(target - q) > goal_pos))
               | ((goal_vel > 0) & (np.abs(target_vel - qd) > goal_vel))).any(axis=1)
    n = _first(within & ~before)
    if n is not None:
        prediction.duration = float(t[n])
        return None
    if len(t) and t[-1] < run.goal_end - 0.5 * (t[1] - t[0] if len(t) > 1 else 0.0):
        return None                      # the window ends before the goal-time window does: no verdict yet
    after = t - run.end_time
    late = _first(after > tolerances.goal_time) if tolerances.goal_time > 0 else None
    if tolerances.goal_time > 0 and late is None:
        return None                      # the window was not simulated to its end: no verdict
    n = len(t) - 1 if late is None else late
    verdict = jtc.check_goal(names, target, q[n], qd[n], tolerances, max(tolerances.goal_time, 0.0) + 1.0,
                             target_vel=target_vel)
    message = verdict.message.split(': ', 1)[-1]
    off = np.where(goal_pos > 0, np.abs(target - q[n]) - goal_pos, -np.inf)
    j = int(np.argmax(off))
    return PreviewFailure('goal_tolerance', jtc.GOAL_TOLERANCE_VIOLATED, names[j], float(t[n]), float(max(off[j], 0.0)), (
        f'goal tolerance violated {after[n]:.3f} s after the trajectory end (t = {t[n]:.3f} s; goal_time '
        f'{tolerances.goal_time:.3f} s): {message}'))


def _base(run: PredictedRun, goal: PreviewGoal, config: PreviewConfig, prediction: Prediction) -> list[PreviewFailure]:
    """The base's speed, acceleration and yaw rate (reference and predicted) and the follower's verdict."""
    out = []
    limits = config.base
    if run.base_speeds is not None:
        prediction.base['peak_speed'] = float(np.max(np.abs(run.base_speeds), initial=0.0))
        n = _first(np.abs(run.base_speeds) > limits.max_speed)
        if n is not None:
            out.append(PreviewFailure('base_speed', jtc.INVALID_GOAL, 'base', float(run.times[n]),
                                      float(abs(run.base_speeds[n]) - limits.max_speed), (
                f'the base is predicted to drive at {abs(run.base_speeds[n]):.3f} m/s at t = {run.times[n]:.3f} s, '
                f'above the limit {limits.max_speed:.3f} m/s')))
    if run.base_reference is None:
        return out
    t = np.arange(0.0, run.base_reference.duration + 1e-9, 0.005)
    ref = run.base_reference.sample(t)
    speed = np.hypot(ref.x_dot, ref.y_dot)
    accel = np.abs(np.gradient(ref.forward_speed, t)) if len(t) > 1 else np.zeros_like(t)
    prediction.base['peak_reference_speed'] = float(np.max(speed, initial=0.0))
    prediction.base['peak_reference_acceleration'] = float(np.max(accel, initial=0.0))
    checks = [('base_speed', speed, limits.max_speed, 'speed', 'm/s'),
              ('base_acceleration', accel, limits.max_acceleration or np.inf, 'acceleration', 'm/s^2'),
              ('base_yaw_rate', np.abs(ref.yaw_rate), limits.max_yaw_rate, 'yaw rate', 'rad/s')]
    found = []
    for kind, values, limit, what, unit in checks:
        n = _first(values > limit + 1e-9)
        if n is not None:
            found.append(PreviewFailure(kind, jtc.INVALID_GOAL, 'base', float(t[n]), float(values[n] - limit), (
                f"the base trajectory's {what} reaches {values[n]:.3f} {unit} at t = {t[n]:.3f} s, above the "
                f"MiR250's limit {limit:.3f} {unit} (peak {np.max(values):.3f} {unit})")))
    if found:
        # one failure of the trajectory itself: the speed first (an over-fast profile also
        # over-accelerates, earlier), the others named after it
        first, rest = found[0], found[1:]
        if rest:
            first = replace(first, message=first.message + '; also ' + '; '.join(
                f.message.split("'s ", 1)[1] for f in rest))
        out.append(first)
    verdict = run.base_verdict
    if verdict is not None and verdict.outcome is jtc.GoalOutcome.ABORTED:
        when = run.times[-1] if run.base_done_at is None else run.base_done_at
        out.append(PreviewFailure('base_tolerance', verdict.code, 'base', float(when), 0.0,
                                  f'at t = {when:.3f} s, the base would abort: {verdict.message}'))
    return out


def judge(run: PredictedRun, goal: PreviewGoal, model, controller, contacts: ContactChecker,
          config: PreviewConfig, held: np.ndarray | None = None, grasps: GraspWatch | None = None,
          slips: WheelSlip | None = None) -> Prediction:
    """All checks of the module doc on ``run`` (the prediction of ``goal`` on ``model``, driven by
    ``controller``; ``held``: see :func:`_limits`; ``grasps``, ``slips``: the grasp and wheel-slip checks,
    None: none); returns the :class:`Prediction`, failures earliest first (one per kind)."""
    prediction = Prediction(simulated=float(run.times[-1]) if len(run.times) else 0.0, goal_end=run.goal_end)
    efforts = np.abs(averaged_efforts(run, config.effort_window))
    prediction.peak_efforts = dict(zip(run.joint_names, np.max(efforts, axis=0, initial=0.0).tolist()))
    found = [_limits(run, model, controller, config, held), _efforts(run, model, controller, config)]
    if goal.trajectory is not None:
        found.append(_tolerances(run, goal.trajectory, goal.tolerances or jtc.Tolerances(), prediction))
    else:
        prediction.duration = run.end_time
    prediction.first_contact = contacts.first_hit(run.times, run.qpos)
    hit = prediction.first_contact
    if hit is not None:
        found.append(PreviewFailure('contact', jtc.INVALID_GOAL, hit.pair, hit.time, hit.depth, (
            f'contact {hit.pair} (geoms {hit.geom1}, {hit.geom2}) at t = {hit.time:.3f} s, {hit.depth * 1000:.1f} mm '
            f'deep')))
    prediction.grasp_slides, loss = ({}, None) if grasps is None else grasps.judge(run.times, run.qpos)
    if loss is not None:
        found.append(PreviewFailure('grasp', jtc.INVALID_GOAL, loss.name, loss.time, loss.slide,
                                    loss.message(config.grasp_slide_limit)))
    found.extend(_base(run, goal, config, prediction))
    if slips is not None and run.base_poses is not None and goal.base is None:      # the base commanded to stand
        peak, slid = slips.first(run.times, run.qpos, run.base_poses, config.base.max_slip)
        prediction.base['peak_slip'] = peak
        if slid is not None:
            found.append(PreviewFailure('base_slip', jtc.INVALID_GOAL, 'base', slid.time, slid.slip - slid.allowed,
                                        slid.message()))
    failures = sorted((f for f in found if f is not None), key=lambda f: f.time)
    kinds = set()
    for f in failures:
        if f.kind not in kinds:
            kinds.add(f.kind)
            prediction.failures.append(f)
    if prediction.failures:
        prediction.duration = None
    if goal.base is not None and run.base_verdict is not None and prediction.duration is not None:
        if run.base_verdict.outcome is jtc.GoalOutcome.SUCCEEDED and run.base_done_at is not None:
            prediction.duration = max(prediction.duration, run.base_done_at)
    return prediction


def preview_goal(predictor: GoalPredictor, goal: PreviewGoal) -> Prediction:
    """Predict ``goal`` on ``predictor`` and judge it (:func:`judge`). A joint predicted past its
    limit is judged again against the start state's own motion (:meth:`GoalPredictor.hold_run`,
    one more rollout, only then): the excess the goal does not drive does not count. Raises as
    :meth:`GoalPredictor.predict`."""
    return judge_run(predictor, goal, predictor.predict(goal))


def judge_run(predictor: GoalPredictor, goal: PreviewGoal, run: PredictedRun) -> Prediction:
    """:func:`judge` ``run`` (``predictor``'s prediction of ``goal``), with the hold-run
    counterfactual of :func:`preview_goal` for a predicted position limit."""
    prediction = judge(run, goal, predictor.model, predictor.controller, predictor.contacts, predictor.config,
                       grasps=predictor.grasps, slips=predictor.slips)
    limit = next((f for f in prediction.failures if f.kind == 'position_limit'), None)
    if limit is not None and 'predicted position' in limit.message and _moving(goal):
        held = predictor.hold_run(goal, len(run.times))
        prediction = judge(run, goal, predictor.model, predictor.controller, predictor.contacts, predictor.config,
                           held, predictor.grasps, predictor.slips)
    return prediction


#: rad/s below which a start state counts as at rest (no motion of its own to take off).
AT_REST_SPEED = 1e-3


def _moving(goal: PreviewGoal) -> bool:
    """True when the goal's start state moves of itself (a velocity above :data:`AT_REST_SPEED`, or
    a whole state given)."""
    return goal.start.full_state is not None or any(abs(v) > AT_REST_SPEED for v in goal.start.velocities.values())
