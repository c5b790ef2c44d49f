"""Helpers for tests that talk to real ROS 2 processes over DDS.

* :func:`isolate_domain` gives the test run its own ``ROS_DOMAIN_ID`` (from the
  pid, 1..100) and keeps discovery on this host; call it before ``rclpy.init``
  (it sets ``os.environ``, which child processes inherit).
* :class:`NodeProcess` runs a node as a child process (``python -m MODULE
  --ros-args ...``) with its output in a log file, and stops it (SIGINT, then
  SIGTERM, then SIGKILL).
* :func:`wait_until` polls a condition (:func:`graph_endpoints`: until the ROS graph shows
  endpoints); :func:`stamped_at` / :func:`current` are a topic's
  message of a given time / of now, on the messages' own header stamps (:func:`stamp_s`).
* :func:`one_point_goal` builds a FollowJointTrajectory goal to one point;
  :func:`final_feedback` waits for a goal's feedback at its end point.
* :class:`RosClient` is an rclpy context + node spinning in a background
  thread, with blocking helpers: record topics, call services, set remote
  parameters, send FollowJointTrajectory goals.

Import this module only after ``pytest.importorskip('rclpy')``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import numpy as np
import rclpy
from rclpy.executors import ExternalShutdownException, ShutdownException, SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile

from shadow_twin.common import lifeline
from shadow_twin.ros import dds
from shadow_twin.ros.action_client import LockedActionClient
from shadow_twin.ros.dds import use_udp_transport

REPO = Path(__file__).resolve().parents[2]
PYTHON = str(REPO / '.venv' / 'bin' / 'python') if (REPO / '.venv' / 'bin' / 'python').exists() else sys.executable


def domain_id_for(pid: int | None = None) -> int:
    """A ROS domain id in 1..100 derived from ``pid`` (default: this process)."""
    return 1 + (os.getpid() if pid is None else pid) % 100


def isolate_domain(domain_id: int | None = None) -> int:
    """Put this process (and its future children) on their own ROS domain, localhost only.

    Returns the domain id. Must run before ``rclpy.init``.
    """
    return dds.isolate_domain(domain_id_for() if domain_id is None else domain_id, udp=False)


class NodeProcess:
    """A ROS node in a child process.

    Args:
        module: Python module to run with ``-m`` (e.g. ``mujoco_bridge.main``).
        ros_args: arguments after ``--ros-args`` (params files, remaps).
        log_path: file receiving the child's stdout and stderr.
        command: a whole command line to run instead of ``-m module --ros-args ...``.
    """

    def __init__(self, module: str | None, ros_args: list[str], log_path: Path,
                 command: list[str] | None = None) -> None:
        self.log_path = Path(log_path)
        options = lifeline.child_options()       # it ends when this process ends, SIGKILL included
        options['env'].update(PYTHONUNBUFFERED='1', RCUTILS_COLORIZED_OUTPUT='0')
        self._log = open(self.log_path, 'wb')
        self.command = command or [PYTHON, '-m', module, '--ros-args', *ros_args]
        self.proc = subprocess.Popen(self.command, cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True, **options)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        """Everything the process has printed so far (also after :meth:`stop`)."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors='replace')

    def stop(self, timeout: float = 5.0) -> int | None:
        """Stop the process (SIGINT, SIGTERM, SIGKILL, as needed); returns its exit status. Before
        the SIGKILL, SIGUSR2: a project node prints every thread's stack into its output (where it
        hung; ``shadow_twin.ros.spinning.STACKS_SIGNAL``), another process ends on it."""
        for sig, wait in ((signal.SIGINT, timeout), (signal.SIGTERM, timeout), (signal.SIGUSR2, 1.0),
                          (signal.SIGKILL, timeout)):
            if self.proc.poll() is not None:
                break
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        self._log.close()
        return self.proc.poll()


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.01) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` s pass; returns its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def graph_endpoints(lookup: Callable[[], list], timeout: float = 10.0) -> list:
    """What ``lookup()`` returns (graph endpoints, e.g. ``node.get_publishers_info_by_topic(topic)``)
    once it returns any (DDS discovery takes a while), polling up to ``timeout`` s; [] if none."""
    found: list = []

    def seen() -> bool:
        found[:] = lookup()
        return bool(found)
    wait_until(seen, timeout, interval=0.05)
    return found


def ros_now() -> float:
    """ROS time now, s: the system clock, which stamps the nodes' messages (none of these tests
    runs on sim time)."""
    return time.time()


def stamp_s(msg) -> float:
    """A message's header stamp, s (ROS time)."""
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


def stamped_at(recorder: 'Recorder', stamp: float, timeout: float = 10.0):
    """The newest message of ``recorder`` stamped at or before ``stamp`` (ROS time, s), once one
    stamped after it has arrived (waits up to ``timeout`` s): the publisher's state at that time,
    however late a loaded PC handed it to this process. AssertionError if none comes."""
    assert wait_until(lambda: recorder.count() and stamp_s(recorder.last()) > stamp, timeout), \
        f'no message stamped after {stamp:.3f} within {timeout} s'
    before = [m for _, m in recorder.snapshot() if stamp_s(m) <= stamp]
    assert before, f'no message stamped at or before {stamp:.3f}'
    return max(before, key=stamp_s)


def current(recorder: 'Recorder', timeout: float = 10.0):
    """The message of ``recorder`` stamped now (the newest at or before :func:`ros_now`), once a
    later one has arrived: the publisher's state after what just happened here (a goal's result,
    a cancel), where the last message received may be older on a loaded PC."""
    return stamped_at(recorder, ros_now(), timeout)


class Recorder:
    """Messages of one topic with their monotonic receive times (s)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[tuple[float, object]] = []

    def __call__(self, msg) -> None:
        with self.lock:
            self.items.append((time.monotonic(), msg))

    def clear(self) -> None:
        with self.lock:
            self.items.clear()

    def snapshot(self) -> list[tuple[float, object]]:
        with self.lock:
            return list(self.items)

    def count(self) -> int:
        with self.lock:
            return len(self.items)

    def last(self):
        with self.lock:
            return self.items[-1][1] if self.items else None

    def since(self, t: float) -> list[tuple[float, object]]:
        with self.lock:
            return [(r, m) for r, m in self.items if r >= t]


class RosClient:
    """An rclpy node spinning in a background thread, for tests and benchmarks.

    Args:
        name: node name.
        domain_id: ROS domain (default: ``ROS_DOMAIN_ID`` of the environment).
    """

    def __init__(self, name: str = 'test_client', domain_id: int | None = None) -> None:
        self.context = rclpy.Context()
        if domain_id is None:
            domain_id = int(os.environ.get('ROS_DOMAIN_ID', '0'))
        # Fast DDS over UDP only, as the nodes (shadow_twin.ros.dds), so that this process does not
        # stall ~333 ms when another joins; the participant is made with the first node, and the
        # environment is set back for the children, which choose their transport themselves.
        saved = dict(os.environ)
        use_udp_transport()
        try:
            rclpy.init(context=self.context, domain_id=domain_id)
            self.node = rclpy.create_node(name, context=self.context)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        #: What callbacks raised while spinning (repr), in order.
        self.spin_errors: list[str] = []
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        self._action_clients: dict[str, LockedActionClient] = {}
        self._service_clients: dict[tuple, object] = {}

    def _spin(self) -> None:
        """Spin until the context shuts down. A callback that raises (rclpy's executor passes it on)
        is reported on stderr and kept in :attr:`spin_errors`, and spinning goes on: before, the
        thread ended there and every recorder of the module went silent."""
        while self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.1)
            except (ExternalShutdownException, ShutdownException):
                return
            except Exception as exc:                     # noqa: BLE001 - a test's callback: keep serving the rest
                if not self.context.ok():
                    return
                self.spin_errors.append(repr(exc))
                print(f'test client {self.node.get_name()}: a callback raised {exc!r}; spinning on',
                      file=sys.stderr, flush=True)

    def close(self) -> None:
        """Stop spinning and shut the context down."""
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
        self._thread.join(timeout=2.0)

    # -- topics ---------------------------------------------------------------------------------
    def record(self, msg_type, topic: str, depth: int = 100) -> Recorder:
        """Subscribe to ``topic`` and collect its messages."""
        recorder = Recorder()
        self.node.create_subscription(msg_type, topic, recorder, QoSProfile(depth=depth))
        return recorder

    def record_topics(self, topics: dict[str, tuple]) -> dict[str, Recorder]:
        """:meth:`record` each of ``topics`` {key: (message type, topic, depth)}; {key: recorder}."""
        return {key: self.record(msg_type, topic, depth=depth) for key, (msg_type, topic, depth) in topics.items()}

    # -- futures --------------------------------------------------------------------------------
    @staticmethod
    def wait_future(future, timeout: float):
        """The future's result; TimeoutError if not done in ``timeout`` s."""
        if not wait_until(future.done, timeout, interval=0.002):
            raise TimeoutError(f'no answer within {timeout} s')
        return future.result()

    # -- services -------------------------------------------------------------------------------
    def call(self, srv_type, name: str, request=None, timeout: float = 10.0):
        """Call service ``name`` and return the response (waits for the server first)."""
        key = (srv_type, name)
        client = self._service_clients.get(key)
        if client is None:
            client = self._service_clients[key] = self.node.create_client(srv_type, name)
        if not client.wait_for_service(timeout_sec=timeout):
            raise TimeoutError(f'service {name} not available within {timeout} s')
        return self.wait_future(client.call_async(request if request is not None else srv_type.Request()),
                                timeout)

    def set_parameters(self, node_name: str, values: dict, timeout: float = 10.0) -> list:
        """Set parameters on a remote node (``/<node>/set_parameters``); returns the per-parameter results."""
        from rcl_interfaces.srv import SetParameters
        request = SetParameters.Request(parameters=[Parameter(k, value=v).to_parameter_msg()
                                                    for k, v in values.items()])
        return self.call(SetParameters, f'{node_name}/set_parameters', request, timeout).results

    # -- actions --------------------------------------------------------------------------------
    def action_client(self, action_type, name: str, timeout: float = 10.0) -> LockedActionClient:
        """An action client for ``name``, its server found."""
        client = self._action_clients.get(name)
        if client is None:
            client = self._action_clients[name] = LockedActionClient(self.node, action_type, name)
        if not client.wait_for_server(timeout_sec=timeout):
            raise TimeoutError(f'action server {name} not available within {timeout} s')
        return client

    def send_goal(self, action_type, name: str, goal, feedback: Callable | None = None,
                  timeout: float = 10.0):
        """Send ``goal``; returns the goal handle once the server has answered (accepted or not)."""
        client = self.action_client(action_type, name, timeout)
        return self.wait_future(client.send_goal_async(goal, feedback_callback=feedback), timeout)


def one_point_goal(targets: dict[str, float], seconds: float, goal_tolerance: float | None = None,
                   stamp_ns: int = 0):
    """A one-point FollowJointTrajectory goal reaching ``targets`` {joint: rad} ``seconds`` after
    its start: ``stamp_ns`` (header.stamp, ns) or, when 0, when it is accepted; with
    ``goal_tolerance`` (rad) for every joint."""
    from control_msgs.action import FollowJointTrajectory
    from control_msgs.msg import JointTolerance
    from trajectory_msgs.msg import JointTrajectoryPoint

    from shadow_twin.ros.conversions import duration_msg, time_msg_ns
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.header.stamp = time_msg_ns(stamp_ns)
    goal.trajectory.joint_names = list(targets)
    goal.trajectory.points = [JointTrajectoryPoint(positions=[float(v) for v in targets.values()],
                                                   time_from_start=duration_msg(seconds))]
    if goal_tolerance is not None:
        goal.goal_tolerance = [JointTolerance(name=j, position=goal_tolerance) for j in targets]
    return goal


def final_feedback(feedback: list, target: dict[str, float], settled: Callable | None = None,
                   timeout: float = 10.0):
    """The feedback (``FollowJointTrajectory.Feedback``) of a goal that ended at ``target``
    {joint: rad}, at its end point: waits (up to ``timeout`` s) until the newest of ``feedback``
    (FeedbackMessages, as an action client's callback appends them) desires the end point and,
    with ``settled``, ``settled(feedback)`` holds of it, and returns that one. Call it before
    asking for the result: rclpy's action client drops a goal's feedback callback once its result
    has arrived, and the last feedback messages can arrive after the result (one per wake-up of
    the client, late on a loaded PC). Raises AssertionError (with the newest feedback's desired
    positions) when none comes."""
    found = []

    def ended() -> bool:
        if not feedback:
            return False
        fb = feedback[-1].feedback
        found[:] = [fb]
        desired = np.asarray(fb.desired.positions, dtype=float)
        return (desired.shape == (len(target),)
                and bool(np.allclose(desired, list(target.values()), rtol=0, atol=1e-9))
                and (settled is None or bool(settled(fb))))
    if not wait_until(ended, timeout):
        last = list(feedback[-1].feedback.desired.positions) if feedback else 'no feedback'
        raise AssertionError(f'no feedback at the end point {target} within {timeout} s '
                             f'({len(feedback)} received; the newest desires {last})')
    return found[0]
