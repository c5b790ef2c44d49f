"""Sim-vs-real monitoring, ROS-free: time-aligned joint errors, sliding RMS windows and
OK/WARN/ERROR/STALE levels (``joint_error``), as the twin_monitor node publishes them."""
