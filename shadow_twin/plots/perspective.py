"""``shadow-twin perspective``: an rqt perspective for watching the twin against the robot.

Writes a perspective file in the JSON form rqt's *Perspectives > Export* writes
(qt_gui's ``PerspectiveManager``): ``{"keys": {}, "groups": {"pluginmanager":
{"keys": {"running-plugins": ...}, "groups": {"plugin__rqt_plot__Plot__1": ...}}}}``,
every value stored as ``{"type": "repr", "repr": repr(value)}`` (rqt ``eval``s it
on import). Per plugin instance ``plugin__<package>__<class>__<serial>`` holds the
plugin's own settings in the sub-group ``plugin`` and its dock widget's title in
``dock_widget__<widget object name>``. The perspective contains:

* one ``rqt_plot`` per chosen joint: ``<real topic>/position[i_real]`` and
  ``<sim topic>/position[i_sim]`` (rad);
* one ``rqt_plot`` of ``<error topic>/position[k]`` for all chosen joints (sim - real, rad);
* one ``rqt_robot_monitor`` for the twin monitor's ``/diagnostics`` (the plugin
  listens to ``/diagnostics_agg``: remap it, see below, or run a diagnostic aggregator).

Indices: ``i_sim`` is the joint's index in the JointState the ``mujoco_bridge``
publishes, the model's named hinge and slide joints in model order
(``LiveSimulation.joint_names``); the mock hardware publishes the same order, and
so is ``i_real`` unless ``--real-order`` gives the robot's order. ``k`` is the index
in ``/twin/joint_error``: the joints of the real message that the sim has too, in
the real message's order (the twin monitor's documented order).

Usage::

    shadow-twin perspective --joints rh_FFJ3,rh_MFJ3 --out my.perspective
                            [--model MJCF] [--real-order J1,J2,...]
    rqt --perspective-file my.perspective --ros-args -r /diagnostics_agg:=/diagnostics

Exit status 0, or 2 with one line ``shadow-twin perspective: error: ...`` for bad
input (unknown or repeated joints, a joint missing from ``--real-order``, a model
that does not compile).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.files import write_text_atomic

PROG = 'shadow-twin perspective'
#: Joints of the shipped ``config/shadow_twin.perspective``.
DEFAULT_JOINTS = ('rh_FFJ3', 'rh_FFJ2', 'rh_MFJ3', 'rh_THJ4')
REAL_TOPIC, SIM_TOPIC, ERROR_TOPIC = '/joint_states', '/sim/joint_states', '/twin/joint_error'
PLOT, ROBOT_MONITOR = 'rqt_plot/Plot', 'rqt_robot_monitor/RobotMonitor'
#: Object name of rqt_plot's widget (its plot.ui), which names the dock widget's settings group.
PLOT_WIDGET = 'DataPlotWidget'
#: rqt_plot backend index: 0 PyQtGraph (lightest at 250 Hz; rqt_plot falls back to the
#: first available backend), 1 MatPlot, 2 QwtPlot.
PLOT_TYPE = 0
X_WINDOW_S = 10.0
ERROR_Y_LIMITS = (-0.1, 0.1)
MARGIN_RAD = 0.05


def published_joints(model_path: str | os.PathLike | None = None) -> tuple[list[str], dict]:
    """(joint names in the order ``mujoco_bridge`` publishes them, {joint: (lower, upper) rad
    or None}) of the MJCF at ``model_path`` (None: the built-in hand). Raises ModelError."""
    from shadow_twin.simulation.live import LiveSimulation
    sim = LiveSimulation(model_path)
    return list(sim.joint_names), sim.joint_limits()


def _value(value: Any) -> dict:
    return {'type': 'repr', 'repr': repr(value)}


def _group(keys: dict | None = None, groups: dict | None = None) -> dict:
    return {'keys': {k: _value(v) for k, v in (keys or {}).items()}, 'groups': groups or {}}


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


def build_perspective(joints: Sequence[str], model_path: str | os.PathLike | None = None,
                      real_joints: Sequence[str] | None = None, real_topic: str = REAL_TOPIC,
                      sim_topic: str = SIM_TOPIC, error_topic: str = ERROR_TOPIC) -> dict:
    """The perspective (a JSON-ready dict, see the module doc) for ``joints``.

    Args:
        joints: ROS joint names to plot (one rqt_plot each, in this order).
        model_path: the sim's MJCF (None: built-in hand); gives the sim's joint order
            and the plots' y ranges (joint limits + 0.05 rad).
        real_joints: the order of the robot's JointState names; None: the sim's
            (as the mock hardware publishes).
        real_topic, sim_topic, error_topic: topics plotted.
    Raises:
        ConfigError: no joints, a repeated joint, a joint the model does not have or
            that ``real_joints`` lacks (the message names them).
        ModelError: the model does not compile.
    """
    joints = _names(joints, 'joints')
    sim_order, limits = published_joints(model_path)
    unknown = [j for j in joints if j not in sim_order]
    if unknown:
        raise ConfigError(f'unknown joint(s) {unknown}; the model has {sim_order}')
    real_order = sim_order if real_joints is None else _names(real_joints, 'real joint order')
    missing = [j for j in joints if j not in real_order]
    if missing:
        raise ConfigError(f'joint(s) {missing} are not in the real joint order {real_order}')
    error_order = [j for j in real_order if j in sim_order]     # the twin monitor's message
    groups = {}
    serial = 0
    for joint in joints:
        serial += 1
        lim = limits.get(joint)
        y = (lim[0] - MARGIN_RAD, lim[1] + MARGIN_RAD) if lim is not None else (-1.0, 1.0)
        topics = [f'{real_topic}/position[{real_order.index(joint)}]',
                  f'{sim_topic}/position[{sim_order.index(joint)}]']
        groups[f'plugin__rqt_plot__Plot__{serial}'] = _plot(f'{joint}: real vs sim (rad)', topics, y)
    serial += 1
    topics = [f'{error_topic}/position[{error_order.index(j)}]' for j in joints]
    groups[f'plugin__rqt_plot__Plot__{serial}'] = _plot(f'sim - real (rad): {", ".join(joints)}', topics,
                                                        ERROR_Y_LIMITS)
    groups['plugin__rqt_robot_monitor__RobotMonitor__1'] = _group(groups={'plugin': _group()})
    running = {PLOT: list(range(1, serial + 1)), ROBOT_MONITOR: [1]}
    manager = _group({'running-plugins': running}, groups)
    return {'keys': {}, 'groups': {'pluginmanager': manager}}


def perspective_text(perspective: dict) -> str:
    """The file text, formatted as rqt's export writes it (2-space JSON) plus a newline."""
    return json.dumps(perspective, indent=2, separators=(',', ': ')) + '\n'


def write_perspective(path: str | os.PathLike, joints: Sequence[str], **kwargs) -> Path:
    """Build the perspective of ``joints`` (``kwargs`` as :func:`build_perspective`) and
    write it to ``path`` atomically; returns the path. Raises as build_perspective, and
    OSError if the file cannot be written."""
    return write_text_atomic(path, perspective_text(build_perspective(joints, **kwargs)))
