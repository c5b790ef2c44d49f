"""``shadow-twin evaluate --effort``: a recording's per-joint effort RMSE under a model and its drive
parameters, and the time intervals the monitor's external-force watch would have flagged.

    shadow-twin evaluate --effort --model MJCF --bag BAG [--drive-parameters parameters.yaml]
        [--effort-unit A|Nm] [--joints J ...] [--topic T] [--k-warn K] [--k-error K] [--json]

The recording goes through the live watch's own core (:mod:`shadow_twin.identification.evaluate`,
:class:`shadow_twin.monitoring.effort_watch.EffortWatch`), so offline and live flag the same samples.
Prints a line per joint and per flagged interval (or one JSON object with ``--json``) and exits 0;
bad input (a missing model or bag, a damaged bag, a bag without effort, malformed parameters)
prints one line ``shadow-twin evaluate: error: ...`` and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from shadow_twin.cli.errors import run_reporting_errors
from shadow_twin.cli.inputs import OneLineParser, bounded_float
from shadow_twin.common.errors import ConfigError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.identification.evaluate import evaluate_effort
from shadow_twin.monitoring.effort_settings import EffortSettings

PROG = 'shadow-twin evaluate'


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``shadow-twin evaluate --effort`` (``--effort`` itself is taken off first)."""
    parser = OneLineParser(prog=f'{PROG} --effort', description=__doc__.split('\n\n')[0])
    parser.add_argument('--model', type=Path, required=True, help='MJCF (e.g. calibrated.xml of shadow-twin identify)')
    parser.add_argument('--bag', type=Path, required=True, help='recording with /joint_states effort')
    parser.add_argument('--drive-parameters', type=Path, default=None, metavar='YAML',
                        help='parameters.yaml of shadow-twin identify (default: nominal UR drive gains)')
    parser.add_argument('--effort-unit', choices=('A', 'Nm'), default='A',
                        help='unit of the recording\'s effort without --drive-parameters (default: A, joint current)')
    parser.add_argument('--joints', nargs='+', default=None, help='arm joints (default: the six UR joints)')
    parser.add_argument('--topic', default=None, help='JointState topic (default: the bag\'s only one, or /joint_states)')
    parser.add_argument('--k-warn', type=bounded_float(0.0, inclusive=False), default=EffortSettings.k_warn,
                        help=f'WARN at k sigma of the residual (default {EffortSettings.k_warn:g})')
    parser.add_argument('--k-error', type=bounded_float(0.0, inclusive=False), default=EffortSettings.k_error,
                        help=f'ERROR at k sigma (default {EffortSettings.k_error:g})')
    parser.add_argument('--json', action='store_true', help='print one JSON object instead of lines')
    return parser


def run(args: argparse.Namespace) -> int:
    """Evaluate; returns ExitCode.OK. Raises ShadowTwinError on bad input (nothing is written)."""
    for flag, path in (('--model', args.model), ('--bag', args.bag), ('--drive-parameters', args.drive_parameters)):
        if path is not None and not path.exists():
            raise ConfigError(f'{flag} {path}: no such file or directory')
    settings = EffortSettings(k_warn=args.k_warn, k_error=args.k_error)
    result = evaluate_effort(args.model, args.drive_parameters, args.bag, args.joints, settings,
                             args.effort_unit, args.topic, printer=None if args.json else print)
    if args.json:
        print(json.dumps(result))
    return ExitCode.OK


def main(argv: list[str] | None = None) -> int:
    """Entry point (``argv`` without ``--effort``); returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args([a for a in argv if a != '--effort'])
    return run_reporting_errors(PROG, run, args)


if __name__ == '__main__':
    sys.exit(main())
