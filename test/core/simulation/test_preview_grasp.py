"""The goal preview's grasp check (shadow_twin.simulation.preview.grasp, no ROS). The hand alone with
config/scene_hand.yaml's can: **carried** (the stand left out, gravity turned towards the palm: the hand
palm up, the firm grasp's fingers round the can, nothing but the hand touching it: the palm, the thumb's
middle phalanx and one fingertip, so ``grasp.min_fingertips`` 1 there), a goal that keeps
the grasp passes and reports the can's slide, one that opens the hand is refused because the can leaves
it; **on its stand** (not carried), closing on it and letting it go pass; the fingers a goal leaves out
hold their setpoints; a declared-held object slides when the hand turns away; a start object may move;
bad start objects and bad grasp settings are one-line errors; free objects may touch the hand and the
scene, not the arm."""

from __future__ import annotations

import dataclasses
import math

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
from shadow_twin.simulation.live.entities import EntityMotion, object_motion, set_object_motion
from shadow_twin.simulation.live.simulation import LiveSimulation
from shadow_twin.simulation.preview.checks import preview_goal
from shadow_twin.simulation.preview.config import PreviewConfig
from shadow_twin.simulation.preview.goal import PreviewGoal, StartState
from shadow_twin.simulation.preview.predictor import GoalPredictor

SHIPPED = PreviewConfig.from_yaml(config_path('preview.yaml'))
CONFIG = dataclasses.replace(SHIPPED, grasp_slide_limit=0.01)             # the check on (off by default)
FINGERS = [j for j in GRASP if not j.startswith('rh_WR')]
SCENE = SceneConfig.from_yaml(config_path('scene_hand.yaml'))
#: The can alone, without its stand.
CAN_ONLY = SceneConfig(tuple(o for o in SCENE.objects if o.free))
#: m/s^2: gravity towards the palm (it faces -y): the hand palm up.
PALM_UP = (0.0, 9.81, 0.0)


def start_of(sim: LiveSimulation, holds=None) -> StartState:
    """The sim's joint positions and its can's pose as a preview start."""
    state = sim.joint_state()
    can = object_motion(sim, 'can')
    return StartState(positions=dict(zip(state.names, state.position)), holds=dict(holds or {}),
                      objects={'can': [*can.position, *can.quat]})


def predictor(config: PreviewConfig = CONFIG, scene: SceneConfig = SCENE, gravity=None) -> GoalPredictor:
    spec = TwinModel(None).spec
    add_objects(spec, scene)
    out = GoalPredictor(spec, ControllerGains.from_yaml(config_path('controllers', 'shadow_hand_e.yaml')), config)
    if gravity is not None:
        out.model.opt.gravity[:] = gravity
    return out


def closed(scene: SceneConfig, gravity=None, hold_can: bool = False) -> LiveSimulation:
    """The hand closed on the can with the firm grasp's fingers in 1 s (the can held in place meanwhile
    with ``hold_can``), then 1 s of holding."""
    sim = LiveSimulation(None, scene=scene)
    if gravity is not None:
        sim.model.opt.gravity[:] = gravity
    can = object_motion(sim, 'can')
    place = EntityMotion(can.position.copy(), can.quat.copy())
    sim.set_trajectory(JointTrajectory(FINGERS, [1.0], [[GRASP[j] for j in FINGERS]]))
    for _ in range(int(round(1.0 / (2 * sim.dt)))):
        if hold_can:
            set_object_motion(sim, 'can', place)
        sim.step(2)
    sim.step(int(round(1.0 / sim.dt)))
    return sim


@pytest.fixture(scope='module')
def hand():
    return predictor()


@pytest.fixture(scope='module')
def palm_up():
    return predictor(dataclasses.replace(CONFIG, grasp_min_fingertips=1), scene=CAN_ONLY, gravity=PALM_UP)


@pytest.fixture(scope='module')
def carried():
    return closed(CAN_ONLY, PALM_UP, hold_can=True)


@pytest.fixture(scope='module')
def grasped():
    """The firm grasp closed on the can standing on its stand (not carried)."""
    return closed(SCENE)


@pytest.fixture(scope='module')
def open_hand():
    sim = LiveSimulation(None, scene=SCENE)
    sim.step(int(round(0.2 / sim.dt)))
    return sim


def fingers_to(targets: dict, seconds: float) -> JointTrajectory:
    return JointTrajectory(FINGERS, [seconds], [[targets[j] for j in FINGERS]])


def test_the_grasp_kept_passes_and_the_hand_may_touch_what_it_carries(palm_up, carried):
    start = start_of(carried, holds=GRASP)
    assert palm_up.grasps.held(palm_up.model.qpos0) == []                # in the scene's own pose nothing is held
    run = palm_up.predict(PreviewGoal(fingers_to(GRASP, 1.0), start=start))
    assert palm_up.grasps.held(run.qpos[0]) == ['can']                   # a fingertip on it, nothing but the hand
    prediction = preview_goal(palm_up, PreviewGoal(fingers_to(GRASP, 1.0), start=start))
    kinds = [f.kind for f in prediction.failures]                        # (fingers stopped by the can miss their goal
    assert 'grasp' not in kinds, prediction.verdict().message             # tolerance: the JTC's rule, not this check's)
    assert prediction.first_contact is None                              # fingertips on the can are no contact failure
    slide = prediction.grasp_slides['can']                               # reported though held: m, under the limit
    assert 0.0 <= slide < CONFIG.grasp_slide_limit
    assert prediction.summary()['grasp_slides'] == {'can': round(slide, 6)}
    turned = preview_goal(palm_up, PreviewGoal(JointTrajectory(['rh_WRJ1'], [0.5], [[-0.3]]), start=start))
    assert all(f.kind != 'grasp' for f in turned.failures), turned.verdict().message   # the can turns with the hand


def test_opening_the_hand_is_refused_the_can_is_let_go(palm_up, carried):
    prediction = preview_goal(palm_up, PreviewGoal(fingers_to(OPEN, 0.5), start=start_of(carried)))
    failure = prediction.first
    assert failure is not None and failure.kind == 'grasp' and failure.subject == 'can'
    assert failure.code == jtc.INVALID_GOAL and 0.0 < failure.time <= 0.5
    assert failure.message.startswith("'can' slides ")                  # the opening fingertip draws away from it
    assert 'leaves the hand at t = ' in failure.message or 'in the hand by t = ' in failure.message
    assert prediction.verdict().message.startswith('predicted to fail: ')


def test_a_can_on_its_stand_is_not_carried_the_fingers_close_on_it_and_let_it_go(hand, grasped, open_hand):
    start = start_of(grasped, holds=GRASP)
    run = hand.predict(PreviewGoal(fingers_to(OPEN, 0.5), start=start))
    assert hand.grasps.fingertips(run.qpos[0])['can'] >= 2 and hand.grasps.held(run.qpos[0]) == []
    for goal in (PreviewGoal(fingers_to(OPEN, 0.5), start=start),                  # let go: it stays on its stand
                 PreviewGoal(fingers_to(GRASP, 1.0), start=start_of(open_hand))):  # close on it where it stands
        prediction = preview_goal(hand, goal)
        assert all(f.kind != 'grasp' for f in prediction.failures), prediction.verdict().message
        assert prediction.grasp_slides == {}


def test_fingers_left_out_of_a_goal_hold_their_setpoints(hand, grasped):
    goal = PreviewGoal(JointTrajectory(['rh_WRJ2'], [0.3], [[0.0]]), start=start_of(grasped, holds=GRASP))
    run = hand.predict(goal)
    column = run.joint_names.index('rh_FFJ3')
    assert np.allclose(run.desired_positions[:, column], GRASP['rh_FFJ3'])
    free = hand.predict(dataclasses.replace(goal, start=start_of(grasped)))
    assert not np.allclose(free.desired_positions[:, column], GRASP['rh_FFJ3'])   # without: where they stand
    with pytest.raises(ValueError, match='hold setpoint of rh_FFJ3 is not finite'):
        hand.predict(dataclasses.replace(goal, start=start_of(grasped, holds={'rh_FFJ3': float('nan')})))


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


@pytest.mark.parametrize('grasp, words', [({'slide_limit': -0.01}, 'slide_limit'), ({'slide_limit': 'far'}, 'slide_limit'),
                                          ({'min_fingertips': 1.5}, 'min_fingertips'), ({'held': 'can'}, 'held'),
                                          ({'reach': 1}, 'grasp')])
def test_bad_grasp_settings_are_one_line_errors(grasp, words):
    with pytest.raises(ConfigError, match=words) as info:
        PreviewConfig.from_mapping({'grasp': grasp})
    assert '\n' not in str(info.value)


def test_off_by_default(carried):
    assert SHIPPED.grasp_slide_limit == 0.0
    off = predictor(dataclasses.replace(SHIPPED, grasp_min_fingertips=1), scene=CAN_ONLY, gravity=PALM_UP)
    assert not off.grasps.active
    prediction = preview_goal(off, PreviewGoal(fingers_to(OPEN, 0.5), start=start_of(carried)))
    assert all(f.kind != 'grasp' for f in prediction.failures) and prediction.grasp_slides == {}


def test_a_declared_held_object_the_scene_lacks_is_refused():
    with pytest.raises(ConfigError, match=r"\['mug'\] are not free objects"):
        predictor(dataclasses.replace(CONFIG, held_objects=('mug',)))


def test_free_objects_may_touch_the_hand_and_the_scene_but_not_the_arm_or_wheels():
    from shadow_twin.model.cell.assembly import build_cell_spec
    from shadow_twin.simulation.preview.contacts import robot_links_and_free_objects
    spec = build_cell_spec()
    add_objects(spec, SceneConfig.from_yaml(config_path('scene.yaml')))
    model = spec.compile()
    links, free = robot_links_and_free_objects(model)
    names = {model.body(b).name for b in links}
    assert {'upper_arm_link', 'wrist_3_link', 'left_wheel_link', 'fl_caster_wheel_link'} <= names
    assert not any(n.startswith('rh_') for n in names) and 'tote' not in names and 'cabinet' not in names
    assert {model.body(b).name for b in free} == {'can', 'ball'}


def test_a_start_object_may_move(hand, open_hand):
    """13 numbers: the pose and the velocity (world axes); the can thrown up at 1 m/s rises."""
    can = object_motion(open_hand, 'can')
    pose = [*can.position, *can.quat]
    goal = PreviewGoal(JointTrajectory(['rh_FFJ3'], [0.1], [[0.0]]), horizon=0.05,
                       start=StartState(objects={'can': [*pose, 0.0, 0.0, 1.0, 0.0, 0.0, 2.0]}))
    run = hand.predict(goal)
    adr = hand.model.jnt_qposadr[hand.model.joint('can_free').id]
    rise = run.qpos[-1, adr + 2] - can.position[2]
    assert 0.03 < rise < 0.06                                       # 1 m/s for 0.05 s, less g's 12 mm
    turned = run.qpos[-1, adr + 3:adr + 7]
    assert abs(abs(turned[0]) - math.cos(0.05)) < 0.01              # 2 rad/s about z for 0.05 s: 0.1 rad
    with pytest.raises(ValueError, match='or 13 with its velocity'):
        hand.predict(dataclasses.replace(goal, start=StartState(objects={'can': [*pose, 1.0]})))
