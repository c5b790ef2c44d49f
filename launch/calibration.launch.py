"""Launch the calibration node: live, next to a running twin, or offline on recorded bags.

    ros2 launch shadow_twin calibration.launch.py [config:=/path/params.yaml] [bag:=/path/a.bag[,/path/b]]
                                                  [trajectory:=FILE.yaml:NAME] [install:=true|false]
    ros2 service call /calibration_node/calibrate std_srvs/srv/Trigger      (or: shadow-twin calibrate-live)

Arguments (the last three override the same parameters of ``config``):
    config      parameters of the calibration node (default config/calibration_node.yaml)
    bag         ROS 1 or ROS 2 bags to calibrate from offline, comma-separated (parameter ``bag``);
                '' (default) = live: record through the twin
    trajectory  FILE.yaml:NAME, the commanded trajectory of bags that do not hold one, e.g. the
                real hand's recording (parameter ``bag_trajectory``); default ''
    install     true (default): install an accepted model into the bridge (offline with no bridge
                answering, the model is only written); false: only write it (parameter ``install``)

The same node and YAML as ``calibration_node --ros-args --params-file config/calibration_node.yaml``
(test/calibration_node/test_calibration_node.py); with ``bag`` nothing moves. The launch ends when the node does,
with exit status 1 if it failed.
"""

from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.events.process import ProcessExited
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution


def _fail_on_error(event: ProcessExited, context: LaunchContext) -> None:
    """on_exit of the node: exit status 1 for the launch if the node failed (not in a shutdown)."""
    if event.returncode != 0 and not context.is_shutdown:
        raise RuntimeError(f'{event.process_name} exited with status {event.returncode}')


def generate_launch_description() -> LaunchDescription:
    default = PathJoinSubstitution([FindPackageShare('shadow_twin'), 'config', 'calibration_node.yaml'])
    overrides = {'bag': ParameterValue(LaunchConfiguration('bag'), value_type=str),
                 'bag_trajectory': ParameterValue(LaunchConfiguration('trajectory'), value_type=str),
                 'install': ParameterValue(LaunchConfiguration('install'), value_type=bool)}
    return LaunchDescription([
        DeclareLaunchArgument('config', default_value=default, description='parameters of the calibration node'),
        DeclareLaunchArgument('bag', default_value='', description="bags to calibrate from offline; '' = live"),
        DeclareLaunchArgument('trajectory', default_value='',
                              description='FILE.yaml:NAME, commanded trajectory of bags that do not hold one'),
        DeclareLaunchArgument('install', default_value='true',
                              description='install an accepted calibration into the bridge'),
        Node(package='shadow_twin', executable='calibration_node', name='calibration_node', output='screen',
             parameters=[LaunchConfiguration('config'), overrides], on_exit=_fail_on_error),
    ])
