"""shadow_twin.monitoring."""
