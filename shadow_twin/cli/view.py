"""``shadow-twin view``: the twin in a web browser (issue 38), for a lab PC without RViz or a laptop.

    shadow-twin view [--host 127.0.0.1] [--port 8080] [--domain-id N] [--fixed-frame world]
                     [--markers TOPIC ...] [--joint-error-topic T] [--diagnostics-topic T] [--bridge /mujoco_bridge]

Serves the page of :mod:`shadow_twin.visual.browser` (the TF tree with the sim solid and the real robots'
ghost coloured by its error, the joints' sim-real error plots, the diagnostics, the sim's pause, reset and
reload buttons) from the node :class:`~shadow_twin.ros.view.node.ViewNode`, until Ctrl-C, SIGINT or SIGTERM.
By default only this machine can open it (``--host 127.0.0.1``); from a laptop, tunnel the port over SSH
(``ssh -L 8080:localhost:8080 lab-pc``) or serve every interface with ``--host 0.0.0.0``, where anyone on
the network sees the view and can press its buttons (docs/view.md).

Exit status: 0 stopped by a signal; 1 the node could not start (logged); 2 bad input (one line
``shadow-twin view: error: ...``: a host that is not an IP address, a port out of range or in use, a
domain id out of range).

Registered in ``shadow_twin.cli.main``'s ``DELEGATED``; :func:`main` runs it.
"""

from __future__ import annotations

import argparse
import os
import sys

from shadow_twin.cli.errors import ErrorLineParser, run_reporting_errors
from shadow_twin.common.errors import ConfigError
from shadow_twin.ros.parameters import check_value
from shadow_twin.ros.spinning import events_executor, run_node
from shadow_twin.ros.view.node import NODE_NAME, ViewNode
from shadow_twin.ros.view.parameters import DEFAULT_PORT, LOCALHOST, SPECS
from shadow_twin.visual.browser import check_port_free

PROG = 'shadow-twin view'
#: The marker topics drawn by default: the node's.
MARKER_TOPICS = next(s.default for s in SPECS if s.name == 'marker_topics')
#: ROS domain ids (ROS 2's range).
DOMAIN_IDS = (0, 232)


def build_parser() -> argparse.ArgumentParser:
    """The command's own parser (prog ``shadow-twin view``)."""
    parser = ErrorLineParser(prog=PROG, description=__doc__.split('\n\n')[0])
    parser.add_argument('--host', default=LOCALHOST,
                        help=f'address to serve on (default {LOCALHOST}: this machine only; 0.0.0.0: every '
                             'interface, anyone on the network can see the view and press its buttons)')
    parser.add_argument('--port', type=int, default=DEFAULT_PORT,
                        help=f'TCP port of the page (default {DEFAULT_PORT}; 0: one the system picks, printed)')
    parser.add_argument('--domain-id', type=int, default=None,
                        help='ROS_DOMAIN_ID of the twin (default: the environment\'s, else 0)')
    parser.add_argument('--fixed-frame', default='world', help='TF frame at the scene\'s origin (default world)')
    parser.add_argument('--markers', nargs='+', metavar='TOPIC', default=list(MARKER_TOPICS),
                        help=f'MarkerArray topics drawn (default {" ".join(MARKER_TOPICS)})')
    parser.add_argument('--joint-error-topic', default='/twin/joint_error',
                        help='JointState of sim minus real, plotted (default /twin/joint_error)')
    parser.add_argument('--diagnostics-topic', default='/diagnostics',
                        help='DiagnosticArray listed (default /diagnostics; /diagnostics_agg: aggregated)')
    parser.add_argument('--bridge', default='/mujoco_bridge',
                        help='the sim bridge whose ~/pause, ~/reset and ~/reload the buttons call '
                             '(default /mujoco_bridge)')
    return parser


def overrides(args: argparse.Namespace) -> dict:
    """The node's parameter values from the options. Raises ConfigError: a value its parameter refuses."""
    bridge = '/' + args.bridge.strip().strip('/')
    values = {'host': args.host, 'port': args.port, 'fixed_frame': args.fixed_frame,
              'marker_topics': list(args.markers), 'joint_error_topic': args.joint_error_topic,
              'diagnostics_topic': args.diagnostics_topic, 'pause_service': f'{bridge}/pause',
              'reset_service': f'{bridge}/reset', 'reload_service': f'{bridge}/reload'}
    specs = {s.name: s for s in SPECS}
    for name, value in values.items():
        problem = check_value(specs[name], value)
        if problem is not None:
            option = {'marker_topics': 'markers', 'pause_service': 'bridge', 'reset_service': 'bridge',
                      'reload_service': 'bridge'}.get(name, name)
            raise ConfigError(f'--{option.replace("_", "-")}: {problem}')
    return values


def run(args: argparse.Namespace) -> int:
    """Check the options, then run the view's node until a signal; returns its exit status.

    Raises:
        ConfigError: bad options, or the port cannot be served (nothing started).
    """
    values = overrides(args)
    if args.domain_id is not None:
        if not DOMAIN_IDS[0] <= args.domain_id <= DOMAIN_IDS[1]:
            raise ConfigError(f'--domain-id {args.domain_id}: a ROS domain id lies in {DOMAIN_IDS[0]}..{DOMAIN_IDS[1]}')
        os.environ['ROS_DOMAIN_ID'] = str(args.domain_id)
    check_port_free(args.host, args.port)
    if args.host not in ('127.0.0.1', '::1'):
        print(f'{PROG}: serving every host that reaches {args.host}:{args.port}: anyone there can see the view and '
              f'press its buttons', file=sys.stderr)
    return run_node(lambda: ViewNode(values), NODE_NAME, events_executor, args=[PROG])


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0; 1 the node could not start; 2 after one error line)."""
    return run_reporting_errors(PROG, lambda a: run(build_parser().parse_args(a)),
                                sys.argv[1:] if argv is None else argv)


if __name__ == '__main__':
    sys.exit(main())
