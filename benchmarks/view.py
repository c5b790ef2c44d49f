#!/usr/bin/env python3
"""Benchmark of issue 38's 3D view, in sections (each its own module, ``view_<section>.py``):

* ``bridge``: the sim bridge's real-time factor and period jitter at 250 Hz with the 3D view's outputs on
  (every body on ``/tf``, the markers, the monitor's real tree and ghost, a browser view with a client) against
  none of them, in one run (``view_bridge.py``; targets RTF >= 0.99 and jitter p99 < 2 ms in both);
* ``browser``: the browser view's latency from a joint state's stamp to the page (``view_browser.py``; target
  p50 <= 100 ms);
* ``video``: the render time per video frame (``view_video.py``; printed).

Exit status 1 when a target is missed.

Usage: .venv/bin/python benchmarks/view.py [--sections bridge browser video] [section options]
Not part of the tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sections import run_sections  # noqa: E402  (benchmarks/sections.py, beside this script)

SECTIONS = ('bridge', 'browser', 'video')


def main(argv: list[str] | None = None) -> int:
    return run_sections(__doc__.splitlines()[0], 'view', SECTIONS, argv)


if __name__ == '__main__':
    sys.exit(main())
