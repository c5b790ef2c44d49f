"""Fault scenarios on the whole cell (``shadow-twin up --cell --mock-hardware``), shared by
test/ros/twin/test_cell_faults.py and ``benchmarks/faults.py`` (issue 22).

* :func:`start_cell`: ``up`` in a child process, recorders of every stream, the pids of its nodes.
* ``support.scenarios.malformed.flood_malformed``: malformed messages on every topic the cell's nodes
  subscribe to (its own module).
* :func:`stall_base_mid_goal` / :func:`kill_base_mid_goal`: SIGSTOP / SIGKILL of the MiR bridge
  once the base moves under a goal, and what followed.
* :func:`burst`: eight combined goals at the same instant; :func:`rejected_goal_beside_a_running_one`:
  a goal the hand cannot accept in time, sent while another runs; :func:`reset_then_base_goal`;
  :func:`scaled_goal`: an arm goal at 10 % speed scaling.

Import with rclpy available.
"""

from __future__ import annotations

import math
import os
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from support import cell as cell_helpers
from support.scenarios.cell import (ARM, START_TIMEOUT, TWIN_ACTION, base_points, make_goal, pose_of, result_of, send,
                                    straight, wait_joints_rest)
from support.scenarios.malformed import CMD_VEL_TOPICS, JOINT_STATE_TOPICS, ODOM_TOPICS



@dataclass
class Cell:
    """A running ``up --cell --mock-hardware``: its process, recorders, and the pids of its nodes."""

    up: object
    streams: dict
    odom: object
    sim_odom: object
    cmd_vel: object
    sim_cmd_vel: object

    def pid(self, node: str) -> int:
        """The newest pid ``up`` printed for ``node`` (it prints them at the start and at each respawn)."""
        text = self.up.output()
        found = re.findall(rf'{node} \(pid (\d+)\)', text) + re.findall(rf'{node} started again \(pid (\d+)\)', text)
        positions = [(text.rfind(f'pid {p})'), int(p)) for p in found]
        return max(positions)[1]


def start_cell(helpers, client, folder: Path, *extra: str, timeout: float = START_TIMEOUT,
               joint_states: bool = True, odom_depth: int = 5000) -> Cell:
    """Start ``shadow-twin up --cell --mock-hardware EXTRA`` and wait up to ``timeout`` s until every
    recorded stream flows (the joint states unless ``joint_states`` is False; the odometry, kept
    ``odom_depth`` deep) and the twin's action server answers. Raises RuntimeError with the output
    when it does not start."""
    from geometry_msgs.msg import TwistStamped
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import JointState

    from control_msgs.action import FollowJointTrajectory
    streams = {t: client.record(JointState, t, depth=1000) for t in JOINT_STATE_TOPICS} if joint_states else {}
    streams.update({t: client.record(Odometry, t, depth=odom_depth) for t in ODOM_TOPICS})
    commands = {t: client.record(TwistStamped, t, depth=5000) for t in CMD_VEL_TOPICS}
    up = cell_helpers.up(Path(folder) / 'up.log', '--cell', '--mock-hardware', *extra)
    if not helpers.wait_until(lambda: all(r.count() for r in streams.values()) or not up.alive(), timeout) \
            or not up.alive():
        up.stop()
        raise RuntimeError(f'shadow-twin up --cell did not start:\n{up.output()[-3000:]}')
    client.action_client(FollowJointTrajectory, TWIN_ACTION, timeout=timeout)
    # the twin's listeners have had the states for a second (on their stamps): the anchoring at start is done
    cell_helpers.wait_flowed(streams.values(), 1.0)
    return Cell(up, streams, streams['/odom'], streams['/sim/odom'], commands['/cmd_vel'], commands['/sim/cmd_vel'])


@dataclass
class BaseFaultOutcome:
    """What followed a signal to the MiR bridge mid-goal.

    status, error_string: the twin goal's result; answer_s: signal -> result arrived here, s;
    moved_after_resume: base travel from its first odometry after SIGCONT to rest, m (stall);
    others_alive: every other stream flowed after the fault; respawned: ``up`` started the MiR again
    and its odometry flows.
    """

    status: int = 0
    error_string: str = ''
    answer_s: float = math.nan
    moved_after_resume: float = math.nan
    others_alive: bool = False
    respawned: bool = False
    notes: list = field(default_factory=list)


def _goal_until_moving(helpers, client, cell: Cell, length: float = 0.8, seconds: float = 4.0):
    """Send a straight base goal and wait until the real base has moved 5 cm; the goal handle."""
    start = pose_of(cell.odom.last())
    handle = send(client, make_goal(base=base_points(start, straight(length), seconds)))
    if not handle.accepted:
        raise RuntimeError('the base goal was rejected')

    def moved():
        x, y, _ = pose_of(cell.odom.last())
        return math.hypot(x - start[0], y - start[1]) > 0.05
    if not helpers.wait_until(moved, 10.0):
        raise RuntimeError('the real base did not move')
    return handle


def _signal_mid_goal(helpers, client, cell: Cell, sig: int):
    """Send a base goal, and ``sig`` to the MiR bridge once the base moves; (goal handle, the
    bridge's pid, monotonic s of the signal, ROS time s of the signal)."""
    handle = _goal_until_moving(helpers, client, cell)
    pid = cell.pid('mock_mir')
    os.kill(pid, sig)
    return handle, pid, time.monotonic(), helpers.ros_now()


def _answer(client, handle, since: float, timeout: float = 10.0) -> tuple[int, str, float]:
    future = handle.get_result_async()
    response = client.wait_future(future, timeout)
    return response.status, response.result.error_string, time.monotonic() - since


def stall_base_mid_goal(helpers, client, cell: Cell, stall_s: float = 3.0) -> BaseFaultOutcome:
    """SIGSTOP the MiR bridge mid-goal for ``stall_s`` s, SIGCONT; how far the base moves after."""
    handle, pid, stopped, _ = _signal_mid_goal(helpers, client, cell, signal.SIGSTOP)
    out = BaseFaultOutcome()
    try:
        out.status, out.error_string, out.answer_s = _answer(client, handle, stopped)
        time.sleep(max(0.0, stall_s - (time.monotonic() - stopped)))    # the stall itself, on purpose
    finally:
        os.kill(pid, signal.SIGCONT)
    resumed = time.monotonic()
    if not helpers.wait_until(lambda: cell.odom.since(resumed), 10.0):
        out.notes.append('no odometry after SIGCONT')
        return out
    first = cell.odom.since(resumed)[0][1]
    # where the base is 2 s after its first odometry since SIGCONT, on the odometry's stamps
    last = pose_of(helpers.stamped_at(cell.odom, helpers.stamp_s(first) + 2.0))
    first = pose_of(first)
    out.moved_after_resume = math.hypot(last[0] - first[0], last[1] - first[1])
    out.others_alive = all(r.since(resumed) for r in cell.streams.values())
    return out


def kill_base_mid_goal(helpers, client, cell: Cell, respawn_timeout: float = 30.0) -> BaseFaultOutcome:
    """SIGKILL the MiR bridge mid-goal; the answer, the other streams, and the respawn."""
    handle, pid, killed, killed_stamp = _signal_mid_goal(helpers, client, cell, signal.SIGKILL)
    out = BaseFaultOutcome()
    out.status, out.error_string, out.answer_s = _answer(client, handle, killed)
    others = [r for t, r in cell.streams.items() if t != '/odom']
    # every other stream published on, 0.5 s past the kill (on their stamps)
    out.others_alive = helpers.wait_until(lambda: all(helpers.stamp_s(r.last()) > killed_stamp + 0.5 for r in others),
                                          10.0) and cell.up.alive()
    out.respawned = helpers.wait_until(lambda: cell.pid('mock_mir') != pid and cell.odom.since(killed + 1.0),
                                       respawn_timeout)
    if out.respawned:       # the twin has had the respawned base's odometry for 1.5 s (its stamps)
        cell_helpers.wait_flowed([cell.odom], 1.5)
    return out


# ------------------------------------------------------------------------ goals arriving together
BURST_JOINT = 'shoulder_pan_joint'


@dataclass
class BurstOutcome:
    """One burst of simultaneous combined goals and what followed.

    Attributes:
        accepted: indices of the goals the twin accepted.
        succeeded: indices of the goals that succeeded.
        apart: max |sim - real| over the arm's joints at rest after the burst, rad, and
            ``apart_before`` the same before it.
        strayed: farthest the real and sim ``BURST_JOINT`` went outside the span of their own
            rest position and the targets of the accepted goals (0 when no rejected goal moved), rad.
        base_moved: how far the real base moved, m, and ``base_expected`` the succeeded
            goal's base length (0 when none succeeded), m.
        answers: (index, status, error string) of each accepted goal's result.
    """

    accepted: list = field(default_factory=list)
    succeeded: list = field(default_factory=list)
    answers: list = field(default_factory=list)
    apart: float = math.nan
    apart_before: float = math.nan
    strayed: float = math.nan
    base_moved: float = math.nan
    base_expected: float = 0.0


def _arm_positions(msg) -> dict:
    return {n: p for n, p in zip(msg.name, msg.position) if n in ARM}


def burst(helpers, client, cell: Cell, k: int, goals: int = 8) -> BurstOutcome:
    """Send ``goals`` combined goals (arm, hand, base) at the same instant; each turns
    ``BURST_JOINT`` its own way (alternating directions, different angles) and drives the base
    its own length. Wait for every result and for rest; report what moved."""
    from control_msgs.action import FollowJointTrajectory
    real, sim = cell.streams['/joint_states'], cell.streams['/sim/joint_states']
    before = {r: _arm_positions(r.last()) for r in (real, sim)}
    rest = before[real][BURST_JOINT]
    start = pose_of(cell.odom.last())
    targets, lengths = [], []
    act = client.action_client(FollowJointTrajectory, TWIN_ACTION)
    requests = []
    for j in range(goals):
        sign = 1.0 if (j + k) % 2 == 0 else -1.0
        targets.append(rest + sign * (0.1 + 0.02 * j))
        lengths.append(0.04 + 0.01 * j)
        arm = dict(ARM, **{BURST_JOINT: targets[-1]})
        goal = make_goal({**arm, 'rh_FFJ3': 0.2 + 0.05 * j}, 1.0,
                         base=base_points(start, straight(lengths[-1]), 1.5))
        requests.append(goal)
    t0 = time.monotonic()
    futures = [act.send_goal_async(goal) for goal in requests]
    out = BurstOutcome(apart_before=max(abs(before[real][n] - before[sim][n]) for n in ARM))
    handles = {}
    for j, future in enumerate(futures):
        handle = client.wait_future(future, 15.0)
        if handle.accepted:
            handles[j] = handle
    out.accepted = sorted(handles)
    for j, handle in handles.items():
        response = client.wait_future(handle.get_result_async(), 20.0)
        out.answers.append((j, response.status, response.result.error_string))
        if response.status == 4:
            out.succeeded.append(j)
    settled = helpers.ros_now() + 1.0           # 1 s to settle after the results, on the states' stamps
    for recorder in (real, sim):
        helpers.stamped_at(recorder, settled)
    wait_joints_rest(helpers, [real, sim], set(ARM), timeout=10.0)
    real_now, sim_now = _arm_positions(real.last()), _arm_positions(sim.last())
    out.apart = max(abs(real_now[n] - sim_now[n]) for n in ARM)
    last = out.succeeded[-1] if out.succeeded else None        # the one that ran everywhere
    # an accepted goal that a later one preempted ran everywhere for a moment (the JTC's rule);
    # a rejected one never moves: the joint stays between the rest and the accepted targets
    out.strayed = 0.0
    for r in (real, sim):
        reach = [before[r][BURST_JOINT]] + [targets[j] for j in out.accepted]
        low, high = min(reach), max(reach)
        seen = [_arm_positions(m)[BURST_JOINT] for _, m in r.since(t0)]
        out.strayed = max([out.strayed] + [max(0.0, low - q, q - high) for q in seen])
    x, y, _ = pose_of(cell.odom.last())
    out.base_moved = math.hypot(x - start[0], y - start[1])
    out.base_expected = lengths[last] if last is not None else 0.0
    return out


def rejected_goal_beside_a_running_one(helpers, client, cell: Cell, stall_s: float = 0.6):
    """A 3 s arm goal runs; a second goal (arm and hand) is sent while the hand's controller is
    stopped (SIGSTOP of the hand's mock for ``stall_s`` s): the hand cannot accept its part in
    time, so the twin rejects the goal and takes back its arm parts. Returns (the second goal
    accepted?, the first goal's status and error string, the hand's largest move, rad)."""
    real = cell.streams['/joint_states']
    hand = cell.streams['/rh/joint_states']
    start = _arm_positions(real.last())[BURST_JOINT]
    sent = helpers.ros_now()
    first = send(client, make_goal(dict(ARM, **{BURST_JOINT: start + 0.4}), 3.0))
    if not first.accepted:
        raise RuntimeError('the running goal was rejected')
    if not helpers.wait_until(lambda: _arm_positions(real.last())[BURST_JOINT] > start + 0.1, 10.0):   # under way
        raise RuntimeError('the running goal did not move the arm')
    finger = [p for n, p in zip(hand.last().name, hand.last().position) if n == 'rh_FFJ3'][0]
    pid = cell.pid('mock_hardware')
    os.kill(pid, signal.SIGSTOP)
    try:
        second = send(client, make_goal({**dict(ARM, **{BURST_JOINT: start - 0.4}), 'rh_FFJ3': finger + 0.5}, 2.0))
        time.sleep(max(0.0, stall_s - 0.05))        # the hand's stall, on purpose
    finally:
        os.kill(pid, signal.SIGCONT)
    response = client.wait_future(first.get_result_async(), 15.0)
    helpers.stamped_at(hand, helpers.ros_now() + 0.5)       # the hand's states 0.5 s past the result
    moved = max(abs(p - finger) for _, m in hand.snapshot() if helpers.stamp_s(m) >= sent
                for n, p in zip(m.name, m.position) if n == 'rh_FFJ3')
    return second.accepted, response.status, response.result.error_string, moved


def anchor_lines(cell: Cell) -> int:
    """How many times the twin's base anchor watcher has said what it did with a sim base jump."""
    text = cell.up.output()
    return sum(text.count(s) for s in ('sim base re-anchored', 'the bases are within the anchor offsets',
                                       'could not re-anchor the sim base'))


def reset_then_base_goal(helpers, client, cell: Cell, length: float = 0.3, seconds: float = 3.0):
    """Reset the sim (its base back at the origin, the real one where it is), then a base goal.
    Returns (status, error string, the sim base's peak speed during the goal m/s, the goal's
    nominal peak speed m/s)."""
    from std_srvs.srv import Trigger
    before = pose_of(cell.sim_odom.last())
    anchored = anchor_lines(cell)
    answer = client.call(Trigger, '/mujoco_bridge/reset', Trigger.Request())
    if not answer.success:
        raise RuntimeError(f'reset failed: {answer.message}')
    helpers.wait_until(lambda: math.hypot(*(a - b for a, b in zip(pose_of(cell.sim_odom.last())[:2],
                                                                   before[:2]))) > 0.01, 10.0)
    # the twin's anchor watcher has seen the jump: it says what it did (or that the bases are close)
    helpers.wait_until(lambda: anchor_lines(cell) > anchored, 15.0)
    start = pose_of(cell.odom.last())
    points = base_points(start, straight(length), seconds)
    nominal = max(math.hypot(p[4], p[5]) for p in points)
    t0 = time.monotonic()
    status, result = result_of(client, send(client, make_goal(base=points)))
    peak = max(abs(m.twist.twist.linear.x) for _, m in cell.sim_odom.since(t0))
    return status, result.error_string, peak, nominal


def scaled_goal(helpers, client, cell: Cell, percent: float = 10.0, seconds: float = 0.3,
                turn: float = 0.4) -> dict:
    """An arm goal (``BURST_JOINT`` ``turn`` rad in ``seconds`` s, stamped 1 s ahead) with the UR
    stand-in's speed scaling at ``percent``, after a goal at 100 % that brings sim and real arm to
    the same pose (a sim reset may have parted them); the scaling is set back to 100 % after. Returns
    {'status', 'error', 'real', 'sim'}: for each side the time from the stamped start until the
    joint passed half way (joint-state stamps), over the nominal half time (``seconds`` / 2)."""
    from control_msgs.action import FollowJointTrajectory
    status, result = result_of(client, send(client, make_goal(ARM, 2.0)))
    if status != 4:
        raise RuntimeError(f'the arm could not be brought to its start pose: {result.error_string}')
    line = f'speed scaling {percent:g} %'
    before = cell.up.output().count(line)
    client.set_parameters('/mock_ur', {'speed_scaling': float(percent)})
    try:
        # the twin and the sim bridge each log the new scaling: both must follow it before the goal
        # (the benchmark once sent the goal when only the twin had: the sim reached half way at 5 x)
        if not helpers.wait_until(lambda: cell.up.output().count(line) >= before + 2, 10.0):
            raise RuntimeError('the twin and the sim bridge did not both report the speed scaling')
        streams = {'real': cell.streams['/joint_states'], 'sim': cell.streams['/sim/joint_states']}
        rest = {side: _arm_positions(r.last())[BURST_JOINT] for side, r in streams.items()}
        start_ns = client.node.get_clock().now().nanoseconds + 1_000_000_000
        goal = make_goal(dict(ARM, **{BURST_JOINT: rest['real'] + turn}), seconds)
        goal.trajectory.header.stamp.sec, goal.trajectory.header.stamp.nanosec = divmod(start_ns, 1_000_000_000)
        sent = time.monotonic()
        handle = client.send_goal(FollowJointTrajectory, TWIN_ACTION, goal, timeout=15.0)
        if not handle.accepted:
            raise RuntimeError('the scaled goal was rejected')
        response = client.wait_future(handle.get_result_async(), 10 * seconds * percent / 10 + 20.0)
        out = {'status': response.status, 'error': response.result.error_string}
        for side, recorder in streams.items():
            half = rest[side] + turn / 2
            passed = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for _, m in recorder.since(sent)
                      if _arm_positions(m)[BURST_JOINT] >= half]
            out[side] = (passed[0] - start_ns * 1e-9) / (seconds / 2) if passed else math.inf
        return out
    finally:
        followed = cell.up.output().count('speed scaling 100 %')
        client.set_parameters('/mock_ur', {'speed_scaling': 100.0})
        # the twin and the sim follow it again: each logs the new scaling
        helpers.wait_until(lambda: cell.up.output().count('speed scaling 100 %') >= followed + 2, 15.0)
