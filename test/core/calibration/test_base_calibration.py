"""Base calibration core (no ROS): geom friction and velocity gains as parameters, base recordings
in bags, and the study's pose objective with a calibration that recovers a perturbed base. The
offline replay of velocity commands (the live simulation's wheel law): test_base_replay.py."""

from __future__ import annotations


import numpy as np
import pytest

from shadow_twin.calibration.engine.run import Calibration, CalibrationSettings
from shadow_twin.calibration.recordings.base_recording import (ODOMETRY, POSE_STAMPED, TWIST_STAMPED, BaseRecording,
                                                               base_recording_messages, read_base_recording,
                                                               write_base_recording)
from shadow_twin.calibration.recordings.frame import FrameCalibration
from shadow_twin.calibration.recordings.recording import typestore, write_serialized_bag
from shadow_twin.calibration.scoring.base_evaluation import COORDINATES, BaseEvaluator, BaseObjectiveSettings
from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.common.errors import ModelError, RecordingError
from shadow_twin.common.paths import config_path
from shadow_twin.common.stamps import to_nanoseconds, to_sec_nanosec
from shadow_twin.control.controller import SimController
from shadow_twin.model.calibratable import ParameterTarget, apply_parameters, get_parameter
from shadow_twin.model.mjcf import TwinModel, builtin_model_path, write_calibrated_mjcf
from shadow_twin.simulation.mobile_base import TwistCommands
from shadow_twin.simulation.offline import TrajectorySimulator
from support import base_cell

cell_file, cell = base_cell.cell_file, base_cell.cell        # fixtures


BASE_SPACE = config_path('calibration', 'mir250_base.yaml')
CELL_GAINS = config_path('controllers', 'cell.yaml')
FRICTION = ParameterTarget('geom', 'left_wheel_contact', 'friction')
KV = ParameterTarget('actuator', 'left_wheel_joint', 'kv')


def drive_commands() -> TwistCommands:
    """8 s at 50 Hz: a hard start to 1 m/s straight, an arc at 0.8 m/s and 0.8 rad/s, a stop."""
    t = np.arange(0.0, 8.0, 0.02)
    v = np.where(t < 3, 1.0, np.where(t < 6, 0.8, 0.0))
    omega = np.where((t >= 3) & (t < 6), 0.8, 0.0)
    return TwistCommands(t, np.column_stack([v, omega]))


def recorded_drive(twin, controller, values: dict, every: int = 10) -> BaseRecording:
    """A "real" recording: the commands replayed on the model with ``values`` set; poses every
    ``every`` steps (50 Hz at the 2 ms step), as odometry would give them."""
    commands = drive_commands()
    sim = TrajectorySimulator(twin.model, controller, None, 9.0, base_commands=commands,
                              settle_time=BaseObjectiveSettings().settle_time, hold_at_rest_command=True)
    model = sim.model_copies(1)[0]
    apply_parameters(model, values)
    _, poses = sim.run_base([model])
    return BaseRecording(commands.times, commands.twists, sim.times[::every], poses[0][::every], '/odom', 'synthetic')


# ------------------------------------------------------------------------- model parameters
def test_geom_friction_and_velocity_gain_are_parameters_written_into_the_calibrated_mjcf(tmp_path):
    twin = TwinModel(builtin_model_path('mir250'))
    model = twin.model
    assert get_parameter(model, FRICTION) == pytest.approx(0.5)            # mir250.xml's wheel friction
    assert get_parameter(model, KV) == pytest.approx(310.0)
    apply_parameters(model, {FRICTION: 0.37, KV: 222.0})
    aid = model.actuator('left_wheel_joint').id
    assert model.geom_friction[model.geom('left_wheel_contact').id, 0] == pytest.approx(0.37)
    assert (model.actuator_gainprm[aid, 0], model.actuator_biasprm[aid, 2]) == pytest.approx((222.0, -222.0))
    written = TwinModel(write_calibrated_mjcf(TwinModel(builtin_model_path('mir250')), {FRICTION: 0.37, KV: 222.0},
                                              tmp_path / 'mir250_calibrated.xml'))
    assert get_parameter(written.model, FRICTION) == pytest.approx(0.37)
    assert get_parameter(written.model, KV) == pytest.approx(222.0)
    right = ParameterTarget('geom', 'right_wheel_contact', 'friction')
    assert get_parameter(written.model, right) == pytest.approx(0.5)       # only the named geom changed
    with pytest.raises(ModelError, match='kv must be positive'):
        apply_parameters(model, {KV: 0.0})
    with pytest.raises(ModelError, match='unknown geom attribute'):
        twin.target('geom', 'left_wheel_contact', 'damping')


def test_the_base_search_space_resolves_on_the_cell_with_the_model_inside_its_bounds(cell):
    twin, _ = cell
    space = SearchSpace.from_yaml(BASE_SPACE, twin)
    assert space.names == ['wheel_friction', 'caster_wheel_friction', 'wheel_armature', 'wheel_kv', 'wheel_ki',
                           'caster_pivot_damping', 'caster_pivot_frictionloss']
    for dim in space.dimensions:
        if dim.log and dim.default == 0:        # frictionless pivots: a log scale starts just above 0
            assert dim.low <= 1e-3, dim.name
        else:
            assert dim.low <= dim.default <= dim.high, dim.name
    caster = space.dimensions[space.names.index('caster_wheel_friction')]
    assert sorted(t.name for t in caster.targets) == sorted(f'{c}_caster_wheel_contact' for c in ('fl', 'fr', 'bl', 'br'))


def test_base_commands_need_a_model_with_a_base():
    twin = TwinModel()
    controller = SimController(twin.model)
    with pytest.raises(ModelError, match='without a mobile base'):
        TrajectorySimulator(twin.model, controller, None, 1.0, base_commands=drive_commands())


# --------------------------------------------------------------------------- recordings
def test_a_base_recording_round_trips_through_a_bag_and_bad_bags_are_named(tmp_path, cell):
    twin, controller = cell
    recording = recorded_drive(twin, controller, {})
    bag = write_base_recording(tmp_path / 'drive', recording)
    back = read_base_recording(bag)
    assert back.pose_topic == '/odom' and len(back.pose_times) == len(recording.pose_times)
    assert np.allclose(back.poses, recording.poses, atol=1e-9)
    assert np.allclose(back.commands, recording.commands) and np.allclose(back.command_times, recording.command_times)
    with pytest.raises(RecordingError, match='exists'):
        write_base_recording(bag, recording)                              # never overwritten
    # a bag with commands but neither odometry nor a pose topic
    only_commands = [m for m in base_recording_messages(recording) if m[0] == '/cmd_vel']
    bare = write_serialized_bag(tmp_path / 'bare', {'/cmd_vel': TWIST_STAMPED}, only_commands)
    with pytest.raises(RecordingError, match='needs odometry .*nav_msgs/Odometry.* or a pose topic'):
        read_base_recording(bare)
    # a path that never moves
    still = BaseRecording(recording.command_times, np.zeros_like(recording.commands), recording.pose_times,
                          np.tile(recording.poses[0], (len(recording.pose_times), 1)), '/odom', 'still')
    still_bag = write_base_recording(tmp_path / 'still', still)
    with pytest.raises(RecordingError, match='never moves'):
        read_base_recording(still_bag)


def test_base_recording_rejects_malformed_arrays():
    t = np.arange(5.0)
    with pytest.raises(RecordingError, match='no velocity command'):
        BaseRecording(np.zeros(0), np.zeros((0, 2)), t, np.zeros((5, 3)))
    with pytest.raises(RecordingError, match='pose times must increase'):
        BaseRecording(t, np.zeros((5, 2)), t[::-1], np.zeros((5, 3)))
    with pytest.raises(RecordingError, match='non-finite'):
        BaseRecording(t, np.full((5, 2), np.nan), t, np.zeros((5, 3)))


# --------------------------------------------------------------------- objective, calibration
def test_the_objective_is_the_studys_pose_error_and_residuals_match_it(cell):
    twin, controller = cell
    truth = {t: 0.3 for t in SearchSpace.from_yaml(BASE_SPACE, twin).subset(['wheel_friction']).dimensions[0].targets}
    evaluator = BaseEvaluator(twin, controller, recorded_drive(twin, controller, truth),
                              BaseObjectiveSettings(yaw_weight=2.0))
    nominal, true = evaluator.evaluate([{}, truth], nthread=2)
    assert set(nominal.per_joint_mse) == set(COORDINATES)
    assert nominal.objective == pytest.approx(nominal.per_joint_mse['base_x'] + nominal.per_joint_mse['base_y']
                                              + 2.0 * nominal.per_joint_mse['base_yaw'])
    assert nominal.objective > 1e-4                                       # the slip shows
    assert true.objective < 1e-3 * nominal.objective                      # the truth replays the recording
    scores, residuals = evaluator.evaluate_scored_residuals([{}], nthread=1)
    assert np.sum(residuals[0] ** 2) == pytest.approx(scores[0].objective, rel=1e-9)
    rmse = evaluator.path_rmse(evaluator.simulate([{}])[0])
    assert rmse['base_x'] == pytest.approx(np.sqrt(nominal.per_joint_mse['base_x']))


def test_calibration_recovers_a_perturbed_wheel_friction(cell, tmp_path):
    """The wheels of the "real" base grip less (0.3 instead of 0.5): Bayesian optimisation finds it
    from the recorded path and the error falls by more than 80 %. (Least squares alone cannot
    start: at the nominal friction the wheels hardly slip and the objective is flat; and slip makes
    the objective kinked, where a local method stalls.)"""
    twin, controller = cell
    space = SearchSpace.from_yaml(BASE_SPACE, twin).subset(['wheel_friction'])
    truth = space.values([0.3])
    evaluator = BaseEvaluator(twin, controller, recorded_drive(twin, controller, truth))
    result = Calibration(evaluator, space, CalibrationSettings(optimizer='bo', budget=20, workers=2),
                         tmp_path).run()
    assert result.best.objective < 0.2 * result.initial.objective
    assert result.best.x[0] == pytest.approx(0.3, abs=0.03)


def test_a_motion_capture_pose_topic_is_read_in_the_calibrated_floor_frame(tmp_path, cell):
    """Poses on a PoseStamped topic, in a capture system whose floor frame is turned 0.7 rad and
    shifted: read with the frame from three recorded points, the path is the one driven; the
    pose topic takes precedence over odometry."""
    twin, controller = cell
    recording = recorded_drive(twin, controller, {}, every=25)
    turn, shift = 0.7, np.array([1.5, -2.0, 0.05])
    rotation = np.array([[np.cos(turn), -np.sin(turn), 0], [np.sin(turn), np.cos(turn), 0], [0, 0, 1]])
    frame = FrameCalibration.from_points(shift, shift + rotation @ [1, 0, 0], shift + rotation @ [0, 1, 0])
    store = typestore()
    t = store.types
    messages = [m for m in base_recording_messages(recording) if m[0] == '/cmd_vel']
    for time_s, (x, y, yaw) in zip(recording.pose_times, recording.poses):
        p = shift + rotation @ [x, y, 0.3]
        sec, nanosec = to_sec_nanosec(time_s)
        msg = t[POSE_STAMPED](
            header=t['std_msgs/msg/Header'](stamp=t['builtin_interfaces/msg/Time'](sec=sec, nanosec=nanosec),
                                            frame_id='mocap'),
            pose=t['geometry_msgs/msg/Pose'](
                position=t['geometry_msgs/msg/Point'](x=p[0], y=p[1], z=p[2]),
                orientation=t['geometry_msgs/msg/Quaternion'](x=0.0, y=0.0, z=float(np.sin((yaw + turn) / 2)),
                                                              w=float(np.cos((yaw + turn) / 2)))))
        messages.append(('/mocap/base', to_nanoseconds(time_s), bytes(store.serialize_cdr(msg, POSE_STAMPED))))
    messages += [m for m in base_recording_messages(recording) if m[0] == '/odom']
    bag = write_serialized_bag(tmp_path / 'mocap', {'/cmd_vel': TWIST_STAMPED, '/mocap/base': POSE_STAMPED,
                                                   '/odom': ODOMETRY}, sorted(messages, key=lambda m: m[1]))
    back = read_base_recording(bag, frame=frame)
    assert back.pose_topic == '/mocap/base'
    assert np.allclose(back.poses, recording.poses, atol=1e-9)
    raw = read_base_recording(bag)                                    # without the frame: capture coordinates
    assert not np.allclose(raw.poses, recording.poses, atol=1e-3)
    assert np.allclose(raw.relative_poses(), recording.relative_poses(), atol=1e-9)   # same path, other frame
