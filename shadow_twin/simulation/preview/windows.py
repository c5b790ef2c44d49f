"""A goal predicted in windows: ahead of its execution (the watch), or whole without a length cap (ROS-free).

The twin never previews a whole goal before it starts (that made a goal late by as long as the
preview took, ``docs/preview.md``). Instead:

* :class:`GoalWatch` predicts a goal *while it runs*, in windows of ``watch.horizon`` s, each from
  the live state (the sim's joint states and odometry) at the goal time it starts at, one every
  ``watch.period`` s (each judged from :data:`LIVE_SETTLE` s after its start: the window before
  covered that span). The first window (the *gate*, ``watch.gate`` s: short, so that it is judged
  well before the start) is predicted from the state the goal arrived in, while its parts are being
  sent: a goal failing in it is stopped before anything moves. A failure predicted in a later window stops the goal at once,
  at least ``horizon - period - compute time`` s before the failure (the stopping margin).
* :func:`preview_in_windows` predicts a whole goal window after window, each continuing the previous
  one's predicted state exactly (:attr:`~shadow_twin.simulation.preview.goal.PredictedRun.final_state`):
  any length, bounded memory (one window's rollout at a time), and it stops between two windows
  when asked to (``/twin/preview`` canceled or aborted).

:func:`merge` joins the windows' :class:`~shadow_twin.simulation.preview.checks.Prediction` into one.
Units: s, rad.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from shadow_twin.simulation.preview.goal import PreviewGoal, StartState
from shadow_twin.simulation.preview.predictor import GoalPredictor
from shadow_twin.simulation.preview.checks import Prediction, PreviewFailure, judge, judge_run, preview_goal


def merge(parts: Sequence[Prediction]) -> Prediction:
    """One prediction of consecutive windows ``parts`` (earliest first): failures earliest first,
    one per kind; the largest joint errors and efforts; the first window's duration that says
    one (the goal tolerance first held); the last window's final errors and simulated time; the
    first contact. Raises ValueError for no part."""
    if not parts:
        raise ValueError('no window to merge')
    decided = next((p.duration for p in parts if p.duration is not None), None)
    out = Prediction(simulated=parts[-1].simulated, duration=decided, goal_end=parts[-1].goal_end,
                     final_errors=dict(parts[-1].final_errors))
    kinds = set()
    for failure in sorted((f for p in parts for f in p.failures), key=lambda f: f.time):
        if failure.kind not in kinds:
            kinds.add(failure.kind)
            out.failures.append(failure)
    for part in parts:
        for target, values in ((out.joint_errors, part.joint_errors), (out.peak_efforts, part.peak_efforts),
                               (out.base, part.base)):
            for key, value in values.items():
                target[key] = max(target.get(key, value), value)
        if out.first_contact is None:
            out.first_contact = part.first_contact
    if out.failures:
        out.duration = None
    return out


def preview_in_windows(predictor: GoalPredictor, goal: PreviewGoal, window: float,
                       cancelled: Callable[[], bool] = lambda: False) -> Prediction | None:
    """Predict the whole of ``goal`` (from its start state) in windows of ``window`` s simulated,
    each continuing the previous one's predicted state; stops at the first failure. Returns the
    merged :class:`Prediction`, or None when ``cancelled()`` turned True between two windows.
    Raises ValueError for a ``window`` <= 0, and as :meth:`GoalPredictor.predict`."""
    if not window > 0:
        raise ValueError(f'window must be > 0 s, got {window}')
    parts: list[Prediction] = []
    current = replace(goal, horizon=window)
    while True:
        if cancelled():
            return None
        run = predictor.predict(current)
        if parts == [] and current.start.full_state is None:
            prediction = judge_run(predictor, current, run)   # the first window: the start's own motion off
        else:
            prediction = judge(run, current, predictor.model, predictor.controller, predictor.contacts,
                               predictor.config, grasps=predictor.grasps, slips=predictor.slips)
        parts.append(prediction)
        if not prediction.ok or run.final_state is None or run.times[-1] >= run.goal_end - 1e-9:
            return merge(parts)
        last = {j: float(q) for j, q in zip(run.joint_names, run.positions[-1])}
        start_positions = {**last, **{j: float(q) for j, q in current.start.positions.items() if j not in last}}
        trajectory_start = current.trajectory_start or (
            None if goal.trajectory is None else {j: goal.start.positions[j] for j in goal.trajectory.joint_names
                                                  if j in goal.start.positions})
        base = current.base
        if base is not None and base.start_pose is None and run.base_poses is not None:
            base = replace(base, start_pose=tuple(float(v) for v in run.base_poses[0]))   # where the goal began
        scaled = None if current.scaled_offset is None else \
            current.scaled_offset + (run.times[-1] - current.time_offset) * current.speed_scaling
        current = replace(current, start=StartState(start_positions, {}, full_state=run.final_state),
                          time_offset=float(run.times[-1]), scaled_offset=scaled, trajectory_start=trajectory_start,
                          base=base)


#: s at the start of a window from a *live* state whose failures are not counted: the window's
#: controller starts from the state alone (its servos' internal states are not in the joint states),
#: and the stiff arm servo answers with a transient (247 N m for 0.1 s on the UR5's shoulder lift,
#: a burst of goals in test_cell_faults; 152 N m against the 150 N m limit 0.21 s into a window in
#: CI's ``demo --cell``) that the sim does not have; the window before, which began ``watch.period``
#: (0.25 s) earlier, predicted this span from its own consistent state (so the stopping margin,
#: ``horizon - period - compute``, is unchanged while this stays <= ``horizon - period``).
LIVE_SETTLE = 0.25


@dataclass
class WindowStart:
    """Where a window of a running goal starts (:class:`GoalWatch`'s ``live`` gives it).

    Attributes:
        time_offset: s since the goal's start (0 for the gate, before the start).
        start: the live state then.
        scaled_offset: the speed-scaled joints' trajectory time then, s (None: ``time_offset``).
        speed_scaling: the arm's speed scaling then, fraction (0, 1].
    """

    time_offset: float
    start: StartState
    scaled_offset: float | None = None
    speed_scaling: float = 1.0


class GoalWatch:
    """Predicts a running goal ahead of its execution, window after window (module doc).

    Args:
        predictor: the preview's predictor.
        goal: the goal to watch (trajectory, tolerances, base part, scaled joints; its ``start`` and
            offsets are replaced by each window's).
        horizon: s each window predicts (> 0).
        gate: s the first window predicts (> 0).
        period: s between the starts of two windows (> 0); a window that takes longer is followed at once.
        live: ``live(first) -> WindowStart | None``: the state a window starts from (``first``: the
            gate, from the state the goal arrived in); None: no state now (the window is retried).
        on_window: called with each window's prediction, its :class:`WindowStart` and its compute
            time, s (publishing, logging, waking the goal on a failure); not called after :meth:`stop`.
    Raises:
        ValueError: a horizon, gate or period <= 0.
    """

    def __init__(self, predictor: GoalPredictor, goal: PreviewGoal, horizon: float, gate: float, period: float,
                 live: Callable[[bool], WindowStart | None],
                 on_window: Callable[[Prediction, WindowStart, float], None] = lambda *_: None) -> None:
        if not (horizon > 0 and gate > 0 and period > 0):
            raise ValueError(f'horizon, gate and period must be > 0 s, got {horizon}, {gate}, {period}')
        self.predictor, self.goal = predictor, goal
        self.horizon, self.gate, self.period = float(horizon), float(gate), float(period)
        self.live, self.on_window = live, on_window
        self._stop = threading.Event()
        #: Set once the gate (the first window) has been judged, or the watch ended.
        self.gate_done = threading.Event()
        #: The first predicted failure, None while none is.
        self.failure: PreviewFailure | None = None
        #: Goal time up to which the goal is predicted to hold, s (0 before the gate: only the start).
        self.verified_until = 0.0
        #: True once a window reached the goal's end and its goal-time window (nothing left to predict).
        self.covered = False
        #: Why the watch ended early (an exception in a prediction), None otherwise.
        self.error: str | None = None
        #: Windows predicted and the longest compute time of one, s.
        self.windows, self.longest = 0, 0.0
        #: True once the goal was reported running ahead of what the watch verified.
        self.behind_reported = False

    def behind(self, t: float) -> str | None:
        """Why the goal at goal time ``t`` (s) runs more than one period past what the watch has
        verified (it fell behind, or a prediction raised); None while it is ahead, or once it ended
        (a failure found, the goal covered)."""
        if self.failure is not None or self.covered or t <= self.verified_until + self.period:
            return None
        verified = 'nothing' if self.windows == 0 else f'up to t = {self.verified_until:.3f} s'
        return (f'the goal preview fell behind: at t = {t:.3f} s it has verified {verified} (windows of '
                f'{self.horizon:g} s every {self.period:g} s; the longest took {self.longest:.3f} s'
                f'{"" if self.error is None else "; " + self.error})')

    def stop(self) -> None:
        """End the watch (the goal ended): no further window starts."""
        self._stop.set()
        self.gate_done.set()

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stop.is_set()

    def run(self) -> None:
        """The watch's loop (run it on a worker thread): windows until a failure, the goal's end,
        :meth:`stop` or an error (recorded in :attr:`error`, the gate marked done)."""
        first = True
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                where = self.live(first)
                if where is None:
                    self._stop.wait(min(self.period, 0.02))
                    continue
                horizon = self.gate if first else self.horizon
                goal = replace(self.goal, start=where.start, time_offset=max(0.0, where.time_offset),
                               scaled_offset=where.scaled_offset, speed_scaling=where.speed_scaling,
                               horizon=horizon)
                prediction = preview_goal(self.predictor, goal)
                if not first:
                    prediction.failures = [f for f in prediction.failures if f.time >= goal.time_offset + LIVE_SETTLE]
                spent = time.monotonic() - began
                self.windows, self.longest = self.windows + 1, max(self.longest, spent)
                if self._stop.is_set():
                    return
                if not prediction.ok:
                    self.failure = prediction.first
                else:
                    self.verified_until = max(self.verified_until, goal.time_offset + horizon)
                    self.covered = prediction.simulated >= prediction.goal_end - 1e-9
                self.on_window(prediction, where, spent)
                if first:
                    first = False
                    self.gate_done.set()
                if self.failure is not None or self.covered:
                    return
                if self.windows > 1:              # the window after the gate follows it at once
                    self._stop.wait(max(0.0, self.period - spent))
        except Exception as exc:         # a prediction that fails is reported, never raised on the worker
            self.error = f'{type(exc).__name__}: {exc}'
        finally:
            self.gate_done.set()
