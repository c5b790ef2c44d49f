"""Everything of shadow_twin that imports rclpy or a message package: the toolkit here (message
conversions, parameter declarations, spinning and exit, the FollowJointTrajectory server base,
the calibration node's client), the twin's node in :mod:`.twin` and the twin monitor's in
:mod:`.monitor`. The old flat module names stay importable for one release
(:mod:`shadow_twin.common.moved`)."""

from shadow_twin.common.moved import install as _install_moved

_install_moved()
