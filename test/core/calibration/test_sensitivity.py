"""shadow_twin.calibration.engine.sensitivity: uniform samples, Pearson influence index, JSON + tornado.

A synthetic evaluator stands in for the simulation: its objective is a known function of
the parameters, so which parameter drives it is known.
"""

import json

import numpy as np
import pytest

from shadow_twin.calibration.scoring.evaluation import Score
from shadow_twin.calibration.search.search_space import Dimension, SearchSpace
from shadow_twin.calibration.engine.sensitivity import (SENSITIVITY_JSON, TORNADO_PNG, draw_samples, influence_indices,
                                                        most_influential, screen, write_sensitivity)
from shadow_twin.common.errors import ConfigError
from shadow_twin.model.calibratable import ParameterTarget

PNG_MAGIC = b'\x89PNG\r\n\x1a\n'


def _space() -> SearchSpace:
    def dim(name, low, high, log=False):
        return Dimension(name, [ParameterTarget('joint', f'rh_{name}', 'damping')], low, high, (low + high) / 2, log)
    return SearchSpace([dim('strong', 0.0, 2.0), dim('inert', 1e-3, 1.0, log=True), dim('lowers', 5.0, 6.0)])


class SyntheticEvaluator:
    """evaluate(list of {target: value}, nthread) -> Scores of ``objective(values by dimension name)``."""

    objective_joints = ['rh_FFJ1']

    def __init__(self, objective):
        self.objective = objective
        self.calls = []

    def evaluate(self, parameter_sets, nthread=1):
        self.calls.append((len(parameter_sets), nthread))
        out = []
        for values in parameter_sets:
            named = {t.name[3:]: v for t, v in values.items()}
            out.append(Score(float(self.objective(named)), {'rh_FFJ1': 0.0}))
        return out


def _driven(p):
    """Strongly driven by 'strong' (up), weakly by 'lowers' (down), not at all by 'inert'."""
    return 3.0 * p['strong'] - 1.5 * p['lowers']


def test_influential_parameter_near_one_inert_near_zero():
    space = _space()
    evaluator = SyntheticEvaluator(_driven)
    result = screen(evaluator, space, samples=400, workers=3, seed=0)
    index = result.influence
    assert list(index) == space.names
    assert index['strong'] > 0.95                 # drives the objective up
    assert abs(index['inert']) < 0.2              # no effect: sampling noise only (sd 1/sqrt(400) = 0.05)
    assert -0.45 < index['lowers'] < -0.1         # a weaker effect (r about -0.24), the other way
    assert result.ranking()[0] == 'strong' and result.ranking()[-1] == 'inert'
    assert result.most_influential(2) == ['strong', 'lowers']  # in the space's order
    # batches of --workers on --workers threads, every sample scored once
    assert evaluator.calls == [(3, 3)] * 133 + [(1, 3)]
    assert result.objectives.shape == (400,) and result.samples.shape == (400, 3)
    np.testing.assert_allclose(result.objectives, [_driven(space.named(x)) for x in result.samples])


def test_samples_are_uniform_in_the_search_scale_and_seeded():
    space = _space()
    x = draw_samples(space, 400, seed=1)
    assert np.all((x >= space.lows) & (x <= space.highs))
    np.testing.assert_array_equal(x, draw_samples(space, 400, seed=1))
    assert not np.array_equal(x, draw_samples(space, 400, seed=2))
    # the log dimension is uniform in log10: about half the samples below the geometric mean
    below = np.mean(x[:, 1] < np.sqrt(1e-3 * 1.0))
    assert 0.4 < below < 0.6
    with pytest.raises(ConfigError, match='at least 3 samples'):
        draw_samples(space, 2)


def test_index_is_taken_in_the_search_scale():
    """An objective linear in log(value) of a log dimension correlates exactly (r = 1) in its
    search scale; the same samples on the linear value would not."""
    space = _space()
    result = screen(SyntheticEvaluator(lambda p: np.log(p['inert'])), space, samples=30, seed=0)
    assert result.influence['inert'] == pytest.approx(1.0, abs=1e-12)
    linear = np.corrcoef(result.samples[:, 1], result.objectives)[0, 1]
    assert linear < 0.95


def test_constant_objective_gives_zero_with_a_warning(caplog):
    result = screen(SyntheticEvaluator(lambda p: 0.25), _space(), samples=10)
    assert result.influence == {'strong': 0.0, 'inert': 0.0, 'lowers': 0.0}
    assert 'same (0.25 rad^2) for every sample' in caplog.text
    assert result.summary()['constant'] is True


def test_non_finite_objectives_are_left_out(caplog):
    unit = np.linspace(0, 1, 12)[:, None]
    objectives = 2 * unit[:, 0]
    objectives[[3, 7]] = [np.nan, np.inf]
    assert influence_indices(unit, objectives)[0] == pytest.approx(1.0)
    assert influence_indices(unit[:4], np.array([1.0, np.nan, np.nan, np.inf]))[0] == 0.0
    assert 'only 1 of 4 samples have a finite objective' in caplog.text


def test_most_influential_checks_k():
    influence = {'a': 0.1, 'b': -0.9, 'c': 0.5}
    assert most_influential(influence, 2) == ['b', 'c']
    assert most_influential(influence, 2, order=['c', 'a', 'b']) == ['c', 'b']
    for k in (0, 4):
        with pytest.raises(ConfigError, match=f'--screen {k}: choose between 1 and the 3 parameters'):
            most_influential(influence, k)


def test_json_and_tornado_are_written(tmp_path):
    space = _space()
    result = screen(SyntheticEvaluator(_driven), space, samples=20, workers=2, seed=3)
    doc = write_sensitivity(tmp_path / 'out', result, {'inputs': {'model': {'path': 'm.xml', 'sha256': 'x'}}})
    written = json.loads((tmp_path / 'out' / SENSITIVITY_JSON).read_text())
    assert written == json.loads(json.dumps(doc))
    assert list(written['influence']) == result.ranking()        # sorted by |index|
    assert written['influence'] == pytest.approx(result.influence)
    assert all(-1 <= v <= 1 for v in written['influence'].values())
    assert written['samples'] == 20 and written['seed'] == 3 and len(written['draws']) == 20
    assert written['draws'][0]['objective'] == pytest.approx(result.objectives[0])
    assert written['objective']['min'] == pytest.approx(result.objectives.min())
    assert written['objective']['non_finite'] == 0 and written['objective']['joints'] == ['rh_FFJ1']
    assert written['inputs']['model']['sha256'] == 'x'
    png = (tmp_path / 'out' / TORNADO_PNG).read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 5000
    assert sorted(p.name for p in (tmp_path / 'out').iterdir()) == [SENSITIVITY_JSON, TORNADO_PNG]  # no temp files
