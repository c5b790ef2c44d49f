"""``shadow-twin identify``: an arm's joint dynamics, drive gains and payload from its joint efforts.

    shadow-twin identify --arm TYPE | --model MJCF --bag B [--bag B ...] [--csv F --columns MAP]
                         [--holdout B ...] --out DIR [--force] [--effort-unit A|Nm] [--joints ...]

Writes calibrated.xml, parameters.yaml and report.json into --out (docs/identify.md); the last
line printed is the summary as one JSON object. Bad input (an unknown --arm, a bag without
effort, a CSV without the mapped columns, no usable motion, an --out holding files of another
run without --force) prints one line ``shadow-twin identify: error: ...``, exits 2 and writes
nothing.

Registered in ``shadow_twin.cli.main`` through :func:`add_parser` and :func:`run`; :func:`main`
runs it on its own (``python -m shadow_twin.cli.identify``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import mujoco

from shadow_twin.cli.errors import run_reporting_errors
from shadow_twin.cli.inputs import OneLineParser, bounded_float
from shadow_twin.common.errors import ConfigError, ModelError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.common.files import LOCK_FILE, check_writable_directory, exclusive_directory, write_files_together
from shadow_twin.identification import recordings, report
from shadow_twin.identification.job import Identification, IdentifyOptions, identify
from shadow_twin.identification.regressor import EffortRegressor
from shadow_twin.identification.signals import MIN_CUTOFF_FRACTION, FilterSettings, sample_rate
from shadow_twin.model.mjcf import load_spec
from shadow_twin.model.ur.arm import arm_xml
from shadow_twin.model.ur.description import JOINTS as UR_JOINTS

PROG = 'shadow-twin identify'
HELP = "identify an arm's friction, armature, drive gains and payload from its joint efforts"
OUTPUTS = ('calibrated.xml', 'parameters.yaml', 'report.json')


def _configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument('--arm', help='UR type (ur3 ... ur30): the model built from the UR description')
    source.add_argument('--model', type=Path, help='MJCF of the arm')
    parser.add_argument('--ur-description', default=None, help='UR description (config dir) for --arm')
    parser.add_argument('--bag', type=Path, action='append', default=[], help='effort recording (bag)')
    parser.add_argument('--csv', type=Path, action='append', default=[], help='effort recording (CSV log)')
    parser.add_argument('--columns', default='rtde', help="CSV column map: 'rtde' or a YAML file")
    parser.add_argument('--holdout', type=Path, action='append', default=[], help='hold-out bag or CSV')
    parser.add_argument('--out', type=Path, required=True, help='output directory')
    parser.add_argument('--force', action='store_true', help='write into an --out that holds other files')
    parser.add_argument('--effort-unit', choices=('A', 'Nm'), default='A', help='unit of effort (A: current)')
    parser.add_argument('--joints', nargs='+', default=None, help='arm joints (default: the six UR joints)')
    parser.add_argument('--cutoff', type=bounded_float(0.0, inclusive=False), default=None, metavar='HZ',
                        help=f'low-pass cut-off of the positions, Hz, at least {MIN_CUTOFF_FRACTION:g} of the sample '
                             f'rate and below half of it (default: {FilterSettings.cutoff_hz:g}, lowered to '
                             f'{FilterSettings.max_fraction:g} of a lower rate\'s samples)')
    parser.add_argument('--no-payload', action='store_true', help='do not identify a payload')
    parser.add_argument('--max-samples', type=int, default=20000, help='decimate the fit to this many samples')
    parser.add_argument('--links', action='store_true',
                        help="also the links' inertial parameters, as base parameters (report.json 'links')")
    return parser


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``identify`` subcommand to ``shadow-twin``'s subparsers; returns its parser."""
    return _configure(subparsers.add_parser('identify', help=HELP, description=__doc__.split('\n\n')[0]))


def _model_text(args) -> tuple[str, mujoco.MjSpec]:
    if args.arm is not None:
        xml = arm_xml(args.arm, args.ur_description)
        return xml, mujoco.MjSpec.from_string(xml)
    spec = load_spec(args.model)
    return args.model.read_text(), spec


def _check_out(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f'--out {out} exists and is not a directory')
    check_writable_directory(out, '--out')
    if out.is_dir() and not force:
        others = [p.name for p in out.iterdir() if p.name != '.lock']
        if others:
            raise ConfigError(f'--out {out} is not empty ({", ".join(sorted(others)[:4])}); '
                              'pass --force to write into it')


def _read(path: Path, joints, args, columns, fitted: bool = True, csv: bool | None = None):
    """One recording; ``csv``: read as a CSV log (True, ``--csv``), a bag (False, ``--bag``), or by
    its suffix (None, ``--holdout``)."""
    options = {'require_motion': fitted}      # a hold-out may stand still: it is checked, not fitted
    if csv or (csv is None and path.suffix.lower() == '.csv'):
        return recordings.from_csv(path, columns, joints, args.effort_unit, **options)
    return recordings.from_bag(path, joints, args.effort_unit, **options)


def run(args: argparse.Namespace) -> int:
    """Run ``shadow-twin identify`` with parsed ``args``; returns ExitCode.OK.

    ``--out`` is locked for the whole run (a second run on it is refused, not merged), and its three
    files appear together or not at all (:func:`~shadow_twin.common.files.write_files_together`).

    Raises:
        ShadowTwinError: bad input (one line), nothing written (an ``--out`` this run created is
            removed again).
    """
    if args.max_samples < 100:
        raise ConfigError(f'--max-samples {args.max_samples}: use at least 100')
    if not args.bag and not args.csv:
        raise ConfigError('no recording: pass --bag and/or --csv')
    _check_out(args.out, args.force)
    created = not args.out.exists()
    try:
        with exclusive_directory(args.out, '--out'):
            _check_out(args.out, args.force)       # again, under the lock: a run that ended meanwhile
            found = _identify(args)
            write_files_together(args.out, {'calibrated.xml': found.xml,
                                            'parameters.yaml': report.parameters_text(found.drive),
                                            'report.json': report.json_text(found.report)})
    except BaseException:
        if created and {p.name for p in args.out.iterdir()} <= {LOCK_FILE}:
            shutil.rmtree(args.out, ignore_errors=True)
        raise
    print(json.dumps({'out': str(args.out), **found.summary}))
    return ExitCode.OK


def _identify(args: argparse.Namespace) -> Identification:
    """Read the model and recordings of ``args`` and identify (progress printed)."""
    _, spec = _model_text(args)
    try:
        model = spec.compile()
    except Exception as exc:
        raise ModelError(f'the model does not compile: {" ".join(str(exc).split())}') from None
    joints = list(args.joints or UR_JOINTS)
    settings = FilterSettings() if args.cutoff is None else FilterSettings(cutoff_hz=args.cutoff)
    regressor = EffortRegressor(model, joints)
    csv_used = args.csv or [p for p in args.holdout if p.suffix.lower() == '.csv']
    columns = recordings.ColumnMap.load(args.columns, len(joints)) if csv_used else None
    fit_recs = [_read(p, joints, args, columns, csv=False) for p in args.bag] + \
        [_read(p, joints, args, columns, csv=True) for p in args.csv]
    hold_recs = [_read(p, joints, args, columns, fitted=False) for p in args.holdout]
    for rec in fit_recs:
        recordings.check_efforts(rec)
    for rec in fit_recs + hold_recs:
        recordings.check_positions(model, joints, rec.times, rec.positions, rec.source)
        if args.cutoff is not None:     # the default is lowered to fit a low rate (report.json says so)
            settings.check_rate(sample_rate(rec.times), rec.source)
    for kind, recs in (('fit', fit_recs), ('hold-out', hold_recs)):
        for rec in recs:
            dropped = ', '.join(f'{k} {v}' for k, v in rec.dropped.items() if v) or 'none'
            print(f'{kind} {rec.source}: {rec.times.size} samples, {rec.duration:.1f} s, '
                  f'{len(rec.segments)} segment(s), dropped: {dropped}', flush=True)
    options = IdentifyOptions(args.effort_unit, settings, payload=not args.no_payload, links=args.links,
                              max_samples=args.max_samples)
    label = str(args.model) if args.model else f'--arm {args.arm}'
    return identify(spec, joints, fit_recs, hold_recs, options, label, regressor,
                    log=lambda line: print(line, flush=True))


def main(argv: list[str] | None = None) -> int:
    """Entry point on its own; returns the exit status (argparse exits 2 itself on unknown options)."""
    args = _configure(OneLineParser(prog=PROG, description=__doc__.split('\n\n')[0])).parse_args(
        sys.argv[1:] if argv is None else argv)
    return run_reporting_errors(PROG, run, args)


if __name__ == '__main__':
    sys.exit(main())
