"""shadow_twin.calibration.scoring.evaluation: scoring models against the real recording."""

import logging

import mujoco
import numpy as np
import pandas as pd
import pytest
from conftest import FF_JOINTS, GAINS

from shadow_twin.calibration.recordings import alignment
from shadow_twin.calibration.scoring.evaluation import Evaluator
from shadow_twin.calibration.scoring.placement import AlignmentSettings, list_occurrences
from shadow_twin.calibration.scoring.metrics import PUBLISHED_DEFAULT_MSE
from shadow_twin.calibration.recordings.recording import JointStateRecording
from shadow_twin.common.errors import ConfigError, RecordingError, TrajectoryError
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.simulation.offline import FULL_STATE, TrajectorySimulator


def make_evaluator(recording, trajectory, model_path=None, joints=FF_JOINTS, weights=None, trajectory_start=None,
                   **settings):
    twin = TwinModel(model_path)
    controller = SimController(twin.model, ControllerGains.from_yaml(GAINS))
    return Evaluator(twin, controller, recording, trajectory, joints, weights,
                     settings=AlignmentSettings(**settings), trajectory_start=trajectory_start)


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
    """The motion is incomplete: the error names how much of the trajectory and that the settle
    time are missing, with the onset placement and with a stamped start."""
    short = truncated(real_recording, builtin_evaluator.onset + 3.0)
    covered = short.times[-1] - (builtin_evaluator.onset - hand_closing.motion_start())
    expected = (rf'truncated /joint_states: the recording ends {covered:.2f} s into the 6\.10 s trajectory: '
                rf'the last {6.1 - covered:.2f} s and the 3 s settle time are missing')
    with pytest.raises(RecordingError, match=expected):
        make_evaluator(short, hand_closing)
    with pytest.raises(RecordingError, match=r'truncated /joint_states: the recording ends 3\.00 s into the 6\.10 s'):
        make_evaluator(short, hand_closing, trajectory_start=short.times[-1] - 3.0)


def test_default_placement_of_a_normal_recording_is_unchanged(real_recording, hand_closing, builtin_evaluator):
    """The shared recording rests before the motion at point 0 (within 0.024 rad): the trajectory
    start is the onset minus point 0's time, refined by the delay fit, exactly as the same fit from
    that start given as known (the placement before the JTC start rule) scores it."""
    moving = [j for j, span in zip(hand_closing.joint_names, np.ptp(hand_closing.positions, axis=0)) if span > 0]
    onset = alignment.detect_motion_onset(real_recording.times, real_recording.values(moving))
    assert builtin_evaluator.onset == onset and builtin_evaluator.time_offset == 0.0
    assert builtin_evaluator.occurrence == 1 and len(builtin_evaluator.occurrences) == 1
    nominal = onset - hand_closing.motion_start()
    assert builtin_evaluator.start == nominal + builtin_evaluator.delay
    stamped = make_evaluator(real_recording, hand_closing, trajectory_start=nominal,
                             stamped_max_delay=AlignmentSettings().max_delay)
    assert stamped.start == builtin_evaluator.start
    assert stamped.evaluate([{}])[0].objective == builtin_evaluator.evaluate([{}])[0].objective


def test_recording_cut_at_its_onset_scores_like_the_whole(real_recording, hand_closing, builtin_evaluator):
    """A recording trimmed at the motion onset (as exported CSVs are) is simulated from its first
    sample, that far into the trajectory, and compared over the part of the window it covers."""
    whole = builtin_evaluator.evaluate([{}])[0].objective
    for cut, source in ((0.0, 'at onset'), (-0.05, 'just before')):
        trimmed = JointStateRecording(real_recording.frame.loc[builtin_evaluator.onset + cut:], source=source)
        for max_delay in (0.3, 0.0):
            evaluator = make_evaluator(trimmed, hand_closing, max_delay=max_delay)
            assert evaluator.start < trimmed.times[0]   # the trajectory started before the recording
            assert evaluator.time_offset == pytest.approx(trimmed.times[0] - evaluator.start, abs=1e-6)
            assert evaluator.time_base[0] == evaluator.time_offset
            assert evaluator.simulator.time_offset == evaluator.time_offset
            assert evaluator.evaluate([{}])[0].objective == pytest.approx(whole, rel=0.10), (cut, max_delay)
            if max_delay:
                assert abs(evaluator.start - builtin_evaluator.start) <= 0.01


def test_recording_cut_in_the_motion_is_placed_by_the_delay_fit(real_recording, hand_closing, builtin_evaluator):
    """Cut 0.05 s into the motion, the first sample already moves: it is taken as the onset and
    the delay fit finds the start."""
    trimmed = JointStateRecording(real_recording.frame.loc[builtin_evaluator.onset + 0.05:], source='cut')
    evaluator = make_evaluator(trimmed, hand_closing)
    assert evaluator.occurrences[0].begins_in_motion
    assert abs(evaluator.start - builtin_evaluator.start) <= 0.01


def test_stamped_start_before_the_recording(real_recording, hand_closing, builtin_evaluator):
    """A known start before the first sample: simulated from that sample, not refused; a start
    whose trajectory ends before the recording begins: the motion is missing."""
    start = builtin_evaluator.start
    trimmed = JointStateRecording(real_recording.frame.loc[start + 0.2:], source='trimmed')
    evaluator = make_evaluator(trimmed, hand_closing, trajectory_start=start)
    assert evaluator.start == start and evaluator.time_offset == trimmed.times[0] - start
    assert evaluator.evaluate([{}])[0].objective == pytest.approx(builtin_evaluator.evaluate([{}])[0].objective,
                                                                  rel=0.10)
    with pytest.raises(RecordingError, match=r'trimmed /joint_states: the recording begins 7\.\d\d s after the '
                                             r'trajectory start, after its end \(6\.10 s\): the motion is missing'):
        make_evaluator(trimmed, hand_closing, trajectory_start=trimmed.times[0] - 7.0)
    with pytest.raises(RecordingError, match=r'the recording ends 1\.00 s before the trajectory starts: the whole '
                                             r'6\.10 s trajectory and the 3 s settle time are missing'):
        make_evaluator(trimmed, hand_closing, trajectory_start=trimmed.times[-1] + 1.0)


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
    with pytest.raises(RecordingError, match=r'truncated /joint_states: the recorded joints never move faster '
                                             r'than 0\.1 rad/s \(peak .*\): no motion onset'):
        make_evaluator(rest, hand_closing)


def twice(recording):
    """The recording followed by a copy of itself shifted by its length plus one sample."""
    step = float(np.median(np.diff(recording.times)))
    copy = recording.frame.copy()
    copy.index = copy.index + (recording.times[-1] - recording.times[0] + step)
    return JointStateRecording(pd.concat([recording.frame, copy]), recording.topic, 'twice')


def test_two_executions_in_one_recording(real_recording, hand_closing, builtin_evaluator, caplog):
    """Each execution is found (and logged), placed at its own onset and scored alike; a third is
    not there."""
    doubled = twice(real_recording)
    shift = doubled.times[real_recording.times.size] - real_recording.times[0]
    found = list_occurrences(doubled, hand_closing)
    assert [o.complete for o in found] == [True, True]
    assert found[1].onset - found[0].onset == pytest.approx(shift, abs=1e-6)
    with caplog.at_level(logging.INFO, logger='shadow_twin.calibration.scoring.evaluation'):
        first = make_evaluator(doubled, hand_closing)
    for occurrence in found:
        assert occurrence.describe(doubled.times[0]) in caplog.text
    assert 'comparing occurrence 1 of 2' in caplog.text
    second = make_evaluator(doubled, hand_closing, occurrence=2)
    assert first.occurrence == 1 and first.start == pytest.approx(builtin_evaluator.start, abs=1e-6)
    assert second.occurrence == 2 and second.start - first.start == pytest.approx(shift, abs=0.004)
    scores = [e.evaluate([{}])[0].objective for e in (first, second)]
    assert scores[0] == pytest.approx(builtin_evaluator.evaluate([{}])[0].objective, rel=1e-6)
    assert scores[1] == pytest.approx(scores[0], rel=0.01)
    origin = doubled.times[0]
    with pytest.raises(RecordingError, match=rf'twice /joint_states: occurrence 3 requested, the recording holds 2: '
                                             rf'at {found[0].onset - origin:.2f} s and {found[1].onset - origin:.2f} s'):
        make_evaluator(doubled, hand_closing, occurrence=3)
    with pytest.raises(ConfigError, match='occurrence 2 was chosen but the trajectory start is known'):
        make_evaluator(doubled, hand_closing, occurrence=2, trajectory_start=first.start)
    # the second execution cut 3 s in: the first is still the default; the second is named incomplete
    cut = truncated(doubled, found[1].onset + 3.0)
    assert make_evaluator(cut, hand_closing).occurrence == 1
    with pytest.raises(RecordingError, match=r'occurrence 2 at .* is incomplete: the recording ends 3\.\d\d s into '
                                             r'the 6\.10 s trajectory: the last \d\.\d\d s and the 3 s settle time'):
        make_evaluator(cut, hand_closing, occurrence=2)


def test_window_stops_before_the_next_execution(real_recording, hand_closing):
    """Executions 8 s apart: the first one's window (6.1 s + 3 s settle) is cut before the second
    starts."""
    onset = alignment.detect_motion_onset(real_recording.times, real_recording.values(hand_closing.joint_names))
    part = JointStateRecording(real_recording.frame.loc[onset - 1.5:onset + 6.5], source='part')
    doubled = twice(part)
    evaluator = make_evaluator(doubled, hand_closing)
    following = evaluator.occurrences[1].start
    assert evaluator.start + evaluator.window <= following
    assert evaluator.window < hand_closing.duration + evaluator.settings.settle_time


def simulated_recording(twin, controller, trajectory, rest_s=1.0, after_s=3.5, start=100.0, seed=0):
    """The offline simulator as the robot: the default model follows ``trajectory`` from rest at
    ``start`` (s); 125 Hz samples with ``rest_s`` s of rest before, sensor noise 3e-4 rad."""
    sim = TrajectorySimulator(twin.model, controller, trajectory, trajectory.duration + after_s)
    positions = sim.run([twin.model])[0]
    stride = int(round(0.008 / sim.dt))
    rest_times = start - rest_s + np.arange(int(round(rest_s / 0.008))) * 0.008
    times = np.concatenate([rest_times, start + sim.times[stride - 1::stride]])
    positions = np.vstack([np.repeat(sim.start_positions[None], rest_times.size, axis=0),
                           positions[stride - 1::stride]])
    positions = positions + np.random.default_rng(seed).normal(0.0, 3e-4, positions.shape)
    return JointStateRecording.from_arrays(times, controller.joint_names, positions, source='simulated')


def test_point_0_away_from_rest_is_placed_at_the_true_start(builtin_evaluator):
    """The JTC moves from the rest state to point 0 over point 0's time: the motion starts at
    t = 0, not at point 0 (1.5 s later), and the placement finds the true start."""
    twin, controller = builtin_evaluator.twin, builtin_evaluator.controller
    joints = ['rh_FFJ3', 'rh_MFJ3', 'rh_FFJ4']
    away = JointTrajectory(joints, [1.5, 3.0, 4.0], [[1.0, 0.8, 0.2], [0.3, 0.2, -0.1], [0.6, 0.5, 0.0]],
                           name='away')
    recording = simulated_recording(twin, controller, away, start=100.0)
    evaluator = Evaluator(twin, controller, recording, away, joints)
    assert abs(evaluator.start - 100.0) <= 0.020
    assert evaluator.occurrences[0].motion_start == 0.0
    placed = evaluator.evaluate([{}])[0].objective
    blind = Evaluator(twin, controller, recording, away, joints, settings=AlignmentSettings(start_tolerance=np.inf))
    assert blind.start < 100.0 - 1.0   # point 0's time, 1.5 s, minus what the delay fit recovers
    assert placed < 0.01 * blind.evaluate([{}])[0].objective


def test_simulation_from_a_time_offset_continues_the_whole_one(builtin_evaluator):
    """Started ``time_offset`` into the trajectory from the state the whole simulation had there
    (positions and velocities), the simulator continues that simulation."""
    twin, controller = builtin_evaluator.twin, builtin_evaluator.controller
    joints = controller.joint_names   # all of them: none holds a start position of its own
    waypoints = np.zeros((3, len(joints)))
    waypoints[1:, joints.index('rh_FFJ3')] = [1.2, 0.4]
    waypoints[1:, joints.index('rh_MFJ4')] = [0.3, -0.2]
    trajectory = JointTrajectory(joints, [0.2, 1.0, 1.6], waypoints)
    whole = TrajectorySimulator(twin.model, controller, trajectory, 2.0)
    data = mujoco.MjData(twin.model)
    mujoco.mj_setState(twin.model, data, whole.initial_state, FULL_STATE)
    k = 300   # 0.6 s at 2 ms, mid-segment
    for step in range(k):
        data.ctrl[:] = controller.ctrl(twin.model, whole.desired_positions[step], whole.desired_velocities[step])
        mujoco.mj_step(twin.model, data)
    positions, velocities = controller.joint_state(data)[:2]
    offset = whole.times[k - 1]
    rest = TrajectorySimulator(twin.model, controller, trajectory, 2.0 - offset,
                               dict(zip(controller.joint_names, positions)), 'auto',
                               dict(zip(controller.joint_names, velocities)), time_offset=offset)
    np.testing.assert_allclose(rest.times, whole.times[k:k + rest.nstep], atol=1e-12)
    np.testing.assert_allclose(rest.desired_positions, whole.desired_positions[k:k + rest.nstep], atol=1e-12)
    continued, expected = rest.run([twin.model])[0], whole.run([twin.model])[0][k:k + rest.nstep]
    moved = [joints.index('rh_FFJ3'), joints.index('rh_MFJ4')]
    np.testing.assert_allclose(continued[:, moved], expected[:, moved], atol=1e-6)
    # a joint resting 1e-5 rad past its limit (a soft constraint) starts clipped into its range
    np.testing.assert_allclose(continued, expected, atol=5e-5)
    with pytest.raises(ValueError, match='time_offset'):
        TrajectorySimulator(twin.model, controller, trajectory, 1.0, time_offset=float('nan'))


def test_a_negative_time_offset_holds_until_the_trajectory_starts(builtin_evaluator):
    """``time_offset`` -0.3 s: the joints hold their start for 0.3 s (zero desired velocity), then
    the desired states are the whole simulation's, 0.3 s later."""
    twin, controller = builtin_evaluator.twin, builtin_evaluator.controller
    joints = controller.joint_names
    waypoints = np.zeros((2, len(joints)))
    waypoints[:, joints.index('rh_FFJ3')] = [0.8, 0.4]       # the first point is not the start
    trajectory = JointTrajectory(joints, [0.5, 1.0], waypoints, np.zeros_like(waypoints))
    whole = TrajectorySimulator(twin.model, controller, trajectory, 1.5)
    late = TrajectorySimulator(twin.model, controller, trajectory, 1.8, time_offset=-0.3)
    k = int(round(0.3 / late.dt))
    np.testing.assert_allclose(late.desired_positions[:k], np.repeat(late.start_positions[None], k, axis=0))
    assert not late.desired_velocities[:k].any()
    np.testing.assert_allclose(late.desired_positions[k:k + whole.nstep], whole.desired_positions, atol=1e-12)
    np.testing.assert_allclose(late.desired_velocities[k:k + whole.nstep], whole.desired_velocities, atol=1e-9)


def test_unknown_matching():
    with pytest.raises(ValueError, match='matching'):
        AlignmentSettings(matching='closest')
