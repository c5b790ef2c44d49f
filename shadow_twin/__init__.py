"""shadow_twin: MuJoCo digital twin of a Shadow Hand E / UR5 / MiR250 cell.

The library core (model, control, trajectory, recording, alignment, metrics,
search_space, optimisers, calibration, report) runs without ROS; the ROS 2
nodes (``mujoco_bridge``, the trajectory action server, ``calibration_node``)
are thin layers over it.
"""

__version__ = '0.1.0'
