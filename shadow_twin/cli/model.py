"""``shadow-twin model``: write the cell MJCF (MiR250 + cabinet + UR arm + hand), or one UR arm, to one file.

    shadow-twin model --cell [--config config/cell.yaml] [--arm TYPE] [--ur-description DIR] [--hand MJCF]
                      [--arm-prefix P] [--scene FILE] --out FILE.xml [--force]
    shadow-twin model --arm TYPE [--ur-description DIR] --out FILE.xml [--force]

``--arm`` is one of ur3, ur3e, ur5, ur5e, ur10, ur10e, ur16e, ur20, ur30 (default: the config's
``arm.type``, else ur5, the built-in ur5.xml). Types other than the built-in UR5 are generated from
Universal Robots' ROS 2 description (shadow_twin/model/ur/arm.py): ``--ur-description`` (a
Universal_Robots_ROS2_Description checkout or its config folder), else the config's
``arm.ur_description``, else ``SHADOW_TWIN_UR_DESCRIPTION``, else the installed ``ur_description``
ROS package.

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
from dataclasses import replace
from pathlib import Path

from shadow_twin.cli.errors import run_reporting_errors
from shadow_twin.common.errors import ConfigError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.model.cell.assembly import CellConfig, summary, write_cell_mjcf
from shadow_twin.model.scene import SceneConfig, object_names
from shadow_twin.model.ur.arm import UR_TYPES, write_arm_mjcf
from shadow_twin.model.ur.description import check_arm_type

PROG = 'shadow-twin model'
HELP = 'write a model MJCF: --cell = MiR250 + cabinet + UR arm + hand in one file; --arm TYPE alone = that arm'


def _configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument('--cell', action='store_true',
                        help='build the cell: MiR250 base, cabinet, UR arm (--arm), hand '
                             '(shadow_twin/model/cell/assembly.py)')
    parser.add_argument('--arm', default=None, metavar='TYPE',
                        help=f"UR arm type: {'|'.join(UR_TYPES)}; without --cell, write that arm alone "
                             "(default with --cell: the config's arm.type, else ur5)")
    parser.add_argument('--ur-description', type=Path, default=None, metavar='DIR',
                        help='Universal_Robots_ROS2_Description checkout (or its config folder) to build the arm '
                             "from (default: the config's arm.ur_description, else $SHADOW_TWIN_UR_DESCRIPTION, "
                             'else the ur_description ROS package; the UR5 needs none)')
    parser.add_argument('--config', type=Path, default=None,
                        help='cell YAML (default: the built-in figures, the same as config/cell.yaml)')
    parser.add_argument('--hand', type=Path, default=None,
                        help="hand MJCF whose root body is rh_forearm (default: the config's, else the "
                             'built-in Shadow Hand E)')
    parser.add_argument('--arm-prefix', default=None, metavar='P',
                        help="prefix of the arm's joint, actuator and site names (default: the config's, '' as "
                             "ur_robot_driver's default tf_prefix; Shadow's arm+hand systems use ra_)")
    parser.add_argument('--scene', type=Path, default=None,
                        help='with --cell: add the objects of this scene file (config/scene.yaml)')
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
    arm_type = check_arm_type(args.arm) if args.arm is not None else None
    if args.ur_description is not None and not args.ur_description.is_dir():
        raise ConfigError(f'--ur-description {args.ur_description}: no such folder')
    if not args.cell:
        if arm_type is None:
            raise ConfigError('nothing to build: pass --cell (the MiR250 + cabinet + UR arm + hand cell) or '
                              '--arm TYPE (the arm alone)')
        if args.hand is not None or args.config is not None or args.arm_prefix is not None or args.scene:
            raise ConfigError('--hand, --config, --arm-prefix and --scene belong to --cell')
        path, model = write_arm_mjcf(arm_type, args.out, args.ur_description, force=args.force)
        print(f'wrote {path}: {summary(model)}')
        return ExitCode.OK
    if args.hand is not None and not args.hand.is_file():
        raise ConfigError(f'--hand {args.hand}: no such file')
    if args.config is not None and not args.config.is_file():
        raise ConfigError(f'--config {args.config}: no such file')
    config = CellConfig.from_yaml(args.config) if args.config is not None else CellConfig()
    if arm_type is not None or args.ur_description is not None:
        arm = replace(config.arm, type=arm_type or config.arm.type,
                      ur_description=args.ur_description or config.arm.ur_description)
        config = replace(config, arm=arm)
    scene = SceneConfig.from_yaml(args.scene) if args.scene is not None else None
    path, model = write_cell_mjcf(config, args.out, hand_path=args.hand, arm_prefix=args.arm_prefix,
                                  force=args.force, scene=scene)
    objects = object_names(model)
    print(f'wrote {path}: {summary(model)}' + (f'; objects: {", ".join(objects)}' if objects else ''))
    return ExitCode.OK


def main(argv: list[str] | None = None) -> int:
    """Entry point on its own; returns the exit status (argparse exits 2 itself on unknown options)."""
    args = _configure(argparse.ArgumentParser(prog=PROG, description=__doc__.split('\n\n')[0])).parse_args(
        sys.argv[1:] if argv is None else argv)
    return run_reporting_errors(PROG, run, args)


if __name__ == '__main__':
    sys.exit(main())
