"""Simulation, ROS-free: the live stepping the bridge runs (``live``: real-time stepping,
trajectories, reload, model-parameter overrides) and the offline rollouts calibration runs
(``offline``: ``mujoco.rollout`` on threads). Both drive the same ``SimController``. The goal
preview in ``preview``. The old flat module names stay importable for one release
(:mod:`shadow_twin.common.moved`)."""

import importlib

from shadow_twin.common.moved import install as _install_moved

__all__ = ['LiveSimulation', 'ParameterOverrides', 'TrajectorySimulator']
#: Where each name of ``__all__`` lives: imported when first used (an offline calibration needs no live
#: stepping; PEP 562).
_HOMES = {'LiveSimulation': 'shadow_twin.simulation.live.simulation', 'ParameterOverrides':
          'shadow_twin.simulation.overrides', 'TrajectorySimulator': 'shadow_twin.simulation.offline'}


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


_install_moved()
