"""Tornado chart of a sensitivity screening (:mod:`shadow_twin.calibration.engine.sensitivity`).

One horizontal bar per parameter, its influence index (Pearson r of the parameter with
the objective, in [-1, 1]) signed: red to the right, raising the parameter raises the
error; blue to the left, it lowers it. Bars are sorted by |index|, the largest on top,
and labelled with their value. Drawn with matplotlib's Agg backend and written atomically.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from shadow_twin.plots.figures import write_figure


def tornado_figure(influence: Mapping[str, float], title: str = ''):
    """A matplotlib figure of ``influence`` ({parameter: index in [-1, 1]}); raises ValueError if empty."""
    if not influence:
        raise ValueError('no influence indices to plot')
    import matplotlib  # lazy: heavy (~0.5 s), only needed when figures are drawn
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    names = sorted(influence, key=lambda name: abs(influence[name]))  # barh draws bottom-up: largest on top
    values = np.array([influence[n] for n in names], dtype=float)
    fig, ax = plt.subplots(figsize=(7.0, 1.2 + 0.32 * len(names)))
    ax.barh(np.arange(len(names)), values, color=['C3' if v > 0 else 'C0' for v in values], height=0.7)
    for k, v in enumerate(values):
        ax.text(v + (0.02 if v >= 0 else -0.02), k, f'{v:+.2f}', va='center', ha='left' if v >= 0 else 'right',
                fontsize=8)
    ax.set_yticks(np.arange(len(names)), names, fontsize=8)
    ax.axvline(0.0, color='k', lw=0.8)
    ax.set_xlim(-1.15, 1.15)
    ax.set_xlabel('influence index: Pearson r with the objective')
    ax.set_title(title or 'Sensitivity of the objective')
    ax.grid(True, axis='x', alpha=0.3)
    return fig


def plot_tornado(path: str | Path, influence: Mapping[str, float], title: str = '') -> Path:
    """Write the tornado chart of ``influence`` as a PNG at ``path`` (atomically); returns the path."""
    return write_figure(path, tornado_figure(influence, title))
