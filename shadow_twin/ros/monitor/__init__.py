"""The twin monitor node (``twin_monitor``, :mod:`.node`): sim-vs-real errors and their values
(:mod:`.values`, :mod:`.aggregated`), shadow mode (:mod:`.shadow`), drift (:mod:`.drift`), the arm's
external-force watch (:mod:`.effort`), and its parameters (:mod:`.parameters`)."""
