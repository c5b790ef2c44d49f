"""rqt perspectives for watching the twin against the robot (ROS-free: JSON files).

Two perspectives, one rqt window each, side by side on a 1920 x 1080 screen:

* **plots** (``config/shadow_twin_plots.perspective``, 1280 x 1000 px at the left):
  one ``rqt_plot`` per chosen joint with ``<real topic>/position[i_real]`` and
  ``<sim topic>/position[i_sim]`` (rad), two per row, and below them one ``rqt_plot``
  of ``<error topic>/position[k]`` for all chosen joints (sim - real, rad);
* **monitor** (``config/shadow_twin_monitor.perspective``, 640 x 1000 px at the right):
  ``rqt_robot_monitor`` on ``/diagnostics_agg`` (the twin monitor publishes it, see
  ``shadow_twin.ros.monitor.node``), its list of all devices tall enough for every joint.

And two for the cell (MiR250 + UR5 + hand, ``shadow_twin.model.cell.assembly``), in the same places:

* **cell plots** (``config/shadow_twin_cell_plots.perspective``): real vs sim of four arm
  joints (``DEFAULT_CELL_JOINTS``; the arm's real joint states on ``/joint_states``, the
  hand's on ``/rh/joint_states``, the sim's all on ``/sim/joint_states``), two per row; below
  them, side by side, their sim - real errors (``/twin/joint_error``, rad) and the base's
  pose error (``/twin/base_error/vector/x``, ``vector/y`` m in the odom frame and
  ``vector/z`` yaw rad, a ``geometry_msgs/Vector3Stamped``);
* **cell monitor** (``config/shadow_twin_cell_monitor.perspective``): the Robot Monitor
  with a taller list of all devices (30 joints, the base, the summary, the drift and the headers,
  and the contact statuses), which shows ``/shadow_twin/sim vs real/base`` beside the joints.

With contacts on (the bridges' ``contact_sensors``, the monitor's ``contacts.enabled``), the plots
perspectives have one more row: the pad normal force and the slip speed of chosen fingertips, real
vs sim (``shadow_twin.plots.contact_panes``): ``config/shadow_twin_contacts_plots.perspective`` and
``config/shadow_twin_cell_contacts_plots.perspective``. The monitor perspectives are the same: the
twin monitor's ``contact: <label>`` statuses appear among the joints'
(``/shadow_twin/sim vs real/contact: ff``).

Why two windows: rqt's plugins share one node, and rqt_robot_monitor's 1 s timer
calls ``rclpy.spin_once`` on it, which moves the node into rclpy's global executor;
from then on every plugin of that window receives about one message per second
(seen with the Jazzy sources). In a window of its own the Robot Monitor only
slows itself, and it needs only the 1 Hz ``/diagnostics_agg``.

File format: what rqt's *Perspectives > Export* writes (qt_gui ``PerspectiveManager``):
``{"keys": {}, "groups": {"mainwindow": ..., "pluginmanager": {"keys":
{"running-plugins": ...}, "groups": {"plugin__rqt_plot__Plot__1": ...}}}}``, every
value ``{"type": "repr", "repr": repr(value)}`` (rqt ``eval``s it on import) or, for
Qt byte arrays, ``{"type": "repr(QByteArray.hex)", "repr(QByteArray.hex)":
"QtCore.QByteArray(b'<hex>')", "pretty-print": ...}``. ``mainwindow`` holds the
window's ``geometry`` and dock ``state`` (``shadow_twin.plots.qt_layout``); per plugin
instance ``plugin__<package>__<class>__<serial>`` holds the plugin's own settings in
the sub-group ``plugin`` and its dock widget's title in ``dock_widget__<widget object name>``.

Indices: ``i_sim`` is the joint's index in the JointState the ``mujoco_bridge``
publishes, the model's named hinge and slide joints in model order
(``LiveSimulation.joint_names``); the mock hardware publishes the same order, and
so is ``i_real`` unless ``real_joints`` gives the robot's order. ``k`` is the index
in ``/twin/joint_error``: the joints of the real messages that the sim has too, real
topic by real topic in the monitor's order, each in its message's order (the twin
monitor's documented order; with several real topics, once every topic has been
compared). In the cell, ``i_real`` of an arm joint is its index in the UR5 model's
joints (as ``mock_ur`` publishes; ``arm_joints`` gives a UR driver's order), of a hand
joint in the built-in hand's.

Y ranges: a joint's limits plus 0.05 rad, clipped to [-pi, pi] (the UR5's joints turn
+-2 pi; a 12.6 rad range would flatten every motion).
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any, Sequence

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.paths import config_path
from shadow_twin.model.cell.assembly import CellConfig, write_cell_mjcf
from shadow_twin.model.mjcf import builtin_model_path
from shadow_twin.plots import qt_layout
from shadow_twin.plots.contact_panes import (DEFAULT_CONTACT_LABELS, REAL_CONTACTS_PREFIX, SIM_CONTACTS_PREFIX,
                                             PaneSpec, contact_panes)
from shadow_twin.plots.perspective_files import (DIAGNOSTICS_AGG_TOPIC, PLOT, ROBOT_MONITOR, needed_topics,
                                                 perspective_text, read_perspective, write_perspective)
from shadow_twin.simulation.live.simulation import LiveSimulation

__all__ = [
    # the perspectives (this module)
    'build_cell_plots_perspective', 'build_monitor_perspective', 'build_plots_perspective', 'cell_published_joints',
    'cell_real_streams', 'published_joints', 'shipped_perspectives',
    # re-exported from perspective_files
    'DIAGNOSTICS_AGG_TOPIC', 'PLOT', 'ROBOT_MONITOR', 'needed_topics', 'perspective_text', 'read_perspective',
    'write_perspective',
]

PROG = 'shadow-twin perspective'
#: Joints of the shipped plots perspective.
DEFAULT_JOINTS = ('rh_FFJ3', 'rh_FFJ2', 'rh_MFJ3', 'rh_THJ4')
REAL_TOPIC, SIM_TOPIC, ERROR_TOPIC = '/joint_states', '/sim/joint_states', '/twin/joint_error'
#: Object names of the plugins' widgets (rqt_plot's plot.ui, rqt_robot_monitor's widget), which
#: name their dock widgets (``<package>__<class>__<serial>__<name>``) and settings groups.
PLOT_WIDGET, ROBOT_MONITOR_WIDGET = 'DataPlotWidget', 'Robot Monitor'
#: The shipped files (in config/) and what they hold.
PLOTS_FILE, MONITOR_FILE = 'shadow_twin_plots.perspective', 'shadow_twin_monitor.perspective'
CELL_PLOTS_FILE, CELL_MONITOR_FILE = 'shadow_twin_cell_plots.perspective', 'shadow_twin_cell_monitor.perspective'
#: The plots with the contact row (the shipped ones plot ``contact_panes.DEFAULT_CONTACT_LABELS``).
CONTACTS_PLOTS_FILE = 'shadow_twin_contacts_plots.perspective'
CELL_CONTACTS_PLOTS_FILE = 'shadow_twin_cell_contacts_plots.perspective'
#: Joints of the shipped cell plots perspective (the UR5's, without a tf_prefix).
DEFAULT_CELL_JOINTS = ('shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint')
#: The cell's real joint state topics: the UR driver's and the hand driver's (config/twin_monitor_cell.yaml).
ARM_TOPIC, HAND_TOPIC = '/joint_states', '/rh/joint_states'
#: The twin monitor's base pose error (geometry_msgs/Vector3Stamped) and its plotted fields:
#: x, y (m, odom frame), z (yaw, rad).
BASE_ERROR_TOPIC = '/twin/base_error'
BASE_ERROR_FIELDS = ('vector/x', 'vector/y', 'vector/z')
BASE_Y_LIMITS = (-0.2, 0.2)
#: rqt_plot backend index: 0 PyQtGraph (lightest at 250 Hz; rqt_plot falls back to the
#: first available backend), 1 MatPlot, 2 QwtPlot.
PLOT_TYPE = 0
X_WINDOW_S = 10.0
ERROR_Y_LIMITS = (-0.1, 0.1)
MARGIN_RAD = 0.05
#: The screen the two windows share, px.
SCREEN_WIDTH, SCREEN_HEIGHT = 1920, 1080
#: Windows' client areas (x, y, width, height), px: 80 px of the screen's height are left
#: for a desktop's panel and the title bars.
PLOTS_WINDOW = (0, 0, 1280, 1000)
MONITOR_WINDOW = (1280, 0, 640, 1000)
#: Height of rqt's menu bar and status bar above and below the dock area, px (the dock
#: sizes in the state are a starting point; Qt fits them to the window).
BARS_HEIGHT = 44
#: Joint plots per row.
PLOTS_PER_ROW = 2
#: Heights of the Robot Monitor's panes (errors, warnings, all devices: 24 joints, the summary, the
#: drift, 6 contact statuses and 2 headers, rows of about 17 px), px, and its splitter's handle width
#: (its robotmonitor_mainwidget.ui).
MONITOR_PANES, MONITOR_HANDLE = (110, 110, 620), 9
#: The cell's: 30 joints, the base, the summary, the drift, 2 headers and 6 contact statuses (41 rows in
#: 700 px; the same total height).
CELL_MONITOR_PANES = (70, 70, 700)
#: Largest |y| of a joint plot's range, rad (before the margin).
MAX_Y_RAD = math.pi


def published_joints(model_path: str | os.PathLike | None = None) -> tuple[list[str], dict]:
    """(joint names in the order ``mujoco_bridge`` publishes them, {joint: (lower, upper) rad
    or None}) of the MJCF at ``model_path`` (None: the built-in hand). Raises ModelError."""
    sim = LiveSimulation(model_path)
    return list(sim.joint_names), sim.joint_limits()


def cell_published_joints(cell_config: str | os.PathLike | None = None) -> tuple[list[str], dict]:
    """:func:`published_joints` of the cell built from ``cell_config`` (None: config/cell.yaml),
    as ``shadow-twin up --cell`` builds it (in a temporary directory, removed after).
    Raises ConfigError, ModelError."""
    config = CellConfig.from_yaml(cell_config or config_path('cell.yaml'))
    with tempfile.TemporaryDirectory(prefix='shadow_twin_perspective_') as folder:
        path, _ = write_cell_mjcf(config, Path(folder) / 'cell.xml')
        return published_joints(path)


def cell_real_streams(arm_joints: Sequence[str] | None = None) -> list[tuple[str, list[str]]]:
    """[(topic, joint order)] of the cell's real joint states, in the monitor's order: the UR
    driver's on ``ARM_TOPIC`` (``arm_joints``; None: the UR5 model's order, as ``mock_ur``
    publishes), the hand driver's on ``HAND_TOPIC`` (the built-in hand's order, as the mock
    hand publishes). Raises ConfigError for an empty or repeated ``arm_joints``."""
    arm = (published_joints(builtin_model_path('ur5'))[0] if arm_joints is None
           else _names(arm_joints, 'arm joint order'))
    return [(ARM_TOPIC, arm), (HAND_TOPIC, published_joints()[0])]


def _value(value: Any) -> dict:
    return {'type': 'repr', 'repr': repr(value)}


def _bytes_value(data: bytes) -> dict:
    """A QByteArray setting as rqt's export writes it (the pretty-print shows every second
    byte as text, as qt_gui does, so that UTF-16 names are readable)."""
    pretty = ''.join(chr(b) if 32 <= b <= 126 else ' ' for b in data[1::2])
    return {'repr(QByteArray.hex)': f"QtCore.QByteArray(b'{data.hex()}')", 'type': 'repr(QByteArray.hex)',
            'pretty-print': pretty}


def _group(keys: dict | None = None, groups: dict | None = None) -> dict:
    return {'keys': {k: _value(v) for k, v in (keys or {}).items()}, 'groups': groups or {}}


def _dock(plugin: str, serial: int, widget: str) -> qt_layout.Dock:
    """The dock widget rqt makes for ``widget`` of plugin instance ``plugin`` #``serial``."""
    return qt_layout.Dock(f'{plugin.replace("/", "__")}__{serial}__{widget}')


def _main_window(window: tuple[int, int, int, int], layout: qt_layout.Layout) -> dict:
    """The ``mainwindow`` group: the window at ``window`` (x, y, width, height px) with its docks as ``layout``."""
    x, y, width, height = window
    keys = {'geometry': _bytes_value(qt_layout.window_geometry(x, y, width, height, SCREEN_WIDTH)),
            'state': _bytes_value(qt_layout.window_state(layout, width, height - BARS_HEIGHT))}
    return {'keys': keys, 'groups': {}}


def _perspective(window: tuple[int, int, int, int], layout: qt_layout.Layout, running: dict,
                 plugins: dict) -> dict:
    manager = _group({'running-plugins': running}, plugins)
    return {'keys': {}, 'groups': {'mainwindow': _main_window(window, layout), 'pluginmanager': manager}}


def _plot(title: str, topics: list[str], y_limits: Sequence[float]) -> dict:
    """Settings of one rqt_plot instance (the keys rqt_plot's save_settings writes)."""
    plugin = _group({
        'autoscroll': True,
        'plot_type': PLOT_TYPE,
        # rqt_py_common's pack(): one topic is stored as a string, several as a list
        'topics': topics[0] if len(topics) == 1 else list(topics),
        'x_limits': [0.0, X_WINDOW_S],
        'y_limits': [float(v) for v in y_limits],
    })
    dock = _group({'dock_widget_title': title, 'dockable': True})
    return _group(groups={f'dock_widget__{PLOT_WIDGET}': dock, 'plugin': plugin})


def _names(values: Sequence[str], what: str) -> list[str]:
    names = [str(v).strip() for v in values]
    if not names or any(not n for n in names):
        raise ConfigError(f'{what}: give one or more joint names, got {list(values)!r}')
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f'{what}: joint(s) {repeated} given more than once')
    return names


def _grid(docks: list[qt_layout.Dock], *bottom: list[qt_layout.Dock]) -> qt_layout.Layout:
    """Joint plots ``PLOTS_PER_ROW`` to a row, below them each list of ``bottom`` in a row of its own
    (the error plots side by side, then the contact panes), rows of equal height."""
    rows = [qt_layout.row(*docks[k:k + PLOTS_PER_ROW]) for k in range(0, len(docks), PLOTS_PER_ROW)]
    rows += [row[0] if len(row) == 1 else qt_layout.row(*row) for row in bottom if row]
    return qt_layout.column(*[(r, 1.0) for r in rows])


def _with_contacts(plugins: dict, contacts: Sequence[str] | None, real_prefix: str,
                   sim_prefix: str) -> list[int]:
    """Add the contact panes of ``contacts`` (labels; None: none) to ``plugins`` after its plots;
    returns their serials. Raises ConfigError (``contact_panes``)."""
    if contacts is None:
        return []
    panes: list[PaneSpec] = contact_panes(contacts, real_prefix, sim_prefix)
    first = len(plugins) + 1
    for serial, pane in enumerate(panes, start=first):
        plugins[f'plugin__rqt_plot__Plot__{serial}'] = _plot(pane.title, list(pane.topics), pane.y_limits)
    return list(range(first, first + len(panes)))


def _y_range(limits: tuple[float, float] | None) -> tuple[float, float]:
    """A joint plot's y range: its limits clipped to +-``MAX_Y_RAD``, plus ``MARGIN_RAD`` (rad)."""
    if limits is None:
        return -1.0, 1.0
    return max(limits[0], -MAX_Y_RAD) - MARGIN_RAD, min(limits[1], MAX_Y_RAD) + MARGIN_RAD


def _joint_plots(joints: Sequence[str], sim_order: list[str], limits: dict,
                 real_streams: Sequence[tuple[str, Sequence[str]]], sim_topic: str,
                 error_topic: str) -> dict:
    """{plugin group name: settings} of one real vs sim plot per joint and the error plot of them
    all (serials 1..len(joints)+1); see :func:`build_plots_perspective`."""
    joints = _names(joints, 'joints')
    unknown = [j for j in joints if j not in sim_order]
    if unknown:
        raise ConfigError(f'unknown joint(s) {unknown}; the model has {sim_order}')
    owner: dict[str, tuple[str, int]] = {}        # joint: (real topic, index), the first topic wins
    error_order: list[str] = []                   # the twin monitor's message: topic by topic
    for topic, order in real_streams:
        for k, joint in enumerate(order):
            if joint not in owner:
                owner[joint] = (topic, k)
                if joint in sim_order:
                    error_order.append(joint)
    missing = [j for j in joints if j not in owner]
    if missing:
        orders = [list(order) for _, order in real_streams]
        raise ConfigError(f'joint(s) {missing} are not in the real joint order '
                          f'{orders[0] if len(orders) == 1 else orders}')
    plugins = {}
    for serial, joint in enumerate(joints, start=1):
        topic, index = owner[joint]
        topics = [f'{topic}/position[{index}]', f'{sim_topic}/position[{sim_order.index(joint)}]']
        plugins[f'plugin__rqt_plot__Plot__{serial}'] = _plot(f'{joint}: real vs sim (rad)', topics,
                                                             _y_range(limits.get(joint)))
    topics = [f'{error_topic}/position[{error_order.index(j)}]' for j in joints]
    plugins[f'plugin__rqt_plot__Plot__{len(joints) + 1}'] = _plot(f'sim - real (rad): {", ".join(joints)}', topics,
                                                                  ERROR_Y_LIMITS)
    return plugins


def build_plots_perspective(joints: Sequence[str], model_path: str | os.PathLike | None = None,
                            real_joints: Sequence[str] | None = None, real_topic: str = REAL_TOPIC,
                            sim_topic: str = SIM_TOPIC, error_topic: str = ERROR_TOPIC,
                            contacts: Sequence[str] | None = None, real_contacts_prefix: str = REAL_CONTACTS_PREFIX,
                            sim_contacts_prefix: str = SIM_CONTACTS_PREFIX) -> dict:
    """The plots perspective (a JSON-ready dict, see the module doc) for ``joints``.

    Args:
        joints: ROS joint names to plot (one rqt_plot each, in this order, two to a row).
        model_path: the sim's MJCF (None: built-in hand); gives the sim's joint order
            and the plots' y ranges (joint limits + 0.05 rad).
        real_joints: the order of the robot's JointState names; None: the sim's
            (as the mock hardware publishes).
        real_topic, sim_topic, error_topic: topics plotted.
        contacts: contact labels (``ff``, ``th``, ...) whose pad normal force and slip speed, real
            vs sim, a last row shows (``shadow_twin.plots.contact_panes``); None: no contact row.
        real_contacts_prefix, sim_contacts_prefix: the contact topics' prefixes (the mock
            hardware's ``/rh/contacts``, the sim bridge's ``/mujoco_bridge/contacts``).
    Raises:
        ConfigError: no joints, a repeated joint, a joint the model does not have or
            that ``real_joints`` lacks (the message names them); bad contact labels or prefixes.
        ModelError: the model does not compile.
    """
    joints = _names(joints, 'joints')
    sim_order, limits = published_joints(model_path)
    real_order = sim_order if real_joints is None else _names(real_joints, 'real joint order')
    plugins = _joint_plots(joints, sim_order, limits, [(real_topic, real_order)], sim_topic, error_topic)
    error_serial = len(joints) + 1
    contact_serials = _with_contacts(plugins, contacts, real_contacts_prefix, sim_contacts_prefix)
    layout = _grid([_dock(PLOT, k, PLOT_WIDGET) for k in range(1, error_serial)],
                   [_dock(PLOT, error_serial, PLOT_WIDGET)], [_dock(PLOT, k, PLOT_WIDGET) for k in contact_serials])
    return _perspective(PLOTS_WINDOW, layout, {PLOT: list(range(1, len(plugins) + 1))}, plugins)


def build_cell_plots_perspective(joints: Sequence[str] = DEFAULT_CELL_JOINTS,
                                 model_path: str | os.PathLike | None = None,
                                 cell_config: str | os.PathLike | None = None,
                                 arm_joints: Sequence[str] | None = None, sim_topic: str = SIM_TOPIC,
                                 error_topic: str = ERROR_TOPIC, base_error_topic: str = BASE_ERROR_TOPIC,
                                 contacts: Sequence[str] | None = None,
                                 real_contacts_prefix: str = REAL_CONTACTS_PREFIX,
                                 sim_contacts_prefix: str = SIM_CONTACTS_PREFIX) -> dict:
    """The cell plots perspective (see the module doc) for ``joints`` (arm or hand joints).

    Args:
        joints: ROS joint names to plot, real vs sim (two to a row), and their errors.
        model_path: the sim's cell MJCF; None: built from ``cell_config`` (None:
            config/cell.yaml) as ``shadow-twin up --cell`` does.
        arm_joints: the UR driver's joint order on ``/joint_states`` (None: the UR5
            model's, as ``mock_ur``); the hand's on ``/rh/joint_states`` is the built-in hand's.
        sim_topic, error_topic, base_error_topic: topics plotted.
        contacts, real_contacts_prefix, sim_contacts_prefix: the contact row, as in
            :func:`build_plots_perspective` (the cell's hand has the same labels and topics).
    Raises:
        ConfigError: as :func:`build_plots_perspective`; a bad cell config.
        ModelError: the model does not compile.
    """
    joints = _names(joints, 'joints')
    sim_order, limits = published_joints(model_path) if model_path is not None else cell_published_joints(cell_config)
    plugins = _joint_plots(joints, sim_order, limits, cell_real_streams(arm_joints), sim_topic, error_topic)
    base_serial = len(joints) + 2
    topics = [f'{base_error_topic}/{field}' for field in BASE_ERROR_FIELDS]
    plugins[f'plugin__rqt_plot__Plot__{base_serial}'] = _plot('base: sim - real (x, y m; yaw rad)', topics,
                                                              BASE_Y_LIMITS)
    contact_serials = _with_contacts(plugins, contacts, real_contacts_prefix, sim_contacts_prefix)
    layout = _grid([_dock(PLOT, k, PLOT_WIDGET) for k in range(1, base_serial - 1)],
                   [_dock(PLOT, base_serial - 1, PLOT_WIDGET), _dock(PLOT, base_serial, PLOT_WIDGET)],
                   [_dock(PLOT, k, PLOT_WIDGET) for k in contact_serials])
    return _perspective(PLOTS_WINDOW, layout, {PLOT: list(range(1, len(plugins) + 1))}, plugins)


def build_monitor_perspective(panes: Sequence[int] = MONITOR_PANES) -> dict:
    """The monitor perspective: rqt_robot_monitor alone (see the module doc), its panes (errors,
    warnings, all devices) ``panes`` px high (``CELL_MONITOR_PANES`` for the cell)."""
    title = _group({'dock_widget_title': f'Robot Monitor: {DIAGNOSTICS_AGG_TOPIC}', 'dockable': True})
    splitter = qt_layout.splitter_state(panes, vertical=True, handle_width=MONITOR_HANDLE)
    plugin = {'keys': {'splitter': _bytes_value(splitter)}, 'groups': {}}
    plugins = {'plugin__rqt_robot_monitor__RobotMonitor__1': _group(groups={
        f'dock_widget__{ROBOT_MONITOR_WIDGET}': title, 'plugin': plugin})}
    return _perspective(MONITOR_WINDOW, _dock(ROBOT_MONITOR, 1, ROBOT_MONITOR_WIDGET), {ROBOT_MONITOR: [1]},
                        plugins)


def shipped_perspectives() -> dict[str, dict]:
    """{file name in config/: perspective} of the perspectives this package ships."""
    return {PLOTS_FILE: build_plots_perspective(DEFAULT_JOINTS), MONITOR_FILE: build_monitor_perspective(),
            CELL_PLOTS_FILE: build_cell_plots_perspective(),
            CELL_MONITOR_FILE: build_monitor_perspective(CELL_MONITOR_PANES),
            CONTACTS_PLOTS_FILE: build_plots_perspective(DEFAULT_JOINTS, contacts=DEFAULT_CONTACT_LABELS),
            CELL_CONTACTS_PLOTS_FILE: build_cell_plots_perspective(contacts=DEFAULT_CONTACT_LABELS)}
