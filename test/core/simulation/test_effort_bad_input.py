"""Bad drive-parameter files and recordings for the effort watch, tried as an adversary would
(issue 34, item 8): ``shadow-twin evaluate --effort`` and the live watch read the same files. Each
case is one line, exit 2; before, an empty file, one of another arm or a residual_sigma <= 0 was
taken (every gain 1.0, the whole recording flagged), and a recording with effort on some joints
only gave NaN and "nothing flagged": a false all-clear."""

from __future__ import annotations

from support import identify as H
import numpy as np
import pytest
import yaml
from support.commands import one_line, run_cli

from shadow_twin.cli import main as cli
from shadow_twin.common.errors import ConfigError
from shadow_twin.simulation.effort import DriveParameters


@pytest.fixture(scope='module')
def mock(tmp_path_factory):
    """A 6 s run of the mock UR10e (the drive effects off) as a bag, its model and good parameters."""
    folder = tmp_path_factory.mktemp('effort_inputs')
    truth = H.MockTruth(effects=H.DriveEffects.off())
    xml = H.nominal_xml('ur10e')
    (folder / 'ur10e.xml').write_text(xml)
    run = H.simulate(H.true_model(xml, truth), H.excitation(4), 6.0, truth, H.true_values(xml, truth)['frictionloss'])
    bag = H.write_bag(folder / 'run', *run)
    partial = run[3].copy()
    partial[:, 5] = np.nan                        # the wrist_3 drive reported no current
    partial_bag = H.write_bag(folder / 'partial', *run[:3], partial)
    good = {'effort_unit': 'A', 'joints': {j: {'drive_gain': float(k), 'offset': float(o), 'residual_sigma': 0.03}
                                           for j, k, o in zip(H.JOINTS, truth.drive_gain, truth.offset)}}
    return {'folder': folder, 'model': folder / 'ur10e.xml', 'bag': bag, 'partial': partial_bag, 'good': good}


def evaluate(mock, parameters, bag=None):
    return run_cli(['evaluate', '--effort', '--model', str(mock['model']), '--drive-parameters', str(parameters),
                    '--bag', str(bag or mock['bag'])], cli)


def write(mock, name, data) -> str:
    path = mock['folder'] / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(path)


def test_good_parameters_evaluate(mock):
    code, out, err = evaluate(mock, write(mock, 'good.yaml', mock['good']))
    assert code == 0, err
    assert out.count('effort RMSE') == 6 and 'nan' not in out      # (the nominal model: its flags are right)


@pytest.mark.parametrize('case, expected', [
    ('empty', 'empty (expected effort_unit and joints'),
    ('other_arm', 'no drive_gain for shoulder_pan_joint'),
    ('sigma_zero', 'residual_sigma of elbow_joint: 0.0 must be > 0'),
    ('sigma_negative', 'residual_sigma of elbow_joint: -0.1 must be > 0'),
])
def test_a_drive_parameter_file_that_cannot_serve_the_arm_is_one_line(mock, case, expected):
    data = {'empty': '', 'other_arm': {'effort_unit': 'A', 'joints': {'rh_FFJ3': {'drive_gain': 1.0}}},
            'sigma_zero': {**mock['good'], 'joints': {**mock['good']['joints'],
                                                      'elbow_joint': {'drive_gain': 12.5, 'residual_sigma': 0.0}}},
            'sigma_negative': {**mock['good'], 'joints': {**mock['good']['joints'],
                                                          'elbow_joint': {'drive_gain': 12.5, 'residual_sigma': -0.1}}},
            }[case]
    line = one_line(*evaluate(mock, write(mock, f'{case}.yaml', data)), 'evaluate')
    assert expected in line, line


def test_a_recording_with_effort_on_some_joints_only_is_refused_not_an_all_clear(mock):
    line = one_line(*evaluate(mock, write(mock, 'good2.yaml', mock['good']), mock['partial']), 'evaluate')
    assert 'has no effort for wrist_3_joint' in line, line


def test_the_live_watch_reads_them_the_same_way(mock):
    """``DriveParameters.check_covers`` is what the monitor's watch calls at start (monitor_effort)."""
    drive = DriveParameters.from_mapping({'effort_unit': 'A', 'joints': {'rh_FFJ3': {'drive_gain': 1.0}}})
    with pytest.raises(ConfigError, match='no drive_gain for shoulder_pan_joint'):
        drive.check_covers(H.JOINTS, 'parameters.yaml')
    DriveParameters.from_mapping(mock['good']).check_covers(H.JOINTS, 'parameters.yaml')
    DriveParameters('Nm').check_covers(H.JOINTS, 'nominal')        # N m needs no gains
