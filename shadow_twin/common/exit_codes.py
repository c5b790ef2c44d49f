"""The exit statuses of every ``shadow-twin`` command and node executable (one convention).

========  ===============  ================================================================
status    name             meaning
========  ===============  ================================================================
0         ``OK``           done (a node: stopped normally by Ctrl-C / SIGINT / SIGTERM)
1         ``FAILED``       the work ran and failed: a node could not start (bad parameters,
                           a model that does not compile; the reason is logged), a calibration
                           failed, a child process (node, rqt) died
2         ``BAD_INPUT``    nothing was done: bad arguments or input files (one line
                           ``shadow-twin <command>: error: ...``), or a needed peer is not
                           there (no calibration node, twin topics never appeared, rqt missing)
3         ``REFUSED``      the work finished but its result was refused (``calibrate-live``:
                           the hold-out got worse, or nothing better was found; not installed)
124       ``TIMEOUT``      gave up waiting; what was started goes on (as coreutils ``timeout``)
130       ``INTERRUPTED``  stopped by Ctrl-C (128 + SIGINT); a calibration resumes with ``--resume``
========  ===============  ================================================================
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Exit statuses (see the module doc)."""

    OK = 0
    FAILED = 1
    BAD_INPUT = 2
    REFUSED = 3
    TIMEOUT = 124
    INTERRUPTED = 130
