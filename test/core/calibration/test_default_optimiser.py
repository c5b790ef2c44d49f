"""The default optimiser (``auto``): least squares from the model as given first; the global phase
only when least squares ends on a bound, stalls, or the model as given lies outside the space; then
least squares again from the global phase's best point. Which phases ran and why is reported.

The problems are closed-form residual functions (no simulation), so every case is fast and its
answer known.
"""

import json

import numpy as np
import pytest

from shadow_twin.calibration.scoring.evaluation import Score
from shadow_twin.calibration.search.optimisers import (AUTO, CONVERGED_GAIN, STALL_FRACTION, global_phase_reasons,
                                                       on_bounds, outside_space)
from shadow_twin.calibration.engine.report import phase_lines
from shadow_twin.calibration.engine import run as run_module
from shadow_twin.calibration.engine.run import CHECKPOINT, Calibration, CalibrationSettings
from shadow_twin.calibration.search.search_space import Dimension, SearchSpace
from shadow_twin.common.errors import ConfigError
from shadow_twin.model.calibratable import ParameterTarget


class Problem:
    """An evaluator of closed-form residuals r(x) ((R,), rad) over named dimensions; the model as
    given is ``defaults``. Counts rollouts (one per parameter set)."""

    def __init__(self, residuals, defaults, bounds):
        self.residual_fn = residuals
        self.targets = [ParameterTarget('joint', f'j{k}', 'damping') for k in range(len(defaults))]
        self.space = SearchSpace([Dimension(f'p{k}', [t], lo, hi, d)
                                  for k, (t, d, (lo, hi)) in enumerate(zip(self.targets, defaults, bounds))])
        self.defaults = np.asarray(defaults, dtype=float)
        self.objective_joints, self.weights = ['j0'], {'j0': 1.0}
        self.rollouts = 0

    def _x(self, values):
        return np.array([values.get(t, d) for t, d in zip(self.targets, self.defaults)])

    def evaluate_scored_residuals(self, parameter_sets, nthread=1):
        self.rollouts += len(parameter_sets)
        r = np.stack([np.asarray(self.residual_fn(self._x(v)), dtype=float) for v in parameter_sets])
        scores = [Score(float(row @ row), {'j0': float(row @ row)}) for row in r]
        return scores, r

    def evaluate(self, parameter_sets, nthread=1, keep_positions=False):
        return self.evaluate_scored_residuals(parameter_sets)[0]

    def evaluate_residuals(self, parameter_sets, nthread=1):
        return self.evaluate_scored_residuals(parameter_sets)[1]


def quadratic(truth):
    truth = np.asarray(truth, dtype=float)
    return lambda x: np.concatenate([x - truth, 0.5 * (x - truth) ** 2])


def wavy(x):
    """Objective 0.09 (x - 8)^2 + 9 sin^2 x: local minima near k pi; from 2.8 least squares ends
    near pi at 2.1 (over 60 % of the start), the global minima near 2 pi and 3 pi are below 0.3."""
    return np.array([0.3 * (x[0] - 8.0), 3.0 * np.sin(x[0]), 0.0 * x[1]])


def rugged(x):
    """Ripples: least squares finds a little less here and there, far above 10 % of the start."""
    return np.array([1 + 0.3 * np.sin(40 * x[0]) * np.cos(37 * x[1]), 0.3 * np.sin(23 * x[0] + x[1])])


def run(problem, tmp_path, budget=60, **kwargs):
    settings = CalibrationSettings(AUTO, budget, workers=2, seed=0, **kwargs)
    return Calibration(problem, problem.space, settings, tmp_path, {'test': 'auto'}).run()


def logged(result):
    return [(e['phase'], e['ran']) for e in result.phase_log]


def test_auto_is_the_default():
    assert CalibrationSettings().optimizer == AUTO


def test_good_start_runs_least_squares_alone_and_stops_when_it_converges(tmp_path):
    problem = Problem(quadratic([0.3, 0.6]), [0.5, 0.5], [(0.0, 1.0), (0.0, 1.0)])
    result = run(problem, tmp_path)
    assert logged(result) == [('lsq', True), ('bo', False)]
    assert {e.phase for e in result.evaluations} == {'lsq'}
    assert len(result.evaluations) < 60 and problem.rollouts == len(result.evaluations) + 1  # + the model as given
    np.testing.assert_allclose(result.best.x, [0.3, 0.6], atol=1e-4)
    assert result.phase_log[0]['ended'] == 'converged'
    assert 'least squares converged' in result.phase_log[1]['why'] and 'not spent' in result.phase_log[1]['why']
    lines = phase_lines({'phase_log': result.phase_log})
    assert lines[0].startswith('phase lsq: ') and lines[1].startswith('phase bo: not run (least squares converged')


def three_phases(result, reason):
    assert logged(result) == [('lsq', True), ('bo', True), ('lsq', True)]
    first, global_, second = result.phase_log
    assert reason in global_['why']
    assert global_['first'] == first['evaluations'] and second['first'] == first['evaluations'] + global_['evaluations']
    assert [e.phase for e in result.evaluations] == (['lsq'] * first['evaluations'] + ['bo'] * global_['evaluations']
                                                     + ['lsq'] * second['evaluations'])
    bo_best = min(result.evaluations[global_['first']:second['first']], key=lambda e: e.objective)
    np.testing.assert_array_equal(result.evaluations[second['first']].x, bo_best.x)  # lsq again from its best
    return first, global_, second


def test_ending_on_a_bound_takes_the_global_phase(tmp_path):
    problem = Problem(quadratic([1.1, 0.6]), [0.5, 0.5], [(0.0, 1.0), (0.0, 1.0)])  # the optimum beyond p0's upper bound
    result = run(problem, tmp_path)
    three_phases(result, 'least squares ended on a bound: p0 (upper)')
    assert 'stalled' not in result.phase_log[1]['why'] and 'outside' not in result.phase_log[1]['why']
    np.testing.assert_allclose(result.best.x, [1.0, 0.6], atol=1e-3)


def test_a_stall_takes_the_global_phase_and_finds_the_lower_minimum(tmp_path):
    problem = Problem(wavy, [2.8, 0.5], [(0.0, 10.0), (0.0, 1.0)])
    initial = float(np.sum(wavy(problem.defaults) ** 2))
    result = run(problem, tmp_path)
    first, global_, second = three_phases(result, 'least squares stalled at')
    assert first['best'] > STALL_FRACTION * initial
    assert result.best.objective < STALL_FRACTION * initial < first['best']
    assert result.best.phase == 'lsq' and result.best.index >= second['first']


def test_a_stall_at_half_the_budget_stops_least_squares(tmp_path, monkeypatch):
    """A fit still far from the data at half the budget leaves the rest to the global phase (the
    convergence rule switched off: here it would stop least squares sooner)."""
    monkeypatch.setattr(run_module, 'CONVERGED_GAIN', -np.inf)
    problem = Problem(rugged, [0.3, 0.2], [(0.0, 1.0), (0.0, 1.0)])
    result = run(problem, tmp_path, budget=40)
    first = result.phase_log[0]
    assert first['ended'] == 'stopped' and 20 <= first['evaluations'] <= 22   # half the budget (+ a Jacobian)
    assert first['status'].startswith("stalled: ") and 'at half the budget' in first['status']
    three_phases(result, 'least squares stalled at')


def test_least_squares_stops_when_an_iteration_gains_less_than_the_convergence_gain(tmp_path):
    problem = Problem(rugged, [0.3, 0.2], [(0.0, 1.0), (0.0, 1.0)])
    result = run(problem, tmp_path, budget=40)
    first = result.phase_log[0]
    assert first['ended'] == 'stopped' and first['status'].startswith('converged: the last 3 rollouts lowered')
    assert first['evaluations'] < 20
    history = [e.objective for e in result.evaluations[:first['evaluations']]]
    assert min(history) > (1 - CONVERGED_GAIN) * min(history[:-3])   # the last D + 1 gained less
    three_phases(result, 'least squares stalled at')   # far above 10 %: the global phase


def test_a_model_outside_the_space_takes_the_global_phase(tmp_path):
    problem = Problem(quadratic([0.3, 0.6]), [1.5, 0.5], [(0.0, 1.0), (0.0, 1.0)])  # p0 as given: 1.5 > 1
    assert outside_space(problem.space) == ['p0 1.5 (bounds 0..1)']
    result = run(problem, tmp_path)
    three_phases(result, 'the model as given lies outside the space: p0 1.5 (bounds 0..1)')
    assert result.phase_log[0]['why'].endswith('(clipped into the space); engine mujoco.minimize')
    assert result.phase_log[2]['why'].endswith("engine scipy's trf")
    np.testing.assert_allclose(result.best.x, [0.3, 0.6], atol=1e-4)


def test_no_room_for_a_global_phase_is_said(tmp_path):
    problem = Problem(quadratic([1.4, 0.6]), [0.5, 0.5], [(0.0, 1.0), (0.0, 1.0)])
    result = run(problem, tmp_path, budget=8)   # least squares stops with fewer than D + 4 left
    assert logged(result) in ([('lsq', True), ('bo', False)], [('lsq', True)],
                              [('lsq', True), ('bo', False), ('lsq', True)])   # stalled: it goes on
    assert len(result.evaluations) <= 8
    if len(result.phase_log) > 1:
        assert 'too few for a global phase' in result.phase_log[1]['why']


def test_a_budget_below_one_least_squares_iteration_runs_the_global_phase_alone(tmp_path):
    problem = Problem(quadratic([0.3, 0.6, 0.2]), [0.5, 0.5, 0.5], [(0.0, 1.0)] * 3)
    result = run(problem, tmp_path, budget=4)
    assert logged(result) == [('bo', True)] and len(result.evaluations) == 4
    assert 'too small for one least-squares iteration' in result.phase_log[0]['why']


def test_rule_reasons():
    space = Problem(quadratic([0.0]), [0.5], [(0.0, 2.0)]).space
    assert on_bounds(space, np.array([0.0])) == ['p0 (lower)'] and on_bounds(space, np.array([2.0])) == ['p0 (upper)']
    assert on_bounds(space, np.array([1.0])) == []
    assert global_phase_reasons(space, np.array([1.0]), 1.0, 0.05) == []
    assert global_phase_reasons(space, np.array([1.0]), 1.0, 0.5) == [
        "least squares stalled at 50 % of the model as given's objective (above 10 %)"]


@pytest.mark.parametrize('complete', [2, 9, 14])   # in the first least squares, the global phase, the second
def test_resume_of_auto_equals_the_uninterrupted_run(tmp_path, complete):
    problem = Problem(wavy, [2.8, 0.5], [(0.0, 10.0), (0.0, 1.0)])
    full = run(problem, tmp_path / 'full')
    out = tmp_path / 'cut'
    run(problem, out)
    lines = (out / CHECKPOINT).read_text().splitlines(keepends=True)
    (out / CHECKPOINT).write_text(''.join(lines[:1 + complete]))
    settings = CalibrationSettings(AUTO, 60, workers=2, seed=0)
    again = Calibration(problem, problem.space, settings, out, {'test': 'auto'}, resume=True).run()
    assert [(e.phase, tuple(e.x), e.objective) for e in again.evaluations] == \
        [(e.phase, tuple(e.x), e.objective) for e in full.evaluations]
    assert json.loads(json.dumps(again.phase_log)) == json.loads(json.dumps(full.phase_log))


def test_a_stall_with_no_room_for_a_global_phase_goes_on_with_least_squares(tmp_path, monkeypatch):
    """Least squares stopped at half the budget for a global phase that then has no room: it goes
    on from where it stalled with the rollouts left, instead of leaving them unspent (the live
    calibration's small budgets: 12 rollouts, 4 parameters)."""
    monkeypatch.setattr(run_module, 'CONVERGED_GAIN', -np.inf)
    problem = Problem(rugged, [0.3, 0.2], [(0.0, 1.0), (0.0, 1.0)])
    result = run(problem, tmp_path, budget=40, global_budget=30)
    phases = [(e['phase'], e['ran']) for e in result.phase_log]
    assert phases[:3] == [('lsq', True), ('bo', False), ('lsq', True)], result.phase_log
    assert 'too few for a global phase' in result.phase_log[1]['why']
    assert 'from where it stalled' in result.phase_log[2]['why']
    assert result.phase_log[2]['evaluations'] > 0
    assert result.best.objective <= result.phase_log[0]['best']


def noisy(x):
    """A quadratic bowl (minimum 0 at (0.3, 0.6)) with a ripple of 0.01 every 1.3e-3: an objective noisy at
    small scales, as a contact fit's replays are (contacts made a step earlier or later)."""
    truth = np.array([0.3, 0.6])
    return np.concatenate([x - truth + 0.01 * np.sin(5000 * x), 0.5 * (x - truth) ** 2])


def test_the_settings_finite_difference_steps_are_least_squares_own(tmp_path):
    """``diff_step`` (scipy's engine): the first Jacobian's columns lie that fraction of each range from the
    start; on an objective noisy at small scales coarse steps end lower than the engine's own (1 %, then 0.1 %),
    which differentiate the ripple, and stop at the finest step's resolution; a run without steps keeps the
    checkpoint header it had before the setting; bad steps are one-line errors."""
    ends = {}
    for steps in (None, (0.1, 0.03)):
        for bounds, budget in (((0.0, 1.0), 40), ((0.0, 2.0), 3)):     # the fit; the steps on a range of 2
            problem = Problem(noisy, [0.9, 0.1], [(0.0, 1.0), bounds])
            settings = CalibrationSettings('lsq', budget, workers=1, seed=0, diff_step=steps)
            out = tmp_path / f'{steps}-{budget}'
            result = Calibration(problem, problem.space, settings, out, {'test': 'steps'}).run()
            start, *columns = (np.array(e.x) for e in result.evaluations[:3])
            step = (steps or (0.01,))[0]
            np.testing.assert_allclose(np.abs(columns[0] - start), [step, 0.0], atol=1e-12)
            np.testing.assert_allclose(np.abs(columns[1] - start), [0.0, bounds[1] * step], atol=1e-12)
            header = json.loads((out / CHECKPOINT).read_text().splitlines()[0])
            assert ('diff_step' in header['settings']) == (steps is not None)
            ends[steps, budget] = result.best.objective, len(result.evaluations), result.phase_log[-1]['status']
    # the coarse steps end lower, and stop once a step is shorter than the finest of them (xtol): no rollouts
    # spent below the scale the objective can be told apart at; the engine's own spend the budget
    (coarse, used, status), (own, spent, _) = ends[(0.1, 0.03), 40], ends[None, 40]
    assert coarse < 0.5 * own and used < spent == 40 and 'xtol' in status, ends
    # auto's first phase, on mujoco.minimize, keeps that engine's own step (sqrt(machine epsilon) of each range)
    problem = Problem(quadratic([0.3, 0.6]), [0.5, 0.5], [(0.0, 1.0), (0.0, 1.0)])
    first = run(problem, tmp_path / 'auto', diff_step=(0.1,)).evaluations
    assert first[0].phase == first[1].phase == 'lsq' and 0 < np.abs(np.subtract(first[1].x, first[0].x)).max() < 1e-6
    for bad in ((), (0.0,), (0.5,), (0.1, -0.2)):
        with pytest.raises(ConfigError) as raised:
            CalibrationSettings(diff_step=bad)
        assert 'diff_step' in str(raised.value) and '\n' not in str(raised.value)
