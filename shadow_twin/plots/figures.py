"""A drawn matplotlib figure as PNG bytes, or as a PNG file written atomically: the one way every figure of
the project is saved."""

from __future__ import annotations

import io
import os
from pathlib import Path

from shadow_twin.common.files import write_bytes_atomic


def figure_png(fig, tight: bool = True) -> bytes:
    """A matplotlib figure as PNG bytes (110 dpi, cropped to its content when ``tight``: a second drawing,
    a third of a large figure's time); closes the figure."""
    import matplotlib.pyplot as plt  # lazy: heavy (~0.5 s), only needed when figures are drawn
    buffer = io.BytesIO()
    fig.savefig(buffer, format='png', dpi=110, bbox_inches='tight' if tight else None)
    plt.close(fig)
    return buffer.getvalue()


def write_figure(path: str | os.PathLike, fig, tight: bool = True) -> Path:
    """Write ``fig`` as a PNG file at ``path`` (:func:`figure_png`; atomically, its folder made); closes the
    figure and returns the path. Raises OSError if the folder is not writable."""
    return write_bytes_atomic(path, figure_png(fig, tight))
