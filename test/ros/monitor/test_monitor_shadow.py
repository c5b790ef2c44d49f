"""Shadow sources in the twin monitor: a source the sim follows that goes silent makes the joints
it carries STALE (and the base, for a base source), and no others.

The test process publishes the robot's and the sim's joint states (four hand joints, 50 Hz),
both odometries, and three shadow sources: a ``control_msgs/JointTrajectoryControllerState``
of rh_FFJ3 and rh_FFJ4, a ``sensor_msgs/JointState`` of rh_MFJ3, and ``geometry_msgs/TwistStamped``
velocity commands of the base; a fourth listed source never publishes. The ``twin_monitor`` runs
as its own process and finds the sources' types on the ROS graph. Timing is judged on stamps:
the monitor's diagnostics stamped past the last controller_state stamp plus the timeout.
Also the ROS-free :class:`ShadowSources`. Skipped without rclpy or control_msgs.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from shadow_twin.monitoring.shadow_sources import BASE, ShadowSources

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

REPO = Path(__file__).resolve().parents[3]
MONITOR_PARAMS = REPO / 'config' / 'twin_monitor.yaml'
JOINTS = ['rh_FFJ3', 'rh_FFJ4', 'rh_MFJ3', 'rh_LFJ3']
CONTROLLER_STATE = '/test_hand_controller/controller_state'
JOINT_STATES = '/test_follow/joint_states'
CMD_VEL = '/test_base/cmd_vel'
NEVER = '/test_never/joint_trajectory'
TIMEOUT = 0.3              # s, shadow_source_timeout
PERIOD = 0.02              # s, every stream of this test (50 Hz)


def test_sources_learn_their_joints_and_go_stale_on_stamps():
    sources = ShadowSources(['/a', ' ', '/b', '/a', '/c'], timeout=0.5)
    assert list(sources.sources) == ['/a', '/b', '/c']
    sources.heard('/a', 100.0, ['j1', 'j2'], arrival=100.01)
    sources.heard('/a', 100.1, ['j2', 'j3'], arrival=100.11)     # joints are learnt as they come
    sources.heard('/b', 0.0, (BASE,), arrival=100.2)              # no stamp: the arrival time
    assert sources.sources['/a'].joints == ('j1', 'j2', 'j3')
    assert [s.topic for s in sources.stale(100.5)] == ['/c']      # never heard
    assert sources.stale_joints(100.5) == {}                      # /c: no joints known
    stale = sources.stale_joints(100.65)                          # /a silent 0.55 s; /b 0.45 s
    assert set(stale) == {'j1', 'j2', 'j3'} and stale['j1'] == 'shadow source /a silent for 0.6 s'
    assert set(sources.stale_joints(100.75)) == {'j1', 'j2', 'j3', BASE}
    with pytest.raises(ValueError, match='shadow_source_timeout'):
        ShadowSources(['/a'], timeout=0.0)


def statuses(array) -> dict:
    return {s.name: s for s in array.status}


def level(status) -> int:
    return status.level[0] if isinstance(status.level, (bytes, bytearray)) else int(status.level)


def stamp_s(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


class Streams:
    """The test's publishers at 50 Hz on the client's executor; ``silence`` stops one topic."""

    def __init__(self, node) -> None:
        from control_msgs.msg import JointTrajectoryControllerState
        from geometry_msgs.msg import TwistStamped
        from nav_msgs.msg import Odometry
        from sensor_msgs.msg import JointState
        self.node, self.lock, self.silent, self.last = node, threading.Lock(), set(), {}
        self.types = {'/joint_states': JointState, '/sim/joint_states': JointState, '/odom': Odometry,
                      '/sim/odom': Odometry, CONTROLLER_STATE: JointTrajectoryControllerState,
                      JOINT_STATES: JointState, CMD_VEL: TwistStamped}
        self.pubs = {t: node.create_publisher(m, t, 10) for t, m in self.types.items()}
        self.timer = node.create_timer(PERIOD, self.tick)

    def message(self, topic: str, stamp):
        msg = self.types[topic]()
        msg.header.stamp = stamp
        if topic in ('/joint_states', '/sim/joint_states'):
            msg.name, msg.position, msg.velocity = JOINTS, [0.1] * 4, [0.0] * 4
        elif topic == CONTROLLER_STATE:
            msg.joint_names = ['rh_FFJ3', 'rh_FFJ4']
        elif topic == JOINT_STATES:
            msg.name, msg.position = ['rh_MFJ3'], [0.1]
        elif topic in ('/odom', '/sim/odom'):
            msg.header.frame_id = 'odom'
            msg.pose.pose.orientation.w = 1.0
        return msg

    def tick(self) -> None:
        stamp = self.node.get_clock().now().to_msg()
        with self.lock:
            for topic, pub in self.pubs.items():
                if topic not in self.silent:
                    pub.publish(self.message(topic, stamp))
                    self.last[topic] = stamp_s(stamp)

    def silence(self, topic: str) -> float:
        """Stop publishing ``topic``; returns the stamp of its last message (s)."""
        with self.lock:
            self.silent.add(topic)
            return self.last[topic]


@pytest.fixture(scope='module')
def setup(ros, tmp_path_factory):
    from diagnostic_msgs.msg import DiagnosticArray
    helpers, client = ros
    folder = tmp_path_factory.mktemp('shadow')
    streams = Streams(client.node)
    diagnostics = client.record(DiagnosticArray, '/diagnostics', depth=200)
    monitor = helpers.NodeProcess('shadow_twin.ros.monitor.node', [
        '--params-file', str(MONITOR_PARAMS), '-p', 'diagnostics_period:=0.1', '-p', 'real_odom_topic:=/odom',
        '-p', 'sim_odom_topic:=/sim/odom', '-p', f'shadow_source_timeout:={TIMEOUT}',
        '-p', f'shadow_sources:=[{CONTROLLER_STATE}, {JOINT_STATES}, {CMD_VEL}, {NEVER}]',
        '-p', f'drift.state_file:={folder / "drift.json"}'], folder / 'monitor.log')
    yield helpers, streams, diagnostics, monitor
    streams.timer.cancel()
    assert monitor.stop() == 0, monitor.output()[-3000:]


def monitor_diagnostics_after(helpers, recorder, since: float, timeout: float = 15.0):
    """The first twin monitor DiagnosticArray stamped after ``since`` (ROS time, s) in which every
    source this test publishes has been heard (its joints known) and every joint has its status (the
    monitor has matched /joint_states and /sim/joint_states: on a loaded PC DDS may match those
    later than the shadow sources), or AssertionError."""
    found = []

    def seen():
        for _, msg in recorder.snapshot():
            st = statuses(msg)
            shadow = st.get('twin_monitor: shadow sources')
            if shadow is None or stamp_s(msg.header.stamp) <= since:
                continue
            values = {v.key: v.value for v in shadow.values}
            if all('nothing received' not in values[t] for t in (CONTROLLER_STATE, JOINT_STATES, CMD_VEL)) and \
                    all(f'twin_monitor: {j}' in st for j in JOINTS):     # its joint states matched too
                found[:] = [msg]
                return True
        return False
    assert helpers.wait_until(seen, timeout), 'no diagnostics of the monitor with its sources heard'
    return statuses(found[0])


def test_a_silent_source_makes_its_joints_stale_and_no_others(setup):
    helpers, streams, diagnostics, monitor = setup
    # all flowing: only the never-publishing source is silent, and it carries no joint yet
    diag = monitor_diagnostics_after(helpers, diagnostics, helpers.ros_now() + 0.5)
    assert all(level(diag[f'twin_monitor: {j}']) == 0 for j in JOINTS), \
        [diag[f'twin_monitor: {j}'].message for j in JOINTS]
    assert level(diag['twin_monitor: base']) == 0, diag['twin_monitor: base'].message
    shadow = diag['twin_monitor: shadow sources']
    values = {v.key: v.value for v in shadow.values}
    assert level(shadow) == 3 and shadow.message == f'1 of 4 silent: {NEVER}'
    assert values[CONTROLLER_STATE].startswith('control_msgs/msg/JointTrajectoryControllerState; 2 joints '
                                               '(rh_FFJ3, rh_FFJ4)')
    assert values[JOINT_STATES].startswith('sensor_msgs/msg/JointState; 1 joints (rh_MFJ3)')
    assert values[CMD_VEL].startswith('geometry_msgs/msg/TwistStamped; 1 joints (base)')
    assert values[NEVER] == 'type unknown; 0 joints (); nothing received'

    # the controller stops: its two joints go STALE once its last stamp is TIMEOUT old, no others
    last = streams.silence(CONTROLLER_STATE)
    diag = monitor_diagnostics_after(helpers, diagnostics, last + TIMEOUT + 0.05)
    for joint in ('rh_FFJ3', 'rh_FFJ4'):
        st = diag[f'twin_monitor: {joint}']
        assert level(st) == 3 and st.message.startswith(f'shadow source {CONTROLLER_STATE} silent for'), st.message
    assert [j for j in JOINTS if level(diag[f'twin_monitor: {j}']) == 3] == ['rh_FFJ3', 'rh_FFJ4']
    assert level(diag['twin_monitor: base']) == 0
    summary = diag['twin_monitor: sim vs real']
    assert level(summary) == 3 and 'shadow source(s) silent: 2 joints STALE' in summary.message
    assert diag['twin_monitor: shadow sources'].message == f'2 of 4 silent: {CONTROLLER_STATE}, {NEVER}'

    # the base's commands stop too: the base goes STALE; the JointState source's joint stays OK
    last = streams.silence(CMD_VEL)
    diag = monitor_diagnostics_after(helpers, diagnostics, last + TIMEOUT + 0.05)
    assert level(diag['twin_monitor: base']) == 3
    assert diag['twin_monitor: base'].message.startswith(f'shadow source {CMD_VEL} silent for')
    assert level(diag['twin_monitor: rh_MFJ3']) == 0 and level(diag['twin_monitor: rh_LFJ3']) == 0
    assert monitor.alive()
