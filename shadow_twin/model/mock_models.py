"""Mock hardware models of the cell's robots, for the mock UR5 and MiR250, benchmarks and tests: the
cell reduced to its arm (:func:`write_arm_stand_in_mjcf`), to its base (:func:`write_base_stand_in_mjcf`)
or to its arm and hand (:func:`write_hand_stand_in_mjcf`).
The functions keep their ``stand_in`` names, which tests and benchmarks import.

See :mod:`shadow_twin.model.cell.assembly` for the cell they are cut from.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Mapping

import mujoco
import numpy as np

from shadow_twin.common.errors import ConfigError, ModelError, one_line
from shadow_twin.common.files import write_text_atomic
from shadow_twin.model.cell.assembly import build_cell_spec, compile_cell, hand_model_file, summary
from shadow_twin.model.cell.config import CellConfig
from shadow_twin.model.cell.names import arm_joint_names


def write_arm_stand_in_mjcf(config: CellConfig | str | os.PathLike | None, out_path: str | os.PathLike,
                            hand_path: str | os.PathLike | None = None, arm_prefix: str | None = None,
                            gravity_compensation: bool = True) -> Path:
    """Write the cell reduced to its arm, the mock UR5's model (the UR5 carrying the hand), atomically.

    The cell's MJCF (:func:`build_cell_spec`: same masses, geometry, options and timestep) with
    every joint but the six UR5 joints (:func:`arm_joint_names`) removed: the base's free joint
    (the base welded to the world at its start pose), the wheel and caster joints and the hand's
    joints (the hand rigid in its ``qpos0`` posture, its mass and inertia still on the flange),
    and with them the tendons, actuators, sensors and equality constraints on removed joints
    and every keyframe (their state vectors no longer fit). Its joints and actuators are the
    UR5's six, named as in the cell, so it loads with the UR's drive gains (config/controllers/ur5.yaml)
    in the mock UR's bridge. Bare ur5.xml lacks the hand on the flange (the built-in hand: 3.79 kg):
    simulated offline (each with its gains) on the sweeps of config/trajectories/ur5.yaml, the
    mock UR5's arm joint positions are 14 to 48 times closer (RMS) to the cell's than ur5.xml's
    (shoulder pan, lift, elbow and wrist 1 sweeps measured; test/core/model/test_cell_files.py checks the
    fast shoulder-lift sweep, without the gravity compensation). With ``gravity_compensation`` (the mock
    UR5's) its servos compensate the weight of the arm and the hand (:func:`_compensate_gravity`), as the
    real UR's controller does and the cell's model does not.

    Args:
        config: the cell figures, or the path of a cell YAML (:meth:`CellConfig.from_yaml`);
            None: the :class:`CellConfig` defaults.
        out_path: the MJCF to write (its folder is created; an existing file is replaced).
        hand_path, arm_prefix: as for :func:`build_cell_spec`.
        gravity_compensation: the servos compensate gravity (default), or are the model's PD alone.
    Returns:
        The path written.
    Raises:
        ConfigError: a bad cell YAML, ``out_path`` is a directory or the hand model itself,
            or cannot be written.
        ModelError: see :func:`build_cell_spec`; the reduced model does not compile.
    """
    def reduce(spec: mujoco.MjSpec, prefix: str) -> str:
        _keep_joints(spec, set(arm_joint_names(prefix)))
        if not gravity_compensation:
            return 'with only the UR5 joints, the base welded to the world and the hand rigid'
        _compensate_gravity(spec)
        return ('with only the UR5 joints, the base welded to the world, the hand rigid and the servos '
                'compensating gravity')
    return _write_mock_model(config, out_path, hand_path, arm_prefix, 'arm', reduce)


def _compensate_gravity(spec: mujoco.MjSpec) -> None:
    """Let every joint's servo of ``spec`` compensate the weight of every body (MuJoCo's body ``gravcomp`` 1
    with joint ``actgravcomp``: the compensating torque goes through the joint's actuator, within its force
    range, and counts in its effort), as the UR's controller does with its model and payload: the real arm
    holds its setpoint, where the simulated servo (a PD, config/controllers/ur5.yaml) alone stands up to 1 mrad
    below it. That difference jolted the hand: a JTC accepting a goal stamped ahead holds the measured state
    (closed loop, ros2_controllers' rule, as the bridge does), so the sagging arm sank another 1 mrad and
    shook a held can loose (docs/benchmarks.md, the contact protocol on the robots). For a model whose
    joints are all an arm's: any other joint would feel its bodies weightless."""
    for body in spec.bodies:
        if body.name != 'world':
            body.gravcomp = 1.0
    for joint in spec.joints:
        joint.actgravcomp = True


def write_base_stand_in_mjcf(config: CellConfig | str | os.PathLike | None, out_path: str | os.PathLike,
                             arm_pose: Mapping[str, float] | None = None, hand_path: str | os.PathLike | None = None,
                             arm_prefix: str | None = None, arm_moves: bool = False) -> Path:
    """Write the cell reduced to its base, the mock MiR250's model (the MiR250 carrying the cabinet,
    the arm and the hand), atomically.

    The counterpart of :func:`write_arm_stand_in_mjcf`: the cell's MJCF with only the base's joints
    (its free joint, the drive wheels and the casters) and their actuators; the arm is rigid in
    ``arm_pose`` ({arm joint: rad}, e.g. the calibration protocol's rest pose; joints not named stay
    at 0) and the hand in its ``qpos0`` posture. Bare mir250.xml lacks the 15 kg cabinet, the UR5 and
    the hand on its top, which change the load on the wheels (and so when they slip) by a third.

    With ``arm_moves`` the arm keeps its six joints and their servos instead, starting in ``arm_pose``
    (keyframe 0; without a pose at ``qpos0``, where the mock UR5 starts): a bridge running it
    with ``follow_joint_states_topic`` set to the mock UR5's joint states moves its arm as that
    one moves, so that its base feels the arm swing as the real cell's does (the protocol's runs CY
    and IY).

    Args and errors as :func:`write_arm_stand_in_mjcf`; ConfigError also for a pose of an unknown joint.
    """
    def reduce(spec: mujoco.MjSpec, prefix: str) -> str:
        arm = arm_joint_names(prefix)
        unknown = sorted(set(arm_pose or {}) - set(arm))
        if unknown:
            raise ConfigError(f'mock base model: {unknown} are not arm joints ({arm})')
        keep = ({j.name for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_FREE}
                | {j.name for j in spec.joints if 'wheel' in j.name or 'caster' in j.name})
        if arm_moves:
            _keep_joints(spec, keep | set(arm))
            if arm_pose:        # keyframe 0 in the pose (without one the arm starts at qpos0)
                model = compile_cell(spec)
                qpos = model.qpos0.copy()
                for name, angle in arm_pose.items():
                    qpos[model.jnt_qposadr[model.joint(name).id]] = float(angle)
                spec.add_key(name='arm_pose', qpos=qpos)
            return f'with the base and arm joints (the arm starting at {dict(arm_pose or {})} rad) and the hand rigid'
        for name, angle in (arm_pose or {}).items():
            _freeze_hinge(spec.joint(name), float(angle))
        _keep_joints(spec, keep)
        return f'with only the base joints, the arm rigid at {dict(arm_pose or {})} rad and the hand rigid'
    return _write_mock_model(config, out_path, hand_path, arm_prefix, 'base', reduce)


def write_hand_stand_in_mjcf(config: CellConfig | str | os.PathLike | None, out_path: str | os.PathLike,
                             hand_path: str | os.PathLike | None = None, arm_prefix: str | None = None) -> Path:
    """Write the cell reduced to its arm and hand, the cell's mock hand's model (the hand on the UR5 that
    carries it), atomically.

    The cell's MJCF with every joint of the base removed (its free joint: the base welded to the world
    at its start pose; the wheels and casters) and the UR5's and the hand's joints kept, with their
    servos. The mock hand's bridge runs it with ``follow_joint_states_topic`` on the mock UR5's joint
    states and ``published_joints`` on the hand's: its arm turns as that one turns, so that the objects
    of its scene (``scene_file``: in the hand, on a fixture on the forearm) feel the arm move, and it
    publishes the hand's joint states alone, as a real hand driver does. Its world is the base's frame
    where the base started: a mock MiR250 that drives does not move it.

    Args and errors as :func:`write_arm_stand_in_mjcf`.
    """
    def reduce(spec: mujoco.MjSpec, prefix: str) -> str:
        base = {j.name for j in spec.joints if j.type == mujoco.mjtJoint.mjJNT_FREE
                or 'wheel' in j.name or 'caster' in j.name}
        _keep_joints(spec, {j.name for j in spec.joints} - base)
        return 'with the UR5 and hand joints, the base welded to the world'
    return _write_mock_model(config, out_path, hand_path, arm_prefix, 'hand', reduce)


def _write_mock_model(config: CellConfig | str | os.PathLike | None, out_path: str | os.PathLike,
                      hand_path: str | os.PathLike | None, arm_prefix: str | None, what: str,
                      reduce: Callable[[mujoco.MjSpec, str], str]) -> Path:
    """Build the cell's spec, let ``reduce(spec, arm prefix)`` cut it down (it returns the header's
    description), compile it and write it to ``out_path`` atomically: the body of the ``what``
    (``'arm'`` / ``'base'`` / ``'hand'``) mock model writers, whose errors it raises. The model keeps its name
    ``shadow_twin_<what>_stand_in``."""
    if config is not None and not isinstance(config, CellConfig):
        config = CellConfig.from_yaml(config)
    config = config or CellConfig()
    out = Path(out_path)
    hand_file = hand_model_file(config, hand_path)
    if out.is_dir():
        raise ConfigError(f'{out} is a directory')
    if out.exists() and out.resolve() == hand_file.resolve():
        raise ConfigError(f'refusing to overwrite the hand model {hand_file}')
    prefix = config.arm.prefix if arm_prefix is None else arm_prefix
    spec = build_cell_spec(config, hand_file, prefix)
    description = reduce(spec, prefix)
    spec.modelname = f'shadow_twin_{what}_stand_in'
    model = compile_cell(spec)
    try:
        xml = spec.to_xml()
    except Exception as exc:
        raise ModelError(f'the mock {what} model cannot be written as MJCF: {one_line(exc)}') from None
    header = (f'<!-- shadow_twin mock {what} model: the cell (arm prefix {prefix!r}, hand {hand_file}) {description}. '
              f'{summary(model)}. -->\n')
    try:
        return write_text_atomic(out, header + xml)
    except OSError as exc:
        raise ConfigError(f'cannot write {out}: {exc.strerror or exc}') from None


def _freeze_hinge(joint, angle: float) -> None:
    """Turn the body of hinge ``joint`` (an MjsJoint) by ``angle`` rad about the joint's axis through
    the joint's position, in its parent's frame, so that deleting the joint leaves the body where
    the joint at ``angle`` held it: quat <- quat * q(axis, angle), pos <- pos + R (a - R(axis, angle) a)."""
    body = joint.parent
    turn, rotated, moved = np.zeros(4), np.zeros(3), np.zeros(3)
    axis = np.asarray(joint.axis, dtype=float)
    mujoco.mju_axisAngle2Quat(turn, axis / np.linalg.norm(axis), angle)
    anchor = np.asarray(joint.pos, dtype=float)
    mujoco.mju_rotVecQuat(rotated, anchor, turn)
    mujoco.mju_rotVecQuat(moved, anchor - rotated, np.asarray(body.quat, dtype=float))
    quat = np.zeros(4)
    mujoco.mju_mulQuat(quat, np.asarray(body.quat, dtype=float), turn)
    body.quat = quat
    body.pos = np.asarray(body.pos, dtype=float) + moved


def _keep_joints(spec: mujoco.MjSpec, keep: set[str]) -> None:
    """Delete every joint of ``spec`` not in ``keep``, the tendons over them, the actuators, sensors
    and equality constraints on deleted joints or tendons (or on deleted actuators), and the keyframes."""
    joints = [j for j in spec.joints if j.name not in keep]
    joint_names = {j.name for j in joints} - {''}
    tendons = [t for t in spec.tendons
               if any(w.type == mujoco.mjtWrap.mjWRAP_JOINT and w.target.name in joint_names for w in t.path)]
    tendon_names = {t.name for t in tendons} - {''}
    driven = {mujoco.mjtTrn.mjTRN_JOINT: joint_names, mujoco.mjtTrn.mjTRN_JOINTINPARENT: joint_names,
              mujoco.mjtTrn.mjTRN_TENDON: tendon_names}
    actuators = [a for a in spec.actuators if a.target in driven.get(a.trntype, ())]
    gone = {mujoco.mjtObj.mjOBJ_JOINT: joint_names, mujoco.mjtObj.mjOBJ_TENDON: tendon_names,
            mujoco.mjtObj.mjOBJ_ACTUATOR: {a.name for a in actuators} - {''}}
    sensors = [s for s in spec.sensors if s.objname in gone.get(s.objtype, ()) or s.refname in gone.get(s.reftype, ())]
    on = {mujoco.mjtEq.mjEQ_JOINT: joint_names, mujoco.mjtEq.mjEQ_TENDON: tendon_names}
    equalities = [e for e in spec.equalities if {e.name1, e.name2} & on.get(e.type, set())]
    for element in sensors + equalities + actuators + tendons + joints + list(spec.keys):
        spec.delete(element)
