"""The drive gains' prior and the plausibility check of shadow-twin identify
(shadow_twin/identification/priors.py): a gain the data determine ignores the prior, one they
cannot stays near UR's nominal value with the reason printed; an implausible fit is refused."""

from __future__ import annotations

import json

from support import identify as H
import numpy as np
import pytest

from shadow_twin.cli.identify import main
from shadow_twin.identification.fit import solve
from shadow_twin.identification.priors import GainPrior, implausible
from shadow_twin.identification.regressor import Regressors
from shadow_twin.identification.report import prior_lines

JOINTS = ['shoulder_pan_joint', 'wrist_3_joint']


def _synthetic(known_scale: tuple[float, float], gains=(12.0, 7.0), n: int = 3000, seed: int = 0):
    """Regressors of two joints whose rigid-body torque has the RMS ``known_scale`` (N m), and their
    currents (A) with 0.02 A of noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) * 0.01
    qd = np.column_stack([np.sin(0.7 * t), np.cos(1.1 * t)])
    qdd = np.column_stack([0.7 * np.cos(0.7 * t), -1.1 * np.sin(1.1 * t)])
    tau = np.column_stack([s * np.sin(0.3 * t + k) for k, s in enumerate(known_scale)]) * np.sqrt(2)
    reg = Regressors(tau, np.zeros((n, 2, 10)), qd, qdd, np.tanh(qd / 0.01)[:, :, None], np.array([1e-3]))
    torque = tau + 0.5 * qd + 2.0 * np.tanh(qd / 0.01)
    effort = torque / np.array(gains) + 0.05 + rng.normal(0.0, 0.02, (n, 2))
    return reg, effort


def test_a_gain_the_data_determine_ignores_the_prior_one_they_cannot_stays_near_it():
    """Joint 0 carries 50 N m of rigid-body torque: its gain is the data's (12, not the nominal
    13.6). Joint 1 carries 1e-4 N m: its gain is not in the data (the friction and damping scale
    with it), so it stays near UR's nominal 9.0, not wherever the noise puts it."""
    reg, effort = _synthetic((50.0, 1e-4))
    prior = GainPrior.for_joints(JOINTS)
    with_prior = solve(reg, effort, JOINTS, 'A', payload=False, choose_distance=False, gain_prior=prior)
    gains = with_prior.parameters.drive_gain
    assert gains[0] == pytest.approx(12.0, rel=0.01) and with_prior.prior_share[0] < 0.01
    assert gains[1] == pytest.approx(9.0, rel=0.05) and with_prior.prior_share[1] > 0.5
    lines = prior_lines(with_prior)
    assert len(lines) == 1 and lines[0].startswith('wrist_3_joint drive gain') and "nominal 9 N m/A" in lines[0]
    without = solve(reg, effort, JOINTS, 'A', payload=False, choose_distance=False)
    assert not without.parameters.drive_gain[1] == pytest.approx(9.0, rel=0.05)   # the noise's, not a gain
    assert without.parameters.drive_gain[0] == pytest.approx(gains[0], rel=1e-3)


def test_the_prior_row_and_its_share():
    prior = GainPrior.for_joints(['shoulder_pan_joint', 'my_gripper_joint'])
    assert prior.nominal[0] == 13.6 and np.isnan(prior.nominal[1])
    weight, rhs = prior.row(0, 0.02)
    assert weight == pytest.approx(0.02 / (0.25 / 13.6)) and rhs == pytest.approx(weight / 13.6)
    assert prior.row(1, 0.02) is None and prior.share(1, np.ones(10), 0.02) is None
    assert prior.share(0, np.zeros(10), 0.02) == 1.0 and prior.share(0, np.full(1000, 100.0), 0.02) < 1e-6


def test_implausible_gains_and_payloads_are_named():
    prior = GainPrior.for_joints(JOINTS)
    assert implausible(JOINTS, np.array([13.0, 9.5]), 2.0, prior) == []
    found = implausible(JOINTS, np.array([113.6, 0.43]), 2.0, prior)
    assert found == ['shoulder_pan_joint drive gain 113.6 N m/A (nominal 13.6)',
                     'wrist_3_joint drive gain 0.43 N m/A (nominal 9)']
    assert implausible(JOINTS, None, 1200.0, prior) == ['payload 1200 kg (at most 40)']
    assert implausible(JOINTS, np.array([np.nan, 9.0]), np.nan, prior)[0].startswith('shoulder_pan_joint')


def test_currents_scaled_by_1e9_are_refused_and_nothing_is_written(tmp_path, capsys):
    """The adversary's case: currents in nA where A were expected gave gains at the solver's limit
    and "78 % lower", exit 0. Now: one line, exit 2, no --out."""
    from shadow_twin.calibration.recordings.recording import read_joint_states
    runs = H.mock_runs(tmp_path / 'mock', 'ur10e', seeds=(1,), holdout_seed=9, duration=10.0)
    rec = read_joint_states(runs['bags'][0])
    frame = rec.frame
    scaled = H.write_bag(tmp_path / 'scaled', rec.times - 1000.0, frame['position'][H.JOINTS].to_numpy(),
                         frame['velocity'][H.JOINTS].to_numpy(), 1e9 * frame['effort'][H.JOINTS].to_numpy())
    out = tmp_path / 'out'
    assert main(['--model', str(runs['xml']), '--bag', str(scaled), '--out', str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'implausible identification, nothing written' in err[0]
    assert 'drive gain' in err[0] or 'payload' in err[0], err[0]
    assert not out.exists()
    assert main(['--model', str(runs['xml']), '--bag', str(runs['bags'][0]), '--out', str(out)]) == 0
    priors = json.loads((out / 'report.json').read_text())['parameters']['priors']
    assert set(priors) == set(H.JOINTS) and all(0 <= p['prior_share'] < 0.5 for p in priors.values())
