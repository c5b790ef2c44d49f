"""shadow_twin.calibration.scoring.metrics against plain numpy computations."""

import numpy as np
import pytest

from shadow_twin.calibration.scoring import metrics

JOINTS = ['rh_FFJ1', 'rh_FFJ2', 'rh_FFJ3', 'rh_FFJ4', 'rh_MFJ1', 'rh_THJ1']


@pytest.fixture
def streams():
    rng = np.random.default_rng(7)
    real = rng.normal(size=(400, len(JOINTS)))
    sim = real + rng.normal(scale=rng.uniform(0.01, 0.5, len(JOINTS)), size=real.shape)
    return real, sim


def test_per_joint_mse_and_rmse(streams):
    real, sim = streams
    mse = metrics.per_joint_mse(real, sim, JOINTS)
    assert list(mse) == JOINTS
    expected = ((sim - real) ** 2).mean(axis=0)
    np.testing.assert_allclose([mse[j] for j in JOINTS], expected, rtol=1e-12)
    rmse = metrics.rmse(mse)
    np.testing.assert_allclose([rmse[j] for j in JOINTS], np.sqrt(expected), rtol=1e-12)
    assert all(isinstance(v, float) for v in mse.values())
    assert metrics.per_joint_mse(real, real, JOINTS) == dict.fromkeys(JOINTS, 0.0)


def test_group_means(streams):
    real, sim = streams
    mse = metrics.per_joint_mse(real, sim, JOINTS)
    groups = metrics.group_means(mse, metrics.FINGER_GROUPS)
    assert set(groups) == {'FF', 'MF'}  # RF and LF have no joint here: left out
    assert groups['FF'] == pytest.approx(np.mean([mse[f'rh_FFJ{k}'] for k in (1, 2, 3, 4)]), rel=1e-12)
    assert groups['MF'] == pytest.approx(mse['rh_MFJ1'], rel=1e-12)  # mean of the joints present
    assert metrics.FINGER_GROUPS['LF'] == ('rh_LFJ1', 'rh_LFJ2', 'rh_LFJ3', 'rh_LFJ4')


def test_weighted_objective(streams):
    real, sim = streams
    mse = metrics.per_joint_mse(real, sim, JOINTS)
    weights = {'rh_FFJ1': 2.0, 'rh_FFJ3': 0.5, 'rh_THJ1': 1.5}
    expected = sum(w * mse[j] for j, w in weights.items()) / sum(weights.values())
    assert metrics.weighted_objective(mse, weights) == pytest.approx(expected, rel=1e-12)
    equal = dict.fromkeys(metrics.PUBLISHED_JOINTS, 1.0)
    assert metrics.weighted_objective(mse, equal) == pytest.approx(
        np.mean(((sim - real) ** 2)[:, :4]), rel=1e-12)  # the published objective: mean over FFJ1-4
    with pytest.raises(KeyError):
        metrics.weighted_objective(mse, {'rh_LFJ1': 1.0})
    with pytest.raises(ValueError, match='positive'):
        metrics.weighted_objective(mse, {'rh_FFJ1': 0.0})


def test_shape_mismatch(streams):
    real, sim = streams
    with pytest.raises(ValueError, match='shape mismatch'):
        metrics.per_joint_mse(real, sim[:-1], JOINTS)
    with pytest.raises(ValueError, match='shape mismatch'):
        metrics.per_joint_mse(real, sim, JOINTS[:-1])


def test_reduction_percent():
    from shadow_twin.calibration.scoring.metrics import reduction_percent
    assert reduction_percent(0.5, 0.1) == pytest.approx(80.0)
    assert reduction_percent(0.1, 0.3) == pytest.approx(-200.0)
    assert reduction_percent(0.0, 0.3) == 0.0
