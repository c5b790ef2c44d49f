"""Sim-vs-real monitoring, ROS-free: time-aligned joint errors of one or more real joint-state
streams, sliding RMS windows and OK/WARN/ERROR/STALE levels (``joint_error``), and the mobile
base's pose error from the two odometries (``base_error``), as the twin_monitor node publishes them."""
