"""shadow_twin.ros."""
