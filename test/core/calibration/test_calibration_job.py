"""The calibration job behind the calibration node (no ROS): recordings with a stamped start,
several recordings at once, the hold-out check, plans, versioned models; and the bag helpers
it uses (commanded trajectory, serialized bags, gaps, stream MSE)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from shadow_twin.calibration.scoring import metrics
from shadow_twin.calibration.engine.run import CalibrationSettings
from shadow_twin.calibration.jobs.job import (RESULT, CalibrationJob, JobSpec, RecordingSource, install_decision,
                                              objective_joints_of, publish_model)
from shadow_twin.calibration.jobs.plan import CalibrationPlan, PlanEntry, holdout_names, new_run_dir, unfinished_runs
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.common.errors import ConfigError, RecordingError
from shadow_twin.calibration.scoring.evaluation import Evaluator
from shadow_twin.calibration.scoring.evaluator_set import EvaluatorSet
from shadow_twin.model.calibratable import apply_parameters
from shadow_twin.model.mjcf import TwinModel, builtin_model_path
from shadow_twin.common.paths import config_path
from shadow_twin.calibration.recordings.recording import (JOINT_STATE, TRAJECTORY, JointStateRecording,
                                                          joint_state_messages, largest_gap, read_commanded_trajectory,
                                                          read_joint_states, trajectory_cdr, write_serialized_bag)
from shadow_twin.simulation.offline import TrajectorySimulator
from shadow_twin.control.trajectory import load_waypoint_yaml

TRAJECTORIES = config_path('trajectories', 'calibration.yaml')
SPACE = config_path('calibration', 'finger_dynamics.yaml')
GAINS = config_path('controllers', 'shadow_hand_e.yaml')
FINGERS = 'rh_[FMRL]FJ[123]'
#: the mock hardware's physics (config/mock_hardware.yaml): J1-J3 damping x3, frictionloss x0.5
MOCK = {'damping': 0.15, 'frictionloss': 0.05}
START = 1000.0   # s, stamp of the trajectory start in the synthetic recordings
PRE_ROLL = 0.5   # s recorded before it


@pytest.fixture(scope='module')
def twin():
    return TwinModel(builtin_model_path())


@pytest.fixture(scope='module')
def controller(twin):
    return SimController(twin.model, ControllerGains.from_yaml(GAINS))


def finger_values(twin, physics: dict) -> dict:
    joints = [j for j in twin.joint_names if __import__('fnmatch').fnmatchcase(j, FINGERS)]
    return {twin.target('joint', j, attribute): value for j in joints for attribute, value in physics.items()}


def simulate(twin, controller, trajectory, physics: dict | None, duration: float):
    """(times s on the recording clock, joints, positions rad) of the hand following ``trajectory``
    from rest at START, sampled at 250 Hz, with PRE_ROLL s at rest before."""
    sim = TrajectorySimulator(twin.model, controller, trajectory, duration)
    model = sim.model_copies(1)[0]
    apply_parameters(model, finger_values(twin, physics) if physics else {})
    positions = sim.run([model])[0]
    stride = 2   # 2 ms steps -> 250 Hz
    times = START + sim.times[stride - 1::stride]
    positions = positions[stride - 1::stride]
    rest_times = START - PRE_ROLL + np.arange(int(PRE_ROLL * 250)) / 250.0
    rest = np.repeat(sim.start_positions[None], rest_times.size, axis=0)
    return np.concatenate([rest_times, times]), controller.joint_names, np.vstack([rest, positions])


def write_recording(path, twin, controller, name: str, real_physics: dict | None, sim_physics: dict | None = None):
    """A bag as the calibration node records it: /joint_states (hand with ``real_physics``),
    /sim/joint_states (``sim_physics``), the commanded trajectory stamped with its start."""
    trajectory = load_waypoint_yaml(TRAJECTORIES, name)
    duration = trajectory.duration + 3.6
    messages = []
    for topic, physics in (('/joint_states', real_physics), ('/sim/joint_states', sim_physics)):
        times, joints, positions = simulate(twin, controller, trajectory, physics, duration)
        messages += joint_state_messages(JointStateRecording.from_arrays(times, joints, positions, topic=topic))
    messages.append(('/calibration_node/commanded_trajectory', int((START - 0.3) * 1e9),
                     trajectory_cdr(trajectory, START)))
    messages.sort(key=lambda m: m[1])
    return write_serialized_bag(path, {'/joint_states': JOINT_STATE, '/sim/joint_states': JOINT_STATE,
                                       '/calibration_node/commanded_trajectory': TRAJECTORY}, messages)


@pytest.fixture(scope='module')
def bags(tmp_path_factory, twin, controller):
    """Recordings of the mock-like hand (curl_all, stagger) and one where real = sim (stagger)."""
    folder = tmp_path_factory.mktemp('bags')
    return {'curl_all': write_recording(folder / 'curl_all', twin, controller, 'curl_all', MOCK),
            'stagger': write_recording(folder / 'stagger', twin, controller, 'stagger', MOCK),
            'stagger_like_sim': write_recording(folder / 'stagger_like_sim', twin, controller, 'stagger', None)}


def spec(fit, holdout=(), budget=30) -> JobSpec:
    return JobSpec(builtin_model_path(), GAINS, SPACE, [FINGERS], list(fit), list(holdout),
                   CalibrationSettings('bo', budget, 2, seed=0, acq_func='EI', log_objective=True))


# ------------------------------------------------------------------------ bags and trajectories
def test_commanded_trajectory_round_trip(bags):
    trajectory, start = read_commanded_trajectory(bags['curl_all'])
    expected = load_waypoint_yaml(TRAJECTORIES, 'curl_all')
    assert start == pytest.approx(START, abs=1e-6)
    assert trajectory.joint_names == expected.joint_names
    np.testing.assert_allclose(trajectory.times, expected.times)
    np.testing.assert_allclose(trajectory.positions, expected.positions)
    assert trajectory.name == 'curl_all'


def test_commanded_trajectory_is_readable_by_rclpy():
    pytest.importorskip('rclpy')
    from rclpy.serialization import deserialize_message
    from trajectory_msgs.msg import JointTrajectory
    msg = deserialize_message(trajectory_cdr(load_waypoint_yaml(TRAJECTORIES, 'stagger'), 12.25), JointTrajectory)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (12, 250_000_000)
    assert list(msg.points[1].positions[:4]) == [0.0, 0.0, 0.0, 1.0]


def test_bag_without_trajectory_is_refused(tmp_path, real_recording):
    bag = write_serialized_bag(tmp_path / 'states', {'/joint_states': JOINT_STATE},
                               joint_state_messages(real_recording))
    with pytest.raises(RecordingError, match='expected one trajectory_msgs/msg/JointTrajectory topic'):
        read_commanded_trajectory(bag)


def test_serialized_bag_never_overwrites_and_names_bad_topics(tmp_path, bags):
    with pytest.raises(RecordingError, match='exists; a recording is never overwritten'):
        write_serialized_bag(bags['curl_all'], {'/x': JOINT_STATE}, [])
    with pytest.raises(RecordingError, match="topic '/y', which is not among"):
        write_serialized_bag(tmp_path / 'b', {'/x': JOINT_STATE}, [('/y', 1, b'')])
    assert not (tmp_path / 'b').exists()
    with pytest.raises(RecordingError, match='not in the ROS 2 Jazzy typestore'):
        write_serialized_bag(tmp_path / 'c', {'/x': 'no_pkg/msg/Nothing'}, [])


def test_largest_gap():
    rec = JointStateRecording.from_arrays([0.0, 0.004, 0.008, 0.5, 0.504], ['a'], np.zeros((5, 1)))
    assert largest_gap(rec) == pytest.approx((0.492, 0.008))


def test_recording_mse_of_a_known_offset():
    times = np.arange(0, 2.0, 0.004)
    real = JointStateRecording.from_arrays(times, ['a', 'b'], np.c_[np.sin(times), times])
    sim = JointStateRecording.from_arrays(times + 0.001, ['a', 'b'], np.c_[np.sin(times + 0.001) + 0.1, times + 0.001])
    mse = metrics.recording_mse(real, sim, ['a', 'b'], 0.5, 1.5)
    assert mse['a'] == pytest.approx(0.01, rel=1e-4) and mse['b'] == pytest.approx(0.0, abs=1e-12)  # interpolated sine
    with pytest.raises(RecordingError, match='do not overlap'):
        metrics.recording_mse(real, sim, ['a'], 5.0, 6.0)


# ------------------------------------------------------------------------ evaluation with a stamped start
def test_stamped_start_reproduces_the_sim_exactly(bags, twin, controller):
    """The sim stream of a recording, scored with the model that produced it: zero error, no onset
    detection, no delay fit (the offline simulation is the live controller)."""
    trajectory, start = read_commanded_trajectory(bags['curl_all'])
    sim = read_joint_states(bags['curl_all'], '/sim/joint_states')
    evaluator = Evaluator(twin, controller, sim, trajectory, objective_joints_of([FINGERS], trajectory),
                          trajectory_start=start, label='curl_all')
    assert evaluator.start == start and evaluator.delay == 0.0 and evaluator.settings.max_delay == 0.0
    assert evaluator.evaluate([{}])[0].objective < 1e-10
    mock = evaluator.evaluate([finger_values(twin, MOCK)])[0].objective
    assert mock > 1e-5


def test_evaluator_set_averages_recordings(bags, twin, controller):
    parts = []
    for name in ('curl_all', 'stagger'):
        trajectory, start = read_commanded_trajectory(bags[name])
        parts.append(Evaluator(twin, controller, read_joint_states(bags[name]), trajectory,
                               objective_joints_of([FINGERS], trajectory), trajectory_start=start, label=name))
    both = EvaluatorSet(parts)
    values = [{}, finger_values(twin, MOCK)]
    combined = both.evaluate(values)
    singles = [p.evaluate(values) for p in parts]
    for k in range(2):
        assert combined[k].objective == pytest.approx((singles[0][k].objective + singles[1][k].objective) / 2)
    assert combined[1].objective < 1e-9 < combined[0].objective   # the mock's physics explain both
    with pytest.raises(ValueError, match='at least one'):
        EvaluatorSet([])


# ------------------------------------------------------------------------ the job
def test_job_recovers_the_mock_physics_and_accepts(bags, tmp_path):
    job = CalibrationJob(spec([RecordingSource('curl_all', bags['curl_all'])],
                              [RecordingSource('stagger', bags['stagger'])]), tmp_path / 'run')
    result = job.run()
    assert result.accept, result.reason
    assert result.fit_after < 0.1 * result.fit_before
    assert result.holdout['stagger']['after'] < 0.2 * result.holdout['stagger']['before']
    best = result.report['best_parameters']
    assert best['J3_damping'] == pytest.approx(MOCK['damping'], rel=0.5)
    document = json.loads((tmp_path / 'run' / RESULT).read_text())
    assert document['accept'] is True and document['holdout']['stagger']['reduction_percent'] > 80
    # the live error as recorded (sim vs mock) is reported too
    assert document['live_mse_before']['curl_all'] > 1e-5
    report = json.loads((tmp_path / 'run' / 'report.json').read_text())
    assert report['alignment']['trajectory_start_s'] == pytest.approx(START, abs=1e-6)
    assert (tmp_path / 'run' / 'shadow_hand_e_calibrated.xml').is_file()


def test_job_refuses_a_calibration_that_worsens_the_holdout(bags, tmp_path):
    """Held-out recording where the robot moves exactly like the sim: fitting the mock-like
    recording can only make it worse, so the result is not accepted."""
    job = CalibrationJob(spec([RecordingSource('curl_all', bags['curl_all'])],
                              [RecordingSource('like_sim', bags['stagger_like_sim'])], budget=12), tmp_path / 'run')
    result = job.run()
    assert result.fit_after < result.fit_before
    assert result.holdout['like_sim']['after'] > result.holdout['like_sim']['before']
    assert not result.accept and 'hold-out error would rise' in result.reason
    assert json.loads((tmp_path / 'run' / RESULT).read_text())['accept'] is False


def test_job_resumes_from_its_checkpoint(bags, tmp_path):
    run = tmp_path / 'run'
    first = CalibrationJob(spec([RecordingSource('curl_all', bags['curl_all'])], budget=6), run).run()
    again = CalibrationJob(spec([RecordingSource('curl_all', bags['curl_all'])], budget=10), run).run()
    assert again.report['resumed_evaluations'] == 6 and again.report['evaluations'] == 10
    assert again.fit_after <= first.fit_after


def test_job_bad_inputs(bags, tmp_path):
    with pytest.raises(ConfigError, match='at least one recording to fit'):
        CalibrationJob(spec([]), tmp_path / 'r')
    with pytest.raises(ConfigError, match=r"objective_joints \['rh_XX\*'\] match none"):
        CalibrationJob(JobSpec(builtin_model_path(), GAINS, SPACE, ['rh_XX*'],
                               [RecordingSource('c', bags['curl_all'])]), tmp_path / 'r')
    with pytest.raises(RecordingError, match='bag not found'):
        CalibrationJob(spec([RecordingSource('c', tmp_path / 'missing')]), tmp_path / 'r')


def test_install_decision():
    assert install_decision(1.0, 0.5, {})[0]
    assert not install_decision(1.0, 1.0, {})[0]
    ok, why = install_decision(1.0, 0.2, {'a': {'before': 0.4, 'after': 0.1}, 'b': {'before': 0.2, 'after': 0.3}})
    assert ok and '0.3 -> 0.2' in why
    ok, why = install_decision(1.0, 0.2, {'a': {'before': 0.1, 'after': 0.3}})
    assert not ok and 'hold-out error would rise 0.1 -> 0.3' in why


def test_publish_model_is_versioned_and_never_overwrites(tmp_path):
    calibrated = tmp_path / 'run' / 'x_calibrated.xml'
    calibrated.parent.mkdir()
    calibrated.write_text('<mujoco/>')
    models = tmp_path / 'models'
    first = publish_model(calibrated, models, tmp_path / 'hand.xml', '20260101-000000')
    assert first.name == 'hand_calibrated_20260101-000000.xml'
    second = publish_model(calibrated, models, first, '20260101-000000')   # from a calibrated base
    assert second.name == 'hand_calibrated_20260101-000000.1.xml'
    assert first.read_text() == second.read_text() == '<mujoco/>'


# ------------------------------------------------------------------------ plans
def test_plan_round_trip_and_pending(tmp_path):
    run_id, run_dir = new_run_dir(tmp_path)
    plan = CalibrationPlan(run_id, 'live', str(builtin_model_path()), str(GAINS), str(SPACE), [FINGERS],
                           {'budget': 5, 'workers': 1}, {'settle_time': 3.0},
                           [PlanEntry('curl_all', 'bags/curl_all', f'{TRAJECTORIES}:curl_all'),
                            PlanEntry('stagger', 'bags/stagger', f'{TRAJECTORIES}:stagger', holdout=True)])
    plan.write(run_dir)
    again = CalibrationPlan.read(run_dir)
    assert again == plan and again.cluster == ''
    on_ray = CalibrationPlan(**{**vars(plan), 'cluster': 'ray://head:10001'})   # the node's cluster parameter
    on_ray.write(run_dir)
    assert CalibrationPlan.read(run_dir).cluster == 'ray://head:10001'
    plan.write(run_dir)
    assert [e.name for e in again.pending(run_dir)] == ['curl_all', 'stagger']
    assert unfinished_runs(tmp_path) == [run_dir]
    (run_dir / RESULT).write_text('{}')
    assert unfinished_runs(tmp_path) == []
    assert new_run_dir(tmp_path)[1] != run_dir


def test_plan_errors(tmp_path):
    base = dict(run_id='r', mode='live', model_path='m', gains_file='g', space_file='s', objective_joints=[FINGERS],
                settings={}, alignment={})
    with pytest.raises(ConfigError, match='at least one recording that is not held out'):
        CalibrationPlan(**base, entries=[PlanEntry('a', 'a', holdout=True)])
    with pytest.raises(ConfigError, match='unique'):
        CalibrationPlan(**base, entries=[PlanEntry('a', 'a'), PlanEntry('a', 'b')])
    with pytest.raises(ConfigError, match="plan mode must be"):
        CalibrationPlan(**{**base, 'mode': 'sideways'}, entries=[PlanEntry('a', 'a')])
    with pytest.raises(ConfigError, match='budget, workers'):
        CalibrationPlan(**{**base, 'settings': {'budget': 0}}, entries=[PlanEntry('a', 'a')])
    with pytest.raises(ConfigError, match="--cluster 'nowhere': use ray://HOST:PORT"):
        CalibrationPlan(**base, entries=[PlanEntry('a', 'a')], cluster='nowhere')
    with pytest.raises(ConfigError, match='does not exist'):
        CalibrationPlan.read(tmp_path)
    (tmp_path / 'plan.yaml').write_text(yaml.safe_dump({'run_id': 'r'}))
    with pytest.raises(ConfigError, match='not a calibration plan'):
        CalibrationPlan.read(tmp_path)
    plan = CalibrationPlan(**base, entries=[PlanEntry('a', str(tmp_path / 'missing'))])
    with pytest.raises(RecordingError, match="recording 'a': bag .*missing does not exist"):
        plan.job_spec(tmp_path)


def test_holdout_names():
    assert holdout_names(['a', 'b', 'c'], 'auto') == ['c']
    assert holdout_names(['a'], 'auto') == []
    assert holdout_names(['a', 'b'], '') == []
    assert holdout_names(['a', 'b', 'c'], 'a, b') == ['a', 'b']
    with pytest.raises(ConfigError, match=r"holdout names \['x'\] are not among"):
        holdout_names(['a', 'b'], 'x')
    with pytest.raises(ConfigError, match='every recording is held out'):
        holdout_names(['a', 'b'], 'a,b')


def test_calibrated_controller_gains_are_published_for_the_bridge(bags, tmp_path):
    """Gains are not MJCF: a space with controller gains yields a gains YAML the bridge loads."""
    from shadow_twin.calibration.jobs.job import publish_gains
    space = tmp_path / 'space.yaml'
    space.write_text(yaml.safe_dump({'parameters': [
        {'name': 'FJ3_kp', 'actuators': ['rh_[FMRL]FJ3'], 'attribute': 'kp', 'bounds': [2.0, 8.0]},
        {'name': 'J3_damping', 'joints': ['rh_[FMRL]FJ3'], 'attribute': 'damping', 'bounds': [0.01, 0.5]}]}))
    job_spec = spec([RecordingSource('curl_all', bags['curl_all'])], budget=4)
    job_spec.space_file = space
    result = CalibrationJob(job_spec, tmp_path / 'run').run()
    kp = result.report['best_parameters']['FJ3_kp']
    gains_file = publish_gains(tmp_path / 'run' / 'parameters.yaml', tmp_path / 'models', builtin_model_path(), 'r1')
    assert gains_file.name == 'shadow_hand_e_gains_r1.yaml'
    gains = ControllerGains.from_yaml(gains_file)
    assert gains.for_joint('rh_MFJ3').p == pytest.approx(kp) and gains.for_joint('rh_FFJ4').p == pytest.approx(4.0)
    again = publish_gains(tmp_path / 'run' / 'parameters.yaml', tmp_path / 'models', gains_file, 'r1')
    assert again.name == 'shadow_hand_e_gains_r1.1.yaml'          # never over an earlier file
    # a space without gains: nothing to publish
    plain = CalibrationJob(spec([RecordingSource('curl_all', bags['curl_all'])], budget=2), tmp_path / 'plain')
    plain.run()
    assert publish_gains(tmp_path / 'plain' / 'parameters.yaml', tmp_path / 'models', builtin_model_path(),
                         'r2') is None


def test_recorded_mse_is_the_live_error_as_recorded(bags):
    """The sim-vs-robot error of a bag as recorded (no simulation), over trajectory + settling."""
    from shadow_twin.calibration.jobs.job import recorded_mse
    source = RecordingSource('curl_all', bags['curl_all']).resolved()
    mse = recorded_mse(source, [FINGERS], 3.0)
    assert set(mse) == set(objective_joints_of([FINGERS], source.trajectory)) and min(mse.values()) > 0
    same = recorded_mse(RecordingSource('like_sim', bags['stagger_like_sim']).resolved(), [FINGERS], 3.0)
    assert max(same.values()) < 1e-12            # robot moved exactly like the sim
    with pytest.raises(RecordingError, match='the trajectory start is not known'):
        recorded_mse(RecordingSource('x', bags['curl_all']), [FINGERS], 3.0)
