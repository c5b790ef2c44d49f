"""The preview model's base at rest on its wheels (shadow_twin.simulation.preview.base_rest, no ROS; issue
37): a standing cell previewed from its odometry pose stays where it stands (no drop or rocking at the
start that reaches the arm and what the hand holds), the pose's x, y and yaw are the start's, a hand
without a base is left as it is, and the model the caller passed is not changed."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from shadow_twin.common.paths import config_path
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.cell.assembly import build_cell_spec
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.simulation.mobile_base import SimMobileBase
from shadow_twin.simulation.offline import TrajectorySimulator
from shadow_twin.simulation.preview.base_rest import base_passive_joints, rest_base
from shadow_twin.simulation.preview.goal import PreviewGoal, StartState
from shadow_twin.simulation.preview.predictor import GoalPredictor

GAINS = config_path('controllers', 'cell.yaml')
ARM = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint']


@pytest.fixture(scope='module')
def cell():
    return GoalPredictor(build_cell_spec(), ControllerGains.from_yaml(GAINS))


def base_heights(model: mujoco.MjModel, controller: SimController, seconds: float) -> np.ndarray:
    """(N,) m: the base's height through ``seconds`` of holding still from ``model``'s reference pose."""
    base = SimMobileBase.find(model)
    sim = TrajectorySimulator(model, controller, None, seconds)
    data = mujoco.MjData(model)
    adr = int(model.jnt_qposadr[base.free_joint])
    out = []
    mujoco.mj_setState(model, data, sim.initial_state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    for row in sim.control(model):
        data.ctrl[:] = row
        mujoco.mj_step(model, data)
        out.append(data.qpos[adr + 2])
    return np.array(out)


def test_a_standing_base_previewed_from_its_reference_pose_stays_where_it_rests(cell):
    plain = build_cell_spec().compile()
    controller = SimController(plain, ControllerGains.from_yaml(GAINS))
    dropped = base_heights(plain, controller, 0.3)
    rested = base_heights(cell.model, cell.controller, 0.3)
    assert np.ptp(dropped) > 1e-4                    # from the MJCF's level pose the base drops and rocks
    assert np.ptp(rested) < 0.1 * np.ptp(dropped)    # at rest it stays
    base = SimMobileBase.find(cell.model)
    adr = int(cell.model.jnt_qposadr[base.free_joint])
    assert cell.model.qpos0[adr + 2] < 0.0 and abs(cell.model.qpos0[adr + 5]) > 1e-4   # lower, pitched
    assert plain.qpos0[adr + 2] == 0.0                                                 # the caller's spec kept


def test_the_start_pose_places_x_y_and_yaw_and_keeps_the_rest(cell):
    traj = JointTrajectory(ARM, [0.5], [[0.0, -1.57, 0.0]])
    goal = PreviewGoal(traj, start=StartState(positions=dict(zip(ARM, [0.0, -1.57, 0.0])),
                                              base_pose=(1.5, -0.5, 0.7)))
    run = cell.predict(goal)
    base = SimMobileBase.find(cell.model)
    data = mujoco.MjData(cell.model)
    mujoco.mj_setState(cell.model, data, run.final_state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    odometry = base.odometry(data)
    assert odometry.pose.x == pytest.approx(1.5, abs=2e-3) and odometry.pose.y == pytest.approx(-0.5, abs=2e-3)
    assert odometry.pose.yaw == pytest.approx(0.7, abs=2e-3)
    rest = cell.model.qpos0[int(cell.model.jnt_qposadr[base.free_joint]) + 2]
    assert float(odometry.position[2]) == pytest.approx(rest, abs=1e-4)   # the arm's pose moves its load a little


def test_a_hand_has_no_base_to_rest_and_the_cells_passive_joints_are_its_casters(cell):
    hand = TwinModel(None).spec.compile()
    reference = hand.qpos0.copy()
    assert rest_base(hand, SimController(hand, ControllerGains.from_yaml(config_path('controllers', 'shadow_hand_e.yaml')))) is False
    assert np.array_equal(hand.qpos0, reference)
    base = SimMobileBase.find(cell.model)
    passive = base_passive_joints(cell.model, base, cell.controller)
    names = [cell.model.joint(j).name for j in passive]
    assert names and all('caster' in n or 'suspension' in n for n in names), names
    assert not set(passive) & set(int(i) for i in cell.controller.joint_ids)
