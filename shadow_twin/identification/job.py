"""One identification from recordings already read: filter, regress, fit, check the hold-outs,
and what ``shadow-twin identify`` writes (:func:`identify`). The command line reads the inputs,
checks ``--out`` and writes the files; a node or a script can call :func:`identify` the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import mujoco
import numpy as np

from shadow_twin.common.errors import ConfigError
from shadow_twin.identification import report
from shadow_twin.identification.baseline import Baseline
from shadow_twin.identification.fit import DynamicsParameters, FitResult, solve
from shadow_twin.identification.links import solve_links
from shadow_twin.identification.priors import GainPrior, implausible
from shadow_twin.identification.recordings import EffortRecording
from shadow_twin.identification.regressor import EffortRegressor, Regressors
from shadow_twin.identification.samples import prepare
from shadow_twin.identification.signals import FilterSettings
from shadow_twin.monitoring.effort_settings import nominal_drive
from shadow_twin.simulation.effort import EFFORT_DELAYS, DriveParameters


@dataclass(frozen=True)
class IdentifyOptions:
    """How to identify.

    Attributes:
        effort_unit: 'A' (joint currents) or 'Nm'.
        filter: the zero-phase filter of the positions (:class:`FilterSettings`).
        payload: identify a payload at the flange.
        links: also the links' inertial parameters, as base parameters (reported only).
        max_samples: the fit is decimated to at most this many samples.
    """

    effort_unit: str = 'A'
    filter: FilterSettings = field(default_factory=FilterSettings)
    payload: bool = True
    links: bool = False
    max_samples: int = 20000


@dataclass
class Identification:
    """What an identification found.

    Attributes:
        xml: ``calibrated.xml`` (the model with the identified joint dynamics and payload).
        drive: ``parameters.yaml`` (drive gains, offsets, residual sigma, friction band).
        report: ``report.json``'s contents.
        summary: the one-line JSON summary (fit time, per recording RMSE before/after, reduction,
            explained variance, unidentified directions).
        result: the fit itself.
    """

    xml: str
    drive: DriveParameters
    report: dict
    summary: dict
    result: FitResult


def identify(spec: mujoco.MjSpec, joints: Sequence[str], fit_recs: Sequence[EffortRecording],
             hold_recs: Sequence[EffortRecording], options: IdentifyOptions, model_label: str,
             regressor: EffortRegressor | None = None, log: Callable[[str], None] = print) -> Identification:
    """Identify the arm ``joints`` of the model ``spec`` from ``fit_recs``, checked on ``hold_recs``
    (docs/identify.md: method, outputs).

    Raises:
        ConfigError: no usable samples after filtering; an implausible result
            (:func:`~shadow_twin.identification.priors.implausible`); ModelError as
            :class:`EffortRegressor`.
    """
    joints = list(joints)
    model = spec.compile()
    regressor = regressor or EffortRegressor(model, joints)
    started = time.perf_counter()
    fit_samples = [prepare(r, regressor, options.filter, options.links) for r in fit_recs]
    hold_samples = [prepare(r, regressor, options.filter) for r in hold_recs]
    if sum(s.index.size for s in fit_samples) == 0:
        raise ConfigError('no usable samples after filtering (segments too short)')
    prepared = time.perf_counter()
    reg = Regressors.concatenate([s.regressors for s in fit_samples])
    effort = np.concatenate([s.effort for s in fit_samples])
    prior = GainPrior.for_joints(joints)
    result = solve(reg, effort, joints, options.effort_unit, payload=options.payload, max_samples=options.max_samples,
                   gain_prior=prior if options.effort_unit == 'A' else None, delays=EFFORT_DELAYS)
    fitted = time.perf_counter()
    every = 'all of them' if result.decimation == 1 else f'one in {result.decimation}'
    log(f'fitted {result.samples} samples ({every}) in {fitted - prepared:.2f} s; '
        f'{len(result.unidentified)} unidentified direction(s)')
    found = implausible(joints, result.parameters.drive_gain if options.effort_unit == 'A' else None,
                        result.parameters.payload_mass, prior)
    if found:
        raise ConfigError(f'implausible identification, nothing written: {"; ".join(found)} (check the effort unit '
                          'and scale, that positions are in rad, that --joints matches the columns, --cutoff)')
    for line in report.prior_lines(result):
        log(line)
    links = None
    if options.links:
        links = solve_links(reg, effort, result.parameters, regressor.link_bodies, regressor.link_parameters(),
                            options.max_samples)
        log(f'links: {links["rank"]} base parameters of {links["columns"]}')
    dofs = [model.jnt_dofadr[model.joint(j).id] for j in joints]
    gains = nominal_drive(joints, options.effort_unit).gains(joints)
    nominal = DynamicsParameters(joints, options.effort_unit, gains, model.dof_armature[dofs].copy(),
                                 model.dof_damping[dofs].copy(), model.dof_frictionloss[dofs].copy(),
                                 np.zeros(len(joints)))
    params = result.parameters
    baseline = Baseline.fit(reg, effort)
    fits = {s.recording.source: report.metrics(s, nominal, params, baseline) for s in fit_samples}
    holds = {s.recording.source: report.metrics(s, nominal, params, baseline) for s in hold_samples}
    judged = [('hold-out', f) for f in holds.values()] or [('fit', f) for f in fits.values()]
    for kind, figures in judged:
        for line in report.table_lines(kind, figures):
            log(line)
    warnings = [line for kind, figures in judged for line in report.below_baseline_lines(kind, figures)]
    for line in warnings:
        log(line)
    source = holds or fits
    moving = [s.recording for s in hold_samples if not holds[s.recording.source]['static']]
    calibrated = report.calibrated_spec(spec, params)
    xml = calibrated.to_xml()
    sigma = report.watch_sigma(calibrated.compile(), report.drive_parameters(params, None),
                               moving or [s.recording for s in fit_samples])
    data = {'model': model_label, 'joints': joints, 'effort_unit': options.effort_unit,
            'filter': options.filter.to_dict(fit_samples[0].rate_hz),
            'nominal_drive_gains': gains.tolist(), 'recordings': fits, 'holdout': holds,
            'parameters': report.parameters_section(result),
            'timing_s': {'prepare': prepared - started, 'fit': fitted - prepared}}
    if links is not None:
        data['links'] = links
    summary = {'fit_s': round(fitted - prepared, 3),
               'rmse_before': {k: v['rmse_before'] for k, v in source.items()},
               'rmse_after': {k: v['rmse_after'] for k, v in source.items()},
               'reduction_percent': {k: v['reduction_percent'] for k, v in source.items()},
               'explained_variance': {k: {j: m['explained_variance'] for j, m in v['joints'].items()}
                                      for k, v in source.items()},
               'baseline_explained_variance': {k: {j: m['baseline_explained_variance'] for j, m in v['joints'].items()}
                                               for k, v in source.items()},
               'unidentified': len(result.unidentified), 'below_baseline': len(warnings)}
    return Identification(xml, report.drive_parameters(params, sigma), data, summary, result)
