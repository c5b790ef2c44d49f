"""shadow_twin.model.mjcf."""
