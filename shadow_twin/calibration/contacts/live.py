"""The contact protocol's runs on the robots, planned on the cell's model (ROS-free): which arm joint turns
the hand, which way, and where the object stands on its fixture when a run starts.

The protocol's runs turn gravity about a palm axis in the hand-alone model (``tilt.py``). On the robots
the arm turns the hand, and the fixture with it (the protocol's ``live.scene``: the same post, plate and
object, fixed to the forearm). :func:`plan_live_tilt` takes the cell model with that scene at the
protocol's ``arm_start`` (the forearm upright, as the hand stands in the hand-alone model) and picks the
arm joint whose axis is nearest the palm's turning axis (of those, the one nearest the palm: the least
travel, so that the turning frame's own accelerations stay three orders of magnitude below gravity's
change at the protocol's rates), and the sign of its turn that tilts the palm as the protocol's runs do
(checked through :func:`~shadow_twin.calibration.contacts.bags.tilt_of`, the reading of the recorded
palm pose). :func:`tilt_trajectory` is the run's arm goal: that joint at the run's rate for its
duration, constant velocity after :data:`RAMP_S` (a push run's goal is the hand's instead,
:func:`~shadow_twin.calibration.contacts.tilt.push_trajectory`, the arm holding the start pose).

:func:`record_runs_on_robots` replays runs as the robots make them, for the fit of runs recorded on the
robots: on the bridge's live simulation of the robots' model (the cell reduced to arm and hand, the
protocol's live scene), the arm at the start pose, the object put on its fixture, the grip closed and
held, then the tilt goal, the palm's and the object's poses read each sample and turned into a record
by the code that reads a recording (:func:`~shadow_twin.calibration.contacts.bags.sampled_run`). A
hand-alone replay with gravity turned instead left the runs recorded on the mock cell 7.5 mm RMS from
their best fit (the grip on the arm sits 3 mm further from the palm, the first finger barely pressing).

Units: rad, rad/s, m, s.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
from scipy.spatial.transform import Rotation

from shadow_twin.calibration.contacts.bags import sampled_run, tilt_of
from shadow_twin.calibration.contacts.protocol import ContactProtocol, TiltRun
from shadow_twin.calibration.contacts.tilt import (RAMP_S, RunStart, TiltRecord, driven_angles, physics_state,
                                                  ramped_goal, restore, start_push)
from shadow_twin.common.errors import ConfigError
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.scene import SceneConfig
from shadow_twin.model.scene.config import WORLD_FRAMES
from shadow_twin.simulation.live.entities import EntityMotion, set_object_motion
from shadow_twin.simulation.live.simulation import LiveSimulation

#: Palm-frame axis vector of each protocol axis.
AXIS_VECTORS = {'x': (1.0, 0.0, 0.0), '-x': (-1.0, 0.0, 0.0), 'y': (0.0, 1.0, 0.0), '-y': (0.0, -1.0, 0.0)}
#: s between putting the object on its fixture and sending the grip's goal (a capture frame of it is checked).
PLACE_S = 0.2
#: s: how much later than its goal a push's start may be read (the pushing joint following its goal): replayed that
#: much longer.
PUSH_LAG_S = 0.5
#: deg: how far gravity may be off the palm's -z axis at the start pose.
START_TOLERANCE_DEG = 5.0


@dataclass(frozen=True)
class LiveTilt:
    """A run's motion on the robots: the arm ``joint`` turned by ``sign`` x the run's angle from ``start``
    ({arm joint: rad}); ``alignment`` (|cos| of the angle between its axis and the palm's turning axis,
    1 = parallel); ``object_pose`` (7,) the object on its fixture at ``start`` (x, y, z m, qw, qx, qy, qz:
    the world frame of the robots' model); ``lead`` (s) each goal's start is stamped ahead of its sending,
    which the run's timeline holds (:data:`PLACE_S`; the replay waits as long)."""

    joint: str
    sign: float
    start: dict[str, float]
    alignment: float
    object_pose: np.ndarray
    lead: float = 1.0


def plan_live_tilt(model: mujoco.MjModel, protocol: ContactProtocol, run: TiltRun,
                   arm_joints: list[str]) -> LiveTilt:
    """The :class:`LiveTilt` of ``run`` on ``model`` (the cell with the protocol's live scene).

    Args:
        model: the robots' model (MJCF joint names as ``arm_joints`` and the protocol's palm).
        protocol: with a ``live`` section (its ``arm_start``, ``scene``).
        run: the run (its axis).
        arm_joints: the arm's joints, of which one is turned.
    Raises:
        ConfigError: no ``live`` section; a joint, the palm or the object's frame missing from ``model``;
            no arm joint within 30 deg of the palm's turning axis (the start pose cannot make the run).
    """
    live = protocol.live
    if live is None:
        raise ConfigError('the contact protocol has no live section: it cannot be run on the robots')
    data = mujoco.MjData(model)
    for name, angle in live.arm_start.items():
        data.qpos[model.jnt_qposadr[_id(model, mujoco.mjtObj.mjOBJ_JOINT, name)]] = angle
    mujoco.mj_kinematics(model, data)
    palm = _id(model, mujoco.mjtObj.mjOBJ_BODY, protocol.palm)
    turning = data.xmat[palm].reshape(3, 3) @ np.array(AXIS_VECTORS[run.axis])
    upright = data.xmat[palm].reshape(3, 3).T @ np.array([0.0, 0.0, -1.0])      # gravity in the palm's frame
    off = float(np.degrees(np.arccos(np.clip(-upright[2], -1.0, 1.0))))
    if off > START_TOLERANCE_DEG:
        raise ConfigError(f'live.arm_start leaves gravity {off:.0f} deg off the palm\'s -z axis: the runs start with '
                          f'the hand as it stands in the protocol\'s scene (fingers up)')
    joints = [_id(model, mujoco.mjtObj.mjOBJ_JOINT, name) for name in arm_joints]
    cosines = [abs(float(data.xaxis[j] @ turning)) for j in joints]
    best = max(cosines)
    if best < np.cos(np.radians(30.0)):
        raise ConfigError(f'no arm joint turns the palm about its {run.axis} axis from live.arm_start (the nearest '
                          f'is {np.degrees(np.arccos(best)):.0f} deg off)')
    near = [k for k, c in enumerate(cosines) if c > best - 1e-6]
    k = min(near, key=lambda i: float(np.linalg.norm(data.xanchor[joints[i]] - data.xpos[palm])))
    name = arm_joints[k]
    sign = _tilt_sign(model, data, joints[k], palm, run.axis)
    return LiveTilt(name, sign, dict(live.arm_start), best, object_pose(model, data, live.scene, protocol.object))


def tilt_trajectory(plan: LiveTilt, run: TiltRun) -> JointTrajectory:
    """The arm goal of ``run``: ``plan.joint`` from its start at ``run.rate`` for ``run.duration``
    (:func:`~shadow_twin.calibration.contacts.tilt.ramped_goal`), the other arm joints holding the start."""
    names = list(plan.start)
    k = names.index(plan.joint)
    times, travel, speed = ramped_goal(run.duration, np.array([plan.sign * run.rate]))
    positions = np.tile([plan.start[n] for n in names], (len(times), 1))
    positions[:, k] += travel[:, 0]
    velocities = np.zeros_like(positions)
    velocities[:, k] = speed[:, 0]
    return JointTrajectory(names, times.tolist(), positions.tolist(), velocities=velocities.tolist())


def settle_on_robots(sim: LiveSimulation, protocol: ContactProtocol, plan: LiveTilt, grip: bool) -> RunStart:
    """Reset ``sim`` (the robots' model), hold the arm at ``plan.start``, put the object on its fixture, close
    the grip in ``close_s`` and hold ``settle_s`` (``grip``; else stand ``settle_open_s``), with the waits of
    the run's timeline (:data:`PLACE_S` and the goals' ``plan.lead``); returns where the runs with that grip
    start from (the controllers holding the arm's start and the grip's targets or the open hand, as the
    robots' trajectory controllers do after the runner's goals). Raises KeyError: a joint or the object
    missing from the model."""
    sim.reset()
    held = {**driven_angles(sim), **plan.start, **(protocol.grip if grip else {})}
    sim.set_positions(plan.start)
    set_object_motion(sim, protocol.object, EntityMotion(plan.object_pose[:3], plan.object_pose[3:]))
    sim.step(int(round((PLACE_S + plan.lead) / sim.dt)))           # the run's timeline: placed, the goal's lead
    if grip:        # the goal the runner sends: one point, at rest
        sim.set_trajectory(JointTrajectory(list(protocol.grip), [protocol.close_s], [list(protocol.grip.values())],
                                           velocities=[[0.0] * len(protocol.grip)]), start_time=sim.time)
    seconds = protocol.close_s + protocol.settle_s if grip else protocol.settle_open_s
    sim.step(int(round((seconds + plan.lead) / sim.dt)))
    return RunStart(physics_state(sim), held)


def run_on_robots(sim: LiveSimulation, protocol: ContactProtocol, run: TiltRun, plan: LiveTilt,
                  start: RunStart) -> TiltRecord:
    """Replay ``run`` on ``sim`` from ``start`` (:func:`settle_on_robots`): the tilt goal, the palm's and the
    object's poses and the grip's efforts each ``sample_s``, read as a recording is. Raises RecordingError:
    the palm never tilted (a model whose joint does not turn it)."""
    model, data = sim.model, sim.data
    restore(sim, start)
    palm, body = model.body(protocol.palm).id, model.body(protocol.object).id
    columns = [sim.joint_names.index(name) for name in protocol.grip]
    t0 = float(data.time)
    if run.push:
        start_push(sim, run)
        late = PUSH_LAG_S
    else:
        sim.set_trajectory(tilt_trajectory(plan, run), start_time=t0)
        # the run's start is read where the tilt passes TILT_START: a palm that starts tilted back (the grip and
        # the object's weight bend the wrist: -1.5 deg after 8 s of holding the can) passes it that much later
        late = max(0.0, -float(tilt_of(Rotation.from_quat([data.xquat[palm][[1, 2, 3, 0]]]), run.axis)[0])) / run.rate
    steps = max(1, int(round(protocol.sample_s / sim.dt)))
    count = int(np.ceil((run.duration + 2 * RAMP_S + late) / protocol.sample_s)) + 2
    times, palm_pos, palm_quat = np.empty(count), np.empty((count, 3)), np.empty((count, 4))
    obj_pos, efforts, angles = np.empty((count, 3)), np.empty((count, len(columns))), np.empty((count, len(columns)))
    for k in range(count):
        times[k] = float(data.time) - t0
        palm_pos[k], palm_quat[k] = data.xpos[palm], data.xquat[palm][[1, 2, 3, 0]]
        state = sim.joint_state()
        obj_pos[k], efforts[k], angles[k] = data.xpos[body], state.effort[columns], state.position[columns]
        sim.step(steps)
    return sampled_run(protocol, run, (times, palm_pos, Rotation.from_quat(palm_quat)), (times, obj_pos),
                       (times, efforts), f'the replay of {run.name} on the robots\' model', angles)


def record_runs_on_robots(sim: LiveSimulation, protocol: ContactProtocol, runs, plans) -> list[TiltRecord]:
    """Every run of ``runs`` on ``sim`` (the robots' model), each by its plan (``plans`` {run name:
    :class:`LiveTilt`}); the grip settles once per grip."""
    first = plans[runs[0].name]
    starts = {grip: settle_on_robots(sim, protocol, first, grip) for grip in sorted({run.grip for run in runs})}
    return [run_on_robots(sim, protocol, run, plans[run.name], starts[run.grip]) for run in runs]


def object_pose(model: mujoco.MjModel, data: mujoco.MjData, scene_file, name: str) -> np.ndarray:
    """(7,) the world pose of scene object ``name`` of ``scene_file`` (its pose in its frame composed with
    that body's pose in ``data``, kinematics done). Raises ConfigError: no such object, or a frame the
    model lacks."""
    objects = {o.name: o for o in SceneConfig.from_yaml(scene_file).objects}
    if name not in objects:
        raise ConfigError(f'{scene_file}: no object {name!r} (the protocol\'s object)')
    obj = objects[name]
    position, quat = np.array(obj.xyz, dtype=float), np.asarray(obj.quat, dtype=float)
    if obj.frame in WORLD_FRAMES:
        return np.concatenate([position, quat])
    body = _id(model, mujoco.mjtObj.mjOBJ_BODY, obj.frame)
    out_pos, out_quat = np.zeros(3), np.zeros(4)
    mujoco.mju_mulPose(out_pos, out_quat, data.xpos[body], data.xquat[body], position, quat)
    return np.concatenate([out_pos, out_quat])


def _tilt_sign(model: mujoco.MjModel, data: mujoco.MjData, joint: int, palm: int, axis: str) -> float:
    """+1 or -1: the turn of ``joint`` that tilts the palm positively about ``axis`` (as the recording is read)."""
    probe = mujoco.MjData(model)
    probe.qpos[:] = data.qpos
    probe.qpos[model.jnt_qposadr[joint]] += 0.05
    mujoco.mj_kinematics(model, probe)
    quats = np.array([data.xquat[palm], probe.xquat[palm]])[:, [1, 2, 3, 0]]      # scipy: x, y, z, w
    before, after = tilt_of(Rotation.from_quat(quats), axis)
    return 1.0 if after > before else -1.0


def _id(model: mujoco.MjModel, kind: mujoco.mjtObj, name: str) -> int:
    index = mujoco.mj_name2id(model, kind, name)
    if index < 0:
        raise ConfigError(f'the robots\' model has no {"joint" if kind == mujoco.mjtObj.mjOBJ_JOINT else "body"} '
                          f'{name!r} (the contact protocol names it)')
    return index
