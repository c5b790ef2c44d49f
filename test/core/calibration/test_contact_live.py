"""The contact protocol's runs planned for the robots (shadow_twin.calibration.contacts.live, no ROS; issue
37): on the cell with the protocol's fixture on the forearm, the arm joint that turns the palm about its x
axis from the shipped start pose is wrist 1 (shoulder lift and elbow are as parallel but farther), turned
the way that tilts the palm positively as a recording is read; its goal holds the run's rate; a start pose
that does not stand the hand upright, and a protocol without a live section, are one-line errors."""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
import pytest
import yaml
from scipy.spatial.transform import Rotation

from shadow_twin.calibration.contacts.bags import tilt_of
from shadow_twin.calibration.contacts.live import object_pose, plan_live_tilt, record_runs_on_robots, tilt_trajectory
from shadow_twin.calibration.contacts.protocol import ContactProtocol
from shadow_twin.common.errors import ConfigError
from shadow_twin.common.paths import config_path
from shadow_twin.model.cell.assembly import arm_joint_names, build_cell_spec
from shadow_twin.model.mock_models import write_hand_stand_in_mjcf
from shadow_twin.model.scene import SceneConfig, add_objects
from shadow_twin.simulation.live.simulation import LiveSimulation

PROTOCOL = ContactProtocol.from_yaml(config_path('calibration', 'contact_protocol.yaml'))
ARM = list(arm_joint_names())


@pytest.fixture(scope='module')
def cell() -> mujoco.MjModel:
    spec = build_cell_spec()
    add_objects(spec, SceneConfig.from_yaml(PROTOCOL.live.scene))
    return spec.compile()


def palm_tilt(model, pose: dict[str, float]) -> float:
    """rad: the palm's tilt about its x axis in ``pose``, as a recording's palm pose is read."""
    data = mujoco.MjData(model)
    for name, angle in pose.items():
        data.qpos[model.jnt_qposadr[model.joint(name).id]] = angle
    mujoco.mj_kinematics(model, data)
    w, x, y, z = data.xquat[model.body(PROTOCOL.palm).id]
    return float(tilt_of(Rotation.from_quat([[x, y, z, w]]), 'x')[0])


def test_wrist_1_turns_the_palm_the_way_the_protocol_tilts_it(cell):
    run = PROTOCOL.runs[1]
    plan = plan_live_tilt(cell, PROTOCOL, run, ARM)
    assert plan.joint == 'wrist_1_joint' and plan.alignment == pytest.approx(1.0, abs=1e-6)
    assert abs(palm_tilt(cell, plan.start)) < np.radians(1.0)
    turned = dict(plan.start, wrist_1_joint=plan.start['wrist_1_joint'] + plan.sign * 0.3)
    assert palm_tilt(cell, turned) == pytest.approx(0.3, abs=1e-3)
    data = mujoco.MjData(cell)
    for name, angle in plan.start.items():
        data.qpos[cell.jnt_qposadr[cell.joint(name).id]] = angle
    mujoco.mj_kinematics(cell, data)
    forearm = cell.body('rh_forearm').id            # the can on its plate: 0.31 m up the upright forearm
    assert plan.object_pose[:3] - data.xpos[forearm] == pytest.approx(
        data.xmat[forearm].reshape(3, 3) @ np.array([0.005, -0.075, 0.31]), abs=1e-9)
    assert np.array_equal(object_pose(cell, data, PROTOCOL.live.scene, 'can'), plan.object_pose)


def test_a_tilt_goal_holds_the_runs_rate(cell):
    run = PROTOCOL.runs[1]
    plan = plan_live_tilt(cell, PROTOCOL, run, ARM)
    goal = tilt_trajectory(plan, run)
    k = goal.joint_names.index('wrist_1_joint')
    angles = np.array(goal.positions)[:, k] - plan.start['wrist_1_joint']
    times = np.array(goal.times)
    steady = (times > 0.5) & (times <= run.duration + 1e-9)
    assert np.diff(angles[steady]) / np.diff(times[steady]) == pytest.approx(plan.sign * run.rate)
    assert goal.duration == pytest.approx(run.duration + 0.2) and goal.velocities[-1][k] == 0.0   # it ends at rest
    assert angles[-1] == pytest.approx(plan.sign * run.rate * run.duration)
    others = [j for j in range(len(goal.joint_names)) if j != k]
    assert np.all(np.array(goal.positions)[:, others] == [plan.start[goal.joint_names[j]] for j in others])


def test_a_start_that_does_not_stand_the_hand_upright_and_a_protocol_without_live_are_refused(cell):
    tipped = dataclasses.replace(PROTOCOL, live=dataclasses.replace(PROTOCOL.live, arm_start={**PROTOCOL.live.arm_start,
                                                                                              'wrist_2_joint': 0.0}))
    with pytest.raises(ConfigError, match="off the palm's -z axis"):
        plan_live_tilt(cell, tipped, PROTOCOL.runs[0], ARM)
    with pytest.raises(ConfigError, match='no live section'):
        plan_live_tilt(cell, dataclasses.replace(PROTOCOL, live=None), PROTOCOL.runs[0], ARM)
    with pytest.raises(ConfigError, match="no joint 'elbow'"):
        plan_live_tilt(cell, PROTOCOL, PROTOCOL.runs[0], [*ARM, 'elbow'])


def test_the_park_is_read_and_a_bad_one_is_one_line(tmp_path):
    assert PROTOCOL.live.park == (2.0, 0.0, 0.1)
    data = yaml.safe_load(config_path('calibration', 'contact_protocol.yaml').read_text())
    body = data['contact_protocol']
    body['scene'] = str(config_path('scene_hand.yaml'))
    body['live']['scene'] = str(PROTOCOL.live.scene)
    for bad in ([2.0, 0.0], 'far', [2.0, 'x', 0.1]):
        body['live']['park'] = bad
        path = tmp_path / 'protocol.yaml'
        path.write_text(yaml.safe_dump(data))
        with pytest.raises(ConfigError, match=r'live\.park'):
            ContactProtocol.from_yaml(path)
    del body['live']['park']
    path.write_text(yaml.safe_dump(data))
    assert ContactProtocol.from_yaml(path).live.park is None


@pytest.mark.parametrize('friction', [1.0, 0.2])
def test_a_slow_grip_run_whose_palm_starts_tilted_back_is_replayed_in_full(tmp_path, friction):
    """The shipped slow grip run (8 s of holding, then 6 deg/s for 7 s) replayed on the robots' model, the can
    as the scene has it and with a fifth of its friction (the fit's lower bound): the grip and the can's weight
    bend the wrist back (1.5 and 2.6 deg), so the tilt passes the reading's start later; the replay goes on
    that much longer (with the slippery can it ended 0.1 s short of the run, a RecordingError, in a fit)."""
    model = write_hand_stand_in_mjcf(None, tmp_path / 'robots.xml')
    sim = LiveSimulation(model, gains=config_path('controllers', 'cell.yaml'),
                         scene=SceneConfig.from_yaml(PROTOCOL.live.scene).scaled(friction=friction))
    run = next(r for r in PROTOCOL.runs if r.name == 'tilt_grip_slow')
    record, = record_runs_on_robots(sim, PROTOCOL, [run], {run.name: plan_live_tilt(sim.model, PROTOCOL, run, ARM)})
    assert record.times[-1] == pytest.approx(run.duration)
    assert record.tilt[0] > 0.0 and record.tilt[-1] == pytest.approx(run.rate * run.duration, rel=0.05)
