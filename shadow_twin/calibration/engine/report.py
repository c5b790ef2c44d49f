"""Outputs of a calibration: calibrated MJCF, parameters YAML, report.json,
history CSV and PNG plots (drawn by :mod:`shadow_twin.plots.report_figures`), and the
hold-outs' before/after videos (:mod:`shadow_twin.visual.video`), all written atomically
into the output directory."""

from __future__ import annotations

import io
import json
import logging
import platform
from dataclasses import asdict, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import yaml

from shadow_twin.calibration.search import identifiability
from shadow_twin.calibration.scoring import metrics
from shadow_twin.calibration.scoring.evaluation import Evaluator, Score
from shadow_twin.calibration.scoring.evaluator_set import EvaluatorSet, combine_scores, parts_of
from shadow_twin.calibration.scoring.reduced import SearchModel
from shadow_twin.calibration.engine.run import CalibrationResult
from shadow_twin.calibration.search.search_space import SearchSpace
from shadow_twin.common.errors import ModelError
from shadow_twin.common.files import write_text_atomic
from shadow_twin.control.controller import SimController
from shadow_twin.model.calibratable import apply_parameters
from shadow_twin.model.mjcf import TwinModel, write_calibrated_mjcf
from shadow_twin.plots.aside import FigureProcess
from shadow_twin.plots.report_figures import plot_convergence, plot_joints
from shadow_twin.visual.video import Motion, VideoSettings, render_video
from shadow_twin.visual.video_gl import RenderingUnavailable

log = logging.getLogger(__name__)
#: The hold-outs' videos: small and at a low rate, a look at where the error is (a few s to draw each).
REPORT_VIDEO = VideoSettings(fps=10.0, width=320, height=240)


def parameters_document(space: SearchSpace, x: Sequence[float], controller: SimController, model) -> dict:
    """YAML-ready document of a parameter point: named values, per-target values,
    and the resulting controller gains when any were calibrated."""
    values = space.values(x)
    doc = {'parameters': space.named(x), 'values': {str(t): v for t, v in values.items()}}
    _, gains = controller.split_values(values, model)
    if gains:
        scratch = model.__copy__()
        apply_parameters(scratch, gains)
        doc['controller'] = {'gains': {j: {'p': g.p, 'i': 0.0, 'd': g.d}
                                       for j, g in controller.current_gains(scratch).items()}}
    return doc


def write_history_csv(path: Path, result: CalibrationResult, space: SearchSpace) -> None:
    """One row per evaluation: index, batch, phase (optimiser), parameter values, objective, best so far,
    per-joint MSE."""
    rows = []
    best = np.inf
    for ev in result.evaluations:
        best = min(best, ev.objective)
        row = {'evaluation': ev.index, 'batch': ev.batch, 'phase': ev.phase, **space.named(ev.x),
               'objective': ev.objective, 'best_objective': best, 'wall_time_s': ev.wall_time}
        row.update({f'mse_{j}': v for j, v in ev.per_joint_mse.items()})
        rows.append(row)
    buffer = io.StringIO()
    pd.DataFrame(rows).to_csv(buffer, index=False)
    write_text_atomic(path, buffer.getvalue())


def _alignment_of(part: Evaluator) -> dict:
    return {'recording': part.label, 'motion_onset_s': part.onset, 'trajectory_start_s': part.start,
            'fitted_delay_s': part.delay, 'window_s': part.window, 'samples': int(part.time_base.size)}


def calibration_report(result: CalibrationResult, evaluator: Evaluator | EvaluatorSet, space: SearchSpace,
                       final: Score, inputs: Mapping[str, Mapping[str, str]], outputs: Mapping[str, str],
                       recordings: Sequence[dict] = (), holdout: Mapping | None = None) -> dict:
    """The ``report.json`` document (objectives in rad^2, times in s).

    ``recordings``: per-recording before/after objectives (several recordings only).
    ``holdout``: recordings not fitted, scored before and after (rad^2), written as the
    ``holdout`` section as given (see ``shadow-twin calibrate --holdout``).
    """
    before, after = result.initial.per_joint_mse, final.per_joint_mse
    parts = parts_of(evaluator)
    report = {
        'objective': {'joints': evaluator.objective_joints, 'weights': evaluator.weights,
                      'initial': result.initial.objective, 'best': final.objective,
                      'reduction_percent': metrics.reduction_percent(result.initial.objective, final.objective)},
        'per_joint_mse': {'before': before, 'after': after},
        'per_joint_rmse': {'before': metrics.rmse(before), 'after': metrics.rmse(after)},
        'finger_mean_mse': {'before': metrics.group_means(before, metrics.FINGER_GROUPS),
                            'after': metrics.group_means(after, metrics.FINGER_GROUPS)},
        'best_parameters': space.named(result.best.x),
        'search_space': space.to_dict(),
        'evaluations': len(result.evaluations),
        'resumed_evaluations': result.resumed_evaluations,
        'wall_time_s': result.wall_time,
        'optimiser_time_s': result.optimiser_time,
        'simulation_time_s': result.simulation_time,
        'optimizer': result.settings,
        'alignment': {**asdict(evaluator.settings), **_alignment_of(parts[0])},
        'inputs': dict(inputs),
        'outputs': dict(outputs),
        'environment': {'python': platform.python_version(), 'mujoco': _version('mujoco'),
                        'scikit-optimize': _version('scikit-optimize')},
    }
    if len(parts) > 1:
        report['recordings'] = [{**_alignment_of(p), **extra} for p, extra in zip(parts, recordings)]
        for entry, weight in zip(report['recordings'], getattr(evaluator, 'recording_weights', [])):
            entry['weight'] = weight
    if holdout:
        report['holdout'] = dict(holdout)
    return report


def identifiability_section(result: CalibrationResult, evaluator: Evaluator | EvaluatorSet,
                            space: SearchSpace, executor=None) -> dict:
    """The ``identifiability`` section of report.json at the best point (see
    :mod:`~shadow_twin.calibration.search.identifiability`; ``identifiability.summary_lines`` prints it).
    Reuses the least-squares phase's Jacobian when it was taken there, else spends D + 1
    rollouts outside the budget (``jacobian_rollouts``), through ``executor`` (default: local
    threads, the run's ``workers``)."""
    workers = int(result.settings.get('workers', 1) or 1)
    if executor is not None:
        evaluator = executor.bind(evaluator)
    return identifiability.of_result(result, evaluator, space, nthread=workers).to_dict()


def phase_lines(report: Mapping) -> list[str]:
    """Text lines of a report's ``phase_log``: which optimiser phases ran, in order, and why
    (``CalibrationResult.phase_log``); empty for a report without one."""
    lines = []
    for entry in report.get('phase_log') or []:
        if entry['ran']:
            best = 'none' if entry['best'] is None else f'best {entry["best"]:.4g} rad^2'
            ended = entry.get('status') if entry.get('ended') == 'stopped' else entry.get('ended')
            ended = f'; {ended}' if ended else ''
            lines.append(f'phase {entry["phase"]}: {entry["evaluations"]} rollouts, {best}{ended} ({entry["why"]})')
        else:
            lines.append(f'phase {entry["phase"]}: not run ({entry["why"]})')
    return lines


def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return 'unknown'


def _safe(label: str) -> str:
    return ''.join(c if c.isalnum() or c in '-_' else '_' for c in Path(label.split()[0]).stem)[:40]


def replay_motions(part: Evaluator, parameter_sets: Sequence[Mapping]) -> list[Motion]:
    """The recording of ``part`` against its replay in the sim (the evaluator's own: one batched rollout) with
    each of ``parameter_sets`` ({} the model as given): Motions on the evaluator's time base (s from the
    trajectory start) over its compared joints (rad). Raises ModelError naming a run that went unstable."""
    motions = []
    for score in part.evaluate([dict(values) for values in parameter_sets], keep_positions=True):
        if score.unstable:
            raise ModelError(score.unstable)
        motions.append(Motion(part.time_base, part.joints, part.real, score.positions))
    return motions


def holdout_videos(out_dir: Path, twin: TwinModel, controller: SimController, parts: Sequence[Evaluator],
                   best_values: Mapping) -> list[str]:
    """Write ``holdout_<k>_<recording>_before.mp4`` and ``..._after.mp4`` (:data:`REPORT_VIDEO`) of each hold-out
    into ``out_dir``: its real motion as a ghost against its replay with the model as given and as calibrated.
    Returns the names written; none (a warning logged) where no OpenGL backend renders or a replay went unstable."""
    names = []
    for k, part in enumerate(parts, 1):
        try:
            motions = replay_motions(part, [{}, best_values])
            for when, motion in zip(('before', 'after'), motions):
                name = f'holdout_{k}_{_safe(part.label)}_{when}.mp4'
                settings = replace(REPORT_VIDEO, title=f'{part.label}: {when} calibration')
                render_video(out_dir / name, twin.model, motion, settings, controller.joint_map)
                names.append(name)
        except (RenderingUnavailable, ModelError) as exc:
            log.warning('no video of hold-out %s: %s', part.label, exc)
    return names


def whole_model_scores(evaluator: Evaluator | EvaluatorSet, best_values: Mapping,
                       nthread: int = 2) -> tuple[list, Score, Score]:
    """The model as given and ``best_values`` scored on the whole model (positions kept, for the figures):
    ([(before, after) per recording], the combined before, the combined after); one batched rollout of two
    per recording, on ``nthread`` threads."""
    parts = parts_of(evaluator)
    pairs = [tuple(part.evaluate([{}, dict(best_values)], nthread, keep_positions=True)) for part in parts]
    weights = getattr(evaluator, 'recording_weights', None)
    if len(parts) == 1:
        return pairs, pairs[0][0], pairs[0][1]
    return pairs, combine_scores([b for b, _ in pairs], weights), combine_scores([a for _, a in pairs], weights)


def write_outputs(out_dir: Path, twin: TwinModel, controller: SimController, evaluator: Evaluator | EvaluatorSet,
                  space: SearchSpace, result: CalibrationResult, inputs: Mapping[str, Mapping[str, str]],
                  holdout: Mapping | None = None, executor=None, holdout_parts: Sequence[Evaluator] = (),
                  search: SearchModel | None = None, scores: tuple | None = None,
                  figures: FigureProcess | None = None) -> dict:
    """Write every output of a finished calibration into ``out_dir``; returns report.json's content.

    ``holdout``: the ``holdout`` section of report.json (see :func:`calibration_report`).
    ``executor``: rolls out the identifiability Jacobian when it needs one (default: local threads).
    ``holdout_parts``: the hold-outs' evaluators: their before/after videos (:func:`holdout_videos`) are written
    and listed in ``outputs.videos``. ``search``: what the search simulated (a reduced model,
    :mod:`~shadow_twin.calibration.scoring.reduced`): its evaluator rolls out the identifiability Jacobian, and
    report.json's ``search_model`` compares its best with the whole model's. ``scores``: what
    :func:`whole_model_scores` returned for this result (computed here without it): the report's before and
    after are always the whole model's. ``figures``: the process that draws the figures (without it they
    are drawn here, at the end).

    Files: ``<model>_calibrated.xml``, ``parameters.yaml``, ``history.csv``, ``convergence.png``,
    ``joints_before_after.png`` (one recording) or ``joints_before_after_<k>_<recording>.png``
    (one per recording of an :class:`EvaluatorSet`), with ``holdout_parts`` ``holdout_<k>_<recording>_before.mp4``
    and ``_after.mp4``, ``report.json`` (with ``phases``: evaluations
    and best objective of each optimiser phase, ``phase_log``: which phases ran, in order, and why
    (:func:`phase_lines` prints it), and ``identifiability``: :func:`identifiability_section`). The figures are
    drawn in a process of their own meanwhile (:class:`~shadow_twin.plots.aside.FigureProcess`).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    best_values = space.values(result.best.x)
    parts = parts_of(evaluator)
    pairs, initial, final = scores or whole_model_scores(evaluator, best_values,
                                                         int(result.settings.get('workers', 1) or 1))
    figures = figures or FigureProcess(enabled=False)      # a caller's process only: a node's has DDS threads
    jobs = [(plot_convergence, (out_dir / 'convergence.png', [e.objective for e in result.evaluations],
                                initial.objective))]
    plots, recordings = ['convergence.png'], []
    for k, (part, (before, after)) in enumerate(zip(parts, pairs)):
        name = 'joints_before_after.png' if len(parts) == 1 else f'joints_before_after_{k}_{_safe(part.label)}.png'
        title = (f'{part.label if len(parts) > 1 else "Real vs simulated"}: objective '
                 f'{before.objective:.4g} -> {after.objective:.4g} rad$^2$')
        jobs.append((plot_joints, (out_dir / name, part.time_base, part.joints, part.real,
                                      {'sim before': before.positions, 'sim after': after.positions}, title,
                                      part.objective_joints)))
        plots.append(name)
        recordings.append({'objective_before': before.objective, 'objective_after': after.objective})
    figures.draw(jobs)
    mjcf_values, _ = controller.split_values(best_values, twin.model)
    model_file = out_dir / f'{twin.path.stem}_calibrated.xml'
    write_calibrated_mjcf(twin, mjcf_values, model_file)
    doc = parameters_document(space, result.best.x, controller, twin.model)
    write_text_atomic(out_dir / 'parameters.yaml', yaml.safe_dump(doc, sort_keys=False))
    write_history_csv(out_dir / 'history.csv', result, space)
    outputs = {'calibrated_model': model_file.name, 'parameters': 'parameters.yaml',
               'history': 'history.csv', 'plots': plots, 'checkpoint': 'checkpoint.jsonl'}
    if holdout_parts:
        outputs['videos'] = holdout_videos(out_dir, twin, controller, holdout_parts, best_values)
    report = calibration_report(replace(result, initial=initial), evaluator, space, final, inputs, outputs,
                                recordings, holdout=holdout)
    report['phases'] = result.phase_summary()
    report['phase_log'] = result.phase_log
    if hasattr(evaluator, 'evaluate_residuals'):
        report['identifiability'] = identifiability_section(result, search.evaluator if search else evaluator,
                                                            space, executor)
    if search is not None:
        report['search_model'] = {**search.report(), 'best_on_search_model': result.best.objective,
                                  'best_on_whole_model': final.objective}
    figures.finish()
    write_text_atomic(out_dir / 'report.json', json.dumps(report, indent=2) + '\n')
    return report
