#!/usr/bin/env python3
"""Benchmark: calibrate the Shadow Hand model against the real recording.

Prints the figures of the foundation issue, measured on this machine:

1. Replication: Shadow's own ``sr_hand_e_plus_environment.xml`` scored against
   ``hand_closing_real.bag`` (mean MSE over rh_FFJ1..rh_FFJ4), both matching
   modes, against the published 0.056890 rad^2 (target: within +/-25 %).
2. Calibration with ``config/calibration/fingers_j123.yaml`` through the
   ``shadow-twin calibrate`` command (``--workers 2``): reduction against the
   default (target >= 90 %), wall time (target <= 300 s), and the middle, ring
   and little fingers (not in the objective) before and after.
3. Optimiser overhead: the share of wall time spent in the optimiser, and the
   same share for scikit-optimize's ``gp_minimize`` with default settings on the
   same objective (baseline run in this process, ``--baseline-budget`` evaluations).

Usage: .venv/bin/python benchmarks/calibrate_real_hand.py [--budget 150] [--model built-in|shadow]
Needs ../shared/data/shadow_hand_e and ../shared/reference (read only).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / 'shared'
BAG = SHARED / 'data/shadow_hand_e/hand_closing_real.bag'
TRAJ = f"{SHARED / 'data/shadow_hand_e/trajectories.yaml'}:hand_closing"
SHADOW_MODEL = SHARED / 'reference/sr_description_mujoco_models/sr_hand_e_plus_environment.xml'
SPACE = ROOT / 'config/calibration/fingers_j123.yaml'
sys.path.insert(0, str(ROOT))


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', 'shadow_twin.cli.main', *args], cwd=ROOT,
                          capture_output=True, text=True, check=True)


def replication() -> float:
    from shadow_twin.calibration.metrics import PUBLISHED_DEFAULT_MSE
    print('== 1. Replication: Shadow model, default parameters, vs real recording')
    result = None
    for matching in ('interpolate', 'nearest'):
        out = json.loads(cli('evaluate', '--model', str(SHADOW_MODEL), '--bag', str(BAG), '--trajectory', TRAJ,
                             '--matching', matching, '--json', '-q').stdout)
        deviation = 100 * (out['mean_mse'] / PUBLISHED_DEFAULT_MSE - 1)
        print(f'  matching={matching:11s} mean MSE FFJ1-4 = {out["mean_mse"]:.6f} rad^2 '
              f'(published {PUBLISHED_DEFAULT_MSE:.6f}: {deviation:+.1f} %, target within +/-25 %) '
              f'{"PASS" if abs(deviation) <= 25 else "FAIL"}')
        result = result or out['mean_mse']
    return result


def calibration(budget: int, model_args: list[str], out: Path) -> dict:
    print(f'== 2. Calibration: fingers_j123.yaml, bo, budget {budget}, --workers 2')
    started = time.perf_counter()
    cli('calibrate', *model_args, '--bag', str(BAG), '--trajectory', TRAJ, '--space', str(SPACE),
        '--optimizer', 'bo', '--budget', str(budget), '--workers', '2', '--seed', '0', '--out', str(out),
        '--no-progress', '-q')
    wall = time.perf_counter() - started
    report = json.loads((out / 'report.json').read_text())
    obj = report['objective']
    print(f'  objective {obj["initial"]:.6f} -> {obj["best"]:.6f} rad^2: {obj["reduction_percent"]:.2f} % lower '
          f'(target >= 90 %; published best 88.97 %) {"PASS" if obj["reduction_percent"] >= 90 else "FAIL"}')
    print(f'  wall time {wall:.1f} s for the whole command (target <= 300 s) {"PASS" if wall <= 300 else "FAIL"}; '
          f'optimiser {report["optimiser_time_s"]:.1f} s, simulation {report["simulation_time_s"]:.1f} s')
    before, after = report['finger_mean_mse']['before'], report['finger_mean_mse']['after']
    for finger in ('FF', 'MF', 'RF', 'LF'):
        note = '(objective)' if finger == 'FF' else ('lower PASS' if after[finger] < before[finger] else 'FAIL')
        print(f'  {finger}J1-4 mean MSE {before[finger]:.6f} -> {after[finger]:.6f} rad^2 {note}')
    report['command_wall_time_s'] = wall
    return report


def overhead(report: dict, baseline_budget: int, model_path: Path | None) -> None:
    print(f'== 3. Optimiser overhead (share of wall time outside the simulation)')
    ours = report['optimiser_time_s'] / report['wall_time_s']
    print(f'  shadow-twin bo, {report["evaluations"]} evaluations: optimiser {100 * ours:.1f} % of wall time '
          f'({report["optimiser_time_s"] / report["evaluations"] * 1e3:.0f} ms per evaluation)')
    from skopt import gp_minimize

    from shadow_twin.calibration.evaluation import Evaluator
    from shadow_twin.calibration.recording import read_joint_states
    from shadow_twin.calibration.search_space import SearchSpace
    from shadow_twin.common.paths import config_path
    from shadow_twin.control.controller import ControllerGains, SimController
    from shadow_twin.control.trajectory import parse_trajectory_arg
    from shadow_twin.model.mjcf import TwinModel
    twin = TwinModel(model_path)
    controller = SimController(twin.model, ControllerGains.from_yaml(config_path('controllers', 'shadow_hand_e.yaml')))
    evaluator = Evaluator(twin, controller, read_joint_states(BAG), parse_trajectory_arg(TRAJ),
                          ['rh_FFJ1', 'rh_FFJ2', 'rh_FFJ3', 'rh_FFJ4'])
    space = SearchSpace.from_yaml(SPACE, twin)
    sim_time = 0.0

    def objective(x):
        nonlocal sim_time
        t0 = time.perf_counter()
        value = evaluator.evaluate([space.values(x)])[0].objective
        sim_time += time.perf_counter() - t0
        return value
    started = time.perf_counter()
    result = gp_minimize(objective, [d.skopt_dimension() for d in space.dimensions], n_calls=baseline_budget,
                         random_state=0)
    wall = time.perf_counter() - started
    share = 1 - sim_time / wall
    print(f'  baseline gp_minimize (defaults, serial), {baseline_budget} evaluations: optimiser {100 * share:.1f} % '
          f'of {wall:.1f} s ({(wall - sim_time) / baseline_budget * 1e3:.0f} ms per evaluation), best {result.fun:.6f}')
    print(f'  ratio of optimiser time per evaluation, baseline / shadow-twin: '
          f'{((wall - sim_time) / baseline_budget) / (report["optimiser_time_s"] / report["evaluations"]):.1f}x')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--budget', type=int, default=150)
    parser.add_argument('--baseline-budget', type=int, default=150,
                        help='evaluations of the gp_minimize baseline (0 skips it)')
    parser.add_argument('--model', choices=('shadow', 'built-in'), default='shadow',
                        help="model to calibrate: Shadow's MJCF (as published) or the built-in one")
    args = parser.parse_args()
    if not BAG.exists():
        print(f'needs the real recording at {BAG}', file=sys.stderr)
        return 1
    replication()
    model_args = ['--model', str(SHADOW_MODEL)] if args.model == 'shadow' else []
    with tempfile.TemporaryDirectory() as tmp:
        report = calibration(args.budget, model_args, Path(tmp) / 'out')
    if args.baseline_budget:
        overhead(report, args.baseline_budget, SHADOW_MODEL if args.model == 'shadow' else None)
    return 0


if __name__ == '__main__':
    sys.exit(main())
