"""A recording's effort error under a model and its drive parameters, and what the live watch
would have flagged (the core of ``shadow-twin evaluate --effort``).

The recording goes sample by sample through the live watch's own core,
:class:`shadow_twin.monitoring.effort_watch.EffortWatch`, so offline and live flag the same
samples (same acceleration estimate, thresholds k sigma of ``residual_sigma``, debounce).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from shadow_twin.calibration.recordings.recording import read_joint_states
from shadow_twin.common.errors import RecordingError
from shadow_twin.identification.recordings import check_positions
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.model.ur.description import JOINTS as UR_JOINTS
from shadow_twin.monitoring.effort_settings import EffortSettings, nominal_drive
from shadow_twin.monitoring.effort_watch import EffortWatch
from shadow_twin.monitoring.thresholds import LEVEL_NAMES
from shadow_twin.simulation.effort import DriveParameters, InverseDynamics

def evaluate_effort(model_path: str | Path, parameters_yaml: str | Path | None, bag: str | Path,
                    joints: Sequence[str] | None = None, settings: EffortSettings | None = None,
                    effort_unit: str = 'A', topic: str | None = None,
                    printer: Callable[[str], None] | None = print) -> dict:
    """Per-joint effort RMSE of ``bag`` under the model and drive parameters, and the intervals
    the live watch would flag.

    Args:
        model_path: MJCF (e.g. ``calibrated.xml`` of ``shadow-twin identify``).
        parameters_yaml: ``parameters.yaml`` of ``shadow-twin identify``, or None for the nominal
            drive (:func:`nominal_drive`, ``effort_unit``).
        bag: ROS 1 / ROS 2 bag with ``sensor_msgs/JointState`` (effort).
        joints: the arm joints (default: the six UR joints).
        settings: the watch's thresholds (default :class:`EffortSettings`).
        printer: called with each output line (None: silent).
    Returns:
        {'bag', 'unit', 'samples', 'rmse': {joint: effort unit}, 'sigma': {joint},
        'intervals': [{'joint', 'start', 'end', 'worst', 'peak'}], 'dropped': {reason: count}}.
    Raises:
        ModelError, ConfigError, RecordingError (ShadowTwinError): unreadable model, parameters
        or bag; parameters without a drive gain for a joint (effort in A); a joint missing; a
        joint without effort; positions far outside the joints' ranges.
    """
    joints = list(joints or UR_JOINTS)
    model = TwinModel(model_path).model
    drive = DriveParameters.from_yaml(parameters_yaml) if parameters_yaml is not None else \
        nominal_drive(joints, effort_unit)
    drive.check_covers(joints, str(parameters_yaml or 'nominal drive gains'))
    rec = read_joint_states(bag, topic, strict=False)      # the watch drops stamps going back, as live
    missing = [j for j in joints if j not in rec.joint_names]
    if missing:
        raise RecordingError(f'{bag}: joint(s) {", ".join(missing)} not in {rec.topic}')
    effort = rec.frame['effort'][joints].to_numpy(dtype=float)
    empty = [j for k, j in enumerate(joints) if np.isnan(effort[:, k]).all()]
    if empty:       # a joint without effort would be judged on nothing: a false all-clear
        raise RecordingError(f'{bag}: {rec.topic} has no effort for {", ".join(empty)}')
    q = rec.frame['position'][joints].to_numpy(dtype=float)
    # positions far outside the joints' ranges (degrees, 1e300): the watch would flag the whole
    # recording against a motion the arm never made
    check_positions(model, joints, rec.times, q, str(bag))
    qd = rec.frame['velocity'][joints].to_numpy(dtype=float)
    watch = EffortWatch(InverseDynamics(model, joints), drive, settings, joints)
    run = watch.run(rec.times, q, qd if np.isfinite(qd).all() else None, effort)
    rmse = run.rmse()
    intervals = [asdict(i) for i in run.intervals()]
    out = {'bag': str(bag), 'unit': drive.effort_unit, 'samples': int(len(run.t)), 'rmse': rmse,
           'sigma': dict(zip(joints, run.sigma.tolist())), 'intervals': intervals, 'dropped': dict(run.dropped)}
    if printer is not None:
        for j in joints:
            printer(f'  {j:24s} effort RMSE {rmse[j]:.4f} {drive.effort_unit}   (sigma {out["sigma"][j]:.4f})')
        for i in intervals:
            printer(f'  flagged {i["joint"]} {i["start"]:.3f}-{i["end"]:.3f} s: {LEVEL_NAMES[i["worst"]]}, '
                    f'peak |residual| {i["peak"]:.3f} {drive.effort_unit}')
        if not intervals:
            printer('  nothing flagged')
    return out
