"""The figures of a calibration's outputs (:mod:`shadow_twin.calibration.engine.report`): the convergence
of the objective, and real against simulated joint angles per recording. Drawn with matplotlib's
Agg backend from plain arrays and written atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from shadow_twin.plots.figures import write_figure


def plot_convergence(path: Path, objectives: Sequence[float], initial: float, title: str = '') -> None:
    """Objective per evaluation and best so far (log scale), with the default model's level.

    ``objectives``: (E,) objective of each evaluation in order, rad^2; ``initial``: the model
    as given, rad^2. Raises OSError if ``path`` cannot be written.
    """
    import matplotlib  # lazy: heavy (~0.5 s), only needed when figures are drawn
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    y = np.asarray(objectives, dtype=float)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.semilogy(np.arange(1, y.size + 1), y, '.', color='0.6', label='evaluation')
    ax.semilogy(np.arange(1, y.size + 1), np.minimum.accumulate(y), '-', color='C0', label='best so far')
    ax.axhline(initial, color='C3', ls='--', label='default model')
    ax.set_xlabel('evaluation')
    ax.set_ylabel('objective: mean MSE (rad$^2$)')
    ax.set_title(title or 'Calibration convergence')
    ax.legend()
    ax.grid(True, which='both', alpha=0.3)
    write_figure(path, fig)


#: Joints whose real and simulated angles all stay within this span (rad) are not drawn: flat
#: panels (6 of the 24 joints of the real hand closing) that cost drawing time.
STILL = 0.01


def plot_joints(path: Path, time_base: np.ndarray, joints: Sequence[str], real: np.ndarray,
                sims: Mapping[str, np.ndarray], title: str = '', keep: Sequence[str] = ()) -> None:
    """Real vs simulated angle per joint (one panel each) for several simulated runs; joints that
    moved less than :data:`STILL` in every run are left out (named in a note; all of them are
    drawn when none moved), but those in ``keep`` (e.g. the objective's joints) always drawn.

    ``time_base``: (N,) s from the trajectory start; ``real``: (N, J) rad;
    ``sims``: {label: (N, J) rad}. Raises OSError if ``path`` cannot be written.
    """
    import matplotlib  # lazy: heavy (~0.5 s), only needed when figures are drawn
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    spans = np.max([np.ptp(a, axis=0) for a in (real, *sims.values())], axis=0)
    moved = [k for k in range(len(joints)) if spans[k] > STILL or joints[k] in keep] or list(range(len(joints)))
    still = [joints[k] for k in range(len(joints)) if k not in moved]
    joints, real = [joints[k] for k in moved], real[:, moved]
    sims = {label: sim[:, moved] for label, sim in sims.items()}
    cols = 4 if len(joints) > 4 else len(joints)
    rows = int(np.ceil(len(joints) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.6 * rows), sharex=True, squeeze=False)
    for k, joint in enumerate(joints):
        ax = axes.flat[k]
        ax.plot(time_base, real[:, k], color='k', lw=1.6, label='real')
        for n, (label, sim) in enumerate(sims.items()):
            ax.plot(time_base, sim[:, k], lw=1.1, ls='--' if n == 0 else '-', color=f'C{n}', label=label)
        ax.set_title(joint, fontsize=9)
        ax.grid(True, alpha=0.3)
    for ax in axes.flat[len(joints):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel('time from trajectory start (s)')
    for ax in axes[:, 0]:
        ax.set_ylabel('angle (rad)')
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(title or 'Real vs simulated joint angles')
    # margins in inches (the figure grows with the rows): one drawing, not cropped afterwards (2/3 of the time)
    width, height = fig.get_size_inches()
    fig.subplots_adjust(left=0.75 / width, right=1 - 0.15 / width, top=1 - 0.8 / height,
                        bottom=(0.75 if still else 0.55) / height, hspace=0.35, wspace=0.3)
    if still:
        fig.text(0.5, 0.1 / height, f'not drawn (moved less than {STILL:g} rad): {", ".join(still)}', ha='center',
                 va='bottom', fontsize=7, wrap=True)
    write_figure(path, fig, tight=False)
