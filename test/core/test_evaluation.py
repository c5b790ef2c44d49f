"""shadow_twin.calibration.evaluation: scoring models against the real recording."""

import numpy as np
import pytest

from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.common.errors import RecordingError, TrajectoryError
from shadow_twin.calibration.evaluation import AlignmentSettings, Evaluator
from shadow_twin.calibration.metrics import PUBLISHED_DEFAULT_MSE
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.calibration.recording import JointStateRecording

from conftest import FF_JOINTS, GAINS


def make_evaluator(recording, trajectory, model_path=None, joints=FF_JOINTS, weights=None, **settings):
    twin = TwinModel(model_path)
    controller = SimController(twin.model, ControllerGains.from_yaml(GAINS))
    return Evaluator(twin, controller, recording, trajectory, joints, weights,
                     settings=AlignmentSettings(**settings))


@pytest.fixture(scope='module')
def builtin_evaluator(real_recording, hand_closing):
    return make_evaluator(real_recording, hand_closing)


@pytest.mark.parametrize('matching', ['interpolate', 'nearest'])
def test_shadow_model_scores_the_published_default(real_recording, hand_closing, shadow_model, matching):
    evaluator = make_evaluator(real_recording, hand_closing, shadow_model, matching=matching)
    score = evaluator.evaluate([{}])[0]
    assert score.objective == pytest.approx(PUBLISHED_DEFAULT_MSE, rel=0.25)
    assert score.objective == pytest.approx(np.mean([score.per_joint_mse[j] for j in FF_JOINTS]), rel=1e-12)
    assert set(score.per_joint_mse) == set(evaluator.joints) and len(evaluator.joints) == 24
    assert evaluator.onset - real_recording.times[0] == pytest.approx(9.5, abs=0.3)
    assert abs(evaluator.delay) <= evaluator.settings.max_delay
    if matching == 'nearest':  # the real samples themselves, within the window
        rel = real_recording.times - evaluator.start
        assert evaluator.time_base.size == np.count_nonzero((rel >= 0) & (rel <= evaluator.window))
    else:
        assert np.allclose(np.diff(evaluator.time_base), np.median(np.diff(real_recording.times)))


def test_builtin_model_scores_like_the_published_default(builtin_evaluator):
    score = builtin_evaluator.evaluate([{}])[0]
    assert score.objective == pytest.approx(PUBLISHED_DEFAULT_MSE, rel=0.25)
    assert builtin_evaluator.window == pytest.approx(6.1 + 3.0)  # trajectory + settle time


def test_scores_are_deterministic_and_respond_to_parameters(builtin_evaluator):
    twin = builtin_evaluator.twin
    damping = {twin.target('joint', f'rh_{f}J{k}', 'damping'): 2.0 for f in ('FF', 'MF', 'RF', 'LF')
               for k in (1, 2, 3)}
    default, damped, again = builtin_evaluator.evaluate([{}, damping, {}], nthread=2, keep_positions=True)
    assert default.objective == again.objective  # bit-identical
    np.testing.assert_array_equal(default.positions, again.positions)
    assert default.positions.shape == (builtin_evaluator.time_base.size, 24)
    assert damped.objective > default.objective  # a much too damped hand lags the real one
    single = builtin_evaluator.evaluate([damping])[0]
    assert single.objective == damped.objective  # threads do not change results
    # evaluating did not modify the evaluator's model
    assert builtin_evaluator.evaluate([{}])[0].objective == default.objective


def test_weights(real_recording, hand_closing):
    evaluator = make_evaluator(real_recording, hand_closing, joints=['rh_FFJ3', 'rh_MFJ3'],
                               weights={'rh_FFJ3': 3.0, 'rh_MFJ3': 1.0}, max_delay=0.0)
    score = evaluator.evaluate([{}])[0]
    mse = score.per_joint_mse
    assert score.objective == pytest.approx((3 * mse['rh_FFJ3'] + mse['rh_MFJ3']) / 4, rel=1e-12)
    assert evaluator.delay == 0.0  # max_delay 0 disables the fit


def truncated(recording, end):
    return JointStateRecording(recording.frame.loc[:end], recording.topic, 'truncated')


def test_recording_shorter_than_the_trajectory(real_recording, hand_closing, builtin_evaluator):
    short = truncated(real_recording, builtin_evaluator.onset + 3.0)
    with pytest.raises(RecordingError, match=r'truncated /joint_states: recording ends .* shorter than the '
                                             r'trajectory \(6\.10 s\)'):
        make_evaluator(short, hand_closing)


def test_recording_starting_after_the_motion(real_recording, hand_closing, builtin_evaluator):
    late = JointStateRecording(real_recording.frame.loc[builtin_evaluator.onset - 0.05:], source='late')
    with pytest.raises(RecordingError, match='trajectory starts .* before it'):
        make_evaluator(late, hand_closing)


def test_objective_joints_absent(real_recording, hand_closing):
    with pytest.raises(TrajectoryError, match=r"objective joint\(s\) \['rh_XXJ9'\] are not in trajectory "
                                              r"'hand_closing'"):
        make_evaluator(real_recording, hand_closing, joints=['rh_FFJ1', 'rh_XXJ9'])
    unrecorded = JointStateRecording(real_recording.frame.drop(columns='rh_FFJ2', level='joint'), source='cut')
    with pytest.raises(RecordingError, match=r"joint\(s\) \['rh_FFJ2'\] not recorded"):
        make_evaluator(unrecorded, hand_closing)


def test_nan_in_an_objective_joint(real_recording, hand_closing):
    frame = real_recording.frame.copy()
    frame.iloc[1000, frame.columns.get_loc(('position', 'rh_FFJ3'))] = np.nan
    with pytest.raises(RecordingError, match='NaN/inf position sample.*rh_FFJ3'):
        make_evaluator(JointStateRecording(frame, source='nan'), hand_closing)


def test_recording_without_motion(real_recording, hand_closing):
    rest = truncated(real_recording, real_recording.times[0] + 8.0)  # before the hand moves
    with pytest.raises(RecordingError, match='no motion onset'):
        make_evaluator(rest, hand_closing)


def test_unknown_matching():
    with pytest.raises(ValueError, match='matching'):
        AlignmentSettings(matching='closest')
