"""Simulation, ROS-free: the live stepping the bridge runs (``live``: real-time stepping,
trajectories, reload, model-parameter overrides) and the offline rollouts calibration runs
(``offline``: ``mujoco.rollout`` on threads). Both drive the same ``SimController``."""

from shadow_twin.simulation.live import LiveSimulation
from shadow_twin.simulation.offline import TrajectorySimulator
from shadow_twin.simulation.overrides import ParameterOverrides

__all__ = ['LiveSimulation', 'ParameterOverrides', 'TrajectorySimulator']
