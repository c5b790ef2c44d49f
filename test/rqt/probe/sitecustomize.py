"""Imported by Python at the start of every process whose PYTHONPATH holds this folder
(``test_rqt.py`` sets it for ``shadow-twin rqt`` and so for the window processes it starts,
as coverage.py measures subprocesses). In a window process (``--window`` in its
arguments) with ``SHADOW_TWIN_RQT_PROBE`` set, it installs :mod:`rqt_probe`; elsewhere it
does nothing."""

import os
import sys

if os.environ.get('SHADOW_TWIN_RQT_PROBE') and '--window' in sys.argv:
    import rqt_probe
    rqt_probe.install()
