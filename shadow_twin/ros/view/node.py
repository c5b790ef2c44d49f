"""The browser view's node (``shadow_twin_view``; run by ``shadow-twin view``): it serves the page of
:class:`~shadow_twin.visual.browser.BrowserView` and feeds it from ROS.

Subscriptions (guarded: a malformed message is dropped and logged, the view goes on):

* ``tf_topic`` and ``tf_static_topic`` (``tf2_msgs/TFMessage``; the static one transient local, as tf2's
  listener): the frames, drawn under ``fixed_frame``;
* each of ``marker_topics`` (``visualization_msgs/MarkerArray``): the sim's parts, the real robots' ghost, the
  contact arrows (:mod:`.messages` says what is drawn). Each topic is subscribed twice: transient local (the
  latched arrays of the bridge and the monitor: a view started later gets them) and volatile (a publisher
  that latches nothing, as the contact arrows', matches no transient-local subscription). An array that
  comes through both is applied twice, the second time changing nothing
  (:meth:`~shadow_twin.visual.browser_markers.MarkerLayer.apply`);
* ``joint_error_topic`` (``sensor_msgs/JointState``, sensor-data QoS): the error plots;
* ``diagnostics_topic`` (``diagnostic_msgs/DiagnosticArray``): the statuses.

The page's Pause, Reset and Reload buttons call ``pause_service`` (``std_srvs/SetBool``), ``reset_service``
and ``reload_service`` (``std_srvs/Trigger``) asynchronously from viser's threads, so the executor never
waits on the sim; the answer (or its absence after ``service_timeout``) shows under the buttons. The
plots and diagnostics go to the page ``refresh_rate`` times a second; a transform goes out as it comes.
"""

from __future__ import annotations

import threading
import time

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import MarkerArray

from shadow_twin.ros.guard import guarded_subscription, guarded_timer
from shadow_twin.ros.parameters import declare
from shadow_twin.ros.view.messages import joint_errors_of, marker_operations, statuses_of, transforms_of
from shadow_twin.ros.view.parameters import SPECS, ViewSettings
from shadow_twin.visual.browser import BrowserView
from shadow_twin.visual.colours import ErrorScale

#: The node's default name.
NODE_NAME = 'shadow_twin_view'
#: ``/tf`` as tf2's listener takes it.
TF_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
#: ``/tf_static`` as tf2's listener takes it: every static broadcaster's latched message.
TF_STATIC_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                           durability=DurabilityPolicy.TRANSIENT_LOCAL)
#: Marker arrays: the latched ones of every publisher, and those of publishers that latch nothing.
MARKER_QOS = (QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL),
              QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))


class ViewNode(Node):
    """The browser view node (module doc).

    Args:
        overrides: parameter values {name: value} (the command's options), before those of ``--ros-args``.
    Raises:
        ConfigError: a bad parameter value, or the port cannot be served.
    """

    def __init__(self, overrides: dict | None = None) -> None:
        super().__init__(NODE_NAME, parameter_overrides=[Parameter(k, value=v) for k, v in (overrides or {}).items()])
        declare(self, SPECS)
        self.settings = s = ViewSettings.read(lambda name: self.get_parameter(name).value)
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[object, float]] = {}
        self._skipped_types: set[str] = set()
        self.service_clients = {'pause': self.create_client(SetBool, s.pause_service),
                        'reset': self.create_client(Trigger, s.reset_service),
                        'reload': self.create_client(Trigger, s.reload_service)}
        self.view = BrowserView(s.host, s.port, s.fixed_frame, ErrorScale(s.error_scale), s.plot_window,
                                on_pause=lambda paused: self._call('pause', SetBool.Request(data=paused)),
                                on_reset=lambda: self._call('reset', Trigger.Request()),
                                on_reload=lambda: self._call('reload', Trigger.Request()),
                                on_error=self.get_logger().warning)
        guarded_subscription(self, TFMessage, s.tf_topic, self._on_tf, TF_QOS)
        guarded_subscription(self, TFMessage, s.tf_static_topic, self._on_tf, TF_STATIC_QOS)
        for topic in dict.fromkeys(t for t in s.marker_topics if t.strip()):
            for qos in MARKER_QOS:
                guarded_subscription(self, MarkerArray, topic, self._on_markers, qos)
        guarded_subscription(self, JointState, s.joint_error_topic, self._on_joint_errors, qos_profile_sensor_data)
        guarded_subscription(self, DiagnosticArray, s.diagnostics_topic, self._on_diagnostics, 10)
        guarded_timer(self, 1.0 / s.refresh_rate, self._refresh, 'refresh')
        where = 'this machine only' if s.host in ('127.0.0.1', '::1') else 'every host that reaches this port'
        self.get_logger().info(f'ready: serving {self.view.url} ({where}); drawing TF under {s.fixed_frame}, '
                               f'markers of {", ".join(s.marker_topics)}')

    def _on_tf(self, msg) -> None:
        self.view.set_transforms(transforms_of(msg))

    def _on_markers(self, msg) -> None:
        operations, skipped = marker_operations(msg, self.settings.fixed_frame)
        self.view.apply_markers(operations)
        for kind in set(skipped) - self._skipped_types:
            self._skipped_types.add(kind)
            self.get_logger().info(f'markers of type {kind} are not drawn (once per type)')

    def _on_joint_errors(self, msg) -> None:
        self.view.add_joint_errors(*joint_errors_of(msg))

    def _on_diagnostics(self, msg) -> None:
        self.view.set_statuses(statuses_of(msg), time.monotonic())

    def _refresh(self) -> None:
        now = time.monotonic()
        with self._lock:
            late = [a for a, (_, asked) in self._pending.items() if now - asked > self.settings.service_timeout]
            for action in late:
                del self._pending[action]
        for action in late:
            self.view.answered(action, False, f'no answer from {self.service_clients[action].srv_name} within '
                                              f'{self.settings.service_timeout:g} s')
        self.view.refresh(now)

    def _call(self, action: str, request) -> None:
        """Ask the sim ``action`` without waiting (from a viser thread); the answer comes to :meth:`_answered`."""
        client = self.service_clients[action]
        if not client.service_is_ready():
            self.view.answered(action, False, f'no {client.srv_name} service (is the sim bridge up?)')
            return
        future = client.call_async(request)
        with self._lock:
            self._pending[action] = (future, time.monotonic())
        future.add_done_callback(lambda f: self._answered(action, f))

    def _answered(self, action: str, future) -> None:
        with self._lock:
            pending = self._pending.get(action)
            if pending is None or pending[0] is not future:
                return                                  # timed out already
            del self._pending[action]
        try:
            response = future.result()
        except Exception as exc:                        # noqa: BLE001 - a failed call is an answer too
            self.view.answered(action, False, repr(exc))
            return
        self.view.answered(action, bool(response.success), response.message)
        self.get_logger().info(f'{action}: {"done" if response.success else "failed"}: {response.message}')

    def destroy_node(self) -> None:
        """Stop serving the page, then destroy the node."""
        self.view.stop()
        super().destroy_node()
