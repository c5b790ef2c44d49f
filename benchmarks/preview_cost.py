"""The goal preview's cost to the goals it guards (``benchmarks/preview.py``'s live sections, issue 33),
on the hand twin of ``benchmarks/predicted_failures.py`` (:class:`predicted_failures.Twin`).

* :func:`motion_latency` (item 3): goal sent -> the mock's first /joint_states sample more than
  1 mrad from where it was (on its stamp, against the send time on the same clock), p50 and p90 of
  unstamped goals (the twin starts them ``start_lead`` after their arrival) with ``preview``
  enforce and off (set on the twin node at run time); target: p50 on - p50 off <= 30 ms.
* :func:`long_goal_runs` (item 4): a 300 s goal is accepted and runs (the mock follows it for
  10 s, on stamps), then is canceled.
* :func:`previews_during_goal` (item 5): 20 ``/twin/preview`` requests during a 10 s twin goal:
  each answered (a result or a rejection), the goal SUCCEEDED, ``/sim/joint_states`` >= 240 Hz
  over the goal: on the header stamps received here, or as the sim bridge logged its rate (a
  receiver starved by other processes loses messages; the publisher's figure is what it sent).
* :func:`canceled_preview_cpu` (item 6): a ``/twin/preview`` of a 600 s goal canceled after 1 s:
  the twin process's CPU (``/proc/<pid>/stat`` utime + stime) in the 0.5 s window from 0.5 s
  after the cancel is back to idle (<= idle + 0.15 of a core).

Import with rclpy.
"""

from __future__ import annotations

import math
import os
import re
import time

import numpy as np
from support import ros as ros_helpers
from support.scenarios.cell import positions
from predicted_failures import PREVIEW_ACTION, WAIT, answer, check

LATENCY_EXTRA_P50_MAX = 0.030     # s, preview enforce minus off
MOVED_RAD = 1e-3
RATE_MIN_HZ = 240.0
CPU_EXTRA_MAX = 0.15              # cores above idle, 0.5-1.0 s after the cancel
TICK = os.sysconf('SC_CLK_TCK')
#: The bridges' real-time factor line (mujoco_bridge/diagnostics.py), one per 5 s window: its log stamp and rate.
RATE_LINE = re.compile(r'\[(\d+\.\d+)\] \[mujoco_bridge\]: sim time .*?joint states at ([\d.]+) Hz')
RATE_LOG_WINDOW_S = 5.0


def slow_goal(seconds: float, joints=('rh_FFJ3', 'rh_MFJ3'), period: float = 60.0, step: float = 1.0):
    """A slow goal of ``seconds`` s, a point every ``step`` s: each joint follows
    0.6 sin^2(pi t / ``period``) rad (at most 0.031 rad/s), velocities given."""
    from control_msgs.action import FollowJointTrajectory
    from trajectory_msgs.msg import JointTrajectoryPoint

    from shadow_twin.ros.conversions import duration_msg
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = list(joints)
    for t in np.arange(step, seconds + step / 2, step):
        q = 0.6 * math.sin(math.pi * t / period) ** 2
        qd = 0.6 * math.pi / period * math.sin(2 * math.pi * t / period)
        goal.trajectory.points.append(JointTrajectoryPoint(positions=[q] * len(joints), velocities=[qd] * len(joints),
                                                           time_from_start=duration_msg(float(t))))
    return goal


def motion_latency(twin, goals: int, misses: list[str]) -> None:
    """Item 3 (module doc): ``goals`` goals with preview enforce, then as many with it off."""
    from action_msgs.msg import GoalStatus
    figures = {}
    try:
        for policy in ('enforce', 'off'):
            assert all(r.successful for r in twin.client.set_parameters('/shadow_twin', {'preview': policy}, WAIT))
            twin.rest()
            delays, failed = [], 0
            for k in range(goals):
                before = ros_helpers.current(twin.rec['real'], WAIT)
                q0 = positions(before, ['rh_FFJ3'])[0]
                sent = ros_helpers.ros_now()
                handle = twin.send(ros_helpers.one_point_goal({'rh_FFJ3': 0.5 if q0 < 0.25 else 0.0}, 0.5))
                status, _, answered = answer(twin, handle, WAIT)
                failed += status != GoalStatus.STATUS_SUCCEEDED
                moved = [ros_helpers.stamp_s(m) for m in twin.span('real', sent, answered)
                         if abs(positions(m, ['rh_FFJ3'])[0] - q0) > MOVED_RAD]
                if moved:
                    delays.append(moved[0] - sent)
                # the finger creeps for a while after a move: the next goal starts from rest
                ros_helpers.wait_until(lambda: abs(twin.rec['real'].last().velocity[
                    list(twin.rec['real'].last().name).index('rh_FFJ3')]) < 2e-3, 5.0)
            figures[policy] = (np.percentile(delays, [50, 90]) if delays else np.array([math.inf] * 2), failed)
    finally:
        twin.client.set_parameters('/shadow_twin', {'preview': 'enforce'}, WAIT)
    on, off = figures['enforce'][0], figures['off'][0]
    print(f'  goal sent -> motion (unstamped goals, start_lead {twin.lead * 1e3:.0f} ms, {goals} each): '
          f'preview enforce p50 {on[0] * 1e3:.0f} ms, p90 {on[1] * 1e3:.0f} ms | off p50 {off[0] * 1e3:.0f} ms, '
          f'p90 {off[1] * 1e3:.0f} ms; goals not succeeded: {figures["enforce"][1]} | {figures["off"][1]}')
    check(misses, on[0] - off[0] <= LATENCY_EXTRA_P50_MAX,
          f'goal sent -> motion: p50 on - off {(on[0] - off[0]) * 1e3:+.0f} ms (target <= '
          f'{LATENCY_EXTRA_P50_MAX * 1e3:.0f})')


def long_goal_runs(twin, misses: list[str]) -> None:
    """Item 4 (module doc)."""
    from action_msgs.msg import GoalStatus
    twin.rest()
    sent = ros_helpers.ros_now()
    handle = twin.send(slow_goal(300.0))
    answered = ros_helpers.ros_now() - sent
    ran, error = False, 'rejected'
    if handle.accepted:
        result = handle.get_result_async()
        msg = ros_helpers.stamped_at(twin.rec['real'], sent + twin.lead + 10.0, WAIT)   # 10 s running
        at, want = positions(msg, ['rh_FFJ3'])[0], 0.6 * math.sin(math.pi * 10.0 / 60.0) ** 2
        ran = not result.done() and abs(at - want) < 0.05
        error = f'after 10 s rh_FFJ3 at {at:.3f} rad (desired {want:.3f}); still running: {not result.done()}'
        if not result.done():
            twin.client.wait_future(handle.cancel_goal_async(), WAIT)
        response = twin.client.wait_future(result, WAIT)
        error += f'; canceled then: status {response.status} ({GoalStatus.STATUS_CANCELED} = canceled) ' \
                 f'{response.result.error_string[:100]!r}'
    print(f'  300 s goal: answered in {answered * 1e3:.0f} ms, {"accepted" if handle.accepted else "rejected"}; {error}')
    check(misses, ran, '300 s goal: accepted and runs (10 s followed, then canceled)')


def previews_during_goal(twin, previews: int, misses: list[str]) -> None:
    """Item 5 (module doc): a preview every 0.4 s from 0.5 s after the goal's send."""
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    act = twin.client.action_client(FollowJointTrajectory, PREVIEW_ACTION, WAIT)
    twin.rest()
    t0 = time.monotonic()
    handle = twin.send(slow_goal(10.0, period=20.0, step=0.1))
    start = t0 + twin.lead
    sent, results = [], {}

    def collect() -> bool:
        """Each result is asked for as soon as its goal is accepted (support.scenarios.hand_faults.preemption_storm:
        rclpy's action client keeps only the last 10 responses of a kind)."""
        for k, future in enumerate(sent):
            if k not in results and future.done():
                h = future.result()
                results[k] = h.get_result_async() if h.accepted else None
        return len(results) == len(sent) and all(r is None or r.done() for r in results.values())
    for k in range(previews):
        while time.monotonic() < t0 + 0.5 + 0.4 * k:
            collect()
            time.sleep(0.002)
        # every fourth: the little finger into its stop in 0.1 s (predicted to fail)
        goal = ros_helpers.one_point_goal({'rh_RFJ3': 0.3 + 0.05 * k, 'rh_LFJ3': 1.5708 if k % 4 == 3 else 0.4},
                                          0.1 if k % 4 == 3 else 3.0)
        sent.append(act.send_goal_async(goal))
    answered = ros_helpers.wait_until(collect, 60.0)
    status, error, _ = answer(twin, handle, WAIT)
    t1 = time.monotonic()
    rejected = sum(1 for r in results.values() if r is None)
    outcomes = [r.result().status for r in results.values() if r is not None and r.done()]
    rate = sim_rate(twin, start, min(t1, start + 10.0))
    offset = time.time() - time.monotonic()
    logged = published_rate(twin.procs['sim'].output(), start + offset, min(t1, start + 10.0) + offset)
    print(f'  {previews} previews during a 10 s goal (every fourth failing): {len(outcomes)} results '
          f'({outcomes.count(GoalStatus.STATUS_SUCCEEDED)} predicted to succeed), {rejected} rejected, {previews - len(outcomes) - rejected} unanswered; goal '
          f'{status} {error[:100]!r}; /sim/joint_states over the goal: {rate:.1f} Hz received here (on stamps), '
          f'{logged:.1f} Hz as the sim bridge logged it (lowest 5 s window)')
    check(misses, answered and len(outcomes) + rejected == previews, 'previews during a goal: every one answered')
    check(misses, status == GoalStatus.STATUS_SUCCEEDED, 'previews during a goal: the goal succeeded')
    # a receiver starved by other processes loses messages (KEEP_LAST): the publisher's own log counts too
    check(misses, max(rate, logged) >= RATE_MIN_HZ,
          f'previews during a goal: sim stream {max(rate, logged):.1f} Hz (target >= {RATE_MIN_HZ:g})')


def sim_rate(twin, t0: float, t1: float) -> float:
    """/sim/joint_states messages per second stamped within monotonic ``t0`` .. ``t1``."""
    from support.scenarios.hand_faults import stamp_rate
    return stamp_rate(twin.rec['sim'], t0, t1, WAIT)


def published_rate(log: str, t0: float, t1: float) -> float:
    """The lowest joint-state rate (Hz) the sim bridge logged in its 5 s windows that overlap
    ``t0`` .. ``t1`` (ROS time s), from its real-time factor lines; 0 when none overlaps."""
    rates = [float(hz) for end, hz in RATE_LINE.findall(log) if t0 < float(end) < t1 + RATE_LOG_WINDOW_S]
    return min(rates, default=0.0)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (all its threads), s (/proc/<pid>/stat)."""
    with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def cpu_windows(pid: int, count: int, width: float = 0.5) -> list[float]:
    """CPU use of ``pid`` (cores) in ``count`` consecutive windows of ``width`` s from now."""
    out, last, t = [], cpu_seconds(pid), time.monotonic()
    for _ in range(count):
        time.sleep(width)
        now, tn = cpu_seconds(pid), time.monotonic()
        out.append((now - last) / (tn - t))
        last, t = now, tn
    return out


def canceled_preview_cpu(twin, misses: list[str]) -> None:
    """Item 6 (module doc)."""
    from control_msgs.action import FollowJointTrajectory
    pid = twin.procs['twin'].pid
    twin.rest()
    idle = float(np.median(cpu_windows(pid, 4)))
    act = twin.client.action_client(FollowJointTrajectory, PREVIEW_ACTION, WAIT)
    handle = twin.client.wait_future(act.send_goal_async(slow_goal(600.0)), WAIT)
    busy = cpu_windows(pid, 2)
    ended = 'rejected'
    if handle.accepted:
        result = handle.get_result_async()
        if not result.done():
            twin.client.wait_future(handle.cancel_goal_async(), WAIT)
            ended = 'canceled'
        else:
            ended = f'ended before the cancel ({result.result().result.error_string[:80]!r})'
    after = cpu_windows(pid, 4)
    print(f'  600 s preview {ended} after 1 s: twin CPU idle {idle:.2f}, previewing {max(busy):.2f}, 0.5 s windows '
          f'after: {", ".join(f"{c:.2f}" for c in after)} cores')
    check(misses, after[1] <= idle + CPU_EXTRA_MAX,
          f'canceled preview: twin CPU 0.5-1.0 s after {after[1]:.2f} cores (target <= idle {idle:.2f} + '
          f'{CPU_EXTRA_MAX})')
