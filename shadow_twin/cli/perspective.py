"""``shadow-twin perspective``: write an rqt perspective (real vs sim plots, the sim - real
errors, the robot monitor) for chosen joints. Exit status 0, or 2 with one line for bad input."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.plots.perspective import DEFAULT_JOINTS, ERROR_TOPIC, PROG, REAL_TOPIC, SIM_TOPIC, write_perspective


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(',')]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description='Write an rqt perspective plotting real vs sim joint '
                                     'positions, the twin monitor\'s sim - real errors and its diagnostics.')
    parser.add_argument('--joints', type=_csv, default=list(DEFAULT_JOINTS), metavar='J1,J2,...',
                        help=f'joints to plot (default: {",".join(DEFAULT_JOINTS)})')
    parser.add_argument('--out', type=Path, required=True, help='perspective file to write (.perspective)')
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
        path = write_perspective(args.out, args.joints, model_path=args.model, real_joints=args.real_order,
                                 real_topic=args.real_topic, sim_topic=args.sim_topic,
                                 error_topic=args.error_topic)
    except (ShadowTwinError, OSError) as exc:
        print(f'{PROG}: error: {exc}', file=sys.stderr)
        return 2
    print(f'wrote {path}: {len(args.joints)} joint plots, sim - real plot, robot monitor; '
          f'open with: rqt --perspective-file {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
