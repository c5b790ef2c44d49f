"""One tilt run of the contact protocol in a live simulation (the bridge's own
:class:`~shadow_twin.simulation.live.simulation.LiveSimulation`: its controller holds the fingers),
and its record: the object's position in the palm's frame over the tilt.

The run (:class:`~shadow_twin.calibration.contacts.protocol.TiltRun`): from the model's initial
state, the fingers close to the protocol's grip in ``close_s`` (or stay open) and hold ``settle_s``;
then gravity turns in the hand's frame about the run's palm axis at its rate (the arm turning the
hand slowly: at these rates the turning frame's own accelerations are three orders of magnitude below
gravity's change, ``benchmarks/contacts_slip.py``), sampled every ``sample_s``.

The same code records the mock (its other contact parameters: ``overrides`` and a scaled scene) and
replays a parameter set in the sim, so a recording and its replay differ only by their physics.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mujoco
import numpy as np

from shadow_twin.calibration.contacts.protocol import ContactProtocol, TiltRun
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.simulation.live.simulation import LiveSimulation

G = 9.81
#: s over which a goal of the protocol (a tilt on the robots, a push) reaches its speed, and stops.
RAMP_S = 0.2
#: s between the points of such a goal.
POINT_S = 0.1


@dataclass(frozen=True)
class TiltRecord:
    """A recorded or replayed run: ``times`` (N,) s from the tilt's start, ``tilt`` (N,) rad and
    ``position`` (N, 3) m, the object's centre in the palm's frame; ``start`` (3,) m, its position
    when the tilt began; ``effort`` (N, J) N m of the grip's joints ``joints`` (joint_states' effort:
    the fingers carry more of the object's weight as the hand turns)."""

    name: str
    times: np.ndarray
    tilt: np.ndarray
    position: np.ndarray
    start: np.ndarray
    joints: tuple[str, ...] = ()
    effort: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def displacement(self) -> np.ndarray:
        """(N,) m: how far the object has moved in the palm's frame since the tilt began."""
        return np.linalg.norm(self.position - self.start, axis=1)

    def onset(self, distance: float, window: int = 1) -> float:
        """The tilt (rad) at which the displacement passed ``distance`` m for the last time before it reached
        twice that (the object surely slipping; without that, the first passing); NaN if it never passed.
        ``window`` > 1: the positions averaged over that many samples (a running mean, and the start
        the mean of the first ones). Why the last passing: MuJoCo's soft contacts let an object creep before
        it slides, and a capture's noise (0.5 mm a coordinate) moves a creeping object's first passing (at 1 mm
        one grip run's recorded onset ranged 20-39 deg over noise draws)."""
        position, start = self.position, self.start
        if window > 1:
            kernel = np.ones(window) / window
            position = np.stack([np.convolve(c, kernel, mode='valid') for c in self.position.T], axis=1)
            start = position[0]
        moved = np.linalg.norm(position - start, axis=1)
        passed = np.flatnonzero(moved > distance)
        if not len(passed):
            return float('nan')
        sure = np.flatnonzero(moved > 2 * distance)
        if len(sure):
            below = np.flatnonzero(moved[:sure[0]] <= distance)
            passed = below[-1:] + 1 if len(below) else np.array([0])
        return float(self.tilt[passed[0] + window - 1])

    def to_dict(self) -> dict:
        """JSON-able: every array as lists."""
        return {'name': self.name, 'times': self.times.tolist(), 'tilt': self.tilt.tolist(),
                'position': self.position.tolist(), 'start': self.start.tolist(), 'joints': list(self.joints),
                'effort': self.effort.tolist()}

    @classmethod
    def from_dict(cls, data: dict) -> 'TiltRecord':
        """Inverse of :meth:`to_dict`; ValueError for arrays of the wrong shape or non-finite values."""
        times, tilt = np.asarray(data['times'], float), np.asarray(data['tilt'], float)
        position, start = np.asarray(data['position'], float), np.asarray(data['start'], float)
        joints = tuple(str(j) for j in data.get('joints', ()))
        effort = np.asarray(data.get('effort', []), float).reshape(len(times) if joints else 0, len(joints))
        if times.ndim != 1 or tilt.shape != times.shape or position.shape != (len(times), 3) or start.shape != (3,):
            raise ValueError(f'run {data.get("name")!r}: times (N,), tilt (N,), position (N, 3), start (3,) expected')
        if not all(np.isfinite(a).all() for a in (times, tilt, position, start, effort)):
            raise ValueError(f'run {data.get("name")!r}: values that are not finite')
        return cls(str(data['name']), times, tilt, position, start, joints, effort)


def gravity_at(tilt: float, axis: str = 'x') -> np.ndarray:
    """(3,) gravity, m/s^2, in the hand's frame with the hand turned ``tilt`` rad about the palm's
    ``axis`` ('x', '-x', 'y', '-y'): gravity turns by -tilt about it (Rodrigues' rotation of (0, 0, -g))."""
    sign = -1.0 if axis.startswith('-') else 1.0
    s, c = np.sin(-sign * tilt), np.cos(tilt)
    return np.array([0.0, G * s, -G * c]) if axis.endswith('x') else np.array([-G * s, 0.0, -G * c])


def ramped_goal(duration: float, speeds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The points of a goal that moves joints at constant ``speeds`` ((J,) rad/s) for ``duration`` s: reaching
    them over :data:`RAMP_S` and stopping over another after the duration (a JTC's goal ends at rest), points
    every :data:`POINT_S` s; returns (times (P,) s, travel (P, J) rad from the start, velocities (P, J) rad/s).
    The travel at the end is ``speeds x duration``."""
    speeds = np.atleast_1d(np.asarray(speeds, float))
    times = np.append(np.arange(POINT_S, duration + 1e-9, POINT_S), duration + RAMP_S)
    factor = np.minimum(times / RAMP_S, 1.0)
    factor[-1] = 0.0
    return times, np.outer(ramped_travel(times, duration), speeds), np.outer(factor, speeds)


def ramped_travel(times: np.ndarray, duration: float) -> np.ndarray:
    """(N,) rad per rad/s: the travel of a :func:`ramped_goal` of ``duration`` s at unit speed, ``times`` (N,) s
    after its start (0 before it; ``duration`` once stopped)."""
    t = np.clip(np.asarray(times, float), 0.0, duration + RAMP_S)
    after = np.clip(t - duration, 0.0, None)
    return np.where(t < RAMP_S, t ** 2 / (2 * RAMP_S),
                    np.minimum(t, duration) - RAMP_S / 2 + after - after ** 2 / (2 * RAMP_S))


def ramp_time(travel: float, speed: float) -> float:
    """s from a :func:`ramped_goal`'s start until it has moved ``travel`` (rad, > 0) at ``speed`` (rad/s, > 0)."""
    if travel <= speed * RAMP_S / 2:
        return float(np.sqrt(2 * RAMP_S * travel / speed))
    return travel / speed + RAMP_S / 2


def push_trajectory(run: TiltRun, start: dict[str, float]) -> JointTrajectory:
    """The hand's goal of a push run: its joints from ``start`` ({joint: rad}) to the run's targets at constant
    speeds in ``run.push_s`` (:func:`ramped_goal`). Raises KeyError: a push joint missing from ``start``."""
    names = [j for j, _ in run.push]
    origin = np.array([start[j] for j in names])
    times, travel, velocities = ramped_goal(run.push_s, (np.array([t for _, t in run.push]) - origin) / run.push_s)
    return JointTrajectory(names, times.tolist(), (origin + travel).tolist(), velocities=velocities.tolist())


def start_push(sim: LiveSimulation, run: TiltRun) -> None:
    """Start push ``run``'s goal (:func:`push_trajectory`) on ``sim`` now, from where its joints stand (as the
    runner's goal starts from the open hand). Raises KeyError: a push joint ``sim`` does not have."""
    names = [j for j, _ in run.push]
    sim.set_trajectory(push_trajectory(run, dict(zip(names, (float(q) for q in sim.positions(names))))),
                       start_time=sim.time)


@dataclass(frozen=True)
class RunStart:
    """Where the runs with one grip start (:func:`settle`): the physics ``state`` (``mj_getState``,
    ``mjSTATE_INTEGRATION``) and what the controllers ``held`` then ({driven joint: rad}: the grip's targets,
    the other joints their angles at the reset; on the robots the arm's start pose), restored together by
    :func:`restore`: a state alone leaves the controllers holding what they held last (the grip's targets of
    a run before: an open run's fingers closed on the object)."""

    state: np.ndarray
    held: dict[str, float]


def restore(sim: LiveSimulation, start: RunStart) -> None:
    """Put ``sim`` back to ``start``: its physics state, its controllers holding ``start.held``."""
    mujoco.mj_setState(sim.model, sim.data, start.state, mujoco.mjtState.mjSTATE_INTEGRATION)
    mujoco.mj_forward(sim.model, sim.data)
    sim.hold(start.held)


def settle(sim: LiveSimulation, protocol: ContactProtocol, grip: bool) -> RunStart:
    """Reset ``sim``, close the fingers to the protocol's grip in ``close_s`` and hold ``settle_s``
    (``grip``; else leave them open ``settle_open_s``) with gravity along -z; returns where every run with
    that grip starts from (:class:`RunStart`: the controller holding the grip's targets, the other joints
    their angles at the reset).

    Raises:
        KeyError: a grip joint that is not in the model.
    """
    sim.reset()
    held = {**driven_angles(sim), **(protocol.grip if grip else {})}
    sim.model.opt.gravity[:] = gravity_at(0.0)
    if grip:
        sim.set_trajectory(JointTrajectory(list(protocol.grip), [protocol.close_s], [list(protocol.grip.values())]))
    seconds = protocol.close_s + protocol.settle_s if grip else protocol.settle_open_s
    sim.step(int(round(seconds / sim.dt)))
    return RunStart(physics_state(sim), held)


def driven_angles(sim: LiveSimulation) -> dict[str, float]:
    """{driven joint: rad} where ``sim``'s driven joints stand now (after a reset: what its controllers hold)."""
    names = list(sim.controlled_joints)
    return dict(zip(names, (float(q) for q in sim.positions(names))))


def physics_state(sim: LiveSimulation) -> np.ndarray:
    """``sim``'s physics state (``mj_getState``, ``mjSTATE_INTEGRATION``): where a run starts from."""
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    state = np.empty(mujoco.mj_stateSize(sim.model, spec))
    mujoco.mj_getState(sim.model, sim.data, state, spec)
    return state


def run_tilt(sim: LiveSimulation, protocol: ContactProtocol, run: TiltRun, start: RunStart) -> TiltRecord:
    """Run ``run`` on ``sim`` from ``start`` (:func:`settle` with the run's grip) and record it (a push: its
    goal starts at the run's start, gravity along -z).

    Raises:
        KeyError: the protocol's object or palm body is not in the model.
    """
    model, data = sim.model, sim.data
    restore(sim, start)
    palm, body = model.body(protocol.palm).id, model.body(protocol.object).id

    def in_palm() -> np.ndarray:
        return data.xmat[palm].reshape(3, 3).T @ (data.xpos[body] - data.xpos[palm])

    steps = max(1, int(round(protocol.sample_s / sim.dt)))
    count = int(round(run.duration / protocol.sample_s))
    times = np.arange(1, count + 1) * steps * sim.dt
    joints = tuple(protocol.grip)
    columns = [sim.joint_names.index(name) for name in joints]
    begin, positions, efforts = in_palm(), np.empty((count, 3)), np.empty((count, len(joints)))
    if run.push:
        start_push(sim, run)
    for k, t in enumerate(times):
        model.opt.gravity[:] = gravity_at(float(run.tilt_at(t)), run.axis)
        sim.step(steps)
        positions[k] = in_palm()
        efforts[k] = sim.joint_state().effort[columns]
    model.opt.gravity[:] = gravity_at(0.0)
    return TiltRecord(run.name, times, np.asarray(run.tilt_at(times), float), positions, begin, joints, efforts)


def record_runs(sim: LiveSimulation, protocol: ContactProtocol, runs) -> list[TiltRecord]:
    """Every run of ``runs`` on ``sim``, in order; the fingers settle once per grip (:func:`settle`)."""
    starts = {grip: settle(sim, protocol, grip) for grip in sorted({run.grip for run in runs})}
    return [run_tilt(sim, protocol, run, starts[run.grip]) for run in runs]


def residuals(replayed: TiltRecord, recorded: TiltRecord, clip: float, effort_weight: float = 0.0,
              effort_start: int = 0) -> np.ndarray:
    """(3 N + N J,) m: the replayed object's position in the palm's frame minus the recorded one, and
    the differences of the grip joints' efforts times ``effort_weight`` (m per N m): with ``effort_start`` > 0
    of their *changes* since the tilt began (each joint's effort less its mean over its first
    ``effort_start`` samples), else as recorded; each softly
    limited to ``clip`` m (``clip tanh(e / clip)``: an object that fell is far off, not infinitely).
    Why changes: the squeeze a grip holds when the tilt begins depends on how it closed (MuJoCo's soft
    contacts creep for seconds after: a run on the mock cell began 2 mN m per joint below its replay,
    which outweighed everything else in the objective), while its change as the hand turns is the
    object's weight and friction. Raises ValueError when the two runs were not sampled alike or lack
    each other's joints."""
    if replayed.times.shape != recorded.times.shape or not np.allclose(replayed.times, recorded.times):
        raise ValueError(f'run {recorded.name!r}: the replay is not sampled as the recording '
                         f'({len(replayed.times)} vs {len(recorded.times)} samples)')
    error = (replayed.position - recorded.position).ravel()
    if effort_weight:
        if replayed.joints != recorded.joints:
            raise ValueError(f'run {recorded.name!r}: the replay has the efforts of {list(replayed.joints)}, '
                             f'the recording of {list(recorded.joints)}')
        difference = replayed.effort - recorded.effort
        if effort_start > 0:
            difference = difference - difference[:int(effort_start)].mean(axis=0)
        error = np.concatenate([error, effort_weight * difference.ravel()])
    return clip * np.tanh(error / clip)
