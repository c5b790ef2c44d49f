"""Shared by every layer, ROS-free: the error hierarchy (``errors``), atomic and versioned
file writes (``files``), where the shipped config lives (``paths``), seconds <-> ROS
``(sec, nanosec)`` (``stamps``) and the exit statuses of every command (``exit_codes``)."""

from shadow_twin.common.errors import (ConfigError, ModelError, RecordingError, SearchSpaceError, ShadowTwinError,
                                       TrajectoryError)

__all__ = ['ConfigError', 'ModelError', 'RecordingError', 'SearchSpaceError', 'ShadowTwinError', 'TrajectoryError']
