"""``shadow-twin calibrate-live``: ask the running calibration node to calibrate, and follow it.

Calls ``<node>/calibrate`` (std_srvs/Trigger; the node answers at once, a request whose answer
was lost is sent again and then follows the run going on), then prints the node's ``~/status``
(diagnostic_msgs/DiagnosticStatus) as it changes until the run ends: the run is followed on its
status topic, not by waiting on the service. A node already busy with another run when asked
answers "a run is going on: DIR (...)": that is printed and the exit status is 2.

Exit status: 0 the calibration finished (installed, or written with install off);
3 it was refused (hold-out worse / nothing better); 1 it failed; 2 the node did not
answer or refused to start; 124 timeout.
"""

from __future__ import annotations

import argparse
import sys

from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.ros.calibration_client import SpinningNode, StatusFollower, follow, request_calibration, run_dir_of


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='shadow-twin calibrate-live',
                                     description='Trigger a calibration of the running twin and follow it.')
    parser.add_argument('--node', default='/calibration_node', help='calibration node (default /calibration_node)')
    parser.add_argument('--timeout', type=float, default=3600.0, help='give up after this many s (default 3600)')
    parser.add_argument('--service-timeout', type=float, default=10.0,
                        help='wait for the node to appear, s (default 10)')
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``shadow-twin calibrate-live``; returns the exit status."""
    args = build_parser().parse_args(argv)
    ros = SpinningNode('calibrate_live_client')
    try:
        follower = StatusFollower(ros.node, args.node)
        try:
            answer = request_calibration(ros.node, args.node, args.service_timeout,
                                         out=lambda line: print(line, flush=True), follower=follower)
        except ShadowTwinError as exc:
            print(f'shadow-twin calibrate-live: error: {exc} (is the calibration_node running on the '
                  f'ROS_DOMAIN_ID this shell uses?)', file=sys.stderr)
            return ExitCode.BAD_INPUT
        print(answer.message, flush=True)
        if not answer.success:
            return ExitCode.BAD_INPUT
        code, status = follow(ros.node, follower, run_dir_of(answer), args.timeout,
                              out=lambda line: print(line, flush=True))
        if code == ExitCode.TIMEOUT:
            print(f'shadow-twin calibrate-live: still running after {args.timeout:g} s; the node continues',
                  file=sys.stderr)
        elif 'report' in status:
            print(f'report: {status["report"]}')
        return code
    finally:
        ros.close()


if __name__ == '__main__':
    sys.exit(main())
