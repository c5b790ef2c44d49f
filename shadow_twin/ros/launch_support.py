"""What the launch files share (``launch/twin.launch.py``, ``launch/cell.launch.py``): the
package's config files as substitutions, the check that every executable a launch would start
exists (before any starts), and the rule that a twin node ending by itself ends the launch.

Imported by launch files only (``launch`` and ``launch_ros`` come with ``ros2 launch``).
"""

from __future__ import annotations

from ament_index_python.packages import PackageNotFoundError
from launch_ros.substitutions import ExecutableInPackage, FindPackageShare

from launch import LaunchContext
from launch.actions import Shutdown
from launch.events.process import ProcessExited
from launch.substitutions import PathJoinSubstitution
from launch.substitutions.substitution_failure import SubstitutionFailure

PACKAGE = 'shadow_twin'
#: What to do when an executable is missing, per package.
HINTS = {'diagnostic_aggregator': ' (diagnostics_aggregator:=true needs ros-jazzy-diagnostic-aggregator)',
         PACKAGE: f' (install {PACKAGE}: colcon build and source install/setup.bash, or '
                  f'bash scripts/setup.sh and source .venv/bin/activate)'}


def config_file(name: str) -> PathJoinSubstitution:
    """config/``name`` in the package's share directory (looked up when the launch runs)."""
    return PathJoinSubstitution([FindPackageShare(PACKAGE), 'config', name])


def require_executables(context: LaunchContext, processes: list) -> None:
    """Raise RuntimeError, before anything starts, naming every process a launch would start
    (``processes``: (package, executable, condition or None)) whose executable is missing."""
    problems = []
    for package, executable, condition in processes:
        if condition is None or condition.evaluate(context):
            try:
                ExecutableInPackage(executable, package).perform(context)
            except (PackageNotFoundError, SubstitutionFailure) as exc:   # a KeyError's str() quotes it
                problems.append(f'{exc.args[0] if exc.args else exc}{HINTS.get(package, "")}')
    if problems:
        raise RuntimeError('nothing was started: ' + '; '.join(problems))


def stop_all(event: ProcessExited, context: LaunchContext):
    """on_exit of every twin node: one that ends by itself (not in a shutdown) stops the launch,
    with exit status 1 if it failed."""
    if context.is_shutdown:
        return None
    if event.returncode != 0:
        raise RuntimeError(f'{event.process_name} exited with status {event.returncode}; stopping the twin')
    return Shutdown(reason=f'{event.process_name} exited')
