"""The browser view node's ROS parameters (``shadow-twin view``'s options set them): :data:`SPECS` and the
typed settings the node reads them through (:data:`ViewSettings`)."""

from __future__ import annotations

import ipaddress

from shadow_twin.common.errors import ConfigError
from shadow_twin.ros.parameters import ParameterSpec
from shadow_twin.ros.settings import settings_class

#: The page's default port.
DEFAULT_PORT = 8080
#: The default address: this machine only.
LOCALHOST = '127.0.0.1'


def check_host(host: str) -> None:
    """``host`` is an IP address to serve on ('127.0.0.1', '0.0.0.0', '::1', a local interface's).
    Raises ConfigError."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ConfigError(f'{host!r} is not an IP address (127.0.0.1: this machine only; 0.0.0.0: every '
                          'interface)') from None


def check_name(name: str) -> None:
    """``name`` is a ROS topic, service or frame name (not empty, no spaces). Raises ConfigError."""
    if not name.strip() or any(c.isspace() for c in name):
        raise ConfigError(f'{name!r} is not a topic, service or frame name')


SPECS = (
    ParameterSpec('host', LOCALHOST, 'Address the page is served on: 127.0.0.1 = this machine only (open it '
                  'elsewhere through an SSH tunnel); 0.0.0.0 = every interface (anyone on the network can see the '
                  'view and press its buttons).', read_only=True, check=check_host),
    ParameterSpec('port', DEFAULT_PORT, 'TCP port of the page and its websocket; 0 = one the system picks (logged).',
                  read_only=True, bounds=(0, 65535)),
    ParameterSpec('fixed_frame', 'world', 'TF frame at the scene\'s origin; a frame is drawn once its parents reach '
                  'it.', read_only=True, check=check_name),
    ParameterSpec('tf_topic', '/tf', 'tf2_msgs/TFMessage of the moving frames.', read_only=True, check=check_name),
    ParameterSpec('tf_static_topic', '/tf_static', 'tf2_msgs/TFMessage of the fixed frames (transient local).',
                  read_only=True, check=check_name),
    ParameterSpec('marker_topics', ['/sim/markers', '/real/markers', '/sim/contact_markers'],
                  'visualization_msgs/MarkerArray topics drawn (latched or not): the sim solid, the real robots\' '
                  'ghost, the contact arrows.', read_only=True),
    ParameterSpec('joint_error_topic', '/twin/joint_error', 'sensor_msgs/JointState of sim minus real per joint '
                  '(the twin monitor\'s), plotted.', read_only=True, check=check_name),
    ParameterSpec('diagnostics_topic', '/diagnostics', 'diagnostic_msgs/DiagnosticArray whose statuses are listed '
                  '(/diagnostics_agg: the aggregated paths).', read_only=True, check=check_name),
    ParameterSpec('pause_service', '/mujoco_bridge/pause', 'std_srvs/SetBool of the sim bridge the Pause button '
                  'calls.', read_only=True, check=check_name),
    ParameterSpec('reset_service', '/mujoco_bridge/reset', 'std_srvs/Trigger the Reset button calls.',
                  read_only=True, check=check_name),
    ParameterSpec('reload_service', '/mujoco_bridge/reload', 'std_srvs/Trigger the Reload button calls.',
                  read_only=True, check=check_name),
    ParameterSpec('service_timeout', 15.0, 'A button whose service has not answered after this long says so '
                  '(the bridge\'s reload answers within its reload_timeout).', read_only=True, bounds=(0.1, 600.0),
                  unit='s'),
    ParameterSpec('refresh_rate', 4.0, 'Rate at which the plots and the diagnostics are sent to the page.',
                  read_only=True, bounds=(0.1, 60.0), unit='Hz'),
    ParameterSpec('plot_window', 10.0, 'Time span of the joint error plots.', read_only=True, bounds=(1.0, 600.0),
                  unit='s'),
    ParameterSpec('error_scale', 0.02, 'Full scale of the ghost\'s colour legend (red from it): the twin '
                  'monitor\'s view.error_scale, which colours the ghost.', read_only=True, bounds=(1e-4, 10.0),
                  unit='m'),
)

#: The view's settings: one attribute per parameter of :data:`SPECS`.
ViewSettings = settings_class('ViewSettings', SPECS, module=__name__)
