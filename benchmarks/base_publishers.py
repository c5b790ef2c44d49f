"""Benchmark: other /cmd_vel publishers beside the twin's cell (issue 33, item 2).

``shadow-twin up --cell --mock-hardware --no-monitor`` (goal preview off: only the base's
driving is judged here) on a private ROS domain, and nodes in processes of their own
(test/support/cmd_vel_publisher.py) holding a /cmd_vel publisher:

* two idle ones (a Twist one as rqt_robot_steering, a TwistStamped one as nav2's controller
  server) alive through the run: ``--goals`` (20) base goals of 0.15 m in 1.5 s, forth and back;
  target: none aborted for another driver (goals that fail otherwise, e.g. on a starved PC, are
  counted and printed);
* ``--teleops`` (3) times a teleop (teleop_twist_keyboard) that starts sending
  geometry_msgs/Twist at 10 Hz once a 0.8 m, 5 s base goal has moved the base 5 cm: target the
  goal ABORTED naming the teleop and /cmd_vel, and each base's first zero command stamped within
  0.1 s of the teleop's first message; both bases at rest after.

Latency is measured on stamps: the teleop's send time (its wall clock just before ``publish``,
printed by it) to the header stamp of the twin's first zero TwistStamped on ``/cmd_vel`` (the
real base, stopped by the watch itself) and on ``/sim/cmd_vel`` (the sim base, stopped when the
twin aborts the goal); one host, one clock. The client's answer (result arrival here) is printed too.

Usage: .venv/bin/python benchmarks/base_publishers.py [--goals 20] [--teleops 3] [--start-timeout 180]
Prints the figures, exits 1 when a target is missed. Not part of the tests.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'test'))
sys.path.insert(0, str(REPO))

from support.scenarios import base_publishers as scenarios  # noqa: E402  (after the path set-up)
from support import cell as cell_helpers  # noqa: E402
from support import ros as ros_helpers  # noqa: E402
from checks import Checks  # noqa: E402  (benchmarks/checks.py, beside this script)

ABORT_TARGET_S = 0.1
IDLE = {'rqt_robot_steering': 'Twist', 'controller_server': 'TwistStamped'}
TELEOP = 'teleop_twist_keyboard'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--goals', type=int, default=20, help='base goals beside the idle publishers')
    parser.add_argument('--teleops', type=int, default=3, help='base goals a teleop sends into')
    parser.add_argument('--start-timeout', type=float, default=180.0, help='s for the cell to start (a loaded PC)')
    args = parser.parse_args(argv)
    from action_msgs.msg import GoalStatus
    ros_helpers.isolate_domain()
    client = ros_helpers.RosClient('base_publishers_benchmark')
    check = Checks()
    folder = Path(tempfile.mkdtemp(prefix='base_publishers_'))
    cell = scenarios.start_cell(ros_helpers, client, folder, *scenarios.UP_ARGS, timeout=args.start_timeout)
    idle = {}
    try:
        idle = {name: scenarios.start_publisher(folder, name, kind) for name, kind in IDLE.items()}
        if not scenarios.wait_in_graph(client, list(IDLE)):
            raise RuntimeError('the idle publishers are not in the graph')
        cell_helpers.wait_flowed([cell.odom], 1.0)
        outcomes = scenarios.idle_goals(ros_helpers, client, cell, args.goals)
        aborted = [o for o in outcomes if o.other_driver]
        failed = [o for o in outcomes if o.status != GoalStatus.STATUS_SUCCEEDED and not o.other_driver]
        for o in (aborted + failed)[:3]:
            print(f'  not succeeded (status {o.status}): {o.error_string}')
        check(not aborted and all(p.alive() for p in idle.values()),
              f'{args.goals} base goals beside 2 idle /cmd_vel publishers ({", ".join(IDLE)}): '
              f'{args.goals - len(aborted) - len(failed)} succeeded, {len(aborted)} aborted for another driver '
              f'(target: none), {len(failed)} failed otherwise (not this check\'s: e.g. a starved PC)')
        real, sim, answers, named, rested = [], [], [], 0, 0
        for k in range(args.teleops):
            teleop = scenarios.start_publisher(folder, f'{TELEOP}_{k}', 'Twist', rate=10.0)
            if not scenarios.wait_in_graph(client, [f'{TELEOP}_{k}']):
                raise RuntimeError('the teleop is not in the graph')
            cell_helpers.wait_flowed([cell.odom], 0.5)
            out = scenarios.teleop_mid_goal(ros_helpers, client, cell, teleop)
            ok = out.status == GoalStatus.STATUS_ABORTED
            named += ok and f'/{TELEOP}_{k}' in out.error_string and 'on /cmd_vel' in out.error_string
            rested += out.at_rest
            real.append(out.zero_after.get('/cmd_vel', math.inf) if ok else math.inf)
            sim.append(out.zero_after.get('/sim/cmd_vel', math.inf) if ok else math.inf)
            answers.append(out.answer_s)
            print(f'  teleop {k + 1}: status {out.status}; zero command after its first message: real '
                  f'{real[-1] * 1e3:.1f} ms, sim {sim[-1] * 1e3:.1f} ms; answer here {out.answer_s * 1e3:.0f} ms; '
                  f'"{out.error_string}"', flush=True)
        worst = max(real + sim) if real else math.inf
        check(worst <= ABORT_TARGET_S and named == args.teleops,
              f'a teleop sending Twist at 10 Hz into a base goal, {args.teleops} times: aborted and named '
              f'{named}/{args.teleops}; teleop first message send time -> the twin\'s zero TwistStamped stamp: '
              f'real base p50 {np.median(real) * 1e3:.1f} ms max {max(real) * 1e3:.1f} ms, sim base p50 '
              f'{np.median(sim) * 1e3:.1f} ms max {max(sim) * 1e3:.1f} ms (target <= {ABORT_TARGET_S * 1e3:.0f} ms); '
              f'answer to the client p50 {np.nanmedian(answers) * 1e3:.0f} ms')
        check(rested == args.teleops, f'both bases at rest after each aborted goal: {rested}/{args.teleops}')
    finally:
        exits = {name: p.stop() for name, p in idle.items()}
        status = cell.up.stop(timeout=15.0)
        client.close()
    check(status == 0 and exits == dict.fromkeys(IDLE, 0), f'every process stopped cleanly (up {status}, '
                                                           f'idle publishers {exits})')
    print(f'logs: {folder}')
    return 1 if check.failed else 0


if __name__ == '__main__':
    sys.exit(main())
