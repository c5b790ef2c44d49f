"""The calibration core's defects of issue 25 (item 5), each pinned by a test that failed before
its fix: least squares from a tiny objective, the initial state after the delay fit, joints the
trajectory leaves out, stamped alignment in ``calibrate``, ``--start-tolerance``, objectives
printed readable when tiny, ``--joints`` globs, ROS 2 bag directories named ``*.bag``, and
``package://`` model paths in the calibration node.
"""

import contextlib
import io
import json
import shutil

import numpy as np
import pytest
import yaml

from shadow_twin.calibration.scoring import evaluation
from shadow_twin.calibration.scoring.evaluation import Evaluator
from shadow_twin.calibration.scoring.placement import AlignmentSettings
from shadow_twin.calibration.search.least_squares import fit_least_squares
from shadow_twin.calibration.recordings.recording import (JOINT_STATE, TRAJECTORY, joint_state_messages,
                                                          read_joint_states, trajectory_cdr,
                                                          write_serialized_bag)
from shadow_twin.calibration.search.search_space import Dimension, SearchSpace
from shadow_twin.cli import main as cli
from shadow_twin.common.paths import config_path
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.model.mjcf import TwinModel
from support.synthetic_hand import first_finger_recording

GAINS = config_path('controllers', 'shadow_hand_e.yaml')


# -- least squares from a tiny objective -----------------------------------------------------
@pytest.mark.parametrize('method', ['scipy', 'mujoco'])
def test_least_squares_descends_from_a_tiny_objective(method):
    """An objective of 1e-10 rad^2 at the start (a model already close): an absolute gradient
    tolerance stopped at the start; scaled to it, the fit goes on down by the same factor as
    from a large one."""
    space = SearchSpace([Dimension('a', [], -1.0, 1.0, 0.0), Dimension('b', [], -1.0, 1.0, 0.0)], 'test')
    target = np.array([0.3, -0.2])

    def residuals(scale):
        def r(points):
            points = np.atleast_2d(points)
            return scale * np.stack([[x[0] - target[0], x[1] - target[1], 0.5 * (x[0] + x[1] - 0.1)]
                                     for x in points])
        return r
    start = np.zeros(2)
    large = fit_least_squares(residuals(1.0), space, start, budget=40, method=method)
    tiny = fit_least_squares(residuals(1e-5), space, start, budget=40, method=method)
    start_cost = float(np.sum(residuals(1e-5)(start) ** 2))
    assert tiny.cost < 1e-3 * start_cost
    np.testing.assert_allclose(tiny.x, large.x, atol=1e-3)


# -- the evaluator's initial state ---------------------------------------------------------------
@pytest.fixture(scope='module')
def hand():
    twin = TwinModel()
    return twin, SimController(twin.model, ControllerGains.from_yaml(GAINS))


def test_joints_the_trajectory_leaves_out_start_at_their_recorded_state(hand):
    twin, controller = hand
    bent = {'rh_MFJ3': 0.9, 'rh_RFJ3': 0.7, 'rh_THJ5': 0.4}
    recording, trajectory = first_finger_recording(twin, controller, others=bent)
    ev = Evaluator(twin, controller, recording, trajectory, ['rh_FFJ3'],
                   settings=AlignmentSettings(settle_time=1.0, max_delay=0.0), trajectory_start=50.0)
    recorded = dict(zip(recording.joint_names, recording.frame['position'].iloc[0]))
    for joint in bent:
        k = controller.joint_names.index(joint)
        assert ev.simulator.start_positions[k] == pytest.approx(recorded[joint], abs=1e-4), joint
        assert joint in ev.held_joints
    # they hold there through the simulation: the finger matches its recording
    positions = ev.simulator.run([twin.model])[0]
    k = controller.joint_names.index('rh_MFJ3')
    assert np.abs(positions[:, k] - recorded['rh_MFJ3']).max() < 0.02


def test_initial_state_is_read_where_the_delay_fit_puts_the_start(hand, monkeypatch):
    """The delay fit moves the start from the onset placement; the initial state must be the
    recorded one at the moved start, not at the first placement."""
    twin, controller = hand
    recording, trajectory = first_finger_recording(twin, controller, rest=0.3, start=50.0)
    placements = []
    original = Evaluator._simulator

    def spy(self, start):
        placements.append(start)
        return original(self, start)
    monkeypatch.setattr(Evaluator, '_simulator', spy)
    # a stamped start 0.2 s late, the delay fit allowed: it moves the start back to ~50.0
    settings = AlignmentSettings(settle_time=1.0, stamped_max_delay=0.25)
    ev = Evaluator(twin, controller, recording, trajectory, ['rh_FFJ3'], settings=settings, trajectory_start=50.2)
    assert ev.delay < -0.05          # moved back towards the true start, 50.0 s
    assert placements[-1] == pytest.approx(ev.start)
    k = controller.joint_names.index('rh_FFJ3')
    at = evaluation.alignment.resample(recording.times, recording.values(['rh_FFJ3']), [ev.start])[0, 0]
    assert ev.simulator.start_positions[k] == pytest.approx(at, abs=1e-6)


# -- the offline commands ---------------------------------------------------------------------
STAMP = 50.1       # the commanded trajectory's stamp: 0.1 s after the motion really started (50.0 s)


@pytest.fixture(scope='module')
def stamped(tmp_path_factory, hand):
    """A folder with ``ff.yaml`` (trajectory ``ff``) and ``stamped`` (MCAP bag: /joint_states and the
    commanded trajectory stamped STAMP), the same bag as a directory named ``run.bag``, and
    ``still``: the model's own motion recorded exactly (a tiny objective)."""
    twin, controller = hand
    folder = tmp_path_factory.mktemp('stamped')
    recording, trajectory = first_finger_recording(twin, controller, rest=1.0, after=3.5)
    (folder / 'ff.yaml').write_text(yaml.safe_dump({
        'hand_joints_order': ['FFJ1', 'FFJ2', 'FFJ3', 'FFJ4'],
        'hand_trajectories': {'ff': [{'joint_angles': [0.2, 0.4, 0.6, 0.0], 'interpolate_time': 0.6},
                                     {'joint_angles': [0.3, 0.6, 1.0, 0.1], 'interpolate_time': 0.6}]}}))
    messages = joint_state_messages(recording) + [('/calibration_node/commanded_trajectory', int(49.5e9),
                                                   trajectory_cdr(trajectory, STAMP))]
    messages.sort(key=lambda m: m[1])
    bag = write_serialized_bag(folder / 'stamped', {'/joint_states': JOINT_STATE,
                                                    '/calibration_node/commanded_trajectory': TRAJECTORY}, messages)
    shutil.copytree(bag, folder / 'run.bag')
    return folder


def run_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:      # a usage error (argparse)
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def evaluate(folder, *extra, bag='stamped'):
    return run_cli(['evaluate', '--bag', str(folder / bag), '--trajectory', f'{folder / "ff.yaml"}:ff',
                    '--joints', 'rh_FFJ2,rh_FFJ3', '--settle-time', '1.0', '-q', *extra])


def test_a_bag_with_the_commanded_trajectory_is_aligned_by_its_stamp(stamped):
    code, out, err = evaluate(stamped, '--json')
    assert code == 0, err
    result = json.loads(out)
    assert result['aligned_by'] == 'stamp'
    assert result['trajectory_start_s'] == pytest.approx(STAMP, abs=1e-6)   # not the onset (50.0 s)
    assert result['fitted_delay_s'] == 0.0
    # an occurrence asked for: by the onset, as before
    code, out, err = evaluate(stamped, '--json', '--occurrence', '1')
    assert code == 0, err
    onset = json.loads(out)
    assert onset['aligned_by'] == 'onset' and abs(onset['trajectory_start_s'] - 50.0) < 0.05
    assert result['mean_mse'] > onset['mean_mse']       # the stamp is 0.1 s off, and trusted


def test_a_ros2_bag_directory_named_dot_bag_is_read(stamped):
    assert read_joint_states(stamped / 'run.bag').times.size == read_joint_states(stamped / 'stamped').times.size
    code, out, err = evaluate(stamped, '--json', bag='run.bag')
    assert code == 0, err
    assert json.loads(out)['aligned_by'] == 'stamp'


def test_joints_take_globs_and_an_unmatched_one_is_one_line(stamped):
    code, out, err = evaluate(stamped, '--json', '--joints', 'rh_FFJ[23],rh_FFJ4')
    assert code == 0, err
    assert json.loads(out)['joints'] == ['rh_FFJ2', 'rh_FFJ3', 'rh_FFJ4']
    code, out, err = evaluate(stamped, '--json', '--joints', 'rh_FF*')
    assert json.loads(out)['joints'] == ['rh_FFJ1', 'rh_FFJ2', 'rh_FFJ3', 'rh_FFJ4']
    code, out, err = evaluate(stamped, '--joints', 'rh_FF*,rh_MF*')
    assert code == 2 and out == ''
    assert err.splitlines() == [err.strip()] and "'rh_MF*' matches none of the joints of trajectory 'ff'" in err


def test_tiny_objectives_are_printed_readable(stamped):
    """The table printed 0.000000 for an objective of 1e-7 rad^2; now 4 significant digits."""
    code, out, err = evaluate(stamped, '--occurrence', '1')
    assert code == 0, err
    code_json, out_json, _ = evaluate(stamped, '--occurrence', '1', '--json')
    mean = json.loads(out_json)['mean_mse']
    assert 0 < mean < 1e-4
    printed = float(out.splitlines()[0].split(': ')[1].split()[0])
    assert printed == pytest.approx(mean, rel=1e-3)


def test_start_tolerance_is_a_validated_flag(stamped):
    from shadow_twin.cli.inputs import alignment_settings
    args = cli.build_parser().parse_args(['evaluate', '--bag', 'b', '--trajectory', 'f:n', '--start-tolerance', '0.2'])
    assert alignment_settings(args).start_tolerance == 0.2
    args = cli.build_parser().parse_args(['evaluate', '--bag', 'b', '--trajectory', 'f:n'])
    assert alignment_settings(args).start_tolerance == 0.05
    for bad in ('-0.1', 'nan', 'inf', 'x'):
        code, out, err = evaluate(stamped, '--start-tolerance', bad)
        assert code == 2 and out == '' and len(err.splitlines()) == 1, err
        assert err.startswith('shadow-twin evaluate: error: argument --start-tolerance'), err


def test_calibration_node_resolves_package_urls():
    pytest.importorskip('rclpy')
    from calibration_node.plan_setup import model_file
    from shadow_twin.common.errors import ConfigError
    from shadow_twin.common.paths import share_dir
    from shadow_twin.model.mjcf import builtin_model_path
    assert model_file('package://shadow_twin/models/ur5.xml') == builtin_model_path('ur5')
    assert model_file('') == builtin_model_path()
    assert model_file('package://shadow_twin/config/cell_model.xml') == share_dir() / 'config' / 'cell_model.xml'
    with pytest.raises(ConfigError, match='no such built-in model'):
        model_file('package://shadow_twin/models/nothing.xml')
