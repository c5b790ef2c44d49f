#!/usr/bin/env python3
"""Benchmark: calibrate the built-in Shadow Hand model against the real recording.

Prints, measured on this machine in one run:

1. Replication: Shadow's own ``sr_hand_e_plus_environment.xml`` scored against
   ``hand_closing_real.bag`` (mean MSE over rh_FFJ1..rh_FFJ4), both matching modes,
   against the published 0.056890 rad^2 (target: within +/-25 %). Skipped when
   ../shared/reference is absent.
2. Optimisers side by side on ``config/calibration/fingers_j123.yaml``, 150 rollouts
   each, ``--workers 2``: the default model, ``shadow-twin calibrate`` with bo, random,
   lsq (least squares alone) and the default optimiser (whole command timed), and
   ``mujoco.sysid`` (MuJoCo's system identification: ``mujoco.sysid.optimize`` with its
   default ``mujoco.minimize`` backend, started at the same point as lsq, stopped when
   150 rollouts are spent; run in this process, when ``mujoco[sysid]`` is installed).
   Final objective (rad^2), reduction against the model as given, wall time, rollouts.
3. The default's result: middle, ring and little finger (not in the objective) before
   and after, and what the recording cannot identify.

Targets (issue 10): the default command ends at or below 0.00048 rad^2 (>= 99.1 % below
the default model) and at or below least squares alone, in at most 30 s for the whole
command. Exits 1 when one is missed. Other processes on the machine skew wall times:
re-run when they look off.

Usage: .venv/bin/python benchmarks/calibrate_real_hand.py [--budget 150] [--seeds 0 1 2]
Needs ../shared/data/shadow_hand_e (read only).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / 'shared'
BAG = SHARED / 'data/shadow_hand_e/hand_closing_real.bag'
TRAJ = f"{SHARED / 'data/shadow_hand_e/trajectories.yaml'}:hand_closing"
SHADOW_MODEL = SHARED / 'reference/sr_description_mujoco_models/sr_hand_e_plus_environment.xml'
SPACE = ROOT / 'config/calibration/fingers_j123.yaml'
OBJECTIVE_JOINTS = ['rh_FFJ1', 'rh_FFJ2', 'rh_FFJ3', 'rh_FFJ4']
TARGET_OBJECTIVE = 0.00048   # rad^2
TARGET_REDUCTION = 99.1      # %
TARGET_WALL = 30.0           # s, the whole command
sys.path.insert(0, str(ROOT))


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', 'shadow_twin.cli.main', *args], cwd=ROOT,
                          capture_output=True, text=True, check=True)


def replication() -> None:
    from shadow_twin.calibration.metrics import PUBLISHED_DEFAULT_MSE
    print('== 1. Replication: Shadow model, default parameters, vs real recording')
    if not SHADOW_MODEL.exists():
        print(f'  skipped: {SHADOW_MODEL} is not available')
        return
    for matching in ('interpolate', 'nearest'):
        out = json.loads(cli('evaluate', '--model', str(SHADOW_MODEL), '--bag', str(BAG), '--trajectory', TRAJ,
                             '--matching', matching, '--json', '-q').stdout)
        deviation = 100 * (out['mean_mse'] / PUBLISHED_DEFAULT_MSE - 1)
        print(f'  matching={matching:11s} mean MSE FFJ1-4 = {out["mean_mse"]:.6f} rad^2 '
              f'(published {PUBLISHED_DEFAULT_MSE:.6f}: {deviation:+.1f} %, target within +/-25 %) '
              f'{"PASS" if abs(deviation) <= 25 else "FAIL"}')


def calibrate(optimizer: str | None, budget: int, seed: int, out: Path) -> dict:
    """One ``shadow-twin calibrate`` command (the default optimiser when ``optimizer`` is None);
    report.json plus the command's wall time (s)."""
    extra = [] if optimizer is None else ['--optimizer', optimizer]
    started = time.perf_counter()
    cli('calibrate', '--bag', str(BAG), '--trajectory', TRAJ, '--space', str(SPACE), *extra,
        '--budget', str(budget), '--workers', '2', '--seed', str(seed), '--out', str(out), '--no-progress', '-q')
    report = json.loads((out / 'report.json').read_text())
    report['command_wall_time_s'] = time.perf_counter() - started
    return report


def sysid(budget: int, workers: int = 2) -> dict | None:
    """``mujoco.sysid.optimize`` (default backend: ``mujoco.minimize.least_squares``, finite-difference
    Jacobian from one batched residual call) on the same residuals, from the model defaults clipped
    into the bounds (as lsq), stopped when ``budget`` rollouts are spent; the best point seen.
    None when mujoco[sysid] is not installed."""
    try:
        from absl import logging as absl_logging
        from mujoco import sysid as mjsysid
        mjsysid.optimize  # absent without the extra's dependencies (absl-py, ...)
    except (ImportError, AttributeError):
        return None
    absl_logging.set_verbosity(absl_logging.ERROR)  # its warning: 6 of 15 defaults lie on a bound
    from shadow_twin.calibration.evaluation import Evaluator
    from shadow_twin.calibration.recording import read_joint_states
    from shadow_twin.calibration.search_space import SearchSpace
    from shadow_twin.common.paths import config_path
    from shadow_twin.control.controller import ControllerGains, SimController
    from shadow_twin.control.trajectory import parse_trajectory_arg
    from shadow_twin.model.mjcf import TwinModel

    started = time.perf_counter()
    twin = TwinModel()
    controller = SimController(twin.model, ControllerGains.from_yaml(config_path('controllers', 'shadow_hand_e.yaml')))
    evaluator = Evaluator(twin, controller, read_joint_states(BAG), parse_trajectory_arg(TRAJ), OBJECTIVE_JOINTS)
    space = SearchSpace.from_yaml(SPACE, twin)
    initial = evaluator.evaluate([{}])[0].objective

    class Spent(Exception):
        pass
    state = {'used': 0, 'best': np.inf}

    def residual_fn(x, params):
        """sysid's residual: x (D,) or (D, k) columns -> ([(R,) or (R, k)], ...)."""
        points = np.asarray(x, dtype=float).T if np.ndim(x) == 2 else np.asarray(x, dtype=float)[None]
        if state['used'] + len(points) > budget:
            raise Spent
        state['used'] += len(points)
        r = evaluator.evaluate_residuals([space.values(p) for p in points], nthread=workers)
        state['best'] = min(state['best'], float((r ** 2).sum(axis=1).min()))
        return [r.T if np.ndim(x) == 2 else r[0]], None, None
    params = mjsysid.ParameterDict({d.name: mjsysid.Parameter(d.name, v, d.low, d.high)
                                    for d, v in zip(space.dimensions, space.defaults)})
    status = 'converged'
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the backend prints every iteration
            mjsysid.optimize(params, residual_fn, optimizer='mujoco', verbose=False, max_iters=10 * budget)
    except Spent:
        status = 'budget spent'
    return {'objective': state['best'], 'initial': initial, 'rollouts': state['used'],
            'wall': time.perf_counter() - started, 'status': status}


def row(name: str, objective: float, initial: float, wall: float | None, rollouts: int | None, note: str = '') -> None:
    reduction = 100 * (1 - objective / initial)
    wall_text = f'{wall:6.1f}' if wall is not None else '     -'
    rollout_text = f'{rollouts:8d}' if rollouts is not None else '       -'
    print(f'  {name:28s} {objective:12.6f} {reduction:9.2f} % {wall_text} s {rollout_text}  {note}')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--budget', type=int, default=150, help='rollouts per optimiser (default: 150)')
    parser.add_argument('--seeds', type=int, nargs='*', default=[],
                        help='further seeds of the default optimiser, for its spread (the table uses seed 0)')
    parser.add_argument('--skip', nargs='*', default=[], choices=('bo', 'random', 'lsq', 'sysid'),
                        help='methods to leave out (the default optimiser always runs)')
    args = parser.parse_args()
    if not BAG.exists():
        print(f'needs the real recording at {BAG}', file=sys.stderr)
        return 1
    from shadow_twin.calibration.identifiability import summary_lines
    from shadow_twin.calibration.run import CalibrationSettings
    default = CalibrationSettings().optimizer
    replication()
    print(f'== 2. Optimisers: fingers_j123.yaml, {args.budget} rollouts each, --workers 2, seed 0')
    print(f'  {"method":28s} {"objective":>12s} {"reduction":>11s} {"wall":>8s} {"rollouts":>8s}  '
          f'(rad^2; wall: whole command)')
    reports = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ('bo', 'random', 'lsq', None):
            label = name or f'{default} (default)'
            if name in args.skip:
                continue
            reports[name] = report = calibrate(name, args.budget, 0, Path(tmp) / (name or 'default'))
            if len(reports) == 1:
                row('default model', report['objective']['initial'], report['objective']['initial'], None, None,
                    '(the model as given)')
            row(label, report['objective']['best'], report['objective']['initial'], report['command_wall_time_s'],
                report['evaluations'], ' '.join(f'{k} {v["evaluations"]}' for k, v in report['phases'].items()))
        result = None if 'sysid' in args.skip else sysid(args.budget)
        if result is None:
            print('  mujoco.sysid: not installed (pip install "mujoco[sysid]")')
        else:
            row('mujoco.sysid (in process)', result['objective'], result['initial'], result['wall'], result['rollouts'],
                f'{result["status"]}; wall without imports and report')
        spread = []
        for seed in args.seeds:
            r = calibrate(None, args.budget, seed, Path(tmp) / f'default_{seed}')
            spread.append(r['objective']['best'])
            row(f'{default} seed {seed}', r['objective']['best'], r['objective']['initial'], r['command_wall_time_s'],
                r['evaluations'])
    ours = reports[None]
    best, wall = ours['objective']['best'], ours['command_wall_time_s']
    reduction = ours['objective']['reduction_percent']
    print(f'== 3. The default ({default}), seed 0')
    before, after = ours['finger_mean_mse']['before'], ours['finger_mean_mse']['after']
    for finger in ('FF', 'MF', 'RF', 'LF'):
        note = '(objective)' if finger == 'FF' else ('lower' if after[finger] < before[finger] else 'HIGHER')
        print(f'  {finger}J1-4 mean MSE {before[finger]:.6f} -> {after[finger]:.6f} rad^2 {note}')
    for line in summary_lines(ours['identifiability']):
        print(f'  {line}')
    print('== Targets')
    checks = [(f'objective {best:.6f} <= {TARGET_OBJECTIVE} rad^2', best <= TARGET_OBJECTIVE),
              (f'reduction {reduction:.2f} % >= {TARGET_REDUCTION} %', reduction >= TARGET_REDUCTION),
              (f'whole command {wall:.1f} s <= {TARGET_WALL} s', wall <= TARGET_WALL)]
    if 'lsq' in reports:
        alone = reports['lsq']['objective']['best']
        checks.append((f'objective {best:.6f} <= least squares alone {alone:.6f} rad^2', best <= alone))
    for text, ok in checks:
        print(f'  {text}: {"PASS" if ok else "FAIL"}')
    if spread:
        print(f'  (seeds {args.seeds}: objective {min(spread):.6f} .. {max(spread):.6f} rad^2)')
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == '__main__':
    sys.exit(main())
