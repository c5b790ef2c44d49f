"""shadow_twin.calibration.search.identifiability: intervals, unidentifiable directions, bounds.

A linear model with noise has exact Gauss-Newton intervals, so their coverage is known;
the simulated hand (synthetic_hand) adds a parameter without any effect on the objective.
"""

import json

import numpy as np
import pytest
from support.synthetic_hand import make_problem

from shadow_twin.calibration.search import identifiability
from shadow_twin.calibration.search.least_squares import fit_least_squares
from shadow_twin.calibration.engine.run import CalibrationResult, Evaluation
from shadow_twin.calibration.search.search_space import Dimension, SearchSpace

NAMES = ('a', 'b', 'c', 'd', 'e')


def linear_space():
    return SearchSpace([Dimension(n, [], 0.0, 2.0, 1.0) for n in NAMES[:4]]
                       + [Dimension('e', [], 0.1, 10.0, 1.0, log=True)], 'test')


def linear_problem(rng, n=200, sd=0.05):
    """r(u) = A (u - u_true) + noise: 'a' and 'b' enter only as their sum, 'd' not at all."""
    t = np.linspace(0, 1, n)
    common = np.sin(3 * t)
    A = np.column_stack([common, common, np.cos(5 * t) + t, np.zeros(n), t ** 2 - 0.3])
    u_true = np.array([0.3, 0.6, 0.4, 0.5, 0.7])
    noise = rng.normal(0, sd, n)
    u_hat = u_true + np.linalg.lstsq(A, -noise, rcond=None)[0]  # least-squares estimate
    return A, A @ (u_hat - u_true) + noise, u_hat, u_true


def test_sum_pair_and_parameter_without_effect_are_flagged():
    space = linear_space()
    A, r, u_hat, _ = linear_problem(np.random.default_rng(0))
    result = identifiability.analyse(A, r, space, space.from_unit(u_hat[None])[0])
    combos = {d.combination: d for d in result.unidentifiable}
    assert '1.00 d' in combos and combos['1.00 d'].singular_value == 0.0
    pair = [d for d in result.unidentifiable if set(d.coefficients) == set(NAMES) and
            abs(d.coefficients['a']) > 0.5]
    assert len(pair) == 1 and len(result.unidentifiable) == 2
    assert pair[0].coefficients['a'] == pytest.approx(0.7071, abs=1e-3)
    assert pair[0].coefficients['b'] == pytest.approx(-0.7071, abs=1e-3)
    assert pair[0].combination == '0.71 a - 0.71 b'
    for name in ('a', 'b', 'd'):
        assert result.parameters[name]['sd'] == np.inf
    # c and e: the regression on the identifiable columns (a + b, c, e), in parameter units
    reduced = A[:, [0, 2, 4]]
    sd_u = np.sqrt(np.diag(r @ r / 195 * np.linalg.inv(reduced.T @ reduced)))
    x = space.from_unit(u_hat[None])[0]
    assert result.parameters['c']['sd'] == pytest.approx(sd_u[1] * 2.0, rel=1e-6)
    assert result.parameters['e']['sd'] == pytest.approx(sd_u[2] * x[4] * np.log(100.0), rel=1e-6)
    assert result.dof == 200 - 5 and result.s2 == pytest.approx(r @ r / 195)
    doc = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert doc['parameters']['a']['sd'] is None and doc['unidentifiable'][0]['collinearity_index'] is None
    assert [d['kind'] for d in doc['unidentifiable']] == ['no effect', 'collinear']
    lines = identifiability.summary_lines(doc)
    assert any('1.00 d  (no effect)' in line for line in lines)
    assert any('0.71 a - 0.71 b' in line for line in lines)


def test_intervals_cover_the_true_values_95_percent_of_the_time():
    space = linear_space()
    rng = np.random.default_rng(1)
    inside = {'c': 0, 'e': 0}
    trials = 300
    for _ in range(trials):
        A, r, u_hat, u_true = linear_problem(rng)
        result = identifiability.analyse(A, r, space, space.from_unit(u_hat[None])[0])
        true = space.from_unit(u_true[None])[0]
        for k, name in ((2, 'c'), (4, 'e')):
            p = result.parameters[name]
            inside[name] += p['low'] <= true[k] <= p['high']
    for name, count in inside.items():
        assert 0.91 <= count / trials <= 0.99, (name, count)


def test_parameters_on_a_bound():
    space = linear_space()
    A, r, _, _ = linear_problem(np.random.default_rng(2))
    x = np.array([0.0, 1.0, 2.0, 1.0, 5.0])
    result = identifiability.analyse(A, r, space, x)
    assert result.on_bound == ['a', 'c']
    assert result.parameters['a']['on_bound'] == 'lower' and result.parameters['c']['on_bound'] == 'upper'
    assert result.parameters['b']['on_bound'] is None
    assert any('on a bound: a, c' in line for line in identifiability.summary_lines(result.to_dict()))


def test_shapes_are_checked():
    space = linear_space()
    with pytest.raises(ValueError, match='do not match'):
        identifiability.analyse(np.zeros((10, 4)), np.zeros(10), space, np.ones(5))
    with pytest.raises(ValueError, match='cannot identify'):
        identifiability.analyse(np.ones((5, 5)), np.zeros(5), space, np.ones(5))


def test_simulated_hand_at_the_least_squares_result():
    """Known damping recovered with noise on the recording: the intervals hold the truth; a
    finger outside the objective has no effect; the Jacobian of least squares is reused."""
    evaluator, space, truth = make_problem(('J3_damping', 'J12_damping', 'MF_damping'), noise=2e-3, seed=3)

    def residuals(points):
        return evaluator.evaluate_residuals([space.values(x) for x in points], nthread=2)
    fit = fit_least_squares(residuals, space, space.defaults, budget=60)
    best = Evaluation(0, 0, [float(v) for v in fit.x], fit.cost, {}, 0.0, 'lsq', 1)
    result = CalibrationResult(None, [best], best, 0.0, 0.0, 0.0, least_squares=fit)
    computed = identifiability.of_result(result, evaluator, space, nthread=2)
    assert computed.jacobian_rollouts == (0 if np.array_equal(fit.jacobian_at, fit.x) else 4)
    result.least_squares = None
    fresh = identifiability.of_result(result, evaluator, space, nthread=2)
    assert fresh.jacobian_rollouts == 4
    for analysis in (computed, fresh):
        assert [d.combination for d in analysis.unidentifiable] == ['1.00 MF_damping']
        mf = analysis.parameters['MF_damping']  # an interval far wider than the search range
        assert mf['high'] - mf['low'] > 10 * (0.5 - 0.01)
        for k, name in enumerate(('J3_damping', 'J12_damping')):
            p = analysis.parameters[name]
            assert p['low'] < truth[k] < p['high'] and p['high'] - p['low'] < 0.2 * truth[k]
