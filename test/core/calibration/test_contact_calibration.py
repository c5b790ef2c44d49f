"""Contact calibration (issue 37; shadow_twin.calibration.contacts): the protocol file and its errors;
the tilt runs on the bridge's live simulation (deterministic, and a grippier can slips later); the
records' residuals, their file form and bad input; the evaluator (zero against its own model's
recording, the same answers on worker processes); a short fit that moves the can's friction towards
the recording's and checks the hold-out; the calibrated scene written as a copy, never over the user's."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from shadow_twin.calibration.contacts.evaluator import ContactEvaluator, HandModel
from shadow_twin.calibration.contacts.fit import ContactFit, calibrate_contacts, onset_degrees, write_calibrated_scene
from shadow_twin.calibration.contacts.protocol import ContactProtocol, TiltRun
from shadow_twin.calibration.contacts.tilt import G, TiltRecord, gravity_at, record_runs, residuals
from shadow_twin.calibration.engine.run_settings import CalibrationSettings
from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.common.errors import ConfigError
from shadow_twin.model.calibratable import ParameterTarget
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.model.scene import SceneConfig, add_objects
from shadow_twin.plots.contact_runs import contact_runs_figure, plot_contact_runs
from shadow_twin.simulation.live.simulation import LiveSimulation

REPO = Path(__file__).resolve().parents[3]
PROTOCOL_FILE = REPO / 'config' / 'calibration' / 'contact_protocol.yaml'
SPACE_FILE = REPO / 'config' / 'calibration' / 'hand_contacts.yaml'
SCENE_FILE = REPO / 'config' / 'scene_hand.yaml'
PROTOCOL_SCENE = REPO / 'config' / 'scene_contacts_hand.yaml'


@pytest.fixture(scope='module')
def protocol():
    """The shipped protocol, shortened: a grip run of 4 s at 15 deg/s, a hold-out of 5 s at 12 deg/s, in the hand
    scene (no stop); the onset at 1 mm (the grip's creep: these are the sim's own runs, without a capture's noise)."""
    shipped = ContactProtocol.from_yaml(PROTOCOL_FILE)
    return dataclasses.replace(shipped, runs=(TiltRun('grip', True, math.radians(15.0), 4.0),),
                               holdout=(TiltRun('grip_holdout', True, math.radians(12.0), 5.0),), onset=0.001,
                               scene=SCENE_FILE)


@pytest.fixture(scope='module')
def scene():
    return SceneConfig.from_yaml(SCENE_FILE)


def with_can(scene: SceneConfig, **changes) -> SceneConfig:
    return SceneConfig(tuple(dataclasses.replace(o, **changes) if o.name == 'can' else o for o in scene.objects))


def recordings(protocol, scene, friction: float) -> dict[str, TiltRecord]:
    """Records of the protocol's runs (and hold-out) with the can's friction at ``friction`` (the model's: 1.0)."""
    sim = LiveSimulation(None, scene=with_can(scene, friction=(friction, 0.005, 0.0)))
    return {r.name: r for r in record_runs(sim, protocol, (*protocol.runs, *protocol.holdout))}


@pytest.fixture(scope='module')
def slippery(protocol, scene):
    return recordings(protocol, scene, 0.5)


def test_the_shipped_protocol_reads_and_bad_files_are_one_line_errors(tmp_path):
    shipped = ContactProtocol.from_yaml(PROTOCOL_FILE)
    assert shipped.scene.resolve() == PROTOCOL_SCENE.resolve() and len(shipped.runs) + len(shipped.holdout) <= 5
    assert {run.grip for run in shipped.runs} == {True, False} and shipped.onset_window == 10 and shipped.effort_change
    assert shipped.fit == ('can_friction', 'can_mass')            # what its runs identify (the targets)
    push = [run for run in shipped.runs if run.push]
    assert len(push) == 1 and push[0].rate == 0.0 and not push[0].grip and 0 < push[0].push_s <= push[0].duration
    body = yaml.safe_load(PROTOCOL_FILE.read_text())
    pushing = {'name': 'p', 'push': {'rh_THJ4': 1.0}, 'push_s': 1.0, 'duration': 2.0}
    cases = [({'grip': {}}, 'grip'), ({'runs': [{'name': 'a', 'grip': True, 'rate': -1.0, 'duration': 1.0}]}, 'rate'),
             ({'runs': [{**pushing, 'push': {'rh_WRJ1': 0.3}}]}, "moves ['rh_WRJ1'], which are not grip joints"),
             ({'runs': [{**pushing, 'grip': True}]}, 'fingers open'), ({'runs': [{**pushing, 'push_s': 3.0}]}, 'longer'),
             ({'runs': [{**pushing, 'push': {}}]}, 'push'), ({'holdout': [pushing]}, 'no slip-onset angle'),
             ({'runs': [{'name': 'a', 'grip': 'yes', 'rate': 1.0, 'duration': 1.0}]}, 'grip'),
             ({'holdout': [{'name': 'tilt_open', 'grip': True, 'rate': 1.0, 'duration': 1.0}]}, 'repeat'),
             ({'runs': [{'name': 'a', 'grip': True, 'rate': 1.0, 'duration': 1.0, 'axis': 'z'}]}, 'axis'),
             ({'effort_change': 'yes'}, 'effort_change'), ({'onset_weight': -1.0}, 'onset_weight'),
             ({'diff_step': 0.1}, 'diff_step: expected a list'), ({'diff_step': [0.1, 0.5]}, 'in (0, 0.5)'),
             ({'fit': 'can_friction'}, "fit: expected a list of the search space's parameter names"),
             ({'fit': ['can_mass', 'can_mass']}, 'fit: names repeat'), ({'speed': 2}, "unknown key(s) ['speed']")]
    for change, words in cases:
        path = tmp_path / 'protocol.yaml'
        path.write_text(yaml.safe_dump({'contact_protocol': {**body['contact_protocol'], **change}}))
        with pytest.raises(ConfigError) as raised:
            ContactProtocol.from_yaml(path)
        assert words in str(raised.value) and '\n' not in str(raised.value), str(raised.value)


def test_a_hold_out_without_a_slip_says_so():
    angles = {'recorded': math.radians(32.6), 'before': math.radians(37.4), 'after': math.radians(32.2)}
    assert onset_degrees(angles) == 'recorded 32.6, before 37.4, after 32.2 deg'
    assert onset_degrees({'recorded': math.nan, 'before': math.nan, 'after': math.nan}) == 'no slip recorded'


def test_gravity_turns_about_the_palm_axis_of_the_run():
    for axis in ('x', '-x', 'y', '-y'):
        assert gravity_at(0.0, axis) == pytest.approx([0.0, 0.0, -G])
        assert np.linalg.norm(gravity_at(0.7, axis)) == pytest.approx(G)
    # turning the hand about +x by 90 deg: gravity along the hand's -y (the fingers tip to the palm's side)
    assert gravity_at(math.pi / 2, 'x') == pytest.approx([0.0, -G, 0.0], abs=1e-12)
    assert gravity_at(math.pi / 2, '-x') == pytest.approx([0.0, G, 0.0], abs=1e-12)
    assert gravity_at(math.pi / 2, 'y') == pytest.approx([G, 0.0, 0.0], abs=1e-12)
    assert gravity_at(math.pi / 2, '-y') == pytest.approx([-G, 0.0, 0.0], abs=1e-12)


def test_runs_are_deterministic_and_a_grippier_can_slips_later(protocol, scene, slippery):
    sim = LiveSimulation(None, scene=with_can(scene, friction=(0.5, 0.005, 0.0)))
    again = record_runs(sim, protocol, protocol.runs)[0]
    np.testing.assert_array_equal(again.position, slippery['grip'].position)
    np.testing.assert_array_equal(again.effort, slippery['grip'].effort)
    grippy = record_runs(LiveSimulation(None, scene=with_can(scene, friction=(1.5, 0.005, 0.0))), protocol,
                         protocol.runs)[0]
    slip, hold = slippery['grip'].onset(protocol.onset), grippy.onset(protocol.onset)
    assert slip < protocol.runs[0].rate * protocol.runs[0].duration - math.radians(5.0)     # it slipped
    assert math.isnan(hold) or hold > slip + math.radians(2.0), (math.degrees(slip), math.degrees(hold))
    assert grippy.effort.shape == (len(grippy.times), len(protocol.grip)) and np.abs(grippy.effort).max() > 0


def test_records_round_trip_and_residuals_are_clipped_and_checked(slippery):
    record = slippery['grip']
    back = TiltRecord.from_dict(yaml.safe_load(yaml.safe_dump(record.to_dict())))
    np.testing.assert_allclose(back.position, record.position) and np.testing.assert_allclose(back.effort, record.effort)
    far = dataclasses.replace(record, position=record.position + 1.0)
    r = residuals(far, record, clip=0.02, effort_weight=1.0)
    assert r.shape == (record.position.size + record.effort.size,) and np.abs(r).max() <= 0.02
    assert np.allclose(r[:record.position.size], 0.02 * np.tanh(50.0))
    with pytest.raises(ValueError, match='not sampled as the recording'):
        residuals(dataclasses.replace(record, times=record.times[:-1], position=record.position[:-1]), record, 0.02)
    # efforts compared by their change since the tilt began: a grip that closed 2 mN m harder is not off, one whose
    # load grows 2 mN m more over the run is; compared as recorded (effort_start 0) both are
    squeezed = dataclasses.replace(record, effort=record.effort + 0.002)
    assert np.abs(residuals(squeezed, record, 0.02, 1.0, effort_start=10)).max() < 1e-12
    assert np.abs(residuals(squeezed, record, 0.02, 1.0, effort_start=0)[record.position.size:]).min() > 1.9e-3
    heavier = dataclasses.replace(record, effort=record.effort + np.linspace(0.0, 0.002, len(record.times))[:, None])
    assert np.abs(residuals(heavier, record, 0.02, 1.0, effort_start=10)[record.position.size:]).max() > 1.5e-3
    bad = record.to_dict()
    bad['position'][3][1] = float('nan')
    with pytest.raises(ValueError, match='not finite'):
        TiltRecord.from_dict(bad)
    with pytest.raises(ValueError, match=r'position \(N, 3\)'):
        TiltRecord.from_dict({**record.to_dict(), 'position': [[0.0, 0.0]] * len(record.times)})


def test_the_evaluator_scores_its_own_models_recording_zero_alike_on_workers(protocol, scene):
    """On workers a set's open-hand and grip runs are replayed apart (one set alone too): the same residuals,
    in the protocol's order of runs, as one process replaying each set whole."""
    twin = TwinModel(None, edit=lambda spec: add_objects(spec, scene))
    space = SearchSpace.from_yaml(SPACE_FILE, twin).subset(['can_friction'])
    protocol = dataclasses.replace(protocol, runs=(TiltRun('open', False, math.radians(15.0), 2.0), *protocol.runs))
    own = {r.name: r for r in record_runs(LiveSimulation(None, scene=scene), protocol, protocol.runs)}
    sets = [{}, space.named_values({'can_friction': 0.4})]

    def evaluate(parameter_sets, nthread):      # a new evaluator each: none reuses another's replays
        evaluator = ContactEvaluator(protocol, own, space, HandModel(scene))
        try:
            return (evaluator.evaluate_scored_residuals(parameter_sets, nthread=nthread),
                    [[record.name for record in records] for records in evaluator.replay(parameter_sets)])
        finally:
            evaluator.close()
    (local, _), (pooled, names), (alone, _) = evaluate(sets, 1), evaluate(sets, 2), evaluate(sets[1:], 2)
    assert names == [['open', 'grip']] * 2
    assert local[0][0].objective == 0.0 and local[0][1].objective > 1e-8
    assert local[0][1].per_joint_mse['open'] > 0 and local[0][1].per_joint_mse['grip'] > 0
    np.testing.assert_array_equal(local[1], pooled[1])
    np.testing.assert_array_equal(local[1][1:], alone[1])
    # the engine's contract: the residuals' squares sum to the objective (least squares' cost is the objective)
    assert float(local[1][1] @ local[1][1]) == pytest.approx(local[0][1].objective, rel=1e-12)


def test_a_set_replayed_again_is_not_simulated_again(protocol, scene):
    """The fit's end replays the model as given and the best set, which the fit has replayed: the evaluator
    keeps each set's records by the set's values and replays only the runs it has not (a replay makes new
    records: the same object back is a record kept)."""
    twin = TwinModel(None, edit=lambda spec: add_objects(spec, scene))
    space = SearchSpace.from_yaml(SPACE_FILE, twin).subset(['can_friction'])
    protocol = dataclasses.replace(protocol, runs=(TiltRun('open', False, math.radians(15.0), 2.0), *protocol.runs))
    own = {r.name: r for r in record_runs(LiveSimulation(None, scene=scene), protocol, protocol.runs)}
    evaluator = ContactEvaluator(protocol, own, space, HandModel(scene))
    first = evaluator.replay([space.named_values({'can_friction': 0.4})], protocol.runs[1:])[0]
    again = evaluator.replay([{}, space.named_values({'can_friction': 0.4})], protocol.runs)
    assert [r.name for r in again[1]] == ['open', 'grip'] and again[1][1] is first[0]      # its grip run kept
    assert again[1][0].name == 'open' and again[0][0] is not again[1][0]
    assert evaluator.replay([{}])[0][0] is again[0][0]                                      # the model as given's
    other = evaluator.replay([space.named_values({'can_friction': 0.5})], protocol.runs[1:])[0][0]
    assert other is not first[0] and not np.array_equal(other.position, first[0].position)  # another set replays


def test_a_replay_does_not_depend_on_the_sets_replayed_before(protocol, scene):
    """A mass scaled to 1.37 kg and back leaves the inertia a rounding off: each set starts from the model."""
    twin = TwinModel(None, edit=lambda spec: add_objects(spec, scene))
    space = SearchSpace.from_yaml(SPACE_FILE, twin).subset(['can_mass'])
    own = {r.name: r for r in record_runs(LiveSimulation(None, scene=scene), protocol, protocol.runs)}
    evaluator = ContactEvaluator(protocol, own, space, HandModel(scene))
    odd = space.named_values({'can_mass': 0.1370123})
    first = evaluator.evaluate_residuals([odd])
    evaluator.evaluate_residuals([space.named_values({'can_mass': 0.0913})])
    evaluator.evaluate_residuals([{}])
    np.testing.assert_array_equal(evaluator.evaluate_residuals([odd]), first)
    assert evaluator.evaluate([{}])[0].objective == 0.0
    with pytest.raises(ValueError, match="no recording of run"):
        ContactEvaluator(protocol, {}, space)


def test_a_short_fit_moves_the_friction_towards_the_recordings_and_checks_the_holdout(protocol, scene, tmp_path):
    twin = TwinModel(None, edit=lambda spec: add_objects(spec, scene))
    space = SearchSpace.from_yaml(SPACE_FILE, twin).subset(['can_friction'])
    recorded = recordings(protocol, scene, 0.75)
    # the efforts as recorded: recordings made by the same simulation close the grip as the replay does, and
    # the squeeze it then holds shows the friction (on the robots it does not repeat: the shipped protocol
    # compares the efforts' changes)
    protocol = dataclasses.replace(protocol, effort_change=False)
    fit = calibrate_contacts(protocol, recorded, space, tmp_path / 'fit', CalibrationSettings(budget=8, workers=2))
    assert fit.result.settings['diff_step'] == protocol.diff_step == (0.1, 0.03)   # the protocol's steps
    assert fit.result.best.objective < 0.5 * fit.result.initial.objective
    assert abs(fit.values['can_friction'] - 0.75) < 0.5 * abs(1.0 - 0.75), fit.values
    assert set(fit.holdout) == {'grip_holdout'}
    before, after = fit.holdout_errors('before')['grip_holdout'], fit.holdout_errors('after')['grip_holdout']
    assert after < before, (math.degrees(before), math.degrees(after))
    # every run replayed as given and fitted, for the figure: the fitted one nearer its recording, and drawn
    assert {which: set(runs) for which, runs in fit.replays.items()} == {
        which: {'grip', 'grip_holdout'} for which in ('before', 'after')}
    off = {w: float(np.abs(fit.replays[w]['grip'].position - recorded['grip'].position).mean()) for w in fit.replays}
    assert off['after'] < off['before'], off
    rates = {run.name: run.rate for run in (*protocol.runs, *protocol.holdout)}
    fig = contact_runs_figure(recorded, fit.replays, ['grip_holdout'], protocol.onset, rates)
    top, bottom = fig.axes[:2], fig.axes[2:]
    assert len(fig.axes) == 4 and [len(ax.lines) for ax in top] == [4, 4] and [len(ax.lines) for ax in bottom] == [3, 3]
    assert '(held out)' in top[1].get_title() and 'tilt 15 deg/s' in top[0].get_title()
    png = plot_contact_runs(tmp_path / 'figs' / 'runs.png', recorded, fit.replays)
    assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_the_calibrated_scene_is_a_copy_with_the_values_and_never_the_users_file(tmp_path):
    source = tmp_path / 'scene.yaml'
    source.write_text(SCENE_FILE.read_text())
    values = {ParameterTarget('geom', 'can', 'friction'): 0.62, ParameterTarget('geom', 'can', 'solref_dampratio'): 0.8,
              ParameterTarget('body', 'can', 'mass'): 0.2}
    out = write_calibrated_scene(source, values, tmp_path / 'calibrated.yaml')
    can = next(o for o in SceneConfig.from_yaml(out).objects if o.name == 'can')
    assert can.friction[0] == pytest.approx(0.62) and can.solref[1] == pytest.approx(0.8) and can.mass == pytest.approx(0.2)
    assert source.read_text() == SCENE_FILE.read_text()
    with pytest.raises(ConfigError, match='refusing to overwrite'):
        write_calibrated_scene(source, values, source)
    with pytest.raises(ConfigError, match="no object named 'mug'"):
        write_calibrated_scene(source, {ParameterTarget('geom', 'mug', 'friction'): 0.5}, tmp_path / 'x.yaml')
    with pytest.raises(ConfigError, match='density'):
        write_calibrated_scene(source, {ParameterTarget('body', 'stand_plate', 'mass'): 0.5}, tmp_path / 'y.yaml')


def test_an_open_run_after_a_grip_run_keeps_the_fingers_open(protocol, scene):
    """A run starts from its grip's settled state with the controllers holding what they held then: the open
    hand's angles, not the grip's targets of the run before (a physics state alone left them closing)."""
    open_run = TiltRun('open', False, math.radians(10.0), 1.0)
    alone = record_runs(LiveSimulation(None, scene=scene), protocol, [open_run])[0]
    sim = LiveSimulation(None, scene=scene)
    after_grip = record_runs(sim, protocol, [protocol.runs[0], open_run])[1]
    np.testing.assert_array_equal(after_grip.position, alone.position)
    assert np.abs(sim.positions(list(protocol.grip))).max() < 0.05        # rad: the fingers stayed open


def test_the_onset_is_the_last_passing_before_the_object_surely_moved():
    tilt = np.radians(np.linspace(0.0, 40.0, 401))
    creep = np.where(tilt < np.radians(30.0), 0.0008 * tilt / np.radians(30.0), 0.0008 + 0.2 * (tilt - np.radians(30.0)))
    position = np.column_stack([np.zeros_like(tilt), -creep, np.zeros_like(tilt)])
    position[100, 1] = -0.0011                    # a noise spike past 1 mm at 10 deg, long before the slide
    record = TiltRecord('r', tilt / np.radians(10.0), tilt, position, np.zeros(3))
    assert math.degrees(record.onset(0.001)) == pytest.approx(30.1, abs=0.15)
    held = dataclasses.replace(record, position=position.clip(-0.0015, None))
    assert math.degrees(held.onset(0.001)) == pytest.approx(10.0, abs=0.15)   # never past 2 mm: the first passing
    assert math.isnan(dataclasses.replace(record, position=position * 0.0).onset(0.001))


def test_a_push_moves_the_can_across_the_plate_and_a_heavier_can_takes_more_effort():
    shipped = ContactProtocol.from_yaml(PROTOCOL_FILE)
    push = next(run for run in shipped.runs if run.push)
    scene = SceneConfig.from_yaml(PROTOCOL_SCENE)
    light = record_runs(LiveSimulation(None, scene=scene), shipped, [push])[0]
    heavy = record_runs(LiveSimulation(None, scene=with_can(scene, mass=0.3)), shipped, [push])[0]
    assert light.tilt.max() == 0.0 and 0.005 < light.displacement()[-1] < 0.03         # m across the plate
    thumb = list(shipped.grip).index('rh_THJ4')
    assert heavy.effort[:, thumb].max() > light.effort[:, thumb].max() + 0.02           # N m: friction x weight


def test_a_holdout_run_without_a_slip_is_judged_by_its_residuals():
    fit = ContactFit({}, {}, holdout={'slid': {'recorded': 0.5, 'before': 0.6, 'after': 0.52},
                                      'held': {'recorded': math.nan, 'before': math.nan, 'after': math.nan}},
                     holdout_rms={'slid': {'before': 0.003, 'after': 0.004}, 'held': {'before': 0.006, 'after': 0.002}})
    assert fit.holdout_errors('after') == {'slid': pytest.approx(0.02)} and fit.holdout_worse() == []
    fit.holdout_rms['held']['after'] = 0.007
    assert fit.holdout_worse() == ['held']
    fit.holdout['slid']['after'] = math.nan                       # a slip the fit lost counts as worse
    assert fit.holdout_worse() == ['slid', 'held']


def test_a_slides_onset_is_a_residual_beside_its_path(protocol, scene):
    """A replay that slides 2 deg late scores worse than its path alone says: one more residual, the onset's
    error x onset_weight x sqrt(R); a replay that never slides counts from its last tilt; no slide recorded, none."""
    tilt = np.radians(np.linspace(0.0, 40.0, 201))
    def sliding(at_deg):
        y = np.where(tilt < np.radians(at_deg), 0.0, -0.015)
        return TiltRecord('grip', tilt / np.radians(10.0), tilt, np.column_stack([0 * y, y, 0 * y]), np.zeros(3))
    space = SearchSpace.from_yaml(SPACE_FILE, TwinModel(None, edit=lambda spec: add_objects(spec, scene))).subset(['can_friction'])
    weighted = dataclasses.replace(protocol, onset_weight=math.degrees(1e-3), effort_weight=0.0)   # 1 mm per deg
    evaluator = ContactEvaluator(weighted, {'grip': sliding(30.0)}, space, HandModel(scene))
    late = evaluator.residuals(sliding(32.0))
    assert late.size == 3 * len(tilt) + 1
    assert late[-1] == pytest.approx(1e-3 * 2.0 * math.sqrt(3 * len(tilt)), rel=0.05)       # m: 2 deg at 1 mm per deg
    assert evaluator.residuals(sliding(90.0))[-1] == pytest.approx(1e-3 * 10.0 * math.sqrt(3 * len(tilt)), rel=0.05)
    plain = ContactEvaluator(dataclasses.replace(weighted, onset_weight=0.0), {'grip': sliding(30.0)}, space, HandModel(scene))
    assert plain.residuals(sliding(32.0)).size == 3 * len(tilt)
    still = ContactEvaluator(weighted, {'grip': sliding(90.0)}, space, HandModel(scene))       # nothing slid: no onset
    assert still.residuals(sliding(32.0)).size == 3 * len(tilt)
