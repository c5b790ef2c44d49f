"""The twin's modes, as the CLI and the launch files offer them (the twin server's ROS parameter
``mode``), and the sim bridge's shadow sources for mode ``shadow``.

* ``sim``: twin goals drive the sim only; ``real``: the robots only; ``both``: robots and sim from one
  stamped start, the monitor comparing them;
* ``shadow``: the robots are driven by other tools through their own controllers; the sim follows
  the same setpoints (``mujoco_bridge.shadow``) and the twin server refuses goals.
"""

from __future__ import annotations

MODES = ('sim', 'real', 'both', 'shadow')
#: The sim bridge's second params file in mode shadow: {cell: file name under config/}.
SHADOW_CONFIG = {False: 'mujoco_bridge_shadow.yaml', True: 'mujoco_bridge_shadow_cell.yaml'}
#: The twin monitor's second params file in mode shadow (the same sources, watched for silence).
SHADOW_MONITOR_CONFIG = {False: 'twin_monitor_shadow.yaml', True: 'twin_monitor_shadow_cell.yaml'}
