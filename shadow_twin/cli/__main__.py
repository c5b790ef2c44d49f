"""``python -m shadow_twin.cli ...`` runs ``shadow-twin ...``."""

import sys

from shadow_twin.cli.main import main

sys.exit(main())
