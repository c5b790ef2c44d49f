"""Benchmark: how much CPU the running cell takes, idle and during a goal (issue 23).

Starts ``shadow-twin up --cell --mock-hardware`` as a new user would (a separate process
group, on a private ROS domain), waits until the twin's action server answers and every
node has run ``--settle`` s, then measures from ``/proc/<pid>/stat`` (utime + stime):

* **idle**, over ``--idle`` s (30): each process's CPU as a share of one core. Targets:
  the twin's own processes (sim bridge, twin server, twin monitor) at most 60 % of one
  core together, the three mock hardware bridges (hand, UR5, MiR) at most 40 % together.
* **during a goal**: one 10 s goal moving the arm (all six joints) and the base (0.5 m
  ahead) together, sent to ``/twin/follow_joint_trajectory``; each process's CPU over the
  goal, and the sim bridge's publish-period jitter at 250 Hz: |receive interval - 4 ms|
  of ``/sim/joint_states`` as received by lean subscriber processes
  (``benchmarks/bridge.py --subscriber``, the method of the bridge benchmark), p50/p99/max:
  one at normal priority (as ``benchmarks/bridge.py``), one under SCHED_FIFO 60. Target p99
  < 2 ms, judged on the real-time receiver: on this 2-core machine, with eight busy
  processes, the normal one measures mostly when the kernel next ran it (idle cell, 10 s:
  p99 1.1-1.3 ms, max 2.6-6.4 ms at normal priority against p99 0.74-0.81 ms, max 1.2 ms
  under SCHED_FIFO, the same bridge at the same time). Both are printed; where SCHED_FIFO is
  refused the normal one is judged. The goal must succeed.

The CPU figures are shares of one core measured over the same window on this machine;
the report also prints what every other process on the machine used meanwhile, since
other load shows in the jitter. Exit status 1 when a target is missed.

Usage: .venv/bin/python benchmarks/idle.py [--idle 30] [--goal 10] [--settle 5]
Not part of the tests. Needs rclpy and control_msgs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / 'test'), str(REPO / 'benchmarks')]

from support import ros as ros_helpers  # noqa: E402  (after the path set-up)
from bridge import all_cpu_seconds, cpu_seconds, percentiles  # noqa: E402
from support.scenarios.cell import (ARM, TWIN_ACTION, base_points, make_goal, pose_of, result_of,  # noqa: E402
                                    send, straight)

#: Targets, shares of one core (issue 23, on the 2-core development machine).
TWIN_IDLE_MAX = 0.60
MOCKS_IDLE_MAX = 0.40
JITTER_P99_MAX_MS = 2.0
SIM_RATE = 250.0
#: SCHED_FIFO priority of the real-time receiver: above the bridge's stepping thread (50), so
#: that what it measures is when the bridge published, not when the receiver was next run.
RECEIVER_PRIORITY = 60
TWIN_PROCESSES = ('sim bridge', 'twin server', 'twin monitor')
MOCK_PROCESSES = ('mock hand', 'mock UR5', 'mock MiR')


def label_of(cmdline: str) -> str | None:
    """Which of ``up``'s nodes a command line runs (None: not one of them)."""
    if 'shadow_twin.ros.twin.server' in cmdline:
        return 'twin server'
    if 'shadow_twin.ros.monitor.node' in cmdline:
        return 'twin monitor'
    if 'mujoco_bridge' in cmdline:
        for remap, name in (('__node:=mock_hardware', 'mock hand'), ('__node:=mock_ur', 'mock UR5'),
                            ('__node:=mock_mir', 'mock MiR')):
            if remap in cmdline:
                return name
        return 'sim bridge'
    return None


def children_of(parent: int) -> dict[str, int]:
    """{label: pid} of the node processes whose parent is ``parent``."""
    children = {label_of(' '.join(child.cmdline())): child.pid for child in psutil.Process(parent).children()}
    return {label: pid for label, pid in children.items() if label}


def cpu_over(pids: dict[str, int], action) -> tuple[dict[str, float], float, float]:
    """Run ``action()``; returns ({label: CPU share of one core over it}, share used by every other
    process on the machine meanwhile, its wall time in s)."""
    before, every0, t0 = {k: cpu_seconds(p) for k, p in pids.items()}, all_cpu_seconds(), time.monotonic()
    action()
    after, every1, t1 = {k: cpu_seconds(p) for k, p in pids.items()}, all_cpu_seconds(), time.monotonic()
    wall = t1 - t0
    ours = set(pids.values()) | {os.getpid()}
    others = sum(every1[p] - every0.get(p, 0.0) for p in every1 if p not in ours)
    return {k: (after[k] - before[k]) / wall for k in pids}, others / wall, wall


def print_cpu(title: str, shares: dict[str, float], others: float, wall: float) -> None:
    print(f'{title} ({wall:.1f} s), CPU as a share of one core:')
    for label in TWIN_PROCESSES + MOCK_PROCESSES + ('up',):
        if label in shares:
            print(f'  {label:13s} {100 * shares[label]:6.1f} %')
    print(f'  {"twin (3)":13s} {100 * sum(shares.get(k, 0.0) for k in TWIN_PROCESSES):6.1f} %   '
          f'mocks (3) {100 * sum(shares.get(k, 0.0) for k in MOCK_PROCESSES):.1f} %   '
          f'everything else on the machine {100 * others:.1f} %')


def realtime() -> None:     # runs in the child between fork and exec
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RECEIVER_PRIORITY))


def start_receiver(out: Path, seconds: float, real_time: bool) -> subprocess.Popen | None:
    """A lean subscriber process on /sim/joint_states saving its receive times to ``out``; with
    ``real_time`` under SCHED_FIFO (None when that is refused)."""
    command = [ros_helpers.PYTHON, str(REPO / 'benchmarks' / 'bridge.py'), '--subscriber', '/sim/joint_states',
               str(seconds), str(out)]
    try:
        return subprocess.Popen(command, cwd=REPO, preexec_fn=realtime if real_time else None)
    except (subprocess.SubprocessError, PermissionError):
        return None


def jitter_of(path: Path) -> dict:
    """Period jitter figures (ms) of the receive times saved at ``path``, its first second skipped
    (the subscriber's start-up)."""
    received = np.load(path)[int(SIM_RATE):]
    jitter = np.abs(np.diff(received) - 1.0 / SIM_RATE) * 1e3
    return {'p': percentiles(jitter, (50, 99)), 'max': float(jitter.max()), 'messages': len(received)}


def goal_with_jitter(client, odom, seconds: float, folder: Path) -> dict:
    """Send the arm + base goal of ``seconds`` s while two lean subscriber processes receive
    /sim/joint_states, one at normal priority and one under SCHED_FIFO; returns the goal's status
    and the jitter figures of each receiver ({'normal': ..., 'real-time': ...})."""
    receivers = {kind: start_receiver(folder / f'received_{kind}.npy', seconds, kind == 'real-time')
                 for kind in ('normal', 'real-time')}
    time.sleep(1.0)     # deliberate: the subscribers' discovery; their first second is skipped
    start = pose_of(odom.last())
    goal = make_goal({name: 0.5 * value for name, value in ARM.items()}, joint_seconds=seconds,
                     base=base_points(start, straight(0.5), seconds))
    handle = send(client, goal)
    status = result_of(client, handle, timeout=seconds + 30.0)[0] if handle.accepted else 0
    out = {'status': status}
    for kind, proc in receivers.items():
        if proc is not None and proc.wait(timeout=60.0) == 0:
            out[kind] = jitter_of(folder / f'received_{kind}.npy')
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--idle', type=float, default=30.0, help='idle window, s')
    parser.add_argument('--goal', type=float, default=10.0, help="the goal's duration, s")
    parser.add_argument('--settle', type=float, default=5.0, help='wait after start-up before measuring, s')
    args = parser.parse_args()
    from nav_msgs.msg import Odometry

    from control_msgs.action import FollowJointTrajectory
    domain = ros_helpers.isolate_domain()
    folder = Path(tempfile.mkdtemp(prefix='idle_benchmark_'))
    print(f'idle benchmark: shadow-twin up --cell --mock-hardware, {os.cpu_count()} cores, ROS domain {domain}, '
          f'logs in {folder}')
    client = ros_helpers.RosClient('idle_benchmark', domain_id=domain)
    up = ros_helpers.NodeProcess(None, [], folder / 'up.log', command=[
        ros_helpers.PYTHON, '-m', 'shadow_twin.cli', 'up', '--cell', '--mock-hardware'])
    misses = []
    try:
        odom = client.record(Odometry, '/odom', depth=5)
        client.action_client(FollowJointTrajectory, TWIN_ACTION, timeout=90.0)
        if not ros_helpers.wait_until(lambda: odom.count() > 0, 30.0):
            raise RuntimeError(f'no /odom from the cell:\n{up.output()[-3000:]}')
        time.sleep(args.settle)      # deliberate: start-up work (discovery, the first anchoring) is not idle
        pids = children_of(up.proc.pid)
        if set(pids) != set(TWIN_PROCESSES + MOCK_PROCESSES):
            raise RuntimeError(f'expected the six nodes as children of up, found {sorted(pids)}')
        pids['up'] = up.proc.pid
        idle, others, wall = cpu_over(pids, lambda: time.sleep(args.idle))  # deliberate: the idle window
        print_cpu('idle', idle, others, wall)
        twin, mocks = (sum(idle[k] for k in group) for group in (TWIN_PROCESSES, MOCK_PROCESSES))
        if twin > TWIN_IDLE_MAX:
            misses.append(f'idle twin {100 * twin:.0f} % > {100 * TWIN_IDLE_MAX:.0f} %')
        if mocks > MOCKS_IDLE_MAX:
            misses.append(f'idle mocks {100 * mocks:.0f} % > {100 * MOCKS_IDLE_MAX:.0f} %')
        print(f'  targets: twin <= {100 * TWIN_IDLE_MAX:.0f} %: {"PASS" if twin <= TWIN_IDLE_MAX else "MISS"}; '
              f'mocks <= {100 * MOCKS_IDLE_MAX:.0f} %: {"PASS" if mocks <= MOCKS_IDLE_MAX else "MISS"}')
        result = {}
        busy, others, wall = cpu_over(pids, lambda: result.update(goal_with_jitter(client, odom, args.goal, folder)))
        print_cpu(f'during a {args.goal:g} s arm + base goal', busy, others, wall)
        status = result['status']
        print(f'  goal {"succeeded" if status == 4 else f"ended with status {status}"}')
        for kind in ('normal', 'real-time'):
            if kind not in result:
                print(f'  {kind} receiver: not run (SCHED_FIFO refused)')
                continue
            j = result[kind]
            print(f'  sim bridge period jitter at {SIM_RATE:g} Hz as received at {kind} priority '
                  f'({j["messages"]} messages): p50 {j["p"][50]:.3f} ms, p99 {j["p"][99]:.3f} ms, max {j["max"]:.2f} ms')
        judged = result.get('real-time', result.get('normal'))
        p99 = judged['p'][99] if judged else float('inf')
        print(f'  target p99 < {JITTER_P99_MAX_MS:g} ms (the {"real-time" if "real-time" in result else "normal"} '
              f'receiver): {"PASS" if p99 < JITTER_P99_MAX_MS else "MISS"}')
        if status != 4:
            misses.append(f'the goal ended with status {status}')
        if p99 >= JITTER_P99_MAX_MS:
            misses.append(f'jitter p99 {p99:.2f} ms >= {JITTER_P99_MAX_MS:g} ms')
    finally:
        up.stop()
        client.close()
    print('all targets met' if not misses else 'MISSED: ' + '; '.join(misses))
    return 1 if misses else 0


if __name__ == '__main__':
    sys.exit(main())
