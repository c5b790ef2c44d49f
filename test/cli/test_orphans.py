"""No orphans: every node ``shadow-twin up`` starts ends when ``up`` ends, however it ends.

``up`` is SIGKILLed (it cannot stop its children itself); each child holds its lifeline
(``shadow_twin.common.lifeline``) and must be gone within 2 s (issue 23). Also: a child
started with a lifeline ends when that lifeline's parent ends, and a process that inherited
the variable but not the pipe ignores it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from support import cell as cell_helpers
import psutil
import pytest

from shadow_twin.common import lifeline

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

#: A SIGKILLed ``up``'s nodes must all have ended within this many s (issue 23).
GONE_WITHIN = 2.0


def running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def kill_up_and_time_its_nodes(ros, tmp_path, args: list[str], nodes: int, topic: str) -> tuple[list[int], float]:
    """Start ``up`` with ``args``, wait until its ``nodes`` children run and ``topic`` flows, SIGKILL
    ``up``; returns the children's pids and how long until the last one had ended (s; inf if one
    was still running 10 s after)."""
    helpers, client = ros
    from control_msgs.action import FollowJointTrajectory
    from sensor_msgs.msg import JointState
    states = client.record(JointState, topic, depth=5)
    up = cell_helpers.up(tmp_path / 'up.log', *args)
    try:
        client.action_client(FollowJointTrajectory, '/twin/follow_joint_trajectory', timeout=90.0)
        assert helpers.wait_until(lambda: states.count() > 0, 60.0), up.output()[-3000:]
        pids = [child.pid for child in psutil.Process(up.pid).children()]
        assert len(pids) == nodes, (pids, up.output()[-3000:])
        os.kill(up.pid, signal.SIGKILL)
        killed = time.monotonic()
        gone = helpers.wait_until(lambda: not any(running(p) for p in pids), 10.0)
        return pids, (time.monotonic() - killed) if gone else float('inf')
    finally:
        up.stop()


@pytest.mark.parametrize('args, nodes', [(['--mock-hardware'], 4), (['--cell', '--mock-hardware'], 6)],
                         ids=['hand', 'cell'])
def test_sigkill_of_up_leaves_no_node_behind(ros, tmp_path, args, nodes):
    pids, took = kill_up_and_time_its_nodes(ros, tmp_path, args, nodes, '/sim/joint_states')
    left = [p for p in pids if running(p)]
    for pid in left:                      # leave nothing behind for the next test either way
        os.kill(pid, signal.SIGKILL)
    assert not left and took < GONE_WITHIN, f'{len(left)} of {nodes} nodes still running; the last ended after ' \
                                            f'{took:.2f} s (target < {GONE_WITHIN:g} s)'


def test_a_child_learns_that_its_parent_ended_and_a_grandchild_without_the_pipe_ignores_it(tmp_path):
    """A middle process starts a child with its lifeline and is SIGKILLed: the child reads
    end-of-file at once. A process given the variable without the descriptor sees no lifeline."""
    marker = tmp_path / 'gone'
    child = ('import os, sys\nfrom shadow_twin.common import lifeline\n'
             f'watching = lifeline.watch_parent(lambda: (open({str(marker)!r}, "w").close(), os._exit(0)))\n'
             'print("watching" if watching else "no lifeline", flush=True)\nimport time; time.sleep(30)\n')
    middle = ('import subprocess, sys, time\nfrom shadow_twin.common import lifeline\n'
              f'p = subprocess.Popen([sys.executable, "-c", {child!r}], **lifeline.child_options())\n'
              'print(p.pid, flush=True)\ntime.sleep(30)\n')
    proc = subprocess.Popen([sys.executable, '-c', middle], stdout=subprocess.PIPE, text=True,
                            **lifeline.child_options())
    try:
        grandchild = int(proc.stdout.readline())
        assert proc.stdout.readline().strip() == 'watching' and not marker.exists()
        proc.kill()
        proc.wait()
        from support import ros as ros_helpers
        assert ros_helpers.wait_until(lambda: not running(grandchild), 10.0) and marker.exists()
    finally:
        proc.kill()
    env = dict(os.environ, **{lifeline.ENV: lifeline.child_options()['env'][lifeline.ENV]})
    out = subprocess.run([sys.executable, '-c', 'from shadow_twin.common import lifeline; '
                          'print(lifeline.inherited_fd(), lifeline.watch_parent(print))'],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ['None', 'False'], out.stderr
    assert lifeline.inherited_fd('7:notanumber') is None and lifeline.inherited_fd('') is None
