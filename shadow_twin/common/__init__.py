"""shadow_twin.common."""
