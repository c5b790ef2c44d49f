"""A cell calibration's outcome: each group's fit, the runs' figures before and after, and the
install decision (ROS-free; :mod:`~shadow_twin.calibration.jobs.cell_job` produces them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from shadow_twin.calibration.scoring.metrics import reduction_percent

#: Relative rise of a validation run's error still counted as "not worse": 1 %. A fit of one group
#: moves the other group's figures by round-off and by the parameters it does not feel (measured:
#: the arm RMSE of CY and IY rose by 1e-7 relative after a base fit), far below any effect a lab
#: would act on.
VALIDATION_TOLERANCE = 0.01
#: A validation run's arm RMSE counts as worse only when it also rose by more than this, rad: 0.1 mrad,
#: the UR5's repeatability (+-0.1 mm at about 1 m reach). The arm RMSE of the base runs is a few
#: tenths of a mrad (the arm servo tracks within that whatever the fit); a live run was refused for a
#: rise from 0.298 to 0.337 mrad.
ARM_RMSE_RESOLUTION = 1e-4

@dataclass
class GroupFit:
    """One group's screening and fit.

    Attributes:
        influence: {parameter: influence index} of the screening (empty without one).
        ranking: the parameters, most influential first.
        fitted: the parameters fitted (and changed).
        values: {target: value} of the best point (empty when the fit found nothing better).
        named: {parameter: value} of the best point.
        initial, best: the fit objective with the model as given and at the best point.
        evaluations: rollouts of the fit.
        kept: fitted parameters put back to the model's value (:data:`KEEP_MODEL_TOLERANCE`).
    """

    influence: dict
    ranking: list
    fitted: list
    values: dict
    named: dict
    initial: float
    best: float
    evaluations: int
    kept: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {'influence': self.influence, 'ranking': self.ranking, 'fitted': self.fitted,
                'kept_at_model': self.kept, 'values': self.named,
                'objective': {'initial': self.initial, 'best': self.best,
                              'reduction_percent': reduction_percent(self.initial, self.best)},
                'evaluations': self.evaluations}


@dataclass
class CellJobResult:
    """Outcome of a cell calibration.

    Attributes:
        accept: whether the calibrated model may be installed; reason: why (one line).
        runs: {run: {'role', 'before': metrics, 'after': metrics}} (:func:`run_metrics`).
        validation: {validation run: {'before', 'after'}}: its objective (m^2), model as given / calibrated.
        groups: {'arm' | 'base': GroupFit}.
        calibrated_model, parameters_file: outputs in the run directory.
    """

    accept: bool
    reason: str
    runs: dict
    validation: dict
    groups: dict
    calibrated_model: Path
    parameters_file: Path

    @property
    def sensitivity(self) -> dict[str, list[str]]:
        """{group: parameters, most influential first}."""
        return {name: list(fit.ranking) for name, fit in self.groups.items()}

    def to_dict(self) -> dict:
        return {'accept': self.accept, 'reason': self.reason,
                'validation': {run: {**v, 'reduction_percent': reduction_percent(v['before'], v['after'])}
                               for run, v in self.validation.items()},
                'sensitivity': self.sensitivity, 'runs': self.runs,
                'groups': {name: fit.to_dict() for name, fit in self.groups.items()},
                'calibrated_model': str(self.calibrated_model), 'parameters': str(self.parameters_file)}


def run_metrics(path_rmse: Mapping[str, float] | None, arm_mse: Mapping[str, float] | None,
                objective: float) -> dict:
    """The figures a report gives for one run and one model: ``x_rmse``, ``y_rmse`` (m),
    ``yaw_rmse`` (rad) of the path (None for a run with the base still), ``arm_rmse`` (rad,
    over the arm joints and samples; None without the arm), ``arm_joint_rmse`` {joint: rad}
    and ``objective`` (the run's: path m^2, or arm rad^2)."""
    out = {'objective': float(objective)}
    for key, name in (('x_rmse', 'base_x'), ('y_rmse', 'base_y'), ('yaw_rmse', 'base_yaw')):
        out[key] = None if path_rmse is None else float(path_rmse[name])
    out['arm_rmse'] = None if not arm_mse else float(np.sqrt(np.mean(list(arm_mse.values()))))
    out['arm_joint_rmse'] = {j: float(np.sqrt(v)) for j, v in (arm_mse or {}).items()}
    return out


def cell_install_decision(groups: Mapping[str, GroupFit], runs: Mapping[str, dict],
                          validation: Sequence[str]) -> tuple[bool, str]:
    """Whether to install, and why (one line).

    Refused when no group's fit lowered its objective, or when a validation run got worse
    (beyond :data:`VALIDATION_TOLERANCE`, relative) on its objective or on its arm RMSE (that
    also by more than :data:`ARM_RMSE_RESOLUTION`).
    """
    improved = [name for name, fit in groups.items() if fit.best < fit.initial]
    if not improved:
        return False, 'no better parameters found in either group: calibration not installed'
    worse = []
    for name in validation:
        before, after = runs[name]['before'], runs[name]['after']
        for key, what, resolution in (('objective', 'path error', 0.0), ('arm_rmse', 'arm RMSE', ARM_RMSE_RESOLUTION)):
            if before[key] is not None and after[key] > max(before[key] * (1 + VALIDATION_TOLERANCE),
                                                            before[key] + resolution):
                worse.append(f'{name} {what} {before[key]:.4g} -> {after[key]:.4g}')
    if worse:
        return False, f'validation run(s) got worse ({"; ".join(worse)}): calibration not installed'
    lines = [f'{n} {runs[n]["before"]["objective"]:.4g} -> {runs[n]["after"]["objective"]:.4g} '
             f'({reduction_percent(runs[n]["before"]["objective"], runs[n]["after"]["objective"]):.1f} % lower)'
             for n in validation]
    return True, f'fitted {", ".join(improved)}; validation {"; ".join(lines)}'


def result_lines(result: CellJobResult) -> list[str]:
    """Printable table of every run before -> after: path RMSE x, y (mm), yaw (mrad), arm RMSE (mrad)."""
    def fmt(v, scale):
        return '     -' if v is None else f'{v * scale:6.2f}'
    lines = [f'{"run":5s} {"role":19s} {"x mm":>15s} {"y mm":>15s} {"yaw mrad":>15s} {"arm mrad":>15s}']
    for name, r in result.runs.items():
        cells = [f'{fmt(r["before"][k], 1e3)} ->{fmt(r["after"][k], 1e3)}'
                 for k in ('x_rmse', 'y_rmse', 'yaw_rmse', 'arm_rmse')]
        lines.append(f'{name:5s} {r["role"]:19s} ' + ' '.join(cells))
    return lines
