"""The twin monitor's drift watch against mock hardware whose finger wears at run time.

The mock hardware bridge (the robot, ``/joint_states``) and the sim bridge (``/sim/...``) run as
processes with the twin monitor (drift window WINDOW s of BUCKET s buckets, state file in a temp
dir). This process drives both with the same sweep of four fingers' J3 and J4, goal after goal,
each goal stamped to start at the same time on both. Once every swept joint has its baseline
(the first full window of its motion), the mock's damping of rh_FFJ3 and rh_FFJ4 is raised
(``overrides`` parameter, then ``~/reload``, as bridge parameters are changed at run time): the
latched ``/twin/drift`` must name exactly those two joints within about a window of the reload
(on the messages' stamps), and never any other joint. Then ``~/reset_drift_baseline`` takes the
worn state as the new baseline, and the state file holds it. Skipped without rclpy or control_msgs.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from support import cell as cell_helpers
import pytest

REPO = Path(__file__).resolve().parents[3]
MONITOR_PARAMS = REPO / 'config' / 'twin_monitor.yaml'
REAL_ACTION = '/rh_trajectory_controller/follow_joint_trajectory'
SIM_ACTION = '/sim/follow_joint_trajectory'
WINDOW, BUCKET = 3.0, 0.5          # s, the drift watch under test
SWEPT = ('rh_FFJ3', 'rh_FFJ4', 'rh_MFJ3', 'rh_MFJ4', 'rh_RFJ3', 'rh_LFJ3')
WORN = ('rh_FFJ3', 'rh_FFJ4')
#: the mock's overrides (config/mock_hardware.yaml) and the worn finger: 12 x the model's damping
WEAR = 'rh_[FMRL]FJ[123]: {damping: x3, frictionloss: x0.5}\nrh_FFJ[34]: {damping: 0.6}\n'
START_TIMEOUT = 30.0
IDLE = 1.5                         # s, drift.idle_time: longer than the pause between two sweeps
CALIBRATE = '/test_calibration/calibrate'     # std_srvs/Trigger standing in for the calibration node's


def stamp_s(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def kv(status) -> dict[str, str]:
    return {v.key: v.value for v in status.values}


def drifted(msg) -> list[str]:
    value = kv(msg.status[0])['drifted_joints']
    return value.split(',') if value else []


def sweep_goal(start_ns: int):
    """One 1.6 s sweep of SWEPT (J3: 0 -> 1.0 -> 0.2 -> 0 rad; J4: 0 -> 0.25 -> -0.25 -> 0 rad)
    starting at ``start_ns`` (ROS time, ns)."""
    from control_msgs.action import FollowJointTrajectory
    from trajectory_msgs.msg import JointTrajectoryPoint

    from shadow_twin.ros.conversions import duration_msg, time_msg_ns
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.header.stamp = time_msg_ns(start_ns)
    goal.trajectory.joint_names = list(SWEPT)
    for t, j3, j4 in ((0.5, 1.0, 0.25), (1.1, 0.2, -0.25), (1.6, 0.0, 0.0)):
        goal.trajectory.points.append(JointTrajectoryPoint(
            positions=[j4 if name.endswith('J4') else j3 for name in SWEPT], time_from_start=duration_msg(t)))
    return goal


class Driver(threading.Thread):
    """Sends the same sweep to the robot and the sim, goal after goal, until stopped."""

    def __init__(self, client) -> None:
        super().__init__(daemon=True)
        self.client, self.stop_event, self.failures, self.goals = client, threading.Event(), [], 0

    def run(self) -> None:
        from control_msgs.action import FollowJointTrajectory
        try:
            for action in (REAL_ACTION, SIM_ACTION):          # servers found before the first goal
                self.client.action_client(FollowJointTrajectory, action, timeout=15.0)
        except TimeoutError as exc:
            self.failures.append(repr(exc))
            return
        while not self.stop_event.is_set():
            # both start 0.4 s from now (the first 2 s: its goal services may still be matching up)
            start_ns = time.time_ns() + (400_000_000 if self.goals else 2_000_000_000)
            try:
                handles = [self.client.send_goal(FollowJointTrajectory, action, sweep_goal(start_ns), timeout=10.0)
                           for action in (REAL_ACTION, SIM_ACTION)]
                for handle in handles:
                    if not handle.accepted:
                        self.failures.append(f'goal rejected ({self.goals} done)')
                    else:
                        self.client.wait_future(handle.get_result_async(), 10.0)
                self.goals += 1
            except Exception as exc:          # reported by the test
                self.failures.append(repr(exc))
                return


@pytest.fixture(scope='module')
def twin(ros, tmp_path_factory):
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from sensor_msgs.msg import JointState

    from support import ros as ros_helpers
    helpers, client = ros
    folder = tmp_path_factory.mktemp('drift')
    state = folder / 'drift.json'
    records = ros_helpers.Recorder()
    client.node.create_subscription(DiagnosticArray, '/twin/drift', records,
                                    QoSProfile(depth=200, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    from std_srvs.srv import Trigger
    calls = []

    def calibrate(request, response):
        calls.append(time.monotonic())
        response.success, response.message = True, 'run 1 started'
        return response
    client.node.create_service(Trigger, CALIBRATE, calibrate)
    errors = client.record(JointState, '/twin/joint_error', depth=10)
    diagnostics = client.record(DiagnosticArray, '/diagnostics', depth=100)
    procs = {**cell_helpers.hand_bridges(folder),
             'monitor': helpers.NodeProcess('shadow_twin.ros.monitor.node', [
                 '--params-file', str(MONITOR_PARAMS), '-p', f'drift.window:={WINDOW}', '-p', f'drift.bucket:={BUCKET}',
                 '-p', 'drift.min_error:=0.01', '-p', f'drift.state_file:={state}', '-p', 'drift.auto_calibrate:=true',
                 '-p', f'drift.idle_time:={IDLE}', '-p', f'drift.calibrate_service:={CALIBRATE}'], folder / 'monitor.log')}
    cell_helpers.wait_started(procs, [errors], START_TIMEOUT)
    driver = Driver(client)
    driver.start()
    yield helpers, client, procs, records, driver, state, diagnostics, calls
    driver.stop_event.set()
    driver.join(timeout=15.0)
    cell_helpers.stop_all(procs)


def wait_for(helpers, records, predicate, timeout: float, what: str, procs):
    """The first /twin/drift message satisfying ``predicate``, or a failure with the logs."""
    found = []

    def seen():
        found[:] = [m for _, m in records.snapshot() if predicate(m)][:1]
        return bool(found)
    assert helpers.wait_until(seen, timeout), f'{what}:\n{kv(records.last().status[0]) if records.count() else None}' \
                                              f'\n{cell_helpers.logs(procs, 1500)}'
    return found[0]


def test_wear_on_two_joints_is_reported_within_a_window_and_no_others(twin):
    from std_srvs.srv import Trigger
    helpers, client, procs, records, driver, state, diagnostics, calls = twin

    def baselined(msg):
        values = kv(msg.status[0])
        return all(values.get(j, '').startswith('trend') and 'baseline -' not in values[j] for j in SWEPT)
    first = wait_for(helpers, records, baselined, 30.0, 'no baseline for every swept joint', procs)
    assert not driver.failures, driver.failures
    status = first.status[0]
    assert status.name == 'twin_monitor: drift' and status.level == b'\x00', status.message
    assert (kv(status)['window_s'], kv(status)['bucket_s']) == ('3', '0.5')
    assert kv(status)['baseline_source'] == 'first full window after start'

    # a full window more of the same motion: no drift
    steady = stamp_s(first.header.stamp) + WINDOW
    wait_for(helpers, records, lambda m: stamp_s(m.header.stamp) > steady, 15.0, 'no drift status', procs)
    assert all(drifted(m) == [] for _, m in records.snapshot()), \
        [kv(m.status[0]) for _, m in records.snapshot() if drifted(m)][:1]

    # the robot's first finger wears: higher damping on FFJ3 and FFJ4, at run time
    assert client.set_parameters('/mock_hardware', {'overrides': WEAR})[0].successful
    reloaded = client.call(Trigger, '/mock_hardware/reload', timeout=15.0)
    assert reloaded.success, reloaded.message
    worn_at = helpers.ros_now()
    report = wait_for(helpers, records, lambda m: set(drifted(m)) == set(WORN), 4 * WINDOW,
                      'the worn joints were not reported', procs)
    assert stamp_s(report.header.stamp) - worn_at <= WINDOW + 2 * BUCKET
    status = report.status[0]
    assert status.level == b'\x01' and 'rh_FFJ3' in status.message and 'rh_FFJ4' in status.message
    for joint in WORN:
        ratio = float(kv(status)[joint].split('(x')[1].split(')')[0])
        assert ratio >= 2.0, kv(status)[joint]
    # no other joint, ever, however far into the wear
    wait_for(helpers, records, lambda m: stamp_s(m.header.stamp) > stamp_s(report.header.stamp) + WINDOW, 15.0,
             'no drift status a window later', procs)
    others = {j for _, m in records.snapshot() for j in drifted(m)} - set(WORN)
    assert not others, others
    assert not driver.failures, driver.failures

    # the per-joint statuses carry the drift and the lag share of the error (0..1)
    since = stamp_s(report.header.stamp)
    latest = [m for _, m in diagnostics.snapshot() if stamp_s(m.header.stamp) > since
              and any(st.name == 'twin_monitor: rh_FFJ3' for st in m.status)]
    assert latest, 'no monitor diagnostics after the drift report'
    ffj3 = kv(next(st for st in latest[-1].status if st.name == 'twin_monitor: rh_FFJ3'))
    assert ffj3['drifted'] == 'true' and float(ffj3['drift_trend_rad']) > 2 * float(ffj3['drift_baseline_rad'])
    assert 0.0 <= float(ffj3['lag_share']) <= 1.0 and abs(float(ffj3['lag_s'])) <= 0.2
    assert float(ffj3['rms_position_error_lag_removed_rad']) <= float(ffj3['rms_position_error_rad']) + 1e-6
    refused = client.set_parameters('/twin_monitor', {'drift.ratio': 1.0})[0]
    assert not refused.successful and 'drift.ratio must be > 1' in refused.reason

    # auto_calibrate: no calibration while the hand moves; one once it stands still for IDLE s
    assert calls == [] and kv(records.last().status[0])['auto_calibrate'] == 'wanted'
    driver.stop_event.set()
    driver.join(timeout=15.0)
    stopped = time.monotonic()
    assert not driver.failures, driver.failures
    assert helpers.wait_until(lambda: calls, 10.0), procs['monitor'].output()[-2000:]
    assert calls[0] > stopped and len(calls) == 1
    assert helpers.wait_until(lambda: 'answered success: run 1 started' in procs['monitor'].output(), 10.0)

    # by hand, moving again: the worn state becomes the baseline, saved at once
    driver = Driver(client)
    driver.start()
    try:
        moving = helpers.ros_now() + 2 * BUCKET
        wait_for(helpers, records, lambda m: stamp_s(m.header.stamp) > moving and all(
            kv(m.status[0]).get(j, '').startswith('trend 0') for j in SWEPT), 15.0, 'no trend after moving again',
                 procs)
        answer = client.call(Trigger, '/twin_monitor/reset_drift_baseline')
    finally:
        driver.stop_event.set()
        driver.join(timeout=15.0)
    assert answer.success and 'current trend of' in answer.message, answer.message
    reset = wait_for(helpers, records, lambda m: kv(m.status[0])['baseline_source'] == 'set by hand', 10.0,
                     'no status after the reset', procs)
    assert drifted(reset) == []
    saved = json.loads(state.read_text())
    assert saved['baseline_source'] == 'set by hand' and set(SWEPT) <= set(saved['baseline'])

    # the sim bridge reloads the same model from another path (as `up --cell` writes the cell's MJCF
    # anew on each start): the baseline stays; a calibrated model (other content): a new baseline
    folder = state.parent
    builtin = (REPO / 'shadow_twin' / 'model' / 'builtin' / 'shadow_hand_e.xml').read_text()
    same, calibrated = folder / 'same.xml', folder / 'hand_calibrated_v1.xml'
    same.write_text(builtin)
    calibrated.write_text(builtin.replace('<mujoco', '<!-- the drift test\'s calibrated model -->\n<mujoco', 1))
    for model in (same, calibrated):
        assert client.set_parameters('/mujoco_bridge', {'model_path': str(model)})[0].successful
        answer = client.call(Trigger, '/mujoco_bridge/reload', timeout=15.0)
        assert answer.success, answer.message
        seen = bridge_runs(helpers, diagnostics, model)
        if model == same:
            after = wait_for(helpers, records, lambda m: stamp_s(m.header.stamp) > seen + 2 * BUCKET, 10.0,
                             'no drift status after the reload', procs)
            assert kv(after.status[0])['baseline_source'] == 'set by hand'
        else:
            after = wait_for(helpers, records, lambda m: kv(m.status[0])['baseline_source'].startswith(
                'calibration installed: '), 10.0, 'no new baseline after the calibrated model', procs)
            assert kv(after.status[0])['baseline_source'].endswith(calibrated.name)
            assert kv(after.status[0])['baseline_model'].endswith(calibrated.name)
            assert not any(kv(after.status[0]).get(j) for j in SWEPT)          # trend and baseline start again
    saved = json.loads(state.read_text())
    assert saved['model_id'].startswith('sha256:') and saved['baseline'] == {}
    assert procs['monitor'].alive()


def bridge_runs(helpers, diagnostics, model: Path) -> float:
    """The stamp (s) of the first status of the sim bridge naming ``model`` as its model_path."""
    found = []

    def seen():
        for _, msg in diagnostics.snapshot():
            for st in msg.status:
                if st.name == 'mujoco_bridge: physics' and Path(kv(st).get('model_path', '')).name == model.name:
                    found[:] = [stamp_s(msg.header.stamp)]
                    return True
        return False
    assert helpers.wait_until(seen, 10.0), f'the sim bridge does not show {model}'
    return found[0]
