"""shadow_twin: MuJoCo digital twin of a Shadow Hand E / UR5 / MiR250 cell for ROS 2.

Layers, each importing only the ones before it:

1. the ROS-free core, by concern, in the same one-way order: ``common`` (errors,
   atomic files, shipped paths, time stamps, exit codes), ``model`` (MJCF and joint
   names), ``control`` (the simulated controller, trajectory sampling, the joint
   trajectory controller's rules, splitting goals among controllers), ``simulation``
   (live stepping and offline rollouts), ``monitoring`` (sim-vs-real error), ``plots``
   (every figure, from plain data) and ``calibration`` (recordings, alignment, metrics,
   search spaces, optimisers, runs, reports);
2. ``shadow_twin.ros``: everything that imports rclpy or a message package
   (conversions, parameters, spinning, the FollowJointTrajectory server base, the
   twin server and monitor nodes, the calibration client);
3. the node packages ``mujoco_bridge`` and ``calibration_node``;
4. ``shadow_twin.cli``: the ``shadow-twin`` commands.
"""

__version__ = '0.1.0'
