"""Fault and load scenarios against running twin processes, shared by the fault-injection
tests (test/ros/twin/test_twin_faults.py) and ``benchmarks/faults.py``.

* :func:`long_goal`: a FollowJointTrajectory goal with thousands of points (positions and
  velocities, within the hand's limits); one-point goals are ``ros_helpers.one_point_goal``.
* :func:`rate` / :func:`longest_gap`: what a :class:`ros_helpers.Recorder` received
  in a window (messages per second, s); :func:`stamp_rate`: what its publisher stamped in
  a window (messages per second, on the header stamps).
* :func:`kill_mid_goal`: send a goal to the twin, signal the robot's process once the
  robot moves, and time the twin's answer and the sim's hold.
* :func:`preemption_storm`: a new goal every ``period`` s; every preempted goal's result.

Import after ``pytest.importorskip('rclpy')`` (tests) or with rclpy available.
"""

from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import dataclass, field

import numpy as np
from support.ros import one_point_goal, stamp_s, stamped_at, wait_until

TWIN_ACTION = '/twin/follow_joint_trajectory'
SIM_ACTION = '/sim/follow_joint_trajectory'
MOVED = 'rh_FFJ3'
#: Sends of a goal the twin rejects (nothing moved), 1 s apart, before a scenario fails.
SEND_ATTEMPTS = 3


def long_goal(points: int, seconds: float, joints: tuple[str, ...] = ('rh_FFJ3', 'rh_MFJ3', 'rh_RFJ3', 'rh_LFJ3')):
    """A goal of ``points`` points over ``seconds`` s: each joint rises from 0 to 0.8 rad and back
    (a sine arch), with the matching velocities (cubic interpolation)."""
    from control_msgs.action import FollowJointTrajectory
    from trajectory_msgs.msg import JointTrajectoryPoint

    from shadow_twin.ros.conversions import duration_msg
    t = np.linspace(seconds / points, seconds, points)
    q = 0.8 * np.sin(math.pi * t / seconds) ** 2
    qd = 0.8 * math.pi / seconds * np.sin(2 * math.pi * t / seconds)
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = list(joints)
    n = len(joints)
    goal.trajectory.points = [JointTrajectoryPoint(positions=[float(q[k])] * n, velocities=[float(qd[k])] * n,
                                                   time_from_start=duration_msg(float(t[k]))) for k in range(points)]
    return goal


def rate(recorder, t0: float, t1: float) -> float:
    """Messages per second received by ``recorder`` between monotonic ``t0`` and ``t1`` (s)."""
    received = [r for r, _ in recorder.since(t0) if r <= t1]
    return len(received) / (t1 - t0)


def stamp_rate(recorder, t0: float, t1: float, timeout: float = 10.0) -> float:
    """Messages per second that the publisher stamped within monotonic ``t0`` .. ``t1`` (s),
    counted by their header stamps once ``recorder`` has one stamped after ``t1`` (waiting up to
    ``timeout`` s): what the publisher sent, however late this process took them in (a loaded
    PC hands a busy receiver its messages in bursts, some after ``t1``). The stamps are ROS
    time, the monotonic window is moved onto it by this process's clocks (same host).
    Raises AssertionError if no message stamped after ``t1`` arrives in time."""
    offset = time.time() - time.monotonic()
    start, end = t0 + offset, t1 + offset
    assert wait_until(lambda: recorder.count() and stamp_s(recorder.last()) > end, timeout), \
        f'no message stamped after the window within {timeout} s'
    return sum(1 for _, m in recorder.snapshot() if start <= stamp_s(m) < end) / (t1 - t0)


def longest_gap(recorder, t0: float, t1: float) -> float:
    """Longest time between two messages received between ``t0`` and ``t1`` (s). Measure it in
    a process that does nothing else meanwhile (see :func:`long_goal_from_child`): a process busy
    serializing a large goal takes its messages late, a stall that is its own."""
    received = [t0] + [r for r, _ in recorder.since(t0) if r <= t1] + [t1]
    return float(np.max(np.diff(received)))


_SENDER = """
import json, sys, time
sys.path[:0] = {paths!r}
from support.scenarios import hand_faults as f
from support import ros as h
from control_msgs.action import FollowJointTrajectory
client = h.RosClient('long_goal_sender')
goal = f.long_goal({points}, {seconds})
client.action_client(FollowJointTrajectory, f.TWIN_ACTION, 30.0)
sent = time.monotonic()
handle = client.send_goal(FollowJointTrajectory, f.TWIN_ACTION, goal, timeout=15.0)
answer = time.monotonic() - sent
response = client.wait_future(handle.get_result_async(), {seconds} + 30.0) if handle.accepted else None
print(json.dumps([response.status if response else 0, response.result.error_string if response else 'rejected',
                  answer, sent]))
client.close()
"""


def long_goal_from_child(points: int, seconds: float) -> tuple[int, str, float, float]:
    """Send :func:`long_goal` (``points``, ``seconds``) to the twin from a child process and wait
    for its result there, so that serializing it does not stall this process's subscribers.
    Returns (GoalStatus status, 0 when rejected; error string; s from sending to the answer;
    the monotonic s it was sent at, the same clock as this process's: a new DDS participant
    joining stalls the others for a moment, so windows start at the send, after the child joined).
    Raises RuntimeError with the child's output when it fails."""
    import json
    import subprocess
    from pathlib import Path

    from support.ros import PYTHON
    tests = Path(__file__).resolve().parents[2]          # test/: the support package's parent
    code = _SENDER.format(paths=[str(tests), str(tests.parent)], points=int(points), seconds=float(seconds))
    done = subprocess.run([PYTHON, '-c', code], capture_output=True, text=True, timeout=seconds + 90.0)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f'the goal sender failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}')
    status, error, answer, sent = json.loads(lines[-1])
    return int(status), str(error), float(answer), float(sent)


def position(msg, joint: str = MOVED) -> float:
    """Position of ``joint`` in a JointState message, rad."""
    return float(msg.position[list(msg.name).index(joint)])


def position_at(recorder, t: float, joint: str = MOVED) -> float:
    """Position of ``joint`` in the last message received by monotonic ``t``, rad."""
    before = [m for r, m in recorder.snapshot() if r <= t]
    if not before:
        raise ValueError(f'no message received before {t}')
    return position(before[-1], joint)


@dataclass
class KillOutcome:
    """What happened after the robot's process got ``signal`` mid-goal.

    accept_s: goal sent -> its acceptance arrived here, s (every controller had accepted its part);
    answer_s: signal -> the twin goal's result arrived here, s; status, error_string: the result;
    sim_drift: |sim position 1.0 s after the signal - 0.5 s after|, rad (0 when the sim holds), on
    the states' stamps;
    robot_position_at_signal: rad.
    """

    accept_s: float
    answer_s: float
    status: int
    error_string: str
    sim_drift: float
    robot_position_at_signal: float


def wait_twin_accepts(client, timeout: float = 30.0, retry: float = 0.5) -> bool:
    """Send the twin a 0.1 s goal holding :data:`MOVED` at 0 rad until one is accepted (then wait
    for its result); False after ``timeout`` s.

    After a kill, the twin's participant takes a few seconds to get a restarted mock's data
    (DDS discovery of a participant that replaces a dead one): until then it rightly rejects
    goals, so a scenario that needs an accepted goal waits here first.
    """
    from control_msgs.action import FollowJointTrajectory

    def accepted() -> bool:
        handle = client.send_goal(FollowJointTrajectory, TWIN_ACTION, one_point_goal({MOVED: 0.0}, 0.1))
        if handle.accepted:
            client.wait_future(handle.get_result_async(), 10.0)
        return handle.accepted
    return wait_until(accepted, timeout, interval=retry)


def kill_mid_goal(client, robot_pid: int, states: dict, sig: int = signal.SIGKILL, target: float = 1.2,
                  seconds: float = 4.0, moved_by: float = 0.15, settle: float = 1.2) -> KillOutcome:
    """Send the twin a ``seconds`` s goal to ``target`` rad on :data:`MOVED`, send ``sig`` to
    ``robot_pid`` once the robot has moved ``moved_by`` rad, and measure the answer.

    ``states``: {'real': Recorder of /joint_states, 'sim': Recorder of /sim/joint_states}.
    A rejected goal (nothing moved) is sent again 1 s later, up to :data:`SEND_ATTEMPTS` sends.
    Raises AssertionError if every send is rejected or the robot does not move.
    """
    from control_msgs.action import FollowJointTrajectory
    start = position(states['real'].last())
    for attempt in range(SEND_ATTEMPTS):        # a rejection moves nothing: on a loaded PC a controller may
        sent = time.monotonic()                 # not accept its part within start_lead; send it again
        handle = client.send_goal(FollowJointTrajectory, TWIN_ACTION, one_point_goal({MOVED: target}, seconds),
                                  timeout=15.0)
        accept_s = time.monotonic() - sent
        if handle.accepted:
            break
        time.sleep(1.0)
    assert handle.accepted, f'the twin rejected the goal {SEND_ATTEMPTS} times (its log says why)'
    result = handle.get_result_async()
    assert wait_until(lambda: position(states['real'].last()) > start + moved_by, 5.0), 'the robot did not move'
    at_signal = position(states['real'].last())
    os.kill(robot_pid, sig)
    signalled = time.monotonic()
    stamped = time.time()              # the signal on the states' clock (ROS time)
    assert wait_until(result.done, 10.0, interval=0.001), 'no result within 10 s of the fault'
    answered = time.monotonic()
    # the sim's hold, on its states' own stamps (received in bursts on a loaded PC)
    held = [position(stamped_at(states['sim'], stamped + dt, settle + 10.0)) for dt in (0.5, 1.0)]
    drift = abs(held[1] - held[0])
    response = result.result()
    return KillOutcome(accept_s, answered - signalled, response.status, response.result.error_string, drift, at_signal)


@dataclass
class StormOutcome:
    """A preemption storm: every goal's (status, error_code, error_string), in the order the server
    accepted them, and the monotonic window (s) it ran in."""

    results: list[tuple[int, int, str]] = field(default_factory=list)
    rejected: int = 0
    t0: float = 0.0
    t1: float = 0.0


def preemption_storm(client, action: str = SIM_ACTION, seconds: float = 5.0, period: float = 0.05,
                     duration: float = 3.0) -> StormOutcome:
    """Send a new ``duration`` s goal every ``period`` s for ``seconds`` s on ``action`` (alternating
    targets), then wait for every result; the results are in the order the server accepted the
    goals (the stamps of its goal responses), which is the order they preempt each other in.

    A goal only succeeds if no newer goal was accepted within its ``duration``: 3 s, so that a
    server (or this process) busy for a second on a loaded machine does not turn a goal that
    should be preempted into one that ran out (the 1 s goals of the first version did, once).

    Each result is requested as soon as its goal is accepted: rclpy's action client keeps
    the last 10 responses of a kind (services QoS, KEEP_LAST 10), so a hundred result
    requests sent at once would lose most of their answers."""
    from control_msgs.action import FollowJointTrajectory
    act = client.action_client(FollowJointTrajectory, action)
    out = StormOutcome(t0=time.monotonic())
    sent, results, accepted_at = [], {}, {}

    def collect() -> None:
        for k, future in enumerate(sent):
            if k not in results and future.done():
                handle = future.result()
                results[k] = handle.get_result_async() if handle.accepted else None
                accepted_at[k] = (handle.stamp.sec, handle.stamp.nanosec, k)
    k = 0
    next_send = out.t0
    while time.monotonic() < out.t0 + seconds:
        goal = one_point_goal({MOVED: 0.3 + 0.4 * (k % 2), 'rh_MFJ3': 0.2 + 0.3 * (k % 3)}, duration)
        sent.append(act.send_goal_async(goal))
        k += 1
        next_send += period
        while time.monotonic() < next_send:    # the storm's own pace: one goal every period
            collect()
            time.sleep(0.002)
    out.t1 = time.monotonic()

    def all_answered() -> bool:
        collect()
        return len(results) == len(sent)
    if not wait_until(all_answered, 10.0, interval=0.005):
        raise TimeoutError(f'{len(sent) - len(results)} of {len(sent)} goals got no answer within 10 s')
    out.rejected = sum(1 for r in results.values() if r is None)
    for k in sorted(results, key=lambda k: accepted_at[k]):
        if results[k] is not None:
            response = client.wait_future(results[k], 15.0 + duration)
            out.results.append((response.status, int(response.result.error_code), response.result.error_string))
    return out
