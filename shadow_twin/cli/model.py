"""``shadow-twin model --cell``: write the cell MJCF (MiR250 + cabinet + UR5 + hand) to one file.

    shadow-twin model --cell [--config config/cell.yaml] [--hand MJCF] [--arm-prefix P] --out FILE.xml [--force]

Prints one line (bodies, joints, actuators, mass) and exits 0; bad input (a missing
hand or config file, an existing --out without --force, a model that does not
compile) prints one line ``shadow-twin model: error: ...`` and exits 2. The file
compiles on its own from any directory (mesh paths are absolute).

Registered in ``shadow_twin.cli.main`` through :func:`add_parser` and :func:`run`;
:func:`main` runs it on its own (``python -m shadow_twin.cli.model``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shadow_twin.common.errors import ConfigError, ShadowTwinError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.model.cell import CellConfig, summary, write_cell_mjcf

PROG = 'shadow-twin model'
HELP = 'write a model MJCF: --cell = MiR250 + cabinet + UR5 + hand in one file'


def _configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument('--cell', action='store_true',
                        help='build the cell: MiR250 base, cabinet, UR5 arm, hand (shadow_twin/model/cell.py)')
    parser.add_argument('--config', type=Path, default=None,
                        help='cell YAML (default: the built-in figures, the same as config/cell.yaml)')
    parser.add_argument('--hand', type=Path, default=None,
                        help="hand MJCF whose root body is rh_forearm (default: the config's, else the "
                             'built-in Shadow Hand E)')
    parser.add_argument('--arm-prefix', default=None, metavar='P',
                        help="prefix of the UR5's joint, actuator and site names (default: the config's, '' as "
                             "ur_robot_driver's default tf_prefix; Shadow's arm+hand systems use ra_)")
    parser.add_argument('--out', type=Path, required=True, help='MJCF file to write')
    parser.add_argument('--force', action='store_true', help='overwrite --out if it exists')
    return parser


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``model`` subcommand to ``shadow-twin``'s subparsers; returns its parser."""
    return _configure(subparsers.add_parser('model', help=HELP, description=__doc__.split('\n\n')[0]))


def run(args: argparse.Namespace) -> int:
    """Run ``shadow-twin model`` with parsed ``args``; returns ExitCode.OK.

    Raises:
        ConfigError / ModelError (ShadowTwinError): bad input, nothing written.
    """
    if not args.cell:
        raise ConfigError('nothing to build: pass --cell (the MiR250 + cabinet + UR5 + hand cell)')
    if args.hand is not None and not args.hand.is_file():
        raise ConfigError(f'--hand {args.hand}: no such file')
    if args.config is not None and not args.config.is_file():
        raise ConfigError(f'--config {args.config}: no such file')
    config = CellConfig.from_yaml(args.config) if args.config is not None else CellConfig()
    path, model = write_cell_mjcf(config, args.out, hand_path=args.hand, arm_prefix=args.arm_prefix,
                                  force=args.force)
    print(f'wrote {path}: {summary(model)}')
    return ExitCode.OK


def main(argv: list[str] | None = None) -> int:
    """Entry point on its own; returns the exit status (argparse exits 2 itself on unknown options)."""
    args = _configure(argparse.ArgumentParser(prog=PROG, description=__doc__.split('\n\n')[0])).parse_args(
        sys.argv[1:] if argv is None else argv)
    try:
        return run(args)
    except ShadowTwinError as exc:
        print(f'{PROG}: error: {exc}', file=sys.stderr)
        return ExitCode.BAD_INPUT


if __name__ == '__main__':
    sys.exit(main())
