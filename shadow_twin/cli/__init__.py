"""shadow_twin.cli.main."""
