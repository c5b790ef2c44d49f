"""The DDS transport of the project's processes: Fast DDS over UDPv4 only, no shared memory.

Why (issue 9): Fast DDS 2.14 (rmw_fastrtps, ROS 2 Jazzy) opens another participant's
shared-memory port the first time it sends to it, and the opening runs a health check of
the port that sleeps ``healthy_check_timeout_ms / 3`` (333 ms by default) whenever one of
the port's listeners has not confirmed that it is alive since the port's last check. It
sleeps in the send path, holding the writer's lock and the participant's send lock. So when
a process joins the domain with a reader of one of our topics, the thread that matches it
(e.g. a discovery thread sending the first heartbeat) may sleep 333 ms, every publish of the
process waits behind it, and rclpy's ``publish`` waits without releasing the GIL: every
Python thread stops, and the bridge dropped ~230 ms of sim time. Sending over UDP blocks on
nothing of the kind.

:func:`use_udp_transport` sets this process's environment, before ``rclpy.init``, so that
Fast DDS uses UDPv4 alone, with the same discovery range:

* ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` (or ``ROS_LOCALHOST_ONLY=1``): rmw_fastrtps adds
  a shared-memory transport of its own for this range, so the range becomes SYSTEM_DEFAULT
  and ``config/fastdds/udp_localhost.xml`` (``FASTRTPS_DEFAULT_PROFILES_FILE``) sets up what
  LOCALHOST does (no multicast, 127.0.0.1 as the initial peer, 32 participants) over UDPv4;
* SUBNET, SYSTEM_DEFAULT, OFF or unset: ``FASTDDS_BUILTIN_TRANSPORTS=UDPv4``.

It changes nothing when Fast DDS is configured already (``FASTRTPS_DEFAULT_PROFILES_FILE``
or ``FASTDDS_BUILTIN_TRANSPORTS`` set: ``FASTDDS_BUILTIN_TRANSPORTS=DEFAULT`` keeps shared
memory), for another RMW (``RMW_IMPLEMENTATION``), for an unknown range value, and for
LOCALHOST with ``ROS_STATIC_PEERS`` (the profile does not carry them). Other processes
(``ros2`` tools, rqt) keep shared memory among themselves and talk UDP with ours.
"""

from __future__ import annotations

import os
import random
from collections.abc import MutableMapping

from shadow_twin.common.paths import config_path

#: Profile used for the LOCALHOST discovery range.
LOCALHOST_PROFILE = ('fastdds', 'udp_localhost.xml')
FASTDDS_RMWS = ('', 'rmw_fastrtps_cpp', 'rmw_fastrtps_dynamic_cpp')
RANGES = ('', 'SUBNET', 'SYSTEM_DEFAULT', 'OFF', 'LOCALHOST')


def use_udp_transport(environ: MutableMapping[str, str] | None = None) -> str | None:
    """Make Fast DDS in this process (``environ``: default ``os.environ``) use UDPv4 only, as the
    module doc says; call before ``rclpy.init``. Returns what it did in words, or None when it
    left the environment alone."""
    env = os.environ if environ is None else environ
    if env.get('RMW_IMPLEMENTATION', '') not in FASTDDS_RMWS:
        return None
    if env.get('FASTRTPS_DEFAULT_PROFILES_FILE') or env.get('FASTDDS_BUILTIN_TRANSPORTS'):
        return None
    localhost_only = env.get('ROS_LOCALHOST_ONLY', '') == '1'
    discovery_range = 'LOCALHOST' if localhost_only else env.get('ROS_AUTOMATIC_DISCOVERY_RANGE', '')
    if discovery_range not in RANGES:
        return None
    if discovery_range != 'LOCALHOST':
        env['FASTDDS_BUILTIN_TRANSPORTS'] = 'UDPv4'
        return 'Fast DDS transport UDPv4 only (FASTDDS_BUILTIN_TRANSPORTS=UDPv4), no shared memory'
    if env.get('ROS_STATIC_PEERS', '').strip():
        return None
    try:
        profile = config_path(*LOCALHOST_PROFILE)
    except FileNotFoundError:      # no share directory: leave Fast DDS as it is
        return None
    if not profile.is_file():
        return None
    env['FASTRTPS_DEFAULT_PROFILES_FILE'] = str(profile)
    env['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'SYSTEM_DEFAULT'
    env.pop('ROS_LOCALHOST_ONLY', None)
    return (f'Fast DDS transport UDPv4 only, discovery on localhost ({profile.name}, '
            f'ROS_AUTOMATIC_DISCOVERY_RANGE=SYSTEM_DEFAULT), no shared memory')


def isolate_domain(domain_id: int | None = None, udp: bool = True) -> int:
    """Put this process (and the children it starts) on ROS domain ``domain_id`` (None: a random
    one in 51..101, the top of the range whose ports stay below Linux's ephemeral ports), with
    discovery on this host only and, with ``udp``, Fast DDS over UDP (:func:`use_udp_transport`);
    returns the domain. Must run before ``rclpy.init``."""
    domain = int(domain_id) if domain_id is not None else random.randrange(51, 102)
    os.environ['ROS_DOMAIN_ID'] = str(domain)
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    os.environ.pop('ROS_LOCALHOST_ONLY', None)
    if udp:
        use_udp_transport()
    return domain
