"""Integration tests of the twin monitor: real processes over DDS.

The mock hardware bridge (``/joint_states``, ``/rh_trajectory_controller/...``), the
sim bridge (``/sim/joint_states``) and the ``twin_monitor`` node run as separate
processes on a ROS domain private to this test run. A goal sent only to the mock
hardware moves rh_FFJ3 to 0.5 rad while the sim's stays at 0, and one sent only to
the sim moves rh_LFJ3 to 0.3 rad: known offsets that ``/twin/joint_error`` and
``/diagnostics`` must report (and, while the sim moves, the error must be the sim
interpolated at the real stamp), and ``/diagnostics_agg`` must hold the same statuses in
diagnostic_aggregator's layout. Skipped without rclpy or control_msgs.
"""

from __future__ import annotations

import time
from pathlib import Path

from support import cell as cell_helpers
import numpy as np
import pytest
import yaml

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

REPO = Path(__file__).resolve().parents[3]
MONITOR_PARAMS = REPO / 'config' / 'twin_monitor.yaml'
REAL_ACTION = '/rh_trajectory_controller/follow_joint_trajectory'
SIM_ACTION = '/sim/follow_joint_trajectory'
START_TIMEOUT = 30.0
WINDOW = 0.5                 # s, RMS window of the monitor under test (-p window:=0.5)
OFFSET = 0.5                 # rad, rh_FFJ3 of the mock hardware; the sim's stays at 0
SIM_OFFSET = 0.3             # rad, rh_LFJ3 of the sim; the robot's stays at 0
JOINTS = ('rh_FFJ3', 'rh_LFJ3', 'rh_MFJ3')
REAL_PERIOD = 0.004          # s, the mock hardware's joint_states period (250 Hz)


def stamp_s(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def stamp_key(stamp) -> tuple[int, int]:
    return stamp.sec, stamp.nanosec


def value_of(msg, joint: str, field: str = 'position') -> float:
    return getattr(msg, field)[list(msg.name).index(joint)]


def statuses(array) -> dict:
    return {s.name: s for s in array.status}


def kv(status) -> dict[str, str]:
    return {v.key: v.value for v in status.values}


def level(status) -> int:
    return status.level[0] if isinstance(status.level, (bytes, bytearray)) else int(status.level)


# ------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope='module')
def topics(ros):
    """Recorders of /joint_states, /sim/joint_states, /twin/joint_error, /diagnostics and /diagnostics_agg
    (the 250 Hz streams keep 4 s of backlog: a loaded PC delays the client's executor, and a
    real sample it dropped would fail the stamp check below)."""
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import JointState
    _, client = ros
    return cell_helpers.record_hand_topics(client, depth=1000, extra={
        'error': (JointState, '/twin/joint_error', 200),
        'diagnostics': (DiagnosticArray, '/diagnostics', 50),
        'aggregated': (DiagnosticArray, '/diagnostics_agg', 50)})


@pytest.fixture(scope='module')
def cell(ros, topics, tmp_path_factory):
    """Mock hardware, sim bridge and twin monitor as three processes; yields {name: process}."""
    folder = tmp_path_factory.mktemp('monitor')
    procs = {**cell_helpers.hand_bridges(folder),
             'monitor': cell_helpers.monitor(folder, MONITOR_PARAMS, '-p', f'window:={WINDOW}',
                                             '-p', 'diagnostics_period:=0.25')}
    cell_helpers.wait_started(procs, topics.values(), START_TIMEOUT)
    yield procs
    cell_helpers.stop_all(procs)


def stamped_since(recorder, since: float) -> list:
    """The messages of ``recorder`` stamped after ``since`` (ROS time, s), in arrival order."""
    return [m for _, m in recorder.snapshot() if stamp_s(m.header.stamp) > since]


def latest_monitor_diagnostics(recorder, since: float):
    """The newest DiagnosticArray of the twin monitor stamped after ``since`` (ROS time, s: it
    was computed then, however late a loaded PC handed it over), or None."""
    for msg in reversed(stamped_since(recorder, since)):
        if any(s.name.startswith('twin_monitor:') for s in msg.status):
            return msg
    return None


def aggregated_pair(topics, since: float):
    """(DiagnosticArray of /diagnostics, the /diagnostics_agg published with it) of the twin monitor,
    the newest pair stamped after ``since`` (ROS time, s), or None."""
    diagnostics = {stamp_key(m.header.stamp): m for m in stamped_since(topics['diagnostics'], since)
                   if any(st.name.startswith('twin_monitor:') for st in m.status)}
    for agg in reversed(stamped_since(topics['aggregated'], since)):
        if stamp_key(agg.header.stamp) in diagnostics:
            return diagnostics[stamp_key(agg.header.stamp)], agg
    return None


# --------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize('args, message', [
    (['-p', 'thresholds.warn:=0.3', '-p', 'thresholds.error:=0.1'],
     'error (0.1 rad) must be >= warn (0.3 rad)'),
    (['-p', 'threshold_overrides:="rh_TH*: {error: 0.01}"'], "joints 'rh_TH*' (threshold_overrides)"),
    (['-p', 'thresholds.warn:=0.0'], 'must be > 0 rad'),
    (['-p', 'aggregated_path:=/'], "parameter aggregated_path: an aggregated path needs at least one name"),
    (['-p', 'real_odom_topic:=/odom'], "real_odom_topic ('/odom') and sim_odom_topic (''): set both"),
    (['-p', 'base_thresholds.yaw.warn:=0.5'], 'thresholds of the base yaw (base_thresholds.yaw.warn, .error): '
                                              'error (0.3 rad) must be >= warn (0.5 rad)'),
    (['-p', 'real_joint_states_topics:=[" "]'], 'real_joint_states_topics is empty'),
    (['-p', 'drift.window:=10.0', '-p', 'drift.bucket:=60.0'], 'drift.window (10 s) must be >= drift.bucket (60 s)'),
])
def test_invalid_thresholds_exit_1_with_a_clear_message(ros, tmp_path, args, message):
    proc = cell_helpers.monitor(tmp_path, MONITOR_PARAMS, *args)
    try:
        status = proc.proc.wait(timeout=30)
    finally:
        proc.stop()
    out = proc.log_path.read_text()
    assert status == 1, out
    assert 'cannot start' in out and message in out, out


def goal(joint: str, position: float, seconds: float = 0.4):
    from builtin_interfaces.msg import Duration
    from control_msgs.action import FollowJointTrajectory
    from trajectory_msgs.msg import JointTrajectoryPoint
    out = FollowJointTrajectory.Goal()
    out.trajectory.joint_names = [joint]
    out.trajectory.points = [JointTrajectoryPoint(positions=[position], time_from_start=Duration(
        sec=int(seconds), nanosec=int(round((seconds - int(seconds)) * 1e9))))]
    return out


def test_known_offset_is_reported_on_joint_error_and_diagnostics(ros, cell, topics):
    """The robot (mock hardware) moves rh_FFJ3 to 0.5 rad, the sim rh_LFJ3 to 0.3 rad; each
    side keeps the other joint at 0: errors -0.5 and +0.3 rad, every other joint about 0."""
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    helpers, client = ros
    start = time.monotonic()
    handles = [client.send_goal(FollowJointTrajectory, REAL_ACTION, goal('rh_FFJ3', OFFSET), timeout=15.0),
               client.send_goal(FollowJointTrajectory, SIM_ACTION, goal('rh_LFJ3', SIM_OFFSET), timeout=15.0)]
    for handle in handles:
        assert handle.accepted
        result = client.wait_future(handle.get_result_async(), 15.0)
        assert result.status == GoalStatus.STATUS_SUCCEEDED, result.result.error_string

    resting = []            # the stamp (ROS time, s) of the first states seen at rest

    def at_rest():
        real, sim = topics['real'].last(), topics['sim'].last()
        resting[:] = [max(stamp_s(real.header.stamp), stamp_s(sim.header.stamp))]
        return max(np.abs(real.velocity)) < 2e-3 and max(np.abs(sim.velocity)) < 2e-3
    assert helpers.wait_until(at_rest, 10.0), 'the joints did not come to rest'
    rest = resting[0]
    # a full window of comparisons at rest, and diagnostics computed over it (on their stamps)
    assert helpers.wait_until(lambda: latest_monitor_diagnostics(topics['diagnostics'], rest + WINDOW + 0.05),
                              10.0), cell['monitor'].output()[-2000:]
    helpers.stamped_at(topics['error'], rest + WINDOW)         # the errors of that window are here
    moving = [msg for _, msg in topics['error'].since(start)]
    errors = [msg for msg in stamped_since(topics['error'], rest)]
    assert len(errors) >= 20                                   # 50 Hz over the window (0.5 s)

    # time-aligned: every error carries the stamp of a real sample and equals sim(at that stamp) - real
    reals = {stamp_key(m.header.stamp): m for _, m in topics['real'].snapshot()}
    sims = [m for _, m in topics['sim'].snapshot()]
    sim_t = np.array([stamp_s(m.header.stamp) for m in sims])
    sim_q = {j: np.array([value_of(m, j) for m in sims]) for j in JOINTS}
    sim_v = np.array([value_of(m, 'rh_LFJ3', 'velocity') for m in sims])
    stamps = [stamp_s(m.header.stamp) for m in moving]
    assert all(b > a for a, b in zip(stamps, stamps[1:])), 'stamps must increase'
    # each error is stamped with a real sample's stamp: one this process received, or (a sample it
    # missed while starved on a loaded machine: the bridges' stepping threads run real-time) one on
    # the mock hardware's 250 Hz sampling grid; only the received ones can be compared value by value
    real_times = sorted(stamp_s(m.header.stamp) for m in reals.values())

    def on_real_grid(t: float) -> bool:
        cycles = (t - real_times[0]) / REAL_PERIOD
        return abs(cycles - round(cycles)) * REAL_PERIOD < 2e-6
    deviations = []          # |error - (sim at the real stamp - real)| of rh_LFJ3 while the sim moves it
    compared = 0
    for err in moving:
        real = reals.get(stamp_key(err.header.stamp))
        if real is None:
            assert on_real_grid(stamp_s(err.header.stamp)), f'error stamp {stamp_s(err.header.stamp)} is no real stamp'
            continue
        compared += 1
        assert list(err.name) == list(real.name)           # the real message's order
        assert len(err.effort) == 0
        t = stamp_s(err.header.stamp)
        for joint in JOINTS:
            expected = np.interp(t, sim_t, sim_q[joint]) - value_of(real, joint)
            assert value_of(err, joint) == pytest.approx(expected, abs=0.01), joint
            if joint == 'rh_LFJ3' and abs(np.interp(t, sim_t, sim_v)) > 0.2:
                deviations.append(abs(value_of(err, joint) - expected))
    # while the sim moves (> 0.2 rad/s), the latest sim sample instead of the sim interpolated at
    # the real stamp would be off by up to a millirad (the bridges tick 4 ms apart, out of phase)
    assert compared >= 0.8 * len(moving), f'{compared} of {len(moving)} errors have a received real sample'
    assert len(deviations) >= 5
    assert np.mean(np.array(deviations) < 1e-6) >= 0.9, sorted(deviations)[-10:]
    for err in errors:
        assert value_of(err, 'rh_FFJ3') == pytest.approx(-OFFSET, abs=0.03)
        assert value_of(err, 'rh_LFJ3') == pytest.approx(SIM_OFFSET, abs=0.03)
        assert abs(value_of(err, 'rh_MFJ3')) < 0.02                  # not moved
        assert np.max(np.abs(err.velocity)) < 0.02                   # at rest

    diag = statuses(latest_monitor_diagnostics(topics['diagnostics'], rest + WINDOW + 0.05))
    ffj3, mfj3, summary = diag['twin_monitor: rh_FFJ3'], diag['twin_monitor: rh_MFJ3'], \
        diag['twin_monitor: sim vs real']
    values = kv(ffj3)
    assert level(ffj3) == 2, ffj3.message                         # ERROR: 0.5 rad >= 0.2 rad
    assert float(values['rms_position_error_rad']) == pytest.approx(OFFSET, abs=0.03)
    assert float(values['max_abs_position_error_rad']) == pytest.approx(OFFSET, abs=0.03)
    assert float(values['rms_velocity_error_rad_s']) < 0.02
    assert int(values['samples']) >= 0.5 * WINDOW * 50
    assert (values['window_s'], values['warn_rad'], values['error_rad']) == ('0.5', '0.05', '0.2')
    assert ffj3.hardware_id == 'shadow_twin'
    assert ffj3.message.startswith('RMS error 0.5') and ffj3.message.endswith('rad over 0.5 s')
    assert level(mfj3) == 0, mfj3.message
    assert float(kv(mfj3)['rms_position_error_rad']) < 0.02
    assert level(diag['twin_monitor: rh_LFJ3']) == 2                 # 0.3 rad >= 0.2 rad, but not the worst
    assert level(summary) == 2 and 'rh_FFJ3' in summary.message and kv(summary)['worst_joint'] == 'rh_FFJ3'
    assert '2 ERROR, 0 WARN of 24 joints' in summary.message
    assert len(diag) == 26                                           # 24 joints, the summary, the drift watch
    assert level(diag['twin_monitor: drift']) == 0                   # no baseline yet: OK
    # /diagnostics_agg: the same statuses, as diagnostic_aggregator lays them out for rqt_robot_monitor
    assert helpers.wait_until(lambda: aggregated_pair(topics, rest + WINDOW + 0.05), 10.0)
    diag, agg = (statuses(m) for m in aggregated_pair(topics, rest + WINDOW + 0.05))
    assert list(agg)[0] == '/shadow_twin/sim vs real' and list(agg)[-1] == '/shadow_twin' and len(agg) == 28
    for name, status in diag.items():
        item = agg['/shadow_twin/sim vs real/' + name.removeprefix('twin_monitor: ')]
        assert (item.level, item.message, item.hardware_id, kv(item)) == \
            (status.level, status.message, status.hardware_id, kv(status))
    header, group = agg['/shadow_twin/sim vs real'], agg['/shadow_twin']
    assert (level(header), header.message, level(group), group.message) == (2, 'Error', 2, 'Error')
    assert kv(header) == {name: st.message for name, st in sorted(diag.items())}
    assert kv(group) == {'sim vs real': 'Error'}
    # the rqt perspective's indices assume this order of the published joint states
    from shadow_twin.plots.perspective import published_joints
    assert list(topics['real'].last().name) == list(topics['sim'].last().name) == published_joints()[0]


def test_thresholds_change_at_runtime_and_bad_values_are_refused(ros, cell, topics):
    """Continues from the offsets of the previous test (rh_FFJ3 -0.5 rad, rh_LFJ3 +0.3 rad)."""
    helpers, client = ros
    refused = client.set_parameters('/twin_monitor', {'threshold_overrides': 'rh_FFJ3: {warn: 0.7, error: 0.6}'})
    assert not refused[0].successful and "joints 'rh_FFJ3'" in refused[0].reason
    done = client.set_parameters('/twin_monitor', {'threshold_overrides': 'rh_FF*: {warn: 0.4, error: 0.6}'})
    assert done[0].successful, done[0].reason
    changed = helpers.ros_now()
    assert helpers.wait_until(lambda: latest_monitor_diagnostics(topics['diagnostics'], changed + 0.05), 10.0)
    diag = statuses(latest_monitor_diagnostics(topics['diagnostics'], changed + 0.05))
    ffj3 = diag['twin_monitor: rh_FFJ3']
    assert level(ffj3) == 1, ffj3.message                           # WARN: 0.4 <= 0.5 < 0.6
    assert (kv(ffj3)['warn_rad'], kv(ffj3)['error_rad']) == ('0.4', '0.6')
    summary = diag['twin_monitor: sim vs real']
    # the worst joint is now rh_LFJ3: ERROR (0.3 rad >= 0.2) outranks rh_FFJ3's larger error at WARN
    assert level(summary) == 2 and kv(summary)['worst_joint'] == 'rh_LFJ3' and 'rh_LFJ3' in summary.message
    assert kv(diag['twin_monitor: rh_MFJ3'])['warn_rad'] == '0.05'  # no override


def status(name: str, lvl: int, message: str = 'm'):
    from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
    return DiagnosticStatus(level=bytes([lvl]), name=name, message=message, hardware_id='hw',
                            values=[KeyValue(key='k', value='v')])


def test_aggregated_follows_diagnostic_aggregator(ros):
    """Names, order, levels and header values of a GenericAnalyzer's report (ros/diagnostics:
    generic_analyzer_base.hpp, status_item.hpp removeLeadingNameChaff/getOutputName, analyzer_group.cpp)."""
    from shadow_twin.ros.monitor.node import aggregated
    out = aggregated([status('twin_monitor: b', 1, 'warn'), status('twin_monitor:  a/x', 0, 'ok'),
                      status('other: c', 3, 'stale')], '/top/mid/group', 'twin_monitor')
    # items sorted by their original names; the prefix, one ':' and spaces off; '/' -> ' '
    assert [st.name for st in out] == ['/top/mid/group', '/top/mid/group/other: c', '/top/mid/group/a x',
                                       '/top/mid/group/b', '/top/mid', '/top']
    assert [level(st) for st in out] == [2, 3, 0, 1, 2, 2]          # some STALE, not all: ERROR above
    assert [st.message for st in out] == ['Error', 'stale', 'ok', 'warn', 'Error', 'Error']
    assert kv(out[0]) == {'other: c': 'stale', 'twin_monitor: b': 'warn', 'twin_monitor:  a/x': 'ok'}
    assert (kv(out[2]), out[2].hardware_id) == ({'k': 'v'}, 'hw')
    assert kv(out[4]) == {'group': 'Error'} and kv(out[5]) == {'mid': 'Error'}
    stale = aggregated([status('twin_monitor: a', 3)], 'g', 'twin_monitor')
    assert [(st.name, level(st), st.message) for st in stale] == [('/g', 3, 'Stale'), ('/g/a', 3, 'm')]
    assert [(st.name, level(st), st.message) for st in aggregated([], 'g', 'x')] == [('/g', 3, 'Stale')]


def test_aggregated_publishing_can_be_switched_off(ros):
    from rclpy.parameter import Parameter

    from shadow_twin.ros.monitor.node import TwinMonitor
    _, client = ros
    off = TwinMonitor('twin_monitor_off', context=client.context,
                      parameter_overrides=[Parameter('publish_aggregated', value=False)])
    on = TwinMonitor('twin_monitor_on', context=client.context,
                     parameter_overrides=[Parameter('aggregated_topic', value='/elsewhere_agg')])
    try:
        assert off.aggregated_pub is None and on.aggregated_pub.topic_name == '/elsewhere_agg'
        assert [p.node_name for p in client.node.get_publishers_info_by_topic('/diagnostics_agg')
                if p.node_name.startswith('twin_monitor_')] == []
    finally:
        off.destroy_node()
        on.destroy_node()


def test_real_topics_from_the_list_or_the_deprecated_single_parameter(ros):
    """The hand-only config compares /joint_states and has no base; the deprecated single topic
    replaces the list; the cell config has two real topics and the base."""
    from rclpy.parameter import Parameter

    from shadow_twin.ros.monitor.node import TwinMonitor
    _, client = ros

    def params(path: Path) -> list:
        values = yaml.safe_load(path.read_text())['/**/twin_monitor']['ros__parameters']
        flat = {}

        def walk(prefix, node):
            for key, value in node.items():
                if isinstance(value, dict):
                    walk(f'{prefix}{key}.', value)
                else:
                    flat[prefix + key] = value
        walk('', values)
        return [Parameter(k, value=v) for k, v in flat.items()]
    nodes = {
        'hand': TwinMonitor('twin_monitor_hand', context=client.context, parameter_overrides=params(MONITOR_PARAMS)),
        'single': TwinMonitor('twin_monitor_single', context=client.context, parameter_overrides=[
            Parameter('real_joint_states_topic', value='/robot/joint_states')]),
        'cell': TwinMonitor('twin_monitor_cell', context=client.context,
                            parameter_overrides=params(REPO / 'config' / 'twin_monitor_cell.yaml')),
    }
    try:
        hand, single, cell = nodes['hand'], nodes['single'], nodes['cell']
        assert (hand.real_topics, hand.base, hand.base_error_pub) == (['/joint_states'], None, None)
        assert single.real_topics == ['/robot/joint_states']
        assert cell.real_topics == ['/joint_states', '/rh/joint_states'] and cell.odom_topics == ('/odom', '/sim/odom')
        assert cell.base_error_pub.topic_name == '/twin/base_error'
        th = cell.base.thresholds
        assert (th.position.warn, th.position.error, th.yaw.warn, th.yaw.error) == (0.05, 0.2, 0.1, 0.3)
        assert cell.monitor.thresholds.for_joint('shoulder_lift_joint').warn == 0.01
        assert cell.monitor.thresholds.for_joint('ra_wrist_2_joint').error == 0.05       # with a tf_prefix
        assert cell.monitor.thresholds.for_joint('rh_WRJ1').warn == 0.05
        statuses = [st.name for st in cell.diagnostics().status]
        assert statuses == ['twin_monitor_cell: base', 'twin_monitor_cell: sim vs real',     # nothing received yet
                            'twin_monitor_cell: drift']
        assert [st.name for st in hand.diagnostics().status] == ['twin_monitor_hand: sim vs real',
                                                                  'twin_monitor_hand: drift']
    finally:
        for node in nodes.values():
            node.destroy_node()


def test_diagnostic_aggregator_config_covers_every_status_name():
    """config/diagnostic_aggregator.yaml (for rqt_robot_monitor) groups the statuses this package
    publishes: their names start with the publishing node's name."""
    from calibration_node.node import NODE_NAME as CALIBRATION
    from mujoco_bridge.bridge_node import NODE_NAME as BRIDGE
    from shadow_twin.ros.monitor.node import NODE_NAME as MONITOR
    config = yaml.safe_load((REPO / 'config' / 'diagnostic_aggregator.yaml').read_text())
    analyzers = config['analyzers']['ros__parameters']
    groups = {k: v for k, v in analyzers.items() if isinstance(v, dict)}
    assert all(g['type'] == 'diagnostic_aggregator/GenericAnalyzer' for g in groups.values())
    prefixes = [p for g in groups.values() for p in g['startswith']]
    for name in (f'{MONITOR}: rh_FFJ3', f'{MONITOR}: sim vs real', f'{MONITOR}: base', f'{BRIDGE}: physics',
                 'mock_hardware: physics', f'{CALIBRATION}: calibration'):
        assert sum(name.startswith(p) for p in prefixes) == 1, name
    # the twin_monitor's own /diagnostics_agg puts its statuses where this aggregator would
    monitor_params = yaml.safe_load(MONITOR_PARAMS.read_text())['/**/twin_monitor']['ros__parameters']
    assert monitor_params['aggregated_path'] == f'/{analyzers["path"]}/{groups["tracking"]["path"]}'
    assert groups['tracking']['remove_prefix'] == [MONITOR]
