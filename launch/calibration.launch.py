"""Launch the calibration node (live, next to a running twin; or offline on recorded bags).

    ros2 launch shadow_twin calibration.launch.py [bag:=/path/a.bag[,/path/b]] [config:=/path/params.yaml]
    ros2 service call /calibration_node/calibrate std_srvs/srv/Trigger      (or: shadow-twin calibrate-live)

The same node and YAML as ``calibration_node --ros-args --params-file config/calibration_node.yaml``
(tested in test/test_calibration_node.py); ``bag`` (ROS 1 or ROS 2 bags, comma-separated) selects
offline calibration from recordings: nothing moves.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description() -> LaunchDescription:
    default = os.path.join(get_package_share_directory('shadow_twin'), 'config', 'calibration_node.yaml')
    return LaunchDescription([
        DeclareLaunchArgument('config', default_value=default, description='parameters of the calibration node'),
        DeclareLaunchArgument('bag', default_value='', description="bags to calibrate from offline; '' = live"),
        Node(package='shadow_twin', executable='calibration_node', name='calibration_node', output='screen',
             parameters=[LaunchConfiguration('config'), {'bag': LaunchConfiguration('bag')}]),
    ])
