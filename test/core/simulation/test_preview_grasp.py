"""The goal preview's grasp check (shadow_twin.simulation.preview.grasp, no ROS): the hand alone holding
config/scene_hand.yaml's can on its stand. A goal that keeps the grasp passes; one that opens the hand
is refused because the can leaves it; one that turns the wrist (the can stays on its stand) because
it slides in the hand; a declared-held object slides too; nothing held, nothing judged; bad start
objects and bad grasp settings are one-line errors; the hand may touch what it holds (no contact
failure)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.paths import config_path
from shadow_twin.control import jtc
from shadow_twin.control.controller import ControllerGains
from shadow_twin.control.pick import GRASP, OPEN
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.model.scene import SceneConfig
from shadow_twin.model.scene.build import add_objects
from shadow_twin.simulation.live.entities import object_motion
from shadow_twin.simulation.live.simulation import LiveSimulation
from shadow_twin.simulation.preview.checks import preview_goal
from shadow_twin.simulation.preview.config import PreviewConfig
from shadow_twin.simulation.preview.goal import PreviewGoal, StartState
from shadow_twin.simulation.preview.predictor import GoalPredictor

CONFIG = PreviewConfig.from_yaml(config_path('preview.yaml'))
FINGERS = [j for j in GRASP if not j.startswith('rh_WR')]


def start_of(sim: LiveSimulation, holds=None) -> StartState:
    """The sim's joint positions and its can's pose as a preview start."""
    state = sim.joint_state()
    can = object_motion(sim, 'can')
    return StartState(positions=dict(zip(state.names, state.position)), holds=dict(holds or {}),
                      objects={'can': [*can.position, *can.quat]})


def predictor(config: PreviewConfig = CONFIG) -> GoalPredictor:
    spec = TwinModel(None).spec
    add_objects(spec, SceneConfig.from_yaml(config_path('scene_hand.yaml')))
    return GoalPredictor(spec, ControllerGains.from_yaml(config_path('controllers', 'shadow_hand_e.yaml')), config)


@pytest.fixture(scope='module')
def hand():
    return predictor()


@pytest.fixture(scope='module')
def grasped():
    """The hand closed on the can (the firm grasp's fingers, in 1 s, then 0.5 s of holding)."""
    sim = LiveSimulation(None, scene=SceneConfig.from_yaml(config_path('scene_hand.yaml')))
    sim.set_trajectory(JointTrajectory(FINGERS, [1.0], [[GRASP[j] for j in FINGERS]]))
    sim.step(int(round(1.5 / sim.dt)))
    return sim


@pytest.fixture(scope='module')
def open_hand():
    sim = LiveSimulation(None, scene=SceneConfig.from_yaml(config_path('scene_hand.yaml')))
    sim.step(int(round(0.2 / sim.dt)))
    return sim


def fingers_to(targets: dict, seconds: float) -> JointTrajectory:
    return JointTrajectory(FINGERS, [seconds], [[targets[j] for j in FINGERS]])


def test_the_grasp_kept_passes_and_the_hand_may_touch_what_it_holds(hand, grasped):
    start = start_of(grasped)
    assert hand.grasps.held(hand.model.qpos0) == []                   # in the scene's own pose nothing is held
    run = hand.predict(PreviewGoal(fingers_to(GRASP, 1.0), start=start))
    assert hand.grasps.held(run.qpos[0]) == ['can']                   # at the start: two or more fingertips on it
    prediction = preview_goal(hand, PreviewGoal(fingers_to(GRASP, 1.0), start=start))
    kinds = [f.kind for f in prediction.failures]                     # (fingers stopped by the can miss their goal
    assert 'grasp' not in kinds, prediction.verdict().message          # tolerance: the JTC's rule, not this check's)
    assert prediction.first_contact is None                           # fingertips on the can are no contact failure
    slide = prediction.grasp_slides['can']                            # reported though held: m, under the limit
    assert 0.0 <= slide < CONFIG.grasp_slide_limit
    assert prediction.summary()['grasp_slides'] == {'can': round(slide, 6)}


def test_opening_the_hand_is_refused_the_can_leaves_it(hand, grasped):
    prediction = preview_goal(hand, PreviewGoal(fingers_to(OPEN, 0.5), start=start_of(grasped)))
    failure = prediction.first
    assert failure is not None and failure.kind == 'grasp' and failure.subject == 'can'
    assert failure.code == jtc.INVALID_GOAL and 0.0 < failure.time <= 0.5
    assert "'can' slides" in failure.message and 'leaves the hand at t = ' in failure.message
    assert prediction.verdict().message.startswith('predicted to fail: ')


def test_turning_the_wrist_slides_the_can_past_the_limit_and_a_small_turn_passes(hand, grasped):
    start = start_of(grasped, holds=GRASP)                            # the fingers keep squeezing
    goal = PreviewGoal(JointTrajectory(['rh_WRJ1'], [0.5], [[-0.6]]), start=start)   # the can's stand stays
    failure = preview_goal(hand, goal).first
    assert failure is not None and failure.kind == 'grasp'
    assert failure.amount > CONFIG.grasp_slide_limit
    assert 'in the hand by t = ' in failure.message and '(limit 10 mm' in failure.message
    small = preview_goal(hand, dataclasses.replace(goal, trajectory=JointTrajectory(['rh_WRJ1'], [0.5], [[0.005]])))
    assert all(f.kind != 'grasp' for f in small.failures), small.verdict().message


def test_fingers_left_out_of_a_goal_hold_their_setpoints(hand, grasped):
    goal = PreviewGoal(JointTrajectory(['rh_WRJ2'], [0.3], [[0.0]]), start=start_of(grasped, holds=GRASP))
    run = hand.predict(goal)
    column = run.joint_names.index('rh_FFJ3')
    assert np.allclose(run.desired_positions[:, column], GRASP['rh_FFJ3'])
    free = hand.predict(dataclasses.replace(goal, start=start_of(grasped)))
    assert not np.allclose(free.desired_positions[:, column], GRASP['rh_FFJ3'])   # without: where they stand


def test_a_declared_held_object_slides_when_the_hand_turns_away(open_hand):
    declared = predictor(dataclasses.replace(CONFIG, held_objects=('can',)))
    start = start_of(open_hand)
    assert declared.grasps.held(declared.model.qpos0) == ['can']
    goal = PreviewGoal(JointTrajectory(['rh_WRJ1'], [0.5], [[0.4]]), start=start)
    failure = preview_goal(declared, goal).first
    assert failure is not None and failure.kind == 'grasp' and 'in the hand' in failure.message
    plain = preview_goal(predictor(), goal)                            # nothing touches it: not held, not judged
    assert all(f.kind != 'grasp' for f in plain.failures)


@pytest.mark.parametrize('pose, words', [([0.0, 0.0, 0.3], '7 finite numbers'),
                                         ([0.0, 0.0, float('nan'), 1.0, 0.0, 0.0, 0.0], '7 finite numbers'),
                                         ([0.0, 0.0, 0.3, 0.0, 0.0, 0.0, 0.0], '7 finite numbers')])
def test_a_bad_start_pose_is_a_one_line_error(hand, pose, words):
    goal = PreviewGoal(fingers_to(OPEN, 0.2), start=StartState(objects={'can': pose}))
    with pytest.raises(ValueError, match=words):
        hand.predict(goal)
    with pytest.raises(ValueError, match="'mug' is not a free object"):
        hand.predict(PreviewGoal(fingers_to(OPEN, 0.2), start=StartState(objects={'mug': [0, 0, 0, 1, 0, 0, 0]})))


@pytest.mark.parametrize('grasp, words', [({'slide_limit': 0}, 'slide_limit'), ({'slide_limit': 'far'}, 'slide_limit'),
                                          ({'min_fingertips': 1.5}, 'min_fingertips'), ({'held': 'can'}, 'held'),
                                          ({'reach': 1}, 'grasp')])
def test_bad_grasp_settings_are_one_line_errors(grasp, words):
    with pytest.raises(ConfigError, match=words) as info:
        PreviewConfig.from_mapping({'grasp': grasp})
    assert '\n' not in str(info.value)


def test_a_declared_held_object_the_scene_lacks_is_refused():
    with pytest.raises(ConfigError, match=r"\['mug'\] are not free objects"):
        predictor(dataclasses.replace(CONFIG, held_objects=('mug',)))
