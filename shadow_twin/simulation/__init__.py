"""Simulation, ROS-free: the live stepping the bridge runs (``live``: real-time stepping,
trajectories, reload, model-parameter overrides) and the offline rollouts calibration runs
(``offline``: ``mujoco.rollout`` on threads). Both drive the same ``SimController``. The goal
preview in ``preview``. The old flat module names stay importable for one release
(:mod:`shadow_twin.common.moved`)."""

from shadow_twin.common.moved import install as _install_moved
from shadow_twin.simulation.live.simulation import LiveSimulation
from shadow_twin.simulation.offline import TrajectorySimulator
from shadow_twin.simulation.overrides import ParameterOverrides

__all__ = ['LiveSimulation', 'ParameterOverrides', 'TrajectorySimulator']

_install_moved()
