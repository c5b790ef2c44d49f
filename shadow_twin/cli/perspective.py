"""``shadow-twin perspective``: write an rqt perspective: real vs sim plots and the sim - real
errors for chosen joints, or (``--monitor``) the Robot Monitor of the twin's diagnostics; with
``--cell`` those of the cell (arm joints by default, and the base's pose error; see
``shadow_twin.plots.perspective``); with ``--contacts [LABELS]`` a last row of the fingertips' pad
normal force and slip speed, real vs sim (``shadow_twin.plots.contact_panes``). Open it with
``shadow-twin rqt --perspective FILE``.
Exit status 0, or 2 with one line for bad input."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.plots.contact_panes import (ALL_CONTACT_LABELS, DEFAULT_CONTACT_LABELS, REAL_CONTACTS_PREFIX,
                                             SIM_CONTACTS_PREFIX)
from shadow_twin.plots.perspective import (BASE_ERROR_TOPIC, CELL_MONITOR_PANES, DEFAULT_CELL_JOINTS, DEFAULT_JOINTS,
                                           ERROR_TOPIC, PROG, REAL_TOPIC, SIM_TOPIC, build_cell_plots_perspective,
                                           build_monitor_perspective, build_plots_perspective, write_perspective)


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(',')]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description='Write an rqt perspective plotting real vs sim joint '
                                     'positions and the twin monitor\'s sim - real errors, or with --monitor the '
                                     'Robot Monitor of its diagnostics (a window of its own, so the plots keep '
                                     'their rate).')
    parser.add_argument('--joints', type=_csv, default=None, metavar='J1,J2,...',
                        help=f'joints to plot (default: {",".join(DEFAULT_JOINTS)}; with --cell '
                             f'{",".join(DEFAULT_CELL_JOINTS)})')
    parser.add_argument('--out', type=Path, required=True, help='perspective file to write (.perspective)')
    parser.add_argument('--monitor', action='store_true',
                        help='write the Robot Monitor perspective (/diagnostics_agg) instead of the plots')
    parser.add_argument('--cell', action='store_true',
                        help='the cell (MiR250 + UR5 + hand): arm and hand joints from their own real topics '
                             '(/joint_states, /rh/joint_states) and a plot of the base pose error; with --monitor '
                             'a Robot Monitor tall enough for the cell')
    parser.add_argument('--model', type=Path, default=None,
                        help="the sim's MJCF: its joint order (default: the built-in Shadow Hand E; with --cell "
                             'the cell built from --cell-config)')
    parser.add_argument('--cell-config', type=Path, default=None,
                        help='with --cell: the cell YAML the sim model is built from (default config/cell.yaml)')
    parser.add_argument('--arm-order', type=_csv, default=None, metavar='J1,J2,...',
                        help="with --cell: joint order of the UR driver's /joint_states (default: the UR5 model's, "
                             'as mock_ur publishes)')
    parser.add_argument('--real-order', type=_csv, default=None, metavar='J1,J2,...',
                        help="joint order of the robot's JointState (default: the sim's, as the mock hardware)")
    parser.add_argument('--real-topic', default=REAL_TOPIC, help=f'default {REAL_TOPIC}')
    parser.add_argument('--sim-topic', default=SIM_TOPIC, help=f'default {SIM_TOPIC}')
    parser.add_argument('--error-topic', default=ERROR_TOPIC, help=f'default {ERROR_TOPIC}')
    parser.add_argument('--base-error-topic', default=BASE_ERROR_TOPIC, help=f'with --cell: default {BASE_ERROR_TOPIC}')
    parser.add_argument('--contacts', type=_csv, nargs='?', const=list(DEFAULT_CONTACT_LABELS), default=None,
                        metavar='L1,L2,...',
                        help='contacts are on (the bridges\' contact_sensors): add a row plotting the pad normal force '
                             '(N) and the slip speed (m/s) of these contact labels, real vs sim (default '
                             f'{",".join(DEFAULT_CONTACT_LABELS)}; the hand\'s: {",".join(ALL_CONTACT_LABELS)})')
    parser.add_argument('--real-contacts-prefix', default=REAL_CONTACTS_PREFIX,
                        help=f'with --contacts: the real hand\'s contact topics (default {REAL_CONTACTS_PREFIX})')
    parser.add_argument('--sim-contacts-prefix', default=SIM_CONTACTS_PREFIX,
                        help=f'with --contacts: the sim bridge\'s contact topics (default {SIM_CONTACTS_PREFIX})')
    return parser


def _conflicts(args: argparse.Namespace) -> str | None:
    """Why the options do not go together, or None."""
    prefixes = [opt for opt, value in (('--real-contacts-prefix', args.real_contacts_prefix != REAL_CONTACTS_PREFIX),
                                       ('--sim-contacts-prefix', args.sim_contacts_prefix != SIM_CONTACTS_PREFIX))
                if value]
    if args.monitor and args.contacts is not None:
        return '--contacts does not apply to --monitor (the Robot Monitor lists the contact statuses anyway)'
    if prefixes and args.contacts is None:
        return f'{", ".join(prefixes)} need(s) --contacts'
    if args.cell:
        given = [opt for opt, value in (('--real-order', args.real_order),
                                        ('--real-topic', args.real_topic != REAL_TOPIC)) if value]
        if given:
            return f'{", ".join(given)} do(es) not apply to --cell (its real topics are /joint_states and ' \
                   f'/rh/joint_states; give the arm\'s order with --arm-order)'
    else:
        given = [opt for opt, value in (('--cell-config', args.cell_config), ('--arm-order', args.arm_order),
                                        ('--base-error-topic', args.base_error_topic != BASE_ERROR_TOPIC)) if value]
        if given:
            return f'{", ".join(given)} need(s) --cell'
    return None


def _build(args: argparse.Namespace) -> tuple[dict, str]:
    """(perspective, what it shows) of ``args``. Raises ShadowTwinError."""
    if args.monitor:
        if args.cell:
            return build_monitor_perspective(CELL_MONITOR_PANES), 'robot monitor of the cell'
        return build_monitor_perspective(), 'robot monitor'
    contacts = dict(contacts=args.contacts, real_contacts_prefix=args.real_contacts_prefix,
                    sim_contacts_prefix=args.sim_contacts_prefix)
    shown = '' if args.contacts is None else f', contact force and slip plots of {",".join(args.contacts)}'
    if args.cell:
        joints = args.joints if args.joints is not None else list(DEFAULT_CELL_JOINTS)
        perspective = build_cell_plots_perspective(joints, model_path=args.model, cell_config=args.cell_config,
                                                   arm_joints=args.arm_order, sim_topic=args.sim_topic,
                                                   error_topic=args.error_topic,
                                                   base_error_topic=args.base_error_topic, **contacts)
        return perspective, f'{len(joints)} joint plots, sim - real plot, base pose error plot{shown}'
    joints = args.joints if args.joints is not None else list(DEFAULT_JOINTS)
    perspective = build_plots_perspective(joints, model_path=args.model, real_joints=args.real_order,
                                          real_topic=args.real_topic, sim_topic=args.sim_topic,
                                          error_topic=args.error_topic, **contacts)
    return perspective, f'{len(joints)} joint plots, sim - real plot{shown}'


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``shadow-twin perspective``; returns the exit status (argparse exits 2
    itself on unknown options)."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    conflict = _conflicts(args)
    if conflict is not None:
        print(f'{PROG}: error: {conflict}', file=sys.stderr)
        return ExitCode.BAD_INPUT
    try:
        perspective, what = _build(args)
        path = write_perspective(args.out, perspective)
    except (ShadowTwinError, OSError) as exc:
        print(f'{PROG}: error: {exc}', file=sys.stderr)
        return ExitCode.BAD_INPUT
    print(f'wrote {path}: {what}; open with: shadow-twin rqt --perspective {path}')
    return ExitCode.OK


if __name__ == '__main__':
    sys.exit(main())
