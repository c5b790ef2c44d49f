"""Joint efforts a model predicts along a measured motion, and the drives that report them.

One implementation of the effort model, shared by the arm's identification
(``shadow-twin identify``), the offline effort evaluation (``shadow-twin evaluate --effort``)
and the monitor's live external-force watch:

    tau = ID_rigid(q, qd, qdd) + armature * qdd + damping * qd + frictionloss * s(qd)   [N m]
    effort = tau / drive_gain + offset                                                [A or N m]

``ID_rigid`` is MuJoCo's inverse dynamics (``mj_inverse``) of the model with the named joints'
armature, damping and frictionloss set to zero and no constraint forces, so that the joint dynamics appear as separate,
linear terms (the classic rigid-body + friction model of arm identification: Khalil & Dombre,
*Modeling, Identification and Control of Robots*, 2002, ch. 12; Swevers et al., IEEE TRA 1997).
``s(qd) = tanh(qd / friction_velocity)`` is a smooth sign (MuJoCo's frictionloss is a soft
constraint that also passes through zero over a small velocity band). Joints of the model that
are not named (a hand on the flange, the mobile base) stay at their ``qpos0`` and at rest
unless a full ``qpos`` is given.

``ur_robot_driver`` publishes the joint currents (A) as ``effort`` on CB3 and e-Series alike:
:class:`DriveParameters` holds, per joint, the drive gain (N m/A) that turns them into torque,
the offset (in the recording's unit) and the standard deviation of the identification's
validation residual (the monitor's threshold is k times it).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import mujoco
import numpy as np
import yaml

from shadow_twin.common.errors import ConfigError, ModelError
from shadow_twin.common.files import read_text_limited, write_text_atomic
from shadow_twin.common.state_files import load_yaml

#: Units of a recording's ``effort``: joint current (ur_robot_driver) or joint torque.
EFFORT_UNITS = ('A', 'Nm')
#: rad/s: the velocity over which the smooth sign of the Coulomb friction goes from -0.76 to 0.76.
FRICTION_VELOCITY = 0.005


def smooth_sign(qd: np.ndarray, friction_velocity: float = FRICTION_VELOCITY) -> np.ndarray:
    """tanh(qd / friction_velocity), the same shape as ``qd`` (rad/s)."""
    return np.tanh(np.asarray(qd, dtype=float) / friction_velocity)


@dataclass
class JointDynamics:
    """Per-joint terms linear in the joint's parameters, (J,) arrays in the order of ``joints``.

    Attributes:
        armature: kg m^2 (reflected rotor inertia), MJCF ``armature``.
        damping: N m s/rad (viscous friction), MJCF ``damping``.
        frictionloss: N m (Coulomb friction), MJCF ``frictionloss``.
    """

    armature: np.ndarray
    damping: np.ndarray
    frictionloss: np.ndarray

    def torques(self, qd: np.ndarray, qdd: np.ndarray, friction_velocity: float = FRICTION_VELOCITY) -> np.ndarray:
        """(N, J) N m: armature * qdd + damping * qd + frictionloss * s(qd) for (N, J) qd, qdd."""
        return self.armature * qdd + self.damping * qd + self.frictionloss * smooth_sign(qd, friction_velocity)


class InverseDynamics:
    """The efforts a model predicts at its joints ``joints`` along a motion.

    Args:
        model: compiled MJCF (copied; the original is not changed).
        joints: J MJCF hinge/slide joint names, the columns of every array.

    Raises:
        ModelError: a joint missing from the model or not a hinge/slide joint.
    """

    def __init__(self, model: mujoco.MjModel, joints: Sequence[str]) -> None:
        self.joints = list(joints)
        ids = []
        for name in self.joints:
            jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
            if jid < 0:
                raise ModelError(f'joint {name!r} is not in the model')
            if int(model.jnt_type[jid]) not in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
                raise ModelError(f'joint {name!r} is not a hinge or slide joint')
            ids.append(jid)
        self.qpos_adr = model.jnt_qposadr[ids].copy()
        self.dof_adr = model.jnt_dofadr[ids].copy()
        self.joint_dynamics = JointDynamics(model.dof_armature[self.dof_adr].copy(),
                                            model.dof_damping[self.dof_adr].copy(),
                                            model.dof_frictionloss[self.dof_adr].copy())
        self.model = rigid_copy(model, self.dof_adr)
        self.data = mujoco.MjData(self.model)

    def rigid_torques(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                      qpos: np.ndarray | None = None) -> np.ndarray:
        """(N, J) N m: the rigid-body inverse dynamics (no armature, damping or frictionloss at
        the named joints) for (N, J) positions (rad), velocities (rad/s), accelerations
        (rad/s^2); ``qpos``: (nq,) the other joints' positions (default ``qpos0``)."""
        q, qd, qdd = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (q, qd, qdd))
        m, d = self.model, self.data
        out = np.empty_like(q)
        d.qpos[:] = m.qpos0 if qpos is None else qpos
        d.qvel[:] = 0.0
        d.qacc[:] = 0.0
        for k in range(q.shape[0]):
            d.qpos[self.qpos_adr] = q[k]
            d.qvel[self.dof_adr] = qd[k]
            d.qacc[self.dof_adr] = qdd[k]
            mujoco.mj_inverse(m, d)
            out[k] = d.qfrc_inverse[self.dof_adr]
        return out

    def torques(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, qpos: np.ndarray | None = None,
                friction_velocity: float = FRICTION_VELOCITY) -> np.ndarray:
        """(N, J) N m: rigid-body torques plus the model's own joint dynamics (see the module doc)."""
        return self.rigid_torques(q, qd, qdd, qpos) + self.joint_dynamics.torques(
            np.atleast_2d(qd), np.atleast_2d(qdd), friction_velocity)


def rigid_copy(model: mujoco.MjModel, dof_adr: np.ndarray) -> mujoco.MjModel:
    """A copy of ``model`` whose dofs ``dof_adr`` have no armature, damping or frictionloss, and
    without constraint forces (contacts, joint limits: a measured posture may touch the model's
    floor plane, which would add thousands of N m that no drive delivered)."""
    rigid = copy_model(model)
    rigid.dof_armature[dof_adr] = 0.0
    rigid.dof_damping[dof_adr] = 0.0
    rigid.dof_frictionloss[dof_adr] = 0.0
    rigid.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    return rigid


def copy_model(model: mujoco.MjModel) -> mujoco.MjModel:
    """An independent copy of a compiled model."""
    return copy.deepcopy(model)


@dataclass
class DriveParameters:
    """What turns a recording's ``effort`` into joint torque, per joint (the file
    ``parameters.yaml`` of ``shadow-twin identify``).

    Attributes:
        effort_unit: ``A`` (joint current, ur_robot_driver) or ``Nm``.
        drive_gains: {joint: N m per effort unit} (1.0 for ``Nm``).
        offsets: {joint: effort offset, in ``effort_unit``}.
        residual_sigma: {joint: standard deviation of the validation residual, in
            ``effort_unit``} (empty until identified).
        friction_velocity: {joint: rad/s, the band of the Coulomb friction's smooth sign}
            (identified; :data:`FRICTION_VELOCITY` where not given).
    """

    effort_unit: str = 'A'
    drive_gains: dict[str, float] = field(default_factory=dict)
    offsets: dict[str, float] = field(default_factory=dict)
    residual_sigma: dict[str, float] = field(default_factory=dict)
    friction_velocity: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.effort_unit not in EFFORT_UNITS:
            raise ConfigError(f'effort_unit {self.effort_unit!r}: expected one of {", ".join(EFFORT_UNITS)}')
        for name, table in self._tables():
            for joint, value in table.items():
                if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                    raise ConfigError(f'{name} of {joint}: {value!r} is not a finite number')
        for name, table in (('drive_gain', self.drive_gains), ('friction_velocity', self.friction_velocity),
                            ('residual_sigma', self.residual_sigma)):
            for joint, value in table.items():
                if value <= 0.0:
                    raise ConfigError(f'{name} of {joint}: {value!r} must be > 0')

    def check_covers(self, joints: Sequence[str], source: str) -> None:
        """That these parameters serve ``joints`` (the watch's arm joints): in A, every joint has a
        drive gain (without one the current would be taken as N m, and the whole recording flagged).

        Raises:
            ConfigError: one line naming ``source`` and the joints it lacks (e.g. a file of another
            arm, an empty one).
        """
        if self.effort_unit != 'A':
            return
        missing = [j for j in joints if j not in self.drive_gains]
        if missing:
            raise ConfigError(f'{source}: no drive_gain for {", ".join(missing)} (effort in A; '
                              f'it names {", ".join(sorted(self.drive_gains)) or "no joint"})')

    def _tables(self) -> tuple[tuple[str, dict[str, float]], ...]:
        return (('drive_gain', self.drive_gains), ('offset', self.offsets),
                ('residual_sigma', self.residual_sigma), ('friction_velocity', self.friction_velocity))

    def gains(self, joints: Sequence[str]) -> np.ndarray:
        """(J,) drive gains of ``joints`` (1.0 where not given)."""
        return np.array([float(self.drive_gains.get(j, 1.0)) for j in joints])

    def offset(self, joints: Sequence[str]) -> np.ndarray:
        """(J,) offsets of ``joints`` in ``effort_unit`` (0.0 where not given)."""
        return np.array([float(self.offsets.get(j, 0.0)) for j in joints])

    def friction_velocities(self, joints: Sequence[str]) -> np.ndarray:
        """(J,) rad/s: the smooth sign's band of ``joints`` (:data:`FRICTION_VELOCITY` where not given)."""
        return np.array([float(self.friction_velocity.get(j, FRICTION_VELOCITY)) for j in joints])

    def to_torque(self, effort: np.ndarray, joints: Sequence[str]) -> np.ndarray:
        """(N, J) N m from (N, J) measured efforts in ``effort_unit``: (effort - offset) * gain."""
        return (np.asarray(effort, dtype=float) - self.offset(joints)) * self.gains(joints)

    def to_effort(self, torque: np.ndarray, joints: Sequence[str]) -> np.ndarray:
        """(N, J) in ``effort_unit`` from (N, J) N m: torque / gain + offset."""
        return np.asarray(torque, dtype=float) / self.gains(joints) + self.offset(joints)

    @classmethod
    def from_mapping(cls, data: Mapping) -> DriveParameters:
        """From ``{'effort_unit': 'A', 'joints': {name: {drive_gain, offset, residual_sigma,
        friction_velocity}}}``.

        Raises:
            ConfigError: not that layout, or a value that is not a finite number.
        """
        if not isinstance(data, Mapping) or not isinstance(data.get('joints', {}), Mapping):
            raise ConfigError("drive parameters: expected a mapping with 'effort_unit' and 'joints'")
        tables: dict[str, dict[str, float]] = {'drive_gain': {}, 'offset': {}, 'residual_sigma': {},
                                               'friction_velocity': {}}
        for joint, entry in (data.get('joints') or {}).items():
            if not isinstance(entry, Mapping):
                raise ConfigError(f'drive parameters of {joint}: expected a mapping, got {entry!r}')
            unknown = set(entry) - set(tables)
            if unknown:
                raise ConfigError(f'drive parameters of {joint}: unknown key(s) {", ".join(sorted(map(str, unknown)))}')
            for key, value in entry.items():
                tables[key][str(joint)] = value
        return cls(str(data.get('effort_unit', 'A')), tables['drive_gain'], tables['offset'], tables['residual_sigma'],
                   tables['friction_velocity'])

    @classmethod
    def from_yaml(cls, path: str | Path) -> DriveParameters:
        """Read ``parameters.yaml``.

        Raises:
            ConfigError: missing or empty file, malformed YAML (one line), bad layout or values.
        """
        path = Path(path)
        try:
            data = load_yaml(read_text_limited(path, 'drive parameters', 1024 * 1024))
        except (RecursionError, MemoryError) as exc:
            raise ConfigError(f'{path}: malformed YAML: nested too deep to read ({type(exc).__name__})') from None
        except FileNotFoundError:
            raise ConfigError(f'{path}: no such file') from None
        except OSError as exc:
            raise ConfigError(f'{path}: cannot read: {exc}') from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, 'problem_mark', None)
            where = f' (line {mark.line + 1})' if mark is not None else ''
            raise ConfigError(f'{path}: malformed YAML{where}: {getattr(exc, "problem", exc)}') from None
        if not data:
            raise ConfigError(f'{path}: empty (expected effort_unit and joints, as shadow-twin identify writes)')
        return cls.from_mapping(data)

    def to_mapping(self) -> dict:
        """The YAML layout of :meth:`from_mapping`."""
        joints = sorted(set().union(*(table for _, table in self._tables())))
        table = {}
        for j in joints:
            entry = {}
            for key, source in self._tables():
                if j in source:
                    entry[key] = float(source[j])
            table[j] = entry
        return {'effort_unit': self.effort_unit, 'joints': table}

    def yaml_text(self, header: str = '') -> str:
        """The file's text; ``header``: comment lines put first."""
        comment = ''.join(f'# {line}\n' for line in header.splitlines())
        return comment + yaml.safe_dump(self.to_mapping(), sort_keys=False)

    def write_yaml(self, path: str | Path, header: str = '') -> Path:
        """Write :meth:`yaml_text` atomically. Returns the path."""
        return write_text_atomic(Path(path), self.yaml_text(header))
