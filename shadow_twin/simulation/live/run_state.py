"""A live simulation's run state and the requests that change it, as ROS 2's standard
``simulation_interfaces`` names them: ``SimulationState`` (stopped, playing, paused),
``SetSimulationState``'s transitions and ``ResetSimulation``'s scopes. ROS-free: the bridge
(``mujoco_bridge/simulation_control.py``) serves the services and does what a plan says.

The values equal upstream's constants (ros-simulation/simulation_interfaces 1.5.1, the Jazzy
release: ``msg/SimulationState.msg``, ``msg/Result.msg``, ``srv/SetSimulationState.srv``,
``srv/ResetSimulation.srv``); ``test/bridge/test_simulation_control.py`` compares them with the
generated classes.

What the bridge does differently from a simulator that owns its clock: a reset never sets sim
time back (the joint states' stamps, and the twin's clocks derived from them, stay monotonic), so
``SCOPE_TIME`` is not supported, and ``SCOPE_ALL`` resets everything else and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

# SimulationState.state
STOPPED, PLAYING, PAUSED, QUITTING, NO_WORLD, LOADING_WORLD = 0, 1, 2, 3, 4, 5
#: Names of the states, for messages.
STATE_NAMES = {STOPPED: 'stopped', PLAYING: 'playing', PAUSED: 'paused', QUITTING: 'quitting',
               NO_WORLD: 'no world', LOADING_WORLD: 'loading world'}
# Result.result, and SetSimulationState's own codes
RESULT_FEATURE_UNSUPPORTED, RESULT_OK, RESULT_NOT_FOUND, RESULT_INCORRECT_STATE, RESULT_OPERATION_FAILED = 0, 1, 2, 3, 4
ALREADY_IN_TARGET_STATE, STATE_TRANSITION_ERROR, INCORRECT_TRANSITION = 101, 102, 103
# ResetSimulation.scope (a bit field)
SCOPE_DEFAULT, SCOPE_TIME, SCOPE_STATE, SCOPE_SPAWNED, SCOPE_ALL = 0, 1, 2, 4, 255


def run_state(paused: bool, stopped: bool) -> int:
    """The ``SimulationState`` of a simulation that is ``paused`` (or not), ``stopped`` meaning
    it was paused and reset by a stop and has not run since: PLAYING, STOPPED or PAUSED."""
    if not paused:
        return PLAYING
    return STOPPED if stopped else PAUSED


@dataclass(frozen=True)
class Transition:
    """What a ``SetSimulationState`` request asks of the simulation.

    Attributes:
        result: a ``Result`` code (RESULT_OK when something is to be done).
        message: what happens or why not (one line).
        reset: reset the state first (keyframe 0 or qpos0, at rest; goals end).
        paused: pause (True), resume (False) or leave as it is (None).
        stopped: the simulation is stopped afterwards (paused and reset, not run since).
    """

    result: int
    message: str
    reset: bool = False
    paused: bool | None = None
    stopped: bool = False


def plan_transition(current: int, target: int) -> Transition:
    """The transition from the run state ``current`` (PLAYING, PAUSED or STOPPED) to ``target``.

    Upstream's rules: stopping is pausing and resetting; a stopped simulation can be played or
    paused (paused: it stays where the stop put it); quitting, and the world states, are not
    the bridge's to set (its launcher stops it; it has one world, its model).
    """
    name = STATE_NAMES.get(target)
    if name is None:
        return Transition(INCORRECT_TRANSITION, f'unknown simulation state {target}', stopped=current == STOPPED)
    if target == current:
        return Transition(ALREADY_IN_TARGET_STATE, f'already {name}', stopped=current == STOPPED)
    if target == QUITTING:
        return Transition(RESULT_FEATURE_UNSUPPORTED, 'quitting is not served: the bridge is stopped by what '
                                                      'started it (shadow-twin up, ros2 launch)',
                          stopped=current == STOPPED)
    if target in (NO_WORLD, LOADING_WORLD):
        return Transition(INCORRECT_TRANSITION, f'{name} cannot be set: the bridge has one world, its model '
                                                '(load another with ~/reload)', stopped=current == STOPPED)
    if target == STOPPED:
        return Transition(RESULT_OK, 'stopped: reset and paused', reset=True, paused=True, stopped=True)
    if target == PAUSED:
        return Transition(RESULT_OK, 'paused', paused=True)
    return Transition(RESULT_OK, 'playing', paused=False)


@dataclass(frozen=True)
class ResetPlan:
    """What a ``ResetSimulation`` request asks: ``result`` (RESULT_OK when something is to be
    done, else RESULT_FEATURE_UNSUPPORTED), a one-line ``message``, whether to reset the
    ``state`` (poses and velocities) and to remove the ``spawned`` entities."""

    result: int
    message: str
    state: bool = False
    spawned: bool = False


def plan_reset(scope: int, spawning: bool = False) -> ResetPlan:
    """The reset ``scope`` asks for (``SCOPE_DEFAULT`` = ``SCOPE_ALL``); ``spawning``: whether the
    simulation spawns entities (then ``SCOPE_SPAWNED`` removes them).

    A scope that asks only for what is not supported (sim time; spawned entities without
    spawning) is refused with RESULT_FEATURE_UNSUPPORTED; ``SCOPE_ALL`` resets what is supported
    and its message says that sim time runs on.
    """
    scope = SCOPE_ALL if scope == SCOPE_DEFAULT else int(scope)
    state = bool(scope & SCOPE_STATE)
    spawned = bool(scope & SCOPE_SPAWNED) and spawning
    if not (state or spawned):
        why = [text for bit, text in ((SCOPE_TIME, 'sim time never goes back (stamps stay monotonic)'),
                                      (SCOPE_SPAWNED, 'nothing is spawned')) if scope & bit]
        return ResetPlan(RESULT_FEATURE_UNSUPPORTED, f'reset scope {scope} is not supported: ' + ('; '.join(why)
                                                     or 'it asks for neither state nor spawned entities'))
    done = (['state'] if state else []) + (['spawned entities'] if spawned else [])
    note = '; sim time runs on (stamps stay monotonic)' if scope & SCOPE_TIME else ''
    return ResetPlan(RESULT_OK, f'reset {" and ".join(done)}{note}', state=state, spawned=spawned)
