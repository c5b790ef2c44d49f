"""The figures of ``shadow-twin demo`` (the twin's error before and after live calibration) and
``shadow-twin demo --cell`` (the bases' paths and the arm swing's effect on the base). Drawn with
matplotlib's Agg backend from plain data and written atomically."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from shadow_twin.common.files import write_bytes_atomic
from shadow_twin.plots.figures import figure_png


def plot_error_bars(path: Path, rows: list[dict]) -> None:
    """Bar chart of the RMS sim-real error (rad) before and after calibration per trajectory.

    ``rows``: one per trajectory, with ``trajectory``, ``role``, ``before`` and ``after``
    (each ``{'rmse': rad}``) and ``reduction_percent_mse``. Raises OSError if ``path``
    cannot be written.
    """
    import matplotlib  # lazy: heavy (~0.5 s), only needed when figures are drawn
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    labels = [f'{r["trajectory"]}\n({r["role"]})' for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(1.8 + 2.0 * len(rows), 3.8))
    ax.bar(x - 0.2, [r['before']['rmse'] for r in rows], 0.4, label='before calibration', color='C3')
    ax.bar(x + 0.2, [r['after']['rmse'] for r in rows], 0.4, label='after calibration', color='C0')
    for k, r in enumerate(rows):
        ax.annotate(f'-{r["reduction_percent_mse"]:.0f} % MSE', (x[k], max(r['before']['rmse'], r['after']['rmse'])),
                    ha='center', va='bottom', fontsize=8)
    ax.set_xticks(x, labels)
    ax.set_ylabel('RMS sim - real, J1-J3 (rad)')
    ax.set_title('Twin error before and after live calibration')
    ax.legend()
    ax.grid(True, axis='y', alpha=0.3)
    write_bytes_atomic(path, figure_png(fig))


def plot_base(path: Path, paths: dict[str, np.ndarray], swing: dict[str, np.ndarray]) -> None:
    """The bases' paths during the cell goal, and y / yaw during the swing.

    ``paths`` and ``swing``: {label: (N, 3) x (m), y (m), yaw (rad)} odometry poses (50 Hz).
    Raises OSError if ``path`` cannot be written.
    """
    import matplotlib  # lazy: heavy (~0.5 s), only needed when figures are drawn
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, (ax_path, ax_y, ax_yaw) = plt.subplots(1, 3, figsize=(13, 4))
    for label, poses in paths.items():
        ax_path.plot(poses[:, 0], poses[:, 1], label=label)
    ax_path.set(xlabel='x (m)', ylabel='y (m)', title='base path, quarter arc r = 1 m', aspect='equal')
    for label, poses in swing.items():
        ax_y.plot((poses[:, 1] - poses[0, 1]) * 1e3, label=label)
        ax_yaw.plot(np.degrees(poses[:, 2] - poses[0, 2]), label=label)
    ax_y.set(xlabel='odometry sample (50 Hz)', ylabel='y - y0 (mm)', title='arm swing: base y')
    ax_yaw.set(xlabel='odometry sample (50 Hz)', ylabel='yaw - yaw0 (deg)', title='arm swing: base yaw')
    for ax in (ax_path, ax_y, ax_yaw):
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    write_bytes_atomic(path, figure_png(fig))
