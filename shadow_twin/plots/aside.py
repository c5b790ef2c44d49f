"""Figures drawn beside the rest of a command's work: a forked process (matplotlib's Agg is Python-bound: a
thread would wait for the interpreter) that imports matplotlib as soon as it starts and then draws the jobs
it is sent, while this process goes on.

A calibration's figures were most of its output time on a 2-core PC (the 24-panel joints figure about 1 s,
matplotlib's import 0.3 s). Started with the command, the process has matplotlib loaded before the search
ends, and draws while this one writes the other outputs. Nothing is lost when the process cannot fork or it
fails: :meth:`FigureProcess.finish` draws in this process whatever was not drawn.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
from typing import Any, Callable, Sequence

log = logging.getLogger(__name__)

#: One figure: a module-level function that draws and writes it (atomically, as
#: :func:`shadow_twin.plots.figures.write_figure` does), and its positional arguments.
Job = tuple[Callable[..., Any], tuple]


def _draw(jobs: Sequence[Job]) -> None:
    for function, args in jobs:
        function(*args)


def _serve(connection) -> None:
    """The drawing process: matplotlib loaded first, then each batch of jobs received until None (or until the
    command's end of the pipe closes). Ctrl-C is the command's to handle: it ends this process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # lazy: matplotlib is loaded in this process, while the command's own goes on
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot  # noqa: F401  (loaded while the command works)
    while True:
        try:
            jobs = connection.recv()
        except EOFError:            # the command is gone
            return
        if jobs is None:
            return
        _draw(jobs)


class FigureProcess:
    """A process that draws figures for this one (module doc); a context manager that ends it.

    Args:
        enabled: False draws every job in :meth:`finish`, in this process.
    """

    def __init__(self, enabled: bool = True) -> None:
        self._jobs: list[Job] = []
        self._process = self._connection = None
        if enabled and 'fork' in multiprocessing.get_all_start_methods():
            try:
                context = multiprocessing.get_context('fork')
                self._connection, child = context.Pipe()
                self._process = context.Process(target=_serve, args=(child,), name='figures', daemon=True)
                self._process.start()
                child.close()
            except OSError as exc:      # no process to spare: drawn here at the end
                log.debug('figures drawn in this process: %s', exc)
                self._process = None

    def draw(self, jobs: Sequence[Job]) -> None:
        """Have ``jobs`` drawn (by the process; here in :meth:`finish` without one)."""
        self._jobs.extend(jobs)
        if self._process is not None:
            try:
                self._connection.send(list(jobs))
            except Exception as exc:    # gone, or a job that cannot be sent (pickled): drawn here at the end
                log.warning('the figures\' process cannot draw them (%s): drawing them here', exc)
                self._stop()

    def finish(self) -> None:
        """Wait until every job is drawn; draw here what the process did not (it failed, or there was none).
        Raises what a figure's function raises when drawn here (OSError for an unwritable file)."""
        if self._process is not None:
            try:
                self._connection.send(None)
            except (OSError, ValueError):
                pass
            self._process.join()
            code, self._process = self._process.exitcode, None
            if code == 0:
                self._jobs = []
                return
            log.warning('the figures\' process ended with exit code %s: drawing them here', code)
        jobs, self._jobs = self._jobs, []
        _draw(jobs)

    def _stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.join()
            self._process = None

    def __enter__(self) -> 'FigureProcess':
        return self

    def __exit__(self, *exc) -> None:
        self._stop()
