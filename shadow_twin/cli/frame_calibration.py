"""``shadow-twin frame-calibration``: the floor frame of a motion-capture system from three recorded points.

    shadow-twin frame-calibration --a X Y Z --b X Y Z --c X Y Z [--out FILE.yaml] [--json]

The points are in capture coordinates (m): A is the origin, B lies on the +x axis, C in the
x-y plane on the +y side (MiR250 + UR5 digital twin, IMECE 2023, frame calibration from three
recorded points; formulas in :mod:`shadow_twin.calibration.recordings.frame`). Prints the origin, the
axes, the quaternion (x, y, z, w) and roll-pitch-yaw, or one JSON object with ``--json``;
``--out`` writes the frame as YAML (:meth:`FrameCalibration.from_dict` reads it back) and never
overwrites a file. Exits 0; bad input (a non-numeric coordinate, A and B coinciding, collinear
points, an existing --out) prints one line ``shadow-twin frame-calibration: error: ...`` and
exits 2 with nothing written.

Registered in ``shadow_twin.cli.main``'s ``DELEGATED``; :func:`main` runs it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Sequence

import yaml

from shadow_twin.calibration.recordings.frame import FrameCalibration
from shadow_twin.cli.errors import ErrorLineParser, run_reporting_errors
from shadow_twin.common.errors import ConfigError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.common.files import write_text_atomic

PROG = 'shadow-twin frame-calibration'
HEADER = ('# Floor frame of a motion-capture system from three recorded points (shadow-twin frame-calibration).\n'
          '# rotation: rows of R; its columns are the frame x, y, z axes in capture coordinates;\n'
          '# a capture point p is R^T (p - origin) in this frame (m).\n')



def build_parser() -> argparse.ArgumentParser:
    """The command's own parser (prog ``shadow-twin frame-calibration``)."""
    parser = ErrorLineParser(prog=PROG, description=__doc__.split('\n\n')[0])
    for name, role in (('a', 'origin A'), ('b', 'point B on the +x axis'), ('c', 'point C in the x-y plane, +y side')):
        parser.add_argument(f'--{name}', type=float, nargs=3, required=True, metavar=('X', 'Y', 'Z'),
                            help=f'{role}: capture coordinates, m')
    parser.add_argument('--out', type=Path, metavar='FILE.yaml',
                        help='write the frame as YAML here (refused if the file exists)')
    parser.add_argument('--json', action='store_true', help='print one JSON object instead of text')
    return parser


def _check_out(out: Path | None) -> None:
    if out is not None and (out.exists() or out.is_symlink()):
        raise ConfigError(f'--out {out} exists; not overwritten (choose another file or remove it)')


def _points(args: argparse.Namespace) -> dict[str, list[float]]:
    return {'a': list(args.a), 'b': list(args.b), 'c': list(args.c)}


def _write(out: Path, frame: FrameCalibration, points: dict[str, list[float]]) -> None:
    """Write the frame (and the points it came from) as YAML; ConfigError if it cannot be written."""
    data = {**frame.to_dict(), 'points': points}
    text = HEADER + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120)  # lists on one line
    try:
        write_text_atomic(out, text)
    except OSError as exc:
        raise ConfigError(f'cannot write --out {out}: {exc.strerror or exc}') from None


def _floats(values: Sequence[float]) -> list[float]:
    return [float(v) + 0.0 for v in values]   # + 0.0: no negative zeros in the output


def _summary(frame: FrameCalibration) -> dict[str, Any]:
    axes = {f'{name}_axis': _floats(frame.rotation[:, k]) for k, name in enumerate('xyz')}
    return {'origin': _floats(frame.origin), **axes, 'quaternion': _floats(frame.quaternion),
            'rpy': _floats(frame.rpy)}


def _vector(values: Sequence[float]) -> str:
    return '[' + ' '.join(f'{round(v, 6) + 0.0:10.6f}' for v in values) + ']'


def _text_lines(summary: dict[str, Any]) -> list[str]:
    degrees = ', '.join(f'{round(math.degrees(v), 3) + 0.0:.3f}' for v in summary['rpy'])
    return ['floor frame in capture coordinates (origin A, x toward B, C in the x-y plane):',
            f'  origin      {_vector(summary["origin"])} m',
            *(f'  {axis} axis      {_vector(summary[f"{axis}_axis"])}' for axis in 'xyz'),
            f'  quaternion  {_vector(summary["quaternion"])} (x, y, z, w)',
            f'  rpy         {_vector(summary["rpy"])} rad (roll, pitch, yaw = {degrees} deg)']


def run(args: argparse.Namespace) -> int:
    """Compute, print and optionally write the frame; returns ExitCode.OK.

    Raises:
        ConfigError: coinciding or collinear points, an existing or unwritable --out (nothing written).
    """
    _check_out(args.out)
    frame = FrameCalibration.from_points(args.a, args.b, args.c)
    if args.out is not None:
        _write(args.out, frame, _points(args))
    summary = _summary(frame)
    if args.json:
        print(json.dumps({**summary, 'out': None if args.out is None else str(args.out)}))
    else:
        print('\n'.join(_text_lines(summary)))
        if args.out is not None:
            print(f'wrote {args.out}')
    return ExitCode.OK


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0, or 2 after one error line on stderr)."""
    return run_reporting_errors(PROG, lambda a: run(build_parser().parse_args(a)),
                                sys.argv[1:] if argv is None else argv)


if __name__ == '__main__':
    sys.exit(main())
