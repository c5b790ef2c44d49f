"""``shadow-twin``: command line of the shadow_twin digital twin.

Subcommands:
  evaluate        score a model (optionally with parameters) against a recording; with --effort,
                  the arm's effort error and the intervals the external-force watch would flag
  identify        an arm's drive gains, friction, armature and payload from its joint efforts
  calibrate       fit MJCF parameters to one or more recordings with an optimiser;
                  with --protocol, the cell (UR5 + MiR250) from the bags of its calibration protocol;
                  with --contacts, a scene's contact parameters from the bags of the contact protocol
  sensitivity     screen a search space: which parameters move the objective (tornado chart)
  up              start the live twin (bridge, optional mock hardware, twin server, monitor) in one process
  calibrate-live  ask the running calibration_node to calibrate the twin, and follow it
  demo            the whole twin with mock hardware, calibrated live, error before/after
  plot            PNGs of real vs sim per joint from a bag
  perspective     write an rqt perspective (real vs sim plots, diagnostics) for chosen joints
  rqt             open the monitoring view in rqt once the twin's topics are up
  model           write a UR arm's MJCF (--arm TYPE) or the cell's (MiR250, cabinet, arm, hand)
  frame-calibration  the motion-capture floor frame from three recorded points A, B, C
  view            serve the twin in a web browser: the 3D scene (sim solid, real ghost), error plots, diagnostics

Errors in the input print one line ``shadow-twin <command>: error: ...`` and exit 2; Ctrl-C and
SIGTERM end a calibration with one line that says how to resume it (exit 130).
"""

from __future__ import annotations

import _thread
import argparse
import importlib
import json
import logging
import signal
import sys
from pathlib import Path

from shadow_twin.calibration.search import identifiability
from shadow_twin.calibration.scoring import metrics
from shadow_twin.calibration.jobs.job import install_decision
from shadow_twin.calibration.search.optimisers import OPTIMISERS
from shadow_twin.calibration.engine.report import phase_lines, whole_model_scores, write_outputs
from shadow_twin.calibration.engine.run import CHECKPOINT, Calibration, CalibrationSettings
from shadow_twin.calibration.scoring.reduced import DEFAULT_MODE as DEFAULT_REDUCE, LOAD_TOLERANCE, MODES as REDUCE_MODES
from shadow_twin.calibration.scoring.reduced import SearchModel, gap_line, search_model
from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.plots.aside import FigureProcess
from shadow_twin.calibration.engine.sensitivity import MIN_SAMPLES, SENSITIVITY_JSON, TORNADO_PNG
from shadow_twin.cli.input_files import load_params
from shadow_twin.cli.inputs import (OneLineParser, Setup, add_input_arguments, add_run_options, capped_workers,
                                    fingerprints, input_files, load_setup, open_executor, positive_int, progress_bar)
from shadow_twin.cli.screening import cmd_sensitivity, earlier_screening, screen_run, screen_samples, screened_space
from shadow_twin.common import lifeline
from shadow_twin.common.errors import ConfigError, ModelError, ShadowTwinError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.common.files import LOCK_FILE, check_writable_directory, exclusive_directory

log = logging.getLogger('shadow_twin')
#: Subcommands with their own parser: name -> (module with main(argv), help).
#: ``calibrate --protocol``: the cell's protocol calibration from bags (its own parser).
CELL_CALIBRATION = 'shadow_twin.cli.calibrate_cell'
#: ``calibrate --contacts``: a scene's contact parameters from the contact protocol's bags (its own parser).
SCENE_CALIBRATION = 'shadow_twin.cli.calibrate_scene'
#: ``evaluate --effort``: the arm's effort error (its own parser).
EFFORT_EVALUATION = 'shadow_twin.cli.evaluate_effort'
DELEGATED = {
    'up': ('shadow_twin.cli.up', 'start the live twin: shadow-twin up [--mock-hardware] [--config FILE] '
                             '[--mode sim|real|both]'),
    'calibrate-live': ('shadow_twin.cli.calibrate_live', 'trigger the running calibration_node and follow it'),
    'demo': ('shadow_twin.cli.demo', 'twin + mock hardware, live calibration, error before/after (the main job)'),
    'plot': ('shadow_twin.cli.plot', 'PNGs of real vs sim per joint from a bag: shadow-twin plot --bag BAG'),
    'perspective': ('shadow_twin.cli.perspective', 'write an rqt perspective for chosen joints'),
    'rqt': ('shadow_twin.cli.rqt', 'open the monitoring view in rqt (real vs sim plots, Robot Monitor) once the '
                                   'twin is up'),
    'model': ('shadow_twin.cli.model', 'write a UR arm or the cell MJCF (MiR250 + cabinet + arm + hand): '
                                       'shadow-twin model [--cell] [--arm TYPE] --out FILE.xml'),
    'identify': ('shadow_twin.cli.identify', "identify an arm's drive gains, friction, armature and payload from "
                                             'its joint efforts: shadow-twin identify --arm TYPE --bag B --out DIR'),
    'frame-calibration': ('shadow_twin.cli.frame_calibration', 'the motion-capture floor frame from three points: '
                          'shadow-twin frame-calibration --a X Y Z --b X Y Z --c X Y Z [--out FILE.yaml] [--json]'),
    'view': ('shadow_twin.cli.view', 'serve the twin in a web browser (3D scene, error plots, diagnostics, pause/'
                                     'reset/reload): shadow-twin view [--host 127.0.0.1] [--port 8080]'),
}


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog='shadow-twin', description=__doc__.split('\n\n')[0])
    sub = parser.add_subparsers(dest='command', required=True)

    ev = sub.add_parser('evaluate', help='score a model against a real recording')
    add_input_arguments(ev)
    ev.add_argument('--params', type=Path, help='parameters YAML (as written by calibrate) to apply first')
    ev.add_argument('--json', action='store_true', help='print one JSON object instead of a table')
    ev.add_argument('--effort', action='store_true',
                    help="the arm's effort error instead (its own flags: shadow-twin evaluate --effort --help)")

    for name, (_, text) in DELEGATED.items():
        sub.add_parser(name, add_help=False, help=text)
    cal = sub.add_parser('calibrate', help='fit MJCF parameters to one or more real recordings')
    add_input_arguments(cal, several=True)
    cal.add_argument('--holdout', action='append', default=[], metavar='BAG:FILE.yaml:NAME',
                     help='a recording not fitted, scored before and after calibration (repeatable); split at '
                          'its last two ":" (the bag path may hold ":", the file and the name may not)')
    default = CalibrationSettings.optimizer
    cal.add_argument('--optimizer', choices=OPTIMISERS, default=default,
                     help=f'optimiser: {", ".join(OPTIMISERS)} (default: {default}); '
                          'see shadow_twin/calibration/search/optimisers.py')
    cal.add_argument('--budget', type=int, default=150,
                     help='rollouts (simulations) in all, screening included; the model as given, the plots and '
                          'the hold-outs are scored in addition (default: 150)')
    cal.add_argument('--global-budget', type=int, metavar='N',
                     help='rollouts of the global phase of a <global>+lsq optimiser (default: two CMA-ES '
                          'generations, at most a fifth of --budget); least squares gets the rest')
    cal.add_argument('--batch-size', type=int, help='points per ask/tell batch (default: --workers)')
    cal.add_argument('--initial-points', type=int, help='BO Latin-hypercube design size (default: max(10, 2 D))')
    cal.add_argument('--acq-func', default='gp_hedge', choices=('gp_hedge', 'EI', 'PI', 'LCB'),
                     help='BO acquisition function (default: gp_hedge)')
    cal.add_argument('--log-objective', action='store_true',
                     help='BO models log(objective) (better when errors span orders of magnitude)')
    cal.add_argument('--screen', type=positive_int, metavar='K',
                     help='screen the space first (as `sensitivity`) and calibrate only its K most influential '
                          'parameters; the others keep the model\'s values')
    cal.add_argument('--screen-samples', type=positive_int, metavar='N',
                     help=f'screening samples, taken from --budget (default: a third of --budget, at least '
                          f'{MIN_SAMPLES})')
    cal.add_argument('--resume', action='store_true', help='continue the run checkpointed in --out')
    cal.add_argument('--force', action='store_true',
                     help='write into an --out that holds files of its own (they may be replaced)')
    cal.add_argument('--reduce', choices=REDUCE_MODES, default=DEFAULT_REDUCE,
                     help='simulate only what is compared during the search: auto (the default) removes the parts '
                          'that cannot act on the objective joints and those acting only through their load when '
                          f'that moves the objective by at most {100 * LOAD_TOLERANCE:g} %%; exact: only the parts '
                          'that cannot act; off: the whole model (the report scores the whole model in every case)')
    add_run_options(cal)

    sen = sub.add_parser('sensitivity', help='which parameters of a search space move the objective: Pearson '
                                             'correlation over uniform samples, tornado chart')
    add_input_arguments(sen, several=True)
    sen.add_argument('--samples', type=positive_int, default=50,
                     help=f'parameter sets drawn uniformly in the space (at least {MIN_SAMPLES}; default: 50)')
    add_run_options(sen)
    return parser


def cmd_evaluate(args) -> int:
    setup = load_setup(args)
    twin, evaluator = setup.twin, setup.evaluator
    params = load_params(args.params, twin) if args.params else {}
    score = evaluator.evaluate([params])[0]
    if score.unstable:              # a score, not a candidate: none then
        raise ModelError(score.unstable)
    objective_mse = {j: score.per_joint_mse[j] for j in evaluator.objective_joints}
    result = {
        'model': str(twin.path), 'bag': str(args.bag), 'trajectory': args.trajectory,
        'joints': evaluator.objective_joints, 'mean_mse': score.objective,
        'per_joint_mse': objective_mse, 'per_joint_rmse': metrics.rmse(objective_mse),
        'all_joints_mse': score.per_joint_mse,
        'motion_onset_s': evaluator.onset, 'fitted_delay_s': evaluator.delay, 'trajectory_start_s': evaluator.start,
        'window_s': evaluator.window, 'matching': evaluator.settings.matching,
    }
    result['aligned_by'] = setup.fit[0].aligned_by
    if args.json:
        print(json.dumps(result))
    else:
        print(f'mean MSE over {", ".join(evaluator.objective_joints)}: {score.objective:.4g} rad^2'
              f'{" (aligned by the stamped commanded trajectory)" if setup.fit[0].aligned_by == "stamp" else ""}')
        for joint, value in objective_mse.items():
            print(f'  {joint:10s} MSE {value:10.4g} rad^2   RMSE {value ** 0.5:10.4g} rad')
    return ExitCode.OK


def _check_out_dir(out: Path, resume: bool, force: bool = False) -> None:
    """Check ``--out`` of calibrate without creating anything (it is created and locked only once
    every input has been read and checked): an earlier calibration needs ``resume``; files that no
    calibration wrote (a user's own parameters.yaml, history.csv...) need ``force``."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f'--out {out} exists and is not a directory')
    check_writable_directory(out, '--out')
    if not resume and out.is_dir() and ((out / 'report.json').exists() or (out / CHECKPOINT).exists()):
        raise ConfigError(f'--out {out} holds an earlier calibration; pass --resume to continue it '
                          f'or choose another directory')
    if resume and not (out / CHECKPOINT).exists():
        raise ConfigError(f'--resume: no checkpoint in {out}')
    if not resume and not force and out.is_dir():
        ours = {LOCK_FILE, SENSITIVITY_JSON, TORNADO_PNG}   # a screening is checked by earlier_screening
        foreign = sorted(p.name for p in out.iterdir() if p.name not in ours)
        if foreign:
            raise ConfigError(f'--out {out} holds files no calibration wrote ({", ".join(foreign[:3])}'
                              f'{", ..." if len(foreign) > 3 else ""}); choose another directory or pass '
                              f'--force to write over them')


def cmd_calibrate(args) -> int:
    # Order: check --out (nothing created), then read and check every input, and only then
    # create and lock --out: bad input leaves no directory behind.
    _check_out_dir(args.out, args.resume, args.force)
    samples = screen_samples(args) if args.screen else 0
    if args.screen_samples and not args.screen:
        raise ConfigError('--screen-samples needs --screen K')
    workers = capped_workers(args, 'calibrate')   # the batch stays --workers: the run does not depend on the cores
    settings = CalibrationSettings(args.optimizer, args.budget - samples, workers, args.batch_size or args.workers,
                                   args.seed, args.initial_points, args.acq_func, args.log_objective,
                                   args.global_budget)
    with FigureProcess() as figures:        # matplotlib loads beside the work; the report's figures are drawn there
        return _checked_calibrate(args, settings, samples, figures)


def _checked_calibrate(args, settings, samples: int, figures: FigureProcess) -> int:
    """``calibrate`` once its settings are checked: every input read and checked, then the run."""
    setup = load_setup(args)
    space = SearchSpace.from_yaml(args.space, setup.twin)
    if args.screen and args.screen > len(space.dimensions):
        raise ConfigError(f'--screen {args.screen}: the space has only {len(space.dimensions)} parameters')
    inputs = fingerprints(input_files(args, setup))
    fitted = {k: v['sha256'] for k, v in inputs.items() if not k.startswith('holdout')}
    trajectory = args.trajectory[0] if len(args.trajectory) == 1 else args.trajectory
    run_info = {'inputs': fitted, 'trajectory': trajectory, 'joints': setup.evaluator.objective_joints,
                'alignment': vars(setup.evaluator.settings)}
    if setup.weights is not None:
        run_info['weights'] = setup.weights
    screening = None
    if args.screen:
        screening = screen_run(inputs, setup, samples, args.seed)
        run_info['screen'] = {'parameters': args.screen, 'samples': samples}
        earlier = earlier_screening(args.out, screening)
        screening = {'run': screening, 'doc': earlier}
    search = search_model(setup.evaluator, args.reduce)
    # the executor before --out is created: a bad --cluster leaves nothing
    with open_executor(args, search.evaluator) as executor, exclusive_directory(args.out, '--out'):
        return _calibrate(args, settings, setup, space, inputs, run_info, screening, executor, search, figures)


def _holdout_section(setup: Setup, best_values: dict, fit_before: float, fit_after: float) -> dict:
    """Hold-out errors (rad^2) with the model as given and as calibrated, and the calibration node's
    install decision (:func:`~shadow_twin.calibration.jobs.job.install_decision`) for them."""
    errors = {}
    for rec in setup.holdout:
        before, after = rec.evaluator.evaluate([{}, best_values])
        errors[rec.name] = {'before': before.objective, 'after': after.objective}
    accept, reason = install_decision(fit_before, fit_after, errors)
    mean_before = sum(v['before'] for v in errors.values()) / len(errors)
    mean_after = sum(v['after'] for v in errors.values()) / len(errors)
    return {'recordings': {rec.name: {'bag': str(rec.bag), 'trajectory': rec.trajectory, **errors[rec.name],
                                      'reduction_percent': metrics.reduction_percent(errors[rec.name]['before'],
                                                                                     errors[rec.name]['after'])}
                           for rec in setup.holdout},
            'mean_before': mean_before, 'mean_after': mean_after,
            'reduction_percent': metrics.reduction_percent(mean_before, mean_after),
            'accept': accept, 'reason': reason}


def _calibrate(args, settings, setup: Setup, space, inputs, run_info, screening, executor,
               search: SearchModel, figures: FigureProcess) -> int:
    """The calibration itself, while this process holds ``--out``; ``executor`` rolls out the batches of
    ``search`` (the whole model's evaluator or a reduced one: the report scores the whole model)."""
    if screening is not None:
        space = screened_space(args, setup, space, screening, inputs, executor)
    calibration = Calibration(search.evaluator, space, settings, args.out, run_info, args.resume, executor)
    log.info('calibrating %d parameters with %s: %d evaluations, %d workers (%s) -> %s',
             len(space.dimensions), settings.optimizer, settings.budget, settings.workers, executor.name, args.out)
    # the bar names what the search simulates (issue 39): rollouts, time and the best objective follow
    bar, progress = progress_bar(args, settings.budget, f'calibrate ({search.short()})', 'rollout')
    try:
        result = calibration.run(progress)
    finally:
        if bar is not None:
            bar.close()
    best_values = space.values(result.best.x)
    scores = whole_model_scores(setup.evaluator, best_values, settings.workers)  # the report's before and after
    initial, final = scores[1], scores[2]
    if search.reduced:
        log.info('search model: %s', gap_line(result.best.objective, final.objective))
    holdout = None
    if setup.holdout:
        holdout = _holdout_section(setup, best_values, initial.objective, final.objective)
    report = write_outputs(args.out, setup.twin, setup.controller, setup.evaluator, space, result, inputs,
                           holdout=holdout, executor=executor, holdout_parts=[r.evaluator for r in setup.holdout],
                           search=search, scores=scores, figures=figures)
    obj = report['objective']
    print(f'objective (mean MSE over {", ".join(obj["joints"])}): {obj["initial"]:.4g} -> '
          f'{obj["best"]:.4g} rad^2 ({obj["reduction_percent"]:.1f} % lower) after '
          f'{report["evaluations"]} rollouts in {report["wall_time_s"]:.1f} s')
    for finger, before in report['finger_mean_mse']['before'].items():
        after = report['finger_mean_mse']['after'][finger]
        print(f'  {finger}: mean MSE {before:.4g} -> {after:.4g} rad^2')
    for entry in report.get('recordings', []):
        print(f'  recording {entry["recording"]} (weight {entry.get("weight", 1.0):g}): objective '
              f'{entry["objective_before"]:.4g} -> {entry["objective_after"]:.4g} rad^2')
    stamped = [r.name for r in setup.fit + setup.holdout if r.aligned_by == 'stamp']
    if stamped:
        print(f'aligned by the stamped commanded trajectory in the bag: {", ".join(stamped)}')
    if screening is not None:
        print(f'screening ({screening["run"]["samples"]} rollouts of --budget {args.budget}): calibrated '
              f'{len(space.dimensions)} parameter(s): {", ".join(space.names)} ({args.out / SENSITIVITY_JSON})')
    if holdout:
        for name, entry in holdout['recordings'].items():
            print(f'hold-out {name}: objective {entry["before"]:.4g} -> {entry["after"]:.4g} rad^2 '
                  f'({entry["reduction_percent"]:.1f} % lower)')
        print(f'hold-out check: {"accept" if holdout["accept"] else "refuse"}: {holdout["reason"]}')
    for line in phase_lines(report):             # which phases of the optimiser ran, and why
        print(line)
    if report.get('identifiability'):
        for line in identifiability.summary_lines(report['identifiability']):
            print(line)
    if search.reduced:
        print(f'search model: {"; ".join(search.lines)}')
        print(f'  {gap_line(result.best.objective, report["objective"]["best"])}')
    print(f'calibrated model: {args.out / report["outputs"]["calibrated_model"]}')
    return ExitCode.OK


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``shadow-twin``; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != 'up':     # up stops its nodes in order itself when its parent ends
        lifeline.watch_parent(_thread.interrupt_main)   # as Ctrl-C when the tool that started it ends
    if argv and argv[0] in DELEGATED:  # their own parsers (up: ROS arguments after --ros-args)
        return importlib.import_module(DELEGATED[argv[0]][0]).main(list(argv[1:]))
    if argv and argv[0] == 'calibrate' and any(a == '--protocol' or a.startswith('--protocol=') for a in argv):
        return importlib.import_module(CELL_CALIBRATION).main(list(argv[1:]))
    if argv and argv[0] == 'calibrate' and any(a == '--contacts' or a.startswith('--contacts=') for a in argv):
        return importlib.import_module(SCENE_CALIBRATION).main(list(argv[1:]))
    if argv and argv[0] == 'evaluate' and '--effort' in argv:
        return importlib.import_module(EFFORT_EVALUATION).main(list(argv[1:]))
    args = build_parser().parse_args(argv)
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    logging.basicConfig(level=level, format='[%(levelname)s] %(name)s: %(message)s')
    commands = {'evaluate': cmd_evaluate, 'calibrate': cmd_calibrate, 'sensitivity': cmd_sensitivity}
    previous = _terminate_as_interrupt()
    try:
        return commands[args.command](args)
    except ShadowTwinError as exc:
        print(f'shadow-twin {args.command}: error: {" ".join(str(exc).split())}', file=sys.stderr)
        return ExitCode.BAD_INPUT
    except KeyboardInterrupt:
        print(f'shadow-twin {args.command}: interrupted; a calibration continues with --resume', file=sys.stderr)
        return ExitCode.INTERRUPTED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _terminate_as_interrupt():
    """Make SIGTERM end the command as Ctrl-C does (KeyboardInterrupt: the checkpoint is kept and
    the same one-line message says how to resume); returns the previous handler (None when this
    is not the main thread, where handlers cannot be set)."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt
    try:
        return signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread
        return None


if __name__ == '__main__':
    sys.exit(main())
