"""Base calibration core (no ROS): geom friction and velocity gains as parameters, the offline
replay of velocity commands (the live simulation's wheel law), base recordings in bags, and the
study's pose objective with a calibration that recovers a perturbed base."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from shadow_twin.calibration.scoring.base_evaluation import COORDINATES, BaseEvaluator, BaseObjectiveSettings
from shadow_twin.calibration.recordings.base_recording import (ODOMETRY, POSE_STAMPED, TWIST_STAMPED, BaseRecording,
                                                               base_recording_messages, read_base_recording,
                                                               write_base_recording)
from shadow_twin.calibration.recordings.frame import FrameCalibration
from shadow_twin.calibration.jobs.motions import ArmMotion, BaseMotion
from shadow_twin.calibration.jobs.protocol import CellProtocol
from shadow_twin.calibration.recordings.recording import JointStateRecording, typestore, write_serialized_bag
from shadow_twin.calibration.engine.run import Calibration, CalibrationSettings
from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.common.errors import ModelError, RecordingError
from shadow_twin.common.paths import config_path
from shadow_twin.common.stamps import to_nanoseconds, to_sec_nanosec
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.cell.assembly import UR5_JOINTS, CellConfig, write_cell_mjcf
from shadow_twin.model.calibratable import ParameterTarget, apply_parameters, get_parameter
from shadow_twin.model.mjcf import TwinModel, builtin_model_path, write_calibrated_mjcf
from shadow_twin.simulation.live.simulation import LiveSimulation
from shadow_twin.simulation.mobile_base import TwistCommands
from shadow_twin.simulation.offline import TrajectorySimulator

BASE_SPACE = config_path('calibration', 'mir250_base.yaml')
CELL_GAINS = config_path('controllers', 'cell.yaml')
FRICTION = ParameterTarget('geom', 'left_wheel_contact', 'friction')
KV = ParameterTarget('actuator', 'left_wheel_joint', 'kv')


@pytest.fixture(scope='module')
def cell_file(tmp_path_factory) -> Path:
    """The built-in cell's MJCF, written once per module (a file: nothing can change it)."""
    path, _ = write_cell_mjcf(None, tmp_path_factory.mktemp('cell') / 'cell.xml')
    return path


@pytest.fixture
def cell(cell_file):
    """(twin, controller) of the built-in cell, loaded anew for each test (~10 ms): model
    parameters are set in place and a SimController converts the motors of the model it is
    given, so a module-wide model would carry one test's changes into the next."""
    twin = TwinModel(cell_file)
    return twin, SimController(twin.model, ControllerGains.from_yaml(CELL_GAINS))


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


# ------------------------------------------------------------------- offline replay = live
def test_offline_replay_of_velocity_commands_moves_the_base_as_the_live_simulation(cell):
    """The same commands, given to LiveSimulation.command_base at their times while it steps, and
    replayed by TrajectorySimulator: the same wheel law, the same path (one implementation)."""
    twin, _ = cell
    live = LiveSimulation(twin.path, gains=CELL_GAINS)
    commands = TwistCommands(np.arange(0.0, 2.0, 0.02), np.tile([0.6, 0.5], (100, 1)))
    offline = TrajectorySimulator(live.model, live.controller, None, 2.5, base_commands=commands)
    _, poses = offline.run_base([offline.model_copies(1)[0]])
    k, path = 0, []
    for n in range(offline.nstep):
        while k < len(commands.times) and commands.times[k] <= live.time + 1e-12:
            live.command_base(*commands.twists[k])
            k += 1
        live.step(1)
        odom = live.base_odometry()
        path.append((odom.pose.x, odom.pose.y, odom.pose.yaw))
    path = np.array(path)
    path[:, 2] = np.unwrap(path[:, 2])
    assert np.max(np.abs(path - poses[0])) < 1e-9
    assert path[-1, 0] > 0.5 and path[-1, 2] > 0.5                       # it drove and turned


def test_with_a_command_latency_late_deliveries_move_the_base_as_the_replay_of_their_stamps(tmp_path):
    """Commands delivered 0-50 ms after their stamps, to a live simulation stepping in uneven
    ticks (2-20 steps, as a loaded machine runs them): with a 0.1 s latency in the model the
    path equals the replay of the stamps; without one it does not (why the latency exists)."""
    rng = np.random.default_rng(7)
    commands = TwistCommands(np.arange(0.0, 2.0, 0.02), np.column_stack([np.linspace(0.2, 1.2, 100),
                                                                          np.linspace(0.8, -0.4, 100)]))
    arrivals = commands.times + rng.uniform(0.0, 0.05, len(commands.times))
    ticks = rng.integers(2, 21, 200)
    gaps = {}
    for latency in (0.1, 0.0):
        config = CellConfig.from_dict({'cell': {'base': {'command_latency': latency, 'wheel_torque_limit': 20}}})
        path, _ = write_cell_mjcf(config, tmp_path / f'cell_{latency:g}.xml')
        live = LiveSimulation(path, gains=CELL_GAINS)
        offline = TrajectorySimulator(live.model, live.controller, None, 2.5, base_commands=commands)
        _, poses = offline.run_base([offline.model_copies(1)[0]])
        k, steps, gap = 0, 0, 0.0
        for n in ticks:
            n = min(int(n), offline.nstep - steps)
            if n <= 0:
                break
            while k < len(arrivals) and arrivals[k] <= live.time + 1e-12:
                live.command_base(*commands.twists[k], sent=commands.times[k])
                k += 1
            live.step(n)
            steps += n
            odom = live.base_odometry()
            gap = max(gap, float(np.hypot(odom.pose.x - poses[0][steps - 1, 0], odom.pose.y - poses[0][steps - 1, 1])))
        gaps[latency] = gap
        assert steps == offline.nstep and poses[0][-1, 0] > 0.5          # it drove the whole replay
    assert gaps[0.1] < 1e-9
    assert gaps[0.0] > 1e-3


def caster_angles(model, state: np.ndarray) -> np.ndarray:
    """(4,) caster pivot angles (rad, wrapped to [-pi, pi)) of a full physics state."""
    qpos = state[1:1 + model.nq]
    angles = [qpos[model.joint(f'{c}_caster_rotation_joint').qposadr[0]] for c in ('fl', 'fr', 'bl', 'br')]
    return np.mod(np.array(angles) + np.pi, 2 * np.pi) - np.pi


def after(first: TwistCommands, then: TwistCommands, gap: float = 0.8) -> TwistCommands:
    """``first``, then ``gap`` s at rest, then ``then`` (its times shifted)."""
    shift = first.times[-1] + gap
    return TwistCommands(np.concatenate([first.times, then.times + shift]), np.vstack([first.twists, then.twists]))


def steady(v: float, omega: float, seconds: float) -> TwistCommands:
    """``seconds`` of one twist at 50 Hz, then a zero command."""
    t = np.arange(0.0, seconds + 0.02, 0.02)
    return TwistCommands(t, np.column_stack([np.where(t < seconds, v, 0.0), np.where(t < seconds, omega, 0.0)]))


def test_the_protocols_lead_in_leaves_the_casters_trailing_whatever_their_start(cell):
    """Turns on the spot (casters across the base) and a drive backwards (casters leading), then
    the shipped protocol's lead-in, the arm at its rest pose: every caster ends within 1 deg of
    trailing (angle 0 in the model), so the replay's start no longer depends on how the previous
    run ended (sideways or leading casters change a slipping base's path by up to 18 cm over a
    protocol run). A slower lead-in (0.3 m/s) leaves a rear caster several degrees off."""
    twin, controller = cell
    model = twin.model
    protocol = CellProtocol.from_yaml(None)
    lead_in = protocol.lead_in_commands()
    slow = replace(protocol, lead_in=BaseMotion(speed=0.3, accel=0.5, cruise=1.5)).lead_in_commands()
    starts = {'turned left': steady(0.0, 0.8, 2.0), 'turned right': steady(0.0, -0.8, 2.0),
              'backwards': steady(-0.3, 0.0, 2.0), 'arc backwards': steady(-0.3, 0.4, 3.0)}
    slow_worst = 0.0
    for name, disturbance in starts.items():
        kwargs = dict(initial_positions=protocol.rest_pose, settle_time=0.5)
        across = TrajectorySimulator(model, controller, None, 0.1, base_lead_in=disturbance, **kwargs)
        aligned = TrajectorySimulator(model, controller, None, 0.1, base_lead_in=after(disturbance, lead_in), **kwargs)
        assert np.max(np.abs(caster_angles(model, across.initial_state))) > 1.0, name      # a caster across
        assert np.all(np.abs(caster_angles(model, aligned.initial_state)) < np.radians(1.0)), \
            (name, np.degrees(caster_angles(model, aligned.initial_state)))
        moved = aligned.initial_base_pose[:2] - across.initial_base_pose[:2]
        assert np.hypot(*moved) == pytest.approx(protocol.lead_in.speed * (protocol.lead_in.cruise + protocol.lead_in.speed
                                                                           / protocol.lead_in.accel), abs=0.05)
        assert np.abs(aligned.initial_state[1 + model.nq:1 + model.nq + model.nv]).max() < 0.05     # at rest again
        behind_slow = TrajectorySimulator(model, controller, None, 0.1, base_lead_in=after(disturbance, slow), **kwargs)
        slow_worst = max(slow_worst, np.max(np.abs(caster_angles(model, behind_slow.initial_state))))
    assert slow_worst > np.radians(5.0)
    turn_only = starts['turned left']
    with pytest.raises(ValueError, match='settle_time'):
        TrajectorySimulator(model, controller, None, 0.1, base_lead_in=turn_only)
    hand = TwinModel()
    with pytest.raises(ModelError, match='without a mobile base'):
        TrajectorySimulator(hand.model, SimController(hand.model), None, 0.1, settle_time=0.1, base_lead_in=turn_only)


ARM = UR5_JOINTS


def test_the_settling_rest_can_hold_the_command_that_rests_at_the_initial_positions(cell):
    """The UR5's servos rest below their command under gravity: holding the initial positions
    as the command leaves the arm milliradians below them; the rest command brings it back within
    a microradian and stays on the joints the trajectory does not name (the arm stays there
    while the shoulder pan swings); the pan holds its start positions until its stamped start."""
    twin, controller = cell
    rest = CellProtocol.from_yaml(None).rest_pose
    columns = [controller.joint_names.index(j) for j in ARM]
    target = np.array([rest[j] for j in ARM])
    times = np.linspace(0.1, 1.0, 10)
    pan = JointTrajectory(['shoulder_pan_joint'], times, (0.3 * np.sin(np.pi * times))[:, None])
    plain = TrajectorySimulator(twin.model, controller, pan, 1.5, initial_positions=rest, settle_time=0.5,
                                time_offset=-0.3)
    held = TrajectorySimulator(twin.model, controller, pan, 1.5, initial_positions=rest, settle_time=0.5,
                               time_offset=-0.3, hold_at_rest_command=True)
    assert np.max(np.abs(plain.start_positions[columns] - target)) > 5e-4        # sagged under gravity
    assert np.max(np.abs(held.start_positions[columns] - target)) < 1e-5
    static_error = held.hold_positions[columns] - target
    assert 5e-4 < np.max(np.abs(static_error)) < 0.02
    others = columns[1:]
    assert np.allclose(held.desired_positions[:, others], held.hold_positions[others])
    waiting = held.times - held.dt < 0.0                                          # before the stamped start
    assert waiting.sum() == pytest.approx(0.3 / held.dt, abs=1)
    assert np.allclose(held.desired_positions[waiting, columns[0]], held.start_positions[columns[0]])
    positions = held.run([twin.model])[0]
    assert np.ptp(positions[:, columns[0]]) > 0.25                                # the pan swung
    assert np.max(np.abs(positions[waiting][:, others] - target[1:])) < 1e-4     # the rest stayed put
    assert np.max(np.abs(plain.run([twin.model])[0][waiting][:, others] - target[1:])) > 5e-4
    with pytest.raises(ValueError, match='hold_at_rest_command'):
        TrajectorySimulator(twin.model, controller, pan, 1.0, initial_positions=rest, hold_at_rest_command=True)


def test_a_base_run_recorded_on_the_live_simulation_is_replayed_within_a_millimetre(cell):
    """The live simulation (the bridge's) plays the real cell of run IY: the arm held at the rest
    pose by its trajectory controller, the protocol's lead-in, then the shoulder pan's swing on its
    stamped start while the base drives straight at 1 m/s on steep ramps (the wheels slip). The
    calibration's replay of that recording with the same model follows its path within a
    millimetre: the replay's arm rests under the command the live arm rested under (holding the
    recorded, sagged positions instead jolted the base at the first swing: 16 mm RMS in y on a
    stand-in's recording)."""
    twin, controller = cell
    protocol = CellProtocol.from_yaml(None)
    run = next(r for r in protocol.runs if r.name == 'IY')
    rest, goal = protocol.rest_pose, run.goal(protocol.rest_pose)
    live = LiveSimulation(twin.path, CELL_GAINS)
    live.set_trajectory(ArmMotion().trajectory_for(rest, 2.0))
    live.step(int(3.0 / live.dt))
    lead_in = protocol.lead_in_commands()
    begin = live.time
    for t, (v, omega) in zip(lead_in.times, lead_in.twists):
        live.command_base(v, omega, sent=begin + t)
        live.step_to(begin + t + 0.02)
    live.step(int(1.0 / live.dt))
    first = live.time                                       # the first command of the run
    command_times = np.arange(0.0, run.base.duration + 0.3, 0.02)
    commands = run.base.twist(command_times)
    arm_start = first + 0.4                                 # the arm's stamped start, after the first command
    live.set_trajectory(goal.arm, start_time=arm_start)
    arm_times, arm_positions, pose_times, poses, k = [], [], [], [], 0
    for step in range(int((command_times[-1] + 1.5) / live.dt)):
        while k < len(command_times) and first + command_times[k] <= live.time + 1e-9:
            live.command_base(*commands[k], sent=first + command_times[k])
            k += 1
        if step % 4 == 0:
            arm_times.append(live.time)
            arm_positions.append(live.positions(list(ARM)))
        if step % 10 == 0:
            pose_times.append(live.time)
            poses.append(live.base_odometry().pose)
        live.step(1)
    poses = np.array(poses, dtype=float)
    poses[:, 2] = np.unwrap(poses[:, 2])
    recording = BaseRecording(first + command_times, commands, np.array(pose_times), poses, '/odom', 'live')
    arm = JointStateRecording.from_arrays(arm_times, list(ARM), np.array(arm_positions), source='live')
    at_first = dict(zip(ARM, arm.values(list(ARM))[0]))
    evaluator = BaseEvaluator(twin, controller, recording, BaseObjectiveSettings(lead_in=lead_in), goal.arm, arm_start,
                              at_first, arm_recording=arm, arm_joints=list(ARM))
    paths, arms = evaluator.simulate_with_arm([{}], 1)
    assert np.ptp(evaluator.real[:, 0]) > 5.0 and np.ptp(np.array(arm_positions)[:, 0]) > 1.0     # it drove and swung
    error = evaluator.path_rmse(paths[0])
    assert error["base_x"] < 1e-3 and error["base_y"] < 1e-3 and error["base_yaw"] < 1e-3, error
    assert max(evaluator.arm_mse(arms[0]).values()) < 1e-8                # 0.1 mrad RMS


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
