"""Least squares on the residual vector: residual scaling, the rollout budget, recovery of
known parameters, and least-squares phases of a checkpointed calibration (resume included).

The simulated problem (synthetic_hand) is the built-in hand with known first-finger
damping as the "real" recording, so the answer is known and no shared data is needed.
"""

import json

import numpy as np
import pytest
from support.synthetic_hand import make_problem

from shadow_twin.calibration.scoring.evaluator_set import EvaluatorSet
from shadow_twin.calibration.search.least_squares import finite_difference_jacobian, fit_least_squares
from shadow_twin.calibration.search.optimisers import ASK_TELL, LEAST_SQUARES, OPTIMISERS, phases
from shadow_twin.calibration.engine.run import CHECKPOINT, Calibration, CalibrationSettings, default_global_budget
from shadow_twin.calibration.search.search_space import Dimension, SearchSpace
from shadow_twin.common.errors import ConfigError
from shadow_twin.simulation.offline import TrajectorySimulator


@pytest.fixture(scope='module')
def problem():
    return make_problem()


def batched(evaluator, space):
    return lambda points: evaluator.evaluate_residuals([space.values(x) for x in points], nthread=2)


# -- residuals -----------------------------------------------------------------------------
def test_sum_of_squared_residuals_is_the_objective(problem):
    evaluator, space, truth = problem
    points = [space.defaults, truth, space.lows]
    scores, residuals = evaluator.evaluate_scored_residuals([space.values(x) for x in points], nthread=2)
    assert residuals.shape == (3, evaluator.time_base.size * len(evaluator.weights))
    objectives = [s.objective for s in evaluator.evaluate([space.values(x) for x in points], nthread=2)]
    np.testing.assert_allclose((residuals ** 2).sum(axis=1), objectives, rtol=1e-12)
    np.testing.assert_allclose([s.objective for s in scores], objectives, rtol=1e-12)
    assert objectives[1] < 1e-20 < objectives[0]  # the truth reproduces the recording
    np.testing.assert_array_equal(evaluator.evaluate_residuals([space.values(points[0])]), residuals[:1])


def test_residuals_follow_joint_and_recording_weights(problem):
    evaluator, space, _ = problem
    other, _, _ = make_problem(noise=0.01, seed=1)
    weighted = dict(evaluator.weights)
    try:
        evaluator.weights = {'rh_FFJ1': 1.0, 'rh_FFJ2': 0.5, 'rh_FFJ3': 3.0}
        values = [space.values(space.defaults), space.values(space.highs)]
        one = evaluator.evaluate_residuals(values)
        np.testing.assert_allclose((one ** 2).sum(axis=1), [s.objective for s in evaluator.evaluate(values)],
                                   rtol=1e-12)
        both = EvaluatorSet([evaluator, other], recording_weights=[1.0, 3.0])
        scores, residuals = both.evaluate_scored_residuals(values, nthread=2)
        assert residuals.shape[1] == one.shape[1] + other.evaluate_residuals(values[:1]).shape[1]
        np.testing.assert_allclose((residuals ** 2).sum(axis=1), [s.objective for s in both.evaluate(values)],
                                   rtol=1e-12)
        np.testing.assert_allclose([s.objective for s in scores], [s.objective for s in both.evaluate(values)])
    finally:
        evaluator.weights = weighted


# -- fit_least_squares on cheap residual functions -----------------------------------------
def _space(d=3):
    return SearchSpace([Dimension(f'p{k}', [], -2.0, 2.0, 0.5) for k in range(d - 1)]
                       + [Dimension('q', [], 1e-2, 10.0, 1.0, log=True)], 'test')


def rosenbrock(calls):
    """Residuals of the Rosenbrock valley in x[0], x[1], and of log10(x[2]) = 0: minimum 0 at (1, 1, 1)."""
    def residuals(points):
        points = np.atleast_2d(points)
        calls.append(len(points))
        return np.stack([[10 * (x[1] - x[0] ** 2), 1 - x[0], np.log10(x[2])] for x in points])
    return residuals


@pytest.mark.parametrize('method', ['mujoco', 'scipy'])
def test_budget_counts_rollouts_and_keeps_the_best(method):
    calls = []
    space = _space()
    start = np.array([-1.5, 1.5, 5.0])
    result = fit_least_squares(rosenbrock(calls), space, start, budget=20, method=method)
    assert sum(calls) == result.rollouts and 20 - 3 < result.rollouts <= 20
    assert result.status == 'budget spent'
    assert set(calls) <= {1, 3}        # a residual evaluation, or the D columns of a Jacobian in one batch
    assert calls.count(3) >= 1
    assert result.cost == min(c for _, c in result.history)
    # more budget: the minimum; scipy's trust region adapts faster than mujoco.minimize's
    # regulariser (a factor 4 against 1.26 per rejected step: a rollout each)
    more = fit_least_squares(rosenbrock([]), space, start, budget=400, method=method)
    np.testing.assert_allclose(more.x, [1.0, 1.0, 1.0], atol=1e-3)
    assert more.rollouts < 400 and more.status != 'budget spent'
    if method == 'scipy':
        assert result.cost < 0.5 * float(np.sum(rosenbrock([])(start) ** 2))
        assert more.rollouts < 100


@pytest.mark.parametrize('method', ['mujoco', 'scipy'])
def test_stop_callback_ends_the_fit_with_its_reason(method):
    seen = []

    def stop(used, best):
        seen.append((used, best))
        return 'enough' if used >= 8 else None
    result = fit_least_squares(rosenbrock([]), _space(), np.array([-1.5, 1.5, 5.0]), budget=100, method=method,
                               stop=stop)
    assert result.ended == 'stopped' and result.status == 'enough'
    assert 8 <= result.rollouts <= 8 + 3 and seen[-1][0] == result.rollouts
    assert result.cost == min(best for _, best in seen)
    spent = fit_least_squares(rosenbrock([]), _space(), np.array([-1.5, 1.5, 5.0]), budget=10, method=method)
    assert spent.ended == 'budget'
    assert fit_least_squares(rosenbrock([]), _space(), np.array([0.5, 0.5, 1.0]), budget=400).ended == 'converged'


def test_a_budget_too_small_for_a_jacobian_evaluates_the_start_only():
    calls = []
    result = fit_least_squares(rosenbrock(calls), _space(), np.array([0.0, 0.0, 1.0]), budget=3)
    assert calls == [1] and result.rollouts == 1 and result.jacobian is None
    np.testing.assert_allclose(result.x, [0.0, 0.0, 1.0])


def test_finite_difference_jacobian_in_the_unit_cube():
    space = _space()
    calls = []
    x = np.array([0.5, -1.0, 1.0])
    J, r = finite_difference_jacobian(rosenbrock(calls), space, x, step=1e-6)
    assert calls == [4]
    # d r / d u = d r / d x * dx/du: 4 per unit range for p0, p1; ln(1000) x for the log dimension
    expected = np.array([[-20 * x[0] * 4, 10 * 4, 0], [-4, 0, 0], [0, 0, np.log(1000) / np.log(10)]])
    np.testing.assert_allclose(J, expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(r, rosenbrock([])(x)[0])


def test_bad_arguments():
    with pytest.raises(ConfigError, match='at least 1 rollout'):
        fit_least_squares(rosenbrock([]), _space(), np.zeros(3) + 1, budget=0)
    with pytest.raises(ConfigError, match='diff_step'):
        fit_least_squares(rosenbrock([]), _space(), np.zeros(3) + 1, budget=5, diff_step=0.7)
    with pytest.raises(ConfigError, match="unknown least-squares method 'lm'"):
        fit_least_squares(rosenbrock([]), _space(), np.zeros(3) + 1, budget=5, method='lm')


# -- on the simulated hand -------------------------------------------------------------------
@pytest.mark.parametrize('method', ['mujoco', 'scipy'])
def test_least_squares_recovers_known_damping(problem, method):
    evaluator, space, truth = problem
    result = fit_least_squares(batched(evaluator, space), space, space.defaults, budget=40, method=method)
    np.testing.assert_allclose(result.x, truth, rtol=1e-3)
    assert result.cost < 1e-9 and result.rollouts <= 40
    assert result.jacobian.shape == (evaluator.time_base.size * 3, 2)


def test_jacobian_columns_are_one_batched_rollout(problem, monkeypatch, tmp_path):
    evaluator, space, truth = problem
    sizes = []
    run = TrajectorySimulator.run_with_clock

    def counting(self, models, nthread=1):
        sizes.append((len(models), nthread))
        return run(self, models, nthread)
    monkeypatch.setattr(TrajectorySimulator, 'run_with_clock', counting)
    result = Calibration(evaluator, space, CalibrationSettings('lsq', 25, workers=2), tmp_path).run()
    sizes = sizes[1:]  # the model as given
    assert {n for n, _ in sizes} <= {1, 2} and all(t == 2 for _, t in sizes)
    assert sum(n for n, _ in sizes) == len(result.evaluations) <= 25
    np.testing.assert_allclose(result.best.x, truth, rtol=1e-3)
    lines = (tmp_path / CHECKPOINT).read_text().splitlines()[1:]
    assert len(lines) == len(result.evaluations)
    assert {json.loads(line)['phase'] for line in lines} == {'lsq'}


def test_least_squares_needs_an_evaluator_with_residuals(problem, tmp_path):
    _, space, _ = problem

    class ScoresOnly:
        def evaluate(self, parameter_sets, nthread=1):
            raise AssertionError('not reached')
    with pytest.raises(ConfigError, match='needs residual vectors, which ScoresOnly does not give'):
        Calibration(ScoresOnly(), space, CalibrationSettings('lsq', 10), tmp_path)
    assert not (tmp_path / CHECKPOINT).exists()


# -- optimiser names and phases ----------------------------------------------------------------
def test_optimiser_names():
    assert set(ASK_TELL) | {LEAST_SQUARES} <= set(OPTIMISERS)
    assert phases('lsq') == (None, True) and phases('bo') == ('bo', False)
    assert phases('cmaes+lsq') == ('cmaes', True) and phases('auto') == ('bo', True)
    default = CalibrationSettings().optimizer
    assert default in OPTIMISERS and phases(default)[1]  # the default ends with least squares
    with pytest.raises(ConfigError, match=r"unknown optimizer 'lsq\+bo'"):
        phases('lsq+bo')
    with pytest.raises(ConfigError, match="unknown optimizer 'simplex'"):
        CalibrationSettings(optimizer='simplex')
    with pytest.raises(ConfigError, match='global budget'):
        CalibrationSettings(global_budget=-1)
    assert default_global_budget(150, 15) == 24 and default_global_budget(12, 15) == 2


def signature(result):
    return [(e.index, e.batch, e.phase, tuple(e.x), e.objective) for e in result.evaluations]


def crash(checkpoint, complete):
    lines = checkpoint.read_text().splitlines(keepends=True)
    checkpoint.write_text(''.join(lines[:1 + complete]) + lines[1 + complete][: len(lines[1 + complete]) // 2])


@pytest.fixture(scope='module')
def global_then_local(problem, tmp_path_factory):
    """An uninterrupted run of bo+lsq, budget 30 (global 6, least squares, the rest global)."""
    evaluator, space, _ = problem
    out = tmp_path_factory.mktemp('default') / 'full'
    settings = CalibrationSettings('bo+lsq', budget=30, workers=2, seed=1)
    return Calibration(evaluator, space, settings, out, {'test': 'lsq'}).run()


def test_global_then_least_squares(problem, global_then_local):
    _, space, truth = problem
    result = global_then_local
    phases_run = [e.phase for e in result.evaluations]
    first = phases('bo+lsq')[0]
    n_global = default_global_budget(30, 2)
    assert phases_run[:n_global] == [first] * n_global and phases_run[n_global] == 'lsq'
    assert len(result.evaluations) == 30  # least squares converged: the global optimiser had the rest
    np.testing.assert_allclose(result.best.x, truth, rtol=1e-3)
    assert result.best.phase == 'lsq'
    summary = result.phase_summary()
    assert sum(p['evaluations'] for p in summary.values()) == 30 and summary['lsq']['best'] == result.best.objective


@pytest.mark.parametrize('complete', [3, 7, 9, 14])  # global phase, first Jacobian, after it, later
def test_resume_equals_the_uninterrupted_run(problem, global_then_local, tmp_path, complete):
    evaluator, space, _ = problem
    settings = CalibrationSettings('bo+lsq', budget=30, workers=2, seed=1)
    Calibration(evaluator, space, settings, tmp_path, {'test': 'lsq'}).run()
    crash(tmp_path / CHECKPOINT, complete)
    progress = []
    again = Calibration(evaluator, space, settings, tmp_path, {'test': 'lsq'}, resume=True).run(
        lambda *a: progress.append(a))
    assert signature(again) == signature(global_then_local)
    assert again.best.objective == global_then_local.best.objective
    assert complete - 2 <= again.resumed_evaluations <= complete  # a cut batch is evaluated again
    lines = (tmp_path / CHECKPOINT).read_text().splitlines()
    assert [json.loads(line)['index'] for line in lines[1:]] == list(range(30))
    assert progress[-1][:2] == (30, 30)


def test_resume_of_a_finished_least_squares_run_simulates_nothing(problem, tmp_path):
    evaluator, space, _ = problem
    settings = CalibrationSettings('lsq', 20, workers=2)
    first = Calibration(evaluator, space, settings, tmp_path).run()
    again = Calibration(evaluator, space, CalibrationSettings('lsq', len(first.evaluations), workers=2), tmp_path,
                        resume=True).run()
    assert signature(again) == signature(first)[:len(again.evaluations)]
    assert again.simulation_time == 0.0
