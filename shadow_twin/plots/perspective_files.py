"""rqt perspective files (ROS-free): writing them as rqt's *Perspectives > Export* does, reading
them back, and what a perspective's plugins subscribe to (``needed_topics``, for ``shadow-twin rqt``).
The perspectives themselves and the file format: ``shadow_twin.plots.perspective``."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Any

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.files import write_text_atomic

#: The topic rqt_robot_monitor subscribes to (fixed in its plugin).
DIAGNOSTICS_AGG_TOPIC = '/diagnostics_agg'
#: The plugins the perspectives run.
PLOT, ROBOT_MONITOR = 'rqt_plot/Plot', 'rqt_robot_monitor/RobotMonitor'


def perspective_text(perspective: dict) -> str:
    """The file text, formatted as rqt's export writes it (2-space JSON) plus a newline."""
    return json.dumps(perspective, indent=2, separators=(',', ': ')) + '\n'


def write_perspective(path: str | os.PathLike, perspective: dict) -> Path:
    """Write ``perspective`` to ``path`` atomically; returns the path. Raises OSError if the
    file cannot be written."""
    return write_text_atomic(path, perspective_text(perspective))


def read_perspective(path: str | os.PathLike) -> dict:
    """A perspective file as a dict. Raises ConfigError naming the file if it is missing or
    not a perspective (JSON with a ``pluginmanager`` group)."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f'perspective file {path} does not exist') from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f'perspective file {path} is not readable JSON: {exc}') from None
    if not isinstance(data, dict) or 'pluginmanager' not in data.get('groups', {}):
        raise ConfigError(f'{path} is not an rqt perspective (no "pluginmanager" group)')
    return data


def _setting(group: dict, key: str, default: Any = None) -> Any:
    value = group.get('keys', {}).get(key)
    if value is None or value.get('type') != 'repr':
        return default
    return ast.literal_eval(value['repr'])


def needed_topics(perspective: dict) -> list[str]:
    """What the perspective's plugins subscribe to, in plugin order: every field an rqt_plot
    plots (``/topic/field[i]``: its topic is the longest published prefix, as rqt_plot
    resolves it) and ``/diagnostics_agg`` for a Robot Monitor. rqt_plot restores only
    fields whose topic its node has already discovered, so these must be known first."""
    manager = perspective['groups']['pluginmanager']
    running = _setting(manager, 'running-plugins', {})
    out: list[str] = []
    for plugin, serials in running.items():
        for serial in serials:
            group = manager['groups'].get(f'plugin__{plugin.replace("/", "__")}__{serial}', {})
            if plugin == PLOT:
                topics = _setting(group.get('groups', {}).get('plugin', {}), 'topics', [])
                out += [topics] if isinstance(topics, str) else list(topics)
            elif plugin == ROBOT_MONITOR:
                out.append(DIAGNOSTICS_AGG_TOPIC)
    return list(dict.fromkeys(out))
