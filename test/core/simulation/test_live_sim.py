"""Tests of shadow_twin.simulation.live.simulation (no ROS needed): stepping, the live path against
the offline simulator, reload by joint name, parameter overrides."""

from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError, ModelError, TrajectoryError
from shadow_twin.common.paths import config_path
from shadow_twin.control.controller import ControllerGains
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.calibratable import ParameterTarget, get_parameter
from shadow_twin.model.mjcf import builtin_model_path
from shadow_twin.simulation.live.simulation import LiveSimulation, ParameterOverrides
from shadow_twin.simulation.offline import TrajectorySimulator

GAINS = config_path('controllers', 'shadow_hand_e.yaml')
JOINTS = ['rh_FFJ3', 'rh_FFJ2', 'rh_FFJ1', 'rh_THJ4', 'rh_WRJ1']


def closing() -> JointTrajectory:
    """Two linear segments ending at a knot on the step grid (t = 1.0 s)."""
    return JointTrajectory(JOINTS, [0.5, 1.0], [[1.0, 0.5, 0.5, 0.8, 0.3],
                                                [0.2, 1.0, 1.2, 0.2, -0.3]])


def tracked(positions) -> np.ndarray:
    """The tracked quantities of JOINTS-ordered positions: FFJ3, FFJ1 + FFJ2 (the
    under-actuated pair is driven through one tendon, so only its sum follows the
    trajectory), THJ4, WRJ1."""
    p = np.asarray(positions)
    return np.stack([p[..., 0], p[..., 1] + p[..., 2], p[..., 3], p[..., 4]], axis=-1)


def run(sim: LiveSimulation, seconds: float, joints=JOINTS) -> np.ndarray:
    """Step one step at a time for ``seconds``; (N, len(joints)) positions after each step."""
    out = []
    for _ in range(int(round(seconds / sim.dt))):
        sim.step(1)
        out.append(sim.positions(joints))
    return np.array(out)


def hand_copy(tmp_path: Path, replace: tuple[str, str] | None = None) -> Path:
    """A copy of the built-in model in tmp_path, optionally with one text replacement."""
    text = builtin_model_path().read_text()
    if replace is not None:
        assert replace[0] in text
        text = text.replace(*replace)
    path = tmp_path / 'hand.xml'
    path.write_text(text)
    return path


FINGER_DEFAULT = '<joint type="hinge" limited="true" damping="0.05" armature="0.005" frictionloss="0.1"/>'


def test_joint_names_and_rest_state():
    sim = LiveSimulation(gains=GAINS)
    state = sim.joint_state()
    assert len(state.names) == 24 and all(n.startswith('rh_') for n in state.names)
    assert state.names == sim.controlled_joints
    assert state.sim_time == 0.0
    assert state.position.shape == state.velocity.shape == state.effort.shape == (24,)


def test_stepping_follows_a_trajectory():
    sim = LiveSimulation(gains=GAINS)
    target = closing().positions[-1]
    sim.set_trajectory(closing(), start_time=0.0)
    assert sim.trajectory_active
    sim.step_to(1.0)
    assert sim.time == pytest.approx(1.0, abs=sim.dt)
    assert sim.trajectory_active
    sim.step_to(3.0)
    assert not sim.trajectory_active           # retired after the last point: holds it
    np.testing.assert_allclose(tracked(sim.positions(JOINTS)), tracked(target), atol=0.05)
    track = sim.tracking()
    assert track is not None and track.end_time == pytest.approx(1.0)
    np.testing.assert_allclose(track.desired_position, target)
    np.testing.assert_allclose(track.desired_velocity, 0.0)


def test_step_to_counts_steps_and_caps():
    sim = LiveSimulation()
    assert sim.step_to(0.0101) == 5            # 0.0101 s at dt 0.002 -> 5 whole steps
    assert sim.step_to(1.0, max_steps=3) == 3
    assert sim.time == pytest.approx(8 * sim.dt)
    sim.paused = True
    assert sim.step_to(2.0) == 0 and sim.step(10) == 0
    assert sim.time == pytest.approx(8 * sim.dt)


def test_live_path_equals_offline_simulator():
    sim = LiveSimulation(gains=GAINS)
    offline = TrajectorySimulator(sim.model, sim.controller, closing(), duration=1.5)
    reference = offline.run([sim.model])[0]             # (nstep, 24), controller joint order
    sim.set_trajectory(closing(), start_time=sim.time)
    live = run(sim, 1.5, list(sim.controlled_joints))
    assert live.shape == reference.shape
    assert np.abs(live - reference).max() < 1e-9
    # batched stepping (what the bridge does when catching up) gives the same motion
    sim.reset()
    sim.set_trajectory(closing(), start_time=sim.time)
    sim.step(offline.nstep)
    assert np.abs(sim.positions(sim.controlled_joints) - reference[-1]).max() < 1e-9


def test_future_start_holds_until_then():
    sim = LiveSimulation(gains=GAINS)
    rest = sim.positions(JOINTS)
    sim.set_trajectory(closing(), start_time=0.5)
    sim.step_to(0.5)
    np.testing.assert_allclose(sim.positions(JOINTS), rest, atol=1e-3)
    sim.step_to(1.0)
    assert np.abs(sim.positions(JOINTS) - rest).max() > 0.1


def test_a_start_in_the_past_is_joined_mid_way_on_the_goals_own_clock():
    """A stamped goal that arrives 40 ms after its start (as the JTC joins one): its desired
    state from then on is the trajectory's at the time since the stamp, not since arrival; a
    trajectory whose first point is later starts from the current positions at the arrival."""
    sim = LiveSimulation(gains=GAINS)
    stamp = sim.time
    sim.step(20)                                                  # 40 ms later it arrives
    trajectory = JointTrajectory(JOINTS, [0.0, 1.0], [sim.positions(JOINTS), [0.2, 1.0, 1.2, 0.2, -0.3]])
    token = sim.set_trajectory(trajectory, start_time=stamp)
    sample = sim.tracking(token)
    assert sample.start_time == pytest.approx(stamp)
    np.testing.assert_allclose(sample.desired_position, trajectory.sample(0.04)[0], atol=1e-12)
    sim.step(100)
    np.testing.assert_allclose(sim.tracking(token).desired_position, trajectory.sample(0.24)[0], atol=1e-12)
    assert sim.tracking(token).end_time == pytest.approx(stamp + 1.0)
    rest = sim.positions(JOINTS)                                  # first point 0.5 s after the stamp
    token = sim.set_trajectory(closing(), start_time=sim.time - 0.2)
    np.testing.assert_allclose(sim.tracking(token).desired_position, rest, atol=1e-12)
    sim.step(150)                                                 # 0.5 s after the stamp: the first point
    np.testing.assert_allclose(sim.tracking(token).desired_position, closing().positions[0], atol=1e-9)


def test_cancel_holds_current_position():
    sim = LiveSimulation(gains=GAINS)
    sim.set_trajectory(closing(), start_time=0.0)
    sim.step_to(0.4)
    sim.cancel()
    assert not sim.trajectory_active and sim.tracking() is None
    at_cancel = sim.positions(JOINTS)
    sim.step_to(1.5)
    # no further progress towards the target: drift only while the motion decays
    assert np.abs(sim.positions(JOINTS) - at_cancel).max() < 0.1
    moved = LiveSimulation(gains=GAINS)
    moved.set_trajectory(closing(), start_time=0.0)
    moved.step_to(1.5)
    assert np.abs(moved.positions(JOINTS) - sim.positions(JOINTS)).max() > 0.3


def test_hold_stops_the_trajectory_and_holds_the_given_angles_moving_nothing_now():
    """What a restored physics state needs: the controllers holding what they held when it was saved."""
    sim = LiveSimulation(gains=GAINS)
    sim.set_trajectory(closing(), start_time=0.0)
    sim.step_to(0.4)
    before = sim.positions(JOINTS)
    sim.hold({JOINTS[0]: 0.9})
    assert not sim.trajectory_active and np.array_equal(sim.positions(JOINTS), before)
    sim.step_to(2.0)
    assert sim.positions(JOINTS)[0] == pytest.approx(0.9, abs=0.03)           # held where it was told
    assert np.abs(sim.positions(JOINTS)[1:] - before[1:]).max() < 0.1          # the others where they stood
    with pytest.raises(KeyError):
        sim.hold({'rh_FFJ9': 0.1})


def test_unknown_trajectory_joint_is_refused():
    sim = LiveSimulation()
    bad = JointTrajectory(['rh_FFJ9'], [1.0], [[0.1]])
    with pytest.raises(TrajectoryError, match='rh_FFJ9'):
        sim.set_trajectory(bad)


def test_reset_returns_to_rest_and_keeps_time():
    sim = LiveSimulation(gains=GAINS)
    rest = sim.joint_state().position
    sim.set_trajectory(closing(), start_time=0.0)
    sim.step_to(1.0)
    sim.reset()
    assert sim.time == pytest.approx(1.0, abs=sim.dt)
    np.testing.assert_allclose(sim.joint_state().position, rest)
    assert not sim.trajectory_active


def thumb_first(path: Path) -> None:
    """Rewrite the MJCF with the thumb subtree moved before the first finger, so
    that every joint index changes while the names stay."""
    tree = ElementTree.parse(path)
    palm = next(b for b in tree.iter('body') if b.get('name') == 'rh_palm')
    thumb = next(b for b in palm if b.get('name') == 'rh_thbase')
    first = next(i for i, b in enumerate(palm) if b.tag == 'body')
    palm.remove(thumb)
    palm.insert(first, thumb)
    tree.write(path)


def test_reload_keeps_positions_by_name(tmp_path):
    path = hand_copy(tmp_path)
    sim = LiveSimulation(path, gains=GAINS)
    sim.set_positions({'rh_FFJ3': 0.7, 'rh_THJ5': -0.4})
    sim.step(10)
    before = sim.joint_state()
    report = sim.reload()
    assert report.kept_state == list(before.names)
    after = sim.joint_state()
    assert after.sim_time == before.sim_time
    np.testing.assert_array_equal(after.position, before.position)
    np.testing.assert_array_equal(after.velocity, before.velocity)
    thumb_first(path)
    report = sim.reload()
    assert list(sim.joint_names) != list(before.names)          # indices changed
    assert sorted(sim.joint_names) == sorted(before.names)
    assert sorted(report.kept_state) == sorted(before.names)
    state = sim.joint_state()
    for name, position, velocity in zip(before.names, before.position, before.velocity):
        k = state.names.index(name)
        assert (state.position[k], state.velocity[k]) == (position, velocity), name
    assert sim.positions(['rh_FFJ3'])[0] == pytest.approx(0.7, abs=0.01)


BROKEN = ('<joint name="rh_FFJ3" class="FJ3"/>', '<joint name="rh_FFJ3" class="FJ3" range="1 0"/>')


def test_reload_of_a_broken_model_keeps_the_old_one(tmp_path):
    path = hand_copy(tmp_path)
    sim = LiveSimulation(path, gains=GAINS)
    sim.set_trajectory(closing(), start_time=0.0)
    sim.step_to(0.3)
    model_before = sim.model
    path.write_text(path.read_text().replace(*BROKEN))
    with pytest.raises(ModelError) as info:
        sim.reload()
    message = str(info.value)
    assert 'does not compile' in message and str(path) in message
    assert 'range[0] should be smaller than range[1]' in message      # MuJoCo's own text
    assert sim.model is model_before and sim.trajectory_active
    sim.step_to(2.0)        # keeps running with the old model
    np.testing.assert_allclose(tracked(sim.positions(JOINTS)), tracked(closing().positions[-1]), atol=0.05)
    with pytest.raises(ModelError, match='not found'):
        sim.reload(tmp_path / 'missing.xml')
    assert sim.model is model_before


def test_reload_with_changed_damping_changes_the_motion(tmp_path):
    path = hand_copy(tmp_path)
    sim = LiveSimulation(path, gains=GAINS)
    sim.set_trajectory(closing(), start_time=sim.time)
    default = run(sim, 0.8)
    path.write_text(path.read_text().replace(FINGER_DEFAULT, FINGER_DEFAULT.replace('damping="0.05"',
                                                                                    'damping="0.5"')))
    sim.reset()
    sim.reload()
    target = ParameterTarget('joint', 'rh_FFJ3', 'damping')
    assert get_parameter(sim.model, target) == pytest.approx(0.5)
    sim.set_trajectory(closing(), start_time=sim.time)
    damped = run(sim, 0.8)
    assert np.abs(damped - default).max() > 0.02


def test_reload_keeps_a_running_trajectory(tmp_path):
    path = hand_copy(tmp_path)
    sim = LiveSimulation(path, gains=GAINS)
    sim.set_trajectory(closing(), start_time=0.0)
    sim.step_to(0.5)
    report = sim.reload()
    assert report.trajectory_kept is True and sim.trajectory_active
    sim.step_to(2.0)
    np.testing.assert_allclose(tracked(sim.positions(JOINTS)), tracked(closing().positions[-1]), atol=0.05)


def test_overrides_change_parameters_and_motion():
    spec = {'rh_[FMRL]FJ[123]': {'damping': 'x3', 'frictionloss': '*0.5'}, 'rh_WRJ1': {'damping': 2.0}}
    plain = LiveSimulation(gains=GAINS)
    mock = LiveSimulation(gains=GAINS, overrides=spec)
    for joint in ('rh_FFJ1', 'rh_MFJ2', 'rh_LFJ3'):
        d = ParameterTarget('joint', joint, 'damping')
        f = ParameterTarget('joint', joint, 'frictionloss')
        assert get_parameter(mock.model, d) == pytest.approx(3 * get_parameter(plain.model, d))
        assert get_parameter(mock.model, f) == pytest.approx(0.5 * get_parameter(plain.model, f))
    assert get_parameter(mock.model, ParameterTarget('joint', 'rh_WRJ1', 'damping')) == 2.0
    assert get_parameter(mock.model, ParameterTarget('joint', 'rh_FFJ4', 'damping')) == \
        get_parameter(plain.model, ParameterTarget('joint', 'rh_FFJ4', 'damping'))
    assert len(mock.applied_overrides) == 12 * 2 + 1
    for sim in (plain, mock):
        sim.set_trajectory(closing(), start_time=0.0)
    a, b = run(plain, 0.8), run(mock, 0.8)
    assert np.abs(a - b).max() > 0.02
    # overrides survive a reload (applied after each compile, not compounded)
    mock.reload()
    d = ParameterTarget('joint', 'rh_FFJ1', 'damping')
    assert get_parameter(mock.model, d) == pytest.approx(3 * get_parameter(plain.model, d))


def test_overrides_from_yaml_text_and_errors():
    rules = ParameterOverrides.from_yaml_text("rh_FFJ1: {damping: x3}\n").rules
    assert [(r.pattern, r.attribute, r.value, r.scale) for r in rules] == [('rh_FFJ1', 'damping', 3.0, True)]
    assert not ParameterOverrides.from_yaml_text('')
    assert not ParameterOverrides.from_yaml_text('{}')
    with pytest.raises(ConfigError, match='unknown attribute'):
        ParameterOverrides({'rh_FFJ1': {'dampin': 1.0}})
    with pytest.raises(ConfigError, match='number or "xF"'):
        ParameterOverrides({'rh_FFJ1': {'damping': 'three'}})
    with pytest.raises(ConfigError, match='not valid YAML'):
        ParameterOverrides.from_yaml_text('rh_FFJ1: {damping: [')
    with pytest.raises(ConfigError, match='no joint matches'):
        LiveSimulation(overrides={'rh_XXJ1': {'damping': 1.0}})
    sim = LiveSimulation()
    model = sim.model
    with pytest.raises(ConfigError, match='no joint matches'):
        sim.reload(overrides={'rh_XXJ1': {'damping': 1.0}})
    assert sim.model is model and not sim.overrides      # old model and overrides kept


def geom_frictions(sim: LiveSimulation) -> dict[str, np.ndarray]:
    """{geom name: friction (sliding, torsional, rolling)} of the simulation's model."""
    return {sim.model.geom(g).name: sim.model.geom_friction[g].copy() for g in range(sim.model.ngeom)}


def test_geom_overrides_set_the_friction_of_exactly_the_matching_geoms():
    """'geom:GLOB' rules glob MJCF geom names: on the MiR250 the drive wheels' contact geoms get their
    sliding friction scaled (and one compounded), a caster's set; every other geom and the torsional
    and rolling coefficients keep the model's values, and a reload applies the rules afresh."""
    mir = builtin_model_path('mir250')
    spec = {'geom:[lr]*_wheel_contact': {'friction': 'x0.6'}, 'geom:left_wheel_contact': {'friction': '*0.5'},
            'geom:fl_caster_wheel_contact': {'friction': 0.8}}
    plain, mock = geom_frictions(LiveSimulation(mir)), LiveSimulation(mir, overrides=spec)
    wanted = {'left_wheel_contact': 0.3 * plain['left_wheel_contact'][0],
              'right_wheel_contact': 0.6 * plain['right_wheel_contact'][0], 'fl_caster_wheel_contact': 0.8}
    assert len(plain) > 10 and all(plain[name][0] != value for name, value in wanted.items())
    for reload in (False, True):
        if reload:
            mock.reload()
        frictions = geom_frictions(mock)
        assert frictions.keys() == plain.keys()
        for name, friction in frictions.items():
            expected = plain[name].copy()
            expected[0] = wanted.get(name, expected[0])
            np.testing.assert_allclose(friction, expected, rtol=1e-12, err_msg=name)
    assert [change[0] for change in mock.applied_overrides] == [
        'geom:left_wheel_contact.friction', 'geom:right_wheel_contact.friction', 'geom:left_wheel_contact.friction',
        'geom:fl_caster_wheel_contact.friction']


def test_geom_overrides_name_bad_attributes_and_unmatched_globs():
    with pytest.raises(ConfigError, match=r"'geom:\*_wheel_contact'.*unknown attribute 'damping'"):
        ParameterOverrides({'geom:*_wheel_contact': {'damping': 1.0}})
    with pytest.raises(ConfigError, match="'left_wheel_joint'.*unknown attribute 'friction'"):
        ParameterOverrides({'left_wheel_joint': {'friction': 1.0}})    # joints have no friction
    with pytest.raises(ConfigError, match='empty geom glob'):
        ParameterOverrides({'geom:': {'friction': 1.0}})
    with pytest.raises(ConfigError, match=r"no geom matches '\*_tyre'"):
        LiveSimulation(builtin_model_path('mir250'), overrides={'geom:*_tyre': {'friction': 0.4}})
    with pytest.raises(ConfigError, match="no joint matches 'left_wheel_contact'"):   # a geom name without geom:
        LiveSimulation(builtin_model_path('mir250'), overrides={'left_wheel_contact': {'damping': 0.4}})


def test_gains_file_is_used(tmp_path):
    stiff = tmp_path / 'gains.yaml'
    stiff.write_text('controller:\n  default: {p: 40.0, i: 0.0, d: 0.5}\n')
    soft, hard = LiveSimulation(gains=GAINS), LiveSimulation(gains=stiff)
    for sim in (soft, hard):
        sim.set_trajectory(closing(), start_time=0.0)
    assert np.abs(run(soft, 0.6) - run(hard, 0.6)).max() > 0.02
    assert hard.controller.current_gains(hard.model)['rh_FFJ3'].p == 40.0
    assert isinstance(ControllerGains.from_yaml(GAINS), ControllerGains)


def test_speed_scaling_stretches_the_scaled_joints_time_only():
    """ur_robot_driver's scaled JTC: at 50 % the scaled joints' trajectory time runs half as fast
    (their motion takes twice as long), the others keep their timing; back at 100 % it runs on."""
    sim = LiveSimulation()
    sim.set_speed_scaling(0.5, ['rh_FFJ3'])
    trajectory = JointTrajectory(['rh_FFJ3', 'rh_MFJ3'], np.array([1.0, 2.0]), np.array([[0.5, 0.5], [1.0, 1.0]]))
    token = sim.set_trajectory(trajectory)
    sim.step(int(round(1.0 / sim.dt)))
    sample = sim.tracking(token)
    free = trajectory.sample(np.array([1.0]))[0][0]
    slow = trajectory.with_start(np.zeros(2)).sample(np.array([0.5]))[0][0]
    assert sample.desired_position[1] == pytest.approx(free[1], abs=1e-9)          # unscaled: on time
    assert sample.desired_position[0] == pytest.approx(slow[0], abs=1e-6)          # scaled: at t = 0.5 s
    assert sample.end_time == pytest.approx(sample.start_time + 2.0 + 0.5, abs=1e-6)  # 0.5 s behind so far
    sim.set_speed_scaling(1.0)
    sim.step(int(round(1.5 / sim.dt)))
    assert sim.trajectory_active                                                  # 0.5 s behind: not done
    sim.step(int(round(0.6 / sim.dt)))
    assert not sim.trajectory_active
    with pytest.raises(ConfigError, match='within 0..1'):
        sim.set_speed_scaling(1.5)
