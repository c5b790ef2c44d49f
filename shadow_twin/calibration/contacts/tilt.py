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
        """The tilt (rad) at which the displacement first passed ``distance`` m; NaN if it never did.
        ``window`` > 1: the positions averaged over that many samples (a running mean, and the start
        the mean of the first ones): a capture's noise then trips no threshold it would alone."""
        position, start = self.position, self.start
        if window > 1:
            kernel = np.ones(window) / window
            position = np.stack([np.convolve(c, kernel, mode='valid') for c in self.position.T], axis=1)
            start = position[0]
        passed = np.flatnonzero(np.linalg.norm(position - start, axis=1) > distance)
        return float(self.tilt[passed[0] + window - 1]) if len(passed) else float('nan')

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


def settle(sim: LiveSimulation, protocol: ContactProtocol, grip: bool) -> np.ndarray:
    """Reset ``sim``, close the fingers to the protocol's grip in ``close_s`` and hold ``settle_s``
    (``grip``; else leave them open ``settle_open_s``) with gravity along -z; returns the physics state (``mj_getState``,
    ``mjSTATE_INTEGRATION``) every run with that grip starts from (the controller keeps holding the
    grip's targets: its trajectory has ended).

    Raises:
        KeyError: a grip joint that is not in the model.
    """
    sim.reset()
    sim.model.opt.gravity[:] = gravity_at(0.0)
    if grip:
        sim.set_trajectory(JointTrajectory(list(protocol.grip), [protocol.close_s], [list(protocol.grip.values())]))
    seconds = protocol.close_s + protocol.settle_s if grip else protocol.settle_open_s
    sim.step(int(round(seconds / sim.dt)))
    return physics_state(sim)


def physics_state(sim: LiveSimulation) -> np.ndarray:
    """``sim``'s physics state (``mj_getState``, ``mjSTATE_INTEGRATION``): where a run starts from."""
    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    state = np.empty(mujoco.mj_stateSize(sim.model, spec))
    mujoco.mj_getState(sim.model, sim.data, state, spec)
    return state


def run_tilt(sim: LiveSimulation, protocol: ContactProtocol, run: TiltRun, start: np.ndarray) -> TiltRecord:
    """Run ``run`` on ``sim`` from the settled physics state ``start`` (:func:`settle` with the run's
    grip) and record it.

    Raises:
        KeyError: the protocol's object or palm body is not in the model.
    """
    model, data = sim.model, sim.data
    mujoco.mj_setState(model, data, start, mujoco.mjtState.mjSTATE_INTEGRATION)
    mujoco.mj_forward(model, data)
    palm, body = model.body(protocol.palm).id, model.body(protocol.object).id

    def in_palm() -> np.ndarray:
        return data.xmat[palm].reshape(3, 3).T @ (data.xpos[body] - data.xpos[palm])

    steps = max(1, int(round(protocol.sample_s / sim.dt)))
    count = int(round(run.duration / protocol.sample_s))
    times = np.arange(1, count + 1) * steps * sim.dt
    joints = tuple(protocol.grip)
    columns = [sim.joint_names.index(name) for name in joints]
    begin, positions, efforts = in_palm(), np.empty((count, 3)), np.empty((count, len(joints)))
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
