#!/usr/bin/env python3
"""Benchmark: calibrate the built-in Shadow Hand model against the real recording.

Prints, measured on this machine in one run:

1. Replication: Shadow's own ``sr_hand_e_plus_environment.xml`` scored against
   ``hand_closing_real.bag`` (mean MSE over rh_FFJ1..rh_FFJ4), both matching modes,
   against the published 0.056890 rad^2 (target: within +/-25 %). Skipped when
   ../shared/reference is absent.
2. Optimisers side by side on ``config/calibration/fingers_j123.yaml``, 150 rollouts
   each, ``--workers 2``, seed 0, each the whole ``shadow-twin calibrate`` command timed: the
   default (``auto``), ``bo+lsq`` (the default before issue 26), least squares alone (``lsq``,
   scipy's trust-region reflective) and least squares on ``mujoco.minimize`` (MuJoCo's own
   Levenberg-Marquardt: ``--optimizer lsq`` with the engine switched in the command's process);
   ``--with-global`` adds ``bo`` and ``random``. For each: objective (rad^2), reduction against the
   model as given, whole-command wall time, rollouts, and the hold-out error: the mean MSE of the
   joints not fitted (middle, ring and little finger J1-J4, driven by the same shared parameters;
   the shared data holds one recording), and the phases that ran.
3. Least-squares engines in one process (no imports, no outputs), 150 rollouts from the model as
   given: scipy ``trf`` with a full finite-difference Jacobian every request, with Broyden updates
   between full ones (every 3rd: the engine the default uses), and ``mujoco.minimize``.
4. The default's result: middle, ring and little finger before and after, and what the
   recording cannot identify.

2b. The search model (issue 39): what the default simulates during the search (the parts that cannot act
   on the objective joints, and those acting only through their load, removed: ``--reduce auto``), the
   cost of one rollout on the whole and on the reduced model, the default against ``--reduce off``.

Targets (issues 10, 26 and 39): the default command ends at or below 0.000432 rad^2 (>= 99.1 % below
the default model); at or below least squares alone, or within 1 % of it with a lower hold-out
error; the calibration (report.json's ``wall_time_s``) in at most 2 s and the whole command in at most 4 s. Exits 1 when one is missed. Other processes on the
machine skew wall times: re-run when they look off (``--repeat N`` times each command N times and
takes the median).

Usage: .venv/bin/python benchmarks/calibrate_real_hand.py [--budget 150] [--seeds 0 1 2] [--repeat 1]
Needs ../shared/data/shadow_hand_e (read only).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
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
#: Hold-out: the joints not fitted (same shared parameters, other fingers), mean MSE (rad^2).
HOLDOUT_JOINTS = [f'rh_{f}J{k}' for f in ('MF', 'RF', 'LF') for k in (1, 2, 3, 4)]
TARGET_OBJECTIVE = 0.000432  # rad^2 (issue 39; 0.00048 before)
TARGET_REDUCTION = 99.1      # %
TARGET_CALIBRATION = 2.0     # s, the calibration itself: report.json's wall_time_s (issue 39)
TARGET_WALL = 4.0            # s, the whole command (issue 39; 10 s before)
TARGET_CLOSE = 1.01          # the default within 1 % of least squares alone, with a lower hold-out error
#: ``shadow-twin calibrate`` with least squares on ``mujoco.minimize``: the same command, the
#: engine switched in its process (the CLI has no flag for it).
MUJOCO_ENGINE = ('import sys\n'
                 'from shadow_twin.calibration import least_squares, run\n'
                 'def fit(*args, **options):\n'
                 "    return least_squares.fit_least_squares(*args, **{**options, 'method': 'mujoco'})\n"
                 'run.fit_least_squares = fit\n'
                 'from shadow_twin.cli.main import main\n'
                 'sys.exit(main(sys.argv[1:]))\n')
sys.path.insert(0, str(ROOT))


def cli(*args: str, engine: str | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, '-c', MUJOCO_ENGINE] if engine == 'mujoco' else [sys.executable, '-m',
                                                                                 'shadow_twin.cli.main']
    return subprocess.run([*command, *args], cwd=ROOT, capture_output=True, text=True, check=True)


def replication() -> None:
    from shadow_twin.calibration.scoring.metrics import PUBLISHED_DEFAULT_MSE
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


def calibrate(optimizer: str | None, budget: int, seed: int, out: Path, engine: str | None = None,
              repeat: int = 1, extra_args: tuple[str, ...] = ()) -> dict:
    """One ``shadow-twin calibrate`` command (the default optimiser when ``optimizer`` is None),
    ``repeat`` times; report.json of the first plus the command's median wall time (s) and the
    hold-out error (rad^2)."""
    extra = ([] if optimizer is None else ['--optimizer', optimizer]) + list(extra_args)
    walls, report = [], None
    for k in range(repeat):
        target = out if k == 0 else out.with_name(f'{out.name}_{k}')
        started = time.perf_counter()
        cli('calibrate', '--bag', str(BAG), '--trajectory', TRAJ, '--space', str(SPACE), *extra,
            '--budget', str(budget), '--workers', '2', '--seed', str(seed), '--out', str(target), '--no-progress',
            '-q', engine=engine)
        walls.append(time.perf_counter() - started)
        report = report or json.loads((out / 'report.json').read_text())
    report['command_wall_time_s'] = statistics.median(walls)
    report['holdout_mse'] = holdout(report['per_joint_mse']['after'])
    report['holdout_mse_before'] = holdout(report['per_joint_mse']['before'])
    return report


def holdout(per_joint_mse: dict) -> float:
    """Mean MSE (rad^2) of :data:`HOLDOUT_JOINTS`."""
    return float(np.mean([per_joint_mse[j] for j in HOLDOUT_JOINTS]))


def hand_problem():
    """(Evaluator, SearchSpace) of the calibrations in this process: the built-in model and gains,
    the shared recording against its ``hand_closing`` trajectory on :data:`OBJECTIVE_JOINTS`, and
    ``fingers_j123.yaml`` (what ``shadow-twin calibrate`` builds from the same arguments)."""
    from shadow_twin.calibration.scoring.evaluation import Evaluator
    from shadow_twin.calibration.recordings.recording import read_joint_states
    from shadow_twin.calibration.search.search_space import SearchSpace
    from shadow_twin.common.paths import config_path
    from shadow_twin.control.controller import ControllerGains, SimController
    from shadow_twin.control.trajectory import parse_trajectory_arg
    from shadow_twin.model.mjcf import TwinModel
    twin = TwinModel()
    controller = SimController(twin.model, ControllerGains.from_yaml(config_path('controllers', 'shadow_hand_e.yaml')))
    evaluator = Evaluator(twin, controller, read_joint_states(BAG), parse_trajectory_arg(TRAJ), OBJECTIVE_JOINTS)
    return evaluator, SearchSpace.from_yaml(SPACE, twin)


def engines(budget: int, workers: int = 2) -> list[tuple[str, object, float, float]]:
    """Least squares from the model as given in this process with each engine: [(name, result,
    wall s, hold-out MSE rad^2)]."""
    from shadow_twin.calibration.search.least_squares import fit_least_squares
    evaluator, space = hand_problem()

    def residuals(points):
        return evaluator.evaluate_residuals([space.values(p) for p in points], nthread=workers)
    rows = []
    for name, options in (('scipy trf, full Jacobian every request', {'method': 'scipy', 'jacobian_refresh': 1}),
                          ('scipy trf, Broyden between (default)', {'method': 'scipy'}),
                          ('mujoco.minimize', {'method': 'mujoco'})):
        started = time.perf_counter()
        result = fit_least_squares(residuals, space, space.defaults, budget, **options)
        wall = time.perf_counter() - started
        score = evaluator.evaluate([space.values(result.x)])[0]
        rows.append((name, result, wall, holdout(score.per_joint_mse)))
    return rows


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
    started = time.perf_counter()
    evaluator, space = hand_problem()
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


def row(name: str, objective: float, initial: float, wall: float | None, rollouts: int | None,
        held: float | None = None, note: str = '') -> None:
    reduction = 100 * (1 - objective / initial)
    wall_text = f'{wall:6.1f}' if wall is not None else '     -'
    rollout_text = f'{rollouts:8d}' if rollouts is not None else '       -'
    held_text = f'{held:10.6f}' if held is not None else '         -'
    print(f'  {name:34s} {objective:10.6f} {reduction:8.2f} % {wall_text} s {rollout_text} {held_text}  {note}')


def phases_note(report: dict) -> str:
    log = report.get('phase_log') or []
    if not log:
        return ' '.join(f'{k} {v["evaluations"]}' for k, v in report['phases'].items())
    return ', '.join(f'{e["phase"]} {e["evaluations"]}' if e['ran'] else f'{e["phase"]} not run' for e in log)


def rollout_costs(count: int = 8) -> tuple[float, float]:
    """ms per rollout of the model as given, one thread, on the whole model and on the default search model."""
    from shadow_twin.calibration.scoring.reduced import search_model
    from shadow_twin.cli.inputs import load_setup
    from shadow_twin.cli.main import build_parser
    args = build_parser().parse_args(['calibrate', '--bag', str(BAG), '--trajectory', TRAJ, '--space', str(SPACE),
                                      '--out', str(Path(tempfile.gettempdir()) / 'unused')])
    setup = load_setup(args)
    search = search_model(setup.evaluator, args.reduce)
    costs = []
    for evaluator in (setup.evaluator, search.evaluator):
        evaluator.evaluate([{}])                # warm
        t0 = time.perf_counter()
        evaluator.evaluate([{}] * count)
        costs.append((time.perf_counter() - t0) / count * 1e3)
    return costs[0], costs[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--budget', type=int, default=150, help='rollouts per optimiser (default: 150)')
    parser.add_argument('--seeds', type=int, nargs='*', default=[],
                        help='further seeds of the default optimiser, for its spread (the table uses seed 0)')
    parser.add_argument('--repeat', type=int, default=1, help='runs of each command; the median wall time is shown')
    parser.add_argument('--with-global', action='store_true', help='also bo and random alone')
    parser.add_argument('--sysid', action='store_true', help='also mujoco.sysid.optimize in this process')
    parser.add_argument('--skip', nargs='*', default=[], choices=('replication', 'bo+lsq', 'engines'),
                        help='parts to leave out')
    args = parser.parse_args()
    if not BAG.exists():
        print(f'needs the real recording at {BAG}', file=sys.stderr)
        return 1
    from shadow_twin.calibration.search.identifiability import summary_lines
    from shadow_twin.calibration.engine.report import phase_lines
    from shadow_twin.calibration.engine.run import CalibrationSettings
    default = CalibrationSettings().optimizer
    if 'replication' not in args.skip:
        replication()
    print(f'== 2. Optimisers: fingers_j123.yaml, {args.budget} rollouts each, --workers 2, seed 0, whole command')
    print(f'  {"method":34s} {"objective":>10s} {"reduction":>10s} {"wall":>8s} {"rollouts":>8s} {"hold-out":>10s}  '
          f'(rad^2; hold-out: MF/RF/LF J1-4 mean MSE, not fitted)')
    runs = [(None, None, f'{default} (default)'), ('off', None, f'{default}, --reduce off (whole model)'),
            ('bo+lsq', None, 'bo+lsq (the default before)'),
            ('lsq', None, 'lsq (least squares alone, trf)'), ('lsq', 'mujoco', 'lsq on mujoco.minimize')]
    if args.with_global:
        runs += [('bo', None, 'bo'), ('random', None, 'random')]
    reports = {}
    with tempfile.TemporaryDirectory() as tmp:
        for optimizer, engine, label in runs:
            if optimizer == 'bo+lsq' and 'bo+lsq' in args.skip:
                continue
            out = Path(tmp) / label.split()[0].replace('+', '_').replace('.', '_').replace(',', '')
            out = out.with_name(out.name + ('_mujoco' if engine else '') + ('_whole' if optimizer == 'off' else ''))
            if optimizer == 'off':      # the default optimiser on the whole model
                reports[label] = report = calibrate(None, args.budget, 0, out, None, args.repeat, ('--reduce', 'off'))
            else:
                reports[label] = report = calibrate(optimizer, args.budget, 0, out, engine, args.repeat)
            if len(reports) == 1:
                row('default model', report['objective']['initial'], report['objective']['initial'], None, None,
                    report['holdout_mse_before'], '(the model as given)')
            row(label, report['objective']['best'], report['objective']['initial'], report['command_wall_time_s'],
                report['evaluations'], report['holdout_mse'], phases_note(report) +
                f'; calibration {report["wall_time_s"]:.2f} s')
        if args.sysid:
            result = sysid(args.budget)
            if result is None:
                print('  mujoco.sysid: not installed (pip install "mujoco[sysid]")')
            else:
                row('mujoco.sysid (in process)', result['objective'], result['initial'], result['wall'],
                    result['rollouts'], None, f'{result["status"]}; wall without imports and report')
        spread = []
        for seed in args.seeds:
            r = calibrate(None, args.budget, seed, Path(tmp) / f'default_{seed}')
            spread.append(r['objective']['best'])
            row(f'{default} seed {seed}', r['objective']['best'], r['objective']['initial'], r['command_wall_time_s'],
                r['evaluations'], r['holdout_mse'])
    ours, alone = reports[f'{default} (default)'], reports['lsq (least squares alone, trf)']
    before = reports.get('bo+lsq (the default before)')
    if before:
        print(f'  default / bo+lsq: wall {ours["command_wall_time_s"] / before["command_wall_time_s"]:.2f}, '
              f'objective {ours["objective"]["best"] / before["objective"]["best"]:.3f}')
    if 'engines' not in args.skip:
        print(f'== 3. Least-squares engines in one process, {args.budget} rollouts from the model as given, '
              f'2 threads (no imports, no outputs)')
        initial = ours['objective']['initial']
        for name, result, wall, held in engines(args.budget):
            row(name, result.cost, initial, wall, result.rollouts, held, result.ended)
    whole = reports[f'{default}, --reduce off (whole model)']
    print('== 2b. Simulating only what is compared (issue 39): the search model')
    for line in ours['search_model']['models']:
        print(f'  {line}')
    full_ms, small_ms = rollout_costs()
    print(f'  per rollout (one thread, 8 rollouts each, this process): whole model {full_ms:.1f} ms, reduced '
          f'{small_ms:.1f} ms ({full_ms / small_ms:.2f}x)')
    print(f'  calibration: whole model {whole["wall_time_s"]:.2f} s ({whole["evaluations"]} rollouts), reduced '
          f'{ours["wall_time_s"]:.2f} s ({ours["evaluations"]} rollouts): {whole["wall_time_s"] / ours["wall_time_s"]:.2f}x; '
          f'whole command {whole["command_wall_time_s"]:.2f} s against {ours["command_wall_time_s"]:.2f} s')
    search = ours['search_model']
    print(f'  the search\'s best on the reduced model {search["best_on_search_model"]:.7f} rad^2, on the whole model '
          f'{search["best_on_whole_model"]:.7f} rad^2; the whole model\'s own fit {whole["objective"]["best"]:.7f} rad^2')
    best, wall = ours['objective']['best'], ours['command_wall_time_s']
    reduction = ours['objective']['reduction_percent']
    print(f'== 4. The default ({default}), seed 0')
    for line in phase_lines(ours):
        print(f'  {line}')
    fingers_before, fingers_after = ours['finger_mean_mse']['before'], ours['finger_mean_mse']['after']
    for finger in ('FF', 'MF', 'RF', 'LF'):
        note = '(objective)' if finger == 'FF' else ('lower' if fingers_after[finger] < fingers_before[finger]
                                                     else 'HIGHER')
        print(f'  {finger}J1-4 mean MSE {fingers_before[finger]:.6f} -> {fingers_after[finger]:.6f} rad^2 {note}')
    for line in summary_lines(ours['identifiability']):
        print(f'  {line}')
    print('== Targets')
    lsq_best, lsq_held = alone['objective']['best'], alone['holdout_mse']
    close = best <= lsq_best or (best <= TARGET_CLOSE * lsq_best and ours['holdout_mse'] < lsq_held)
    checks = [(f'objective {best:.6f} <= {TARGET_OBJECTIVE} rad^2', best <= TARGET_OBJECTIVE),
              (f'reduction {reduction:.2f} % >= {TARGET_REDUCTION} %', reduction >= TARGET_REDUCTION),
              (f'calibration {ours["wall_time_s"]:.2f} s <= {TARGET_CALIBRATION} s', ours['wall_time_s'] <= TARGET_CALIBRATION),
              (f'whole command {wall:.2f} s <= {TARGET_WALL} s', wall <= TARGET_WALL),
              (f'objective {best:.6f} <= least squares alone {lsq_best:.6f} rad^2, or within 1 % with a lower '
               f'hold-out error ({ours["holdout_mse"]:.6f} vs {lsq_held:.6f})', close)]
    for text, ok in checks:
        print(f'  {text}: {"PASS" if ok else "FAIL"}')
    if spread:
        print(f'  (seeds {args.seeds}: objective {min(spread):.6f} .. {max(spread):.6f} rad^2)')
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == '__main__':
    sys.exit(main())
