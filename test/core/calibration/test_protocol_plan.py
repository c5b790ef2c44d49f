"""The calibration plan of a cell protocol run (shadow_twin.calibration.jobs.plan, ROS-free): one entry per
protocol run in the protocol's order, the validation runs held out, live bags under bags/<RUN>,
offline bags matched to runs by name, and a plan.yaml that reads back (resume)."""

from __future__ import annotations

from pathlib import Path

import pytest

from shadow_twin.calibration.jobs.plan import LIVE, OFFLINE, CalibrationPlan, PlanEntry, protocol_entries, run_entries
from shadow_twin.calibration.jobs.protocol import CellProtocol
from shadow_twin.common.errors import ConfigError, RecordingError
from shadow_twin.common.paths import config_path

SHIPPED = config_path('calibration', 'cell_protocol.yaml')
RUNS = ['AR1', 'AR2', 'AR3', 'IN1', 'IN2', 'CN1', 'CN2', 'CY', 'IY']


@pytest.fixture(scope='module')
def protocol() -> CellProtocol:
    return CellProtocol.from_yaml(SHIPPED)


def plan_of(protocol_file: Path, entries: list[PlanEntry], mode: str = LIVE, **fields) -> CalibrationPlan:
    return CalibrationPlan(run_id='r1', mode=mode, model_path='/m/cell.xml', gains_file='/m/cell.yaml', space_file='',
                           objective_joints=[], settings={'optimizer': 'bo', 'budget': 8, 'workers': 2, 'seed': 0},
                           alignment={'settle_time': 1.0}, entries=entries, protocol=str(protocol_file), **fields)


def test_live_entries_are_the_runs_in_order_with_the_validation_runs_held_out(protocol):
    entries = protocol_entries(protocol)
    assert [e.name for e in entries] == RUNS
    assert [e.bag for e in entries] == [f'bags/{r}' for r in RUNS]
    assert [e.name for e in entries if e.holdout] == ['CN2', 'CY', 'IY']
    assert all(e.trajectory is None for e in entries)


def test_a_protocol_plan_reads_back_and_resumes(protocol, tmp_path):
    plan = plan_of(SHIPPED, protocol_entries(protocol), base_pose_topic='/mocap/base')
    plan.write(tmp_path)
    again = CalibrationPlan.read(tmp_path)
    assert again == plan
    assert [e.name for e in again.pending(tmp_path)] == RUNS
    (tmp_path / 'bags' / 'AR1').mkdir(parents=True)
    assert [e.name for e in again.pending(tmp_path)] == RUNS[1:]
    assert again.base_recording_topics() == {'cmd_vel': '/cmd_vel', 'odom': '/odom', 'sim_odom': '/sim/odom',
                                             'pose': '/mocap/base'}
    assert again.cell_protocol().runs == protocol.runs


def test_a_hand_plan_has_no_protocol_fields_to_fill(tmp_path):
    """Plans written before protocols existed read back unchanged (the new fields have defaults)."""
    import yaml
    plan = plan_of(SHIPPED, protocol_entries(CellProtocol.from_yaml(SHIPPED)))
    data = yaml.safe_load(plan.write(tmp_path).read_text())
    for key in ('protocol', 'base_cmd_vel_topic', 'base_odom_topic', 'base_pose_topic', 'sim_odom_topic',
                'frame_file'):
        data.pop(key)
    data['space_file'] = str(config_path('calibration', 'finger_dynamics.yaml'))
    data['entries'] = [{'name': 'curl_all', 'bag': 'bags/curl_all', 'trajectory': 'x.yaml:curl_all',
                        'holdout': False}]
    (tmp_path / 'plan.yaml').write_text(yaml.safe_dump(data))
    hand = CalibrationPlan.read(tmp_path)
    assert hand.protocol is None and hand.base_odom_topic == '/odom'
    with pytest.raises(ConfigError, match='not a protocol run'):
        hand.cell_protocol()


def test_offline_bags_are_matched_to_runs_by_name(protocol, tmp_path):
    bags = [tmp_path / ('IN1.bag' if r == 'IN1' else r) for r in reversed(RUNS)]
    entries = protocol_entries(protocol, bags)
    assert [e.name for e in entries] == RUNS
    assert entries[RUNS.index('IN1')].bag == str((tmp_path / 'IN1.bag').resolve())
    assert [e.name for e in entries if e.holdout] == ['CN2', 'CY', 'IY']
    plan_of(SHIPPED, entries, mode=OFFLINE)          # valid


def test_a_run_without_a_bag_is_named(protocol, tmp_path):
    bags = [tmp_path / r for r in RUNS if r not in ('CN1', 'IY')]
    with pytest.raises(ConfigError, match=r"protocol run\(s\) \['CN1', 'IY'\] have no bag"):
        protocol_entries(protocol, bags)


def test_a_bag_naming_no_run_or_two_bags_for_one_run_are_refused(protocol, tmp_path):
    bags = [tmp_path / r for r in RUNS]
    with pytest.raises(ConfigError, match=r'XY1.*name no run of the protocol'):
        protocol_entries(protocol, bags + [tmp_path / 'XY1'])
    with pytest.raises(ConfigError, match='both named for protocol run IN1'):
        protocol_entries(protocol, bags + [tmp_path / 'IN1.bag'])


def test_plan_checks_its_protocol_fields(protocol, tmp_path):
    entries = protocol_entries(protocol)
    with pytest.raises(ConfigError, match='are not the runs of protocol'):
        plan_of(SHIPPED, entries[::-1])
    swapped = [PlanEntry(e.name, e.bag, None, not e.holdout) for e in entries]
    with pytest.raises(ConfigError, match='held out must be exactly the validation runs'):
        plan_of(SHIPPED, swapped)
    with pytest.raises(ConfigError, match='live protocol run needs the base\'s odometry topic'):
        plan_of(SHIPPED, entries, base_odom_topic=None)
    with pytest.raises(ConfigError, match='no pose topic'):
        plan_of(SHIPPED, entries, frame_file=str(tmp_path / 'frame.yaml'))
    with pytest.raises(ConfigError, match='does not exist'):
        plan_of(tmp_path / 'missing.yaml', entries)
    with pytest.raises(ConfigError, match='use cell_job_spec'):
        plan_of(SHIPPED, entries).job_spec(tmp_path)


def test_cell_job_spec_names_a_missing_bag(protocol, tmp_path):
    pytest.importorskip('shadow_twin.calibration.jobs.cell_job')
    plan = plan_of(SHIPPED, protocol_entries(protocol))
    with pytest.raises(RecordingError, match="protocol run 'AR1': bag .* does not exist"):
        plan.cell_job_spec(tmp_path)


def test_cell_job_spec_of_an_offline_plan(protocol, tmp_path):
    cell_job = pytest.importorskip('shadow_twin.calibration.jobs.cell_job')
    bags = []
    for r in RUNS:
        (tmp_path / r).mkdir()
        bags.append(tmp_path / r)
    plan = plan_of(SHIPPED, protocol_entries(protocol, bags), mode=OFFLINE, base_pose_topic='/mocap/base',
                   real_topic='/ur/joint_states')
    spec = plan.cell_job_spec(tmp_path / 'run')
    assert isinstance(spec, cell_job.CellJobSpec)
    assert spec.bags == {r: (tmp_path / r).resolve() for r in RUNS}
    assert (spec.topics.cmd_vel, spec.topics.odom, spec.topics.pose, spec.topics.arm) == \
        ('/cmd_vel', '/odom', '/mocap/base', '/ur/joint_states')
    assert (spec.model_path, spec.gains_file, spec.seed, spec.workers) == (Path('/m/cell.xml'), Path('/m/cell.yaml'),
                                                                           0, 2)
    assert spec.protocol.runs == protocol.runs and spec.frame_file is None


def test_attempts_of_each_recording_are_kept_over_a_resumed_run(tmp_path):
    import json
    from shadow_twin.calibration.jobs.plan import ATTEMPTS
    CalibrationPlan.note_attempts(tmp_path, 'AR1', 1)
    CalibrationPlan.note_attempts(tmp_path, 'CY', 2)
    CalibrationPlan.note_attempts(tmp_path, 'AR1', 3)          # recorded anew after a resume
    assert json.loads((tmp_path / ATTEMPTS).read_text()) == {'AR1': 3, 'CY': 2}
    (tmp_path / ATTEMPTS).write_text('[' * 1000)                 # corrupt: the counts start fresh
    CalibrationPlan.note_attempts(tmp_path, 'CN1', 1)
    assert json.loads((tmp_path / ATTEMPTS).read_text()) == {'CN1': 1}


def test_a_contact_plan_holds_its_runs_and_reads_back(tmp_path):
    """A contact protocol's plan: its entries are the runs, the fitted then the held-out ones (held out); it reads
    back with its contact fields; entries that are not the protocol's runs are refused."""
    from shadow_twin.calibration.contacts.protocol import ContactProtocol
    path = config_path('calibration', 'contact_protocol.yaml')
    protocol = ContactProtocol.from_yaml(path)
    runs = [(r.name, False) for r in protocol.runs] + [(r.name, True) for r in protocol.holdout]
    contacts = {'protocol': str(path), 'topics': ['/rh/joint_states', '', '', '/rh/contacts'],
                'place_services': ['/mujoco_bridge/set_entity_state'], 'cell_config': '', 'fit': [], 'start_lead': 1.0}

    def plan(entries):
        return CalibrationPlan(run_id='c1', mode=LIVE, model_path='', gains_file='', space_file='/s.yaml',
                               objective_joints=[], settings={'optimizer': 'auto', 'budget': 45, 'workers': 2,
                                                              'seed': 0},
                               alignment={'settle_time': 1.0, 'max_delay': 0.3, 'stamped_max_delay': 0.0},
                               entries=entries, contacts=contacts)
    written = plan([PlanEntry(n, f'bags/{n}', None, held) for n, held in runs]).write(tmp_path)
    back = CalibrationPlan.read(written.parent)
    assert back.contacts == contacts and back.contact_protocol().fit == protocol.fit
    assert [(e.name, e.holdout) for e in back.entries] == runs and len(back.pending(tmp_path)) == len(runs)
    with pytest.raises(ConfigError, match='are not the runs of contact protocol'):
        plan([PlanEntry(n, f'bags/{n}', None, False) for n, _ in runs])        # the hold-outs fitted
    with pytest.raises(ConfigError, match='is not a contact protocol run'):
        CalibrationPlan(**{**back.__dict__, 'contacts': None}).contact_protocol()


def test_runs_without_a_required_bag_stay_unchecked_and_two_bags_for_one_run_are_refused(tmp_path):
    # the contact protocol's matching: its hold-outs need no bag (one without is not checked)
    runs = [('tilt', False, True), ('push', False, True), ('tilt_slow', True, False)]
    entries = run_entries(runs, [tmp_path / 'push.mcap', tmp_path / 'tilt'])
    assert [(e.name, e.bag, e.holdout) for e in entries] == [
        ('tilt', str((tmp_path / 'tilt').resolve()), False), ('push', str((tmp_path / 'push.mcap').resolve()), False),
        ('tilt_slow', 'bags/tilt_slow', True)]
    with pytest.raises(ConfigError, match='both named for protocol run tilt'):
        run_entries(runs, [tmp_path / 'tilt', tmp_path / 'push', tmp_path / 'tilt.bag'])
    with pytest.raises(ConfigError, match=r"protocol run\(s\) \['push'\] have no bag"):
        run_entries(runs, [tmp_path / 'tilt', tmp_path / 'tilt_slow'])
    with pytest.raises(ConfigError, match=r'lift.*name no run of the protocol'):
        run_entries(runs, [tmp_path / 'tilt', tmp_path / 'push', tmp_path / 'lift'])
    assert [e.bag for e in run_entries(runs)] == ['bags/tilt', 'bags/push', 'bags/tilt_slow']
