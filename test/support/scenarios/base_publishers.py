"""Other /cmd_vel publishers beside the twin's cell (issue 33), shared by
test/cli/test_base_publishers.py and benchmarks/base_publishers.py.

* :func:`start_cell`: ``shadow-twin up --cell --mock-hardware`` with recorders of the bases'
  topics only (odometry, commands): a client recording every joint-state stream as well fell
  10-17 s behind them on a loaded 2-core PC.
* :func:`start_publisher`: a ``test/support/cmd_vel_publisher.py`` process (idle, or a teleop once told)
  and :func:`wait_in_graph` until this process's graph shows it on ``/cmd_vel``.
* :func:`idle_goals`: base goals back and forth while idle publishers live; each goal's status.
* :func:`teleop_mid_goal`: a base goal, a teleop sending Twist at 10 Hz once the base moves;
  the answer, and when each base got its first zero command after the teleop's first message,
  on stamps (the teleop's send time, printed by it, vs the twin's TwistStamped header stamps).

Import with rclpy available (after the ``ros`` fixture or ``support.ros``).
"""

from __future__ import annotations

import math
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

from support.scenarios import cell_faults as cell_faults
from support.scenarios.cell_faults import Cell
from support.scenarios.cell import (START_TIMEOUT, base_points, make_goal, pose_of, result_of, send, straight,
                                    wait_base_rest)
from support.cmd_vel_publisher import sent_times
from support.ros import PYTHON, NodeProcess, stamp_s, wait_until

SCRIPT = Path(__file__).resolve().parents[1] / 'cmd_vel_publisher.py'
CMD_VEL = '/cmd_vel'
#: ``up``'s arguments beside ``--cell --mock-hardware``: no monitor, no goal preview (each has
#: tests of its own; here only the base's driving is judged, and both cost CPU on a small PC).
UP_ARGS = ('--no-monitor', '--ros-args', '-p', "preview:='off'")


def start_cell(helpers, client, folder: Path, *extra: str, timeout: float = START_TIMEOUT) -> Cell:
    """``shadow-twin up --cell --mock-hardware EXTRA`` (:func:`support.scenarios.cell_faults.start_cell`)
    recording only the bases' topics; waits up to ``timeout`` s. RuntimeError with the output when it
    does not start."""
    return cell_faults.start_cell(helpers, client, folder, *extra, timeout=timeout, joint_states=False, odom_depth=50)


def start_publisher(folder: Path, name: str, msg_type: str = 'Twist', rate: float = 0.0,
                    timeout: float = 60.0) -> NodeProcess:
    """A node ``name`` with a ``msg_type`` publisher on /cmd_vel, idle (``rate`` 0) or sending at
    ``rate`` Hz after SIGUSR1; waits until it says ``ready``. RuntimeError with its output if not."""
    proc = NodeProcess(None, [], Path(folder) / f'{name}.log', command=[
        PYTHON, str(SCRIPT), '--ros-args', '-r', f'__node:={name}', '-p', f'type:={msg_type}',
        '-p', f'topic:={CMD_VEL}', '-p', f'rate:={float(rate)}'])
    if not wait_until(lambda: 'ready' in proc.output() or not proc.alive(), timeout) or not proc.alive():
        proc.stop()
        raise RuntimeError(f'{name} did not start:\n{proc.output()[-2000:]}')
    return proc


def wait_in_graph(client, names: list[str], timeout: float = 30.0) -> bool:
    """Wait until the graph of ``client`` shows a /cmd_vel publisher of each node of ``names``."""
    def shown() -> bool:
        found = {e.node_name for e in client.node.get_publishers_info_by_topic(CMD_VEL)}
        return set(names) <= found
    return wait_until(shown, timeout)


@dataclass
class GoalOutcome:
    """One base goal: its status (action_msgs GoalStatus) and error string."""

    status: int
    error_string: str

    @property
    def other_driver(self) -> bool:
        """Ended for another driver on a base's cmd_vel (the twin's words for it)."""
        return 'another driver' in self.error_string


def idle_goals(helpers, client, cell, count: int, length: float = 0.15, seconds: float = 1.5) -> list[GoalOutcome]:
    """``count`` straight base goals of ``length`` m in ``seconds`` s, forth and back, each from
    the base at rest; their outcomes (a rejected goal: status -1, no answer or no rest in time: -2)."""
    odoms = [cell.odom, cell.sim_odom]
    out = []
    for k in range(count):
        try:
            wait_base_rest(helpers, odoms)
            start = pose_of(cell.odom.last())
            handle = send(client, make_goal(base=base_points(start, straight(length if k % 2 == 0 else -length),
                                                             seconds)))
            if not handle.accepted:
                out.append(GoalOutcome(-1, 'rejected'))
                continue
            status, result = result_of(client, handle, timeout=seconds + 20.0)
            out.append(GoalOutcome(status, result.error_string))
        except (TimeoutError, AssertionError) as exc:     # no answer, no rest: a starved PC
            out.append(GoalOutcome(-2, str(exc)))
    return out


@dataclass
class TeleopOutcome:
    """A teleop sending during a base goal, and what followed.

    Attributes:
        status, error_string: the goal's answer.
        first_sent: the teleop's first message, its send time (s, wall clock = ROS time here).
        zero_after: {topic: header stamp of the first zero TwistStamped the twin sent on it at or
            after ``first_sent`` minus ``first_sent``, s} (inf when none came).
        answer_s: ROS time of the answer here minus ``first_sent``, s.
        at_rest: both bases' odometry showed them stopped afterwards.
    """

    status: int = -1
    error_string: str = ''
    first_sent: float = math.nan
    zero_after: dict = field(default_factory=dict)
    answer_s: float = math.nan
    at_rest: bool = False


def teleop_mid_goal(helpers, client, cell, teleop: NodeProcess, length: float = 0.8,
                    seconds: float = 5.0) -> TeleopOutcome:
    """A straight base goal; once the real base moved 5 cm, SIGUSR1 to ``teleop`` (it starts
    sending at its rate); wait for the answer and for the bases to rest; stop the teleop."""
    out = TeleopOutcome()
    start = pose_of(cell.odom.last())
    handle = send(client, make_goal(base=base_points(start, straight(length), seconds)))
    if not handle.accepted:
        out.error_string = 'the base goal was rejected'
        return out

    def moved():
        x, y, _ = pose_of(cell.odom.last())
        return math.hypot(x - start[0], y - start[1]) > 0.05
    try:
        if not wait_until(moved, 15.0):
            out.error_string = 'the real base did not move'
            return out
        os.kill(teleop.proc.pid, signal.SIGUSR1)
        status, result = result_of(client, handle, timeout=seconds + 20.0)
        out.answer_s = helpers.ros_now()
        out.status, out.error_string = status, result.error_string
    finally:
        teleop.stop()
    sent = sent_times(teleop.output())
    if not sent:
        return out
    out.first_sent = sent[0]
    out.answer_s -= out.first_sent
    recorders = {'/cmd_vel': cell.cmd_vel, '/sim/cmd_vel': cell.sim_cmd_vel}

    def zeros(recorder) -> list[float]:
        return [stamp_s(m) for _, m in recorder.snapshot()
                if m.twist.linear.x == 0.0 and m.twist.angular.z == 0.0 and stamp_s(m) >= out.first_sent]
    # a loaded PC hands this process the commands late: wait for them (10 s) rather than read too early
    wait_until(lambda: all(zeros(r) for r in recorders.values()), 10.0)
    for name, recorder in recorders.items():
        stamps = zeros(recorder)
        out.zero_after[name] = min(stamps) - out.first_sent if stamps else math.inf
    try:
        wait_base_rest(helpers, [cell.odom, cell.sim_odom])
        out.at_rest = True
    except AssertionError:
        out.at_rest = False
    return out
