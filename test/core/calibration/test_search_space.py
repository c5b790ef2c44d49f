"""shadow_twin.calibration.search.search_space: resolving search-space YAML against a model."""

import numpy as np
import pytest
import yaml

from shadow_twin.control.controller import SimController
from shadow_twin.common.errors import SearchSpaceError
from shadow_twin.model.calibratable import get_parameter
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.calibration.search.search_space import LOG_FLOOR, RANGE_GAP, Dimension, SearchSpace

from conftest import FINGERS_SPACE, THUMB_SPACE

FINGERS = ('FF', 'MF', 'RF', 'LF')
EXPECTED_NAMES = [f'J{k}_{attr}' for attr in ('damping', 'frictionloss', 'stiffness', 'springref', 'range_upper')
                  for k in (1, 2, 3)]


@pytest.mark.parametrize('which', ['builtin', 'shadow'])
def test_shipped_fingers_space_resolves(which, request):
    twin = TwinModel(request.getfixturevalue('shadow_model') if which == 'shadow' else None)
    space = SearchSpace.from_yaml(FINGERS_SPACE, twin)
    assert len(space.dimensions) == 15
    assert sorted(space.names) == sorted(EXPECTED_NAMES)
    for dim in space.dimensions:
        k, attribute = dim.name[1], dim.name.split('_', 1)[1]
        assert [t.name for t in dim.targets] == [f'rh_{f}J{k}' for f in FINGERS]
        assert {t.attribute for t in dim.targets} == {attribute} and {t.kind for t in dim.targets} == {'joint'}
        values = [get_parameter(twin.model, t) for t in dim.targets]
        assert dim.default == pytest.approx(np.mean(values))
        assert dim.low < dim.high and not dim.log
    assert len(space.values(space.defaults)) == 60  # 15 values, each set on 4 joints


def test_relative_bounds():
    twin = TwinModel()
    space = SearchSpace.from_yaml(FINGERS_SPACE, twin)
    dims = {d.name: d for d in space.dimensions}
    for k in (1, 2, 3):
        for attribute in ('damping', 'frictionloss'):
            d = dims[f'J{k}_{attribute}']
            assert d.default > 0
            assert (d.low, d.high) == pytest.approx((0.3 * d.default, 1.7 * d.default))  # +/-70 %
        d = dims[f'J{k}_range_upper']
        assert (d.low, d.high) == pytest.approx((0.95 * d.default, 1.05 * d.default))  # +/-5 %
    # 'around' centres relative bounds where the model default is 0
    assert (dims['J1_stiffness'].low, dims['J1_stiffness'].high) == pytest.approx((0.0006, 0.0034))
    assert dims['J1_stiffness'].default == 0.0
    assert (dims['J1_springref'].low, dims['J1_springref'].high) == pytest.approx((-170.0, -30.0))  # sorted
    assert (dims['J2_springref'].low, dims['J2_springref'].high) == pytest.approx((0.3 * 101.5708, 1.7 * 101.5708))
    assert (dims['J3_stiffness'].low, dims['J3_stiffness'].high) == (0.0, 0.0034)  # absolute


def test_values_named_and_unit_cube():
    twin = TwinModel()
    space = SearchSpace.from_yaml(THUMB_SPACE, twin)
    assert len(space.dimensions) == 10 and all(d.log for d in space.dimensions)
    assert [t.name for t in space.dimensions[0].targets] == ['rh_THJ1']
    rng = np.random.default_rng(0)
    x = space.from_unit(rng.random((20, 10)))
    assert np.all((x >= space.lows) & (x <= space.highs))
    np.testing.assert_allclose(space.to_unit(x), space.to_unit(space.from_unit(space.to_unit(x))))
    np.testing.assert_allclose(space.from_unit(space.to_unit(x)), x, rtol=1e-12)
    # log dimensions: the unit-cube middle is the geometric mean
    np.testing.assert_allclose(space.from_unit(np.full((1, 10), 0.5))[0], np.sqrt(space.lows * space.highs))
    named = space.named(x[0])
    assert list(named) == space.names
    values = space.values(x[0])
    assert values[twin.target('joint', 'rh_THJ3', 'frictionloss')] == named['THJ3_frictionloss']
    with pytest.raises(ValueError, match='point has 3 values'):
        space.values([1, 2, 3])
    doc = space.to_dict()
    assert doc['THJ1_damping']['targets'] == ['rh_THJ1.damping'] and doc['THJ1_damping']['log'] is True


def test_actuator_gains_after_the_controller_conversion(tmp_path):
    twin = TwinModel()
    SimController(twin.model)  # motors become servos with kp 4
    path = tmp_path / 'gains.yaml'
    path.write_text(yaml.safe_dump({'parameters': [
        {'name': 'J0_kp', 'actuators': ['rh_*J0'], 'attribute': 'kp', 'bounds': {'relative': 0.5}}]}))
    (dim,) = SearchSpace.from_yaml(path, twin).dimensions
    assert [t.name for t in dim.targets] == ['rh_FFJ0', 'rh_MFJ0', 'rh_RFJ0', 'rh_LFJ0']
    assert (dim.low, dim.default, dim.high) == pytest.approx((2.0, 4.0, 6.0))


def test_dimension_objects_directly():
    space = SearchSpace([Dimension('a', [], -1.0, 2.0, 0.5), Dimension('b', [], 1e-3, 1.0, 0.1, log=True)])
    np.testing.assert_allclose(space.defaults, [0.5, 0.1])
    with pytest.raises(SearchSpaceError, match='no parameters'):
        SearchSpace([], source='empty.yaml')


ENTRY = {'name': 'J3_damping', 'joints': ['rh_[FMRL]FJ3'], 'attribute': 'damping', 'bounds': [0.01, 0.2]}


def _load(tmp_path, entries):
    path = tmp_path / 'space.yaml'
    path.write_text(yaml.safe_dump({'parameters': entries}))
    return SearchSpace.from_yaml(path, TwinModel())


@pytest.mark.parametrize('entries, message', [
    ([dict(ENTRY, name='bad_joint', joints=['rh_ZZJ1'])], r"parameter 'bad_joint'.*no joint matches 'rh_ZZJ1'"),
    ([dict(ENTRY, name='bad_class', joints=None, classes=['FJ9'])], r"parameter 'bad_class'.*default class 'FJ9'"),
    ([dict(ENTRY, name='bad_attr', attribute='mass')], r"parameter 'bad_attr': unknown joint attribute 'mass'"),
    ([dict(ENTRY, name='bad_act', joints=None, actuators=['rh_*J0'], attribute='damping')],
     r"parameter 'bad_act': unknown actuator attribute 'damping'"),
    ([dict(ENTRY, name='no_actuator', joints=None, actuators=['rh_XXJ0'], attribute='kp')],
     r"parameter 'no_actuator'.*no actuator matches"),
    ([dict(ENTRY, name='inverted', bounds=[0.2, 0.01])], r"parameter 'inverted': inverted or empty bounds"),
    ([dict(ENTRY, name='empty', bounds=[0.1, 0.1])], r"parameter 'empty': inverted or empty bounds"),
    ([dict(ENTRY, name='zero_width', attribute='stiffness', bounds={'relative': 0.7})],
     r"parameter 'zero_width': relative bounds of 0.7 around 0 have zero width"),
    ([dict(ENTRY, name='no_fraction', bounds={'relative': 0.0})], r"parameter 'no_fraction': relative bounds of 0"),
    ([dict(ENTRY, name='logneg', attribute='springref', bounds=[-1.0, 1.0], log=True)],
     r"parameter 'logneg': log scale needs positive bounds"),
    ([dict(ENTRY, name='no_bounds', bounds=None)], r"parameter 'no_bounds': bounds must be"),
    ([dict(ENTRY, name='text_bounds', bounds=['a', 'b'])], r"parameter 'text_bounds': bounds must be numbers"),
    ([dict(ENTRY, name='inf_bounds', bounds=[0.0, float('inf')])], r"parameter 'inf_bounds': bounds must be finite"),
    ([dict(ENTRY, name='no_joints', joints=None)], r"parameter 'no_joints': give joints, classes, actuators, geoms or bodies"),
    ([dict(ENTRY, name='typo', bound=[0, 1])], r"parameter 1: unknown key\(s\) \['bound'\]"),
    ([ENTRY, dict(ENTRY, name='FF3_again', joints=['rh_FFJ3'])],
     r"rh_FFJ3.damping is in both 'J3_damping' and 'FF3_again'"),
    ([ENTRY, dict(ENTRY, joints=['rh_THJ1'])], r"duplicate parameter name 'J3_damping'"),
    ([], r'needs a non-empty "parameters" list'),
])
def test_errors_name_the_entry(tmp_path, entries, message):
    if message.startswith('parameter 1'):  # the unknown key is reported by position
        entries = [ENTRY] + entries
    with pytest.raises(SearchSpaceError, match=message) as info:
        _load(tmp_path, entries)
    assert str(tmp_path / 'space.yaml') in str(info.value)


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(SearchSpaceError, match='search space file not found'):
        SearchSpace.from_yaml(tmp_path / 'absent.yaml', TwinModel())
    bad = tmp_path / 'bad.yaml'
    bad.write_text('parameters: [unclosed\n')
    with pytest.raises(SearchSpaceError, match='not valid YAML'):
        SearchSpace.from_yaml(bad, TwinModel())


@pytest.mark.parametrize('entry', [dict(ENTRY, bounds={'relative': 'lots'}),
                                   dict(ENTRY, around='middle', bounds={'relative': 0.5})])
def test_non_numeric_relative_bounds(tmp_path, entry):
    with pytest.raises(SearchSpaceError, match="parameter 'J3_damping'"):
        _load(tmp_path, [entry])


# -- physical domains --------------------------------------------------------------------------
def _thumb_entries(fraction: float, log: bool) -> list[dict]:
    """The published thumb space (config/calibration/thumb.yaml) at +/-``fraction``."""
    entries = yaml.safe_load(THUMB_SPACE.read_text())['parameters']
    return [dict(e, bounds={'relative': fraction}, log=log) for e in entries]


def test_thumb_space_at_200_percent_is_clipped_at_zero_with_a_warning(tmp_path, caplog):
    """+/-200 % around a positive default gives a negative low: clipped to 0 (linear scale)."""
    caplog.set_level('WARNING', logger='shadow_twin.calibration.search.search_space')
    space = _load(tmp_path, _thumb_entries(2.0, log=False))
    assert len(space.dimensions) == 10
    for dim in space.dimensions:
        assert dim.default > 0
        assert (dim.low, dim.high) == (0.0, pytest.approx(3.0 * dim.default))
        warnings = [r.getMessage() for r in caplog.records if f"parameter '{dim.name}'" in r.getMessage()]
        assert len(warnings) == 1, warnings
        assert f'bounds [{-dim.default:.7g}, {3 * dim.default:.7g}]' in warnings[0]
        assert f'clipped to [0, {3 * dim.default:.7g}]' in warnings[0]
    assert all(r.levelname == 'WARNING' for r in caplog.records)
    x = space.from_unit(np.random.default_rng(1).random((50, 10)))
    assert np.all(x >= 0)  # no negative damping or frictionloss is ever simulated


def test_thumb_space_at_200_percent_on_a_log_scale_starts_at_the_floor(tmp_path, caplog):
    caplog.set_level('WARNING', logger='shadow_twin.calibration.search.search_space')
    space = _load(tmp_path, _thumb_entries(2.0, log=True))
    for dim in space.dimensions:
        assert dim.log and dim.low == pytest.approx(LOG_FLOOR * dim.high) and dim.low > 0
        assert dim.high == pytest.approx(3.0 * dim.default)
    assert len(caplog.records) == 10 and 'log-scale floor' in caplog.records[0].getMessage()
    # a log dimension given a low of 0 gets the same floor
    (dim,) = _load(tmp_path, [dict(ENTRY, bounds=[0.0, 0.2], log=True)]).dimensions
    assert (dim.low, dim.high) == pytest.approx((LOG_FLOOR * 0.2, 0.2))


def test_bounds_inside_the_domain_are_kept_without_a_warning(tmp_path, caplog):
    caplog.set_level('WARNING', logger='shadow_twin.calibration.search.search_space')
    space = _load(tmp_path, _thumb_entries(0.7, log=True))
    for dim in space.dimensions:
        assert (dim.low, dim.high) == pytest.approx((0.3 * dim.default, 1.7 * dim.default))
    assert caplog.records == []


def test_range_ends_stay_on_their_side_of_the_other_limit(tmp_path, caplog):
    twin = TwinModel()
    upper = get_parameter(twin.model, twin.target('joint', 'rh_FFJ3', 'range_upper'))
    lower = get_parameter(twin.model, twin.target('joint', 'rh_FFJ3', 'range_lower'))
    assert lower < upper
    caplog.set_level('WARNING', logger='shadow_twin.calibration.search.search_space')
    space = _load(tmp_path, [
        {'name': 'lo', 'joints': ['rh_FFJ3'], 'attribute': 'range_lower', 'bounds': [lower - 1, upper + 1]},
        {'name': 'hi', 'joints': ['rh_MFJ3'], 'attribute': 'range_upper', 'bounds': [lower - 1, upper + 1]}])
    lo, hi = space.dimensions
    assert (lo.low, lo.high) == pytest.approx((lower - 1, upper - RANGE_GAP))
    assert hi.low == pytest.approx(lower + RANGE_GAP) and hi.high == pytest.approx(upper + 1)
    assert "parameter 'lo'" in caplog.records[0].getMessage() and 'range_lower' in caplog.records[0].getMessage()
    assert "parameter 'hi'" in caplog.records[1].getMessage()


def test_actuator_gains_are_clipped_to_their_domain(tmp_path, caplog):
    twin = TwinModel()
    SimController(twin.model)  # motors become servos with kp 4
    path = tmp_path / 'gains.yaml'
    path.write_text(yaml.safe_dump({'parameters': [
        {'name': 'J0_kp', 'actuators': ['rh_*J0'], 'attribute': 'kp', 'bounds': [-1.0, 8.0]},
        {'name': 'J0_kd', 'actuators': ['rh_*J0'], 'attribute': 'kd', 'bounds': [-0.1, 0.5]}]}))
    caplog.set_level('WARNING', logger='shadow_twin.calibration.search.search_space')
    kp, kd = SearchSpace.from_yaml(path, twin).dimensions
    assert (kp.low, kp.high) == pytest.approx((LOG_FLOOR * 8.0, 8.0)) and kp.low > 0  # kp > 0
    assert (kd.low, kd.high) == (0.0, 0.5)                                           # kd >= 0
    assert [r.getMessage().split(': bounds')[0].rsplit(' ', 1)[-1] for r in caplog.records] == ["'J0_kp'", "'J0_kd'"]


@pytest.mark.parametrize('entry, message', [
    (dict(ENTRY, name='all_negative', bounds=[-0.2, -0.1]),
     r"parameter 'all_negative': bounds \[-0.2, -0.1\] leave nothing of the physical domain of damping"),
    ({'name': 'lower_above', 'joints': ['rh_FFJ3'], 'attribute': 'range_lower', 'bounds': [2.0, 3.0]},
     r"parameter 'lower_above': .* of range_lower \(below the upper limit 1.5708\)"),
    ({'name': 'negative_stiffness', 'joints': ['rh_FFJ3'], 'attribute': 'stiffness', 'bounds': [-2.0, 0.0]},
     r"parameter 'negative_stiffness': .* leave nothing .* of stiffness"),
])
def test_empty_after_clipping_is_an_error(tmp_path, entry, message):
    with pytest.raises(SearchSpaceError, match=message):
        _load(tmp_path, [entry])


def test_subset_keeps_the_order_and_rejects_unknown_names():
    space = SearchSpace.from_yaml(THUMB_SPACE, TwinModel())
    sub = space.subset(['THJ3_frictionloss', 'THJ1_damping'])
    assert sub.names == ['THJ1_damping', 'THJ3_frictionloss']
    assert sub.dimensions[0] is space.dimensions[0]
    with pytest.raises(SearchSpaceError, match=r"no parameter\(s\) \['nope'\]"):
        space.subset(['nope'])
