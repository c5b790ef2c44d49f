"""shadow_twin: MuJoCo digital twin of a Shadow Hand E / UR5 / MiR250 cell for ROS 2.

Layers, each importing only the ones before it:

1. the ROS-free core, by concern, in the same one-way order: ``common`` (errors,
   atomic files, shipped paths, time stamps, exit codes), ``model`` (MJCF and joint
   names, the cell, UR arms), ``control`` (the simulated controller, trajectory sampling, the
   joint trajectory controller's rules, the base's goals), ``twin`` (the twin goal: modes,
   splitting it among controllers, its start, desired state and verdict), ``simulation`` (live
   stepping, the goal preview, offline rollouts, efforts and friction),
   ``monitoring`` (sim-vs-real error, the external-force watch), ``plots`` (every figure, from
   plain data), ``calibration`` (recordings, scoring, search, the engine, the jobs) and
   ``identification`` (the arm from its joint efforts);
2. ``shadow_twin.ros``: everything that imports rclpy or a message package: its toolkit
   (conversions, parameters, spinning, the FollowJointTrajectory server base, the calibration
   client), the twin's node (``ros.twin``) and the twin monitor's (``ros.monitor``);
3. the node packages ``mujoco_bridge`` and ``calibration_node``;
4. ``shadow_twin.cli``: the ``shadow-twin`` commands.
"""

__version__ = '0.1.0'
