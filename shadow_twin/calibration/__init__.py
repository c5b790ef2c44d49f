"""shadow_twin.calibration.run."""
