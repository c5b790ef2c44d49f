"""The live twin's physics without ROS: :class:`~.simulation.LiveSimulation` (stepped in simulated
time, joint states and odometry out) and its commands, one module each: trajectories
(:mod:`.trajectories`), following another driver (:mod:`.following`), the mobile base
(:mod:`.base`), and reloading its model (:mod:`.reload`).

``from shadow_twin.simulation.live import LiveSimulation`` keeps working (the module was
``shadow_twin/simulation/live.py`` before issue 35)."""

from shadow_twin.simulation.live.simulation import MAX_STAMP_LEAD, LiveSimulation

__all__ = ['MAX_STAMP_LEAD', 'LiveSimulation']
