"""Looks inside an rqt window of ``shadow-twin rqt`` while it runs, for ``test_rqt.py``.

:func:`install` wraps ``rqt_gui.main.Main.create_application`` (the hook rqt_gui itself
overrides) so that, once rqt's QApplication exists, a QTimer looks at the window every
``PERIOD`` s from the GUI thread, reading what the plugins hold and changing nothing:

* every rqt_plot ``DataPlot`` (its dock title, and per curve the samples received:
  the length of the curve's data buffer, when it first held ``SAMPLES``, and the range
  of its values);
* every rqt_robot_monitor tree of all devices (the items' paths and messages) and
  the levels of the last ``/diagnostics_agg`` message its timeline holds;
* the window's and the dock widgets' geometry, and the screen's size (px).

When every curve holds ``SAMPLES`` samples and the Robot Monitor lists ``ITEMS``
leaf statuses, or ``TIMEOUT`` s after the window was first shown, it expands the
monitor's trees (as a user would, for the screenshot), writes ``<stem>.png``
(``QWidget.grab`` of the window) and ``<stem>.json`` into the folder
``SHADOW_TWIN_RQT_PROBE`` (``<stem>``: the perspective file's stem) and closes the
window as File > Quit does, unless ``HOLD`` names it (then it stays open for a signal).
Each window's rqt settings go to ``<folder>/<stem>.config`` (XDG_CONFIG_HOME).

Settings (environment): SHADOW_TWIN_RQT_PROBE (output folder), SHADOW_TWIN_RQT_PROBE_SAMPLES
(default 100), SHADOW_TWIN_RQT_PROBE_ITEMS (default 1), SHADOW_TWIN_RQT_PROBE_TIMEOUT (s,
default 20), SHADOW_TWIN_RQT_PROBE_HOLD (comma-separated stems of windows to keep open).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

PERIOD = 0.2


def _rect(r) -> dict:
    return {'x': r.x(), 'y': r.y(), 'width': r.width(), 'height': r.height()}


class Probe:
    """The timer and what it has seen (see the module doc)."""

    def __init__(self, app, out: Path, stem: str, samples: int, items: int, timeout: float, hold: bool) -> None:
        from python_qt_binding.QtCore import QTimer
        self.app, self.out, self.stem = app, out, stem
        self.samples, self.items, self.timeout, self.hold = samples, items, timeout, hold
        self.shown_at: float | None = None
        self.reached_at: dict[str, float] = {}
        self.done = False
        self.timer = QTimer()
        self.timer.timeout.connect(self.look)
        self.timer.start(int(PERIOD * 1000))

    def window(self):
        return next((w for w in self.app.topLevelWidgets() if w.objectName() == 'MainWindow' and w.isVisible()), None)

    def plots(self, window) -> list[dict]:
        from python_qt_binding.QtWidgets import QDockWidget
        from rqt_plot.data_plot import DataPlot
        out = []
        for plot in window.findChildren(DataPlot):
            dock = plot.parent()
            while dock is not None and not isinstance(dock, QDockWidget):
                dock = dock.parent()
            curves = {name: int(len(curve['x'])) for name, curve in plot._curves.items()}
            spans = {name: float(curve['y'].max() - curve['y'].min()) if len(curve['y']) else 0.0
                     for name, curve in plot._curves.items()}
            now = time.monotonic() - self.shown_at
            for name, n in curves.items():
                if n >= self.samples:
                    self.reached_at.setdefault(name, now)
            out.append({'title': dock.windowTitle() if dock is not None else '', 'samples': curves, 'spans': spans})
        return out

    def monitors(self, window) -> list[dict]:
        from rqt_robot_monitor.robot_monitor import RobotMonitorWidget

        def walk(item, path):
            rows = []
            for k in range(item.childCount()):
                child = item.child(k)
                name = f'{path}/{child.text(0)}'
                rows.append({'path': name, 'message': child.text(1), 'leaf': child.childCount() == 0})
                rows += walk(child, name)
            return rows
        out = []
        for monitor in window.findChildren(RobotMonitorWidget):
            timeline = monitor._timeline
            last = list(timeline)[-1] if timeline is not None and len(timeline) else {}
            out.append({'items': walk(monitor.tree_all_devices.invisibleRootItem(), ''),
                        'messages_received': len(timeline) if timeline is not None else 0,
                        'levels': {name: int(status.level[0]) for name, status in last.items()}})
        return out

    def look(self) -> None:
        window = self.window()
        if window is None or self.done:
            return
        if self.shown_at is None:
            self.shown_at = time.monotonic()
        plots, monitors = self.plots(window), self.monitors(window)
        leaves = [sum(row['leaf'] for row in m['items']) for m in monitors]
        complete = (all(p['samples'] and min(p['samples'].values()) >= self.samples for p in plots)
                    and all(n >= self.items for n in leaves))
        elapsed = time.monotonic() - self.shown_at
        if not complete and elapsed < self.timeout:
            return
        self.done = True
        from python_qt_binding.QtWidgets import QDockWidget
        from rqt_robot_monitor.robot_monitor import RobotMonitorWidget
        for monitor in window.findChildren(RobotMonitorWidget):
            for tree in (monitor.tree_all_devices, monitor.warn_flattree, monitor.err_flattree):
                tree.expandAll()
                tree.resizeColumnToContents(0)
        self.app.processEvents()
        window.grab().save(str(self.out / f'{self.stem}.png'))
        result = {
            'complete': complete, 'elapsed_s': elapsed, 'samples_wanted': self.samples, 'items_wanted': self.items,
            'reached_s': self.reached_at, 'plots': plots, 'monitors': monitors,
            'window': _rect(window.geometry()), 'frame': _rect(window.frameGeometry()),
            'screen': _rect(self.app.primaryScreen().geometry()),
            'docks': [{'name': d.objectName(), 'title': d.windowTitle(), **_rect(d.geometry()),
                       'visible': d.isVisible()} for d in window.findChildren(QDockWidget)],
        }
        tmp = self.out / f'.{self.stem}.json.tmp'
        tmp.write_text(json.dumps(result, indent=1))
        tmp.replace(self.out / f'{self.stem}.json')
        if not self.hold:
            window.close()


def install() -> None:
    """Wrap rqt_gui's Main so that the window of this process is probed (settings from the environment)."""
    import rqt_gui.main
    out = Path(os.environ['SHADOW_TWIN_RQT_PROBE'])
    stem = Path(sys.argv[sys.argv.index('--window') + 1]).stem
    os.environ['XDG_CONFIG_HOME'] = str(out / f'{stem}.config')
    settings = dict(samples=int(os.environ.get('SHADOW_TWIN_RQT_PROBE_SAMPLES', '100')),
                    items=int(os.environ.get('SHADOW_TWIN_RQT_PROBE_ITEMS', '1')),
                    timeout=float(os.environ.get('SHADOW_TWIN_RQT_PROBE_TIMEOUT', '20')),
                    hold=stem in os.environ.get('SHADOW_TWIN_RQT_PROBE_HOLD', '').split(','))
    create_application = rqt_gui.main.Main.create_application

    def probed(self, argv):
        app = create_application(self, argv)
        app.shadow_twin_probe = Probe(app, out, stem, **settings)
        return app
    rqt_gui.main.Main.create_application = probed
