"""Bad input to the offline commands, tried as an adversary would (issue 25, item 6).

Every case ends with exit status 2 and ONE line ``shadow-twin <command>: error: ...`` on
stderr, writes nothing and loses nothing of the user's: user files in ``--out`` are refused
unless ``--force``; a bag damaged in the middle (ROS 1 and MCAP) is refused by every command
that reads bags (:data:`BAG_COMMANDS`, argv builders: add a command there); malformed
trajectories, parameters and checkpoints, and non-finite or negative numeric flags, are named.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from shadow_twin.calibration.recordings.recording import write_joint_states
from shadow_twin.cli import plot as plot_cli
from shadow_twin.cli.inputs import capped_workers
from shadow_twin.common.paths import config_path
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.model.mjcf import TwinModel

from conftest import REPO, snapshot
from support.commands import FF, SPACE, one_line, run_cli
from support.synthetic_hand import first_finger_recording

def damage(path: Path, size: int, fill: bytes = b'\xff') -> Path:
    """Overwrite ``size`` bytes in the middle of ``path`` (a file, or a ROS 2 bag directory's
    storage file) with ``fill``; returns ``path``."""
    target = path if path.is_file() else next(p for p in path.iterdir() if p.suffix in ('.mcap', '.db3'))
    data = bytearray(target.read_bytes())
    middle = len(data) // 2
    data[middle:middle + size] = fill * size
    target.write_bytes(bytes(data))
    return path


@pytest.fixture(scope='module')
def files(tmp_path_factory):
    """Inputs: a good MCAP bag of a first-finger motion and its trajectory ``ff.yaml:ff``, the
    same bag with 8 KB of 0xFF mid-chunk, a search space, and broken trajectories."""
    folder = tmp_path_factory.mktemp('inputs')
    twin = TwinModel()
    controller = SimController(twin.model, ControllerGains.from_yaml(config_path('controllers', 'shadow_hand_e.yaml')))
    recording, _ = first_finger_recording(twin, controller, rest=1.0, after=3.5)
    good = write_joint_states(folder / 'good', [recording])
    shutil.copytree(good, folder / 'damaged')
    damage(folder / 'damaged', 8192)
    (folder / 'ff.yaml').write_text(yaml.safe_dump(FF))
    (folder / 'space.yaml').write_text(yaml.safe_dump(SPACE))
    text = dict(FF, hand_trajectories={'ff': [dict(FF['hand_trajectories']['ff'][0]), FF['hand_trajectories']['ff'][1]]})
    text['hand_trajectories']['ff'][0]['joint_angles'] = [0.2, 'bent', 0.6, 0.0]
    (folder / 'string.yaml').write_text(yaml.safe_dump(text))
    (folder / 'nan.yaml').write_text(yaml.safe_dump(FF).replace('- 1.0\n', '- .nan\n'))
    (folder / 'binary.yaml').write_bytes(bytes(range(256)) * 8)
    (folder / 'broken.yaml').write_text('hand_joints_order: [FFJ1, FFJ2\nhand_trajectories:\n  ff: []\n')
    return folder


def inputs(folder, bag='good', trajectory='ff.yaml:ff'):
    return ['--bag', str(folder / bag) if not Path(bag).is_absolute() else bag,
            '--trajectory', f'{folder}/{trajectory}', '--joints', 'rh_FFJ3', '--settle-time', '1.0', '-q']


def run_options(folder, out):
    return ['--space', str(folder / 'space.yaml'), '--no-progress', '--out', str(out)]


# -- commands that read bags: argv builders (folder, bag, out) -> argv ----------------------------
UR5_MODEL = Path(__file__).resolve().parents[2] / 'shadow_twin' / 'model' / 'builtin' / 'ur5.xml'
BAG_COMMANDS = {
    'evaluate': lambda folder, bag, out: ['evaluate', *inputs(folder, bag)],
    'calibrate': lambda folder, bag, out: ['calibrate', *inputs(folder, bag), *run_options(folder, out),
                                           '--budget', '4', '--optimizer', 'random'],
    'calibrate --holdout': lambda folder, bag, out: [
        'calibrate', *inputs(folder), *run_options(folder, out), '--budget', '4', '--optimizer', 'random',
        '--holdout', f'{bag if Path(bag).is_absolute() else folder / bag}:{folder}/ff.yaml:ff'],
    'sensitivity': lambda folder, bag, out: ['sensitivity', *inputs(folder, bag), *run_options(folder, out),
                                             '--samples', '3'],
    'plot': lambda folder, bag, out: ['plot', '--bag', str(bag if Path(bag).is_absolute() else folder / bag),
                                      '--out', str(out)],
    'identify': lambda folder, bag, out: ['identify', '--arm', 'ur5', '--effort-unit', 'Nm',
                                          '--bag', str(bag if Path(bag).is_absolute() else folder / bag),
                                          '--out', str(out)],
    'evaluate --effort': lambda folder, bag, out: [
        'evaluate', '--effort', '--model', str(UR5_MODEL),
        '--bag', str(bag if Path(bag).is_absolute() else folder / bag)],
}


def command_word(name):
    return name.split()[0]


@pytest.fixture(scope='module')
def damaged_ros1(tmp_path_factory, real_bag):
    """The real ROS 1 recording with 5 KB of 0xFF in the middle."""
    path = tmp_path_factory.mktemp('ros1') / 'damaged.bag'
    shutil.copyfile(real_bag, path)
    return damage(path, 5000)


@pytest.mark.parametrize('name', list(BAG_COMMANDS))
def test_a_bag_damaged_in_the_middle_is_one_line_for_every_command(name, files, tmp_path):
    out = tmp_path / 'out'
    line = one_line(*run_cli(BAG_COMMANDS[name](files, 'damaged', out)), command_word(name))
    assert f'{files / "damaged"}: unreadable bag' in line
    assert not out.exists()


@pytest.mark.parametrize('name', list(BAG_COMMANDS))
def test_a_ros1_bag_damaged_in_the_middle_is_one_line_for_every_command(name, files, damaged_ros1, tmp_path):
    out = tmp_path / 'out'
    line = one_line(*run_cli(BAG_COMMANDS[name](files, str(damaged_ros1), out)), command_word(name))
    assert f'{damaged_ros1}: unreadable bag' in line and 'AnyReaderError' in line
    assert not out.exists()


# -- user files in --out ------------------------------------------------------------------------
def test_calibrate_refuses_an_out_with_user_files_unless_forced(files, tmp_path, monkeypatch):
    out = tmp_path / 'mine'
    out.mkdir()
    (out / 'parameters.yaml').write_text('values: {my: 1}\n')
    (out / 'history.csv').write_text('my,own\n1,2\n')
    before = snapshot(out)
    argv = BAG_COMMANDS['calibrate'](files, 'good', out)
    line = one_line(*run_cli(argv), 'calibrate')
    assert 'holds files no calibration wrote (history.csv, parameters.yaml)' in line and '--force' in line
    assert snapshot(out) == before
    # --force writes over them; --workers beyond the cores is capped with one warning line
    monkeypatch.setattr('shadow_twin.cli.inputs.available_cores', lambda: 2)
    code, stdout, err = run_cli(argv + ['--force', '--workers', '1000'])
    assert code == 0, err
    assert err.splitlines() == ['shadow-twin calibrate: warning: --workers 1000 capped at 2 (the CPU cores this '
                                'process may use)']
    assert (out / 'report.json').is_file() and (out / 'parameters.yaml').read_text() != before['parameters.yaml'].decode()


def test_plot_refuses_an_out_with_user_files_unless_forced(files, tmp_path):
    out = tmp_path / 'plots'
    out.mkdir()
    (out / 'overview.png').write_bytes(b'my own picture')
    argv = ['--bag', str(files / 'good'), '--out', str(out)]
    line = one_line(*run_cli(argv, plot_cli), 'plot')
    assert 'holds files no plot wrote (overview.png)' in line
    assert (out / 'overview.png').read_bytes() == b'my own picture'
    code, _, err = run_cli(argv + ['--force'], plot_cli)
    assert code == 0, err
    assert (out / 'overview.png').read_bytes() != b'my own picture'
    code, _, err = run_cli(argv, plot_cli)       # its own earlier plots: written again without --force
    assert code == 0, err


# -- malformed input files ------------------------------------------------------------------------
@pytest.mark.parametrize('trajectory, expected', [
    ('string.yaml:ff', "string.yaml: ff waypoint 0: joint_angles[1] is 'bent', not a finite number"),
    ('nan.yaml:ff', 'nan.yaml: ff waypoint 1: joint_angles[2] is nan, not a finite number'),
    ('binary.yaml:ff', 'binary.yaml is not a text file (byte 128 is not UTF-8)'),
    ('broken.yaml:ff', 'broken.yaml: line 2, column 18: not valid YAML:'),
])
def test_malformed_trajectories_are_one_line_naming_file_and_place(trajectory, expected, files):
    line = one_line(*run_cli(['evaluate', *inputs(files, trajectory=trajectory)]), 'evaluate')
    assert expected in line, line


def test_malformed_params_yaml_names_file_and_line(files, tmp_path):
    params = tmp_path / 'params.yaml'
    params.write_text('values:\n  rh_FFJ3.damping: 0.1\n   bad: [\n')
    line = one_line(*run_cli(['evaluate', *inputs(files), '--params', str(params)]), 'evaluate')
    assert f'parameters file {params}: line ' in line and 'not valid YAML' in line
    params.write_bytes(os.urandom(64) + b'\xff')
    line = one_line(*run_cli(['evaluate', *inputs(files), '--params', str(params)]), 'evaluate')
    assert 'is not a text file' in line


def test_resume_on_a_random_bytes_checkpoint(files, tmp_path):
    out = tmp_path / 'run'
    out.mkdir()
    (out / 'checkpoint.jsonl').write_bytes(b'\xff\xfe' + os.urandom(200))
    before = snapshot(out)
    argv = BAG_COMMANDS['calibrate'](files, 'good', out) + ['--resume']
    line = one_line(*run_cli(argv), 'calibrate')
    assert 'checkpoint.jsonl: not a calibration checkpoint' in line
    assert {k: v for k, v in snapshot(out).items() if k != '.lock'} == before


# -- numeric flags -------------------------------------------------------------------------------
FLOAT_FLAGS = {'--settle-time': ('-1', 'nan', 'inf'), '--onset-threshold': ('0', '-0.1', 'nan'),
               '--max-delay': ('nan', '-0.1', 'inf'), '--start-tolerance': ('-1', 'nan')}


@pytest.mark.parametrize('flag, value', [(f, v) for f, values in FLOAT_FLAGS.items() for v in values])
def test_negative_or_non_finite_numeric_flags_are_refused(flag, value, files):
    line = one_line(*run_cli(['evaluate', *inputs(files), f'{flag}={value}']), 'evaluate')
    assert f'argument {flag}:' in line


@pytest.mark.parametrize('extra', [['--weight', 'nan'], ['--weight', '-1'], ['--workers', '0'], ['--budget', 'x']])
def test_calibrate_numeric_flags_are_refused_in_one_line(extra, files, tmp_path):
    one_line(*run_cli(BAG_COMMANDS['calibrate'](files, 'good', tmp_path / 'out') + extra), 'calibrate')
    assert not (tmp_path / 'out').exists()


@pytest.mark.parametrize('extra, expected', [(['--backend', 'gpu'], "argument --backend: invalid choice: 'gpu'"),
                                             (['--device', 'cpu'], '--device is for --backend warp'),
                                             (['--reduce', 'some'], "argument --reduce: invalid choice: 'some'")])
def test_backend_device_and_reduce_flags_are_refused_in_one_line(extra, expected, files, tmp_path):
    line = one_line(*run_cli(BAG_COMMANDS['calibrate'](files, 'good', tmp_path / 'out') + extra), 'calibrate')
    assert expected in line
    assert not (tmp_path / 'out').exists()


def test_workers_are_capped_at_the_cores(monkeypatch, capsys):
    from types import SimpleNamespace
    monkeypatch.setattr('shadow_twin.cli.inputs.available_cores', lambda: 2)
    assert capped_workers(SimpleNamespace(workers=2), 'calibrate') == 2
    assert capsys.readouterr().err == ''
    assert capped_workers(SimpleNamespace(workers=1000), 'sensitivity') == 2
    assert capsys.readouterr().err.splitlines() == [
        'shadow-twin sensitivity: warning: --workers 1000 capped at 2 (the CPU cores this process may use)']


# -- SIGTERM ---------------------------------------------------------------------------------------
def test_sigterm_ends_calibrate_as_ctrl_c_does(files, tmp_path):
    out = tmp_path / 'run'
    argv = BAG_COMMANDS['calibrate'](files, 'good', out)
    argv[argv.index('--budget') + 1] = '400'
    proc = subprocess.Popen([sys.executable, '-m', 'shadow_twin.cli', *argv], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (out / 'checkpoint.jsonl').exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == 'shadow-twin calibrate: interrupted; a calibration continues with --resume'
