#!/usr/bin/env python3
"""Benchmark: batched rollouts on MuJoCo Warp (``--backend warp``, issue 39) against the CPU path.

Prints, measured in one run on this machine:

1. **steps/s**: the built-in hand (the whole model), ``--worlds`` parameter sets rolled out ``--steps`` steps at
   once on Warp's device, against ``mujoco.rollout`` on 2 threads; physics steps per second of each and the
   ratio; the largest position difference between them (the documented tolerance: 1e-3 rad over 1 s).
2. **rollouts**: ``--rollouts`` hand rollouts of the real recording's compared window (4555 steps), parameter
   sets drawn uniformly in ``fingers_j123.yaml``, one batch on Warp, against the CPU path (timed on a share
   and scaled when ``--cpu-share`` < 1: the CPU path's cost is linear in the rollouts).
3. **calibration**: ``shadow-twin calibrate --backend warp`` on the real recording (the default settings), its
   calibration time and objective, against the CPU default (skipped with ``--no-calibration``).

On a GPU the defaults are the issue's (1,000 rollouts). Without one Warp runs on its CPU device: the figures
are then the CPU device's, printed as such, and the sizes should be small (``--worlds 8 --steps 200
--rollouts 8 --no-calibration``). No target: the issue asks for the figures where a GPU was lent.

Usage: .venv/bin/python benchmarks/warp_rollouts.py [--device cuda:0] [--worlds 64] [--steps 500] [--rollouts 1000]
Needs mujoco-warp (requirements.txt) and ../shared/data/shadow_hand_e for sections 2 and 3.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / 'shared' / 'data' / 'shadow_hand_e'
sys.path.insert(0, str(ROOT))


def hand_simulator(steps: int | None):
    """The built-in hand on the recording's compared window (or its first ``steps`` steps): its evaluator."""
    from shadow_twin.cli.inputs import load_setup
    from shadow_twin.cli.main import build_parser
    args = build_parser().parse_args(['calibrate', '--bag', str(SHARED / 'hand_closing_real.bag'), '--trajectory',
                                      f"{SHARED / 'trajectories.yaml'}:hand_closing", '--space',
                                      str(ROOT / 'config/calibration/fingers_j123.yaml'), '--out', '/tmp/unused'])
    evaluator = load_setup(args).evaluator
    sim = evaluator.simulator
    if steps is not None:
        sim.nstep, sim.times = steps, sim.times[:steps]
        sim.desired_positions, sim.desired_velocities = sim.desired_positions[:steps], sim.desired_velocities[:steps]
    return evaluator, sim


def parameter_models(evaluator, sim, count: int, seed: int = 0):
    from shadow_twin.calibration.search.search_space import SearchSpace
    from shadow_twin.model.calibratable import apply_parameters
    space = SearchSpace.from_yaml(ROOT / 'config/calibration/fingers_j123.yaml', evaluator.twin)
    points = space.from_unit(np.random.default_rng(seed).uniform(0, 1, (count, len(space.dimensions))))
    models = sim.model_copies(count)
    for model, x in zip(models, points):
        apply_parameters(model, space.values(x))
    return models


def timed(sim, models, backend: str, device: str | None) -> tuple[float, np.ndarray]:
    sim.backend, sim.device = backend, device
    try:
        started = time.perf_counter()
        positions, _ = sim.run_with_clock(models, nthread=2)
        return time.perf_counter() - started, positions
    finally:
        sim.backend, sim.device = 'cpu', None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--device', help="Warp's device (default: its preferred: a GPU where there is one)")
    parser.add_argument('--worlds', type=int, default=64)
    parser.add_argument('--steps', type=int, default=500)
    parser.add_argument('--rollouts', type=int, default=1000)
    parser.add_argument('--cpu-share', type=float, default=0.1, help='share of section 2 timed on the CPU path')
    parser.add_argument('--no-calibration', action='store_true')
    args = parser.parse_args()
    from shadow_twin.simulation.warp_rollout import default_device, warp_unavailable
    why = warp_unavailable()
    if why:
        print(why, file=sys.stderr)
        return 1
    device = args.device or default_device()
    print(f'== Warp device: {device}' + (' (no GPU: the CPU device\'s figures)' if device == 'cpu' else ''))
    evaluator, sim = hand_simulator(args.steps)
    models = parameter_models(evaluator, sim, args.worlds)
    timed(sim, models[:2], 'warp', device)                   # kernels compiled (or loaded from the cache)
    warp_s, warp_q = timed(sim, models, 'warp', device)
    cpu_s, cpu_q = timed(sim, models, 'cpu', None)
    steps = args.worlds * args.steps
    print(f'== 1. steps/s, the whole hand, {args.worlds} worlds x {args.steps} steps: Warp {steps / warp_s:,.0f}, '
          f'mujoco.rollout (2 threads) {steps / cpu_s:,.0f} ({cpu_s / warp_s:.2f}x); positions within '
          f'{np.abs(warp_q - cpu_q).max():.2e} rad')
    evaluator, sim = hand_simulator(None)
    models = parameter_models(evaluator, sim, args.rollouts, seed=1)
    warp_s, _ = timed(sim, models, 'warp', device)
    share = max(1, int(round(args.rollouts * args.cpu_share)))
    cpu_s, _ = timed(sim, models[:share], 'cpu', None)
    cpu_all = cpu_s * args.rollouts / share
    print(f'== 2. {args.rollouts} hand rollouts of {sim.nstep} steps: Warp {warp_s:.1f} s, mujoco.rollout (2 threads) '
          f'{cpu_all:.1f} s{"" if share == args.rollouts else f" ({share} timed, scaled)"} ({cpu_all / warp_s:.2f}x)')
    if not args.no_calibration:
        rows = []
        for backend in ('cpu', 'warp'):
            with tempfile.TemporaryDirectory() as tmp:
                extra = ['--backend', 'warp', '--device', device] if backend == 'warp' else []
                started = time.perf_counter()
                subprocess.run([sys.executable, '-m', 'shadow_twin.cli.main', 'calibrate', '--bag',
                                str(SHARED / 'hand_closing_real.bag'), '--trajectory',
                                f"{SHARED / 'trajectories.yaml'}:hand_closing", '--space',
                                str(ROOT / 'config/calibration/fingers_j123.yaml'), '--out', f'{tmp}/out',
                                '--no-progress', '-q', *extra], cwd=ROOT, check=True, capture_output=True)
                wall = time.perf_counter() - started
                report = json.loads(Path(f'{tmp}/out/report.json').read_text())
                rows.append((backend, report['wall_time_s'], wall, report['objective']['best'], report['evaluations']))
        for backend, calibration, wall, objective, rollouts in rows:
            print(f'== 3. calibrate --backend {backend}: calibration {calibration:.2f} s, whole command {wall:.2f} s, '
                  f'{rollouts} rollouts, objective {objective:.7f} rad^2')
    return 0


if __name__ == '__main__':
    sys.exit(main())
