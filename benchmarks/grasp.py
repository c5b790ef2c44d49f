#!/usr/bin/env python3
"""Benchmark of issue 37's grasp work, in sections (each its own module, ``grasp_<section>.py``):

* ``calibration``: contact calibration from the protocol's runs on the mock: friction and mass
  recovered, the hold-out slip-onset angle, the fit's time (``grasp_calibration.py``).
* ``preview``: the grasp preview's agreement with the mock over 100 random transports of a held can,
  with its confusion matrix (``grasp_preview.py``).
* ``live``: the contact protocol made on the mock cell through the twin (``shadow-twin up --cell
  --mock-hardware``), recorded and fitted by ``shadow-twin calibrate --contacts --record`` (``grasp_live.py``;
  needs rclpy, about 6 minutes).
* ``lift``: what a grasp-and-lift run would add to the protocol, and why it has none: the can's path and the
  grip's efforts when the support is gone and the arm lifts (``grasp_lift.py``; a measurement, no target).

Exit status 1 when a target is missed.

Usage: .venv/bin/python benchmarks/grasp.py [--sections calibration preview live lift] [--transports 100]
       [--contact-budget N] [--live-budget N]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sections import run_sections  # noqa: E402  (benchmarks/sections.py, beside this script)

SECTIONS = ('calibration', 'preview', 'live', 'lift')


def main(argv: list[str] | None = None) -> int:
    return run_sections(__doc__.splitlines()[0], 'grasp', SECTIONS, argv)


if __name__ == '__main__':
    sys.exit(main())
