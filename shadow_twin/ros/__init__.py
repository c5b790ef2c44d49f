"""Everything of shadow_twin that imports rclpy or a message package: message conversions,
parameter declarations, spinning and exit, the FollowJointTrajectory server base, the
twin server and twin monitor nodes, and the calibration node's client."""
