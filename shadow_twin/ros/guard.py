"""Callbacks that cannot take a node down.

Every subscription, service and timer callback of the project's nodes runs inside a
:class:`CallbackGuard`: a :class:`~shadow_twin.common.errors.BadMessage` (a
message that fails its check) or any other exception drops that one message (a
service answers with its default response) and is logged in one line naming the topic
(or service, or timer) and the field, at most once per :data:`LOG_PERIOD` s per topic
with the count dropped since (a flood of bad messages does not flood the log). The
node goes on.

:func:`guarded_subscription` is ``create_subscription`` with the guard and an
optional check run before the callback. The executors of the nodes
(:func:`shadow_twin.ros.spinning.spin_guarded`) catch what escapes anyway (e.g.
rclpy's own action callbacks), so nothing raised in a callback ends a process.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from shadow_twin.common.errors import BadMessage

#: Shortest interval between two log lines about the same topic, service or timer, s.
LOG_PERIOD = 5.0


class CallbackGuard:
    """Counts and reports the messages dropped by the guarded callbacks of one node.

    Args:
        logger: the node's logger (``warning`` for bad messages, ``error`` for failures).
        period: shortest interval between two log lines of one source, s.
    """

    def __init__(self, logger, period: float = LOG_PERIOD) -> None:
        self.logger = logger
        self.period = float(period)
        self._lock = threading.Lock()
        self._last_logged: dict[str, float] = {}
        self._unlogged: dict[str, int] = {}
        #: {source: messages dropped since the start}.
        self.dropped: dict[str, int] = {}

    def report(self, source: str, exc: BaseException) -> None:
        """Count a message of ``source`` dropped for ``exc`` and log it unless ``source`` was
        logged less than ``period`` s ago."""
        now = time.monotonic()
        with self._lock:
            self.dropped[source] = self.dropped.get(source, 0) + 1
            self._unlogged[source] = self._unlogged.get(source, 0) + 1
            if now - self._last_logged.get(source, -float('inf')) < self.period:
                return
            self._last_logged[source] = now
            count, self._unlogged[source] = self._unlogged[source], 0
        more = f' ({count} dropped since the last report)' if count > 1 else ''
        if isinstance(exc, BadMessage):
            self.logger.warning(f'dropped a message on {source}: {exc}{more}')
        else:
            self.logger.error(f'a callback of {source} failed, message dropped: {exc!r}{more}')

    def wrap(self, source: str, callback: Callable, check: Callable[[Any], None] | None = None,
             default: Callable[..., Any] | None = None) -> Callable:
        """``callback`` that reports (instead of raising) what it or ``check`` raises; it then
        returns ``default(*args)`` (None without one: a service returns its response)."""
        def guarded(*args):
            try:
                if check is not None:
                    check(args[0])
                return callback(*args)
            except Exception as exc:
                self.report(source, exc)
                return None if default is None else default(*args)
        return guarded


def guard_of(node) -> CallbackGuard:
    """The node's :class:`CallbackGuard` (made on first use, logging to the node's logger)."""
    guard = getattr(node, '_shadow_twin_guard', None)
    if guard is None:
        guard = CallbackGuard(node.get_logger())
        node._shadow_twin_guard = guard
    return guard


def guarded_subscription(node, msg_type, topic: str, callback: Callable, qos, *,
                         check: Callable[[Any], None] | None = None, guard: CallbackGuard | None = None,
                         **kwargs):
    """``node.create_subscription`` whose callback runs ``check(msg)`` first (e.g.
    :func:`~shadow_twin.ros.message_checks.check_joint_state`) and cannot raise: a bad or
    failing message is dropped and reported by ``guard`` (default: :func:`guard_of` the node)."""
    guard = guard or guard_of(node)
    return node.create_subscription(msg_type, topic, guard.wrap(topic, callback, check), qos, **kwargs)


def guarded_service(node, srv_type, name: str, callback: Callable, **kwargs):
    """``node.create_service`` whose callback cannot raise: a failure answers the request's
    default response (``success`` false where the response has it, with the reason) and is
    reported."""
    guard = guard_of(node)

    def failed(request, response):
        if hasattr(response, 'success'):
            response.success = False
        if hasattr(response, 'message'):
            response.message = f'{name} failed; see the node log'
        return response
    return node.create_service(srv_type, name, guard.wrap(name, callback, default=failed), **kwargs)


def guarded_timer(node, period: float, callback: Callable, name: str, **kwargs):
    """``node.create_timer`` whose callback cannot raise (a failure is reported under ``name``)."""
    return node.create_timer(period, guard_of(node).wrap(f'timer {name}', callback), **kwargs)
