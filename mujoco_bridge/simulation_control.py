"""The bridge's run state over ROS 2's standard ``simulation_interfaces`` (as Gazebo and Isaac Sim
serve it), beside its own ``~/reset`` and ``~/pause``, which do the same through this class:

* ``~/get_simulator_features`` (``GetSimulatorFeatures``): what of the standard the bridge serves;
* ``~/get_simulation_state`` / ``~/set_simulation_state``: playing, paused, stopped (paused and
  reset); the transitions are :func:`shadow_twin.simulation.live.run_state.plan_transition`'s;
* ``~/reset_simulation`` (``ResetSimulation``): the state (keyframe 0 or qpos0, at rest; a
  running goal ends with "simulation reset"); sim time is never set back (stamps stay monotonic):
  ``SCOPE_TIME`` alone is refused (:func:`~shadow_twin.simulation.live.run_state.plan_reset`);
* ``~/step_simulation`` (``StepSimulation``): while paused, ``steps`` physics steps (the model's
  timestep each), in chunks of :data:`STEP_CHUNK` so that joint states go on being published
  between them; at most :data:`MAX_STEPS` per call; refused while playing (upstream: "Calling
  with simulation not paused will return RESULT_OPERATION_FAILED").
"""

from __future__ import annotations

from rclpy.node import Node
from simulation_interfaces.msg import SimulatorFeatures
from simulation_interfaces.srv import (GetSimulationState, GetSimulatorFeatures, ResetSimulation,
                                       SetSimulationState, StepSimulation)

from shadow_twin.ros.guard import guarded_service
from shadow_twin.simulation.live import run_state as rs

#: Physics steps per chunk of a ``StepSimulation`` (the simulation lock is released between chunks).
STEP_CHUNK = 50
#: Most physics steps one ``StepSimulation`` call may ask for (at the hand's 2 ms timestep, 200 s).
MAX_STEPS = 100_000
#: What the bridge serves of the standard (``SimulatorFeatures``): its run state (this module) and
#: its entities (:mod:`mujoco_bridge.entities`).
FEATURES = (SimulatorFeatures.SPAWNING, SimulatorFeatures.DELETING, SimulatorFeatures.SPAWNING_RESOURCE_STRING,
            SimulatorFeatures.ENTITY_STATE_GETTING, SimulatorFeatures.ENTITY_STATE_SETTING,
            SimulatorFeatures.SIMULATION_RESET, SimulatorFeatures.SIMULATION_RESET_STATE,
            SimulatorFeatures.SIMULATION_RESET_SPAWNED, SimulatorFeatures.SIMULATION_STATE_GETTING,
            SimulatorFeatures.SIMULATION_STATE_SETTING, SimulatorFeatures.SIMULATION_STATE_PAUSE,
            SimulatorFeatures.STEP_SIMULATION_SINGLE, SimulatorFeatures.STEP_SIMULATION_MULTIPLE)
#: The formats ``SpawnEntity`` takes: one object of a scene file, as YAML (``shadow_twin.model.scene``).
SPAWN_FORMATS = ('shadow_twin_scene_object',)


class SimulationControl:
    """Pause, resume, stop, reset and step the bridge's simulation; serves the standard services.

    Args:
        node: the bridge node (it has ``sim``, ``jtc`` and ``_anchor``-like ``anchor``; the services
            are created on it, in ``callback_group``).
        anchor: called before stepping resumes (declares the current sim time to be now).
        despawn: removes the entities spawned at run time, returns their names (``SCOPE_SPAWNED``).
    """

    def __init__(self, node: Node, anchor, callback_group=None, despawn=None) -> None:
        self.node, self.sim, self._anchor, self._despawn = node, node.sim, anchor, despawn
        self.stopped = False            # paused and reset by a stop, not run since
        for srv, name, handler in ((GetSimulatorFeatures, '~/get_simulator_features', self._on_features),
                                   (GetSimulationState, '~/get_simulation_state', self._on_get_state),
                                   (SetSimulationState, '~/set_simulation_state', self._on_set_state),
                                   (ResetSimulation, '~/reset_simulation', self._on_reset),
                                   (StepSimulation, '~/step_simulation', self._on_step)):
            guarded_service(node, srv, name, handler, callback_group=callback_group)

    @property
    def state(self) -> int:
        """The run state (``SimulationState``: PLAYING, PAUSED or STOPPED)."""
        return rs.run_state(self.sim.paused, self.stopped)

    # -- the actions (also behind ~/reset and ~/pause) -------------------------------------------------
    def reset(self) -> str:
        """Reset the state (a running goal ends first, "simulation reset"); returns what was done."""
        self.node.jtc.stop_active('simulation reset')     # first: the goal ends with this reason
        self.sim.reset()
        return f'reset to {"keyframe 0" if self.sim.model.nkey else "qpos0"} at sim time {self.sim.time:.3f} s'

    def set_paused(self, paused: bool) -> str:
        """Pause or resume; returns what was done ('already ...' when nothing)."""
        if paused and not self.sim.paused:
            self.sim.paused = True
            return f'paused at sim time {self.sim.time:.3f} s'
        if not paused and self.sim.paused:
            self._anchor()
            self.sim.paused, self.stopped = False, False
            return f'resumed at sim time {self.sim.time:.3f} s'
        return 'already paused' if paused else 'already running'

    def _log(self, ok: bool, text: str) -> None:
        if ok:      # one call site per severity: rclpy refuses a site whose severity changes
            self.node.get_logger().info(text)
        else:
            self.node.get_logger().warning(text)

    # -- the standard's services ---------------------------------------------------------------------------
    def _on_features(self, request, response):
        response.features.features = list(FEATURES)
        response.features.spawn_formats = list(SPAWN_FORMATS)
        response.features.custom_info = ('shadow_twin mujoco_bridge: sim time never goes back; '
                                         'see docs/bridge.md')
        return response

    def _on_get_state(self, request, response):
        response.state.state = self.state
        response.result.result = rs.RESULT_OK
        return response

    def _on_set_state(self, request, response):
        plan = rs.plan_transition(self.state, int(request.state.state))
        response.result.result = plan.result
        if plan.result != rs.RESULT_OK:
            response.result.error_message = plan.message
            self._log(plan.result == rs.ALREADY_IN_TARGET_STATE, f'set_simulation_state: {plan.message}')
            return response
        done = [self.reset()] if plan.reset else []
        if plan.paused is not None:
            done.append(self.set_paused(plan.paused))
        self.stopped = plan.stopped
        self._log(True, f'set_simulation_state {rs.STATE_NAMES[self.state]}: {"; ".join(done)}')
        return response

    def _on_reset(self, request, response):
        plan = rs.plan_reset(int(request.scope), spawning=self._despawn is not None)
        response.result.result = plan.result
        if plan.result != rs.RESULT_OK:
            response.result.error_message = plan.message
            self._log(False, f'reset_simulation refused: {plan.message}')
            return response
        done = [f'removed {", ".join(self._despawn()) or "nothing spawned"}'] if plan.spawned else []
        if plan.state:
            done.append(self.reset())
        response.result.error_message = '' if plan.message == 'reset state' else plan.message
        self._log(True, f'reset_simulation: {"; ".join(done)} ({plan.message})')
        return response

    def _on_step(self, request, response):
        steps = int(request.steps)
        refusal = ('the simulation is playing: pause it first (set_simulation_state)' if not self.sim.paused else
                   f'steps {steps} is more than {MAX_STEPS} per call' if steps > MAX_STEPS else None)
        if refusal is not None:
            response.result.result, response.result.error_message = rs.RESULT_OPERATION_FAILED, refusal
            self._log(False, f'step_simulation refused: {refusal}')
            return response
        done = 0
        while done < steps:
            done += self.sim.step(min(STEP_CHUNK, steps - done), while_paused=True)
        self.stopped = self.stopped and done == 0
        response.result.result = rs.RESULT_OK
        return response
