"""shadow-twin identify on a mock UR10e (test/identify_helpers.py): recovery, hold-out error, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import identify_helpers as H
import numpy as np
import pytest

from shadow_twin.cli.identify import main


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    return H.mock_runs(tmp_path_factory.mktemp('mock'), 'ur10e')


@pytest.fixture(scope='module')
def identified(runs, tmp_path_factory):
    out = tmp_path_factory.mktemp('id') / 'out'
    argv = ['--model', str(runs['xml']), '--out', str(out), '--holdout', str(runs['csv'])]
    for bag in runs['bags']:
        argv += ['--bag', str(bag)]
    assert main(argv) == 0
    return out, json.loads((out / 'report.json').read_text())


@pytest.mark.parametrize('name', ['drive_gain', 'armature', 'damping', 'frictionloss', 'offset'])
@pytest.mark.parametrize('joint', H.JOINTS)
def test_recovers_each_joint_parameter_within_10_percent(runs, identified, joint, name):
    _, report = identified
    value = report['parameters']['values']['joints'][joint][name]
    assert value == pytest.approx(runs['truth'][name][H.JOINTS.index(joint)], rel=0.10)


def test_recovers_the_payload_within_10_percent(runs, identified):
    _, report = identified
    payload = report['parameters']['values']['payload']
    truth = runs['truth']
    assert payload['mass'] == pytest.approx(truth['payload_mass'], rel=0.10)
    com = np.asarray(payload['com'])
    assert np.linalg.norm(com - truth['payload_com']) < 0.1 * np.linalg.norm(truth['payload_com'])
    intervals = report['parameters']['intervals']
    assert intervals['payload.mass']['low'] < truth['payload_mass'] < intervals['payload.mass']['high'] + 0.1


def test_holdout_rmse_at_least_80_percent_lower(identified):
    out, report = identified
    (hold,) = report['holdout'].values()
    assert hold['reduction_percent'] >= 80.0
    assert {p.name for p in out.iterdir()} >= {'calibrated.xml', 'parameters.yaml', 'report.json'}


def test_bag_without_effort_is_one_line_exit_2(runs, tmp_path, capsys):
    from shadow_twin.calibration.recording import JointStateRecording, write_joint_states
    t = np.arange(200) * 0.01
    q = np.tile(H.HOME, (200, 1)) + 0.1 * np.sin(t)[:, None]
    bag = write_joint_states(tmp_path / 'noeffort', [JointStateRecording.from_arrays(t + 1, H.JOINTS, q)])
    out = tmp_path / 'out'
    assert main(['--model', str(runs['xml']), '--bag', str(bag), '--out', str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'no effort' in err[0]
    assert not out.exists()


def test_unknown_arm_and_cut_csv_header(runs, tmp_path, capsys):
    out = tmp_path / 'out'
    assert main(['--arm', 'ur99', '--bag', str(runs['bags'][0]), '--out', str(out)]) == 2
    bad = tmp_path / 'cut.csv'
    bad.write_text('timestamp,actual_q_0\n0.0,0.1\n')
    assert main(['--model', str(runs['xml']), '--csv', str(bad), '--out', str(out)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 2
    assert not out.exists()


def test_csv_cut_row_dropped_and_counted(runs, tmp_path):
    from shadow_twin.identification.recordings import ColumnMap, from_csv
    lines = Path(runs['csv']).read_text().splitlines()
    lines[100] = lines[100][:20]
    lines[200] = lines[200].replace(lines[200].split(',')[3], 'nan', 1)
    path = tmp_path / 'cut.csv'
    path.write_text('\n'.join(lines) + '\n')
    rec = from_csv(path, ColumnMap.load('rtde', 6), H.JOINTS)
    assert rec.dropped['cut_rows'] == 1 and rec.dropped['nan_rows'] == 1


def test_outputs_predict_through_the_live_contract(runs, identified):
    """calibrated.xml + parameters.yaml through InverseDynamics / DriveParameters (what the live
    watch reads) predict the hold-out's currents to near the noise; the nominal model does not."""
    from shadow_twin.identification.evaluate import evaluate_effort
    out, _ = identified
    after = evaluate_effort(out / 'calibrated.xml', out / 'parameters.yaml', runs['holdout'], printer=None)
    before = evaluate_effort(runs['xml'], None, runs['holdout'], printer=None)
    noise = H.MockTruth().noise
    for joint in H.JOINTS:
        assert after['rmse'][joint] < 2.5 * noise, joint
    assert np.mean([before['rmse'][j] for j in H.JOINTS]) > 5 * np.mean([after['rmse'][j] for j in H.JOINTS])
    assert after['intervals'] == []
    assert set(after['sigma']) == set(H.JOINTS) and all(0 < s < 2 * noise for s in after['sigma'].values())


def test_existing_out_with_other_files_is_refused(runs, tmp_path, capsys):
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'parameters.yaml').write_text('mine\n')
    assert main(['--model', str(runs['xml']), '--bag', str(runs['bags'][0]), '--out', str(out)]) == 2
    assert (out / 'parameters.yaml').read_text() == 'mine\n'
    assert 'not empty' in capsys.readouterr().err


def test_no_motion_is_refused(runs, tmp_path, capsys):
    t = np.arange(300) * 0.01
    q = np.tile(H.HOME, (300, 1))
    bag = H.write_bag(tmp_path / 'still', t, q, np.zeros_like(q), np.ones_like(q))
    out = tmp_path / 'out'
    assert main(['--model', str(runs['xml']), '--bag', str(bag), '--out', str(out)]) == 2
    assert 'no usable motion' in capsys.readouterr().err
    assert not out.exists()


def test_torque_recordings_in_nm(runs):
    """--effort-unit Nm: no drive gain, the friction and payload still recovered."""
    import mujoco
    from shadow_twin.identification.fit import solve
    from shadow_twin.identification.recordings import from_bag
    from shadow_twin.identification.regressor import EffortRegressor
    from shadow_twin.identification.samples import prepare
    from shadow_twin.identification.signals import FilterSettings
    truth = runs['truth']
    model = mujoco.MjModel.from_xml_path(str(runs['xml']))
    regressor = EffortRegressor(model, H.JOINTS)
    parts = []
    for bag in runs['bags']:
        rec = from_bag(bag, H.JOINTS, 'Nm')
        rec.efforts = (rec.efforts - truth['offset']) * truth['drive_gain']
        parts.append(prepare(rec, regressor, FilterSettings()))
    from shadow_twin.identification.regressor import Regressors
    result = solve(Regressors.concatenate([p.regressors for p in parts]), np.concatenate([p.effort for p in parts]),
                   H.JOINTS, 'Nm')
    params = result.parameters
    assert np.allclose(params.drive_gain, 1.0)
    assert np.allclose(params.frictionloss, truth['frictionloss'], rtol=0.1)
    assert np.allclose(params.damping, truth['damping'], rtol=0.1)
    assert params.payload_mass == pytest.approx(truth['payload_mass'], rel=0.1)


def test_corrupted_mcap_is_one_line_exit_2(runs, tmp_path, capsys):
    import shutil
    bag = tmp_path / 'broken'
    shutil.copytree(runs['bags'][0], bag)
    mcap = next(bag.glob('*.mcap'))
    data = bytearray(mcap.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 8192] = b'\xff' * min(8192, len(data) - middle)
    mcap.write_bytes(bytes(data))
    out = tmp_path / 'out'
    assert main(['--model', str(runs['xml']), '--bag', str(bag), '--out', str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith('shadow-twin identify: error:')
    assert not out.exists()


def test_links_base_parameters_agree_with_the_true_links(runs, tmp_path):
    """--links: the mock's links are the model's, so every base parameter's deviation from the
    model's value is within 4 of its standard deviations; the joint terms stay as without."""
    out = tmp_path / 'out'
    argv = ['--model', str(runs['xml']), '--out', str(out), '--links']
    for bag in runs['bags']:
        argv += ['--bag', str(bag)]
    assert main(argv) == 0
    links = json.loads((out / 'report.json').read_text())['links']
    assert 20 <= links['rank'] < links['columns'] == 60
    for name, p in links['parameters'].items():
        assert abs(p['value'] - p['nominal']) < 4 * p['sd'] + 1e-6, name
    for k, joint in enumerate(H.JOINTS):
        assert links['joints'][joint]['damping'] == pytest.approx(runs['truth']['damping'][k], rel=0.1)


def test_a_bag_whose_clock_jumps_back_is_read_with_those_samples_dropped_and_counted(runs, tmp_path):
    """A ROS clock stepped back mid-recording (NTP): identify drops the samples stamped before the
    latest one already read, and counts them; the strict reader of the calibration refuses it."""
    from shadow_twin.calibration.recording import read_joint_states
    from shadow_twin.common.errors import RecordingError
    from shadow_twin.identification.recordings import from_bag
    good = from_bag(runs['holdout'], H.JOINTS)
    t = good.times.copy()
    t[300:] -= 0.25                                  # 25 samples at 100 Hz now lie before the latest one
    n = t.size
    bag = H.write_bag(tmp_path / 'jump', t, good.positions, good.positions * 0.0, good.efforts)
    with pytest.raises(RecordingError, match='duplicate stamp|unsorted stamps'):
        read_joint_states(bag)
    rec = from_bag(bag, H.JOINTS)
    assert rec.dropped['clock_back_rows'] == 25 and rec.times.size == n - 25
    assert np.all(np.diff(rec.times) > 0)
