"""Launch the live twin as separate processes: the sim bridge, optional mock hardware, the twin
server and the twin monitor.

    ros2 launch shadow_twin twin.launch.py [mode:=sim|real|both] [use_mock_hardware:=true]
                                           [model:=/path/hand.xml] [config:=/path/twin.yaml]
                                           [diagnostics_aggregator:=true]

The same nodes and YAML files as ``shadow-twin up`` (which runs them in one process):
``mujoco_bridge`` with config/mujoco_bridge.yaml, ``mujoco_bridge`` renamed ``mock_hardware``
with config/mock_hardware.yaml (when use_mock_hardware), ``twin_server`` with
config/twin.yaml (or ``config``), and ``twin_monitor`` (sim vs real on /twin/joint_error
and /diagnostics) with config/twin_monitor.yaml. ``model`` (MJCF, '' = built-in) is given
to the bridges and the twin server as ``model_path``. ``diagnostics_aggregator:=true`` also
starts diagnostic_aggregator with config/diagnostic_aggregator.yaml (/diagnostics_agg for
rqt_robot_monitor).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def _config(name: str) -> str:
    return os.path.join(get_package_share_directory('shadow_twin'), 'config', name)


def generate_launch_description() -> LaunchDescription:
    mode = LaunchConfiguration('mode')
    mock = LaunchConfiguration('use_mock_hardware')
    model = LaunchConfiguration('model')
    config = LaunchConfiguration('config')
    return LaunchDescription([
        DeclareLaunchArgument('mode', default_value='both', choices=['sim', 'real', 'both'],
                              description='where twin goals go'),
        DeclareLaunchArgument('use_mock_hardware', default_value='false',
                              description='start a second bridge standing in for the robot'),
        DeclareLaunchArgument('model', default_value='', description="MJCF model; '' = built-in hand"),
        DeclareLaunchArgument('config', default_value=_config('twin.yaml'),
                              description='parameters of the twin server'),
        DeclareLaunchArgument('diagnostics_aggregator', default_value='false',
                              description='start diagnostic_aggregator (for rqt_robot_monitor) with '
                                          'config/diagnostic_aggregator.yaml'),
        Node(package='shadow_twin', executable='mujoco_bridge', name='mujoco_bridge', output='screen',
             parameters=[_config('mujoco_bridge.yaml'), {'model_path': model}]),
        Node(package='shadow_twin', executable='mujoco_bridge', name='mock_hardware', output='screen',
             parameters=[_config('mock_hardware.yaml'), {'model_path': model}], condition=IfCondition(mock)),
        Node(package='shadow_twin', executable='twin_server', name='shadow_twin', output='screen',
             parameters=[config, {'mode': mode, 'model_path': model}]),
        Node(package='shadow_twin', executable='twin_monitor', name='twin_monitor', output='screen',
             parameters=[_config('twin_monitor.yaml')]),
        Node(package='diagnostic_aggregator', executable='aggregator_node', name='analyzers', output='screen',
             parameters=[_config('diagnostic_aggregator.yaml')],
             condition=IfCondition(LaunchConfiguration('diagnostics_aggregator'))),
    ])
