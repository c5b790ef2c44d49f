"""Client side of the calibration node: request a calibration over ``~/calibrate`` and follow
its ``~/status``, for command-line tools (``shadow-twin calibrate-live``, ``shadow-twin demo``).

The service only starts a run and answers at once (:func:`started_message`, or
:func:`going_on_message` while a run goes on); a run is followed on the node's latched
``~/status`` (:class:`StatusFollower`, :func:`follow`), never by waiting on the service."""

from __future__ import annotations

import threading
import time

import rclpy
from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.qos import DurabilityPolicy, QoSProfile
from std_srvs.srv import Trigger

from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.ros.spinning import BackgroundSpinner

FINAL = {'done': ExitCode.OK, 'refused': ExitCode.REFUSED, 'failed': ExitCode.FAILED}


class SpinningNode:
    """An rclpy context with one node spun by a SingleThreadedExecutor in a background thread,
    for command-line tools that wait on futures. ``close()`` shuts it down in the order that
    lets the spinning thread end before the process does (else rclpy's C++ threads abort it).

    Args:
        name: node name.
    """

    def __init__(self, name: str) -> None:
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.spinner = BackgroundSpinner([self.node], 'spin')

    def close(self) -> None:
        self.spinner.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


#: Beginnings of the calibration node's ``~/calibrate`` answers (:func:`started_message`, :func:`going_on_message`).
STARTED, RESUMED, GOING_ON = 'calibration started: ', 'calibration resumed: ', 'a run is going on: '


def started_message(run_dir, resumed: bool) -> str:
    """The node's answer when it starts (or resumes) run ``run_dir``: 'calibration started: DIR'."""
    return f'{RESUMED if resumed else STARTED}{run_dir}'


def going_on_message(run_dir, phase: str, message: str) -> str:
    """The node's answer while run ``run_dir`` goes on: 'a run is going on: DIR (PHASE: MESSAGE)'."""
    return f'{GOING_ON}{run_dir} ({phase}: {message})'


def run_dir_of(answer) -> str:
    """The run directory named by a ``~/calibrate`` answer (started, resumed or going on); '' if none."""
    text = str(answer.message)
    for prefix in (STARTED, RESUMED):
        if text.startswith(prefix):
            return text[len(prefix):].strip()
    if text.startswith(GOING_ON):
        return text[len(GOING_ON):].split(' (', 1)[0].strip()
    return ''


def request_calibration(node, node_name: str, service_timeout: float, answer_timeout: float = 10.0,
                        tries: int = 3, out=None, follower: StatusFollower | None = None):
    """Call ``<node_name>/calibrate`` from ``node`` (spun elsewhere); returns the Trigger response.

    Its ``message`` names the run directory (:func:`run_dir_of`) when ``success``. An answer can be
    lost: a service that answers before its DDS response writer has matched the new client's
    response reader drops it after 100 ms (rmw_fastrtps logs "failed to send response (timeout):
    client will not receive response"; discovery is slower on a loaded PC). So a request not
    answered within ``answer_timeout`` s is sent again, up to ``tries`` times in all (a late answer
    to an earlier request still counts). When a repeated request finds a run going on, that run is
    the one the unanswered request started (or another caller's): the answer returned is then
    successful, naming it (a line goes to ``out`` when given).

    With ``follower`` (the node's ``~/status``), the request is sent once its latched status has
    arrived (up to ``service_timeout`` s), and before any repeat the statuses are read: a run that
    started since the first request is the one it started, and is followed without a repeat (a
    repeat after that run had ended would start a second calibration).

    Raises ShadowTwinError: no such service within ``service_timeout`` s, or no answer to any try.
    """
    name = f'{node_name.rstrip("/")}/calibrate'
    client = node.create_client(Trigger, name)
    if not client.wait_for_service(timeout_sec=service_timeout):
        raise ShadowTwinError(f'no service {name} within {service_timeout:g} s')
    seen = len(follower.wait_next(0, service_timeout)) if follower is not None else 0
    sent = []
    for _ in range(tries):
        started = follower.run_started_since(seen) if follower is not None and sent else None
        if started is not None:
            if out is not None:
                out(f'{name}: {len(sent)} request(s) got no answer; following the run they started')
            return Trigger.Response(success=True, message=going_on_message(started['run_dir'], started['phase'],
                                                                           started['message']))
        sent.append(client.call_async(Trigger.Request()))
        if not any_done_within(sent, answer_timeout):
            continue
        first = next(k for k, future in enumerate(sent) if future.done())
        answer = sent[first].result()          # a late answer to an earlier request still counts
        if first > 0 and not answer.success and answer.message.startswith(GOING_ON):
            if out is not None:
                out(f'{name}: {first} request(s) got no answer; following the run going on')
            answer = Trigger.Response(success=True, message=answer.message)
        return answer
    raise ShadowTwinError(f'{name} did not answer {tries} request(s) within {answer_timeout:g} s each')


def any_done_within(futures, timeout: float, interval: float = 0.005) -> bool:
    """Wait up to ``timeout`` s until one of ``futures`` (completed by an executor spinning in another
    thread) is done; True if one is."""
    deadline = time.monotonic() + timeout
    while not any(f.done() for f in futures):
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


class StatusFollower:
    """Collect ``<node>/status`` messages (latched) as {key: value} dicts on a node."""

    def __init__(self, node, node_name: str) -> None:
        self._cond = threading.Condition()
        self.statuses: list[dict] = []
        qos = QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        node.create_subscription(DiagnosticStatus, f'{node_name.rstrip("/")}/status', self._on_status, qos)

    def _on_status(self, msg) -> None:
        status = {kv.key: kv.value for kv in msg.values}
        status['message'] = msg.message
        with self._cond:
            if not self.statuses or self.statuses[-1] != status:
                self.statuses.append(status)
                self._cond.notify_all()

    def wait_next(self, seen: int, timeout: float) -> list[dict]:
        """Statuses after the first ``seen``, waiting up to ``timeout`` s for one."""
        with self._cond:
            self._cond.wait_for(lambda: len(self.statuses) > seen, timeout)
            return self.statuses[seen:]

    def run_started_since(self, seen: int) -> dict | None:
        """The newest status of a run that started after the first ``seen`` statuses (one of them has
        phase 'starting' and a run_dir), or None."""
        with self._cond:
            later = self.statuses[seen:]
        starts = [k for k, status in enumerate(later) if status.get('phase') == 'starting' and status.get('run_dir')]
        if not starts:
            return None
        run_dir = later[starts[-1]]['run_dir']
        return [status for status in later if status.get('run_dir') == run_dir][-1]


def _worth_printing(status: dict, previous: dict) -> bool:
    """Every phase change; while calibrating, a better objective or each tenth of the budget."""
    if status.get('phase') != previous.get('phase') or status.get('phase') != 'calibrating':
        return status.get('message') != previous.get('message')
    try:
        done, budget = int(status['evaluations']), int(status['budget'])
        before = int(previous.get('evaluations', 0))
    except (KeyError, ValueError):
        return True
    step = max(1, budget // 10)
    return (status.get('best_objective') != previous.get('best_objective') or done // step > before // step
            or done == budget)


def follow(node, follower: StatusFollower, run_dir: str, timeout: float, out=print) -> tuple[int, dict]:
    """Print the statuses of run ``run_dir`` until it ends; returns (exit status, last status)."""
    deadline = time.monotonic() + timeout
    seen, last = 0, {}
    while time.monotonic() < deadline:
        for status in follower.wait_next(seen, min(1.0, max(0.0, deadline - time.monotonic()))):
            seen += 1
            if status.get('run_dir') != run_dir:
                continue
            if _worth_printing(status, last):
                out(f'[{status.get("phase")}] {status.get("message")}')
            last = status
            if status.get('phase') in FINAL:
                return FINAL[status['phase']], status
    return ExitCode.TIMEOUT, last
