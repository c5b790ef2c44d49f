"""``shadow-twin sensitivity``, ``calibrate --screen K``, several --bag/--trajectory pairs with
--weight, and --holdout (on the shared real recording; skipped without it).

Runs are kept short: a 0.5 s settle window, no delay fit, a handful of rollouts.
"""

import csv
import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import FF_JOINTS, FINGERS_SPACE

from shadow_twin.calibration.recordings.recording import JointStateRecording, write_joint_states
from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.cli import inputs
from shadow_twin.cli import main as cli
from shadow_twin.common.files import sha256_of
from shadow_twin.model.mjcf import TwinModel

FAST = ['--settle-time', '0.5', '--max-delay', '0', '--workers', '2', '--no-progress', '-q']
PNG_MAGIC = b'\x89PNG\r\n\x1a\n'
OFFSET = 0.05  # rad added to the FF joints of the second recording


def pair(bag, trajectories, name='hand_closing'):
    return ['--bag', str(bag), '--trajectory', f'{trajectories}:{name}']


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert re.match(r'shadow-twin (evaluate|calibrate|sensitivity): error: ', lines[0]) and captured.out == ''
    return lines[0]


def mean_mse(capsys, bag, trajectories, *extra) -> float:
    """The default model's (or --params') objective on one recording, from ``shadow-twin evaluate``."""
    assert cli.main(['evaluate', *pair(bag, trajectories), *FAST[:4], '-q', '--json', *extra]) == 0
    return json.loads(capsys.readouterr().out)['mean_mse']


@pytest.fixture(scope='module')
def offset_bag(tmp_path_factory, real_recording):
    """The real recording with the FF joints OFFSET rad higher, as a ROS 2 bag whose path holds ':'."""
    frame = real_recording.frame.copy()
    for joint in FF_JOINTS:
        frame[('position', joint)] += OFFSET
    root = tmp_path_factory.mktemp('offset') / 'take:2'
    root.mkdir()
    return write_joint_states(root / 'hand_offset', [JointStateRecording(frame, real_recording.topic, 'offset')])


@pytest.fixture(scope='module')
def fingers_names():
    return SearchSpace.from_yaml(FINGERS_SPACE, TwinModel()).names


def test_sensitivity_writes_json_and_tornado(real_bag, trajectories_yaml, fingers_names, tmp_path, capsys):
    out = tmp_path / 'screen'
    args = ['sensitivity', *pair(real_bag, trajectories_yaml), '--space', str(FINGERS_SPACE), '--samples', '6',
            *FAST, '--out', str(out)]
    assert cli.main(args) == 0
    stdout = capsys.readouterr().out.splitlines()
    doc = json.loads((out / 'sensitivity.json').read_text())
    assert sorted(doc['influence']) == sorted(fingers_names)
    assert all(-1.0 <= v <= 1.0 for v in doc['influence'].values())
    assert doc['ranking'] == sorted(doc['influence'], key=lambda n: -abs(doc['influence'][n]))
    assert doc['samples'] == 6 and len(doc['draws']) == 6
    objectives = [d['objective'] for d in doc['draws']]
    assert doc['objective']['min'] == min(objectives) < max(objectives) == doc['objective']['max']
    assert doc['inputs']['bag']['sha256'] == sha256_of(real_bag)
    assert (out / 'tornado.png').read_bytes().startswith(PNG_MAGIC)
    # the ranking is printed, most influential first
    assert stdout[0].startswith('influence on the objective (Pearson r over 6 samples')
    assert [line.split()[1] for line in stdout[1:16]] == doc['ranking']
    # never over an earlier screening
    assert cli.main(args) == 2
    assert f'--out {out} holds an earlier sensitivity screening' in one_error_line(capsys)


def test_calibrate_screen_calibrates_only_the_k_most_influential(real_bag, trajectories_yaml, tmp_path, capsys):
    out = tmp_path / 'run'
    args = ['calibrate', *pair(real_bag, trajectories_yaml), '--space', str(FINGERS_SPACE), '--optimizer', 'random',
            '--budget', '8', '--screen', '2', '--screen-samples', '4', *FAST, '--out', str(out)]
    assert cli.main(args) == 0
    stdout = capsys.readouterr().out
    screening = json.loads((out / 'sensitivity.json').read_text())
    report = json.loads((out / 'report.json').read_text())
    top = screening['ranking'][:2]
    assert screening['samples'] == 4 and (out / 'tornado.png').is_file()
    assert sorted(report['best_parameters']) == sorted(top)
    assert sorted(report['search_space']) == sorted(top)
    assert report['evaluations'] == 4                      # the screening's 4 rollouts came out of --budget 8
    with open(out / 'history.csv') as handle:
        assert len(list(csv.DictReader(handle))) == 4
    values = yaml.safe_load((out / 'parameters.yaml').read_text())['values']
    assert len(values) == 8 and {key.split('.')[1] for key in values} <= {n.split('_', 1)[1] for n in top}
    assert 'screening (4 rollouts of --budget 8): calibrated 2 parameter(s)' in stdout


def test_two_pairs_give_one_weighted_objective(real_bag, trajectories_yaml, offset_bag, tmp_path, capsys):
    real_mse = mean_mse(capsys, real_bag, trajectories_yaml)
    offset_mse = mean_mse(capsys, offset_bag, trajectories_yaml)
    assert offset_mse > real_mse
    out = tmp_path / 'run'
    args = ['calibrate', *pair(real_bag, trajectories_yaml), *pair(offset_bag, trajectories_yaml),
            '--weight', '1', '--weight', '3', '--space', str(FINGERS_SPACE), '--optimizer', 'random',
            '--budget', '4', *FAST, '--out', str(out)]
    assert cli.main(args) == 0
    report = json.loads((out / 'report.json').read_text())
    first, second = report['recordings']
    assert (first['weight'], second['weight']) == (1.0, 3.0)
    assert first['objective_before'] == pytest.approx(real_mse, rel=1e-12)
    assert second['objective_before'] == pytest.approx(offset_mse, rel=1e-12)
    objective = report['objective']
    assert objective['initial'] == pytest.approx((real_mse + 3 * offset_mse) / 4, rel=1e-12)
    assert objective['best'] == pytest.approx((first['objective_after'] + 3 * second['objective_after']) / 4,
                                              rel=1e-12)
    with open(out / 'history.csv') as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4 and min(float(r['objective']) for r in rows) == pytest.approx(
        report['search_model']['best_on_search_model'], rel=1e-12)       # the search's model (issue 39)
    assert objective['best'] == pytest.approx(report['search_model']['best_on_search_model'], rel=0.005)
    assert sorted(report['inputs']) == ['bag:1', 'bag:2', 'gains', 'model', 'space', 'trajectory:1', 'trajectory:2']


def test_holdout_is_scored_before_and_after(real_bag, trajectories_yaml, offset_bag, tmp_path, capsys):
    out = tmp_path / 'run'
    holdout = f'{offset_bag}:{trajectories_yaml}:hand_closing'    # the bag path holds ':'
    args = ['calibrate', *pair(real_bag, trajectories_yaml), '--holdout', holdout, '--space', str(FINGERS_SPACE),
            '--optimizer', 'random', '--budget', '4', *FAST, '--out', str(out)]
    assert cli.main(args) == 0
    stdout = capsys.readouterr().out
    section = json.loads((out / 'report.json').read_text())['holdout']
    ((name, entry),) = section['recordings'].items()
    assert name == 'hand_offset:hand_closing' and entry['bag'] == str(offset_bag)
    # before: the model as given; after: the calibrated parameters, each as `evaluate` scores them
    assert entry['before'] == pytest.approx(mean_mse(capsys, offset_bag, trajectories_yaml), rel=1e-12)
    after = mean_mse(capsys, offset_bag, trajectories_yaml, '--params', str(out / 'parameters.yaml'))
    assert entry['after'] == pytest.approx(after, rel=1e-12)
    assert entry['before'] != entry['after']
    assert (section['mean_before'], section['mean_after']) == (entry['before'], entry['after'])
    assert isinstance(section['accept'], bool) and section['reason']
    assert f'hold-out {name}: objective {entry["before"]:.4g} -> {entry["after"]:.4g} rad^2' in stdout
    assert 'hold-out check: ' in stdout


def _bad_cases(bag, trajectories):
    good = f'{trajectories}:hand_closing'
    return {
        'malformed holdout': (['--holdout', 'no-colons-here'],
                              "--holdout 'no-colons-here': expected BAG:FILE.yaml:NAME"),
        'holdout without a name': (['--holdout', f'{bag}:{trajectories}:'], 'expected BAG:FILE.yaml:NAME'),
        'holdout bag missing': (['--holdout', f'/nonexistent/h.bag:{good}'], 'bag not found: /nonexistent/h.bag'),
        'holdout file missing': (['--holdout', f'{bag}:/nonexistent/t.yaml:hand_closing'],
                                 'trajectory file not found: /nonexistent/t.yaml'),
        'holdout trajectory not in file': (['--holdout', f'{bag}:{trajectories}:no_such'],
                                           "no trajectory named 'no_such'"),
        'pair trajectory not in file': (['--bag', str(bag), '--trajectory', f'{trajectories}:no_such'],
                                        "no trajectory named 'no_such'"),
        'unpaired bag': (['--bag', str(bag)], '--bag is given 2 time(s) and --trajectory 1'),
        'weights of another count': (['--weight', '1', *pair(bag, trajectories)], '--weight is given 1 time(s) for 2'),
        'non-positive weight': (['--weight', '0'], '--weight must be a finite number > 0, got 0.0'),
        'screen above the space': (['--screen', '16'], '--screen 16: the space has only 15 parameters'),
        'screening eats the budget': (['--screen', '2', '--screen-samples', '4'],
                                      '--screen-samples 4 leaves nothing of --budget 4'),
    }


CASES = list(_bad_cases('BAG', 'TRAJ'))


@pytest.mark.parametrize('case', CASES)
def test_bad_input_is_one_line_and_creates_no_output(case, real_bag, trajectories_yaml, tmp_path, capsys):
    extra, expected = _bad_cases(real_bag, trajectories_yaml)[case]
    out = tmp_path / 'new' / 'run'
    args = ['calibrate', *pair(real_bag, trajectories_yaml), '--space', str(FINGERS_SPACE), '--budget', '4',
            *FAST, *extra, '--out', str(out)]
    assert cli.main(args) == 2
    assert expected in one_error_line(capsys)
    assert not (tmp_path / 'new').exists()


@pytest.mark.parametrize('spec, bag, trajectory', [
    ('a.bag:t.yaml:hand_closing', 'a.bag', 't.yaml:hand_closing'),
    ('/data/run:3/a.bag:/cfg/t.yaml:hand_closing', '/data/run:3/a.bag', '/cfg/t.yaml:hand_closing'),
])
def test_holdout_spec_splits_at_the_last_two_colons(spec, bag, trajectory):
    assert inputs.parse_holdout(spec) == (Path(bag), trajectory)


def test_occurrence_reaches_the_alignment(real_bag, trajectories_yaml, tmp_path, capsys):
    """--occurrence N picks the N-th execution: the shared recording holds one, so 2 is refused
    (one line, exit 2, no --out), for calibrate as for evaluate."""
    args = cli.build_parser().parse_args(['calibrate', '--bag', 'b', '--trajectory', 't:n', '--space', 's',
                                          '--out', 'o', '--occurrence', '2'])
    assert inputs.alignment_settings(args).occurrence == 2
    assert inputs.alignment_settings(cli.build_parser().parse_args(
        ['evaluate', '--bag', 'b', '--trajectory', 't:n'])).occurrence is None
    out = tmp_path / 'run'
    assert cli.main(['calibrate', *pair(real_bag, trajectories_yaml), '--space', str(FINGERS_SPACE),
                     '--occurrence', '2', *FAST, '--out', str(out)]) == 2
    assert 'occurrence 2 requested, the recording holds 1' in one_error_line(capsys)
    assert not out.exists()
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(['evaluate', '--bag', 'b', '--trajectory', 't:n', '--occurrence', '0'])
