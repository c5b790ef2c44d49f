"""How a ``shadow-twin`` command ends on bad input: one line, exit 2."""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.common.exit_codes import ExitCode


def run_reporting_errors(prog: str, run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """``run(args)``'s exit status; a ShadowTwinError is printed on stderr as one line
    ``<prog>: error: <message>`` and gives ExitCode.BAD_INPUT (2)."""
    try:
        return run(args)
    except ShadowTwinError as exc:
        print(f'{prog}: error: {" ".join(str(exc).split())}', file=sys.stderr)
        return ExitCode.BAD_INPUT
