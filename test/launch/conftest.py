"""Fixtures of the ``ros2 launch`` tests: launches run as real processes that leave nothing behind (the
real upstream ``ros2 launch`` in .venv, this package laid out as an ament package there: the
``ros2_launch`` fixture of ``test/conftest.py``, which other tests of launch files use too).

Upstream launch is not on PyPI: ``../shared/tools/install_ros2_launch.sh`` installs it into .venv
from ``../shared/vendor/ros2_launch`` (about 1 s when already there; CI starts from a fresh clone).
Without ``../shared`` the tests skip, saying so.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from shadow_twin.common import lifeline

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / 'shared'
VENV = REPO / '.venv'
#: Environment variable that every process of one launch inherits, with a value unique to that launch.
MARKER = 'SHADOW_TWIN_LAUNCH_TEST'


def _default_sigint() -> None:
    """In the child before exec: SIGINT back to its default (a shell running pytest in the background
    ignores SIGINT in its children, and a process started with SIGINT ignored never sees it), and
    SIGINT when this test run ends, however it ends (the launch then stops its nodes)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    _on_parent_death()


_on_parent_death = lifeline.death_signal(signal.SIGINT) or (lambda: None)


class Launch:
    """``ros2 launch shadow_twin FILE ARGS...`` in a child process of its own session.

    Args:
        ros2: the ``ros2`` executable.
        file: launch file name (e.g. ``twin.launch.py``), found in the package's share directory.
        args: launch arguments (``name:=value``).
        folder: working directory; receives ``<file stem>.log`` (stdout and stderr) and the
            launch's own logs (ROS_HOME).
        env: environment of the launch (AMENT_PREFIX_PATH, ROS_DOMAIN_ID, ...); :data:`MARKER`
            is added with a value unique to this launch, and every process it starts inherits it.
    """

    def __init__(self, ros2: Path, file: str, args: list[str], folder: Path, env: dict[str, str]) -> None:
        import psutil
        self.marker = uuid.uuid4().hex
        self.log_path = folder / f'{file.split(".")[0]}.log'
        self._log = open(self.log_path, 'wb')
        env = {**env, MARKER: self.marker, 'ROS_HOME': str(folder / 'ros_home')}
        self.proc = subprocess.Popen([str(ros2), 'launch', 'shadow_twin', file, *args], cwd=folder, env=env,
                                     stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=_default_sigint)
        self._root = psutil.Process(self.proc.pid)
        self._seen: dict[int, object] = {}      # every descendant seen, by pid
        self._children: set[int] = set()        # the launch's own children (its processes)

    def alive(self) -> bool:
        """True while ``ros2 launch`` runs (also records the processes it started so far)."""
        self.watch()
        return self.proc.poll() is None

    def watch(self) -> None:
        """Record the processes the launch has started (they are checked by :meth:`leftovers`)."""
        import psutil
        try:
            self._children.update(child.pid for child in self._root.children())
            for child in self._root.children(recursive=True):
                self._seen.setdefault(child.pid, child)
        except psutil.Error:
            pass

    def started(self) -> int:
        """How many processes the launch has been seen to start (its children; not their own
        short-lived helpers, such as the glfw version probe of mujoco's import)."""
        return len(self._children)

    def output(self) -> str:
        """Everything the launch and its processes printed so far."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors='replace')

    def wait(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` s for the launch to end by itself; its exit status, or None."""
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.proc.poll()

    def interrupt(self, timeout: float = 30.0) -> int | None:
        """SIGINT to ``ros2 launch`` only (it must stop its processes itself), as Ctrl-C; then wait
        up to ``timeout`` s. Returns its exit status, or None if it is still running."""
        self.watch()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        return self.wait(timeout)

    def leftovers(self) -> list:
        """Processes of this launch still running: those it was seen to start, and any process
        carrying this launch's marker (the launch itself included)."""
        import psutil
        alive = {}
        for pid, proc in self._seen.items():
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    alive[pid] = proc
            except psutil.Error:
                pass
        for proc in psutil.process_iter():
            try:
                if proc.environ().get(MARKER) == self.marker and proc.status() != psutil.STATUS_ZOMBIE:
                    alive[proc.pid] = proc
            except psutil.Error:     # gone, or not ours to read
                pass
        return list(alive.values())

    def kill(self) -> list[str]:
        """SIGKILL whatever is left of this launch; returns their descriptions (empty if none)."""
        import psutil
        left = self.leftovers()
        described = []
        for proc in left:
            try:
                described.append(f'{proc.pid} {" ".join(proc.cmdline())[:200]}')
                proc.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(left, timeout=5.0)
        if self.proc.poll() is None:
            self.proc.wait(timeout=5.0)
        self._log.close()
        return described


@pytest.fixture
def launch(ros2_launch, ros, tmp_path):
    """Start ``ros2 launch shadow_twin FILE ARGS`` (``launch(file, *args)`` -> :class:`Launch`) on this
    run's private ROS domain (the ``ros`` fixture) with AMENT_PREFIX_PATH=.venv; whatever is left of
    every launch started is killed at the end."""
    started: list[Launch] = []
    env = dict(os.environ, AMENT_PREFIX_PATH=str(VENV), PYTHONUNBUFFERED='1', RCUTILS_COLORIZED_OUTPUT='0')
    assert env['ROS_DOMAIN_ID'] and env['ROS_AUTOMATIC_DISCOVERY_RANGE'] == 'LOCALHOST'    # ros_helpers.isolate_domain

    def start(file: str, *args: str) -> Launch:
        folder = tmp_path / f'launch{len(started)}'
        folder.mkdir()
        started.append(Launch(ros2_launch, file, list(args), folder, env))
        return started[-1]

    yield start
    for item in started:
        item.kill()
