"""The benchmarks made of sections (``grasp.py``, ``view.py``): each section a module ``<prefix>_<section>.py``
beside them with ``add_arguments(parser)`` and ``run(check, args)``; one implementation of choosing, running and
judging them."""

from __future__ import annotations

import argparse
import importlib
import time

from checks import Checks


def section_module(prefix: str, name: str):
    """The module of section ``name`` (``<prefix>_<name>``, imported on first use)."""
    return importlib.import_module(f'{prefix}_{name}')


def run_sections(description: str, prefix: str, sections: tuple[str, ...], argv: list[str] | None = None) -> int:
    """Parse ``--sections`` (all by default) and the chosen sections' options, run each, print how many targets
    were missed; returns the exit status (1 when any was)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument('--sections', nargs='+', choices=sections, default=list(sections))
    chosen, _ = parser.parse_known_args(argv)
    for name in chosen.sections:
        section_module(prefix, name).add_arguments(parser)
    args = parser.parse_args(argv)
    check = Checks()
    started = time.perf_counter()
    for name in args.sections:
        section_module(prefix, name).run(check, args)
    print(f'{len(check.failed)} target(s) missed; {time.perf_counter() - started:.0f} s')
    return 1 if check.failed else 0
