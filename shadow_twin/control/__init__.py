"""shadow_twin.control.controller."""
