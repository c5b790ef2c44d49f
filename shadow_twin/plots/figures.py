"""A drawn matplotlib figure as PNG bytes: the one way every figure of the project is saved."""

from __future__ import annotations

import io


def figure_png(fig) -> bytes:
    """A matplotlib figure as PNG bytes (110 dpi, tight); closes the figure."""
    import matplotlib.pyplot as plt  # lazy: heavy (~0.5 s), only needed when figures are drawn
    buffer = io.BytesIO()
    fig.savefig(buffer, format='png', dpi=110, bbox_inches='tight')
    plt.close(fig)
    return buffer.getvalue()
