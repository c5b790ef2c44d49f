"""Integration test of the twin monitor on the cell: real processes over DDS.

The sim bridge runs the cell (MiR250 + cabinet + UR5 + hand, ``shadow-twin model --cell``);
three stand-ins play the robots: ``mock_ur`` (the UR5, ``/joint_states`` at 125 Hz),
``mock_hardware`` (the hand, ``/rh/joint_states`` at 250 Hz) and ``mock_mir`` (the MiR250:
TwistStamped on ``/cmd_vel``, Odometry on ``/odom``); the ``twin_monitor`` runs with
``config/twin_monitor_cell.yaml``. Checked: ``/twin/joint_error`` holds the arm's and the hand's
joints, each topic compared on its own stamps while the sim's arm moves; driving both bases with
the same commands keeps ``/twin/base_error`` small and the ``twin_monitor: base`` status OK;
driving only the sim's base makes it WARN, then ERROR (also in ``/diagnostics_agg``).
Skipped without rclpy or control_msgs.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from support import cell as cell_helpers
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
CONFIG = REPO / 'config'
MONITOR_PARAMS = CONFIG / 'twin_monitor_cell.yaml'
START_TIMEOUT = 60.0
ARM = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint', 'wrist_2_joint', 'wrist_3_joint']
BASE = 'twin_monitor: base'
#: s to wait for a /diagnostics_agg message (published every 0.25 s here): one CI run on a loaded
#: 2-core PC received none for 5 s after the base's ERROR while the monitor ran on (exit 0)
AGGREGATED_TIMEOUT = 15.0
#: The command both bases get: forward speed (m/s) and yaw rate (rad/s), at 20 Hz for DRIVE s.
SPEED, TURN, DRIVE = 0.4, 0.3, 2.0


def stamp_s(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def stamp_key(stamp) -> tuple[int, int]:
    return stamp.sec, stamp.nanosec


def level(status) -> int:
    return status.level[0] if isinstance(status.level, (bytes, bytearray)) else int(status.level)


def kv(status) -> dict[str, str]:
    return {v.key: v.value for v in status.values}


def yaw_of(odom) -> float:
    q = odom.pose.pose.orientation
    return math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))


# ------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope='module')
def topics(ros):
    """Recorders of the robots', the sim's and the monitor's topics (deep enough for 8 s of 250 Hz)."""
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import Vector3Stamped
    from sensor_msgs.msg import JointState
    _, client = ros
    return cell_helpers.record_cell_topics(client, depths={'sim': 2000}, extra={
        'error': (JointState, '/twin/joint_error', 500),
        'base_error': (Vector3Stamped, '/twin/base_error', 500),
        'diagnostics': (DiagnosticArray, '/diagnostics', 100),
        'aggregated': (DiagnosticArray, '/diagnostics_agg', 100)})


@pytest.fixture(scope='module')
def cell(ros, topics, tmp_path_factory):
    """Sim bridge on the cell, mock UR, mock hand, mock MiR and the monitor; yields {name: process}."""
    folder = tmp_path_factory.mktemp('monitor_cell')
    model = cell_helpers.write_cell(folder)
    began = time.monotonic()
    procs = {**cell_helpers.cell_bridges(folder, model),
             'monitor': cell_helpers.monitor(folder, MONITOR_PARAMS, '-p', 'diagnostics_period:=0.25')}
    cell_helpers.wait_started(procs, topics.values(), START_TIMEOUT)
    print(f'cell up after {time.monotonic() - began:.1f} s')
    yield procs
    cell_helpers.stop_all(procs)


def monitor_statuses(topics, since: float, name: str = 'diagnostics') -> dict | None:
    """{name: status} of the newest twin monitor DiagnosticArray on /diagnostics (or /diagnostics_agg)
    received after ``since`` (monotonic s), or None."""
    for _, msg in reversed(topics[name].since(since)):
        found = {s.name: s for s in msg.status}
        if any(n.startswith('twin_monitor') or n.startswith('/shadow_twin') for n in found):
            return found
    return None


def drive(ros, topics: list[str], seconds: float, until=None, stop: bool = False) -> float:
    """Publish the TwistStamped command (SPEED, TURN) on ``topics`` at 20 Hz for ``seconds`` s, or
    until ``until()`` is true, then with ``stop`` a zero command three times (as a base controller
    ends, rather than leaving each base to its own command timeout); returns the monotonic time of
    the first command. The 50 ms sleeps pace the commands, as a base controller's 20 Hz. New
    publishers first wait for their subscribers and send zero commands for 0.3 s: a base whose
    subscription matched them a little later would otherwise miss the first commands the other
    base got (5 cm apart at the end for 0.1 s of them); the time returned is the first zero command's."""
    from geometry_msgs.msg import TwistStamped
    helpers, client = ros
    pubs = [client.node.create_publisher(TwistStamped, topic, 10) for topic in topics]
    assert helpers.wait_until(lambda: all(pub.get_subscription_count() >= 1 for pub in pubs), 10.0), topics
    first = time.monotonic()
    for _ in range(6):
        halt = TwistStamped()
        halt.header.stamp = client.node.get_clock().now().to_msg()
        for pub in pubs:
            pub.publish(halt)
        time.sleep(0.05)
    command = TwistStamped()
    command.twist.linear.x, command.twist.angular.z = SPEED, TURN
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds and not (until is not None and until()):
            command.header.stamp = client.node.get_clock().now().to_msg()
            for pub in pubs:
                pub.publish(command)
            time.sleep(0.05)
        for _ in range(3 if stop else 0):
            halt = TwistStamped()
            halt.header.stamp = client.node.get_clock().now().to_msg()
            for pub in pubs:
                pub.publish(halt)
            time.sleep(0.05)
    finally:
        for pub in pubs:
            client.node.destroy_publisher(pub)
    return first


# --------------------------------------------------------------------------------------- tests
def test_joint_error_holds_the_arm_and_the_hand_each_compared_on_its_own_stamps(ros, cell, topics):
    """The sim's shoulder pan moves 0.3 rad in 0.6 s while the mock UR's stays: every arm error
    is the sim interpolated at one of the arm's own stamps (125 Hz) minus that sample, although
    the message's stamp is mostly the hand's (250 Hz)."""
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    helpers, client = ros
    # every error is checked against the arm samples at or before its stamp: this process must have
    # had them for a while (a CI run sent the goal 1.5 s after the cell was up, and the first errors
    # were stamped before the first arm sample received here)
    assert helpers.wait_until(lambda: all(r.snapshot()[0][0] < time.monotonic() - 1.0
                                          for r in (topics['arm'], topics['hand'], topics['sim'])), 10.0)
    hand_order = list(topics['hand'].last().name)
    assert list(topics['arm'].last().name) == ARM
    start = time.monotonic()
    handle = client.send_goal(FollowJointTrajectory, '/sim/follow_joint_trajectory',
                              helpers.one_point_goal({'shoulder_pan_joint': 0.3}, 0.6), timeout=15.0)
    assert handle.accepted
    result = client.wait_future(handle.get_result_async(), 15.0)
    assert result.status == GoalStatus.STATUS_SUCCEEDED, result.result.error_string
    helpers.stamped_at(topics['error'], helpers.ros_now() + 0.3)     # the errors of 0.3 s at the end are here
    errors = [m for _, m in topics['error'].since(start)]
    assert len(errors) >= 20
    assert all(list(m.name) == ARM + hand_order for m in errors)     # /joint_states' joints, then /rh/joint_states'
    stamps = [stamp_s(m.header.stamp) for m in errors]
    assert all(b > a for a, b in zip(stamps, stamps[1:])), 'stamps must increase'
    arm = sorted(((stamp_s(m.header.stamp), m) for _, m in topics['arm'].snapshot()), key=lambda x: x[0])
    hand = {stamp_key(m.header.stamp) for _, m in topics['hand'].snapshot()}
    arm_keys = {stamp_key(m.header.stamp) for _, m in arm}
    # each error is stamped with a real sample's stamp: one this process received, or (a sample it
    # missed while starved on a loaded machine: the bridges' stepping threads run real-time) one on
    # the same source's sampling grid (125 Hz arm, 250 Hz hand: stamps of states stepped on schedule)
    def on_grid(t: float, received: list[float], period: float) -> bool:
        return bool(received) and abs((t - received[0]) / period - round((t - received[0]) / period)) * period < 2e-6
    hand_times = sorted(stamp_s(m.header.stamp) for _, m in topics['hand'].snapshot())
    arm_times = [t for t, _ in arm]
    assert all(stamp_key(m.header.stamp) in hand | arm_keys or on_grid(stamp_s(m.header.stamp), hand_times, 0.004)
               or on_grid(stamp_s(m.header.stamp), arm_times, 0.008) for m in errors)
    from_hand = sum(stamp_key(m.header.stamp) in hand for m in errors)
    sims = sorted(((stamp_s(m.header.stamp), m) for _, m in topics['sim'].snapshot()), key=lambda x: x[0])
    sim_t = np.array([t for t, _ in sims])
    pan = list(sims[-1][1].name).index('shoulder_pan_joint')
    sim_q = np.array([m.position[pan] for _, m in sims])
    arm_t = np.array([t for t, _ in arm])
    arm_q = np.array([m.position[0] for _, m in arm])
    exact, moving = 0, 0
    for err, t in zip(errors, stamps):
        # the arm's comparison is of one of its samples at or before the message's stamp: the newest
        # few candidates; with the sim moving, only its own stamp gives the value to 1e-6 rad
        k = int(np.searchsorted(arm_t, t, side='right'))
        candidates = [np.interp(arm_t[j], sim_t, sim_q) - arm_q[j] for j in range(max(0, k - 3), k)]
        if abs(np.interp(t, sim_t, np.gradient(sim_q, sim_t))) > 0.1:
            moving += 1
            exact += min(abs(err.position[0] - c) for c in candidates) < 1e-6
        assert min(abs(err.position[0] - c) for c in candidates) < 0.01
    print(f'{len(errors)} joint error messages, {from_hand} stamped by /rh/joint_states; while the sim arm '
          f'moved, {exact} of {moving} arm errors exact at an arm stamp')
    assert moving >= 5 and exact >= 0.9 * moving
    # the hand's comparisons stamp messages too (all of them here, quiet or beside two busy processes:
    # the hand's 250 Hz samples are the newest); which driver's sample is newest is the mocks' timing,
    # not the monitor's: in one fresh-clone CI run on a loaded PC 13 of 47
    assert from_hand >= 1
    assert abs(errors[-1].position[0] - 0.3) < 0.02                        # sim 0.3 rad, the mock UR's at 0

    settled = time.monotonic()
    assert helpers.wait_until(lambda: monitor_statuses(topics, settled + 0.05), 10.0)
    diag = monitor_statuses(topics, settled + 0.05)
    for joint in ARM:
        assert (kv(diag[f'twin_monitor: {joint}'])['warn_rad'], kv(diag[f'twin_monitor: {joint}'])['error_rad']) \
            == ('0.01', '0.05'), joint                                     # the arm's thresholds
    assert kv(diag['twin_monitor: rh_FFJ3'])['warn_rad'] == '0.05'
    assert BASE in diag and kv(diag['twin_monitor: sim vs real'])['joints'] == '30'
    assert kv(diag['twin_monitor: sim vs real'])['real_topics'] == '/joint_states, /rh/joint_states'
    assert helpers.wait_until(lambda: monitor_statuses(topics, settled + 0.05, 'aggregated'), AGGREGATED_TIMEOUT)
    agg = monitor_statuses(topics, settled + 0.05, 'aggregated')
    assert {'/shadow_twin/sim vs real/base', '/shadow_twin/sim vs real/shoulder_pan_joint',
            '/shadow_twin/sim vs real/rh_FFJ3', '/shadow_twin/sim vs real', '/shadow_twin'} <= set(agg)


def test_same_commands_to_both_bases_keep_the_base_error_small(ros, cell, topics):
    helpers, _ = ros
    odom0, sim0 = topics['odom'].last(), topics['sim_odom'].last()
    began, start = helpers.ros_now(), time.monotonic()     # the window's start: on stamps, and received
    drive(ros, ['/cmd_vel', '/sim/cmd_vel'], DRIVE, stop=True)
    assert helpers.wait_until(lambda: abs(topics['odom'].last().twist.twist.linear.x) < 0.005
                              and abs(topics['sim_odom'].last().twist.twist.linear.x) < 0.005, 10.0)
    stopped = time.monotonic()
    ended = helpers.ros_now() - 0.2        # the window of odometry (on its stamps) each error must cover
    helpers.stamped_at(topics['base_error'], ended)         # the monitor's errors of the window are here
    odom1, sim1 = topics['odom'].last(), topics['sim_odom'].last()
    for a, b in ((odom0, odom1), (sim0, sim1)):                             # both moved
        travelled = math.hypot(b.pose.pose.position.x - a.pose.pose.position.x,
                               b.pose.pose.position.y - a.pose.pose.position.y)
        assert 0.5 < travelled < 1.0, travelled
    # time-aligned: each error is the sim odometry interpolated at a real odometry stamp minus that odometry
    errors = [m for _, m in topics['base_error'].since(start)]
    reals = {stamp_key(m.header.stamp): m for _, m in topics['odom'].snapshot()}
    sims = sorted(((stamp_s(m.header.stamp), m) for _, m in topics['sim_odom'].snapshot()), key=lambda x: x[0])
    sim_t = np.array([t for t, _ in sims])
    sim_x = np.array([m.pose.pose.position.x for _, m in sims])
    sim_yaw = np.unwrap([yaw_of(m) for _, m in sims])
    odom_stamps = {stamp_key(m.header.stamp) for _, m in topics['odom'].snapshot()
                   if began <= stamp_s(m.header.stamp) < ended}
    compared = odom_stamps & {stamp_key(m.header.stamp) for m in errors}
    # one error per /odom message (50 Hz, counted on its stamps)
    assert len(compared) >= 0.95 * len(odom_stamps) >= 0.8 * 50 * (ended - began), (len(compared), len(odom_stamps))
    for err in errors:
        assert err.header.frame_id == 'odom'
        real = reals[stamp_key(err.header.stamp)]
        t = stamp_s(err.header.stamp)
        assert err.vector.x == pytest.approx(np.interp(t, sim_t, sim_x) - real.pose.pose.position.x, abs=1e-6)
        dyaw = np.interp(t, sim_t, sim_yaw) - yaw_of(real)
        assert err.vector.z == pytest.approx(math.remainder(dyaw, 2 * math.pi), abs=1e-6)
    position = [math.hypot(m.vector.x, m.vector.y) for m in errors]
    yaw = [abs(m.vector.z) for m in errors]
    assert helpers.wait_until(lambda: monitor_statuses(topics, stopped + 0.05), 10.0)
    base = monitor_statuses(topics, stopped + 0.05)[BASE]
    values = kv(base)
    print(f'same commands ({SPEED} m/s, {TURN} rad/s for {DRIVE} s): base error at the end '
          f'{position[-1]:.3f} m, {yaw[-1]:.3f} rad; largest {max(position):.3f} m, {max(yaw):.3f} rad; '
          f'RMS over the last {values["window_s"]} s {float(values["rms_position_error_m"]):.3f} m, '
          f'{float(values["rms_yaw_error_rad"]):.3f} rad: {base.message}')
    assert position[-1] < 0.05 and float(values['rms_position_error_m']) < 0.05
    assert yaw[-1] < 0.1 and float(values['rms_yaw_error_rad']) < 0.1
    assert level(base) == 0, base.message
    assert (values['position_warn_m'], values['yaw_warn_rad'], values['real_odom_frame'],
            values['sim_odom_frame']) == ('0.05', '0.1', 'odom', 'sim/odom')


def test_driving_only_the_sim_base_makes_the_base_warn_then_error(ros, cell, topics):
    helpers, _ = ros
    reached: dict[int, float] = {}      # level: s from the first command to the status, on the stamps
    start, began = time.monotonic(), helpers.ros_now()

    def watch() -> bool:
        for _, msg in topics['diagnostics'].since(start):
            found = {st.name: st for st in msg.status}
            if BASE in found:
                reached.setdefault(level(found[BASE]), stamp_s(msg.header.stamp) - began)
        return 2 in reached
    drive(ros, ['/sim/cmd_vel'], 6.0, until=watch)
    last = topics['base_error'].last()
    print(f'only the sim base driven: WARN after {reached.get(1, math.nan):.2f} s, ERROR after '
          f'{reached.get(2, math.nan):.2f} s (window 2 s); base error then '
          f'{math.hypot(last.vector.x, last.vector.y):.3f} m, {last.vector.z:.3f} rad')
    assert 1 in reached and 2 in reached and reached[1] < reached[2] < 4.0, reached
    assert math.hypot(last.vector.x, last.vector.y) > 0.2
    since = time.monotonic()
    assert helpers.wait_until(lambda: monitor_statuses(topics, since, 'aggregated'), AGGREGATED_TIMEOUT)
    agg = monitor_statuses(topics, since, 'aggregated')
    assert level(agg['/shadow_twin/sim vs real/base']) == 2 and level(agg['/shadow_twin/sim vs real']) == 2
    assert 'position ERROR' in agg['/shadow_twin/sim vs real/base'].message
