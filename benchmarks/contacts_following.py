"""Section ``following`` of ``benchmarks/contacts.py`` (issue 36, "Following: object pose, sim vs mock
motion capture, while the arm carries the held object: <= 2 mm and 1 deg p95. A free object on the
table: <= 1 mm").

Two live simulations of the cell (``write_cell_mjcf``, ``config/scene.yaml``, the cell's gains), run in
lock step, 2 physics steps (4 ms, the bridge's tick) at a time, on the same joint trajectory from the
same start:

* the **mock** (the "real" cell): its physics differ as the mock hardware's do
  (``config/mock_hardware.yaml``: ``scene_friction_scale``, ``scene_mass_scale`` applied with
  ``SceneConfig.scaled``, as the bridge's ``scene_of`` does, and its finger ``overrides``);
* the **sim**: the twin's model, with the can and the ball followed (``followed``).

The mock's true object poses go through :class:`MotionCapture` (100 Hz, 5 ms latency, 0.5 mm and
0.005 rad noise: the mock hardware's figures); each frame, once delivered, is offered to the sim
(``sim.offer_object_pose``) at the delivery time, as the bridge does with ``/mocap/<object>/pose``.
The scenario: 1 s at rest (the can on the cabinet, the ball on the floor: free objects resting); the
arm turns the hand fingers up and the can is put in it while the fingers close (1 s) and hold (0.5 s)
(:func:`contacts.close_hand`'s grasp); then the arm carries the can: shoulder lift and elbow swing
+-0.6 rad and back (peak joint speed about 1 rad/s), for ``--carry`` s.

Measured at each capture frame: the sim's object pose at the frame's stamp against the frame (the
issue's figure: what the twin is told) and against the mock's true pose (printed), as p50/p95 of
the position error (mm) and the angle (deg). Targets: the carried can <= 2 mm and 1 deg p95; the
free objects at rest <= 1 mm p95, checked against the mock's true pose: the frames' own noise (0.5 mm
standard deviation per axis) puts 5 % of them more than 1.4 mm (sqrt of chi-square(3)'s 95th percentile,
7.81, times 0.5 mm) from the true pose, so no follower, however exact, is within 1 mm of them at p95 (the
figure against the frames and the frames' own error are printed beside it).
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import numpy as np

import contacts
from shadow_twin.cli.up import ros_parameters
from shadow_twin.common.paths import config_path
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.cell.assembly import arm_joint_names, write_cell_mjcf
from shadow_twin.model.scene import SceneConfig
from shadow_twin.simulation.live.entities import EntityMotion, object_motion, set_object_motion
from shadow_twin.simulation.live.simulation import LiveSimulation
from shadow_twin.simulation.objects import CaptureConfig, MotionCapture, pose_error
from shadow_twin.simulation.overrides import ParameterOverrides

#: Targets (issue 36): the carried object, m and rad p95; a free object at rest, m p95.
CARRIED_POSITION_MAX = 0.002
CARRIED_ANGLE_MAX = math.radians(1.0)
RESTING_POSITION_MAX = 0.001
FOLLOWED = ('can', 'ball')
REST_S = 1.0                 # s at rest before the grasp
SWING = 0.6                  # rad, shoulder lift and elbow
SWING_S = 1.2                # s per leg of the swing: peak speed 1.875 * 0.6 / 1.2 ~ 0.94 rad/s (quintic)


def mock_settings(path: Path | None = None) -> tuple[float, float, ParameterOverrides]:
    """(scene friction scale, scene mass scale, overrides) of the mock hardware
    (``config/mock_hardware.yaml``'s ``scene_friction_scale``, ``scene_mass_scale``, ``overrides``)."""
    params = ros_parameters(path or config_path('mock_hardware.yaml'))
    return (float(params.get('scene_friction_scale', 1.0)), float(params.get('scene_mass_scale', 1.0)),
            ParameterOverrides.from_yaml_text(params.get('overrides')))


def mock_and_sim(model_path, scene_file: str, followed, gains=None,
                 same: bool = False) -> tuple[LiveSimulation, LiveSimulation]:
    """The mock (scene scaled, the mock's overrides; with ``same`` the model's own physics: the control
    run) and the sim (``followed`` objects) of one model."""
    friction, mass, overrides = (1.0, 1.0, None) if same else mock_settings()
    scene = SceneConfig.from_yaml(config_path(scene_file))
    mock = LiveSimulation(model_path, gains=gains, overrides=overrides,
                          scene=scene.scaled(friction=friction, mass=mass))
    sim = LiveSimulation(model_path, gains=gains, scene=scene, followed=list(followed))
    return mock, sim


class Run:
    """The two simulations in lock step with the capture between them; records per frame
    (phase, name, sim pose, frame, mock's true pose)."""

    def __init__(self, mock: LiveSimulation, sim: LiveSimulation, names, capture: CaptureConfig | None = None) -> None:
        self.mock, self.sim, self.names = mock, sim, list(names)
        self.capture = MotionCapture(self.names, capture, seed=36)
        self.records: list[tuple[str, str, tuple, tuple, tuple]] = []
        self.verdicts: dict[str, int] = {}
        self.phase = 'rest'
        self._frames: dict[tuple[str, float], tuple] = {}

    def tick(self, before=None) -> None:
        """One bridge tick on both (``before(sim)`` runs on each first), then the capture: a frame of the
        mock's true poses when one is due (the sim's poses at its stamp kept beside it), and the frames
        delivered now offered to the sim."""
        for s in (self.mock, self.sim):
            if before is not None:
                before(s)
            s.step(contacts.STEPS_PER_TICK)
        now = self.mock.time
        true = {n: (m.position.copy(), m.quat.copy()) for n in self.names for m in [object_motion(self.mock, n)]}
        if self.capture.measure(now, true):
            for n in self.names:
                m = object_motion(self.sim, n)
                self._frames[(n, round(now, 6))] = (self.phase, (m.position.copy(), m.quat.copy()), true[n])
        for name, sample in self.capture.delivered(now):
            verdict = self.sim.offer_object_pose(name, sample.stamp, sample.position, sample.quat)
            key = verdict.kind or 'accepted'
            self.verdicts[key] = self.verdicts.get(key, 0) + 1
            phase, at_sim, at_true = self._frames.pop((name, round(sample.stamp, 6)))
            self.records.append((phase, name, at_sim, (sample.position, sample.quat), at_true))

    def run_for(self, seconds: float, before=None) -> None:
        """Ticks for ``seconds`` s of sim time."""
        for _ in range(int(round(seconds / (contacts.STEPS_PER_TICK * self.sim.dt)))):
            self.tick(before)

    def errors(self, phase: str, name: str, against: str) -> np.ndarray:
        """(N, 2) position (m) and angle (rad) errors of ``name`` in ``phase`` against the frames
        ('capture') or the mock's true poses ('true')."""
        out = [pose_error(s[0], s[1], *(f if against == 'capture' else t))
               for p, n, s, f, t in self.records if p == phase and n == name]
        return np.array(out).reshape(-1, 2)


def _figures(errors: np.ndarray) -> tuple[float, float, float, float]:
    """p50, p95 position (mm) and p50, p95 angle (deg) of (N, 2) errors (m, rad)."""
    return (np.percentile(errors[:, 0], 50) * 1e3, np.percentile(errors[:, 0], 95) * 1e3,
            math.degrees(np.percentile(errors[:, 1], 50)), math.degrees(np.percentile(errors[:, 1], 95)))


def report(check, run: Run, phase: str, name: str, position_max: float, angle_max: float | None,
           against: str = 'capture') -> None:
    """Print p50/p95 of the sim against the capture frames and the mock's true pose, and the frames' own
    error (the noise floor); check p95 ``against`` one of them."""
    got = {a: run.errors(phase, name, a) for a in ('capture', 'true')}
    if not len(got['capture']):
        check(False, f'  {phase} {name}: no frame compared')
        return
    floor = _figures(np.array([pose_error(*f, *t) for p, n, _, f, t in run.records if p == phase and n == name]))
    print(f'  {phase} {name}: the capture frames vs the mock\'s true pose (their noise) p50 {floor[0]:.2f} mm '
          f'{floor[2]:.2f} deg, p95 {floor[1]:.2f} mm {floor[3]:.2f} deg ({len(got["true"])} frames)')
    target = f'<= {position_max * 1e3:.0f} mm'
    if angle_max is not None:
        target += f' and {math.degrees(angle_max):.0f} deg'
    for a, words in (('capture', 'sim vs mock motion capture'), ('true', "sim vs the mock's true pose")):
        f = _figures(got[a])
        line = f'  {phase} {name}: {words} p50 {f[0]:.2f} mm {f[2]:.2f} deg, p95 {f[1]:.2f} mm {f[3]:.2f} deg'
        if a != against:
            print(line + ' (no target)')
            continue
        ok = f[1] <= position_max * 1e3 and (angle_max is None or f[3] <= math.degrees(angle_max))
        check(ok, f'{line} (target p95 {target})')


def add_arguments(parser) -> None:
    parser.add_argument('--carry', type=float, default=4 * SWING_S, help='s of carrying (following section)')


def carry(same: bool, carry_s: float, capture: CaptureConfig | None = None) -> tuple[Run, float]:
    """The scenario (module doc) on a mock and a sim of the cell; ``same``: the mock has the sim's physics
    (a control run); ``capture``: the motion capture's figures (default: the mock hardware's). Returns the
    run and the mock's can height after the carry (m)."""
    with tempfile.TemporaryDirectory() as folder:
        path, _ = write_cell_mjcf(None, Path(folder) / 'cell.xml')
        mock, sim = mock_and_sim(path, 'scene.yaml', FOLLOWED, gains=config_path('controllers', 'cell.yaml'),
                                 same=same)
        run_ = Run(mock, sim, FOLLOWED, capture)
        run_.run_for(REST_S)
        # the grasp: the arm fingers up, the can put in the hand while the fingers close (contacts.cell_grasp)
        held = {}
        for s in (mock, sim):
            s.set_positions(dict(zip(arm_joint_names(), contacts.ARM_FINGERS_UP)))
            forearm = s.model.body('rh_forearm').id
            at = s.data.xpos[forearm] + s.data.xmat[forearm].reshape(3, 3) @ contacts.CAN_IN_HAND
            held[id(s)] = EntityMotion(at, s.data.xquat[forearm].copy())
            grasp = JointTrajectory(list(contacts.GRASP), [contacts.CLOSE_S], [list(contacts.GRASP.values())])
            s.set_trajectory(grasp)
        run_.phase = 'grasp'
        run_.run_for(contacts.CLOSE_S, lambda s: set_object_motion(s, 'can', held[id(s)]))
        run_.run_for(contacts.SETTLE_S)
        if not same and capture is None:
            grasped = {n: object_motion(s, 'can').position for n, s in (('mock', mock), ('sim', sim))}
            print(f"  the can after the grasp: mock at {np.round(grasped['mock'], 3).tolist()} m, sim at "
                  f"{np.round(grasped['sim'], 3).tolist()} m", flush=True)
        # the carry: shoulder lift and elbow swing and back; the fingers keep their desired grasp (a trajectory
        # naming them would start from where they stopped on the can: no squeeze, the can falls)
        names = list(arm_joint_names())
        start = list(contacts.ARM_FINGERS_UP)
        legs = max(1, int(round(carry_s / SWING_S)))
        points, times = [], []
        for k in range(legs):        # out (up, then down on the next pair) on even legs, back on odd ones
            out = 0.0 if k % 2 else (-SWING if k % 4 == 0 else SWING)
            q = list(start)
            q[1] += out                  # lift and elbow opposite: the hand keeps its orientation, moves 0.4 m/rad
            q[2] -= out
            points.append(q)
            times.append((k + 1) * SWING_S)
        t0 = max(mock.time, sim.time)
        for s in (mock, sim):
            s.set_trajectory(JointTrajectory(names, times, points), start_time=t0)
        run_.phase = 'carried'
        run_.run_for(legs * SWING_S)
        return run_, float(object_motion(mock, 'can').position[2])


def run(check, args) -> None:
    """The following section (module doc), then three control runs of the carried can (no target): the mock
    with the sim's own physics (unfollowed, the two would be one), a perfect capture, and both; what is left
    in the last is the following's own error on a held object (module doc)."""
    carry_s = getattr(args, 'carry', 4 * SWING_S)
    print(f'== following: sim vs mock motion capture, the cell, {", ".join(FOLLOWED)} followed; '
          f'at rest {REST_S:.1f} s, grasp, carried {carry_s:.1f} s', flush=True)
    run_, can_z = carry(False, carry_s)
    print(f'  capture frames offered: {run_.verdicts}; the mock\'s can at z {can_z:.3f} m after the carry')
    # at rest, against the true pose: the frames' own noise (0.5 mm per axis) has a p95 of 1.4 mm (module doc)
    report(check, run_, 'rest', 'can', RESTING_POSITION_MAX, None, against='true')
    report(check, run_, 'rest', 'ball', RESTING_POSITION_MAX, None, against='true')
    report(check, run_, 'carried', 'ball', RESTING_POSITION_MAX, None, against='true')
    report(check, run_, 'carried', 'can', CARRIED_POSITION_MAX, CARRIED_ANGLE_MAX)
    perfect = CaptureConfig(latency=0.0, position_noise=0.0, angle_noise=0.0)
    for words, same, capture in (("the mock with the sim's own physics", True, None),
                                 ('a perfect capture (no noise, no latency)', False, perfect),
                                 ("both: the sim's physics and a perfect capture", True, perfect)):
        control, _ = carry(same, carry_s, capture)
        f = _figures(control.errors('carried', 'can', 'true'))
        print(f"  control, {words}: carried can vs the mock's true pose p50 {f[0]:.2f} mm {f[2]:.2f} deg, p95 "
              f'{f[1]:.2f} mm {f[3]:.2f} deg (no target)', flush=True)
