"""shadow_twin.ros.dds: Fast DDS over UDPv4 only, no shared-memory transport (issue 9).

The environment rules run on plain dicts; one test starts a process that applies them with
the LOCALHOST range of this test run and checks that it maps no shared-memory port and still
finds this process's node.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from shadow_twin.ros.dds import use_udp_transport

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / 'config' / 'fastdds' / 'udp_localhost.xml'


@pytest.mark.parametrize('discovery_range', ['', 'SUBNET', 'SYSTEM_DEFAULT', 'OFF'])
def test_ranges_without_an_rmw_transport_of_their_own_get_the_builtin_udp_transport(discovery_range):
    env = {'ROS_AUTOMATIC_DISCOVERY_RANGE': discovery_range} if discovery_range else {}
    assert 'UDPv4 only' in use_udp_transport(env)
    assert env == {**({'ROS_AUTOMATIC_DISCOVERY_RANGE': discovery_range} if discovery_range else {}),
                   'FASTDDS_BUILTIN_TRANSPORTS': 'UDPv4'}


@pytest.mark.parametrize('env', [{'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST'},
                                 {'ROS_LOCALHOST_ONLY': '1'},
                                 {'ROS_LOCALHOST_ONLY': '1', 'ROS_AUTOMATIC_DISCOVERY_RANGE': 'SUBNET'}])
def test_localhost_gets_the_udp_localhost_profile_and_the_system_default_range(env):
    assert 'discovery on localhost' in use_udp_transport(env)
    assert env == {'ROS_AUTOMATIC_DISCOVERY_RANGE': 'SYSTEM_DEFAULT', 'FASTRTPS_DEFAULT_PROFILES_FILE': str(PROFILE)}
    assert PROFILE.is_file()


@pytest.mark.parametrize('env', [{'FASTDDS_BUILTIN_TRANSPORTS': 'DEFAULT'},           # the opt-out
                                 {'FASTRTPS_DEFAULT_PROFILES_FILE': '/some/profile.xml'},
                                 {'RMW_IMPLEMENTATION': 'rmw_cyclonedds_cpp'},
                                 {'ROS_AUTOMATIC_DISCOVERY_RANGE': 'localhost'},     # unknown to rcl
                                 {'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST', 'ROS_STATIC_PEERS': 'host2'}])
def test_a_configured_middleware_is_left_alone(env):
    before = dict(env)
    assert use_udp_transport(env) is None
    assert env == before


def test_a_localhost_process_maps_no_shared_memory_and_finds_its_peers(ros):
    """A child process on this run's domain (LOCALHOST, see ros_helpers.isolate_domain) applies
    use_udp_transport, then waits for this process's subscription to its topic."""
    helpers, client = ros
    from std_msgs.msg import String
    got = client.record(String, '/dds_test/chatter')
    script = textwrap.dedent('''
        import sys, time
        from shadow_twin.ros.dds import use_udp_transport
        print(use_udp_transport(), flush=True)
        import rclpy
        from std_msgs.msg import String
        rclpy.init()
        node = rclpy.create_node('dds_test_talker')
        pub = node.create_publisher(String, '/dds_test/chatter', 10)
        deadline = time.monotonic() + 15.0
        while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        for _ in range(20):
            pub.publish(String(data='hello'))
            time.sleep(0.02)
        maps = open('/proc/self/maps').read().splitlines()
        print('shm:', sum('/dev/shm/fastrtps' in line for line in maps), flush=True)
        node.destroy_node()
        rclpy.shutdown()
    ''')
    out = subprocess.run([helpers.PYTHON, '-c', script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert 'discovery on localhost' in out.stdout
    assert 'shm: 0' in out.stdout, out.stdout
    assert helpers.wait_until(lambda: got.count() > 0, 10.0), out.stdout + out.stderr
