"""Calibrating the UR5 arm of the cell offline, from recordings.

* ``config/trajectories/ur5.yaml``: every trajectory loads, names only the cell's arm (and hand)
  joints, starts and ends at one rest pose, stays inside the joint ranges and below the UR5's
  pi rad/s, and, simulated in the cell, touches nothing (contacts of the arm and the hand with the
  floor, the base, the cabinet and the arm's own base enabled for the check), follows its setpoints
  within 10 mrad and stays within the UR5's effort limits;
* ``config/calibration/ur5_arm.yaml`` and ``ur5_arm_dynamics.yaml`` resolve against the cell (also
  with the arm prefix ``ra_``) and hold the model's values inside their bounds;
* recovery: a "real" arm whose damping and friction differ from the model's by known factors is
  recorded by simulating a calibration trajectory in the cell (``ParameterOverrides``, as the mock
  hardware does); least squares over the default arm space on the nominal cell lowers the error
  (in the library by over 80 %; through ``shadow-twin calibrate`` on a bag, aligned by the motion
  onset, by over half and over 80 % of the way to what the true values score) and moves the
  changed parameters toward their true values. An arm close to the nominal values is beyond the
  shared least squares (an expected failure, with the reason).
"""

from __future__ import annotations

import copy
import functools
import json
import logging
import math
import re
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest
import yaml

from shadow_twin.calibration.scoring.evaluation import Evaluator
from shadow_twin.calibration.scoring.placement import AlignmentSettings
from shadow_twin.calibration.recordings.recording import (JOINT_STATE, TRAJECTORY, JointStateRecording,
                                                          joint_state_messages, trajectory_cdr, write_serialized_bag)
from shadow_twin.calibration.engine.run import Calibration, CalibrationSettings
from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.control.trajectory import JointTrajectory, load_waypoint_yaml
from shadow_twin.model.cell.assembly import UR5_JOINTS, arm_joint_names, write_cell_mjcf
from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.model.calibratable import get_parameter
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.simulation.live.simulation import ParameterOverrides
from shadow_twin.simulation.offline import FULL_STATE, TrajectorySimulator

REPO = Path(__file__).resolve().parents[3]
TRAJECTORIES = REPO / 'config' / 'trajectories' / 'ur5.yaml'
ARM_SPACE = REPO / 'config' / 'calibration' / 'ur5_arm.yaml'
DYNAMICS_SPACE = REPO / 'config' / 'calibration' / 'ur5_arm_dynamics.yaml'
CELL_GAINS = REPO / 'config' / 'controllers' / 'cell.yaml'
UR5_GAINS = REPO / 'config' / 'controllers' / 'ur5.yaml'

#: The UR5's joint speed limit, rad/s, and effort limits, N m (ur5.xml [LIM]: joint_limits.yaml).
SPEED_LIMIT = math.pi
EFFORT_LIMITS = dict(zip(UR5_JOINTS, (150.0, 150.0, 150.0, 28.0, 28.0, 28.0)))
SECTIONS = ('arm_trajectories', 'arm_and_hand_trajectories')
ALL_TRAJECTORIES = [name for section in SECTIONS
                    for name in (yaml.safe_load(TRAJECTORIES.read_text()).get(section) or {})]
SETTLE = 0.5                     # s simulated and compared after a trajectory ends
START = 100.0                    # s, trajectory start on the synthetic recordings' clock
PRE_ROLL = 1.5                   # s of rest recorded before it
TAIL = 1.5                       # s recorded after the trajectory's end
RATE = 125.0                     # Hz, ur_robot_driver's joint state rate (CB3)
#: Link bodies of the arm near its mount, and those beyond the elbow, in the cell (arm prefix '').
ARM_BASE_BODIES = ('ur5_base_link', 'shoulder_link', 'upper_arm_link')
ARM_DISTAL_BODIES = ('forearm_link', 'wrist_1_link', 'wrist_2_link', 'wrist_3_link')
#: What the arm must stay clear of: the floor, the MiR250's chassis and drive wheels, the cabinet.
SURROUNDINGS = ('floor', 'chassis', 'left_wheel_contact', 'right_wheel_contact', 'cabinet_box')
CLEARANCE = 0.05                 # m, the least distance of forearm, wrists and hand to the surroundings
#: Known "real" arms: ParameterOverrides rules (the mock hardware's form) and the dimensions of
#: ur5_arm_dynamics.yaml they set, at ur5.xml's 0.1 N m s/rad and 0.1 N m times the factor.
REAL_LIBRARY = ({'*shoulder_pan_joint': {'damping': 'x25'}, '*shoulder_lift_joint': {'damping': 'x25'},
                 '*elbow_joint': {'damping': 'x25'}, '*wrist_?_joint': {'frictionloss': 'x10'}},
                {'large_damping': 2.5, 'wrist_frictionloss': 1.0})
#: The brief's smaller example: damping x2.5 on the large joints, friction loss x0.4 on the wrists.
REAL_SMALL = ({'*shoulder_pan_joint': {'damping': 'x2.5'}, '*shoulder_lift_joint': {'damping': 'x2.5'},
               '*elbow_joint': {'damping': 'x2.5'}, '*wrist_?_joint': {'frictionloss': 'x0.4'}},
              {'large_damping': 0.25, 'wrist_frictionloss': 0.04})
RECOVERY_TRAJECTORY = 'reach_and_grasp'
RECOVERY_BUDGET = 30
log = logging.getLogger(__name__)


# -- fixtures and helpers ------------------------------------------------------------------------
@pytest.fixture(scope='module')
def cell_file(tmp_path_factory) -> Path:
    """The default cell (built-in hand, arm prefix '') as an MJCF file, as `shadow-twin model --cell` writes it."""
    path, _ = write_cell_mjcf(None, tmp_path_factory.mktemp('cell') / 'cell.xml')
    return path


def load_cell(path: Path) -> tuple[TwinModel, SimController]:
    """The cell model and its simulated controller with config/controllers/cell.yaml (which converts the
    model's motors into the PD servos, so actuator kp/kd are the gains)."""
    twin = TwinModel(path)
    return twin, SimController(twin.model, ControllerGains.from_yaml(CELL_GAINS))


@pytest.fixture(scope='module')
def cell(cell_file) -> tuple[TwinModel, SimController]:
    return load_cell(cell_file)


@functools.lru_cache(maxsize=None)
def trajectory(name: str) -> JointTrajectory:
    """Trajectory ``name`` of config/trajectories/ur5.yaml (read once; not to be modified)."""
    return load_waypoint_yaml(TRAJECTORIES, name)


def rest_state(name: str) -> dict[str, float]:
    """{joint: rad} of the trajectory's first waypoint (the rest pose, where it starts)."""
    traj = trajectory(name)
    return dict(zip(traj.joint_names, traj.positions[0]))


def geoms_of(model: mujoco.MjModel, bodies) -> list[int]:
    return [g for g in range(model.ngeom) if model.body(model.geom_bodyid[g]).name in bodies]


def hand_geoms(model: mujoco.MjModel) -> list[int]:
    return [g for g in range(model.ngeom) if model.body(model.geom_bodyid[g]).name.startswith('rh_')]


def checking_model(model: mujoco.MjModel) -> mujoco.MjModel:
    """``model`` with the collisions the cell leaves out on purpose switched on, to detect them:
    arm and hand against the base's chassis and drive wheels and the cabinet (collision bit 4),
    wrists and hand against the arm's mount, shoulder and upper arm (bit 8). Arm and hand already
    collide with the floor. Without such a contact the motion is the cell's own."""
    moving = geoms_of(model, ('upper_arm_link',) + ARM_DISTAL_BODIES) + hand_geoms(model)
    distal = geoms_of(model, ARM_DISTAL_BODIES[1:]) + hand_geoms(model)
    model.geom_contype[moving] |= 4
    model.geom_conaffinity[[model.geom(name).id for name in SURROUNDINGS[1:]]] |= 4
    model.geom_contype[distal] |= 8
    model.geom_conaffinity[geoms_of(model, ARM_BASE_BODIES)] |= 8
    for g in range(model.ngeom):  # the broad phase filters by the bodies' masks: the OR of their geoms'
        model.body_contype[model.geom_bodyid[g]] |= model.geom_contype[g]
        model.body_conaffinity[model.geom_bodyid[g]] |= model.geom_conaffinity[g]
    return model


def moving_average(values: np.ndarray, samples: int) -> np.ndarray:
    kernel = np.ones(samples) / samples
    return np.stack([np.convolve(values[:, k], kernel, mode='valid') for k in range(values.shape[1])], axis=1)


def real_arm(twin: TwinModel, sim: TrajectorySimulator, rules: dict) -> mujoco.MjModel:
    """A copy of the simulator's model with the "real" arm's physics (``ParameterOverrides`` rules)."""
    model = sim.model_copies(1)[0]
    ParameterOverrides(rules).apply(model, twin.joint_names, JointNameMap())
    return model


def record(twin: TwinModel, controller: SimController, name: str, rules: dict,
           joints: list[str] | None = None) -> JointStateRecording:
    """The "real" arm (``rules``) following trajectory ``name``, its joint states at ``RATE`` on the
    recording clock: ``PRE_ROLL`` s at the rest pose, the trajectory started at ``START`` from there
    (as the offline simulation starts: from rest, every joint at its recorded or its model position),
    ``TAIL`` s after its end; of ``joints`` (default: every simulated joint, arm and hand merged as the
    twin merges the UR's and the hand's joint states)."""
    traj = trajectory(name)
    sim = TrajectorySimulator(twin.model, controller, traj, traj.duration + TAIL, rest_state(name))
    stride = int(round(1.0 / (RATE * sim.dt)))
    positions = sim.run([real_arm(twin, sim, rules)])[0][stride - 1::stride]
    times = START + sim.times[stride - 1::stride]
    rest_times = START - PRE_ROLL + np.arange(int(round(PRE_ROLL * RATE))) / RATE
    positions = np.vstack([np.repeat(sim.start_positions[None], rest_times.size, axis=0), positions])
    joints = controller.joint_names if joints is None else joints
    columns = [controller.joint_names.index(j) for j in joints]
    return JointStateRecording.from_arrays(np.concatenate([rest_times, times]), joints, positions[:, columns],
                                           source=f'real arm, {name}')


def moved_toward(found: float, truth: float, nominal: float) -> float:
    """Fraction of the way (in log scale) from ``nominal`` to ``truth`` that ``found`` covers (1: at the truth)."""
    return 1.0 - abs(math.log(found / truth)) / abs(math.log(nominal / truth))


# -- the trajectories ----------------------------------------------------------------------------
def test_trajectories_load_name_the_cell_joints_and_respect_ranges_and_speed(cell):
    """Every trajectory loads, names the six arm joints in ur_robot_driver's order (and, in the
    combined section, the hand's joints after them), starts and ends at the common rest pose, stays
    inside every joint's range and below pi rad/s (sampled as the joint trajectory controller does),
    each sweep moves its joint alone both ways, the fast ones near the speed limit."""
    twin, controller = cell
    model = twin.model
    data = yaml.safe_load(TRAJECTORIES.read_text())
    assert data['arm_joints_order'] == list(UR5_JOINTS)  # ur_robot_driver's names, without a prefix
    arm = arm_joint_names()
    hand = [j for j in controller.joint_names if j.startswith('rh_')]
    sweeps, combined = data['arm_trajectories'], data['arm_and_hand_trajectories']
    for joint in UR5_JOINTS:
        assert {f'{joint[:-len("_joint")]}_sweep_{speed}' for speed in ('slow', 'fast')} <= set(sweeps)
    assert combined and set(sweeps) | set(combined) == set(ALL_TRAJECTORIES)
    rest = np.array(list(rest_state(ALL_TRAJECTORIES[0]).values())[:6])
    for name in ALL_TRAJECTORIES:
        traj = trajectory(name)
        if name in sweeps:
            assert traj.joint_names == arm
        else:
            assert traj.joint_names[:6] == arm and sorted(traj.joint_names[6:]) == sorted(hand)
        positions = traj.positions
        np.testing.assert_allclose(positions[0, :6], rest, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(positions[-1], positions[0], atol=1e-6, err_msg=name)
        for k, joint in enumerate(traj.joint_names):
            low, high = model.jnt_range[model.joint(joint).id]
            assert low <= positions[:, k].min() and positions[:, k].max() <= high, (name, joint)
        # sampled as the JTC does (position-only points: linear), from the rest pose it starts at
        times = np.arange(0.0, traj.duration + 0.01, 0.002)
        _, velocity, _ = traj.with_start(positions[0]).sample(times)
        peak = np.abs(velocity[:, :6]).max(axis=0)
        assert peak.max() < SPEED_LIMIT, (name, peak)
        if name in sweeps:
            joint = next(j for j in UR5_JOINTS if name.startswith(j[:-len('_joint')] + '_sweep'))
            k = UR5_JOINTS.index(joint)
            others = [c for c in range(6) if c != k]
            assert np.ptp(positions[:, others], axis=0).max() < 1e-9, name   # the others hold
            assert positions[:, k].max() - rest[k] >= 0.8 and rest[k] - positions[:, k].min() >= 0.8, name
            if name.endswith('_fast'):
                assert peak[k] > 0.75 * SPEED_LIMIT, (name, peak[k])
            else:
                assert peak[k] <= 1.0, (name, peak[k])
        else:
            assert np.ptp(positions, axis=0)[:6].min() > 0.1, name        # every arm joint moves
            assert np.ptp(positions, axis=0)[6:].max() > 1.0, name        # and the hand closes


def robot_contacts(model: mujoco.MjModel, data: mujoco.MjData, robot: set[int]) -> set[tuple[str, str]]:
    """Geom name pairs of the contacts in ``data`` that involve a geom of ``robot``."""
    return {(model.geom(g1).name, model.geom(g2).name) for g1, g2 in zip(data.contact.geom1, data.contact.geom2)
            if g1 in robot or g2 in robot}


def robot_geoms(model: mujoco.MjModel) -> set[int]:
    """The arm's moving links' and the hand's geoms (the arm's mount is fixed to the cabinet)."""
    return set(geoms_of(model, ARM_BASE_BODIES[1:] + ARM_DISTAL_BODIES) + hand_geoms(model))


@pytest.mark.parametrize('offsets, partner', [
    ((0.0, 0.9, 1.2, 0.0, 0.0, 0.0), 'cabinet_box'),        # reached down and folded: the hand in the cabinet
    ((0.0, 2.0, 0.0, 0.0, 0.0, 0.0), 'chassis'),            # bent far forward: the hand on the base
    ((0.0, 0.0, 1.5, -1.0, 0.0, 0.0), 'upper_arm_tube')])   # elbow folded: the wrist against the upper arm
def test_the_collision_check_sees_the_arm_hit_the_cell(cell, offsets, partner):
    """Negative control of the check below: poses away from the rest pose that put the hand or the
    wrist into the cabinet, the base or the upper arm give contacts with them in the checking model
    (and none in the cell as it is, which leaves those collisions out)."""
    twin, _ = cell
    rest = list(rest_state(ALL_TRAJECTORIES[0]).values())[:6]
    found = {}
    for label, model in (('cell', twin.model), ('checking', checking_model(copy.copy(twin.model)))):
        data = mujoco.MjData(model)
        for joint, value, offset in zip(UR5_JOINTS, rest, offsets):
            data.qpos[model.joint(joint).qposadr[0]] = value + offset
        mujoco.mj_forward(model, data)
        found[label] = {name for pair in robot_contacts(model, data, robot_geoms(model)) for name in pair}
    assert partner in found['checking'] and partner not in found['cell'], found


@pytest.mark.parametrize('name', ALL_TRAJECTORIES)
def test_trajectory_runs_in_the_cell_touching_nothing(cell, name):
    """Simulated in the cell (cell.yaml gains, from the rest pose, plus SETTLE s): no contact of the
    arm or the hand with anything (floor, base, cabinet, the arm's mount), forearm, wrists and hand
    at least CLEARANCE from the surroundings, every arm joint within 10 mrad of its setpoint on the
    way and 1.5 mrad at the end, the arm's torques (50 ms means) within the UR5's effort limits, and
    the base still on the floor."""
    twin, controller = cell
    traj = trajectory(name)
    sim = TrajectorySimulator(twin.model, controller, traj, traj.duration + SETTLE, rest_state(name))
    model = checking_model(sim.model_copies(1)[0])
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, sim.initial_state, FULL_STATE)
    controls = sim.control(model)
    robot = robot_geoms(model)
    distal = geoms_of(model, ARM_DISTAL_BODIES) + hand_geoms(model)
    surroundings = [model.geom(g).id for g in SURROUNDINGS]
    qpos = [model.joint(j).qposadr[0] for j in UR5_JOINTS]
    dofs = [model.joint(j).dofadr[0] for j in UR5_JOINTS]
    positions, torques, touches = np.empty((sim.nstep, 6)), np.empty((sim.nstep, 6)), set()
    clearance = (np.inf, '')
    base_height = data.qpos[2]
    for k in range(sim.nstep):
        data.ctrl[:] = controls[k]
        mujoco.mj_step(model, data)
        positions[k], torques[k] = data.qpos[qpos], data.qfrc_actuator[dofs]
        touches |= robot_contacts(model, data, robot)
        if k % 25 == 0:  # every 50 ms
            for g in distal:
                for s in surroundings:
                    distance = mujoco.mj_geomDistance(model, data, g, s, 1.0, None)
                    if distance < clearance[0]:
                        clearance = (distance, f'{model.geom(g).name} - {model.geom(s).name} at {k * sim.dt:.2f} s')
    assert not touches, (name, sorted(touches))
    assert clearance[0] >= CLEARANCE, (name, clearance)
    desired = traj.with_start(traj.positions[0]).sample(sim.times)[0][:, :6]
    error = np.abs(positions - desired)
    assert error.max() < 0.010, (name, error.max(axis=0))
    assert error[-1].max() < 0.0015, (name, error[-1])
    mean_torque = np.abs(moving_average(torques, int(round(0.05 / sim.dt)))).max(axis=0)
    assert np.all(mean_torque <= [EFFORT_LIMITS[j] for j in UR5_JOINTS]), (name, mean_torque.round(1))
    assert abs(data.qpos[2] - base_height) < 0.005, name
    log.info('%s: clearance %.3f m (%s), tracking %.2f mrad, torque %s N m', name, clearance[0], clearance[1],
             1e3 * error.max(), mean_torque.round(1))


# -- the search spaces ---------------------------------------------------------------------------
@pytest.mark.parametrize('space_file, attributes', [
    (ARM_SPACE, {'joint': ('damping', 'frictionloss', 'armature'), 'actuator': ('kp', 'kd')}),
    (DYNAMICS_SPACE, {'joint': ('damping', 'frictionloss')})])
@pytest.mark.parametrize('prefix', ['', 'ra_'])
def test_arm_space_resolves_against_the_cell_and_holds_the_model_values(tmp_path, cell_file, space_file,
                                                                        attributes, prefix, caplog):
    """The space resolves against the cell converted by cell.yaml's controller (kp/kd are then the
    servo gains of ur5.yaml), with or without an arm prefix: it sets exactly the listed attributes
    of the six arm joints (and their actuators), every model value lies strictly inside its bounds
    with nothing clipped, and ranges over a decade or more are searched on a log scale."""
    path = cell_file if not prefix else write_cell_mjcf(None, tmp_path / 'cell_ra.xml', arm_prefix=prefix)[0]
    twin, _ = load_cell(path)
    with caplog.at_level(logging.WARNING, logger='shadow_twin.calibration.search.search_space'):
        space = SearchSpace.from_yaml(space_file, twin)
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    arm = arm_joint_names(prefix)
    expected = {(kind, joint, attribute) for kind, names in attributes.items() for joint in arm for attribute in names}
    found = [(t.kind, t.name, t.attribute) for d in space.dimensions for t in d.targets]
    assert sorted(found) == sorted(expected)
    gains = yaml.safe_load(UR5_GAINS.read_text())['controller']['gains']
    for dim in space.dimensions:
        for target in dim.targets:
            value = get_parameter(twin.model, target)
            assert dim.low < value < dim.high, (dim.name, target, value, dim.low, dim.high)
            if target.kind == 'actuator':  # the gains of config/controllers/ur5.yaml
                nominal = gains['*' + target.name[len(prefix):]]['p' if target.attribute == 'kp' else 'd']
                assert value == pytest.approx(nominal)
        assert dim.log or dim.high / dim.low < 10, dim.name


# -- recovery of known arm physics ---------------------------------------------------------------
def calibrate_in_library(cell, rules: dict, out: Path):
    """Least squares over ur5_arm_dynamics.yaml on the nominal cell, against the recording of the
    "real" arm ``rules`` following RECOVERY_TRAJECTORY (stamped start, as the calibration node
    records); returns (space, result)."""
    twin, controller = cell
    recording = record(twin, controller, RECOVERY_TRAJECTORY, rules)
    evaluator = Evaluator(twin, controller, recording, trajectory(RECOVERY_TRAJECTORY), arm_joint_names(),
                          settings=AlignmentSettings(settle_time=SETTLE), trajectory_start=START)
    space = SearchSpace.from_yaml(DYNAMICS_SPACE, twin)
    result = Calibration(evaluator, space, CalibrationSettings('lsq', RECOVERY_BUDGET, workers=2), out).run()
    return space, result


def test_least_squares_recovers_a_far_from_nominal_arm(cell, tmp_path):
    """The "real" arm has damping x25 on the large joints and friction loss x10 on the wrists (2.5
    N m s/rad, 1.0 N m: real drives lose far more than ur5.xml's placeholders). Least squares over
    the whole default space (4 dimensions) from the model's values lowers the error by over 80 %
    (measured 8.9e-8 -> 4.9e-10 rad^2, 99.4 %, 27 rollouts) and takes both changed parameters at least
    75 % of the (log) way to their true values (measured: damping 1.44 N m s/rad, 83 %; friction loss
    0.90 N m, 95 %; the unchanged ones end at 0.69 N m and 0.29 N m s/rad)."""
    rules, truth = REAL_LIBRARY
    space, result = calibrate_in_library(cell, rules, tmp_path / 'lsq')
    found = space.named(result.best.x)
    reduction = 1.0 - result.best.objective / result.initial.objective
    log.info('recovery: objective %.3g -> %.3g rad^2 (%.2f %% lower) in %d rollouts, %.1f s; found %s, true %s',
             result.initial.objective, result.best.objective, 100 * reduction, len(result.evaluations),
             result.wall_time, found, truth)
    assert result.initial.objective > 1e-9    # the "real" arm is measurably different
    assert reduction >= 0.8, (result.initial.objective, result.best.objective)
    for name, value in truth.items():
        assert moved_toward(found[name], value, 0.1) >= 0.75, (name, found[name], value)


def shadow_twin(*args: str) -> subprocess.CompletedProcess:
    """Run ``shadow-twin ARGS`` in a subprocess (``python -m shadow_twin.cli``) from the repository."""
    return subprocess.run([sys.executable, '-m', 'shadow_twin.cli', *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow  # two subprocesses, 11-16 s here
def test_cli_calibrates_the_arm_from_a_bag(cell, cell_file, tmp_path):
    """`shadow-twin calibrate` on a bag as the cell records it (/joint_states of arm and hand at 125 Hz
    with a rest before the motion, and the commanded trajectory stamped with its start; the command
    aligns by the motion onset) of the "real" arm of the library test. Exit 0; the printed and the
    reported objective lower by at least half (measured 1.05e-7 -> 1.67e-8 rad^2, 84 %, 27 rollouts);
    the calibration closes at least 80 % of the gap between the model's objective and that of the
    true values, scored by `shadow-twin evaluate --params` with the same alignment (measured 99.6 %).
    The true values do not score 0 there (1.6e-8 rad^2): the evaluator keeps the simulation it built
    at the start placed before the delay fit (onset - 1 s, 0.3 s late here) when the fit moves the
    start back, so the simulation starts from the state recorded 0.3 s after the real arm left the
    exact rest pose, sagged by up to 1 mrad under gravity, and the joints' friction keeps part of that.
    The changed parameters at least 75 % of the (log) way to their true values in parameters.yaml
    (measured 97 % and 95 %); a calibrated MJCF."""
    twin, controller = cell
    rules, truth = REAL_LIBRARY
    recording = record(twin, controller, RECOVERY_TRAJECTORY, rules)
    messages = joint_state_messages(recording)
    messages.append(('/calibration_node/commanded_trajectory', int((START - 0.5) * 1e9),
                     trajectory_cdr(trajectory(RECOVERY_TRAJECTORY), START)))
    bag = write_serialized_bag(tmp_path / 'real_arm', {recording.topic: JOINT_STATE,
                                                       '/calibration_node/commanded_trajectory': TRAJECTORY},
                               sorted(messages, key=lambda m: m[1]))
    inputs = ['--model', str(cell_file), '--gains', str(CELL_GAINS), '--bag', str(bag),
              '--trajectory', f'{TRAJECTORIES}:{RECOVERY_TRAJECTORY}', '--joints', ','.join(UR5_JOINTS),
              '--settle-time', str(SETTLE)]
    out = tmp_path / 'run'
    done = shadow_twin('calibrate', *inputs, '--space', str(DYNAMICS_SPACE), '--optimizer', 'lsq',
                       '--budget', str(RECOVERY_BUDGET), '--workers', '2', '--no-progress', '-q', '--out', str(out))
    assert done.returncode == 0, (done.stdout, done.stderr)
    printed = re.search(r'objective \(mean MSE over [^)]*\): \S+ -> \S+ rad\^2 \(([-\d.]+) % lower\)', done.stdout)
    assert printed and float(printed.group(1)) >= 50.0, done.stdout
    report = json.loads((out / 'report.json').read_text())
    initial, best = report['objective']['initial'], report['objective']['best']
    assert initial > 1e-9 and best <= 0.5 * initial, (initial, best)
    # the true values, scored by the same alignment
    space = SearchSpace.from_yaml(DYNAMICS_SPACE, twin)
    values = {f'{t.name}.{t.attribute}': truth[d.name] for d in space.dimensions if d.name in truth for t in d.targets}
    (tmp_path / 'truth.yaml').write_text(yaml.safe_dump({'values': values}))
    scored = shadow_twin('evaluate', *inputs, '--params', str(tmp_path / 'truth.yaml'), '--json', '-q')
    assert scored.returncode == 0, scored.stderr
    at_truth = json.loads(scored.stdout)['mean_mse']
    assert at_truth < initial and initial - best >= 0.8 * (initial - at_truth), (initial, best, at_truth)
    found = yaml.safe_load((out / 'parameters.yaml').read_text())['parameters']
    log.info('CLI: objective %.3g -> %.3g rad^2 (%.1f %% lower; the true values score %.3g) in %d rollouts, '
             '%.1f s; found %s, true %s', initial, best, 100 * (1 - best / initial), at_truth,
             report['evaluations'], report['wall_time_s'], found, truth)
    for name, value in truth.items():
        assert moved_toward(found[name], value, 0.1) >= 0.75, (name, found[name], value)
    assert (out / report['outputs']['calibrated_model']).is_file()
