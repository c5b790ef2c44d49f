"""The goal preview's base-slip check (shadow_twin.simulation.preview.base_slip, no ROS; issue 37), with
base.max_slip set (off by default): the extended arm swung +-1 rad at pi rad/s pushes the standing base
across the floor and is refused with the slip, the time and the limit, while a slow swing passes beside
it; a goal driving the base is not judged (its wheels slip too); off by default; the hand alone has no
base to judge; bad figures are one-line errors."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.paths import config_path
from shadow_twin.control import jtc
from shadow_twin.control.base.trajectory import BaseTrajectory
from shadow_twin.control.controller import ControllerGains
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.cell.assembly import build_cell_spec
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.simulation.preview.checks import preview_goal
from shadow_twin.simulation.preview.config import PreviewConfig
from shadow_twin.simulation.preview.goal import BasePart, PreviewGoal, StartState
from shadow_twin.simulation.preview.predictor import GoalPredictor
from shadow_twin.simulation.preview.windows import preview_in_windows

SHIPPED = PreviewConfig.from_yaml(config_path('preview.yaml'))
CONFIG = dataclasses.replace(SHIPPED, base=dataclasses.replace(SHIPPED.base, max_slip=0.02))
ARM = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint']
EXTENDED = {'shoulder_pan_joint': -1.0, 'shoulder_lift_joint': 0.0, 'elbow_joint': 0.0}


def cell_predictor(config: PreviewConfig = CONFIG) -> GoalPredictor:
    return GoalPredictor(build_cell_spec(), ControllerGains.from_yaml(config_path('controllers', 'cell.yaml')), config)


@pytest.fixture(scope='module')
def cell():
    return cell_predictor()


def swing(rate: float) -> PreviewGoal:
    """The extended arm's pan from -1 rad, q = -cos(rate t), for one back-and-forth (rad/s)."""
    t = np.linspace(0.0, 2.0 * math.pi / rate, 41)[1:]
    points = [[-math.cos(rate * s), 0.0, 0.0] for s in t]
    return PreviewGoal(JointTrajectory(ARM, list(t), points), start=StartState(positions=EXTENDED))


def test_a_fast_swing_slides_the_base_and_is_refused_a_slow_one_passes(cell):
    prediction = preview_goal(cell, swing(math.pi))
    failure = prediction.first
    assert failure is not None and failure.kind == 'base_slip' and failure.subject == 'base'
    assert failure.code == jtc.INVALID_GOAL and failure.amount > 0 and 0 < failure.time < 2.0
    assert failure.message.startswith('the base slides ') and 'on its wheels by t = ' in failure.message
    assert prediction.base['peak_slip'] > CONFIG.base.max_slip
    windows = preview_in_windows(cell, swing(math.pi), 1.5)                 # the same in windows (/twin/preview)
    assert windows.first is not None and windows.first.kind == 'base_slip'
    slow = preview_goal(cell, swing(0.5))
    assert all(f.kind != 'base_slip' for f in slow.failures), slow.verdict().message
    assert slow.base['peak_slip'] < CONFIG.base.max_slip


def test_a_goal_driving_the_base_is_not_judged(cell):
    points = [(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0), (1.5, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0)]   # 2.7 m/s^2: its wheels slip
    goal = PreviewGoal(None, None, BasePart(BaseTrajectory.from_points(points)), StartState(base_pose=(0, 0, 0)))
    prediction = preview_goal(cell, goal)
    assert prediction.ok, prediction.verdict().message
    assert 'peak_slip' not in prediction.base
    run = cell.predict(goal)                                                 # it does slip past the limit
    assert cell.slips.slip(run.qpos, run.base_poses).max() > CONFIG.base.max_slip


def test_off_by_default_and_the_hand_has_no_base():
    assert SHIPPED.base.max_slip == 0.0
    off = cell_predictor(SHIPPED)
    assert all(f.kind != 'base_slip' for f in preview_goal(off, swing(math.pi)).failures)
    hand = GoalPredictor(TwinModel(None).spec, ControllerGains.from_yaml(config_path('controllers',
                                                                                     'shadow_hand_e.yaml')), CONFIG)
    assert not hand.slips.active
    assert 'peak_slip' not in preview_goal(hand, PreviewGoal(JointTrajectory(['rh_FFJ3'], [0.5], [[0.5]]))).base


@pytest.mark.parametrize('base, words', [({'max_slip': -0.01}, 'max_slip'), ({'max_slip': 'far'}, 'max_slip'),
                                         ({'max_slip': float('nan')}, 'max_slip'),
                                         ({'slip': 1}, 'base')])
def test_bad_slip_figures_are_one_line_errors(base, words):
    with pytest.raises(ConfigError, match=words) as info:
        PreviewConfig.from_mapping({'base': base})
    assert '\n' not in str(info.value)
