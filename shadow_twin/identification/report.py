"""Outputs of ``shadow-twin identify``: calibrated.xml, parameters.yaml, report.json.

* ``calibrated.xml``: the model (through ``MjSpec``) with the identified armature, damping and
  frictionloss of the joints and a body ``payload`` (the identified mass at the identified
  centre of mass, a small sphere's inertia) fixed at the flange frame;
* ``parameters.yaml``: :class:`~shadow_twin.simulation.effort.DriveParameters` (drive gains,
  offsets, residual_sigma = per-joint standard deviation of the hold-out residual, else of the
  fit's, in the recording's unit): what the live effort watch reads;
* ``report.json``: per recording and hold-out, per joint effort RMSE before (nominal model and
  gains) and after, mean error, explained variance 1 - SSE/SST, the plain OLS baseline's RMSE and
  explained variance beside them (:mod:`~shadow_twin.identification.baseline`), dropped samples;
  the filter; the parameters with 95 % intervals; the unidentified directions. A static
  recording (a hold-out standing still) is reported by RMSE and mean error.
"""

from __future__ import annotations

import json
from dataclasses import asdict

import mujoco
import numpy as np

from shadow_twin.common.errors import ModelError
from shadow_twin.identification.baseline import Baseline, explained_variance
from shadow_twin.identification.fit import DynamicsParameters, FitResult
from shadow_twin.identification.regressor import FLANGE_BODIES, FLANGE_SITES
from shadow_twin.identification.samples import Samples
from shadow_twin.identification.recordings import EffortRecording
from shadow_twin.monitoring.effort_watch import EffortWatch
from shadow_twin.simulation.effort import DriveParameters, InverseDynamics

#: rad: a recording whose joints all move less than this stands still, for the report (its effort's
#: variance is noise and the holding servo's settling; a standing UR moves about 0.2 mrad, a servo
#: settling under gravity a few mrad). Fitting needs more: ``recordings.MIN_MOTION`` is checked there.
STATIC_SPAN = 0.01
#: Radius (m) of the sphere whose inertia the payload body gets (MuJoCo needs a positive inertia).
PAYLOAD_RADIUS = 0.01


def metrics(samples: Samples, nominal: DynamicsParameters, identified: DynamicsParameters,
            baseline: Baseline | None = None) -> dict:
    """One recording's figures against its raw efforts (the recording's unit): ``{'static', 'rmse_before',
    'rmse_after', 'reduction_percent', 'joints': {joint: {rmse_before, rmse_after, mean_error,
    friction_band, explained_variance, residual_sigma, baseline_rmse, baseline_explained_variance,
    below_baseline}}, ...}``. ``static``: the recording stands still (its joints move less than
    :data:`STATIC_SPAN`); its explained variances are None (the effort's variance is noise there)
    and it is judged by RMSE and mean error. ``friction_band``: the identified frictionloss over the
    drive gain: a joint that has stood still since the recording began holds an unknown friction
    within +- that band (the model takes 0), so a static recording's mean error is only resolved to
    it. ``baseline``: the plain OLS baseline (:mod:`~shadow_twin.identification.baseline`);
    ``below_baseline``: the method's RMSE is above the baseline's (for a moving recording: its
    explained variance is below)."""
    e = samples.effort
    static = bool(np.ptp(samples.recording.positions, axis=0).max() < STATIC_SPAN)
    before = nominal.predict(samples.regressors) - e
    after = identified.predict(samples.regressors) - e
    explained = explained_variance(after, e)
    base = None if baseline is None else baseline.predict(samples.regressors) - e
    base_explained = None if base is None else explained_variance(base, e)
    out = {}
    for j, joint in enumerate(samples.recording.joints):
        rb, ra = _rms(before[:, j]), _rms(after[:, j])
        out[joint] = {'rmse_before': rb, 'rmse_after': ra,
                      'reduction_percent': 100.0 * (1 - ra / rb) if rb > 0 else 0.0,
                      'mean_error': float(np.mean(after[:, j])),
                      'friction_band': float(identified.frictionloss[j] / identified.drive_gain[j]),
                      'explained_variance': None if static else _finite(explained[j]),
                      'residual_sigma': float(np.std(after[:, j]))}
        if base is not None:
            rbase = _rms(base[:, j])
            out[joint].update(baseline_rmse=rbase,
                              baseline_explained_variance=None if static else _finite(base_explained[j]),
                              below_baseline=bool(ra > rbase))
    total_b, total_a = float(np.sqrt(np.mean(before ** 2))), float(np.sqrt(np.mean(after ** 2)))
    return {'source': samples.recording.source, 'unit': samples.recording.effort_unit, 'static': static,
            'samples': int(samples.index.size), 'duration_s': samples.recording.duration,
            'dropped': samples.recording.dropped, 'edge_rows': samples.edge_rows,
            'rmse_before': total_b, 'rmse_after': total_a,
            'reduction_percent': 100.0 * (1 - total_a / total_b) if total_b > 0 else 0.0, 'joints': out}


def table_lines(kind: str, figures: dict) -> list[str]:
    """The printed summary of one recording's :func:`metrics`: per joint RMSE before -> after beside
    the plain OLS baseline's, explained variance beside the baseline's (mean error for a static one)."""
    unit = figures['unit']
    lines = [f'{kind} {figures["source"]}{" (static)" if figures["static"] else ""}: per joint RMSE before -> '
             f'after (OLS baseline) {unit}, ' + ('mean error' if figures['static'] else 'explained variance '
                                                 '(OLS baseline)')]
    for joint, m in figures['joints'].items():
        base = m.get('baseline_rmse')
        text = f'  {joint:24s} {m["rmse_before"]:.4f} -> {m["rmse_after"]:.4f}'
        text += f' ({base:.4f})' if base is not None else ''
        if figures['static']:
            text += f'   {m["mean_error"]:+.4f} (friction band +-{m["friction_band"]:.4f})'
        elif m['explained_variance'] is not None:
            text += f'   {m["explained_variance"]:.4f}'
            bev = m.get('baseline_explained_variance')
            text += f' ({bev:.4f})' if bev is not None else ''
        lines.append(text)
    return lines


def below_baseline_lines(kind: str, figures: dict) -> list[str]:
    """One warning line per joint of one recording's :func:`metrics` where the method is below the
    plain OLS baseline."""
    lines = []
    for joint, m in figures['joints'].items():
        if not m.get('below_baseline'):
            continue
        if m['explained_variance'] is not None and m['baseline_explained_variance'] is not None:
            what = (f'explained variance {m["explained_variance"]:.3f} below the plain OLS baseline\'s '
                    f'{m["baseline_explained_variance"]:.3f}')
        else:
            what = (f'RMSE {m["rmse_after"]:.4g} {figures["unit"]} above the plain OLS baseline\'s '
                    f'{m["baseline_rmse"]:.4g}')
        lines.append(f'warning: {kind} {figures["source"]}, {joint}: {what}')
    return lines


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x ** 2)))


def _finite(v: float) -> float | None:
    return float(v) if np.isfinite(v) else None


def watch_sigma(model: mujoco.MjModel, drive: DriveParameters, recordings: list[EffortRecording]) -> np.ndarray:
    """(J,) residual_sigma: the standard deviation of the residual of the live watch's own
    estimator (:class:`~shadow_twin.monitoring.effort_watch.EffortWatch`: causal acceleration,
    the model's InverseDynamics, ``drive``) over ``recordings``, segment by segment, so the
    thresholds k sigma match what the watch sees live."""
    joints = recordings[0].joints
    watch = EffortWatch(InverseDynamics(model, joints), drive, joints=joints)
    residuals = []
    for rec in recordings:
        for a, b in rec.segments:
            qd = rec.velocities[a:b] if rec.velocities is not None else None
            run = watch.run(rec.times[a:b], rec.positions[a:b], qd, rec.efforts[a:b])
            residuals.append(run.residual)
    residual = np.concatenate(residuals)
    return np.std(residual, axis=0)


def calibrated_spec(spec: mujoco.MjSpec, params: DynamicsParameters) -> mujoco.MjSpec:
    """``spec`` with the identified joint dynamics and payload body (changed in place, returned).

    Raises:
        ModelError: a joint or the flange frame missing.
    """
    for j, name in enumerate(params.joints):
        joint = spec.joint(name)
        if joint is None:
            raise ModelError(f'joint {name!r} is not in the model')
        joint.armature = float(params.armature[j])
        joint.damping = [float(params.damping[j]), 0.0, 0.0]
        joint.frictionloss = float(params.frictionloss[j])
    if params.payload_mass > 0:
        site = next((spec.site(n) for n in FLANGE_SITES if spec.site(n) is not None), None)
        if site is not None:
            parent, pos, quat = site.parent, site.pos, site.quat
        else:
            parent = next((spec.body(n) for n in FLANGE_BODIES if spec.body(n) is not None), None)
            if parent is None:
                raise ModelError('no flange frame for the payload body')
            pos, quat = [0, 0, 0], [1, 0, 0, 0]
        body = parent.add_body(name='payload', pos=pos, quat=quat)
        body.mass = float(params.payload_mass)
        body.ipos = [float(v) for v in params.payload_com]
        inertia = 0.4 * params.payload_mass * PAYLOAD_RADIUS ** 2
        body.fullinertia = [inertia] * 3 + [0.0] * 3
        body.explicitinertial = True
    return spec


def drive_parameters(params: DynamicsParameters, residual_sigma: np.ndarray | None) -> DriveParameters:
    """The ``parameters.yaml`` contents (``residual_sigma`` None: none yet)."""
    gains = {j: float(params.drive_gain[k]) for k, j in enumerate(params.joints)} \
        if params.effort_unit == 'A' else {}
    def table(values):
        return {} if values is None else {j: float(values[k]) for k, j in enumerate(params.joints)}
    return DriveParameters(params.effort_unit, gains, table(params.offset), table(residual_sigma),
                           table(params.presliding_distance), table(params.effort_delay))


def parameters_text(drive: DriveParameters) -> str:
    """``parameters.yaml``'s text (the :class:`DriveParameters` layout, with its header)."""
    return drive.yaml_text(header=(
        'shadow-twin identify: per joint drive_gain (N m per effort unit), offset and residual_sigma\n'
        '(std of the validation residual) in the effort unit; presliding_distance: rad of travel\n'
        'over which the Coulomb friction builds up after a reversal (it holds at rest); effort_delay:\n'
        's the effort is measured late (docs/identify.md)'))


def physical_section(params: DynamicsParameters) -> dict:
    """The identified values by joint (JSON-ready)."""
    joints = {}
    for k, j in enumerate(params.joints):
        joints[j] = {'drive_gain': float(params.drive_gain[k]), 'armature': float(params.armature[k]),
                     'damping': float(params.damping[k]), 'frictionloss': float(params.frictionloss[k]),
                     'offset': float(params.offset[k])}
        if params.presliding_distance is not None:
            joints[j]['presliding_distance'] = float(params.presliding_distance[k])
        if params.effort_delay is not None:
            joints[j]['effort_delay'] = float(params.effort_delay[k])
    return {'joints': joints, 'payload': {'mass': float(params.payload_mass),
                                          'com': [float(v) for v in params.payload_com]}}


def prior_lines(result: FitResult) -> list[str]:
    """Printed lines on the drive gains' prior: one per joint whose gain the data leave mostly to the
    prior (its share of the information over one half), naming the nominal value it stays near, and
    an unidentified direction in which the gain weighs (|coefficient| >= 0.3), if any."""
    prior = result.gain_prior
    if prior is None:
        return []
    joints = result.parameters.joints
    lines = []
    for k, (joint, share) in enumerate(zip(joints, result.prior_share)):
        if share is None or share <= 0.5:
            continue
        directions = [d.combination for d in result.unidentified
                      if abs(d.coefficients.get(f'{joint}.1/drive_gain', 0.0)) >= 0.3]
        why = f'the data cannot identify {directions[0]}' if directions else 'the data say little about it'
        lines.append(f'{joint} drive gain {result.parameters.drive_gain[k]:.3f} N m/A: {why}; it stays near its '
                     f'prior, UR\'s nominal {prior.nominal[k]:g} N m/A (the prior holds {100 * share:.0f} % of the '
                     f'information on it)')
    return lines


def parameters_section(result: FitResult) -> dict:
    """JSON-ready values, intervals, unidentified directions and the drive gains' prior with its
    weight per joint."""
    def safe(v):
        return None if isinstance(v, float) and not np.isfinite(v) else v
    priors = {}
    if result.gain_prior is not None:
        for k, joint in enumerate(result.parameters.joints):
            if result.prior_share[k] is not None:
                priors[joint] = {'nominal_drive_gain': float(result.gain_prior.nominal[k]),
                                 'sd_percent': 100.0 * result.gain_prior.sd, 'prior_share': result.prior_share[k]}
    return {'priors': priors, 'values': physical_section(result.parameters),
            'intervals': {k: {kk: safe(vv) for kk, vv in v.items()} for k, v in result.intervals.items()},
            'unidentified': [{k: safe(v) for k, v in asdict(d).items()} for d in result.unidentified],
            'singular_values': result.singular_values, 'rows': result.rows, 'samples': result.samples,
            'decimation': result.decimation, 'evaluations': result.evaluations,
            'fit_sigma': [float(v) for v in result.fit_sigma]}


def json_text(data: dict) -> str:
    """``data`` as indented JSON (``report.json``'s text)."""
    return json.dumps(data, indent=2) + '\n'
