"""shadow_twin.plots."""
