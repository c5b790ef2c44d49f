"""Bad input, second round (issue 34, item 8): what an adversary fed ``identify``, ``evaluate
--effort``, ``calibrate`` and ``evaluate``, each through the real command line in a subprocess.

Every case ends with exit status 2, ONE line ``shadow-twin <command>: error: ...`` on stderr
naming the problem (no traceback, no MuJoCo warning), nothing in ``--out`` and the inputs (and the
working directory: no MUJOCO_LOG.TXT) unchanged. Before: degrees and constant currents were only
caught by the implausible-fit check (gains of 1e9 named, not the cause), 1e300 and a negative
--seed gave tracebacks (the seed's after calibrate had written its checkpoint), --cutoff 1e-9 and a
header: "no" column map wrote a fit of nothing, a --max-delay longer than the recording gave a
traceback, and a run that went unstable was scored as if the twin had rested at qpos0.
"""

from __future__ import annotations

import os
import subprocess
import sys

from support import identify as H
import numpy as np
import pytest
import yaml
from support.synthetic_hand import first_finger_recording
from support.commands import FF, SPACE

from shadow_twin.calibration.scoring import stability
from shadow_twin.calibration.scoring.evaluation import Evaluator
from shadow_twin.calibration.recordings.recording import read_joint_states, write_joint_states
from shadow_twin.cli.input_files import load_trajectory
from shadow_twin.common.paths import config_path
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.model.calibratable import ParameterTarget
from shadow_twin.model.mjcf import TwinModel

from conftest import REPO, snapshot


@pytest.fixture(scope='module')
def arm(tmp_path_factory):
    """A 6 s run of the mock UR10e (100 Hz) as bags: as recorded, in degrees, with a dead elbow
    drive, with one position of 1e300; its nominal model; the run as an RTDE CSV."""
    folder = tmp_path_factory.mktemp('arm')
    truth = H.MockTruth(effects=H.DriveEffects.off())
    xml = H.nominal_xml('ur10e')
    (folder / 'ur10e.xml').write_text(xml)
    t, q, qd, current = H.simulate(H.true_model(xml, truth), H.excitation(4), 6.0, truth,
                                   H.true_values(xml, truth)['frictionloss'])
    H.write_bag(folder / 'good', t, q, qd, current)
    H.write_bag(folder / 'degrees', t, np.degrees(q), np.degrees(qd), current)
    dead = current.copy()
    dead[:, 2] = 0.0
    H.write_bag(folder / 'dead', t, q, qd, dead)
    huge = q.copy()
    huge[100, 1] = 1e300
    H.write_bag(folder / 'huge', t, huge, qd, current)
    H.write_rtde_csv(folder / 'run.csv', t, q, qd, current)
    return folder


@pytest.fixture(scope='module')
def hand(tmp_path_factory):
    """A first-finger motion of the hand as a bag, in rad and in degrees; its trajectory ff.yaml:ff,
    a search space, and parameters under which the simulation goes unstable."""
    folder = tmp_path_factory.mktemp('hand')
    twin = TwinModel()
    controller = SimController(twin.model, ControllerGains.from_yaml(config_path('controllers', 'shadow_hand_e.yaml')))
    recording, _ = first_finger_recording(twin, controller, rest=1.0, after=3.5)
    write_joint_states(folder / 'good', [recording])
    degrees = recording.frame.copy()
    degrees['position'] = np.degrees(degrees['position'])
    recording.frame = degrees
    write_joint_states(folder / 'degrees', [recording])
    (folder / 'ff.yaml').write_text(yaml.safe_dump(FF))
    (folder / 'space.yaml').write_text(yaml.safe_dump(SPACE))
    (folder / 'unstable.yaml').write_text('values:\n  rh_FFJ3.damping: -1.0e6\n')
    return folder


def cli(argv, cwd):
    """``python -m shadow_twin.cli.main ARGV`` in ``cwd``: (exit status, stdout, stderr)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get('PYTHONPATH')])))
    proc = subprocess.run([sys.executable, '-m', 'shadow_twin.cli.main', *map(str, argv)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=240)
    return proc.returncode, proc.stdout, proc.stderr


def refused(argv, inputs, tmp_path, command):
    """Run ``argv`` in a fresh working directory; assert exit 2, one error line of ``command``,
    ``tmp_path/out`` absent or empty, ``inputs`` and the working directory unchanged; the line."""
    before = snapshot(inputs)
    cwd = tmp_path / 'cwd'
    cwd.mkdir()
    code, _, err = cli(argv, cwd)
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and 'Traceback' not in err, (code, err)
    assert lines[0].startswith(f'shadow-twin {command}: error: '), lines[0]
    out = tmp_path / 'out'
    assert not out.exists() or not [p for p in out.iterdir() if p.name != '.lock'], list(out.iterdir())
    assert snapshot(inputs) == before and not list(cwd.iterdir())
    return lines[0]


def identify(arm, tmp_path, *extra, bag='good'):
    return ['identify', '--model', arm / 'ur10e.xml', '--bag', arm / bag, '--out', tmp_path / 'out', *extra]


def hand_inputs(hand, bag='good'):
    return ['--bag', hand / bag, '--trajectory', f'{hand}/ff.yaml:ff', '--joints', 'rh_FFJ3', '--settle-time', '1.0',
            '-q']


def calibrate(hand, tmp_path, *extra):
    return ['calibrate', *hand_inputs(hand), '--space', hand / 'space.yaml', '--no-progress', '--out', tmp_path / 'out',
            '--budget', '4', '--optimizer', 'random', *extra]


# 1 -- positions in degrees ------------------------------------------------------------------------
@pytest.mark.parametrize('command', ['identify', 'evaluate --effort'])
def test_arm_positions_in_degrees_are_refused(arm, tmp_path, command):
    argv = identify(arm, tmp_path, bag='degrees') if command == 'identify' else \
        ['evaluate', '--effort', '--model', arm / 'ur10e.xml', '--bag', arm / 'degrees']
    line = refused(argv, arm, tmp_path, command.split()[0])
    assert 'shoulder_pan_joint position -11.4' in line and 'at sample 0 (t = 1000.010 s)' in line, line
    assert "far outside the model's range [-6.283, 6.283] rad" in line and 'look like degrees' in line, line


def test_hand_positions_in_degrees_are_refused_by_evaluate(hand, tmp_path):
    line = refused(['evaluate', *hand_inputs(hand, 'degrees')], hand, tmp_path, 'evaluate')
    assert 'degrees' in line and "outside the model's range" in line, line


# 2 -- a meaningless filter cut-off --------------------------------------------------------------
@pytest.mark.parametrize('cutoff', ['1e-9', '60'])
def test_a_cutoff_outside_the_usable_range_is_refused_with_the_range(arm, tmp_path, cutoff):
    line = refused(identify(arm, tmp_path, f'--cutoff={cutoff}'), arm, tmp_path, 'identify')
    assert f'--cutoff {float(cutoff):g} Hz is outside the usable range' in line, line
    assert '0.5 Hz <= cutoff < 50 Hz' in line, line


# 3 -- a constant (dead) effort ------------------------------------------------------------------
def test_a_constant_effort_is_refused(arm, tmp_path):
    line = refused(identify(arm, tmp_path, bag='dead'), arm, tmp_path, 'identify')
    assert 'effort of elbow_joint is constant: 0 A in all 599 samples' in line, line


# 4 -- a position of 1e300 -------------------------------------------------------------------------
def test_a_position_of_1e300_is_refused_with_joint_and_time(arm, tmp_path):
    line = refused(identify(arm, tmp_path, bag='huge'), arm, tmp_path, 'identify')
    assert 'shoulder_lift_joint position 1e+300 rad at sample 100 (t = 1001.010 s)' in line, line
    assert 'not a joint position' in line, line


# 5 -- a negative seed -----------------------------------------------------------------------------
def test_a_negative_seed_is_a_usage_error(hand, tmp_path):
    line = refused(calibrate(hand, tmp_path, '--seed=-1'), hand, tmp_path, 'calibrate')
    assert "argument --seed: must be at least 0, got -1" in line, line


# 6 -- a huge --max-delay --------------------------------------------------------------------------
@pytest.mark.parametrize('delay, expected', [('1e9', "argument --max-delay: must be a finite number >= 0 and <= 5"),
                                             ('5', 'max_delay 5 s leaves nothing to compare')])
def test_a_max_delay_longer_than_sensible_is_refused(hand, tmp_path, delay, expected):
    line = refused(['evaluate', *hand_inputs(hand), '--max-delay', delay], hand, tmp_path, 'evaluate')
    assert expected in line, line


# 7 -- a malformed column map ----------------------------------------------------------------------
COLUMN_MAPS = {
    'a list': ('- timestamp\n', 'expected a mapping'),
    'unknown key': ('time: timestamp\npositions: actual_q_{i}\nefforts: actual_current_{i}\ncolour: red\n',
                    'unknown key(s) colour'),
    'header a string': ('time: timestamp\npositions: actual_q_{i}\nefforts: actual_current_{i}\nheader: "no"\n',
                        "header 'no' must be true or false"),
    'time a mapping': ('time: {a: 1}\npositions: actual_q_{i}\nefforts: actual_current_{i}\n',
                       "time: a column is a header name or a 0-based index, got {'a': 1}"),
    'a broken pattern': ('time: timestamp\npositions: "{i}{"\nefforts: actual_current_{i}\n', "positions '{i}{'"),
}


@pytest.mark.parametrize('case', COLUMN_MAPS)
def test_a_malformed_column_map_is_one_line(arm, tmp_path, case):
    text, expected = COLUMN_MAPS[case]
    columns = tmp_path / 'map.yaml'
    columns.write_text(text)
    line = refused(['identify', '--model', arm / 'ur10e.xml', '--csv', arm / 'run.csv', '--columns', columns,
                    '--out', tmp_path / 'out'], arm, tmp_path, 'identify')
    assert f'column map: {expected}' in line, line


# 8 -- a simulation that goes unstable -------------------------------------------------------------
def test_an_unstable_simulation_is_no_score(hand, tmp_path):
    line = refused(['evaluate', *hand_inputs(hand), '--params', hand / 'unstable.yaml'], hand, tmp_path, 'evaluate')
    assert 'the simulation went unstable at t = ' in line and 'no score' in line, line


def test_an_unstable_candidate_scores_the_penalty(hand):
    """What calibrate's optimisers see: the penalty, with ``unstable`` set, beside a normal score;
    residuals whose sum of squares is the penalty."""
    twin = TwinModel()
    controller = SimController(twin.model, ControllerGains.from_yaml(config_path('controllers', 'shadow_hand_e.yaml')))
    evaluator = Evaluator(twin, controller, read_joint_states(hand / 'good'), load_trajectory(f'{hand}/ff.yaml:ff'),
                          ['rh_FFJ3'])
    unstable = {ParameterTarget('joint', 'rh_FFJ3', 'damping'): -1e6}
    good, bad = evaluator.evaluate([{}, unstable])
    assert good.unstable is None and good.objective < 1e-3
    assert bad.unstable and 'went unstable' in bad.unstable and bad.objective == stability.UNSTABLE_OBJECTIVE
    scores, residuals = evaluator.evaluate_scored_residuals([{}, unstable])
    assert residuals[1] @ residuals[1] == pytest.approx(stability.UNSTABLE_OBJECTIVE)
    assert scores[1].objective == stability.UNSTABLE_OBJECTIVE
