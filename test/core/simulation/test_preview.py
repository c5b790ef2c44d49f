"""Tests of the goal preview core (shadow_twin.simulation.preview.predictor*, no ROS): each failure kind is
found on the hand and on the cell with its joint or pair, time and amount; good goals pass."""

from __future__ import annotations

import json
import math

import mujoco
import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.paths import config_path
from shadow_twin.control import jtc
from shadow_twin.control.base.trajectory import BaseTrajectory
from shadow_twin.control.controller import ControllerGains
from shadow_twin.control.trajectory import JointTrajectory, load_waypoint_yaml
from shadow_twin.model.cell.assembly import build_cell_spec
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.simulation.preview.goal import BasePart, PreviewGoal, StartState
from shadow_twin.simulation.preview.predictor import GoalPredictor
from shadow_twin.simulation.preview.checks import effort_limit_of, preview_goal
from shadow_twin.simulation.preview.config import PreviewConfig

CONFIG = PreviewConfig.from_yaml(config_path('preview.yaml'))


@pytest.fixture(scope='module')
def hand():
    return GoalPredictor(TwinModel(None).spec, ControllerGains.from_yaml(config_path('controllers', 'shadow_hand_e.yaml')),
                         CONFIG)


@pytest.fixture(scope='module')
def cell():
    return GoalPredictor(build_cell_spec(), ControllerGains.from_yaml(config_path('controllers', 'cell.yaml')), CONFIG)


def tolerances(joints, path=0.0, goal=0.05, goal_time=2.0, stopped=0.05):
    return jtc.Tolerances({j: jtc.StateTolerance(position=path) for j in joints},
                          {j: jtc.StateTolerance(position=goal) for j in joints}, goal_time, stopped)


def goal(targets: dict, seconds: float, tol=None, **kwargs) -> PreviewGoal:
    names = list(targets)
    traj = JointTrajectory(names, np.array([seconds]), np.array([list(targets.values())]))
    return PreviewGoal(traj, tol if tol is not None else tolerances(names), **kwargs)


# -- the hand -----------------------------------------------------------------------------------
def test_hand_good_goal_passes(hand):
    prediction = preview_goal(hand, goal({'rh_FFJ3': 1.0, 'rh_MFJ3': 0.8, 'rh_WRJ1': -0.3}, 2.0))
    assert prediction.ok, prediction.failures
    assert 2.0 <= prediction.duration < 3.0
    assert prediction.verdict().outcome is jtc.GoalOutcome.SUCCEEDED
    assert abs(prediction.final_errors['rh_FFJ3']) < 0.05
    assert set(prediction.joint_errors) == {'rh_FFJ3', 'rh_MFJ3', 'rh_WRJ1'}
    summary = json.loads(json.dumps(prediction.summary()))       # JSON-ready
    assert summary['ok'] and summary['first_failure'] is None and summary['predicted_duration'] >= 2.0


def test_finger_driven_into_its_limit(hand):
    prediction = preview_goal(hand, goal({'rh_FFJ3': 1.5708}, 0.1))
    first = prediction.first
    assert first.kind == 'position_limit' and first.subject == 'rh_FFJ3' and first.code == jtc.INVALID_GOAL
    assert 0.1 < first.time < 0.5 and first.amount > CONFIG.position_limit_margin
    assert "'rh_FFJ3'" in first.message and 'upper limit' in first.message and 't = ' in first.message
    assert prediction.verdict().code == jtc.INVALID_GOAL
    # the same target reached slowly stays inside the range
    assert preview_goal(hand, goal({'rh_FFJ3': 1.5}, 2.0)).ok
    # points inside the range whose spline overshoots it: the trajectory itself commands the stop
    spline = JointTrajectory(['rh_FFJ3'], np.array([0.5, 1.0]), np.array([[1.45], [1.5708]]), np.array([[3.0], [0.0]]))
    first = preview_goal(hand, PreviewGoal(spline, tolerances(['rh_FFJ3']))).first
    assert first.kind == 'position_limit' and 'the trajectory commands' in first.message and 0.5 < first.time < 1.0
    # the demo's calibration trajectories pass (slow_grasp's fast release meets the stop within the margin)
    for name in ('curl_all', 'stagger', 'slow_grasp'):
        trajectory = load_waypoint_yaml(config_path('trajectories', 'calibration.yaml'), name)
        assert preview_goal(hand, PreviewGoal(trajectory, tolerances(hand.joint_names, goal=0.0))).ok, name


def test_path_and_goal_tolerance(hand):
    path = preview_goal(hand, goal({'rh_WRJ1': -0.6}, 0.3, tolerances(['rh_WRJ1'], path=0.01)))
    assert path.first.kind == 'path_tolerance' and path.first.subject == 'rh_WRJ1'
    assert path.first.code == jtc.PATH_TOLERANCE_VIOLATED and 0 < path.first.time < 0.3 and path.first.amount > 0
    assert 'path tolerance violated' in path.first.message
    # a goal tolerance no servo reaches within goal_time
    tight = preview_goal(hand, goal({'rh_FFJ3': 1.0}, 0.5, tolerances(['rh_FFJ3'], goal=1e-6, goal_time=0.2)))
    assert tight.first.kind == 'goal_tolerance' and tight.first.subject == 'rh_FFJ3'
    assert tight.first.code == jtc.GOAL_TOLERANCE_VIOLATED and tight.first.time == pytest.approx(0.7, abs=0.01)
    assert tight.duration is None


def test_start_state_and_speed_scaling(hand):
    start = StartState({'rh_WRJ1': -0.4, 'rh_FFJ3': 0.7})
    run = hand.predict(goal({'rh_FFJ3': 0.7}, 1.0, start=start))
    k = run.joint_names.index('rh_WRJ1')
    assert run.positions[0, k] == pytest.approx(-0.4, abs=0.01)      # held where the sim is
    assert np.abs(run.positions[:, run.joint_names.index('rh_FFJ3')] - 0.7).max() < 0.02
    slow = hand.predict(goal({'rh_FFJ3': 1.0}, 1.0, speed_scaling=0.5, scaled_joints=['rh_FFJ3']))
    assert slow.end_time == pytest.approx(2.0)
    k = slow.joint_names.index('rh_FFJ3')
    half = np.searchsorted(slow.times, 1.0)
    assert slow.desired_positions[half, k] == pytest.approx(0.5, abs=0.01)     # half way after 1 s
    with pytest.raises(ValueError):
        hand.predict(goal({'rh_FFJ3': 1.0}, 1.0, speed_scaling=0.0))


# -- the cell -----------------------------------------------------------------------------------
def test_cell_arm_effort_over_the_limit(cell):
    prediction = preview_goal(cell, goal({'shoulder_lift_joint': -1.5}, 1.0))
    first = prediction.first
    assert first.kind == 'effort' and first.subject == 'shoulder_lift_joint' and first.code == jtc.INVALID_GOAL
    assert first.amount > 0 and 0 <= first.time < 1.0 and '150 N m' in first.message
    assert prediction.peak_efforts['shoulder_lift_joint'] > 150.0
    # the same move over 4 s stays within the UR5's 150 N m
    slow = preview_goal(cell, goal({'shoulder_lift_joint': -0.4}, 4.0))
    assert slow.ok, slow.failures
    assert 50 < slow.peak_efforts['shoulder_lift_joint'] < 150


def test_cell_hand_into_the_cabinet(cell):
    prediction = preview_goal(cell, goal({'shoulder_lift_joint': -0.5, 'elbow_joint': 2.2}, 3.0))
    first = prediction.first
    assert first.kind == 'contact' and first.subject == 'rh_forearm/cabinet'
    assert 1.0 < first.time < 3.2 and first.amount > CONFIG.contact_min_depth
    assert prediction.first_contact.body2 == 'cabinet' and 'mm deep' in first.message


def test_contacts_allowed_by_config(cell):
    config = PreviewConfig(allowed_contacts=CONFIG.allowed_contacts + (('rh_*', 'cabinet'),))
    predictor = GoalPredictor(build_cell_spec(), ControllerGains.from_yaml(config_path('controllers', 'cell.yaml')),
                              config)
    prediction = preview_goal(predictor, goal({'shoulder_lift_joint': -0.5, 'elbow_joint': 2.2}, 3.0))
    assert prediction.first_contact is None or 'rh_' not in prediction.first_contact.pair or \
        'cabinet' not in prediction.first_contact.pair


def test_cell_arm_into_the_floor_is_not_allowed(cell):
    assert preview_goal(cell, goal({'shoulder_lift_joint': 0.2}, 3.0)).first.kind == 'contact'


def base_goal(distance: float, seconds: float, start=(0.0, 0.0, 0.0)) -> PreviewGoal:
    x, y, yaw = start
    points = [(0.0, x, y, yaw, 0.0, 0.0, 0.0),
              (seconds, x + distance * math.cos(yaw), y + distance * math.sin(yaw), yaw, 0.0, 0.0, 0.0)]
    return PreviewGoal(None, None, BasePart(BaseTrajectory.from_points(points)), StartState(base_pose=start))


def test_cell_base_goal(cell):
    good = preview_goal(cell, base_goal(0.5, 3.0, start=(1.0, -0.5, 0.3)))
    assert good.ok, good.failures
    assert good.duration == pytest.approx(3.0, abs=0.1)
    run = cell.predict(base_goal(0.5, 3.0, start=(1.0, -0.5, 0.3)))
    assert run.base_poses[0] == pytest.approx([1.0, -0.5, 0.3], abs=1e-3)          # the sim's pose
    end = [1.0 + 0.5 * math.cos(0.3), -0.5 + 0.5 * math.sin(0.3)]
    assert run.base_poses[-1, :2] == pytest.approx(end, abs=0.03)
    assert run.base_verdict.outcome is jtc.GoalOutcome.SUCCEEDED


def test_cell_base_above_the_mir_speed(cell):
    # 1.9 m in 1 s passes the goal rules (1.9 m/s on average) but its cubic profile peaks at 2.85 m/s
    prediction = preview_goal(cell, base_goal(1.9, 1.0))
    first = prediction.first
    assert first.kind == 'base_speed' and first.subject == 'base' and first.code == jtc.INVALID_GOAL
    assert 0 < first.time < 0.5 and first.amount > 0 and '2.000 m/s' in first.message
    assert prediction.base['peak_reference_speed'] == pytest.approx(2.85, abs=0.01)


def test_a_configured_base_acceleration_limit_is_checked(cell):
    """Off by default (no published MiR250 figure; the calibration protocol steps the speed): with
    a lab's figure, a base goal accelerating harder is refused; the default passes it."""
    from dataclasses import replace
    steep = base_goal(1.0, 1.5)                     # cubic profile: 2.67 m/s^2 at its start
    assert CONFIG.base.max_acceleration == 0 and preview_goal(cell, steep).ok
    strict = replace(CONFIG, base=replace(CONFIG.base, max_acceleration=1.0))
    predictor = GoalPredictor(build_cell_spec(), ControllerGains.from_yaml(config_path('controllers', 'cell.yaml')),
                              strict)
    first = preview_goal(predictor, steep).first
    assert first.kind == 'base_acceleration' and 'acceleration reaches' in first.message and first.amount > 1.0


def test_preview_model_keeps_the_live_dynamics(cell):
    """The effort sensors and the contact copy leave the dynamics as the live model's."""
    live = build_cell_spec().compile()
    assert cell.model.nq == live.nq and cell.model.nu == live.nu
    assert np.array_equal(cell.model.geom_contype, live.geom_contype)
    assert cell.contacts.model.geom_contype.any() and not np.array_equal(cell.contacts.model.geom_conaffinity,
                                                                         live.geom_conaffinity)
    assert cell.model.nsensor == live.nsensor + len(cell.joint_names)
    assert mujoco.mj_name2id(cell.model, mujoco.mjtObj.mjOBJ_SENSOR, 'preview_effort_elbow_joint') >= 0


# -- configuration ------------------------------------------------------------------------------
def test_config():
    # the arm's published limits come from its model (forcerange recorded, not applied); a lab's own,
    # lower limit in the config wins where it is smaller
    assert CONFIG.effort_limit('shoulder_lift_joint') is None and CONFIG.effort_limit('rh_FFJ3') is None
    recorded = {'ra_elbow_joint': 150.0}
    assert effort_limit_of('elbow_joint', 'ra_elbow_joint', recorded, CONFIG) == 150.0
    lab = PreviewConfig.from_mapping({'effort_limits': {'*elbow_joint': 90.0, '*wrist_1_joint': 300.0}})
    assert effort_limit_of('elbow_joint', 'ra_elbow_joint', recorded, lab) == 90.0
    assert effort_limit_of('wrist_1_joint', 'ra_wrist_1_joint', {'ra_wrist_1_joint': 28.0}, lab) == 28.0
    assert effort_limit_of('rh_FFJ3', 'rh_FFJ3', recorded, lab) is None
    assert CONFIG.contact_allowed('left_wheel_link', 'world') and not CONFIG.contact_allowed('rh_palm', 'cabinet')
    with pytest.raises(ConfigError, match='unknown'):
        PreviewConfig.from_mapping({'effort_limit': {}})
    with pytest.raises(ConfigError, match='max_speed'):
        PreviewConfig.from_mapping({'base': {'max_speed': -1}})
    with pytest.raises(ConfigError, match='pair'):
        PreviewConfig.from_mapping({'contacts': {'allowed': [['a']]}})
    with pytest.raises(ConfigError, match='not found'):
        PreviewConfig.from_yaml('/nonexistent/preview.yaml')
