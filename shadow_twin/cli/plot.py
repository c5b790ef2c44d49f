"""``shadow-twin plot``: PNGs of real vs simulated joint positions from a bag, and the RMS
sim - real error per joint (rad). Exit status 0, or 2 with one line for bad input.

``--out`` may hold only what earlier plots wrote there (listed in :data:`MANIFEST`) unless
``--force``: a user's own ``overview.png`` is never replaced silently."""

from __future__ import annotations

import sys
from pathlib import Path

from shadow_twin.calibration.recordings.bag_comparison import MOVING_RANGE, REAL_TOPIC, SIM_TOPIC, compare_bag
from shadow_twin.common.errors import ConfigError, ShadowTwinError
from shadow_twin.cli.inputs import OneLineParser
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.common.files import write_text_atomic
from shadow_twin.plots.bag_plots import BagComparison, check_out_dir, default_out_dir, write_plots


#: File in ``--out`` naming the files plots wrote there, one per line.
MANIFEST = 'shadow-twin-plots.txt'


def build_parser() -> OneLineParser:
    """Argument parser of ``shadow-twin plot``."""
    parser = OneLineParser(
        prog='shadow-twin plot',
        description='Plot real vs simulated joint positions of a bag as PNGs (one per joint and an overview), '
                    'and print the RMS sim - real error per joint (rad).')
    parser.add_argument('--bag', type=Path, required=True,
                        help='recording: ROS 1 .bag or ROS 2 bag (directory, .mcap or .db3)')
    parser.add_argument('--out', type=Path,
                        help='output directory (default: <bag name>_plots in the current directory)')
    parser.add_argument('--force', action='store_true',
                        help='write into an --out that holds files no plot wrote (same-named ones are replaced)')
    parser.add_argument('--real-topic', help=f'real JointState topic (default: {REAL_TOPIC})')
    parser.add_argument('--sim-topic', help=f'simulated JointState topic (default: {SIM_TOPIC})')
    parser.add_argument('--joints', metavar='GLOB,GLOB',
                        help="joints to plot, comma-separated fnmatch globs, e.g. 'rh_FF*,rh_THJ4' "
                             '(default: every joint that moves)')
    parser.add_argument('--all-joints', action='store_true',
                        help=f'also plot joints that do not move (position range <= {MOVING_RANGE} rad)')
    return parser


def plotted_files(out_dir: Path) -> set[str]:
    """Names of the files earlier plots wrote into ``out_dir`` (its :data:`MANIFEST`; empty if none)."""
    try:
        return set((out_dir / MANIFEST).read_text(encoding='utf-8').split('\n')) - {''}
    except (OSError, UnicodeDecodeError):
        return set()


def check_own_files(out_dir: Path, force: bool) -> None:
    """ConfigError when ``out_dir`` holds files that no plot wrote (unless ``force``)."""
    if force or not out_dir.is_dir():
        return
    ours = plotted_files(out_dir) | {MANIFEST}
    foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in ours)
    if foreign:
        raise ConfigError(f'--out {out_dir} holds files no plot wrote ({", ".join(foreign[:3])}'
                          f'{", ..." if len(foreign) > 3 else ""}); choose another directory or pass --force '
                          f'to write into it')


def format_table(cmp: BagComparison) -> list[str]:
    """Lines of the per-joint table: RMS and max |sim - real| (rad), or the range of a single stream."""
    width = max([len('joint'), *(len(t.joint) for t in cmp.traces)])
    if not cmp.paired:
        lines = [f'{"joint":<{width}}  {"range (rad)":>12}']
        return lines + [f'{t.joint:<{width}}  {t.range:12.6f}' for t in cmp.traces]
    lines = [f'{"joint":<{width}}  {"RMS sim-real (rad)":>18}  {"max |sim-real| (rad)":>20}  {"samples":>7}']
    for t in cmp.traces:
        if t.err.size:
            lines.append(f'{t.joint:<{width}}  {t.rms:18.6f}  {t.max_abs:20.6f}  {t.err.size:7d}')
        else:
            only = 'real' if t.real_t.size else 'sim'
            lines.append(f'{t.joint:<{width}}  {"n/a (only in " + only + ")":>18}')
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run ``shadow-twin plot``; returns the exit status (0 ok, 2 bad input)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2, printed by argparse)
        return int(exc.code or 0)
    try:
        joints = None
        if args.joints is not None:
            joints = [j.strip() for j in args.joints.split(',') if j.strip()]
            if not joints:
                raise ConfigError('--joints is empty')
        out_dir = args.out if args.out is not None else default_out_dir(args.bag)
        check_out_dir(out_dir, args.bag)
        check_own_files(out_dir, args.force)
        cmp = compare_bag(args.bag, args.real_topic, args.sim_topic, joints, moving_only=not args.all_joints)
        earlier = plotted_files(out_dir)
        written = write_plots(cmp, out_dir)
        names = sorted(earlier | {p.name for p in written})
        write_text_atomic(out_dir / MANIFEST, '\n'.join(names) + '\n')
    except ShadowTwinError as exc:
        print(f'shadow-twin plot: error: {" ".join(str(exc).split())}', file=sys.stderr)
        return ExitCode.BAD_INPUT
    except OSError as exc:
        print(f'shadow-twin plot: error: cannot write plots: {exc}', file=sys.stderr)
        return ExitCode.BAD_INPUT
    if cmp.paired:
        print(f'{cmp.bag}: real {cmp.real_topic} vs sim {cmp.sim_topic}, {len(cmp.traces)} joint(s)')
    else:
        print(f'{cmp.bag}: {cmp.real_topic or cmp.sim_topic} only (no second JointState stream), '
              f'{len(cmp.traces)} joint(s)')
    for line in format_table(cmp):
        print(line)
    print(f'wrote {len(written)} plots to {out_dir}')
    return ExitCode.OK


if __name__ == '__main__':  # pragma: no cover
    sys.exit(main())
