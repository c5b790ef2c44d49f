"""The ``shadow-twin`` command line (``main`` dispatches to one module per command);
exit statuses follow ``shadow_twin.common.exit_codes``."""
