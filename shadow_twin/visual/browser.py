"""The browser view of the twin (issue 38): a web page served by ``viser`` that draws what RViz would, the
TF tree and the markers in it (the sim solid, the real robots a ghost coloured by its error), beside the
joints' sim-real errors as time plots, the diagnostics' states and the sim's pause, reset and reload
buttons. ROS-free: the ROS layer (``shadow_twin.ros.view``) turns messages into the plain values
:class:`BrowserView` takes, and the buttons' callbacks into service calls.

The page loads from this process alone (viser's client is one HTML file in its package: nothing is
downloaded), over HTTP and a websocket on one port. Anyone who can reach the port sees the view and can
press the buttons: bind it to 127.0.0.1 (the default) unless the lab network is trusted (docs/view.md).
viser's share link (a tunnel through its public server) is off.

Thread safety: every method may be called from any thread (one lock); the buttons' callbacks run in
viser's threads and must not block.

Units: m, s; quaternions (w, x, y, z).
"""

from __future__ import annotations

import contextlib
import io
import socket
import threading
from typing import Callable, Iterable, Sequence

import numpy as np
import viser

from shadow_twin.common.errors import ConfigError
from shadow_twin.visual.browser_frames import FrameTree, Transform
from shadow_twin.visual.browser_markers import MarkerClear, MarkerDelete, MarkerLayer, MarkerPart
from shadow_twin.visual.browser_panel import (Controls, DiagnosticsTable, ErrorHistory, ErrorPlots, Status,
                                              legend_html)
from shadow_twin.visual.colours import ErrorScale

#: Parts with an extent above this (m: floors, walls) are left out when the camera frames the robot.
FRAME_MAX_EXTENT = 1.5
#: The direction the camera looks at the robot from (world frame, z up).
VIEW_DIRECTION = np.array([1.0, -1.4, 0.8]) / np.linalg.norm([1.0, -1.4, 0.8])


def check_port_free(host: str, port: int) -> None:
    """Raise ConfigError when ``port`` on ``host`` cannot be bound (in use, or a host that is not this
    machine's); a port of 0 is always free."""
    if port == 0:
        return
    try:
        with socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as exc:
        raise ConfigError(f'cannot serve on {host}:{port}: {exc.strerror or exc} (another view? choose '
                          f'another port)') from None


class BrowserView:
    """The served page and its scene (module doc).

    Args:
        host: the address to serve on ('127.0.0.1': this machine only; '0.0.0.0': every interface).
        port: the TCP port (0: one the system picks; :attr:`port` says which).
        fixed_frame: the TF frame at the scene's origin.
        error_scale: the ghost's colour scale (its legend; the colours come with the markers).
        plot_window: s of joint errors plotted.
        on_pause, on_reset, on_reload: the buttons' callbacks (see :class:`Controls`).
        on_error: called with a line when a marker cannot be drawn (a mesh file that cannot be read).
        title: the page's title.
    Raises:
        ConfigError: the port cannot be served (in use).
    """

    def __init__(self, host: str = '127.0.0.1', port: int = 8080, fixed_frame: str = 'world',
                 error_scale: ErrorScale | None = None, plot_window: float = 10.0,
                 on_pause: Callable[[bool], None] = lambda paused: None, on_reset: Callable[[], None] = lambda: None,
                 on_reload: Callable[[], None] = lambda: None, on_error: Callable[[str], None] = lambda line: None,
                 title: str = 'shadow_twin') -> None:
        check_port_free(host, port)
        self.lock = threading.RLock()
        with contextlib.redirect_stdout(io.StringIO()):      # viser's banner: the caller says where it serves
            self.server = viser.ViserServer(host=host, port=port, label=title, verbose=False)
        if port and self.server.get_port() != port:     # viser moves on to the next free port: not ours
            self.server.stop()
            raise ConfigError(f'cannot serve on {host}:{port}: the port is in use')
        self.host = host
        # no share link: it would tunnel the view (and its buttons) through viser's public server
        self.server.gui.configure_theme(show_share_button=False, control_width='medium')
        self.server.request_share_url = lambda *args, **kwargs: None
        self.server.scene.set_up_direction('+z')
        # light without shadows nor an environment map: a PC without a GPU draws the page in software, and
        # the map's set-up took 15 s there before the first frame (a hemisphere light is cheap)
        self.server.scene.configure_default_lights(True, cast_shadow=False)
        self.server.scene.configure_environment_map(hdri=None)
        self.server.scene.add_light_hemisphere('/light', sky_color=(255, 255, 255), ground_color=(120, 120, 130),
                                               intensity=2.0)
        self.server.scene.add_grid('/grid', width=4.0, height=4.0, cell_size=0.1, section_size=1.0,
                                   plane='xy', position=(0.0, 0.0, -0.002))
        self.tree = FrameTree(self.server.scene, fixed_frame, on_remade=self._frames_remade)
        self.markers = MarkerLayer(self.server.scene, self.tree, on_error=on_error)
        gui = self.server.gui
        self.controls = Controls(gui, on_pause, on_reset, on_reload, self.fit_client)
        self.history = ErrorHistory(plot_window)
        self.plots = ErrorPlots(gui, self.history)
        self.diagnostics = DiagnosticsTable(gui)
        with gui.add_folder('view'):
            gui.add_html(legend_html(error_scale or ErrorScale()))
            axes = gui.add_checkbox('TF frames', False, hint="draw every frame's axes")
        axes.on_update(lambda _: self._locked(self.tree.show_axes, axes.value))
        self.framed = False

    @property
    def port(self) -> int:
        """The port served."""
        return self.server.get_port()

    @property
    def url(self) -> str:
        """The page's address (for 0.0.0.0: this machine's name)."""
        host = socket.gethostname() if self.host in ('0.0.0.0', '::') else self.host
        return f'http://{f"[{host}]" if ":" in host else host}:{self.port}/'

    def _locked(self, call: Callable, *args):
        with self.lock:
            return call(*args)

    def _frames_remade(self, frames: set[str]) -> None:
        self.markers.frames_remade(frames)

    def set_transforms(self, transforms: Iterable[Transform]) -> None:
        """Take transforms of the TF tree (newest last) and send the changes at once."""
        with self.lock, self.server.atomic():
            self.tree.update(transforms)
        self.server.flush()

    def apply_markers(self, operations: Iterable[MarkerPart | MarkerDelete | MarkerClear]) -> None:
        """Apply a marker array's operations in order (:meth:`MarkerLayer.apply`) and send the changes at once."""
        with self.lock, self.server.atomic():
            self.markers.apply(operations)
        self.server.flush()

    def add_joint_errors(self, stamp: float, names: Sequence[str], values: Sequence[float]) -> None:
        """One sample of the joints' errors (``stamp`` s, ``values`` in rad) for the plots."""
        with self.lock:
            self.history.add(stamp, names, values)

    def set_statuses(self, statuses: Sequence[Status], now: float) -> None:
        """Diagnostic statuses received at ``now`` (s, the clock :meth:`refresh` is given)."""
        with self.lock:
            self.diagnostics.update(statuses, now)

    def answered(self, action: str, ok: bool, message: str) -> None:
        """The sim's answer to a button (see :meth:`Controls.answered`)."""
        with self.lock:
            self.controls.answered(action, ok, message)

    def refresh(self, now: float) -> None:
        """Send the plots and the diagnostics as of ``now`` (s); frame the robot once it is drawn."""
        with self.lock:
            self.plots.refresh()
            self.diagnostics.refresh(now)
            if not self.framed and self.markers.handles:
                self.framed = self._frame(self.server.get_clients().values())

    def robot_sphere(self) -> tuple[np.ndarray, float] | None:
        """(centre (3,) m, radius m) of the drawn parts, or None when none is drawn. Left out: texts, parts
        larger than :data:`FRAME_MAX_EXTENT` (floors) and those in the fixed frame itself (a legend), none of
        them a robot's."""
        centres, sizes = [], []
        with self.lock:
            for part in self.markers.drawn():
                pose = self.tree.world_pose(part.frame)
                extent = float(np.max(part.scale)) if part.shape != 'mesh' else 0.05
                if pose is None or extent > FRAME_MAX_EXTENT or part.shape == 'text' or \
                        part.frame == self.tree.fixed_frame:
                    continue
                centres.append(pose[0] + pose[1].apply(part.position))
                sizes.append(extent / 2)
        if not centres:
            return None
        points = np.array(centres)
        low, high = points.min(axis=0), points.max(axis=0)
        centre = (low + high) / 2
        return centre, float(np.max(np.linalg.norm(points - centre, axis=1) + np.array(sizes)))

    def _camera_pose(self) -> tuple[np.ndarray, np.ndarray] | None:
        sphere = self.robot_sphere()
        if sphere is None:
            return None
        centre, radius = sphere
        distance = max(radius, 0.05) / np.sin(np.radians(75.0) / 2) * 1.15
        return centre + distance * VIEW_DIRECTION, centre

    def _frame(self, clients) -> bool:
        pose = self._camera_pose()
        if pose is None:
            return False
        position, look_at = pose
        self.server.initial_camera.position = tuple(position)
        self.server.initial_camera.look_at = tuple(look_at)
        for client in clients:
            self._aim(client, position, look_at)
        return True

    @staticmethod
    def _aim(client, position: np.ndarray, look_at: np.ndarray) -> None:
        with client.atomic():
            client.camera.position = tuple(position)
            client.camera.look_at = tuple(look_at)

    def fit_client(self, client) -> None:
        """Move ``client``'s camera (a ``viser.ClientHandle``; None: nothing) to frame the robot."""
        pose = self._camera_pose()
        if client is not None and pose is not None:
            self._aim(client, *pose)

    def stop(self) -> None:
        """Stop serving (connected pages show that they lost the view)."""
        self.server.stop()
