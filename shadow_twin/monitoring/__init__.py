"""Sim-vs-real monitoring, ROS-free: time-aligned joint errors of one or more real joint-state
streams, sliding RMS windows and OK/WARN/ERROR/STALE levels (``joint``), and the mobile
base's pose error from the two odometries (``base_error``), as the twin_monitor node publishes them.
The old flat module names stay importable for one release (:mod:`shadow_twin.common.moved`)."""

from shadow_twin.common.moved import install as _install_moved

_install_moved()
