"""shadow_twin.simulation.offline."""
