"""shadow_twin.plots.aside: figures drawn in a process of their own, and nothing lost when it cannot draw them."""

import os
from pathlib import Path

import pytest

from shadow_twin.plots.aside import FigureProcess
from shadow_twin.plots.report_figures import plot_convergence

PARENT = os.getpid()


def write_pid(path: Path) -> None:
    """A job: writes the process id that drew it."""
    path.write_text(str(os.getpid()))


def fail_in_child(path: Path) -> None:
    """A job that fails anywhere but in the test's own process."""
    if os.getpid() != PARENT:
        raise RuntimeError('no drawing here')
    write_pid(path)


def test_the_jobs_are_drawn_by_another_process_and_finish_waits_for_them(tmp_path):
    with FigureProcess() as figures:
        figures.draw([(write_pid, (tmp_path / 'a',)), (plot_convergence, (tmp_path / 'c.png', [0.3, 0.2, 0.25], 0.4))])
        figures.draw([(write_pid, (tmp_path / 'b',))])
        figures.finish()
    assert int((tmp_path / 'a').read_text()) != os.getpid()
    assert (tmp_path / 'a').read_text() == (tmp_path / 'b').read_text()        # one process, both batches
    assert (tmp_path / 'c.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_a_job_failing_in_the_process_is_drawn_here(tmp_path, caplog):
    with FigureProcess() as figures:
        figures.draw([(fail_in_child, (tmp_path / 'a',))])
        figures.finish()
    assert int((tmp_path / 'a').read_text()) == os.getpid()
    assert 'drawing them here' in caplog.text


def test_a_job_that_cannot_be_sent_and_a_disabled_process_draw_here(tmp_path):
    with FigureProcess() as figures:
        figures.draw([(lambda path: write_pid(path), (tmp_path / 'a',))])     # a lambda does not pickle
        figures.finish()
    assert int((tmp_path / 'a').read_text()) == os.getpid()
    with FigureProcess(enabled=False) as figures:
        figures.draw([(write_pid, (tmp_path / 'b',))])
        assert not (tmp_path / 'b').exists()           # drawn at the end
        figures.finish()
    assert int((tmp_path / 'b').read_text()) == os.getpid()


def test_an_error_drawing_here_reaches_the_caller(tmp_path):
    with FigureProcess(enabled=False) as figures:
        figures.draw([(write_pid, (tmp_path / 'missing' / 'a',))])
        with pytest.raises(FileNotFoundError):
            figures.finish()
