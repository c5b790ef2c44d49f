"""shadow_twin.cli.main: ``shadow-twin evaluate`` and ``shadow-twin calibrate``.

Bad input must give exit code 2, one line on stderr naming the problem, and leave
an existing output directory exactly as it was.
"""

import json
import re
import shutil

import numpy as np
import pytest
import yaml

from shadow_twin.cli import main as cli
from shadow_twin.calibration.recordings.alignment import detect_motion_onset
from shadow_twin.calibration.scoring.metrics import PUBLISHED_DEFAULT_MSE
from shadow_twin.calibration.recordings.recording import JointStateRecording, write_joint_states

from conftest import FF_JOINTS, README_JOINTS, calibrate_args, snapshot


def evaluate_args(bag, trajectories, *extra):
    return ['evaluate', '--bag', str(bag), '--trajectory', f'{trajectories}:hand_closing', '-q', *extra]


def one_error_line(capsys):
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert re.match(r'shadow-twin (evaluate|calibrate|sensitivity): error: ', lines[0]), lines[0]
    return lines[0], captured.out


# -- success -----------------------------------------------------------------------------------
def test_evaluate_json(real_bag, trajectories_yaml, capsys):
    assert cli.main(evaluate_args(real_bag, trajectories_yaml, '--json')) == 0
    out = capsys.readouterr().out
    result = json.loads(out)
    assert result['joints'] == FF_JOINTS
    assert list(result['per_joint_mse']) == FF_JOINTS
    assert result['mean_mse'] == pytest.approx(np.mean(list(result['per_joint_mse'].values())), rel=1e-12)
    assert result['mean_mse'] == pytest.approx(PUBLISHED_DEFAULT_MSE, rel=0.25)
    assert result['per_joint_rmse']['rh_FFJ2'] == pytest.approx(result['per_joint_mse']['rh_FFJ2'] ** 0.5)
    assert sorted(result['all_joints_mse']) == sorted(README_JOINTS)
    assert result['matching'] == 'interpolate' and result['window_s'] == pytest.approx(9.1)


def test_evaluate_table_other_joints_and_nearest_matching(real_bag, trajectories_yaml, capsys):
    code = cli.main(evaluate_args(real_bag, trajectories_yaml, '--joints', 'rh_MFJ3, rh_RFJ3',
                                  '--matching', 'nearest'))
    assert code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith('mean MSE over rh_MFJ3, rh_RFJ3: ') and out[0].endswith(' rad^2')
    assert [line.split()[0] for line in out[1:]] == ['rh_MFJ3', 'rh_RFJ3']


def test_evaluate_with_calibrated_parameters(calibration_run, real_bag, trajectories_yaml, capsys):
    _, _, run = calibration_run
    report = json.loads((run / 'report.json').read_text())
    code = cli.main(evaluate_args(real_bag, trajectories_yaml, '--json', '--params', str(run / 'parameters.yaml')))
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result['mean_mse'] == pytest.approx(report['objective']['best'], rel=1e-9)
    assert result['mean_mse'] < report['objective']['initial']


def test_calibrate_reports_the_result(calibration_run):
    code, stdout, out = calibration_run
    assert code == 0
    first = stdout.splitlines()[0]
    report = json.loads((out / 'report.json').read_text())
    assert f'{report["objective"]["initial"]:.4g} -> {report["objective"]["best"]:.4g} rad^2' in first
    assert f'after {report["evaluations"]} rollouts' in first
    assert [line.split(':')[0].strip() for line in stdout.splitlines()[1:5]] == ['FF', 'MF', 'RF', 'LF']


# -- bad input ---------------------------------------------------------------------------------
@pytest.fixture(scope='module')
def bad_inputs(tmp_path_factory, real_recording, bag_writers):
    """Files with one problem each (bags, model, search spaces)."""
    root = tmp_path_factory.mktemp('bad_inputs')
    stamps = 100.0 + 0.008 * np.arange(60)
    still = np.zeros((60, 24))
    nan = still.copy()
    nan[30, 0] = np.nan  # rh_FFJ1
    onset = detect_motion_onset(real_recording.times, real_recording.values(README_JOINTS))
    files = {
        'chatter': bag_writers.string(root / 'chatter'),
        'empty': bag_writers.empty(root / 'empty'),
        'nan': bag_writers.joint_states(root / 'nan', stamps, README_JOINTS, nan),
        'duplicate': bag_writers.joint_states(root / 'duplicate', np.r_[stamps[:10], stamps[9:59]], README_JOINTS,
                                              still, bag_times=stamps),
        'unsorted': bag_writers.joint_states(root / 'unsorted', np.r_[stamps[:10], stamps[8], stamps[11:]],
                                             README_JOINTS, still, bag_times=stamps, storage='sqlite3'),
        'short': write_joint_states(root / 'short', [JointStateRecording(real_recording.frame.loc[:onset + 3.0])]),
    }
    mjcf = root / 'broken.xml'
    mjcf.write_text('<mujoco><worldbody><body><geom type="mesh" mesh="hand_mesh"/></body></worldbody></mujoco>')
    files['mjcf'] = mjcf
    entry = {'name': 'J1_damping', 'joints': ['rh_[FMRL]FJ1'], 'attribute': 'damping', 'bounds': [0.01, 0.2]}
    for name, change in (('space_joint', {'joints': ['rh_ZZJ1']}), ('space_attribute', {'attribute': 'viscosity'}),
                         ('space_bounds', {'bounds': [0.2, 0.01]})):
        files[name] = root / f'{name}.yaml'
        files[name].write_text(yaml.safe_dump({'parameters': [dict(entry, **change)]}))
    gains = root / 'gains.yaml'
    gains.write_text(yaml.safe_dump({'controller': {'gains': {'rh_FF*': {'p': 4.0, 'i': 0.2, 'd': 0.1}}}}))
    files['gains'] = gains
    return files


def _replace(args, option, value):
    args = list(args)
    if option in args:
        args[args.index(option) + 1] = value
    else:
        args[1:1] = [option, value]
    return args


# (case, option to change, value (a bad_inputs key or a literal), what stderr must name)
BAD = [
    ('missing bag', '--bag', 'literal:/nonexistent/hand.bag', 'bag not found: /nonexistent/hand.bag'),
    ('no JointState topic', '--bag', 'chatter', 'no sensor_msgs/JointState topic'),
    ('empty bag', '--bag', 'empty', 'has no messages (empty bag)'),
    ('NaN samples', '--bag', 'nan', 'NaN/inf position sample(s), first at rh_FFJ1'),
    ('duplicate stamps', '--bag', 'duplicate', 'duplicate stamp'),
    ('unsorted stamps', '--bag', 'unsorted', 'unsorted stamps'),
    ('recording too short', '--bag', 'short', 'into the 6.10 s trajectory: the last'),
    ('joints absent', '--joints', 'literal:rh_FFJ1,rh_XXJ9', "--joints 'rh_XXJ9' matches none of the joints"),
    ('model does not compile', '--model', 'mjcf', "does not compile: Error: mesh 'hand_mesh' not found"),
    ('missing model', '--model', 'literal:/nonexistent/hand.xml', 'model file not found'),
    ('unknown joint in space', '--space', 'space_joint', "parameter 'J1_damping': shadow_hand_e.xml: no joint matches 'rh_ZZJ1'"),
    ('unknown attribute in space', '--space', 'space_attribute', "parameter 'J1_damping': unknown joint attribute 'viscosity'"),
    ('inverted bounds', '--space', 'space_bounds', "parameter 'J1_damping': inverted or empty bounds [0.2, 0.01]"),
    ('missing trajectory', '--trajectory', 'literal:/nonexistent/t.yaml:hand_closing', 'trajectory file not found'),
    ('gains with an integral term', '--gains', 'gains', 'no integral term'),
]


def _bad_args(base, bad_inputs, option, value):
    value = value[len('literal:'):] if value.startswith('literal:') else str(bad_inputs[value])
    return _replace(base, option, value)


@pytest.mark.parametrize('case, option, value, expected', BAD, ids=[b[0] for b in BAD])
def test_calibrate_bad_input_leaves_an_earlier_run_untouched(case, option, value, expected, bad_inputs,
                                                             calibration_run, real_bag, trajectories_yaml,
                                                             tmp_path, capsys):
    _, _, earlier = calibration_run
    out = tmp_path / 'out'
    shutil.copytree(earlier, out)
    before = snapshot(out)
    # --resume: the directory holds a checkpoint, so the run gets as far as checking its inputs
    args = _bad_args(calibrate_args(real_bag, trajectories_yaml, out, '--resume'), bad_inputs, option, value)
    assert cli.main(args) == 2
    line, stdout = one_error_line(capsys)
    assert expected in line, line
    assert stdout == ''
    assert snapshot(out) == before


@pytest.mark.parametrize('case, option, value, expected', BAD[:8], ids=[b[0] for b in BAD[:8]])
def test_calibrate_bad_input_creates_no_output(case, option, value, expected, bad_inputs, real_bag,
                                               trajectories_yaml, tmp_path, capsys):
    out = tmp_path / 'new'
    args = _bad_args(calibrate_args(real_bag, trajectories_yaml, out), bad_inputs, option, value)
    assert cli.main(args) == 2
    line, _ = one_error_line(capsys)
    assert expected in line
    assert not out.exists()


@pytest.mark.parametrize('case, option, value, expected', [BAD[0], BAD[3], BAD[6], BAD[7], BAD[8]],
                         ids=[BAD[k][0] for k in (0, 3, 6, 7, 8)])
def test_evaluate_bad_input(case, option, value, expected, bad_inputs, real_bag, trajectories_yaml, capsys):
    args = _bad_args(evaluate_args(real_bag, trajectories_yaml, '--json'), bad_inputs, option, value)
    assert cli.main(args) == 2
    line, stdout = one_error_line(capsys)
    assert expected in line and stdout == ''


def test_output_directory_rules(calibration_run, real_bag, trajectories_yaml, tmp_path, capsys):
    _, _, earlier = calibration_run
    out = tmp_path / 'out'
    shutil.copytree(earlier, out)
    before = snapshot(out)
    # an earlier run without --resume
    assert cli.main(calibrate_args(real_bag, trajectories_yaml, out)) == 2
    assert 'holds an earlier calibration; pass --resume' in one_error_line(capsys)[0]
    # --resume with other settings than the checkpoint's
    assert cli.main(calibrate_args(real_bag, trajectories_yaml, out, '--resume', '--seed', '7')) == 2
    assert 'belongs to a run with other inputs or settings' in one_error_line(capsys)[0]
    assert snapshot(out) == before
    # --resume without a checkpoint; --out that is a file
    empty = tmp_path / 'empty'
    empty.mkdir()
    assert cli.main(calibrate_args(real_bag, trajectories_yaml, empty, '--resume')) == 2
    assert f'--resume: no checkpoint in {empty}' in one_error_line(capsys)[0]
    assert list(empty.iterdir()) == []
    a_file = tmp_path / 'file'
    a_file.write_text('x')
    assert cli.main(calibrate_args(real_bag, trajectories_yaml, a_file)) == 2
    assert 'exists and is not a directory' in one_error_line(capsys)[0]
    assert a_file.read_text() == 'x'
    # a budget below 1
    assert cli.main(calibrate_args(real_bag, trajectories_yaml, tmp_path / 'zero', budget=0)) == 2
    assert 'at least 1' in one_error_line(capsys)[0]
    assert not (tmp_path / 'zero').exists()


def test_evaluate_bad_parameters_file(real_bag, trajectories_yaml, tmp_path, capsys):
    params = tmp_path / 'params.yaml'
    params.write_text(yaml.safe_dump({'values': {'rh_FFJ1.viscosity': 0.1}}))
    assert cli.main(evaluate_args(real_bag, trajectories_yaml, '--params', str(params))) == 2
    assert "unknown joint attribute 'viscosity'" in one_error_line(capsys)[0]
    assert cli.main(evaluate_args(real_bag, trajectories_yaml, '--params', str(tmp_path / 'none.yaml'))) == 2
    assert 'parameters file not found' in one_error_line(capsys)[0]


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(['calibrate', '--bag', 'x.bag'])  # argparse: required arguments missing
    assert info.value.code == 2
    assert 'required' in capsys.readouterr().err


def test_a_second_calibrate_on_the_same_out_is_refused(real_bag, trajectories_yaml, tmp_path, capsys):
    """While one process calibrates into --out (it holds --out/.lock), another gets one line, exit 2."""
    from shadow_twin.common.files import exclusive_directory
    out = tmp_path / 'busy'
    with exclusive_directory(out):              # what the first calibrate holds while it runs
        assert cli.main(calibrate_args(real_bag, trajectories_yaml, out)) == 2
        line, stdout = one_error_line(capsys)
        assert f'--out {out} is in use by another process' in line and stdout == ''
    assert [p.name for p in out.iterdir()] == ['.lock']


def test_unwritable_out_is_refused_before_any_work(real_bag, trajectories_yaml, tmp_path, capsys, monkeypatch):
    """An --out that cannot be written is one line and exit 2 before the model is loaded or scored."""
    a_file = tmp_path / 'file'
    a_file.write_text('x')
    scored = []
    monkeypatch.setattr(cli, 'load_setup', lambda args: scored.append(args))
    assert cli.main(calibrate_args(real_bag, trajectories_yaml, a_file / 'out')) == 2
    assert f'{a_file} exists and is not a directory' in one_error_line(capsys)[0]
    monkeypatch.setattr('os.access', lambda path, mode: False)          # as a read-only mount looks
    assert cli.main(calibrate_args(real_bag, trajectories_yaml, tmp_path / 'ro' / 'out')) == 2
    assert f'--out {tmp_path / "ro" / "out"} is not writable ({tmp_path}:' in one_error_line(capsys)[0]
    assert scored == [] and not (tmp_path / 'ro').exists()
