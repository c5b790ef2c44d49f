"""The figures of ``shadow-twin demo`` (the twin's error before and after live calibration) and
``shadow-twin demo --cell`` (the bases' paths, the arm swing's effect on the base, the pick-up). Drawn with
matplotlib's Agg backend from plain data and written atomically."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from shadow_twin.plots.figures import write_figure


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
    write_figure(path, fig)


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
    write_figure(path, fig)


def plot_pick(path: Path, heights: dict[str, np.ndarray], starts: dict[str, float],
              contacts: dict[str, dict[str, np.ndarray]], hold: tuple[float, float], picked_height: float,
              name: str = 'object') -> None:
    """The pick-up: the object's height above its start on each side over time, and which of the
    hand's labels (fingertips, palm) touch something on each side.

    ``heights``: {side: (N, 2) time s, height m}; ``starts``: {side: start height m} (a side without
    one is drawn as 'not measured'); ``contacts``: {side: {label: (M, 2) time s, 1 in contact / 0}};
    ``hold``: (s, s) the window the pick-up is judged in; ``picked_height``: its threshold, m.
    Raises OSError if ``path`` cannot be written.
    """
    import matplotlib  # lazy: heavy (~0.5 s), only needed when figures are drawn
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, (ax_h, ax_c) = plt.subplots(1, 2, figsize=(13, 4))
    colours = {}
    for side, samples in heights.items():
        if side in starts and len(samples):
            colours[side] = ax_h.plot(samples[:, 0], (samples[:, 1] - starts[side]) * 1e3, label=side)[0].get_color()
        else:
            colours[side] = ax_h.plot([], [], label=f'{side}: not measured')[0].get_color()
    ax_h.axhline(picked_height * 1e3, color='k', linestyle='--', linewidth=0.8, label='picked-up threshold')
    ax_h.axvspan(*hold, color='C2', alpha=0.15, label='hold (judged)')
    ax_h.set(xlabel="time from the goal's start (s)", ylabel='height - start (mm)', title=f'{name}: height, sim vs mock')
    ax_h.legend(fontsize=8)
    labels = list(next(iter(contacts.values()), {}))           # every side has the same labels
    for j, (side, series) in enumerate(contacts.items()):
        offset = 0.15 * (1 - 2 * j) if len(contacts) > 1 else 0.0
        for k, label in enumerate(labels):
            c = series.get(label, np.zeros((0, 2)))
            on = c[:, 1] > 0.5
            ax_c.scatter(c[on, 0], np.full(on.sum(), k + offset), marker='|', s=40, color=colours.get(side),
                         label=side if k == 0 else None)
    ax_c.axvspan(*hold, color='C2', alpha=0.15)
    ax_c.set_yticks(range(len(labels)), labels)
    ax_c.set(xlabel="time from the goal's start (s)", title='in contact (fingertips, palm), sim vs mock',
             ylim=(-0.5, len(labels) - 0.5), xlim=ax_h.get_xlim())
    ax_c.legend(fontsize=8, loc='upper left')
    for ax in (ax_h, ax_c):
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    write_figure(path, fig)
