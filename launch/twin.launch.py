"""Launch the live twin as separate processes: the sim bridge, optional mock hardware, the twin
server, the twin monitor, and optionally diagnostic_aggregator and the rqt monitoring view.

    source .venv/bin/activate        (or a ROS 2 install with this package built by colcon)
    ros2 launch shadow_twin twin.launch.py [mode:=sim|real|both] [use_mock_hardware:=true]
                                           [model:=/path/hand.xml] [config:=/path/twin.yaml]
                                           [diagnostics_aggregator:=true] [rqt:=true]

Arguments:
    mode                    where twin goals go: sim, real or both (default both)
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

from ament_index_python.packages import PackageNotFoundError
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue
from launch_ros.substitutions import ExecutableInPackage, FindPackageShare

from launch import LaunchContext, LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess, OpaqueFunction, Shutdown
from launch.conditions import IfCondition
from launch.events.process import ProcessExited
from launch.substitutions import LaunchConfiguration, NotSubstitution, PathJoinSubstitution
from launch.substitutions.substitution_failure import SubstitutionFailure

PACKAGE = 'shadow_twin'


def _config(name: str) -> PathJoinSubstitution:
    """config/``name`` in the package's share directory (looked up when the launch runs)."""
    return PathJoinSubstitution([FindPackageShare(PACKAGE), 'config', name])


def _require_executables(context: LaunchContext, processes: list) -> None:
    """Raise RuntimeError, before anything starts, naming every process this launch would start
    (``processes``: (package, executable, condition or None, hint)) whose executable is missing."""
    problems = []
    for package, executable, condition, hint in processes:
        if condition is None or condition.evaluate(context):
            try:
                ExecutableInPackage(executable, package).perform(context)
            except (PackageNotFoundError, SubstitutionFailure) as exc:   # a KeyError's str() quotes it
                problems.append(f'{exc.args[0] if exc.args else exc}{hint}')
    if problems:
        raise RuntimeError('nothing was started: ' + '; '.join(problems))


def _stop_all(event: ProcessExited, context: LaunchContext):
    """on_exit of every twin node: one that ends by itself (not in a shutdown) stops the launch,
    with exit status 1 if it failed."""
    if context.is_shutdown:
        return None
    if event.returncode != 0:
        raise RuntimeError(f'{event.process_name} exited with status {event.returncode}; stopping the twin')
    return Shutdown(reason=f'{event.process_name} exited')


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
             parameters=[_config('mujoco_bridge.yaml'), {'model_path': model}], on_exit=_stop_all),
        Node(package=PACKAGE, executable='mujoco_bridge', name='mock_hardware', output='screen',
             parameters=[_config('mock_hardware.yaml'), {'model_path': model}], condition=mock,
             on_exit=_stop_all),
        Node(package=PACKAGE, executable='twin_server', name='shadow_twin', output='screen',
             parameters=[LaunchConfiguration('config'), {'mode': mode, 'model_path': model}],
             on_exit=_stop_all),
        Node(package=PACKAGE, executable='twin_monitor', name='twin_monitor', output='screen',
             parameters=[_config('twin_monitor.yaml'), {'publish_aggregated': own_aggregate}], on_exit=_stop_all),
        Node(package='diagnostic_aggregator', executable='aggregator_node', name='analyzers', output='screen',
             parameters=[_config('diagnostic_aggregator.yaml')], condition=aggregator, on_exit=_stop_all),
    ]
    view = ExecuteProcess(cmd=[ExecutableInPackage('shadow-twin', PACKAGE), 'rqt'], name='rqt', output='screen',
                          condition=rqt)
    hints = {'diagnostic_aggregator': ' (diagnostics_aggregator:=true needs ros-jazzy-diagnostic-aggregator)',
             PACKAGE: f' (install {PACKAGE}: colcon build and source install/setup.bash, or '
                      f'bash scripts/setup.sh and source .venv/bin/activate)'}
    processes = [(n.node_package, n.node_executable, n.condition, hints[n.node_package]) for n in nodes]
    processes.append((PACKAGE, 'shadow-twin', rqt, hints[PACKAGE]))
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
        DeclareLaunchArgument('rqt', default_value='false',
                              description='start the monitoring view (shadow-twin rqt)'),
        OpaqueFunction(function=_require_executables, args=[processes]),
        *nodes,
        view,
    ])
