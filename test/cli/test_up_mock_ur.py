"""The mock UR5 of ``shadow-twin up --cell --mock-hardware`` carries the hand (issue 33 item 9):
``up`` writes the cell reduced to the UR5's joints beside the cell MJCF and gives it to ``mock_ur``
as its model, after config/mock_ur.yaml (which keeps bare ur5.xml for the mock UR alone). Its
joint torques holding any pose are the cell's (the effort watch's model), not bare ur5.xml's, and
the mock's own effects (config/mock_ur.yaml ``overrides``) still apply to its joints."""

from __future__ import annotations

import shutil

import mujoco
import numpy as np
import pytest
import yaml

from shadow_twin.cli import up
from shadow_twin.common.paths import config_path
from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.model.mjcf import resolve_model_path
from shadow_twin.simulation.effort import InverseDynamics
from shadow_twin.simulation.overrides import ParameterOverrides

UR5 = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint', 'wrist_2_joint', 'wrist_3_joint']


def mock_ur_parameters() -> dict:
    return yaml.safe_load(config_path('mock_ur.yaml').read_text())['/**/mock_ur']['ros__parameters']


@pytest.fixture(scope='module')
def cell_folder():
    """What ``up --cell`` writes (config/cell.yaml), removed after the module."""
    cell = up.write_cell_model(None)
    yield cell
    shutil.rmtree(cell.parent)


def test_the_cells_mock_ur_runs_the_arm_stand_in_written_beside_the_cell(cell_folder):
    nodes = up.node_commands(up.build_parser().parse_args(['--cell', '--mock-hardware']), [], cell_folder)
    command = nodes['mock_ur']
    model = cell_folder.parent / up.MOCK_UR_MODEL
    assert model.is_file()
    override = f'model_path:={model}'
    assert override in command
    # after the params file: ROS applies the later value
    assert command.index('--params-file') < command.index(override)
    # the mock UR alone (no cell) keeps the bare arm of its params file
    assert mock_ur_parameters()['model_path'] == 'package://shadow_twin/models/ur5.xml'


def test_the_stand_in_holds_the_hand_as_the_cell_does_and_bare_ur5_does_not(cell_folder):
    stand_in = mujoco.MjModel.from_xml_path(str(cell_folder.parent / up.MOCK_UR_MODEL))
    cell = mujoco.MjModel.from_xml_path(str(cell_folder))
    bare = mujoco.MjModel.from_xml_path(str(resolve_model_path('package://shadow_twin/models/ur5.xml')))
    assert stand_in.njnt == 6 and [stand_in.actuator(k).name for k in range(stand_in.nu)] == UR5
    rng = np.random.default_rng(9)
    q = rng.uniform(-1.5, 1.5, (20, 6))
    qd, qdd = rng.uniform(-1, 1, (20, 6)), rng.uniform(-3, 3, (20, 6))
    held = {name: InverseDynamics(m, UR5).torques(q, qd, qdd) for name, m in
            (('stand_in', stand_in), ('cell', cell), ('bare', bare))}     # N m, the hand at qpos0 in the cell
    np.testing.assert_allclose(held['stand_in'], held['cell'], atol=1e-6)
    # the hand (3.79 kg, 0.14 m out from the flange) is a large share of the shoulder lift's load
    lift = UR5.index('shoulder_lift_joint')
    assert np.abs(held['cell'][:, lift] - held['bare'][:, lift]).max() > 10.0


def test_the_mock_ur_yaml_effects_still_set_the_stand_in_apart_from_the_model(cell_folder):
    stand_in = mujoco.MjModel.from_xml_path(str(cell_folder.parent / up.MOCK_UR_MODEL))
    dofs = [stand_in.joint(j).dofadr[0] for j in UR5]
    before = stand_in.dof_damping[dofs].copy(), stand_in.dof_frictionloss[dofs].copy()
    changes = ParameterOverrides.from_yaml_text(mock_ur_parameters()['overrides']).apply(
        stand_in, UR5, JointNameMap())
    assert {label.rsplit('.', 1)[0] for label, _, _ in changes} == set(UR5)
    np.testing.assert_allclose(stand_in.dof_damping[dofs], 3 * before[0])
    np.testing.assert_allclose(stand_in.dof_frictionloss[dofs], 2 * before[1])
    assert (before[0] > 0).all() and (before[1] > 0).all()
