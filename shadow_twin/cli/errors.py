"""How a ``shadow-twin`` command ends on bad input: one line, exit 2."""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from shadow_twin.common.errors import ConfigError, ShadowTwinError
from shadow_twin.common.exit_codes import ExitCode


class ErrorLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors raise ConfigError (one line and exit 2 through
    :func:`run_reporting_errors`), not argparse's usage text and exit."""

    def error(self, message: str):
        raise ConfigError(message)


def run_reporting_errors(prog: str, run: Callable, args) -> int:
    """``run(args)``'s exit status (``args``: parsed arguments, or an argv that ``run`` parses with an
    :class:`ErrorLineParser`); a ShadowTwinError is printed on stderr as one line
    ``<prog>: error: <message>`` and gives ExitCode.BAD_INPUT (2)."""
    try:
        return run(args)
    except ShadowTwinError as exc:
        print(f'{prog}: error: {" ".join(str(exc).split())}', file=sys.stderr)
        return ExitCode.BAD_INPUT
