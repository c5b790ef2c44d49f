"""``shadow-twin perspective``: write an rqt perspective: real vs sim plots and the sim - real
errors for chosen joints, or (``--monitor``) the Robot Monitor of the twin's diagnostics.
Open it with ``shadow-twin rqt --perspective FILE``. Exit status 0, or 2 with one line for bad input."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.plots.perspective import (DEFAULT_JOINTS, ERROR_TOPIC, PROG, REAL_TOPIC, SIM_TOPIC,
                                           build_monitor_perspective, build_plots_perspective, write_perspective)


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(',')]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description='Write an rqt perspective plotting real vs sim joint '
                                     'positions and the twin monitor\'s sim - real errors, or with --monitor the '
                                     'Robot Monitor of its diagnostics (a window of its own, so the plots keep '
                                     'their rate).')
    parser.add_argument('--joints', type=_csv, default=list(DEFAULT_JOINTS), metavar='J1,J2,...',
                        help=f'joints to plot (default: {",".join(DEFAULT_JOINTS)})')
    parser.add_argument('--out', type=Path, required=True, help='perspective file to write (.perspective)')
    parser.add_argument('--monitor', action='store_true',
                        help='write the Robot Monitor perspective (/diagnostics_agg) instead of the plots')
    parser.add_argument('--model', type=Path, default=None,
                        help="the sim's MJCF: its joint order (default: the built-in Shadow Hand E)")
    parser.add_argument('--real-order', type=_csv, default=None, metavar='J1,J2,...',
                        help="joint order of the robot's JointState (default: the sim's, as the mock hardware)")
    parser.add_argument('--real-topic', default=REAL_TOPIC, help=f'default {REAL_TOPIC}')
    parser.add_argument('--sim-topic', default=SIM_TOPIC, help=f'default {SIM_TOPIC}')
    parser.add_argument('--error-topic', default=ERROR_TOPIC, help=f'default {ERROR_TOPIC}')
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``shadow-twin perspective``; returns the exit status (argparse exits 2
    itself on unknown options)."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.monitor:
            perspective, what = build_monitor_perspective(), 'robot monitor'
        else:
            perspective = build_plots_perspective(args.joints, model_path=args.model, real_joints=args.real_order,
                                                  real_topic=args.real_topic, sim_topic=args.sim_topic,
                                                  error_topic=args.error_topic)
            what = f'{len(args.joints)} joint plots, sim - real plot'
        path = write_perspective(args.out, perspective)
    except (ShadowTwinError, OSError) as exc:
        print(f'{PROG}: error: {exc}', file=sys.stderr)
        return ExitCode.BAD_INPUT
    print(f'wrote {path}: {what}; open with: shadow-twin rqt --perspective {path}')
    return ExitCode.OK


if __name__ == '__main__':
    sys.exit(main())
