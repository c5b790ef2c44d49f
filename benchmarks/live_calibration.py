"""Benchmark of issue 4's figures: the live calibration demo, end to end.

Runs ``shadow-twin demo`` (the README's main job: twin + mock hardware, error on an unseen
trajectory, live calibration, reload, error again) in a subprocess with its defaults, and
prints from its report the sim-real error before and after on every trajectory, the
reduction on the unseen one (target >= 70 %) and the wall time (target < 10 min). The
baseline is the error before calibration, measured in the same run.

    .venv/bin/python benchmarks/live_calibration.py [--budget N] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--budget', type=int, default=60, help='calibration evaluations (default 60, the demo\'s)')
    parser.add_argument('--out', type=Path, default=None, help='demo output directory (default: a temporary one)')
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix='live_calibration_')) / 'demo'
    started = time.monotonic()
    run = subprocess.run([sys.executable, '-m', 'shadow_twin.cli.main', 'demo', '--out', str(out),
                          '--budget', str(args.budget)], cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - started
    if run.returncode != 0:
        print(run.stdout[-3000:], run.stderr[-3000:], sep='\n')
        print(f'demo failed with exit status {run.returncode}')
        return 1
    report = json.loads((out / 'demo_report.json').read_text())
    print(f'== Live calibration demo (budget {args.budget}), output {out}')
    print('   error = mean position MSE sim vs real over J1-J3 of FF/MF/RF/LF (rad^2); RMS (rad)')
    for row in report['rows']:
        print(f'   {row["trajectory"]:12s} {row["role"]:9s} MSE {row["before"]["mse"]:.3g} -> {row["after"]["mse"]:.3g} '
              f'({row["reduction_percent_mse"]:.1f} % lower), RMS {row["before"]["rmse"]:.4f} -> '
              f'{row["after"]["rmse"]:.4f} rad ({row["reduction_percent_rmse"]:.1f} % lower)')
    unseen = report['rows'][-1]
    ok_error = unseen['reduction_percent_mse'] >= 70.0
    ok_time = wall < 600.0
    print(f'   unseen trajectory: error {unseen["reduction_percent_mse"]:.1f} % lower (target >= 70 %) '
          f'{"PASS" if ok_error else "FAIL"}')
    print(f'   wall time {wall:.0f} s for the whole demo (target < 600 s) {"PASS" if ok_time else "FAIL"}; '
          f'installed {report["calibration_result"].get("installed")}')
    return 0 if ok_error and ok_time else 1


if __name__ == '__main__':
    sys.exit(main())
