"""Outputs of ``shadow-twin identify``: calibrated.xml, parameters.yaml, report.json.

* ``calibrated.xml``: the model (through ``MjSpec``) with the identified armature, damping and
  frictionloss of the joints and a body ``payload`` (the identified mass at the identified
  centre of mass, a small sphere's inertia) fixed at the flange frame;
* ``parameters.yaml``: :class:`~shadow_twin.simulation.effort.DriveParameters` (drive gains,
  offsets, residual_sigma = per-joint standard deviation of the hold-out residual, else of the
  fit's, in the recording's unit): what the live effort watch reads;
* ``report.json``: per recording and hold-out, per joint effort RMSE before (nominal model and
  gains) and after, explained variance 1 - SSE/SST, dropped samples; the filter; the
  parameters with 95 % intervals; the unidentified directions.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path


import mujoco
import numpy as np

from shadow_twin.common.errors import ModelError
from shadow_twin.common.files import write_text_atomic
from shadow_twin.identification.fit import DynamicsParameters, FitResult
from shadow_twin.identification.regressor import FLANGE_BODIES, FLANGE_SITES
from shadow_twin.identification.samples import Samples
from shadow_twin.identification.recordings import EffortRecording
from shadow_twin.monitoring.effort_watch import EffortWatch
from shadow_twin.simulation.effort import DriveParameters, InverseDynamics

#: Radius (m) of the sphere whose inertia the payload body gets (MuJoCo needs a positive inertia).
PAYLOAD_RADIUS = 0.01


def metrics(samples: Samples, nominal: DynamicsParameters, identified: DynamicsParameters) -> dict:
    """{'joints': {joint: {rmse_before, rmse_after, explained_variance, residual_sigma}}, ...} of one
    recording against its raw efforts (the recording's unit)."""
    e = samples.effort
    before = nominal.predict(samples.regressors) - e
    after = identified.predict(samples.regressors) - e
    sst = np.sum((e - e.mean(axis=0)) ** 2, axis=0)
    out = {}
    for j, joint in enumerate(samples.recording.joints):
        rb, ra = float(np.sqrt(np.mean(before[:, j] ** 2))), float(np.sqrt(np.mean(after[:, j] ** 2)))
        out[joint] = {'rmse_before': rb, 'rmse_after': ra,
                      'reduction_percent': 100.0 * (1 - ra / rb) if rb > 0 else 0.0,
                      'explained_variance': float(1 - np.sum(after[:, j] ** 2) / sst[j]) if sst[j] > 0 else None,
                      'residual_sigma': float(np.std(after[:, j]))}
    total_b, total_a = float(np.sqrt(np.mean(before ** 2))), float(np.sqrt(np.mean(after ** 2)))
    return {'source': samples.recording.source, 'unit': samples.recording.effort_unit,
            'samples': int(samples.index.size), 'duration_s': samples.recording.duration,
            'dropped': samples.recording.dropped, 'edge_rows': samples.edge_rows,
            'rmse_before': total_b, 'rmse_after': total_a,
            'reduction_percent': 100.0 * (1 - total_a / total_b) if total_b > 0 else 0.0, 'joints': out}


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


def drive_parameters(params: DynamicsParameters, residual_sigma: np.ndarray) -> DriveParameters:
    """The ``parameters.yaml`` contents."""
    gains = {j: float(params.drive_gain[k]) for k, j in enumerate(params.joints)} \
        if params.effort_unit == 'A' else {}
    velocity = {} if params.friction_velocity is None else \
        {j: float(params.friction_velocity[k]) for k, j in enumerate(params.joints)}
    return DriveParameters(params.effort_unit, gains,
                           {j: float(params.offset[k]) for k, j in enumerate(params.joints)},
                           {j: float(residual_sigma[k]) for k, j in enumerate(params.joints)}, velocity)


def write_parameters(path: Path, drive: DriveParameters) -> Path:
    """Write ``parameters.yaml`` atomically (the :class:`DriveParameters` layout)."""
    return drive.write_yaml(path, header=(
        'shadow-twin identify: per joint drive_gain (N m per effort unit), offset and residual_sigma\n'
        '(std of the validation residual) in the effort unit; friction_velocity: rad/s of the\n'
        'Coulomb friction smooth sign tanh(qd / v) (docs/identify.md)'))


def physical_section(params: DynamicsParameters) -> dict:
    """The identified values by joint (JSON-ready)."""
    joints = {}
    for k, j in enumerate(params.joints):
        joints[j] = {'drive_gain': float(params.drive_gain[k]), 'armature': float(params.armature[k]),
                     'damping': float(params.damping[k]), 'frictionloss': float(params.frictionloss[k]),
                     'offset': float(params.offset[k])}
        if params.friction_velocity is not None:
            joints[j]['friction_velocity'] = float(params.friction_velocity[k])
    return {'joints': joints, 'payload': {'mass': float(params.payload_mass),
                                          'com': [float(v) for v in params.payload_com]}}


def parameters_section(result: FitResult) -> dict:
    """JSON-ready values, intervals and unidentified directions."""
    def safe(v):
        return None if isinstance(v, float) and not np.isfinite(v) else v
    return {'values': physical_section(result.parameters),
            'intervals': {k: {kk: safe(vv) for kk, vv in v.items()} for k, v in result.intervals.items()},
            'unidentified': [{k: safe(v) for k, v in asdict(d).items()} for d in result.unidentified],
            'singular_values': result.singular_values, 'rows': result.rows, 'samples': result.samples,
            'decimation': result.decimation, 'evaluations': result.evaluations,
            'fit_sigma': [float(v) for v in result.fit_sigma]}


def write_json(path, data: dict):
    """Write ``data`` as indented JSON, atomically."""
    return write_text_atomic(path, json.dumps(data, indent=2) + '\n')
