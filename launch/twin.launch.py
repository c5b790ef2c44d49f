"""Launch the live twin as separate processes: the sim bridge, optional mock hardware, the twin
server, the twin monitor, and optionally diagnostic_aggregator and the rqt monitoring view.

    source .venv/bin/activate        (or a ROS 2 install with this package built by colcon)
    ros2 launch shadow_twin twin.launch.py [mode:=sim|real|both|shadow] [use_mock_hardware:=true]
                                           [model:=/path/hand.xml] [config:=/path/twin.yaml]
                                           [diagnostics_aggregator:=true] [rqt:=true]

Arguments:
    mode                    where twin goals go: sim, real or both (default both); shadow: the
                            sim follows the robots' own controllers (config/mujoco_bridge_shadow.yaml)
                            and the twin refuses goals
    use_mock_hardware       true: a second bridge with other physics stands in for the robot
                            (/joint_states, /rh_trajectory_controller/...); default false
    model                   MJCF given to the bridges and the twin server as model_path;
                            '' (default) = the built-in hand
    config                  parameters of the twin server (default config/twin.yaml)
    diagnostics_aggregator  true: also diagnostic_aggregator with config/diagnostic_aggregator.yaml
                            (/diagnostics_agg for rqt_robot_monitor); needs the diagnostic_aggregator
                            package (ros-jazzy-diagnostic-aggregator); default false
    rqt                     true: also the monitoring view, ``shadow-twin rqt``; default false

The same nodes and YAML files as ``shadow-twin up`` (which runs them in one process):
``mujoco_bridge`` with config/mujoco_bridge.yaml, ``mujoco_bridge`` renamed ``mock_hardware``
with config/mock_hardware.yaml, ``twin_server`` (node ``shadow_twin``) with ``config``, and
``twin_monitor`` with config/twin_monitor.yaml (``publish_aggregated`` false when
diagnostic_aggregator publishes /diagnostics_agg); the files are found in the package's share
directory when the launch runs.

Nothing outlives the launch: a missing package or executable stops it (exit 1) before any
process starts; the twin needs all of its nodes, so one that ends by itself stops the others
(exit 1 if it failed); SIGINT (Ctrl-C) stops every process. The rqt view may be closed alone.
"""

from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import ExecutableInPackage

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess, OpaqueFunction
from launch.conditions import IfCondition, LaunchConfigurationEquals, LaunchConfigurationNotEquals
from launch.substitutions import LaunchConfiguration, NotSubstitution
from shadow_twin.ros.launch_support import PACKAGE, config_file, require_executables, stop_all
from shadow_twin.ros.modes import MODES, SHADOW_CONFIG, SHADOW_MONITOR_CONFIG


def generate_launch_description() -> LaunchDescription:
    mode = ParameterValue(LaunchConfiguration('mode'), value_type=str)
    model = ParameterValue(LaunchConfiguration('model'), value_type=str)
    mock = IfCondition(LaunchConfiguration('use_mock_hardware'))
    aggregator = IfCondition(LaunchConfiguration('diagnostics_aggregator'))
    # /diagnostics_agg has one publisher: diagnostic_aggregator, else the twin monitor
    own_aggregate = ParameterValue(NotSubstitution(LaunchConfiguration('diagnostics_aggregator')), value_type=bool)
    rqt = IfCondition(LaunchConfiguration('rqt'))
    nodes = [
        Node(package=PACKAGE, executable='mujoco_bridge', name='mujoco_bridge', output='screen',
             parameters=[config_file('mujoco_bridge.yaml'), {'model_path': model}], on_exit=stop_all,
             condition=LaunchConfigurationNotEquals('mode', 'shadow')),
        Node(package=PACKAGE, executable='mujoco_bridge', name='mujoco_bridge', output='screen',
             parameters=[config_file('mujoco_bridge.yaml'), config_file(SHADOW_CONFIG[False]), {'model_path': model}],
             on_exit=stop_all, condition=LaunchConfigurationEquals('mode', 'shadow')),
        Node(package=PACKAGE, executable='mujoco_bridge', name='mock_hardware', output='screen',
             parameters=[config_file('mock_hardware.yaml'), {'model_path': model}], condition=mock,
             on_exit=stop_all),
        Node(package=PACKAGE, executable='twin_server', name='shadow_twin', output='screen',
             parameters=[LaunchConfiguration('config'), {'mode': mode, 'model_path': model}],
             on_exit=stop_all),
        Node(package=PACKAGE, executable='twin_monitor', name='twin_monitor', output='screen',
             parameters=[config_file('twin_monitor.yaml'), {'publish_aggregated': own_aggregate, 'view.model_path': model}], on_exit=stop_all,
             condition=LaunchConfigurationNotEquals('mode', 'shadow')),
        Node(package=PACKAGE, executable='twin_monitor', name='twin_monitor', output='screen',
             parameters=[config_file('twin_monitor.yaml'), config_file(SHADOW_MONITOR_CONFIG[False]),
                         {'publish_aggregated': own_aggregate, 'view.model_path': model}], on_exit=stop_all,
             condition=LaunchConfigurationEquals('mode', 'shadow')),
        Node(package='diagnostic_aggregator', executable='aggregator_node', name='analyzers', output='screen',
             parameters=[config_file('diagnostic_aggregator.yaml')], condition=aggregator, on_exit=stop_all),
    ]
    view = ExecuteProcess(cmd=[ExecutableInPackage('shadow-twin', PACKAGE), 'rqt'], name='rqt', output='screen',
                          condition=rqt)
    processes = [(n.node_package, n.node_executable, n.condition) for n in nodes]
    processes.append((PACKAGE, 'shadow-twin', rqt))
    return LaunchDescription([
        DeclareLaunchArgument('mode', default_value='both', choices=list(MODES),
                              description='where twin goals go; shadow: the sim follows the robots\' own '
                                          'controllers (config/mujoco_bridge_shadow.yaml) and the twin refuses goals'),
        DeclareLaunchArgument('use_mock_hardware', default_value='false',
                              description='start a second bridge as the robot\'s mock hardware'),
        DeclareLaunchArgument('model', default_value='', description="MJCF model; '' = built-in hand"),
        DeclareLaunchArgument('config', default_value=config_file('twin.yaml'),
                              description='parameters of the twin server'),
        DeclareLaunchArgument('diagnostics_aggregator', default_value='false',
                              description='start diagnostic_aggregator (for rqt_robot_monitor) with '
                                          'config/diagnostic_aggregator.yaml'),
        DeclareLaunchArgument('rqt', default_value='false',
                              description='start the monitoring view (shadow-twin rqt)'),
        OpaqueFunction(function=require_executables, args=[processes]),
        *nodes,
        view,
    ])
