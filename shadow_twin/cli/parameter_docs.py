"""Write or check ``docs/parameters.md``, the generated ROS parameter reference, from every node's
parameter table (:mod:`shadow_twin.ros.parameter_docs` renders it; this module names the nodes, and
lives in the CLI layer because it imports the node packages)::

    python -m shadow_twin.cli.parameter_docs --write     # after changing a ParameterSpec
    python -m shadow_twin.cli.parameter_docs --check     # exit 1 when the page is not current

:func:`node_tables` also maps each shipped ``config/*.yaml`` to the node that loads it (the test of
the shipped files reads it).
"""

from __future__ import annotations

import sys

import calibration_node.parameters as calibration
import mujoco_bridge.parameters as bridge
from shadow_twin.ros import parameters as ros_params
from shadow_twin.ros.monitor import parameters as monitor
from shadow_twin.ros.parameter_docs import NodeTable, main
from shadow_twin.ros.twin import parameters as twin
from shadow_twin.ros.view import parameters as view

#: The command that regenerates the page.
COMMAND = 'python -m shadow_twin.cli.parameter_docs --write'
#: What decides the ``constraints.*`` parameters.
CONSTRAINTS_NOTE = ('The JTC constraints, per joint of the model (`<joint>`; the bridge declares those of a new model '
                    'on `~/reload`): their defaults are the `constraints_file`\'s values (`config/constraints.yaml`; '
                    'shown here: its `goal_time` and `stopped_velocity_tolerance`, 0 for a joint it does not list).')


def constraint_patterns() -> tuple:
    """The ``constraints.*`` parameters as patterns (``<joint>``), with the shipped file's defaults."""
    return tuple(ros_params.constraint_specs(['<joint>'], ros_params.load_constraints()))


def node_tables() -> list[NodeTable]:
    """The nodes of the package and their parameter tables, read from the node modules now (a
    changed table shows at once)."""
    return [
        NodeTable('mujoco_bridge', 'The sim bridge (`/sim/...`), and under other node names the mock hardware '
                  '(`mock_hardware`, `mock_ur`, `mock_mir`).', ('mujoco_bridge/parameters.py',),
                  ('mujoco_bridge*.yaml', 'mock_*.yaml'), bridge.SPECS, constraint_patterns(), CONSTRAINTS_NOTE),
        NodeTable('shadow_twin', 'The twin server: the FollowJointTrajectory action that moves the robots and the '
                  'sim together.', ('shadow_twin/ros/twin/parameters.py', 'shadow_twin/ros/twin/base/settings.py'),
                  ('twin.yaml', 'twin_cell.yaml'), twin.SPECS, twin.CONTROLLER_SPECS + constraint_patterns(),
                  'The real controllers (`real_controllers`, then `controllers.<name>.action` and `.joints` for '
                  'each name in it), then the JTC constraints. ' + CONSTRAINTS_NOTE),
        NodeTable('twin_monitor', 'The twin monitor: sim minus real, per joint and of the base, on topics and '
                  '`/diagnostics`.', ('shadow_twin/ros/monitor/parameters.py',), ('twin_monitor*.yaml',),
                  monitor.SPECS),
        NodeTable('calibration_node', 'The calibration node: calibrates the running twin against the robot on '
                  '`~/calibrate`.', ('calibration_node/parameters.py',), ('calibration_node.yaml',),
                  calibration.SPECS),
        NodeTable('shadow_twin_view', 'The browser view (`shadow-twin view`, '
                  '[3D view](view.md#in-a-browser-shadow-twin-view)): the twin\'s TF tree, markers, joint errors and '
                  'diagnostics on a web page; the command\'s options set these.',
                  ('shadow_twin/ros/view/parameters.py',), (), view.SPECS),
    ]


if __name__ == '__main__':
    sys.exit(main(node_tables, COMMAND))
