"""shadow_twin.calibration.search.optimisers: ask/tell optimisers on a cheap quadratic."""

import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.calibration.search.optimisers import ASK_TELL, OPTIMISERS, make_optimiser
from shadow_twin.calibration.search.search_space import Dimension, SearchSpace

CENTRE = np.array([0.7, 1.2, 0.05])


@pytest.fixture(scope='module')
def space():
    return SearchSpace([Dimension('a', [], -1.0, 2.0, 0.0), Dimension('b', [], 0.5, 3.0, 1.0),
                        Dimension('c', [], 1e-3, 1.0, 0.1, log=True)])


def quadratic(space, x):
    """Squared distance to CENTRE in the unit cube (log dimensions in log space): minimum 0."""
    return ((space.to_unit(x) - space.to_unit(CENTRE[None])) ** 2).sum(axis=1)


def random_level(space):
    """Mean of the quadratic over the box: what a random point scores."""
    return quadratic(space, space.from_unit(np.random.default_rng(123).random((20000, 3)))).mean()


def minimise(optimiser, space, budget, batch):
    best, points, done = np.inf, [], 0
    while done < budget:
        x = optimiser.ask(min(batch, budget - done))
        assert 1 <= len(x) <= batch  # a population method may end a generation early
        done += len(x)
        y = quadratic(space, x)
        optimiser.tell(x, y)
        best = min(best, y.min())
        points.append(x)
    return best, np.vstack(points)


# Budgets and batches keep every run well under a second. The batch divides the
# population of cmaes (7 in 3-D) and pso (10 particles). BO re-optimises its GP
# hyperparameters every 5 evaluations here (refit_every; the default 25 is tuned for
# long calibrations and keeps the first fit, on 8 points, for too long for this budget).
CASES = {
    'bo': dict(budget=30, batch=1, options=dict(n_initial_points=8, refit_every=5)),
    'random': dict(budget=300, batch=10, options={}),
    'cmaes': dict(budget=70, batch=7, options={}),
    'pso': dict(budget=300, batch=10, options={}),
}


@pytest.mark.parametrize('name', sorted(CASES))
def test_minimises_a_quadratic(space, name):
    case = CASES[name]
    best, points = minimise(make_optimiser(name, space, seed=0, **case['options']), space,
                            case['budget'], case['batch'])
    level = random_level(space)
    # every optimiser gets below 10 % of a random point's expected score, the model-based
    # and evolutionary ones below 5 %
    assert best < (0.1 if name in ('random', 'pso') else 0.05) * level
    assert points.shape == (case['budget'], 3)
    assert np.all((points >= space.lows) & (points <= space.highs))


@pytest.mark.parametrize('name', ASK_TELL)
def test_same_seed_same_points(space, name):
    options = CASES[name]['options']
    batch = {'bo': 2, 'random': 4, 'cmaes': 7, 'pso': 10}[name]
    runs = [minimise(make_optimiser(name, space, seed=s, **options), space, 3 * batch, batch)[1]
            for s in (4, 4, 5)]
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.allclose(runs[0], runs[2])


@pytest.mark.parametrize('name', ASK_TELL)
@pytest.mark.parametrize('n', [1, 3])
def test_ask_returns_n_points_within_bounds(space, name, n):
    optimiser = make_optimiser(name, space, seed=1, **CASES[name]['options'])
    x = optimiser.ask(n)
    assert x.shape == (n, 3)
    assert np.all((x >= space.lows) & (x <= space.highs))
    assert len({tuple(p) for p in x}) == n  # distinct points


def test_cmaes_starts_around_the_defaults(space):
    x = make_optimiser('cmaes', space, seed=0).ask(7)
    centre = space.to_unit(space.defaults[None])[0]
    assert np.abs(space.to_unit(x).mean(axis=0) - centre).max() < 0.35  # sigma0 is 0.25 of the range


def test_unknown_optimiser(space):
    with pytest.raises(ConfigError, match="unknown optimizer 'nelder-mead'"):
        make_optimiser('nelder-mead', space)


@pytest.mark.parametrize('name', sorted(set(OPTIMISERS) - set(ASK_TELL)))
def test_least_squares_optimisers_are_not_ask_tell(space, name):
    # least squares needs residual vectors: a Calibration runs it (test_least_squares.py)
    with pytest.raises(ConfigError, match='has no ask/tell interface'):
        make_optimiser(name, space)


@pytest.mark.parametrize('name, batch', [('cmaes', 4), ('pso', 4)])
def test_batches_that_do_not_divide_the_population(space, name, batch):
    best, points = minimise(make_optimiser(name, space, seed=0), space, 40, batch)
    assert points.shape == (40, 3) and np.isfinite(best)


def test_pso_leaves_logging_and_working_directory_alone(space, tmp_path, monkeypatch):
    # pyswarms' Reporter would add root handlers and open report.log in the cwd
    import logging
    monkeypatch.chdir(tmp_path)
    before = list(logging.getLogger().handlers)
    minimise(make_optimiser('pso', space, seed=1), space, 20, 10)
    assert logging.getLogger().handlers == before
    assert not (tmp_path / 'report.log').exists()


def test_bo_log_objective_models_the_logarithm(space):
    """With log_objective the GP is fitted to log(objective) (MSE spans orders of magnitude)."""
    told = []
    for log_objective in (False, True):
        opt = make_optimiser('bo', space, seed=1, n_initial_points=4, log_objective=log_objective)
        values = []
        for _ in range(3):
            points = opt.ask(2)
            batch = [float(np.sum((p - space.defaults) ** 2)) + 1e-6 for p in points]
            opt.tell(points, batch)
            values += batch
        told.append((np.array(opt._opt.yi), np.array(values)))
    (raw_yi, raw), (log_yi, logged) = told
    np.testing.assert_allclose(raw_yi, raw)
    np.testing.assert_allclose(log_yi, np.log(logged))
