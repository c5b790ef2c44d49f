"""Optional MuJoCo viewer for the bridge, in a separate process.

The viewer (``mujoco.viewer.launch_passive``) runs in a child process that
compiles the same MJCF and shows the joint positions it is sent. Opening a
window, creating the GL context and rendering (slow with software GL) hold
Python's GIL for hundreds of milliseconds at a time; in a thread of the bridge
that would stall stepping, in a child process it cannot. A feeder thread in
the bridge copies ``qpos`` (under the simulation lock: one array copy) and
sends it at ``rate`` Hz; after a model reload it tells the child to load the
new file. Without a display the viewer is disabled with one error line; if the
child fails or the window is closed, the bridge runs on.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
import warnings

from shadow_twin.model.mjcf import TwinModel
from shadow_twin.simulation.live.simulation import LiveSimulation


def display_problem() -> str | None:
    """Why no window can open here, or None."""
    if sys.platform.startswith('linux') and not (os.environ.get('DISPLAY') or os.environ.get('WAYLAND_DISPLAY')):
        return 'no DISPLAY or WAYLAND_DISPLAY in the environment'
    return None


def _viewer_process(conn, path: str) -> None:
    """Child process: show ``path``; messages are ('qpos', generation, time, qpos),
    ('load', generation, path) and ('stop',). Ends when the window closes."""
    # lazy: imported in the viewer's own process (spawned), where a display and GLFW are needed
    import glfw
    import mujoco.viewer

    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        if not glfw.init():   # the viewer itself would end the process with a C error
            conn.send(('error', 'GLFW cannot initialise (no usable display)'))
            return

    def launch(file):
        model = TwinModel(file).model
        data = mujoco.MjData(model)
        mujoco.mj_forward(model, data)
        return model, data, mujoco.viewer.launch_passive(model, data, show_left_ui=False, show_right_ui=False)

    generation = 0
    try:
        model, data, handle = launch(path)
    except Exception as exc:
        conn.send(('error', ' '.join(str(exc).split())))
        return
    conn.send(('opened', path))
    try:
        while handle.is_running():
            latest = None
            while conn.poll():
                msg = conn.recv()
                if msg[0] == 'stop':
                    return
                if msg[0] == 'load':
                    handle.close()
                    generation = msg[1]
                    model, data, handle = launch(msg[2])
                    conn.send(('opened', msg[2]))
                    latest = None
                elif msg[0] == 'qpos' and msg[1] == generation:
                    latest = msg
            if latest is not None and len(latest[3]) == model.nq:
                data.time = latest[2]
                data.qpos[:] = latest[3]
                mujoco.mj_forward(model, data)
                handle.sync()
            time.sleep(0.005)
        conn.send(('closed', ''))
    except (EOFError, BrokenPipeError, OSError):
        pass
    finally:
        try:
            handle.close()
        except Exception:
            pass


class PassiveViewer:
    """A viewer window (child process) following ``sim``.

    Args:
        sim: the live simulation.
        logger: an rclpy logger.
        rate: refresh rate, Hz.
    """

    def __init__(self, sim: LiveSimulation, logger, rate: float = 30.0) -> None:
        self.sim = sim
        self.log = logger
        self.period = 1.0 / rate
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._feed, name='mujoco_viewer_feeder', daemon=True)
        self._process = None
        self._conn = None

    def start(self) -> None:
        """Start the viewer process and the feeder thread (no-op without a display)."""
        problem = display_problem()
        if problem is not None:
            self.log.error(f'viewer disabled: cannot open the MuJoCo viewer ({problem}); the simulation runs on')
            return
        context = multiprocessing.get_context('spawn')
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_viewer_process, args=(child, str(self.sim.path)),
                                        name='mujoco_viewer', daemon=True)
        self._process.start()
        self._thread.start()

    def _handle_messages(self) -> bool:
        """Log what the child reports; False once it is gone."""
        while self._conn.poll():
            kind, text = self._conn.recv()
            if kind == 'opened':
                self.log.info(f'viewer window opened on {text}')
            elif kind == 'error':
                self.log.error(f'viewer disabled: {text}; the simulation runs on')
                return False
            elif kind == 'closed':
                self.log.info('viewer window closed; the simulation runs on')
                return False
        return self._process.is_alive()

    def _feed(self) -> None:
        model = self.sim.model
        generation = 0
        try:
            while not self._stop.is_set():
                if not self._handle_messages():
                    return
                with self.sim.lock:
                    current = self.sim.model
                    qpos = self.sim.data.qpos.copy()
                    sim_time = float(self.sim.data.time)
                    path = str(self.sim.path)
                if current is not model:       # reloaded: the child loads the new file
                    model, generation = current, generation + 1
                    self._conn.send(('load', generation, path))
                self._conn.send(('qpos', generation, sim_time, qpos))
                time.sleep(self.period)
        except (EOFError, BrokenPipeError, OSError):
            self.log.warning('viewer process ended; the simulation runs on')

    def stop(self) -> None:
        """Close the window and end the process and thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
        if self._process is not None and self._process.is_alive():
            try:
                self._conn.send(('stop',))
            except (BrokenPipeError, OSError):
                pass
            self._process.join(timeout=2.0)
            if self._process.is_alive():
                self._process.terminate()
