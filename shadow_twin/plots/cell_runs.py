"""One figure per run of the cell's calibration protocol (:mod:`shadow_twin.calibration.jobs.cell_job`).

Left: the base's path in the plane (x, y relative to its start pose, m), real against
the simulation with the model as given and as calibrated. Right: the arm joints over
time (rad), real against both simulations. A run with the base still (arm
identification) has only the arm panel; a run without arm data only the path.
Drawn with matplotlib's Agg backend and written atomically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from shadow_twin.plots.figures import write_figure

#: Labels of the two simulated models, in the order of the ``*_sim`` arrays.
MODELS = ('sim, model as given', 'sim, calibrated')


@dataclass
class RunPlot:
    """What one run's figure shows.

    Attributes:
        name, role, description: the run's (title).
        times: (N,) path sample times from the run's start, s (empty: no path).
        real_path: (N, 3) recorded x, y (m), yaw (rad) relative to the start pose.
        sim_paths: (2, N, 3) simulated paths, model as given and calibrated.
        arm_times: (T,) arm sample times, s (empty: no arm panel).
        arm_joints: the J arm joints.
        arm_real: (T, J) recorded arm positions, rad.
        arm_sim: (2, T, J) simulated arm positions, model as given and calibrated.
    """

    name: str
    role: str
    description: str = ''
    times: np.ndarray = field(default_factory=lambda: np.zeros(0))
    real_path: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    sim_paths: np.ndarray = field(default_factory=lambda: np.zeros((2, 0, 3)))
    arm_times: np.ndarray = field(default_factory=lambda: np.zeros(0))
    arm_joints: list = field(default_factory=list)
    arm_real: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    arm_sim: np.ndarray = field(default_factory=lambda: np.zeros((2, 0, 0)))


def _moving_joints(plot: RunPlot, tolerance: float = 1e-3) -> list[int]:
    """Columns of the arm joints that move in the recording (all when none does)."""
    if not plot.arm_joints:
        return []
    span = np.ptp(plot.arm_real, axis=0) if len(plot.arm_real) else np.zeros(len(plot.arm_joints))
    moving = [k for k, s in enumerate(span) if s > tolerance]
    return moving or list(range(len(plot.arm_joints)))


def run_figure(plot: RunPlot):
    """The matplotlib figure of one run (see module doc). Raises ValueError when there is nothing to draw."""
    has_path, has_arm = len(plot.times) > 0, len(plot.arm_times) > 0 and bool(plot.arm_joints)
    if not (has_path or has_arm):
        raise ValueError(f'run {plot.name}: neither a path nor arm joints to plot')
    import matplotlib  # lazy: heavy, only needed when figures are drawn
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    panels = int(has_path) + int(has_arm)
    fig, axes = plt.subplots(1, panels, figsize=(6.0 * panels, 5.0), squeeze=False)
    axes = list(axes[0])
    styles = (dict(color='C3', ls='--'), dict(color='C2', ls='-'))
    if has_path:
        ax = axes.pop(0)
        ax.plot(plot.real_path[:, 0], plot.real_path[:, 1], color='k', lw=2.2, label='real')
        for label, path, style in zip(MODELS, plot.sim_paths, styles):
            ax.plot(path[:, 0], path[:, 1], lw=1.3, label=label, **style)
        ax.plot([0.0], [0.0], 'ko', ms=4)
        ax.set_xlabel('x from the start pose, m')
        ax.set_ylabel('y from the start pose, m')
        ax.set_aspect('equal', adjustable='datalim')
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title('base path')
    if has_arm:
        ax = axes.pop(0)
        for n, k in enumerate(_moving_joints(plot)):
            colour = f'C{n % 10}'
            ax.plot(plot.arm_times, plot.arm_real[:, k], color=colour, lw=2.2, alpha=0.45,
                    label=f'{plot.arm_joints[k]} real')
            for label, sim, ls in zip(MODELS, plot.arm_sim, ('--', '-')):
                ax.plot(plot.arm_times, sim[:, k], color=colour, lw=1.0, ls=ls,
                        label=f'{plot.arm_joints[k]} {label}')
        ax.set_xlabel('time from the run start, s')
        ax.set_ylabel('joint position, rad')
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title('arm joints (moving ones)')
    fig.suptitle(f'{plot.name} ({plot.role}){": " + plot.description if plot.description else ""}')
    fig.tight_layout()
    return fig


def plot_run(path: str | Path, plot: RunPlot) -> Path:
    """Write the figure of ``plot`` as a PNG at ``path`` (atomically; parents created); returns the path."""
    fig = run_figure(plot)
    path = Path(path)
    return write_figure(path, fig)
