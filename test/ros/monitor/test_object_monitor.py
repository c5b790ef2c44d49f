"""The twin monitor's object pose error (objects.enabled): fed a sim and a "motion capture" stream of
PoseStamped (published here, as the sim bridge and the mock hardware would, on stamps the test chooses)
with a known offset, it publishes the error of every real pose on /twin/object_error/<name> and the
object's level in /diagnostics; malformed poses are dropped, counted and said once, and the monitor
runs on. The monitor is a real process on this test run's own ROS domain."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from support import cell as cell_helpers

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

SIM, REAL, ERRORS = '/mujoco_bridge/objects', '/mocap', '/twin/object_error'
RATE = 100.0                  # Hz of both streams (the mock's motion capture)
WINDOW = 0.5                  # s, -p objects.window:=0.5
WARN_POSITION = 0.005         # m, the default objects.warn_position


@pytest.fixture(scope='module')
def watched(ros, tmp_path_factory):
    """The monitor comparing objects can and ball; yields (process, diagnostics and error recorders,
    publishers {side: pub} of the can)."""
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import PoseStamped, Vector3Stamped
    helpers, client = ros
    diagnostics = client.record(DiagnosticArray, '/diagnostics', depth=1000)
    errors = client.record(Vector3Stamped, f'{ERRORS}/can', depth=1000)
    proc = cell_helpers.monitor(tmp_path_factory.mktemp('object_monitor'), 'twin_monitor.yaml', '-p',
                                'objects.enabled:=true', '-p', 'objects.names:=[can, ball]', '-p',
                                f'objects.window:={WINDOW}', '-p', 'diagnostics_period:=0.2', '-p', 'stale_after:=2.0')
    if not helpers.wait_until(lambda: 'objects: can, ball' in proc.output() or not proc.alive(), 30.0):
        proc.stop()
        pytest.fail(f'the monitor did not start its object check:\n{proc.output()}')
    pubs = {side: client.node.create_publisher(PoseStamped, f'{prefix}/can/pose', 10)
            for side, prefix in (('sim', SIM), ('real', REAL))}
    assert helpers.wait_until(lambda: all(p.get_subscription_count() > 0 for p in pubs.values()), 10.0)
    assert helpers.wait_until(lambda: client.node.count_publishers(f'{ERRORS}/can') > 0, 10.0)
    yield proc, diagnostics, errors, pubs
    assert proc.alive(), proc.output()
    assert proc.stop() == 0, proc.output()


def publish(pub, stamp: float, position, quat_wxyz, frame: str = 'world') -> None:
    from geometry_msgs.msg import PoseStamped
    msg = PoseStamped()
    sec = math.floor(stamp)
    msg.header.stamp.sec, msg.header.stamp.nanosec = int(sec), int(round((stamp - sec) * 1e9))
    msg.header.frame_id = frame
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(v) for v in position)
    q = msg.pose.orientation
    q.w, q.x, q.y, q.z = (float(v) for v in quat_wxyz)
    pub.publish(msg)


def about_z(angle: float) -> tuple[float, float, float, float]:
    return math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2)


def streams(pubs, t0: float, n: int, offset, turn: float) -> list[float]:
    """``n`` steps of the can sliding along x at 0.1 m/s and turning about z at 0.5 rad/s: the sim's pose
    at each stamp, then the real one ``offset`` (m) away and turned ``turn`` rad more about z, stamped
    4 ms later (between two sim poses: the sim is interpolated there). Returns the real stamps."""
    stamps = []
    for k in range(n):
        for side, dt, extra, twist in (('sim', 0.0, np.zeros(3), 0.0), ('real', 0.004, np.asarray(offset), turn)):
            t = t0 + k / RATE + dt
            position = np.array([0.5 + 0.1 * (t - t0), 0.2, 0.9]) + extra
            publish(pubs[side], t, position, about_z(0.5 * (t - t0) + twist))
            if side == 'real':
                stamps.append(t)
        time.sleep(0.5 / RATE)        # paced as a stream (the subscriptions keep 10): what is judged is the stamps
    return stamps


def level_of(level) -> int:
    return level[0] if isinstance(level, bytes) else int(level)


def object_statuses(diagnostics, name: str, since: int = 0):
    return [(level_of(s.level), s.message, {v.key: v.value for v in s.values})
            for _, m in diagnostics.snapshot()[since:] for s in m.status if s.name == f'twin_monitor: object {name}']


def test_a_known_offset_is_published_per_real_pose_and_sets_the_level(ros, watched):
    helpers, client = ros
    proc, diagnostics, errors, pubs = watched
    streams(pubs, 1999.0, 10, (0.0, 0.0, 0.0), 0.0)     # the first messages of a new DDS connection may be lost
    assert helpers.wait_until(lambda: errors.count() > 0, 10.0), proc.output()[-2000:]
    # 1 mm and 0.01 rad: OK; the error of every real pose, exactly the offset (linear motion, one axis)
    stamps = streams(pubs, 2000.0, 60, (0.0006, 0.0008, 0.0), 0.01)
    got = {}

    def compared():
        got.update({round(m.header.stamp.sec + m.header.stamp.nanosec * 1e-9, 6): m for _, m in errors.snapshot()})
        return [t for t in stamps if round(t, 6) in got]
    # each real pose compared once the sim has passed its stamp (so not the last); a loaded machine may drop a few
    assert helpers.wait_until(lambda: len(compared()) >= 55, 10.0), (len(compared()), proc.output()[-2000:])
    for t in compared():
        m = got[round(t, 6)]
        assert m.header.frame_id == 'world'
        assert (m.vector.x, m.vector.y, m.vector.z) == (pytest.approx(0.001, abs=1e-6),
                                                        pytest.approx(0.01, abs=1e-6), 0.0)
    count = len(diagnostics.snapshot())
    full = str(int(WINDOW * RATE))                     # comparisons in a full window
    assert helpers.wait_until(lambda: any(st[2]['samples'] == full for st in object_statuses(diagnostics, 'can',
                                                                                             count)), 5.0), \
        object_statuses(diagnostics, 'can', count)[-1:]
    level, message, values = next(st for st in object_statuses(diagnostics, 'can', count) if st[2]['samples'] == full)
    assert level == 0 and message.startswith('RMS error 1.0 mm, 0.57 deg'), message
    assert float(values['rms_position_error_m']) == pytest.approx(0.001, abs=1e-5)
    assert float(values['rms_angle_error_rad']) == pytest.approx(0.01, abs=1e-5)
    assert values['window_s'] == f'{WINDOW:g}' and values['real_dropped'] == values['sim_dropped'] == '0'
    # the ball has sent nothing: STALE
    ball = object_statuses(diagnostics, 'ball', count)[-1]
    assert ball[0] == 3 and 'nothing received' in ball[1] and ball[2]['samples'] == '0'
    # then 6 mm (over the warn level), later stamps: WARN once the window holds them
    streams(pubs, 2001.0, 60, (0.0036, 0.0, 0.0048), 0.0)
    count = len(diagnostics.snapshot())

    def warned():
        return [st for st in object_statuses(diagnostics, 'can', count)
                if abs(float(st[2]['rms_position_error_m'] or 'nan') - 0.006) < 1e-5]
    assert helpers.wait_until(lambda: warned(), 5.0), object_statuses(diagnostics, 'can', count)[-1:]
    level, message, values = warned()[0]
    assert 0.006 >= WARN_POSITION and level == 1 and message.endswith('(position WARN)'), message


def test_malformed_poses_are_dropped_counted_and_said_once(ros, watched):
    helpers, client = ros
    proc, diagnostics, errors, pubs = watched
    t0 = 3000.0
    streams(pubs, t0, 20, (0.0, 0.0, 0.0), 0.0)
    for _ in range(2):                                              # each kind twice: said once
        publish(pubs['real'], t0 + 0.5, (math.nan, 0.0, 0.9), (1.0, 0.0, 0.0, 0.0))          # NaN
        publish(pubs['real'], t0 + 0.5, (0.5, 0.2, 0.9), (0.7, 0.0, 0.0, 0.0))               # not unit
        publish(pubs['real'], t0 + 0.5, (0.5, 0.2, 0.9), (1.0, 0.0, 0.0, 0.0), 'mocap')      # another frame
        publish(pubs['real'], t0 + 0.05, (0.5, 0.2, 0.9), (1.0, 0.0, 0.0, 0.0))              # stamp back
        publish(pubs['sim'], t0 + 0.5, (0.5, math.inf, 0.9), (1.0, 0.0, 0.0, 0.0))           # inf
        time.sleep(0.02)
    before = errors.count()
    streams(pubs, t0 + 1.0, 20, (0.0, 0.0, 0.0), 0.0)                # the monitor goes on comparing
    assert helpers.wait_until(lambda: errors.count() >= before + 19, 10.0), proc.output()[-2000:]
    count = len(diagnostics.snapshot())
    assert helpers.wait_until(lambda: len(object_statuses(diagnostics, 'can', count)) > 0, 5.0)
    values = object_statuses(diagnostics, 'can', count)[-1][2]
    assert values['real_dropped'] == ('not finite: 2, not a unit quaternion: 2, wrong frame: 2, '
                                      'stamp not after the previous: 2')
    assert values['sim_dropped'] == 'not finite: 2'
    log = proc.output()
    assert log.count(f'object can: {REAL}/can/pose: ') == 4 and log.count(f'object can: {SIM}/can/pose: ') == 1
    assert "frame 'mocap', expected 'world'" in log
    assert proc.alive()


def test_object_names_must_make_topic_names():
    from shadow_twin.common.errors import ConfigError
    from shadow_twin.ros.monitor.parameters import object_names
    assert object_names(['', 'can', ' ball ']) == ['can', 'ball']
    for bad, problem in ((['can/lid'], 'part of a topic name'), (['2can'], 'part of a topic name'),
                         (['can', 'can'], 'twice')):
        with pytest.raises(ConfigError, match=problem):
            object_names(bad)
