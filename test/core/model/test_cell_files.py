"""Writing the cell models (shadow_twin/model/cell/assembly.py, mock_models.py) and
``shadow-twin model --cell`` (shadow_twin/cli/model.py): the written cell compiles on its own, the
arm's stand-in (the cell with only the UR5's joints) is built and moves like the cell, Shadow's
mesh hand can be mounted, and bad hands, configs and command lines are refused with their reason.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest
from support.poses import body_pose, pose_error

from shadow_twin.cli import model as model_cli
from shadow_twin.common.errors import ConfigError, ModelError
from shadow_twin.common.paths import config_path
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.control.trajectory import load_waypoint_yaml
from shadow_twin.model.cell.assembly import (CellConfig, arm_joint_names, build_cell_spec, compile_cell,
                                             write_cell_mjcf)
from shadow_twin.model.mjcf import TwinModel, builtin_model_path
from shadow_twin.model.mock_models import write_arm_stand_in_mjcf
from shadow_twin.simulation.live.simulation import LiveSimulation
from shadow_twin.simulation.offline import TrajectorySimulator


REPO = Path(__file__).resolve().parents[3]
SHADOW_HAND = REPO.parent / 'shared' / 'reference' / 'sr_description_mujoco_models' / 'sr_hand_e_plus_environment.xml'
CELL_YAML = REPO / 'config' / 'cell.yaml'
UR5_GAINS = REPO / 'config' / 'controllers' / 'ur5.yaml'


# -- fixtures ------------------------------------------------------------------------------------
@pytest.fixture(scope='module')
def cell_model():
    """The default cell (built-in hand, arm prefix '') compiled."""
    return compile_cell(build_cell_spec())


# -- writing the cell and the command line -------------------------------------------------------
def test_written_cell_compiles_on_its_own_from_a_temporary_directory(tmp_path, monkeypatch, cell_model):
    out = tmp_path / 'out' / 'cell.xml'
    path, model = write_cell_mjcf(CellConfig.from_yaml(CELL_YAML), out)
    assert path == out and model.nu == cell_model.nu == 30
    monkeypatch.chdir(tmp_path)
    loaded = mujoco.MjModel.from_xml_path(str(out))
    assert (loaded.nbody, loaded.njnt, loaded.nu, loaded.ntendon) == (model.nbody, model.njnt, model.nu, 4)
    np.testing.assert_allclose(loaded.dof_damping, cell_model.dof_damping)
    np.testing.assert_allclose(loaded.body_mass, cell_model.body_mass)
    with pytest.raises(ConfigError, match='exists'):
        write_cell_mjcf(None, out)
    write_cell_mjcf(None, out, force=True)


def test_arm_stand_in_keeps_the_six_arm_joints_and_the_cells_bodies(tmp_path, cell_model):
    """The stand-in is the cell with only the UR5's joints and actuators (named as in the cell, with
    or without an arm prefix): the same bodies, masses and options, the base where the cell's starts,
    and it loads with the UR's gains as the mock UR's bridge loads it."""
    path = write_arm_stand_in_mjcf(CELL_YAML, tmp_path / 'out' / 'ur5_with_hand.xml')
    twin = TwinModel(path)
    model = twin.model
    assert path.is_file() and twin.joint_names == arm_joint_names()
    assert [model.actuator(i).name for i in range(model.nu)] == arm_joint_names()
    assert model.ntendon == model.neq == model.nkey == model.nsensor == 0
    assert model.body_subtreemass[0] == pytest.approx(cell_model.body_subtreemass[0], rel=1e-12)
    cell_bodies = {cell_model.body(i).name: cell_model.body_mass[i] for i in range(cell_model.nbody)}
    assert {model.body(i).name: model.body_mass[i] for i in range(model.nbody)} == pytest.approx(cell_bodies)
    assert (model.opt.timestep, model.opt.integrator, model.opt.cone, model.opt.impratio) == (
        cell_model.opt.timestep, cell_model.opt.integrator, cell_model.opt.cone, cell_model.opt.impratio)
    poses = []
    for m in (model, cell_model):   # both at qpos0: the stand-in's base and hand where the cell's start
        data = mujoco.MjData(m)
        mujoco.mj_kinematics(m, data)
        poses.append({name: body_pose(m, data, name) for name in ('base_link', 'rh_palm', 'rh_ffdistal',
                                                                  'rh_thdistal')})
    for name, pose in poses[0].items():
        assert pose_error(pose, poses[1][name]) == pytest.approx((0.0, 0.0), abs=1e-7), name
    controller = SimController(model, ControllerGains.from_yaml(UR5_GAINS))
    assert controller.joint_names == arm_joint_names()
    prefixed = mujoco.MjModel.from_xml_path(str(write_arm_stand_in_mjcf(None, tmp_path / 'ra.xml', arm_prefix='ra_')))
    assert [prefixed.joint(i).name for i in range(prefixed.njnt)] == arm_joint_names('ra_')
    with pytest.raises(ConfigError, match='is a directory'):
        write_arm_stand_in_mjcf(None, tmp_path)


def test_arm_stand_in_moves_like_the_cell_and_the_bare_arm_does_not(tmp_path):
    """A fast shoulder-lift sweep (config/trajectories/ur5.yaml) simulated offline: the stand-in with
    the UR's gains against the cell with its own (config/controllers/cell.yaml), and bare ur5.xml (no
    hand) likewise. Measured RMS differences from the cell's six arm joint positions: stand-in 2.0e-5
    rad, bare arm 3.9e-4 rad (19x; 14x to 48x over the pan, elbow, wrist 1 and slow sweeps). What is
    left is the cell's base rocking on its wheels and the hand's joints giving a little."""
    trajectory = load_waypoint_yaml(config_path('trajectories', 'ur5.yaml'), 'shoulder_lift_sweep_fast', prefix='')
    rest = dict(zip(trajectory.joint_names, trajectory.positions[0]))

    def arm_positions(path, gains) -> np.ndarray:
        twin = TwinModel(path)
        controller = SimController(twin.model, ControllerGains.from_yaml(gains))
        sim = TrajectorySimulator(twin.model, controller, trajectory, trajectory.duration + 0.5, rest)
        columns = [controller.joint_names.index(j) for j in arm_joint_names()]
        return sim.run([twin.model])[0][:, columns]

    cell, _ = write_cell_mjcf(None, tmp_path / 'cell.xml')
    full = arm_positions(cell, config_path('controllers', 'cell.yaml'))
    stand_in = arm_positions(write_arm_stand_in_mjcf(None, tmp_path / 'stand_in.xml', gravity_compensation=False),
                             UR5_GAINS)
    bare = arm_positions(builtin_model_path('ur5'), UR5_GAINS)
    rms = {name: float(np.sqrt(np.mean((q - full) ** 2))) for name, q in (('stand-in', stand_in), ('bare', bare))}
    assert rms['stand-in'] * 5 <= rms['bare'] and rms['stand-in'] < 1e-4, rms


def test_the_mock_ur5s_servos_compensate_gravity_and_hold_their_setpoint(tmp_path):
    """The mock UR5's stand-in (gravity compensation on, the default) holds the arm at its setpoint with
    the hand on the flange, as the real UR's controller does; the model's PD alone stands below it (the
    shoulder lift by about 1 mrad). The compensating torque is the servo's: it is in the joints' effort."""
    def held(path) -> tuple[np.ndarray, np.ndarray]:
        sim = LiveSimulation(path, gains=UR5_GAINS)
        sim.step(500)
        state = sim.joint_state()
        columns = [state.names.index(j) for j in arm_joint_names()]
        return np.abs(state.position[columns] - sim.reference()[2]), state.effort[columns]
    sag, effort = held(write_arm_stand_in_mjcf(None, tmp_path / 'compensated.xml'))
    pd_sag, pd_effort = held(write_arm_stand_in_mjcf(None, tmp_path / 'pd.xml', gravity_compensation=False))
    lift = arm_joint_names().index('shoulder_lift_joint')
    assert pd_sag[lift] > 5e-4 and sag.max() < 2e-5, (sag, pd_sag)
    assert effort[lift] == pytest.approx(pd_effort[lift], rel=0.05) and abs(effort[lift]) > 50.0   # N m


def test_cell_with_shadows_mesh_hand_writes_a_standalone_file(tmp_path, monkeypatch):
    if not SHADOW_HAND.is_file():
        pytest.skip(f'{SHADOW_HAND} is not available (needs ../shared beside the repository)')
    out = tmp_path / 'shadow_cell.xml'
    _, model = write_cell_mjcf(None, out, hand_path=SHADOW_HAND, arm_prefix='ra_')
    monkeypatch.chdir(tmp_path)
    loaded = mujoco.MjModel.from_xml_path(out.name)
    assert loaded.nmesh > 0 and loaded.nexclude > 0
    names = {loaded.joint(i).name for i in range(loaded.njnt)}
    assert 'rh_FFJ1' in names and 'ra_wrist_3_joint' in names


def test_bad_hand_and_config_are_named():
    with pytest.raises(ModelError, match='not found'):
        build_cell_spec(hand_path='/nonexistent/hand.xml')
    with pytest.raises(ModelError, match='no body named'):
        build_cell_spec(hand_path=builtin_model_path('ur5'))
    with pytest.raises(ConfigError, match=r"cell\.base: unknown key\(s\) \['mas'\]"):
        CellConfig.from_dict({'cell': {'base': {'mas': 90}}})
    with pytest.raises(ConfigError, match=r'cell\.cabinet\.size'):
        CellConfig.from_dict({'cell': {'cabinet': {'size': [0.5, 0.4]}}})
    with pytest.raises(ConfigError, match=r'cell\.arm\.prefix'):
        CellConfig.from_dict({'cell': {'arm': {'prefix': 'r a'}}})
    assert CellConfig.from_yaml(CELL_YAML) == CellConfig()  # the YAML holds the defaults


def test_cli_writes_the_cell_and_refuses_bad_input_with_exit_2(tmp_path, capsys):
    out = tmp_path / 'cell.xml'
    assert model_cli.main(['--cell', '--config', str(CELL_YAML), '--arm-prefix', 'ra_', '--out', str(out)]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f'wrote {out}:') and '30 actuators' in line and 'kg' in line
    assert mujoco.MjModel.from_xml_path(str(out)).joint('ra_shoulder_pan_joint').id > 0
    before = out.read_bytes()

    assert model_cli.main(['--cell', '--out', str(out)]) == 2  # exists
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'exists' in err[0] and '--force' in err[0]
    assert out.read_bytes() == before

    assert model_cli.main(['--cell', '--hand', str(tmp_path / 'missing.xml'), '--out', str(tmp_path / 'b.xml')]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'missing.xml' in err[0]
    assert not (tmp_path / 'b.xml').exists()

    assert model_cli.main(['--cell', '--out', str(out), '--force']) == 0
    assert mujoco.MjModel.from_xml_path(str(out)).joint('shoulder_pan_joint').id > 0


def test_cli_writes_the_cell_with_a_scenes_objects(tmp_path, capsys):
    from shadow_twin.model.scene import SceneConfig, object_names
    scene = CELL_YAML.parent / 'scene.yaml'
    out = tmp_path / 'cell.xml'
    assert model_cli.main(['--cell', '--scene', str(scene), '--out', str(out)]) == 0
    names = SceneConfig.from_yaml(scene).names
    assert capsys.readouterr().out.strip().endswith(f'objects: {", ".join(names)}')
    assert object_names(mujoco.MjModel.from_xml_path(str(out))) == names       # the file holds them, findable
    bad = tmp_path / 'bad.yaml'
    bad.write_text('scene: {objects: [{name: can, shape: box, size: [0.1, 0.1], mass: 1}]}\n')
    assert model_cli.main(['--cell', '--scene', str(bad), '--out', str(tmp_path / 'b.xml')]) == 2
    assert 'size' in capsys.readouterr().err and not (tmp_path / 'b.xml').exists()
    assert model_cli.main(['--arm', 'ur5', '--scene', str(scene), '--out', str(tmp_path / 'c.xml')]) == 2
