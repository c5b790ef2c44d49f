"""Sim-vs-real joint errors: the samples compared (``samples``), the sliding comparison
(``comparison``) and the names the monitor uses (``error``, re-exporting both)."""
