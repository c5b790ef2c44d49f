"""Benchmark of the twin under faults and load (issue 9's targets). Longer than 400 lines: one benchmark,
one script a person runs; its scenarios live in ``test/support/scenarios`` (the tests run them too).

Part 1, faults: the mock hardware (``mujoco_bridge -r __node:=mock_hardware``), the sim
bridge and the twin server run as three processes on a private ROS domain. ``--kills``
times (default 10): a 4 s goal to the twin, SIGKILL of the mock hardware once the robot
has moved 0.15 rad, and then:

* detection latency: SIGKILL -> the twin goal's result (ABORTED, naming the hand
  controller) arriving in this process, s: p50 and max; target max < 0.5 s;
* the sim holds: |sim position 1.0 s after the kill - 0.5 s after| < 0.01 rad;
* a new goal right after is rejected and the sim does not move (< 0.01 rad);

then the mock is started again. ``--stalls`` times (default 3) the same with SIGSTOP
(the twin must name stale joint states), SIGCONT after 1.5 s. Also printed: the time
from sending a goal to the twin until its answer (every controller has accepted its
part by then), p50/max: max below ``start_lead`` (0.25 s) - 0.03 s, p50 <= 30 ms with the preview
on (issue 33: the preview no longer delays a goal), for the hand here and in ``up``, and for the
cell (an arm and hand goal: three controllers) in part 4.

Part 2, load (``shadow-twin up --mock-hardware``, one process): the rates of
``/joint_states`` and ``/sim/joint_states`` received here

* during a preemption storm: a new goal on ``/sim/follow_joint_trajectory`` every
  50 ms for 5 s; every goal but the last must end "preempted by a new goal";
* during a 10,000-point goal on ``/twin/follow_joint_trajectory`` (20 s), which must succeed;

target >= 240 Hz each (publish rate 250 Hz).

The longest gap of each joint-state stream during the 10,000-point goal is a target too
(issue 22): < 50 ms (the goal's intake and validation must not stall the publishing). Two
upper bounds are measured and the lesser is judged: the gap as received here (a message
cannot arrive before it is sent), and the period plus the latest tick the bridge's stepping
thread started, from the real-time factor lines it logs (their 5 s windows reach before the
goal). The received gap alone is not enough: on this
2-core PC the goal's acceptance keeps four processes busy at once (the sender, the twin, both
bridges), and this normal-priority receiver is descheduled for tens of ms then, while the
bridges' stepping threads run at SCHED_FIFO. The goal is sent from a child process
(serializing it stalls the sender for ~0.3 s), and this process's recorded messages are
frozen out of the garbage collector first.

Part 3: the cost of sampling a trajectory in the live loop, 10,000 points against 10
(``LiveSimulation.step``, 2 physics steps per tick); target ratio < 2.

Part 4, the cell (issue 22; ``shadow-twin up --cell --mock-hardware``, scenarios of
test/support/scenarios/cell_faults.py): malformed messages on every subscribed topic (every node
stays up, the bases move < 5 mm); a base goal with point 0 at t = 0 10 km away (rejected,
no velocity command); 10 bursts of 8 simultaneous combined goals (one goal runs everywhere or
none: sim and real arm < 10 mrad apart at rest, rejected goals move nothing, one goal ran in
>= 8 of 10); a goal rejected because the hand stalled 0.6 s beside a running goal (that goal
succeeds); a sim reset, then a base goal (the sim base no faster than 1.2 x the goal's profile);
an arm goal at 10 % speed scaling (succeeds, half way after 8-12 x the nominal time); ``--cell-repeats`` times (default 3) the MiR bridge SIGSTOPped 3 s
mid-goal (the base moves < 2 cm after SIGCONT) and SIGKILLed mid-goal (ABORTED naming the
real base within 1 s, the other streams flow, ``up`` respawns it and a base goal succeeds).

Usage: .venv/bin/python benchmarks/faults.py [--kills 10] [--stalls 3] [--skip-load] [--cell-repeats 3]
                                             [--skip-cell]
Prints the figures, exits 1 when a target is missed. Not part of the tests.
"""

from __future__ import annotations

import argparse
import gc
import math
import re
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'test'))
sys.path.insert(0, str(REPO))

from support.scenarios import hand_faults as scenarios  # noqa: E402  (after the path set-up)
from support import ros as ros_helpers  # noqa: E402
from checks import Checks  # noqa: E402  (benchmarks/checks.py, beside this script)

CONFIG = REPO / 'config'
DETECT_TARGET_S = 0.5
HOLD_TARGET_RAD = 0.01
RATE_TARGET_HZ = 240.0
GAP_TARGET_S = 0.05
PUBLISH_RATE_HZ = 250.0
RTF_LOG_PERIOD_S = 5.0
RTF_LINE = re.compile(r'\[(\d+\.\d+)\] \[(\w+)\]: sim time .*?latest tick ([\d.]+) ms late')
CELL_MOVED_TARGET_M = 0.02
CELL_ANSWER_TARGET_S = 1.0
BURST_APART_TARGET_RAD = 0.01
SAMPLING_RATIO_TARGET = 2.0
START_LEAD_S, ACCEPT_MARGIN_S = 0.25, 0.05     # config/twin.yaml: start_lead, accept_margin
ACCEPT_P50_TARGET_S = 0.030


def start_mock(folder: Path, k: int):
    return ros_helpers.NodeProcess('mujoco_bridge.main', ['-r', '__node:=mock_hardware', '--params-file',
                                                          str(CONFIG / 'mock_hardware.yaml')], folder / f'mock_{k}.log')


def wait_fresh(states, after: float, timeout: float = 30.0) -> bool:
    """Both joint-state streams deliver messages received after ``after``."""
    return ros_helpers.wait_until(lambda: all(r.since(after) for r in states.values()), timeout)


def reset_and_rest(client, states) -> None:
    from std_srvs.srv import Trigger
    for node in ('/mujoco_bridge', '/mock_hardware'):
        assert client.call(Trigger, f'{node}/reset').success
    ros_helpers.wait_until(lambda: all(max(abs(v) for v in r.last().velocity) < 2e-3 for r in states.values()), 5.0)


def faults(client, states, folder: Path, kills: int, stalls: int, check: Checks) -> None:
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    sim = ros_helpers.NodeProcess('mujoco_bridge.main', ['--params-file', str(CONFIG / 'mujoco_bridge.yaml')],
                                  folder / 'sim.log')
    twin = ros_helpers.NodeProcess('shadow_twin.ros.twin.server', ['--params-file', str(CONFIG / 'twin.yaml')],
                                   folder / 'twin.log')
    mock = start_mock(folder, 0)
    latencies = {'SIGKILL': [], 'SIGSTOP': []}
    answer_times, drifts, rejected_moves = [], [], []
    try:
        assert wait_fresh(states, time.monotonic()), 'no joint states'
        client.action_client(FollowJointTrajectory, scenarios.TWIN_ACTION, timeout=30.0)
        for k, sig in enumerate([signal.SIGKILL] * kills + [signal.SIGSTOP] * stalls):
            name = signal.Signals(sig).name
            reset_and_rest(client, states)
            time.sleep(0.3)          # the twin's listener sees the rest state
            outcome = scenarios.kill_mid_goal(client, mock.pid, states, sig)
            answer_times.append(outcome.accept_s)
            named = 'hand controller' in outcome.error_string and 'joint states stopped' in outcome.error_string
            ok = outcome.status == GoalStatus.STATUS_ABORTED and named
            latencies[name].append(outcome.answer_s)
            drifts.append(outcome.sim_drift)
            print(f'  {name} {k + 1}: answer after {outcome.answer_s * 1e3:.0f} ms, sim drift '
                  f'{outcome.sim_drift * 1e3:.2f} mrad: {outcome.error_string}', flush=True)
            check(ok, f'  {name} {k + 1}: aborted naming the hand controller and its stale joint states')
            # a new goal now: rejected at once, the sim does not move
            before = scenarios.position(states['sim'].last())
            handle = client.send_goal(FollowJointTrajectory, scenarios.TWIN_ACTION,
                                      scenarios.one_point_goal({scenarios.MOVED: 0.9}, 1.0))
            time.sleep(0.5)
            moved = abs(scenarios.position(states['sim'].last()) - before)
            rejected_moves.append(moved)
            check(not handle.accepted and moved < HOLD_TARGET_RAD,
                  f'  {name} {k + 1}: next goal rejected, sim moved {moved * 1e3:.2f} mrad')
            if sig == signal.SIGSTOP:
                time.sleep(1.0)
                mock.proc.send_signal(signal.SIGCONT)
                mock.stop()
            else:
                mock.proc.wait(5.0)
                mock.stop()
            mock = start_mock(folder, k + 1)
            assert wait_fresh(states, time.monotonic()), 'the mock hardware did not come back'
            reset_and_rest(client, states)
            # the twin sees a restarted mock seconds after this process does (DDS discovery)
            assert scenarios.wait_twin_accepts(client), 'the twin never saw the restarted mock hardware'
    finally:
        for proc in (mock, twin, sim):
            proc.stop()
    for name, values in latencies.items():
        if values:
            arr = np.array(values)
            check(arr.max() < DETECT_TARGET_S, f'{name} x{len(arr)}: fault -> abort p50 {np.median(arr) * 1e3:.0f} ms, '
                                               f'max {arr.max() * 1e3:.0f} ms (target < {DETECT_TARGET_S * 1e3:.0f} ms)')
    check(max(drifts) < HOLD_TARGET_RAD, f'sim drift 0.5-1.0 s after the fault: max {max(drifts) * 1e3:.2f} mrad '
                                         f'(target < {HOLD_TARGET_RAD * 1e3:.0f} mrad)')
    answers = np.array(answer_times)
    if answers.size:
        check_acceptance(check, 'goal sent -> accepted by every controller', answers)


def check_acceptance(check: Checks, what: str, answers: np.ndarray) -> None:
    """The acceptance targets: max below start_lead - margin, p50 <= :data:`ACCEPT_P50_TARGET_S`."""
    budget = START_LEAD_S - ACCEPT_MARGIN_S
    check(answers.max() < budget and np.median(answers) <= ACCEPT_P50_TARGET_S,
          f'{what}: p50 {np.median(answers) * 1e3:.0f} ms (target <= {ACCEPT_P50_TARGET_S * 1e3:.0f} ms), max '
          f'{answers.max() * 1e3:.0f} ms (budget start_lead - margin {budget * 1e3:.0f} ms)')


def acceptance_times(client, states, trials: int = 20, targets=None) -> np.ndarray:
    """Send -> goal response of short twin goals (``targets(k)`` -> {joint: rad}; default the
    hand's moved finger), s."""
    from control_msgs.action import FollowJointTrajectory
    act = client.action_client(FollowJointTrajectory, scenarios.TWIN_ACTION)
    out = []
    for k in range(trials):
        goal = scenarios.one_point_goal(targets(k) if targets else {scenarios.MOVED: 0.2 + 0.2 * (k % 2)}, 0.3)
        sent = time.monotonic()
        handle = client.wait_future(act.send_goal_async(goal), 10.0)
        out.append(time.monotonic() - sent)
        assert handle.accepted
        client.wait_future(handle.get_result_async(), 10.0)
    return np.array(out)


def direct_acceptance_times(client, parts: dict, trials: int = 20) -> np.ndarray:
    """Send -> the last goal response when this process sends every part straight to its
    controller at once (``parts``: {action: targets(k) -> {joint: rad}}), s: what the twin's
    acceptance cannot go below on this PC (it waits for the same controllers' answers)."""
    from control_msgs.action import FollowJointTrajectory
    acts = {name: client.action_client(FollowJointTrajectory, name) for name in parts}
    out = []
    for k in range(trials):
        goals = {name: scenarios.one_point_goal(targets(k), 0.3) for name, targets in parts.items()}
        sent = time.monotonic()
        futures = [acts[name].send_goal_async(goal) for name, goal in goals.items()]
        handles = [client.wait_future(f, 10.0) for f in futures]
        out.append(time.monotonic() - sent)
        assert all(h.accepted for h in handles)
        for h in handles:
            client.wait_future(h.get_result_async(), 10.0)
    return np.array(out)


def load(client, states, folder: Path, check: Checks) -> None:
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    up = ros_helpers.NodeProcess(None, [], folder / 'up.log', command=[
        ros_helpers.PYTHON, '-c', 'import sys; from shadow_twin.cli.up import main; sys.exit(main(sys.argv[1:]))',
        '--mock-hardware'])
    try:
        assert wait_fresh(states, time.monotonic()), f'shadow-twin up did not start:\n{up.output()[-3000:]}'
        client.action_client(FollowJointTrajectory, scenarios.TWIN_ACTION, timeout=30.0)
        time.sleep(2.0)
        check_acceptance(check, 'up: goal sent -> accepted by every controller', acceptance_times(client, states))
        storm = scenarios.preemption_storm(client)
        rates = {side: scenarios.rate(r, storm.t0, storm.t1) for side, r in states.items()}
        reasons = [s for s in storm.results[:-1] if 'preempted by a new goal' not in s[2]]
        print(f'storm: {len(storm.results)} goals accepted, {storm.rejected} rejected; last: {storm.results[-1][2]!r}')
        check(not reasons and storm.rejected == 0,
              f'storm: every preempted goal says "preempted by a new goal" ({len(reasons)} others: '
              f'{sorted({r[2] for r in reasons})[:3]})')
        check(min(rates.values()) >= RATE_TARGET_HZ,
              f'storm: /joint_states {rates["real"]:.1f} Hz, /sim/joint_states {rates["sim"]:.1f} Hz '
              f'(target >= {RATE_TARGET_HZ:g})')
        reset_and_rest(client, states)
        # sent from a child: this process only receives meanwhile; measured from the send. The
        # messages recorded so far are frozen out of the garbage collector: a full collection
        # walks every object (here 10^5 recorded messages) and pauses this process's receiving
        gc.collect()
        gc.freeze()
        status, error, accepted_s, t0 = scenarios.long_goal_from_child(10_000, 20.0)
        t1 = time.monotonic()
        rates = {side: scenarios.rate(r, t0, t1) for side, r in states.items()}
        gaps = {side: scenarios.longest_gap(r, t0, t1) for side, r in states.items()}
        check(status == GoalStatus.STATUS_SUCCEEDED, f'10,000-point goal: accepted in {accepted_s * 1e3:.0f} ms, {error!r}')
        check(min(rates.values()) >= RATE_TARGET_HZ,
              f'10,000-point goal: /joint_states {rates["real"]:.1f} Hz, /sim/joint_states {rates["sim"]:.1f} Hz '
              f'over {t1 - t0:.1f} s (target >= {RATE_TARGET_HZ:g})')
        wall_t0 = time.time() - (time.monotonic() - t0)
        late = publishing_lateness(up.output(), ('mock_hardware', 'mujoco_bridge'), wall_t0, wall_t0 + (t1 - t0))
        published = {side: 1.0 / PUBLISH_RATE_HZ + late.get(node, math.inf)
                     for side, node in (('real', 'mock_hardware'), ('sim', 'mujoco_bridge'))}
        # each is an upper bound of the streams' gap: a message cannot arrive before it is sent, and
        # the bridges' log windows reach up to 5 s before the goal
        longest = {side: min(published[side], gaps[side]) for side in gaps}
        check(max(longest.values()) < GAP_TARGET_S,
              f'10,000-point goal: longest joint-state gaps /joint_states {longest["real"] * 1e3:.0f} ms, '
              f'/sim/joint_states {longest["sim"] * 1e3:.0f} ms (target < {GAP_TARGET_S * 1e3:.0f} ms): the '
              f'lesser of two upper bounds, as received here ({gaps["real"] * 1e3:.0f}, {gaps["sim"] * 1e3:.0f} ms) '
              f'and as published (the period + the latest tick the bridges logged in windows that cover the goal: '
              f'{published["real"] * 1e3:.0f}, {published["sim"] * 1e3:.0f} ms)')
    finally:
        status = up.stop()
        if status != 0:
            print(up.output()[-3000:])


def publishing_lateness(log: str, nodes: tuple[str, ...], wall_t0: float, wall_t1: float) -> dict[str, float]:
    """{node: the latest a tick of its stepping thread started, s} over the real-time factor log
    lines (each covers the ``rtf_log_period`` before it) logged between wall ``t0`` and one
    period after ``t1``: the publishing side of a stream's gap, whatever the receiver's."""
    out: dict[str, float] = {}
    for stamp, node, ms in RTF_LINE.findall(log):
        if node in nodes and wall_t0 <= float(stamp) <= wall_t1 + RTF_LOG_PERIOD_S + 0.5:
            out[node] = max(out.get(node, 0.0), float(ms) * 1e-3)
    return out


def cell(client, folder: Path, repeats: int, check: Checks, bursts_n: int = 10) -> None:
    """Part 4: the cell's faults (module doc)."""

    from support.scenarios import cell_faults, malformed
    from support.scenarios.cell import (HAND_ACTION, UR_ACTION, base_points, make_goal, pose_of, result_of, send,
                                        straight)
    up = cell_faults.start_cell(ros_helpers, client, folder)
    try:
        targets = lambda k: {'shoulder_pan_joint': 0.05 * (k % 2), 'rh_FFJ3': 0.2 + 0.2 * (k % 2)}  # noqa: E731
        twin = acceptance_times(client, None, targets=targets)
        check_acceptance(check, 'cell: an arm and hand goal sent -> accepted by every controller', twin)
        floor = direct_acceptance_times(client, {UR_ACTION: lambda k: {'shoulder_pan_joint': 0.05 * (k % 2)},
                                                 HAND_ACTION: lambda k: {'rh_FFJ3': 0.2 + 0.2 * (k % 2)},
                                                 scenarios.SIM_ACTION: targets})
        print(f'cell: the same three parts sent at once straight to the mock UR5, the mock hand and the sim '
              f'(what the twin waits for): p50 {np.median(floor) * 1e3:.0f} ms, max {floor.max() * 1e3:.0f} ms; '
              f'the twin\'s own share of its p50: {(np.median(twin) - np.median(floor)) * 1e3:.0f} ms')
        before = [pose_of(r.last()) for r in (up.odom, up.sim_odom)]
        sent = malformed.flood_malformed(client)
        time.sleep(1.0)
        flowing = time.monotonic()
        alive = up.up.alive() and ros_helpers.wait_until(lambda: all(r.since(flowing) for r in up.streams.values()),
                                                          5.0)
        moved = max(math.dist(b[:2], pose_of(r.last())[:2]) for b, r in zip(before, (up.odom, up.sim_odom)))
        check(alive and moved < 0.005, f'cell: {sent} malformed messages on every subscribed topic: every node up '
                                       f'{alive}, bases moved {moved * 1e3:.1f} mm (target < 5 mm)')
        start = pose_of(up.odom.last())
        t0 = time.monotonic()
        handle = send(client, make_goal(base=[(0.0, start[0] + 1e4, start[1], start[2]),
                                              (2.0, start[0] + 1e4 + 0.2, start[1], start[2])]))
        time.sleep(0.5)
        commanded = len(up.cmd_vel.since(t0)) + len(up.sim_cmd_vel.since(t0))
        check(not handle.accepted and not commanded, f'cell: point 0 at t = 0 10 km away: accepted {handle.accepted}, '
                                                    f'{commanded} velocity commands (target: rejected, none)')
        bursts = [cell_faults.burst(ros_helpers, client, up, k) for k in range(bursts_n)]
        apart = max(b.apart for b in bursts)
        strayed = max(b.strayed for b in bursts)
        base_off = max(abs(b.base_moved - b.base_expected) for b in bursts)
        one = sum(len(b.succeeded) == 1 for b in bursts)
        check(all(len(b.succeeded) <= 1 for b in bursts) and apart < BURST_APART_TARGET_RAD
              and strayed < BURST_APART_TARGET_RAD and base_off < CELL_MOVED_TARGET_M and one >= 0.8 * bursts_n,
              f'cell bursts: {bursts_n} x 8 simultaneous combined goals: one goal ran everywhere in {one}, none in '
              f'{bursts_n - one}; accepted per burst {[len(b.accepted) for b in bursts]}; sim-real arm at rest '
              f'{apart * 1e3:.2f} mrad, rejected goals moved the arm {strayed * 1e3:.2f} mrad (targets < '
              f'{BURST_APART_TARGET_RAD * 1e3:.0f} mrad), base off its goal {base_off * 1e3:.1f} mm')
        accepted, status, error, hand_moved = cell_faults.rejected_goal_beside_a_running_one(ros_helpers, client, up)
        check(not accepted and status == 4 and hand_moved < BURST_APART_TARGET_RAD,
              f'cell: a goal rejected (the hand stalled 0.6 s) beside a running goal: rejected {not accepted}, the '
              f'running goal {"succeeded" if status == 4 else repr(error)}, hand moved {hand_moved * 1e3:.2f} mrad')
        status, error, peak, nominal = cell_faults.reset_then_base_goal(ros_helpers, client, up)
        check(status == 4 and peak <= 1.2 * nominal + 0.02,
              f'cell: sim reset, then a base goal: {"succeeded" if status == 4 else repr(error)}, sim base peak '
              f'{peak:.3f} m/s, goal profile {nominal:.3f} m/s (target <= 1.2 x + 0.02)')
        scaled = cell_faults.scaled_goal(ros_helpers, client, up)
        check(scaled['status'] == 4 and all(8.0 <= scaled[side] <= 12.0 for side in ('real', 'sim')),
              f'cell: 10 % speed scaling: goal {"succeeded" if scaled["status"] == 4 else repr(scaled["error"])}; '
              f'half way after {scaled["real"]:.2f} (real), {scaled["sim"]:.2f} (sim) x the nominal time '
              f'(target 8-12: ten times, less the mock UR5\'s stick-slip at 10 % speed)')
        for k in range(repeats):
            stall = cell_faults.stall_base_mid_goal(ros_helpers, client, up)
            check(stall.status == 6 and stall.moved_after_resume < CELL_MOVED_TARGET_M,
                  f'cell stall {k + 1}: MiR bridge SIGSTOPped 3 s mid-goal: answered in {stall.answer_s:.2f} s '
                  f'({stall.error_string[:70]!r}); base moved {stall.moved_after_resume * 1e3:.1f} mm after SIGCONT '
                  f'(target < {CELL_MOVED_TARGET_M * 1e3:.0f} mm)')
            kill = cell_faults.kill_base_mid_goal(ros_helpers, client, up)
            start = pose_of(up.odom.last())
            handle = send(client, make_goal(base=base_points(start, straight(0.2), 2.0)))
            status, result = result_of(client, handle) if handle.accepted else (0, SimpleNamespace(
                error_string='rejected: ' + up.up.output().rsplit('rejected goal', 1)[-1].split('\n')[0]))
            check(kill.status == 6 and 'real base' in kill.error_string and kill.answer_s < CELL_ANSWER_TARGET_S
                  and kill.others_alive and kill.respawned and status == 4,
                  f'cell kill {k + 1}: MiR bridge SIGKILLed mid-goal: ABORTED naming it in {kill.answer_s:.2f} s '
                  f'(target < {CELL_ANSWER_TARGET_S:g} s), other nodes up {kill.others_alive}, respawned '
                  f'{kill.respawned}, next base goal {"succeeded" if status == 4 else result.error_string!r}')
    finally:
        status = up.up.stop(timeout=15.0)
        if status != 0:
            print(up.up.output()[-3000:])


def sampling_ratio(check: Checks) -> None:
    """Per-tick cost of LiveSimulation.step following a 10,000-point vs a 10-point trajectory."""
    from shadow_twin.control.trajectory import JointTrajectory
    from shadow_twin.simulation.live.simulation import LiveSimulation
    costs = {}
    for points in (10, 10_000):
        sim = LiveSimulation()
        t = np.linspace(0.01, 60.0, points)
        q = 0.5 * np.sin(t)[:, None].repeat(4, axis=1) ** 2
        sim.set_trajectory(JointTrajectory(['rh_FFJ3', 'rh_MFJ3', 'rh_RFJ3', 'rh_LFJ3'], t, q))
        sim.step(2)
        start = time.perf_counter()
        for _ in range(2000):
            sim.step(2)
        costs[points] = (time.perf_counter() - start) / 2000
    ratio = costs[10_000] / costs[10]
    check(ratio < SAMPLING_RATIO_TARGET, f'live step (2 physics steps) following 10,000 vs 10 points: '
                                         f'{costs[10_000] * 1e6:.0f} vs {costs[10] * 1e6:.0f} us, ratio {ratio:.2f} '
                                         f'(target < {SAMPLING_RATIO_TARGET:g})')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--kills', type=int, default=10, help='SIGKILLs of the mock hardware')
    parser.add_argument('--stalls', type=int, default=3, help='SIGSTOPs of the mock hardware')
    parser.add_argument('--skip-load', action='store_true', help='only the faults and the sampling cost')
    parser.add_argument('--cell-repeats', type=int, default=3, help='SIGSTOPs and SIGKILLs of the MiR bridge')
    parser.add_argument('--skip-cell', action='store_true', help='leave out the cell section')
    parser.add_argument('--logs', type=Path, default=None, help='keep the processes\' logs in this folder')
    args = parser.parse_args()
    ros_helpers.isolate_domain()
    from sensor_msgs.msg import JointState
    check = Checks()
    sampling_ratio(check)
    client = ros_helpers.RosClient('faults_benchmark')
    states = {'real': client.record(JointState, '/joint_states', depth=1000),
              'sim': client.record(JointState, '/sim/joint_states', depth=1000)}
    try:
        with tempfile.TemporaryDirectory(prefix='faults_') as tmp:
            folder = Path(tmp) if args.logs is None else args.logs
            folder.mkdir(parents=True, exist_ok=True)
            if args.kills or args.stalls:
                faults(client, states, folder, args.kills, args.stalls, check)
            if not args.skip_load:
                load(client, states, folder, check)
            if not args.skip_cell:
                cell(client, folder, args.cell_repeats, check)
    finally:
        client.close()
    print('all targets met' if not check.failed else f'{len(check.failed)} target(s) missed')
    return 1 if check.failed else 0


if __name__ == '__main__':
    sys.exit(main())
