"""Section ``preview`` of the grasp benchmark (issue 37, "Done when: Grasp preview agreement: 100 random
transports of a held object (random arm and base accelerations, some of which drop it), each previewed
with the calibrated sim and then run on the mock. Prediction agrees with outcome >= 95 %; print the
confusion matrix. A refused transport moves nothing").

**The held object.** The cell (``write_cell_mjcf``, ``config/scene.yaml``, the cell's gains), the arm
turning the hand fingers up and the can put in it while the fingers close (``contacts.cell_grasp``'s
grasp, :data:`contacts.GRASP`), 1.5 s in all; that state is each transport's start.

**The mock** (the "real" cell) is that grasp with the mock hardware's physics (``config/mock_hardware.yaml``:
the objects' friction x0.6 and mass x1.3, the fingers' damping x3 and friction loss x0.5; as
``contacts_following.mock_and_sim``) and its motion capture (``object_pose_*``: 0.5 mm and 0.005 rad of
noise, a fresh frame per transport). **The preview** is a :class:`GoalPredictor` on the cell's spec with
the scene's objects, in three versions: the model's physics ("uncalibrated"); the can's friction and
mass scaled by the factors the contact calibration recovered from the mock in the same run (the
``calibration`` section, run first when it has not run: "contacts calibrated"); and those with the
mock's finger overrides too ("calibrated": the hand's calibration taken as exact, as the calibration
section does; the target is judged on it). Each starts from what the twin reads off the robots: the
mock's joint states, every controller's setpoint (``controller_state``'s reference) and the can's pose
as the capture saw it.

**A transport** (seeded, :data:`SEED`): the shoulder pan, shoulder lift and elbow each move by a random
amount (uniform +-:data:`REACH` rad) in a random time (:data:`DURATIONS` s) and back, a quintic each way:
peak accelerations from about 0.5 to 60 rad/s^2. No base motion: the base part of a goal is followed
closed-loop by the twin's base follower, which the mock side here does not run (the base's own
benchmark is ``benchmarks/cell.py``). **Outcome**: the can lost on the mock by the preview's own rule
(:class:`~shadow_twin.simulation.preview.grasp.GraspWatch` on the mock's states every 10 ms: slid more
than :data:`SLIDE_LIMIT` against the fingertips that held it, or fewer than two fingertips on it; the
check is off in the shipped config, on here with that limit). **Prediction**: a
``grasp`` failure in the preview. A refused transport is not run on the robots (the twin refuses it
before anything moves, ``test/core/simulation/test_preview_grasp.py``); here it is run on the mock all
the same, to score the prediction.

Usage: ``.venv/bin/python benchmarks/grasp_preview.py [--transports 100]`` (exit 1 on a miss).

**Finding** (29 Nov, 100 transports): the mock lost the can in 41; agreement 89 % uncalibrated, 96 %
contacts calibrated, 97 % calibrated (target 95 %; figures and times in ``docs/benchmarks.md``). Two
causes of the 87 % measured before (28 Nov) were the benchmark's and the preview's, not the physics':
the preview's start gave the setpoints of the grip's joints only (the twin gives every controller's: the
fingers' J4 and the wrist, pushed off theirs by the can, then sprang back in the preview), and the
preview model's base started level at its reference height and dropped 0.26 mm onto its wheels in the
transport's first 0.1 s (``shadow_twin/simulation/preview/base_rest.py``). With both mended, the
preview from the mock's exact state with the mock's own physics predicts the slide to 0.04 mm; from its
joint states and the captured pose, to 0.35 mm (standard deviation, 20 transports).
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
import time
from pathlib import Path

import mujoco
import numpy as np

import contacts
import grasp_calibration
from contacts_following import mock_settings
from shadow_twin.cli.up import ros_parameters
from shadow_twin.common.paths import config_path
from shadow_twin.control.controller import ControllerGains
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.cell.assembly import arm_joint_names, build_cell_spec, write_cell_mjcf
from shadow_twin.model.scene import SceneConfig
from shadow_twin.model.scene.build import add_objects
from shadow_twin.simulation.live.entities import EntityMotion, object_motion, set_object_motion
from shadow_twin.simulation.live.simulation import LiveSimulation
from shadow_twin.simulation.objects import CaptureConfig, MotionCapture
from shadow_twin.simulation.preview.checks import preview_goal
from shadow_twin.simulation.preview.config import PreviewConfig
from shadow_twin.simulation.preview.goal import PreviewGoal, StartState
from shadow_twin.simulation.preview.grasp import GraspWatch
from shadow_twin.simulation.preview.predictor import GoalPredictor

#: Target: prediction agrees with the outcome in this fraction of the transports.
AGREEMENT_MIN = 0.95
TRANSPORTS = 100
SEED = 37
#: rad: each of the three joints moves by at most this (uniform in +-).
REACH = 0.9
#: s: each leg (out, back) of a transport lasts a time drawn uniformly from this range.
DURATIONS = (0.3, 2.5)
#: The arm joints a transport moves: shoulder pan, shoulder lift, elbow.
MOVED = 3
#: s between the mock states judged (the preview's contact period).
CHECK_S = 0.01
#: m: the grasp check's slide limit here (off in config/preview.yaml; the issue's 'configured distance').
SLIDE_LIMIT = 0.01


def grasped(path: Path, scene: SceneConfig, overrides=None) -> LiveSimulation:
    """The cell holding the can, fingers up (module doc), with ``scene`` and ``overrides``."""
    sim = LiveSimulation(path, gains=config_path('controllers', 'cell.yaml'), overrides=overrides, scene=scene)
    sim.set_positions(dict(zip(arm_joint_names(), contacts.ARM_FINGERS_UP)))
    forearm = sim.model.body('rh_forearm').id
    at = sim.data.xpos[forearm] + sim.data.xmat[forearm].reshape(3, 3) @ contacts.CAN_IN_HAND
    can = EntityMotion(at, sim.data.xquat[forearm].copy())
    contacts.close_hand(sim, lambda: set_object_motion(sim, 'can', can))
    return sim


def transport(rng: np.random.Generator) -> JointTrajectory:
    """A random transport (module doc): out and back, times from its start, s."""
    names = list(arm_joint_names())
    start = np.array(contacts.ARM_FINGERS_UP, dtype=float)
    out = start.copy()
    out[:MOVED] += rng.uniform(-REACH, REACH, MOVED)
    legs = rng.uniform(*DURATIONS, 2)
    return JointTrajectory(names, [legs[0], legs[0] + legs[1]], [out.tolist(), start.tolist()],
                           velocities=[[0.0] * len(names)] * 2, accelerations=[[0.0] * len(names)] * 2)


def peak_acceleration(traj: JointTrajectory) -> float:
    """rad/s^2: the largest joint acceleration of ``traj`` (quintic legs: 5.77 x the move over the time squared)."""
    moves = np.abs(np.diff(np.vstack([contacts.ARM_FINGERS_UP, traj.positions]), axis=0)).max(axis=1)
    legs = np.diff(np.concatenate([[0.0], traj.times]))
    return float(np.max(10.0 / math.sqrt(3.0) * moves / legs ** 2))


class MockRuns:
    """The mock from its saved grasp state, one transport at a time; each judged by ``GraspWatch``."""

    def __init__(self, sim: LiveSimulation, config: PreviewConfig) -> None:
        self.sim, self.watch = sim, GraspWatch(sim.model, config)
        self.kind = mujoco.mjtState.mjSTATE_INTEGRATION
        self.saved = np.empty(mujoco.mj_stateSize(sim.model, self.kind))
        mujoco.mj_getState(sim.model, sim.data, self.saved, self.kind)

    def start(self, capture: MotionCapture) -> StartState:
        """The preview's start, as the twin takes it from the robots: the saved state's joint states, every
        controller's setpoints (``controller_state``'s reference: the grip's, and the joints the can pushes
        off theirs) and the can's pose as ``capture`` measures it (its noise)."""
        state = self.sim.joint_state()
        can = object_motion(self.sim, 'can')
        capture.reset()
        capture.measure(0.0, {'can': (can.position, can.quat)})
        (_, seen), = capture.delivered(capture.config.latency)
        _, names, desired, *_ = self.sim.reference()
        return StartState(dict(zip(state.names, state.position)), dict(zip(state.names, state.velocity)),
                          holds=dict(zip(names, desired.tolist())), objects={'can': [*seen.position, *seen.quat]})

    def run(self, traj: JointTrajectory, settle: float) -> tuple[bool, float]:
        """Run ``traj`` from the saved state for its duration and ``settle`` s; (lost, largest slide m)."""
        sim = self.sim
        mujoco.mj_setState(sim.model, sim.data, self.saved, self.kind)
        sim.set_trajectory(traj, start_time=sim.time)
        every = int(round(CHECK_S / sim.dt))
        times, states = [], []
        for k in range(int(round((traj.duration + settle) / CHECK_S))):
            sim.step(every)
            times.append((k + 1) * CHECK_S)
            states.append(sim.data.qpos.copy())
        slides, loss = self.watch.judge(np.array(times), np.array(states))
        mujoco.mj_setState(sim.model, sim.data, self.saved, self.kind)
        return loss is not None, max(slides.values(), default=0.0)


def predictor_for(scene: SceneConfig, config: PreviewConfig, overrides=None) -> GoalPredictor:
    """The preview on the cell's spec with ``scene``'s objects and the joint ``overrides`` (None: none)."""
    spec = build_cell_spec()
    add_objects(spec, scene)
    predictor = GoalPredictor(spec, ControllerGains.from_yaml(config_path('controllers', 'cell.yaml')), config)
    if overrides is not None:
        c = predictor.controller
        overrides.apply(predictor.model, c.joint_names, c.joint_map)
    return predictor


def mock_capture() -> CaptureConfig:
    """The mock hardware's motion capture (``config/mock_hardware.yaml``'s ``object_pose_*``)."""
    params = ros_parameters(config_path('mock_hardware.yaml'))
    return CaptureConfig(params['object_pose_rate'], params['object_pose_latency'],
                         params['object_pose_position_noise'], params['object_pose_angle_noise'])


def fitted_factors(check, args) -> tuple[float, float]:
    """(friction, mass) factors of the can the contact calibration recovered in this run (its section;
    run first when it has not run)."""
    if getattr(args, 'fitted_factors', None) is None:
        print('== the calibrated sim needs a contact calibration: the calibration section first', flush=True)
        grasp_calibration.run(check, args)
    return args.fitted_factors


def add_arguments(parser) -> None:
    parser.add_argument('--transports', type=int, default=TRANSPORTS, help='random transports (preview section)')


def run(check, args) -> None:
    """The preview section (module doc)."""
    count = getattr(args, 'transports', TRANSPORTS)
    config = dataclasses.replace(PreviewConfig.from_yaml(config_path('preview.yaml')), grasp_slide_limit=SLIDE_LIMIT)
    friction, mass, overrides = mock_settings()
    scene = SceneConfig.from_yaml(config_path('scene.yaml'))
    fitted = fitted_factors(check, args)
    print(f'== preview: {count} random transports of the held can (arm +-{REACH:g} rad in '
          f'{DURATIONS[0]:g}-{DURATIONS[1]:g} s a leg), previewed, then run on the mock; slide limit '
          f'{config.grasp_slide_limit * 1000:g} mm; the calibrated can: friction x{fitted[0]:.3f}, mass '
          f'x{fitted[1]:.3f} (the mock: x{friction:g}, x{mass:g})', flush=True)
    with tempfile.TemporaryDirectory() as folder:
        path, _ = write_cell_mjcf(None, Path(folder) / 'cell.xml')
        mock = MockRuns(grasped(path, scene.scaled(friction=friction, mass=mass), overrides), config)
    calibrated = scene.scaled(friction=fitted[0], mass=fitted[1])
    previews = {'uncalibrated': predictor_for(scene, config),
                'contacts calibrated': predictor_for(calibrated, config),
                'calibrated': predictor_for(calibrated, config, overrides)}
    capture = MotionCapture(['can'], mock_capture(), seed=SEED)
    rng = np.random.default_rng(SEED)
    rows = {name: [] for name in previews}
    slides = {name: [] for name in ('mock', *previews)}
    outcomes, spent = [], {name: [] for name in previews}
    for k in range(count):
        traj = transport(rng)
        start = mock.start(capture)
        lost, slide = mock.run(traj, config.settle_time)
        outcomes.append(lost)
        slides['mock'].append(slide)
        for name, predictor in previews.items():
            t0 = time.perf_counter()
            prediction = preview_goal(predictor, PreviewGoal(traj, start=start))
            spent[name].append(time.perf_counter() - t0)
            rows[name].append(any(f.kind == 'grasp' for f in prediction.failures))
            slides[name].append(max(prediction.grasp_slides.values(), default=math.nan))
        if k < 5 or (k + 1) % 20 == 0 or any(rows[n][-1] != lost for n in previews):
            print(f'  {k + 1:3d}: peak {peak_acceleration(traj):5.1f} rad/s^2, mock '
                  f'{"lost" if lost else "held"} (slid {slide * 1000:.1f} mm), predicted '
                  + ', '.join(f'{n} {"lost" if rows[n][-1] else "held"} ({slides[n][-1] * 1000:.1f} mm)'
                              for n in previews), flush=True)
    truth = np.array(outcomes)
    print(f'  the mock lost the can in {truth.sum()} of {count} transports')
    for name in previews:
        said = np.array(rows[name])
        agree = float(np.mean(said == truth))
        matrix = (f'predicted lost & lost {np.sum(said & truth)}, predicted lost & held {np.sum(said & ~truth)}, '
                  f'predicted held & lost {np.sum(~said & truth)}, predicted held & held {np.sum(~said & ~truth)}')
        line = (f'  {name} preview: agreement {agree * 100:.1f} % ({matrix}); '
                f'{np.median(spent[name]) * 1000:.0f} ms a preview (median)')
        if name == 'calibrated':
            check(agree >= AGREEMENT_MIN, f'{line} (target >= {AGREEMENT_MIN * 100:.0f} %)')
        else:
            print(line + ' (no target)', flush=True)


def main(argv=None) -> int:
    import argparse
    from checks import Checks
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    check = Checks()
    started = time.perf_counter()
    run(check, parser.parse_args(argv))
    print(f'{len(check.failed)} target(s) missed; {time.perf_counter() - started:.0f} s')
    return 1 if check.failed else 0


if __name__ == '__main__':
    import sys
    sys.exit(main())
