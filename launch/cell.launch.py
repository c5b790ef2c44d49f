"""Launch the twin of the whole cell (MiR250, cabinet, UR5, Shadow Hand E) as separate processes:
the sim bridge on the cell model, optional mock hardware for the three robots, the twin server
and the twin monitor, and optionally the rqt monitoring view.

    source .venv/bin/activate        (or a ROS 2 install with this package built by colcon)
    ros2 launch shadow_twin cell.launch.py [use_mock_hardware:=true] [mode:=sim|real|both|shadow]
                                           [cell_config:=/path/cell.yaml] [config:=/path/twin_cell.yaml]
                                           [rqt:=true]

Arguments:
    use_mock_hardware   true: mock hardware for the three robots, the same bridge code with other
                        physics: ``mock_ur`` (config/mock_ur.yaml: the UR driver's scaled trajectory
                        controller, /joint_states at 125 Hz, speed scaling; its model the cell
                        with only the UR5's joints, the hand rigid on the flange), ``mock_hardware``
                        (the hand, its joint states on /rh/joint_states) and ``mock_mir``
                        (config/mock_mir.yaml: TwistStamped on /cmd_vel, Odometry on /odom);
                        default false (the real robots' drivers run)
    mode                where twin goals go: sim, real or both (default both); shadow: the robots
                        are driven by other tools, the sim follows their controllers
                        (config/mujoco_bridge_shadow_cell.yaml) and the twin refuses goals
    cell_config         the cell's parts and mounts (default config/cell.yaml); the cell MJCF is
                        written from it into a temporary directory when the launch runs (removed
                        at shutdown) and given to the sim bridge with config/controllers/cell.yaml
    config              parameters of the twin server (default config/twin_cell.yaml)
    rqt                 true: also the monitoring view, ``shadow-twin rqt``; default false

The same nodes and YAML files as ``shadow-twin up --cell [--mock-hardware]``. As in
twin.launch.py, nothing starts when an executable is missing, and a node that ends by itself
stops the launch (exit 1 if it failed).
"""

import shutil
import tempfile
from pathlib import Path

from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import ExecutableInPackage

from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess, OpaqueFunction, RegisterEventHandler
from launch.conditions import IfCondition
from launch.event_handlers import OnShutdown
from launch.substitutions import LaunchConfiguration
from shadow_twin.model.cell.assembly import CellConfig, write_cell_mjcf
from shadow_twin.model.mock_models import write_arm_stand_in_mjcf
from shadow_twin.ros.launch_support import PACKAGE, config_file, require_executables, stop_all
from shadow_twin.ros.modes import MODES, SHADOW_CONFIG, SHADOW_MONITOR_CONFIG

#: The hand's joint states in the cell: its own topic beside the UR driver's /joint_states.
HAND_JOINT_STATES = '/rh/joint_states'


def _cell_nodes(context: LaunchContext) -> list:
    """Check the executables, write the cell MJCF (removed at shutdown), return the nodes."""
    mock = IfCondition(LaunchConfiguration('use_mock_hardware'))
    rqt = IfCondition(LaunchConfiguration('rqt'))
    require_executables(context, [(PACKAGE, 'mujoco_bridge', None), (PACKAGE, 'twin_server', None),
                                  (PACKAGE, 'twin_monitor', None), (PACKAGE, 'shadow-twin', rqt)])
    config = CellConfig.from_yaml(LaunchConfiguration('cell_config').perform(context))
    folder = Path(tempfile.mkdtemp(prefix='shadow_twin_cell_'))
    model, _ = write_cell_mjcf(config, folder / 'cell.xml')
    # the mock UR5 carries the hand, as the real one: the cell with only the UR5's joints, the hand rigid
    mock_ur = write_arm_stand_in_mjcf(config, folder / 'mock_ur.xml')
    mode = ParameterValue(LaunchConfiguration('mode'), value_type=str)
    gains = config_file('controllers/cell.yaml').perform(context)
    # mode shadow: the sim bridge follows the robots' own controllers (a second params file)
    shadowing = LaunchConfiguration('mode').perform(context) == 'shadow'
    shadow = [config_file(SHADOW_CONFIG[True])] if shadowing else []
    watch = [config_file(SHADOW_MONITOR_CONFIG[True])] if shadowing else []     # the monitor watches them

    def bridge(name: str, params: list, condition=None) -> Node:
        return Node(package=PACKAGE, executable='mujoco_bridge', name=name, output='screen', parameters=params,
                    condition=condition, on_exit=stop_all)
    return [
        RegisterEventHandler(OnShutdown(on_shutdown=lambda *_: shutil.rmtree(folder, ignore_errors=True))),
        bridge('mujoco_bridge', [config_file('mujoco_bridge.yaml'), *shadow, {'model_path': str(model), 'gains_file': gains}]),
        bridge('mock_ur', [config_file('mock_ur.yaml'), {'model_path': str(mock_ur)}], mock),
        bridge('mock_hardware', [config_file('mock_hardware.yaml'), {'joint_states_topic': HAND_JOINT_STATES}], mock),
        bridge('mock_mir', [config_file('mock_mir.yaml')], mock),
        Node(package=PACKAGE, executable='twin_server', name='shadow_twin', output='screen',
             parameters=[LaunchConfiguration('config'), {'mode': mode}], on_exit=stop_all),
        Node(package=PACKAGE, executable='twin_monitor', name='twin_monitor', output='screen',
             parameters=[config_file('twin_monitor_cell.yaml'), *watch, {'view.model_path': str(model)}],
             on_exit=stop_all),
        ExecuteProcess(cmd=[ExecutableInPackage('shadow-twin', PACKAGE), 'rqt', '--cell'], name='rqt',
                       output='screen', condition=rqt),
    ]


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([
        DeclareLaunchArgument('use_mock_hardware', default_value='false',
                              description='start mock hardware for the UR5, the hand and the MiR250'),
        DeclareLaunchArgument('mode', default_value='both', choices=list(MODES),
                              description='where twin goals go; shadow: the sim follows the robots\' own '
                                          'controllers (config/mujoco_bridge_shadow_cell.yaml) and the twin refuses goals'),
        DeclareLaunchArgument('cell_config', default_value=config_file('cell.yaml'),
                              description='the cell YAML the sim model is built from'),
        DeclareLaunchArgument('config', default_value=config_file('twin_cell.yaml'),
                              description='parameters of the twin server'),
        DeclareLaunchArgument('rqt', default_value='false', description='start the monitoring view'),
        OpaqueFunction(function=_cell_nodes),
    ])
