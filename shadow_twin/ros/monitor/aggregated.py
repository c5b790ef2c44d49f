"""The twin monitor's ``/diagnostics_agg``: its statuses laid out as diagnostic_aggregator's
``aggregator_node`` would publish them (:func:`aggregated`), for rqt_robot_monitor where the C++
aggregator is not installed; and :func:`level_byte`. Part of ``shadow_twin.ros.monitor.node``.
"""

from __future__ import annotations

from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

from shadow_twin.monitoring.joint import error as monitor
from shadow_twin.ros.monitor.parameters import path_parts

#: diagnostic_aggregator's header messages by level (``valToMsg`` of its status_item.hpp).
AGGREGATED_MESSAGES = {monitor.OK: 'OK', monitor.WARN: 'Warning', monitor.ERROR: 'Error', monitor.STALE: 'Stale'}


def level_byte(level: int) -> bytes:
    """``DiagnosticStatus.level`` (a byte) of a ``shadow_twin.monitoring.joint.error`` level."""
    return bytes([int(level)])


def _chaff_removed(name: str, prefix: str) -> str:
    """diagnostic_aggregator's ``removeLeadingNameChaff`` on a status name: ``prefix``, then one
    ':', then spaces off its start (``twin_monitor: rh_FFJ3`` -> ``rh_FFJ3``)."""
    if prefix and name.startswith(prefix):
        name = name[len(prefix):]
    if name.startswith(':'):
        name = name[1:]
    return name.lstrip(' ')


def aggregated(statuses: list[DiagnosticStatus], path: str, prefix: str) -> list[DiagnosticStatus]:
    """``statuses`` as diagnostic_aggregator's ``aggregator_node`` publishes them on
    ``/diagnostics_agg`` when its base path and one GenericAnalyzer (``startswith`` and
    ``remove_prefix: [prefix]``) make ``path``, and the analyzer's items do not time out
    (they are all new). Sources: ros/diagnostics, diagnostic_aggregator
    ``generic_analyzer_base.hpp`` (``report``), ``generic_analyzer.cpp``, ``status_item.hpp``,
    ``analyzer_group.cpp``.

    In publishing order:

    * the analyzer's header, named ``path`` (``/shadow_twin/sim vs real``): the worst level of
      its items (STALE only when all are or there are none, else ERROR), message ``OK``,
      ``Warning``, ``Error`` or ``Stale``, one value per item (original name: message);
    * the items, sorted by original name, named ``path/<name>`` with ``prefix``, a ':' and spaces
      taken off the name's start and '/' in it replaced by ' ' (``/shadow_twin/sim vs
      real/rh_FFJ3``), level, message, hardware id and values as they are;
    * one group header per enclosing path, innermost first (``/shadow_twin``): level and message
      as above from the one group below, one value (that group's last name: its message).

    rqt_robot_monitor builds its tree from these names: it splits them at '/'.
    Raises ConfigError for a path without names.
    """
    parts = path_parts(path)
    items = sorted(statuses, key=lambda st: st.name)
    levels = [st.level[0] for st in items]
    level = max(levels, default=monitor.OK)
    if all(lv == monitor.STALE for lv in levels):          # also without items, as the aggregator
        level = monitor.STALE
    elif level == monitor.STALE:
        level = monitor.ERROR
    header = DiagnosticStatus(level=level_byte(level), name='/' + '/'.join(parts),
                              message=AGGREGATED_MESSAGES[level],
                              values=[KeyValue(key=st.name, value=st.message) for st in items])
    out = [header]
    for st in items:
        name = _chaff_removed(st.name.replace('/', ' '), prefix.replace('/', ' '))
        out.append(DiagnosticStatus(level=st.level, name=f'{header.name}/{name}', message=st.message,
                                    hardware_id=st.hardware_id, values=list(st.values)))
    child = header
    for depth in range(len(parts) - 1, 0, -1):
        child = DiagnosticStatus(level=child.level, name='/' + '/'.join(parts[:depth]), message=child.message,
                                 values=[KeyValue(key=parts[depth], value=child.message)])
        out.append(child)
    return out
