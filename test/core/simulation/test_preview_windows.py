"""The preview in windows (shadow_twin/simulation/preview/windows.py) and the limit rule that counts
only what a goal drives (preview_checks): on the built-in hand model, no ROS."""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.paths import config_path
from shadow_twin.control.controller import ControllerGains
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.simulation.preview.goal import PreviewGoal, StartState
from shadow_twin.simulation.preview.predictor import GoalPredictor
from shadow_twin.simulation.preview.checks import judge, preview_goal
from shadow_twin.simulation.preview.config import PreviewConfig
from shadow_twin.simulation.preview.windows import LIVE_SETTLE, GoalWatch, WindowStart, merge, preview_in_windows


@pytest.fixture(scope='module')
def predictor():
    return GoalPredictor(TwinModel(None).spec, ControllerGains.from_yaml(config_path('controllers', 'shadow_hand_e.yaml')),
                         PreviewConfig.from_yaml(config_path('preview.yaml')))


def upper(predictor, joint='rh_FFJ3') -> float:
    return float(predictor.model.jnt_range[predictor.model.joint(joint).id][1])


def good_goal() -> PreviewGoal:
    traj = JointTrajectory(['rh_FFJ3', 'rh_MFJ3'], np.array([1.5, 3.0]), np.array([[1.0, 0.5], [0.2, 0.8]]))
    return PreviewGoal(traj, start=StartState({'rh_FFJ3': 0.1, 'rh_MFJ3': 0.1}))


def late_failing_goal(predictor) -> PreviewGoal:
    """Slowly to 0.6 rad, then into the stop in 0.05 s at t = 3 s."""
    traj = JointTrajectory(['rh_FFJ3'], np.array([2.95, 3.0]), np.array([[0.6], [upper(predictor)]]))
    return PreviewGoal(traj, start=StartState({'rh_FFJ3': 0.1}))


def test_windows_agree_with_the_whole_prediction(predictor):
    whole, windows = preview_goal(predictor, good_goal()), preview_in_windows(predictor, good_goal(), 0.7)
    assert whole.ok and windows.ok
    assert windows.duration == pytest.approx(whole.duration, abs=0.01)
    for joint, error in whole.joint_errors.items():
        assert windows.joint_errors[joint] == pytest.approx(error, rel=0.05)
    failing = late_failing_goal(predictor)
    whole, windows = preview_goal(predictor, failing), preview_in_windows(predictor, failing, 0.7)
    assert not whole.ok and not windows.ok
    assert windows.first.kind == whole.first.kind == 'position_limit' and windows.first.subject == 'rh_FFJ3'
    assert windows.first.time == pytest.approx(whole.first.time, abs=0.01)
    assert 2.95 < windows.first.time < 3.3


def test_a_canceled_request_stops_between_windows(predictor):
    asked = []

    def cancelled():
        asked.append(1)
        return len(asked) > 2            # two windows, then canceled

    assert preview_in_windows(predictor, good_goal(), 0.5, cancelled) is None
    assert len(asked) == 3
    with pytest.raises(ValueError, match='window'):
        preview_in_windows(predictor, good_goal(), 0.0)


def test_merge_keeps_the_earliest_failure_of_each_kind(predictor):
    failing = preview_goal(predictor, late_failing_goal(predictor))
    passing = preview_goal(predictor, good_goal())
    merged = merge([passing, failing])
    assert merged.first == failing.first and merged.duration is None
    assert merged.joint_errors['rh_FFJ3'] == max(passing.joint_errors['rh_FFJ3'], failing.joint_errors['rh_FFJ3'])
    with pytest.raises(ValueError):
        merge([])


def executed(predictor, goal: PreviewGoal, period: float):
    """A ``live`` for the watch: the goal as it runs (the whole prediction sampled at the window
    starts), the clock advancing ``period`` per window; and the list of window starts."""
    run = predictor.predict(goal)
    starts = []

    def live(first: bool) -> WindowStart:
        t = 0.0 if first else period * len(starts)
        starts.append(t)
        k = max(0, int(np.searchsorted(run.times, t)) - 1)
        return WindowStart(t, StartState(dict(zip(run.joint_names, run.positions[k])),
                                         dict(zip(run.joint_names, run.velocities[k]))))
    return live, starts


def test_the_watch_predicts_a_late_failure_a_horizon_ahead(predictor):
    goal = late_failing_goal(predictor)
    horizon, period = 1.0, 0.1
    live, starts = executed(predictor, goal, period)
    seen = []
    watch = GoalWatch(predictor, goal, horizon, 0.5, period, live, lambda p, w, s: seen.append((p.ok, w.time_offset)))
    watch.run()
    assert watch.failure is not None and watch.failure.kind == 'position_limit'
    assert seen[0] == (True, 0.0)                      # the gate holds: the failure is 3 s in
    detected = starts[-1]
    assert watch.failure.time - detected >= horizon - period - 1e-9    # the stopping margin
    assert watch.verified_until <= watch.failure.time
    assert watch.gate_done.is_set() and not watch.covered


def test_the_watch_of_a_good_goal_ends_when_it_covered_the_goal(predictor):
    goal = good_goal()
    live, starts = executed(predictor, goal, 0.5)
    watch = GoalWatch(predictor, goal, 1.5, 0.5, 0.5, live)
    watch.run()
    assert watch.failure is None and watch.covered and watch.error is None
    assert watch.verified_until >= 3.0


def test_a_goal_ahead_of_the_watch_is_named(predictor):
    goal = good_goal()
    live, _ = executed(predictor, goal, 0.5)
    watch = GoalWatch(predictor, goal, 1.5, 0.5, 0.25, live)
    assert watch.behind(0.2) is None                         # within one period of the start
    assert 'at t = 0.300 s it has verified nothing' in watch.behind(0.3)
    watch.verified_until = 2.0
    assert watch.behind(2.25) is None and 'verified up to t = 2.000 s' not in (watch.behind(2.3) or '')
    assert 'at t = 2.300 s' in watch.behind(2.3)
    watch.covered = True
    assert watch.behind(10.0) is None


def sampled_at(predictor, goal: PreviewGoal, offsets):
    """A ``live`` for the watch giving the goal's whole prediction at ``offsets`` (s), one per window."""
    run, offsets = predictor.predict(goal), list(offsets)

    def live(first: bool) -> WindowStart:
        t = offsets.pop(0)
        k = max(0, int(np.searchsorted(run.times, t)) - 1)
        return WindowStart(t, StartState(dict(zip(run.joint_names, run.positions[k])),
                                         dict(zip(run.joint_names, run.velocities[k]))))
    return live


def test_a_live_window_judges_from_its_settle_time_on(predictor):
    """A window from a live state does not count what it predicts in its first LIVE_SETTLE s (its
    servos start without their internal states); the window one period before counts that span.
    The gate, predicted from the arrival state, counts everything."""
    goal = late_failing_goal(predictor)
    failure = preview_goal(predictor, goal).first.time
    seen = []
    # the gate (0.05 s) ends long before the failure; the next window starts just before it
    late = GoalWatch(predictor, goal, 1.5, 0.05, 0.25, sampled_at(predictor, goal, [0.0, failure - 0.05]),
                     lambda p, w, s: seen.append(p.ok))
    late.run()
    assert seen == [True, True] and late.failure is None          # within its settle span: not counted
    early = GoalWatch(predictor, goal, 1.5, 0.05, 0.25,
                      sampled_at(predictor, goal, [0.0, failure - LIVE_SETTLE - 0.1]))
    early.run()
    assert early.failure is not None and early.failure.kind == 'position_limit'
    assert early.failure.time == pytest.approx(failure, abs=0.01)
    gate = GoalWatch(predictor, goal, 1.5, failure + 0.1, 0.25, sampled_at(predictor, goal, [0.0]))
    gate.run()
    assert gate.failure is not None and gate.failure.time == pytest.approx(failure, abs=0.01)


def test_a_stopped_watch_predicts_no_more(predictor):
    calls = []
    watch = GoalWatch(predictor, good_goal(), 1.0, 0.5, 0.2, lambda first: calls.append(first) or
                      WindowStart(0.0, good_goal().start))
    watch.stop()
    watch.run()
    assert calls == [] and watch.windows == 0 and watch.gate_done.is_set()


def test_the_watch_reports_a_prediction_that_raises(predictor):
    def live(first):
        raise RuntimeError('no state')
    watch = GoalWatch(predictor, good_goal(), 1.0, 0.5, 0.2, live)
    thread = threading.Thread(target=watch.run)
    thread.start()
    thread.join(10.0)
    assert watch.error == 'RuntimeError: no state' and watch.gate_done.is_set()


def test_only_the_excess_the_goal_drives_counts(predictor):
    """A finger still swinging into its stop (1.50 rad at +10 rad/s toward 1.571) is not the goal's
    failure when the goal takes it away from the stop; a goal into the stop from there still fails."""
    top = upper(predictor)
    start = StartState({'rh_FFJ3': 1.50}, {'rh_FFJ3': 10.0})
    away = PreviewGoal(JointTrajectory(['rh_FFJ3'], np.array([1.0]), np.array([[1.2]])), start=start)
    run = predictor.predict(away)
    unfair = judge(run, away, predictor.model, predictor.controller, predictor.contacts, predictor.config)
    assert not unfair.ok and unfair.first.kind == 'position_limit'     # the swing alone passes the margin
    held = predictor.hold_run(away, len(run.times))
    assert held[:, predictor.joint_names.index('rh_FFJ3')].max() > top + predictor.config.position_limit_margin
    assert preview_goal(predictor, away).ok
    into = PreviewGoal(JointTrajectory(['rh_FFJ3'], np.array([1.0, 1.05]), np.array([[0.6], [top]])), start=start)
    verdict = preview_goal(predictor, into)
    assert not verdict.ok and verdict.first.kind == 'position_limit' and verdict.first.time > 1.0
    assert 'the goal drives' in verdict.first.message


@pytest.mark.parametrize('section, message', [
    ({'watch': {'horizon': 1.0, 'period': 1.0}}, 'must be shorter than watch.horizon'),
    ({'watch': {'horizon': 1.0, 'latency': 0.1}}, 'preview watch: a mapping with the keys'),
    ({'watch': [1, 2]}, 'preview watch: a mapping'),
    ({'requests': {'queue': 0}}, 'requests.queue'),
    ({'requests': {'queue': 2.5}}, 'requests.queue must be a whole number'),
    ({'watch': {'gate': -1}}, 'watch.gate'),
    ({'requests': {'window': 'long'}}, 'request.window'),
    ({'watch': {'behind': 'ignore'}}, "watch.behind must be 'warn' or 'abort'"),
])
def test_bad_watch_and_request_figures_are_named(section, message):
    with pytest.raises(ConfigError, match=message):
        PreviewConfig.from_mapping(section)


def test_the_shipped_watch_figures(predictor):
    config = predictor.config
    assert config.watch_gate < config.watch_horizon and config.watch_period < config.watch_horizon
    assert config.request_queue >= 1
    goal = replace(good_goal(), horizon=config.watch_gate)
    assert predictor.predict(goal).times[-1] == pytest.approx(config.watch_gate, abs=2 * predictor.model.opt.timestep)


def test_predictions_on_several_threads_at_once_agree(predictor):
    """The watch's and the requests' threads predict at once (each with its own scratch data): the
    same answers as one after the other (a shared MjData crashed the twin in a contact check)."""
    from concurrent.futures import ThreadPoolExecutor
    goals = [good_goal(), late_failing_goal(predictor), replace(good_goal(), horizon=0.7)]
    serial = [preview_goal(predictor, g).summary() for g in goals]
    with ThreadPoolExecutor(max_workers=3) as pool:
        parallel = list(pool.map(lambda g: preview_goal(predictor, g).summary(), goals * 3))
    assert parallel == serial * 3
