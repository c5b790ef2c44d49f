"""Calibration, ROS-free, one folder per concept: the recordings compared with (``recordings``:
bags, alignment, the base's runs), scoring a model against them (``scoring``), where and how to
search (``search``: spaces, optimisers, least squares, identifiability), running a calibration
(``engine``: the checkpointed run, rollout batches, screening, the written outputs) and the jobs
(``jobs``: the hand's, the cell's protocol, the node's plan). The old flat module names stay
importable for one release (:mod:`shadow_twin.common.moved`)."""

from shadow_twin.common.moved import install as _install_moved

_install_moved()
