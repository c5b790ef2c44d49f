"""``shadow-twin``: command line of the shadow_twin digital twin.

Subcommands:
  evaluate        score a model (optionally with parameters) against a recording
  calibrate       fit MJCF parameters to a recording with an optimiser
  up              start the live twin (bridge, optional mock hardware, twin server, monitor) in one process
  calibrate-live  ask the running calibration_node to calibrate the twin, and follow it
  demo            the whole twin with mock hardware, calibrated live, error before/after
  plot            PNGs of real vs sim per joint from a bag
  perspective     write an rqt perspective (real vs sim plots, diagnostics) for chosen joints
  rqt             open the monitoring view in rqt once the twin's topics are up

Errors in the input print one line ``shadow-twin: error: ...`` and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from pathlib import Path

import yaml
from tqdm import tqdm

from shadow_twin.calibration import metrics
from shadow_twin.calibration.evaluation import AlignmentSettings, Evaluator
from shadow_twin.calibration.recording import read_joint_states
from shadow_twin.calibration.report import write_outputs
from shadow_twin.calibration.run import CHECKPOINT, Calibration, CalibrationSettings
from shadow_twin.calibration.search_space import SearchSpace
from shadow_twin.common.errors import ConfigError, ShadowTwinError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.common.files import check_writable_directory, exclusive_directory, sha256_of
from shadow_twin.common.paths import config_path
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.control.trajectory import parse_trajectory_arg
from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.model.mjcf import ModelError, TwinModel

log = logging.getLogger('shadow_twin')
DEFAULT_JOINTS = 'rh_FFJ1,rh_FFJ2,rh_FFJ3,rh_FFJ4'
#: Subcommands with their own parser: name -> (module with main(argv), help).
DELEGATED = {
    'up': ('shadow_twin.cli.up', 'start the live twin: shadow-twin up [--mock-hardware] [--config FILE] '
                             '[--mode sim|real|both]'),
    'calibrate-live': ('shadow_twin.cli.calibrate_live', 'trigger the running calibration_node and follow it'),
    'demo': ('shadow_twin.cli.demo', 'twin + mock hardware, live calibration, error before/after (the main job)'),
    'plot': ('shadow_twin.cli.plot', 'PNGs of real vs sim per joint from a bag: shadow-twin plot --bag BAG'),
    'perspective': ('shadow_twin.cli.perspective', 'write an rqt perspective for chosen joints'),
    'rqt': ('shadow_twin.cli.rqt', 'open the monitoring view in rqt (real vs sim plots, Robot Monitor) once the '
                                   'twin is up'),
}


def _add_common(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group('inputs')
    g.add_argument('--model', type=Path, help='MJCF model (default: built-in Shadow Hand E)')
    g.add_argument('--bag', type=Path, required=True,
                   help='recording of the real robot: ROS 1 .bag or ROS 2 bag (sqlite3/MCAP)')
    g.add_argument('--topic', help='JointState topic in the bag (default: the only one, or /joint_states)')
    g.add_argument('--trajectory', required=True, metavar='FILE.yaml:NAME',
                   help='commanded waypoint trajectory that the recording executes')
    g.add_argument('--joints', default=DEFAULT_JOINTS,
                   help=f'joints in the objective, comma-separated (default: {DEFAULT_JOINTS})')
    g.add_argument('--gains', type=Path, help='controller gains YAML (default: config/controllers/shadow_hand_e.yaml)')
    g.add_argument('--joint-map', type=Path, help='ROS -> MJCF joint-name map YAML (default: identity)')
    a = parser.add_argument_group('alignment')
    a.add_argument('--settle-time', type=float, default=3.0,
                   help='seconds compared after the trajectory ends (default: 3.0)')
    a.add_argument('--onset-threshold', type=float, default=0.1,
                   help='joint speed marking the motion onset, rad/s (default: 0.1)')
    a.add_argument('--max-delay', type=float, default=0.3,
                   help='largest fitted sim-to-real delay, s; 0 disables the fit (default: 0.3)')
    a.add_argument('--matching', choices=('interpolate', 'nearest'), default='interpolate',
                   help='interpolate both streams onto one time base, or nearest-timestamp '
                        'matching of 250 Hz sim samples as in the published study (default: interpolate)')
    a.add_argument('--interpolation', choices=('auto', 'linear', 'cubic', 'quintic'), default='auto',
                   help='trajectory interpolation (default: auto, as the JTC: by the fields present)')
    parser.add_argument('-v', '--verbose', action='store_true', help='debug logging')
    parser.add_argument('-q', '--quiet', action='store_true', help='warnings and errors only')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='shadow-twin', description=__doc__.split('\n\n')[0])
    sub = parser.add_subparsers(dest='command', required=True)

    ev = sub.add_parser('evaluate', help='score a model against a real recording')
    _add_common(ev)
    ev.add_argument('--params', type=Path, help='parameters YAML (as written by calibrate) to apply first')
    ev.add_argument('--json', action='store_true', help='print one JSON object instead of a table')

    for name, (_, text) in DELEGATED.items():
        sub.add_parser(name, add_help=False, help=text)
    cal = sub.add_parser('calibrate', help='fit MJCF parameters to a real recording')
    _add_common(cal)
    cal.add_argument('--space', type=Path, required=True, help='search-space YAML (see config/calibration/)')
    cal.add_argument('--optimizer', choices=('bo', 'random', 'pso', 'cmaes'), default='bo',
                     help='bo: Bayesian optimisation (scikit-optimize); random; pso; cmaes (default: bo)')
    cal.add_argument('--budget', type=int, default=150, help='evaluations (default: 150)')
    cal.add_argument('--workers', type=int, default=2, help='parallel simulations (default: 2)')
    cal.add_argument('--batch-size', type=int, help='points per ask/tell batch (default: --workers)')
    cal.add_argument('--initial-points', type=int, help='BO Latin-hypercube design size (default: max(10, 2 D))')
    cal.add_argument('--acq-func', default='gp_hedge', choices=('gp_hedge', 'EI', 'PI', 'LCB'),
                     help='BO acquisition function (default: gp_hedge)')
    cal.add_argument('--log-objective', action='store_true',
                     help='BO models log(objective) (better when errors span orders of magnitude)')
    cal.add_argument('--seed', type=int, default=0, help='random seed (default: 0)')
    cal.add_argument('--resume', action='store_true', help='continue the run checkpointed in --out')
    cal.add_argument('--no-progress', action='store_true', help='no progress bar')
    cal.add_argument('--out', type=Path, required=True, help='output directory')
    return parser


def _setup(args):
    """Load model, controller, recording and trajectory; build the evaluator."""

    joints = [j.strip() for j in args.joints.split(',') if j.strip()]
    if not joints:
        raise ConfigError('--joints is empty')
    twin = TwinModel(args.model)
    gains_file = args.gains or config_path('controllers', 'shadow_hand_e.yaml')
    controller = SimController(twin.model, ControllerGains.from_yaml(gains_file),
                               JointNameMap.from_yaml(args.joint_map))
    recording = read_joint_states(args.bag, args.topic)
    trajectory = parse_trajectory_arg(args.trajectory)
    settings = AlignmentSettings(onset_threshold=args.onset_threshold, max_delay=args.max_delay,
                                 settle_time=args.settle_time, matching=args.matching,
                                 interpolation=args.interpolation)
    evaluator = Evaluator(twin, controller, recording, trajectory, joints, settings=settings)
    return twin, controller, evaluator, gains_file


def _load_params(path: Path, twin) -> dict:
    """Read a parameters YAML ({values: {joint.attribute: value}}) into targets."""
    if not path.is_file():
        raise ConfigError(f'parameters file not found: {path}')
    data = yaml.safe_load(path.read_text()) or {}
    values = data.get('values', data)
    if not isinstance(values, dict):
        raise ConfigError(f'{path}: expected "values: {{name.attribute: number}}"')
    out = {}
    for key, value in values.items():
        name, _, attribute = str(key).rpartition('.')
        kind = 'actuator' if attribute in ('kp', 'kd') else 'joint'
        try:
            out[twin.target(kind, name, attribute)] = float(value)
        except ModelError as exc:
            raise ConfigError(f'{path}: {exc}') from None
        except (TypeError, ValueError):
            raise ConfigError(f'{path}: {key} must be a number') from None
    return out


def cmd_evaluate(args) -> int:
    twin, _, evaluator, _ = _setup(args)
    params = _load_params(args.params, twin) if args.params else {}
    score = evaluator.evaluate([params])[0]
    objective_mse = {j: score.per_joint_mse[j] for j in evaluator.objective_joints}
    result = {
        'model': str(twin.path), 'bag': str(args.bag), 'trajectory': args.trajectory,
        'joints': evaluator.objective_joints, 'mean_mse': score.objective,
        'per_joint_mse': objective_mse, 'per_joint_rmse': metrics.rmse(objective_mse),
        'all_joints_mse': score.per_joint_mse,
        'motion_onset_s': evaluator.onset, 'fitted_delay_s': evaluator.delay,
        'window_s': evaluator.window, 'matching': evaluator.settings.matching,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f'mean MSE over {", ".join(evaluator.objective_joints)}: {score.objective:.6f} rad^2')
        for joint, value in objective_mse.items():
            print(f'  {joint:10s} MSE {value:.6f} rad^2   RMSE {value ** 0.5:.4f} rad')
    return ExitCode.OK


def _check_out_dir(out: Path, resume: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ConfigError(f'--out {out} exists and is not a directory')
    check_writable_directory(out, '--out')
    if not resume and out.is_dir() and ((out / 'report.json').exists() or (out / CHECKPOINT).exists()):
        raise ConfigError(f'--out {out} holds an earlier calibration; pass --resume to continue it '
                          f'or choose another directory')
    if resume and not (out / CHECKPOINT).exists():
        raise ConfigError(f'--resume: no checkpoint in {out}')


def cmd_calibrate(args) -> int:
    _check_out_dir(args.out, args.resume)
    settings = CalibrationSettings(args.optimizer, args.budget, args.workers, args.batch_size, args.seed,
                                   args.initial_points, args.acq_func, args.log_objective)
    twin, controller, evaluator, gains_file = _setup(args)
    space = SearchSpace.from_yaml(args.space, twin)
    traj_file = args.trajectory.rsplit(':', 1)[0]
    inputs = {name: {'path': str(Path(p).resolve()), 'sha256': sha256_of(p)}
              for name, p in (('model', twin.path), ('bag', args.bag), ('trajectory', traj_file),
                              ('space', args.space), ('gains', gains_file))}
    run_info = {'inputs': {k: v['sha256'] for k, v in inputs.items()}, 'trajectory': args.trajectory,
                'joints': evaluator.objective_joints, 'alignment': vars(evaluator.settings)}
    with exclusive_directory(args.out, '--out'):
        return _calibrate(args, settings, twin, controller, evaluator, space, inputs, run_info)


def _calibrate(args, settings, twin, controller, evaluator, space, inputs, run_info) -> int:
    """The calibration itself, while this process holds ``--out``."""
    calibration = Calibration(evaluator, space, settings, args.out, run_info, args.resume)
    log.info('calibrating %d parameters with %s: %d evaluations, %d workers -> %s',
             len(space.dimensions), settings.optimizer, settings.budget, settings.workers, args.out)
    bar = None
    if not args.no_progress:
        bar = tqdm(total=settings.budget, desc='calibrate', unit='eval', file=sys.stderr)

    def progress(done, total, best):
        if bar is not None:
            bar.update(done - bar.n)
            bar.set_postfix(best=f'{best:.5f}')
    try:
        result = calibration.run(progress)
    finally:
        if bar is not None:
            bar.close()
    report = write_outputs(args.out, twin, controller, evaluator, space, result, inputs)
    obj = report['objective']
    print(f'objective (mean MSE over {", ".join(obj["joints"])}): {obj["initial"]:.6f} -> '
          f'{obj["best"]:.6f} rad^2 ({obj["reduction_percent"]:.1f} % lower) after '
          f'{report["evaluations"]} evaluations in {report["wall_time_s"]:.1f} s')
    for finger, before in report['finger_mean_mse']['before'].items():
        after = report['finger_mean_mse']['after'][finger]
        print(f'  {finger}: mean MSE {before:.6f} -> {after:.6f} rad^2')
    print(f'calibrated model: {args.out / report["outputs"]["calibrated_model"]}')
    return ExitCode.OK


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``shadow-twin``; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in DELEGATED:  # their own parsers (up: ROS arguments after --ros-args)
        return importlib.import_module(DELEGATED[argv[0]][0]).main(list(argv[1:]))
    args = build_parser().parse_args(argv)
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    logging.basicConfig(level=level, format='[%(levelname)s] %(name)s: %(message)s')
    commands = {'evaluate': cmd_evaluate, 'calibrate': cmd_calibrate}
    try:
        return commands[args.command](args)
    except ShadowTwinError as exc:
        print(f'shadow-twin: error: {exc}', file=sys.stderr)
        return ExitCode.BAD_INPUT
    except KeyboardInterrupt:
        print('shadow-twin: interrupted; a calibration continues with --resume', file=sys.stderr)
        return ExitCode.INTERRUPTED


if __name__ == '__main__':
    sys.exit(main())
