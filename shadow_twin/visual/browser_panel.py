"""The browser view's side panel (``viser``'s GUI): the joints' sim-real errors as small time plots, the
diagnostics' states, the error colours' legend and the buttons that pause, reset and reload the sim.

* **Plots** (:class:`ErrorPlots`, uPlot, drawn in the page with no download): the newest ``window`` s of
  each joint's error, sampled at most every :data:`PLOT_RESOLUTION` s, x = seconds before the newest
  sample; joints grouped by name without their number (``rh_FFJ1`` .. ``rh_FFJ4``: one plot), at most
  ``per_plot`` per plot, joints alone in their group gathered; y from -L to L, L the smallest of 1, 2, 5 x
  10^k over the plotted values. Units as given (rad).
* **Diagnostics** (:class:`DiagnosticsTable`): the newest status of each name, its level coloured; a name
  silent for ``stale_after`` s reads STALE, as rqt's Robot Monitor shows it.
* **Buttons** (:class:`Controls`): each calls its callback (which asks the sim, without waiting) and is
  disabled until :meth:`Controls.answered`; the pause button says Resume once a pause was answered.
"""

from __future__ import annotations

import html
import math
import re
from collections import deque
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from shadow_twin.visual.colours import ErrorScale

#: s: the plots keep at most one sample per this interval.
PLOT_RESOLUTION = 0.05
#: Diagnostic levels: (label, colour).
LEVELS = {0: ('OK', '#2b8a3e'), 1: ('WARN', '#e67700'), 2: ('ERROR', '#c92a2a'), 3: ('STALE', '#868e96')}
#: Line colours of a plot's series, in order.
SERIES_COLOURS = ('#1c7ed6', '#e8590c', '#2f9e44', '#ae3ec9', '#f08c00', '#0c8599')


@dataclass(frozen=True)
class Status:
    """One diagnostic status: ``level`` 0 OK, 1 WARN, 2 ERROR, 3 STALE (diagnostic_msgs' values)."""

    name: str
    level: int
    message: str


def plot_groups(names: Sequence[str], per_plot: int = 5) -> list[list[str]]:
    """``names`` split into plots: by name without its trailing number (in first-seen order), a group
    longer than ``per_plot`` split, names alone in their group gathered up to ``per_plot``.
    Raises ValueError: ``per_plot`` < 1."""
    if per_plot < 1:
        raise ValueError(f'per_plot must be >= 1, got {per_plot}')
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(re.sub(r'\d+$', '', name), []).append(name)
    out, singles = [], []
    for members in groups.values():
        if len(members) == 1:
            singles.extend(members)
            continue
        out.extend(members[k:k + per_plot] for k in range(0, len(members), per_plot))
    out.extend(singles[k:k + per_plot] for k in range(0, len(singles), per_plot))
    return out


class ErrorHistory:
    """The newest ``window`` s of samples of named values (the joints' errors), at most one per
    :data:`PLOT_RESOLUTION` s; stamps going back more than a second (a replay restarted) start it again."""

    def __init__(self, window: float = 10.0) -> None:
        self.window = float(window)
        self.times: deque[float] = deque()
        self.values: dict[str, deque[float]] = {}
        self.names: list[str] = []

    def add(self, stamp: float, names: Sequence[str], values: Sequence[float]) -> bool:
        """Take one sample (``stamp`` s, ``values`` of ``names``); returns whether it was kept."""
        if self.times and stamp < self.times[-1] - 1.0:
            self.times.clear()
            self.values = {}
            self.names = []
        if self.times and stamp < self.times[-1] + PLOT_RESOLUTION - 1e-6:
            return False
        given = dict(zip(names, values))
        for name in names:
            if name not in self.values:
                self.names.append(name)
                self.values[name] = deque([math.nan] * len(self.times))
        self.times.append(float(stamp))
        for name, column in self.values.items():
            column.append(float(given.get(name, math.nan)))
        while self.times and self.times[0] < stamp - self.window:
            self.times.popleft()
            for column in self.values.values():
                column.popleft()
        return True

    def series(self, names: Sequence[str]) -> tuple[np.ndarray, ...]:
        """(t (n,) s before the newest sample, then each name's values (n,))."""
        t = np.array(self.times, dtype=float)
        t = t - t[-1] if len(t) else t
        return (t, *(np.array(self.values[n], dtype=float) for n in names))


def symmetric_limit(values: np.ndarray, smallest: float = 1e-3) -> float:
    """The y limit of a plot of ``values`` (NaN ignored): the smallest of 1, 2, 5 x 10^k at or above their
    largest magnitude, at least ``smallest`` (a plot of zeros has a range too)."""
    finite = np.abs(values[np.isfinite(values)])
    largest = max(float(finite.max()) if finite.size else 0.0, smallest)
    exponent = math.floor(math.log10(largest))
    for step in (1.0, 2.0, 5.0, 10.0):
        if step * 10.0 ** exponent >= largest * (1 - 1e-12):
            return step * 10.0 ** exponent
    return 10.0 ** (exponent + 1)


def plot_scales(limit: float) -> dict:
    """uPlot's scales of a plot: x in s (not a date), y from -``limit`` to ``limit``."""
    return {'x': {'time': False}, 'y': {'auto': False, 'range': (-limit, limit)}}


class ErrorPlots:
    """The time plots of an :class:`ErrorHistory` in a GUI folder (``gui``: ``viser.GuiApi``); ``unit`` the
    values' unit, ``per_plot`` as :func:`plot_groups`."""

    def __init__(self, gui, history: ErrorHistory, title: str = 'sim - real', unit: str = 'rad',
                 per_plot: int = 5) -> None:
        self.gui, self.history, self.unit, self.per_plot = gui, history, unit, per_plot
        self.folder = gui.add_folder(f'{title} ({unit})')
        with self.folder:
            self.empty = gui.add_markdown('_no joint errors yet_')
        self.plots: list[tuple[list[str], object]] = []
        self._limits: list[float] = []
        self._layout: list[str] = []

    def refresh(self) -> None:
        """Show the history's samples (plots made again when its joints changed)."""
        if not self.history.times:
            return
        if self.history.names != self._layout:
            self._relayout()
        for k, (names, handle) in enumerate(self.plots):
            data = self.history.series(names)
            limit = symmetric_limit(np.concatenate(data[1:]))
            if limit != self._limits[k]:
                handle.scales = plot_scales(limit)
                self._limits[k] = limit
            handle.data = data

    def _relayout(self) -> None:
        for _, handle in self.plots:
            handle.remove()
        self.plots = []
        self._limits = []
        self._layout = list(self.history.names)
        self.empty.visible = False
        with self.folder:
            for names in plot_groups(self._layout, self.per_plot):
                series = ({'label': 's'},) + tuple(
                    {'label': n, 'stroke': SERIES_COLOURS[k % len(SERIES_COLOURS)], 'width': 1.5}
                    for k, n in enumerate(names))
                data = self.history.series(names)
                limit = symmetric_limit(np.concatenate(data[1:]))
                handle = self.gui.add_uplot(data, series, height=150, scales=plot_scales(limit),
                                            axes=({'size': 28}, {'size': 58}), padding=(12, 12, 0, 0),
                                            legend={'show': True, 'live': False})
                self.plots.append((names, handle))
                self._limits.append(limit)


class DiagnosticsTable:
    """The diagnostics' newest states in a GUI folder; ``stale_after`` s without news reads STALE."""

    def __init__(self, gui, stale_after: float = 5.0, title: str = 'diagnostics') -> None:
        self.stale_after = float(stale_after)
        self.statuses: dict[str, tuple[Status, float]] = {}
        with gui.add_folder(title):
            self.view = gui.add_html(self.render(0.0))
        self._shown = self.view.content

    def update(self, statuses: Sequence[Status], now: float) -> None:
        """Take ``statuses`` received at ``now`` (s, any clock :meth:`refresh` shares)."""
        for status in statuses:
            self.statuses[status.name] = (status, float(now))

    def render(self, now: float) -> str:
        """The table as HTML."""
        if not self.statuses:
            return '<p style="color:#868e96;font-size:0.85em">no diagnostics yet</p>'
        rows = []
        for name in sorted(self.statuses):
            status, seen = self.statuses[name]
            level = 3 if now - seen > self.stale_after else status.level
            label, colour = LEVELS.get(level, (str(level), '#868e96'))
            rows.append(f'<tr><td style="padding:1px 4px"><span style="background:{colour};color:white;'
                        f'border-radius:3px;padding:0 4px;font-size:0.75em">{label}</span></td>'
                        f'<td style="padding:1px 4px">{html.escape(name)}<br><span style="color:#666">'
                        f'{html.escape(status.message)}</span></td></tr>')
        return '<table style="font-size:0.8em;border-collapse:collapse">' + ''.join(rows) + '</table>'

    def refresh(self, now: float) -> None:
        """Show the states as of ``now`` (sent only when the table changed)."""
        content = self.render(now)
        if content != self._shown:
            self.view.content = content
            self._shown = content


def legend_html(scale: ErrorScale, steps: int = 5) -> str:
    """The ghost's colour scale as HTML: a swatch per step, labelled in mm."""
    cells = []
    for error, rgba in scale.legend(steps):
        r, g, b = (int(round(255 * c)) for c in rgba[:3])
        cells.append(f'<span style="display:inline-block;text-align:center;margin-right:4px">'
                     f'<span style="display:inline-block;width:28px;height:12px;background:rgb({r},{g},{b})">'
                     f'</span><br>{1000 * error:g}</span>')
    return ('<div style="font-size:0.75em">ghost: link error (mm)<br>' + ''.join(cells)
            + f'<br>red from {1000 * scale.full_scale:g} mm; the sim is solid</div>')


class Controls:
    """The sim's buttons (``gui``: ``viser.GuiApi``). Each callback gets no argument but the pause's
    (True: pause, False: resume) and must return at once; :meth:`answered` ends the request.

    Args:
        on_pause, on_reset, on_reload: ask the sim.
        on_fit: called with the clicking client (``viser.ClientHandle``) to frame the robot in its view.
    """

    ACTIONS = ('pause', 'reset', 'reload')

    def __init__(self, gui, on_pause: Callable[[bool], None], on_reset: Callable[[], None],
                 on_reload: Callable[[], None], on_fit: Callable[[object], None]) -> None:
        self.paused = False
        self._requested_pause = False
        self._calls = {'pause': lambda: on_pause(self._toggle()), 'reset': on_reset, 'reload': on_reload}
        with gui.add_folder('sim'):
            self.buttons = {'pause': gui.add_button('Pause', hint='pause or resume the physics'),
                            'reset': gui.add_button('Reset', hint="the model's initial pose"),
                            'reload': gui.add_button('Reload', hint='compile the MJCF again')}
            fit = gui.add_button('Frame the robot', hint='move the camera to see the whole robot')
            self.status = gui.add_markdown('')
        for action, button in self.buttons.items():
            button.on_click(lambda _, action=action: self.press(action))
        fit.on_click(lambda event: on_fit(event.client))

    def _toggle(self) -> bool:
        self._requested_pause = not self.paused
        return self._requested_pause

    def press(self, action: str) -> None:
        """What a click on ``action``'s button does: disable it and ask (pause: the other state than the
        last answered one). Raises KeyError: not one of :data:`ACTIONS`."""
        call = self._calls[action]
        self.buttons[action].disabled = True
        self.status.content = f'{action}: asked ...'
        try:
            call()
        except Exception as exc:        # noqa: BLE001 - the button must come back, whatever failed
            self.answered(action, False, f'could not ask: {exc}')

    def answered(self, action: str, ok: bool, message: str) -> None:
        """The sim answered ``action`` (one of :data:`ACTIONS`): ``ok`` and its message; the button is
        enabled again (the pause button's label follows a successful pause or resume)."""
        if action == 'pause' and ok:
            self.paused = self._requested_pause
            self.buttons['pause'].label = 'Resume' if self.paused else 'Pause'
        self.buttons[action].disabled = False
        self.status.content = f'{action}: {"done" if ok else "**failed**"}: {html.escape(message or "")}'
