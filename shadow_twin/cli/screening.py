"""Sensitivity screening on the command line: ``shadow-twin sensitivity`` and ``calibrate --screen K``
(see :mod:`shadow_twin.calibration.engine.sensitivity`)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.calibration.engine.sensitivity import (MIN_SAMPLES, SENSITIVITY_JSON, TORNADO_PNG, most_influential,
                                                        ranking_lines, screen, write_sensitivity)
from shadow_twin.cli.inputs import (Setup, capped_workers, fingerprints, input_files, load_setup, open_executor,
                                    progress_bar)
from shadow_twin.common.errors import ConfigError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.common.files import check_writable_directory, exclusive_directory

log = logging.getLogger('shadow_twin')


def check_sensitivity_out(out: Path) -> None:
    """Check ``--out`` of sensitivity without creating anything: writable, no earlier screening."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f'--out {out} exists and is not a directory')
    check_writable_directory(out, '--out')
    for name in (SENSITIVITY_JSON, TORNADO_PNG):
        if (out / name).exists():
            raise ConfigError(f'--out {out} holds an earlier sensitivity screening ({name}); choose another '
                              f'directory')


def screen_run(inputs: dict, setup: Setup, samples: int, seed: int) -> dict:
    """What a screening depends on (SHA-256 of the fitted inputs, joints, alignment, weights,
    samples, seed): a screening in --out is reused only when this matches."""
    run = {'inputs': {k: v['sha256'] for k, v in inputs.items() if not k.startswith('holdout')},
           'joints': setup.evaluator.objective_joints, 'alignment': vars(setup.evaluator.settings),
           'weights': setup.weights, 'samples': samples, 'seed': seed}
    return json.loads(json.dumps(run))


def run_screening(args, setup: Setup, space: SearchSpace, samples: int, out: Path, run: dict, inputs: dict,
                  executor=None):
    """Screen ``space`` and write sensitivity.json + tornado.png into ``out``; returns the JSON document.
    ``executor`` evaluates the batches (default: local threads, ``--workers``)."""
    bar, progress = progress_bar(args, samples, 'screen', 'rollout')
    try:
        result = screen(setup.evaluator, space, samples, capped_workers(args, args.command), args.seed,
                        batch_size=args.workers, progress=progress, executor=executor)
    finally:
        if bar is not None:
            bar.close()
    return write_sensitivity(out, result, {'run': run, 'inputs': inputs})


def cmd_sensitivity(args) -> int:
    check_sensitivity_out(args.out)
    if args.samples < MIN_SAMPLES or args.workers < 1:
        raise ConfigError(f'--samples must be at least {MIN_SAMPLES} and --workers at least 1, got '
                          f'{args.samples} and {args.workers}')
    setup = load_setup(args)
    space = SearchSpace.from_yaml(args.space, setup.twin)
    inputs = fingerprints(input_files(args, setup))
    run = screen_run(inputs, setup, args.samples, args.seed)
    # the executor before --out is created: a bad --cluster leaves nothing
    with open_executor(args, setup.evaluator) as executor, exclusive_directory(args.out, '--out'):
        check_sensitivity_out(args.out)  # again, under the lock
        log.info('screening %d parameters with %d samples, %d workers (%s) -> %s', len(space.dimensions),
                 args.samples, args.workers, executor.name, args.out)
        doc = run_screening(args, setup, space, args.samples, args.out, run, inputs, executor)
    obj = doc['objective']
    print(f'influence on the objective (Pearson r over {doc["samples"]} samples; objective '
          f'{obj.get("min", float("nan")):.4g} .. {obj.get("max", float("nan")):.4g} rad^2):')
    for line in ranking_lines(doc['influence']):
        print(f'  {line}')
    print(f'tornado chart: {args.out / TORNADO_PNG}')
    return ExitCode.OK


def screen_samples(args) -> int:
    """Screening samples of calibrate --screen (default: a third of --budget, at least MIN_SAMPLES);
    ConfigError unless some of --budget is left for the optimiser."""
    samples = args.screen_samples or max(MIN_SAMPLES, args.budget // 3)
    if samples < MIN_SAMPLES:
        raise ConfigError(f'--screen-samples must be at least {MIN_SAMPLES}, got {samples}')
    if samples >= args.budget:
        raise ConfigError(f'--screen-samples {samples} leaves nothing of --budget {args.budget} (rollouts, '
                          f'screening included) for the calibration; raise --budget')
    return samples


def earlier_screening(out: Path, run: dict) -> dict | None:
    """The screening document in ``out`` if it was made with ``run``; None if there is none;
    ConfigError if there is one of other inputs or settings (never overwritten)."""
    path = out / SENSITIVITY_JSON
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        doc = None
    if not isinstance(doc, dict) or doc.get('run') != run:
        raise ConfigError(f'--out {out} holds a sensitivity screening ({SENSITIVITY_JSON}) of other inputs or '
                          f'settings; choose another directory')
    return doc


def screened_space(args, setup: Setup, space: SearchSpace, screening: dict, inputs: dict,
                   executor=None) -> SearchSpace:
    """Screen (or reuse the screening in --out) and keep the --screen most influential parameters
    (``executor``: as :func:`run_screening`)."""
    doc = screening['doc']
    samples = screening['run']['samples']
    if doc is None:
        log.info('screening %d parameters with %d of the %d rollouts of the budget', len(space.dimensions),
                 samples, args.budget)
        doc = run_screening(args, setup, space, samples, args.out, screening['run'], inputs, executor)
    else:
        log.info('reusing the screening in %s', args.out / SENSITIVITY_JSON)
    kept = most_influential(doc['influence'], args.screen, space.names)
    others = [n for n in space.names if n not in kept]
    log.info('screening: calibrating %s; kept at the model\'s values: %s', ', '.join(kept),
             ', '.join(others) or 'none')
    for line in ranking_lines(doc['influence'], kept):
        log.info('  %s', line)
    return space.subset(kept)
