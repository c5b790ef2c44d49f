"""Joint efforts a model predicts along a measured motion, and the drives that report them.

One implementation of the effort model, shared by the arm's identification
(``shadow-twin identify``), the offline effort evaluation (``shadow-twin evaluate --effort``)
and the monitor's live external-force watch:

    tau = ID_rigid(q, qd, qdd) + armature * qdd + damping * qd + frictionloss * s      [N m]
    effort = tau / drive_gain + offset                                                [A or N m]

``ID_rigid`` is MuJoCo's inverse dynamics (``mj_inverse``) of the model with the named joints'
armature, damping and frictionloss set to zero and no constraint forces, so that the joint dynamics appear as separate,
linear terms (the classic rigid-body + friction model of arm identification: Khalil & Dombre,
*Modeling, Identification and Control of Robots*, 2002, ch. 12; Swevers et al., IEEE TRA 1997).
``s`` is the friction's presliding state in [-1, 1] (:mod:`shadow_twin.simulation.friction`): it
follows the sign of the motion over a small travel and keeps its value at rest. Joints of the model that
are not named (a hand on the flange, the mobile base) stay at their ``qpos0`` and at rest
unless a full ``qpos`` is given.

``ur_robot_driver`` publishes the joint currents (A) as ``effort`` on CB3 and e-Series alike:
:class:`DriveParameters` holds, per joint, the drive gain (N m/A) that turns them into torque,
the offset (in the recording's unit), the standard deviation of the identification's
validation residual (the monitor's threshold is k times it) and the presliding distance.
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
from shadow_twin.common.interpolation import shifted
from shadow_twin.common.files import read_text_limited, write_text_atomic
from shadow_twin.common.state_files import load_yaml
from shadow_twin.simulation.friction import PRESLIDING_DISTANCE, presliding_states

#: Units of a recording's ``effort``: joint current (ur_robot_driver) or joint torque.
EFFORT_UNITS = ('A', 'Nm')
#: s: the longest effort delay a drive-parameter file may hold (a drive reports within ms).
MAX_EFFORT_DELAY = 0.1
#: s: the effort delays ``shadow-twin identify`` tries per joint (the one whose fit of the joint's
#: efforts is best is kept).
EFFORT_DELAYS = (0.0, 0.002, 0.004, 0.006, 0.008, 0.010, 0.012, 0.016)


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

    def torques(self, qd: np.ndarray, qdd: np.ndarray, friction: np.ndarray) -> np.ndarray:
        """(N, J) N m: armature * qdd + damping * qd + frictionloss * s for (N, J) qd (rad/s), qdd
        (rad/s^2) and presliding states s (:func:`~shadow_twin.simulation.friction.presliding_states`)."""
        return self.armature * qdd + self.damping * qd + self.frictionloss * friction


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

    def torques(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray, friction: np.ndarray | None = None,
                qpos: np.ndarray | None = None) -> np.ndarray:
        """(N, J) N m: rigid-body torques plus the model's own joint dynamics (see the module doc);
        ``friction``: (N, J) the friction's presliding states; None: along ``q`` as one motion
        from rest with :data:`~shadow_twin.simulation.friction.PRESLIDING_DISTANCE`."""
        if friction is None:
            friction = presliding_states(q, PRESLIDING_DISTANCE)
        return self.rigid_torques(q, qd, qdd, qpos) + self.joint_dynamics.torques(
            np.atleast_2d(qd), np.atleast_2d(qdd), np.atleast_2d(friction))


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
        presliding_distance: {joint: rad, the travel over which its Coulomb friction builds up
            after a reversal} (identified; :data:`~shadow_twin.simulation.friction.PRESLIDING_DISTANCE`
            where not given).
        effort_delay: {joint: s, how late the effort is measured: the effort of stamp t is the
            torque of t - delay} (identified; 0 where not given).
    """

    effort_unit: str = 'A'
    drive_gains: dict[str, float] = field(default_factory=dict)
    offsets: dict[str, float] = field(default_factory=dict)
    residual_sigma: dict[str, float] = field(default_factory=dict)
    presliding_distance: dict[str, float] = field(default_factory=dict)
    effort_delay: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.effort_unit not in EFFORT_UNITS:
            raise ConfigError(f'effort_unit {self.effort_unit!r}: expected one of {", ".join(EFFORT_UNITS)}')
        for name, table in self._tables():
            for joint, value in table.items():
                if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                    raise ConfigError(f'{name} of {joint}: {value!r} is not a finite number')
        for name, table in (('drive_gain', self.drive_gains), ('presliding_distance', self.presliding_distance),
                            ('residual_sigma', self.residual_sigma)):
            for joint, value in table.items():
                if value <= 0.0:
                    raise ConfigError(f'{name} of {joint}: {value!r} must be > 0')
        for joint, value in self.effort_delay.items():
            if not 0.0 <= value <= MAX_EFFORT_DELAY:
                raise ConfigError(f'effort_delay of {joint}: {value!r} s must be within 0-{MAX_EFFORT_DELAY:g} s')

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
                ('residual_sigma', self.residual_sigma), ('presliding_distance', self.presliding_distance),
                ('effort_delay', self.effort_delay))

    def gains(self, joints: Sequence[str]) -> np.ndarray:
        """(J,) drive gains of ``joints`` (1.0 where not given)."""
        return np.array([float(self.drive_gains.get(j, 1.0)) for j in joints])

    def offset(self, joints: Sequence[str]) -> np.ndarray:
        """(J,) offsets of ``joints`` in ``effort_unit`` (0.0 where not given)."""
        return np.array([float(self.offsets.get(j, 0.0)) for j in joints])

    def presliding_distances(self, joints: Sequence[str]) -> np.ndarray:
        """(J,) rad: the presliding distances of ``joints`` (:data:`PRESLIDING_DISTANCE` where not given)."""
        return np.array([float(self.presliding_distance.get(j, PRESLIDING_DISTANCE)) for j in joints])

    def effort_delays(self, joints: Sequence[str]) -> np.ndarray:
        """(J,) s: how late the effort of ``joints`` is measured (0 where not given)."""
        return np.array([float(self.effort_delay.get(j, 0.0)) for j in joints])

    def to_torque(self, effort: np.ndarray, joints: Sequence[str]) -> np.ndarray:
        """(N, J) N m from (N, J) measured efforts in ``effort_unit``: (effort - offset) * gain."""
        return (np.asarray(effort, dtype=float) - self.offset(joints)) * self.gains(joints)

    def to_effort(self, torque: np.ndarray, joints: Sequence[str]) -> np.ndarray:
        """(N, J) in ``effort_unit`` from (N, J) N m: torque / gain + offset."""
        return np.asarray(torque, dtype=float) / self.gains(joints) + self.offset(joints)

    def measured(self, t: np.ndarray, predicted: np.ndarray, joints: Sequence[str]) -> np.ndarray:
        """(N, J) the efforts measured at the (N,) increasing stamps ``t`` (s) of one contiguous
        motion, from (N, J) efforts ``predicted`` at those stamps: each joint's read its
        :attr:`effort_delay` earlier (held at the first stamp). The measured effort lags the torque
        (a UR reports its currents a few ms late: measurement and filtering in a 500 Hz
        controller), so the effort measured at t is the torque of ``t - delay``."""
        return shifted(t, predicted, -self.effort_delays(joints))

    @classmethod
    def from_mapping(cls, data: Mapping) -> DriveParameters:
        """From ``{'effort_unit': 'A', 'joints': {name: {drive_gain, offset, residual_sigma,
        presliding_distance, effort_delay}}}``.

        Raises:
            ConfigError: not that layout, or a value that is not a finite number.
        """
        if not isinstance(data, Mapping) or not isinstance(data.get('joints', {}), Mapping):
            raise ConfigError("drive parameters: expected a mapping with 'effort_unit' and 'joints'")
        tables: dict[str, dict[str, float]] = {'drive_gain': {}, 'offset': {}, 'residual_sigma': {},
                                               'presliding_distance': {}, 'effort_delay': {}}
        for joint, entry in (data.get('joints') or {}).items():
            if not isinstance(entry, Mapping):
                raise ConfigError(f'drive parameters of {joint}: expected a mapping, got {entry!r}')
            unknown = set(entry) - set(tables)
            if 'friction_velocity' in unknown:      # written by identify before its friction had memory
                raise ConfigError(f'drive parameters of {joint}: friction_velocity is from an older '
                                  '`shadow-twin identify` (a smooth sign without memory): run identify again')
            if unknown:
                raise ConfigError(f'drive parameters of {joint}: unknown key(s) {", ".join(sorted(map(str, unknown)))}')
            for key, value in entry.items():
                tables[key][str(joint)] = value
        return cls(str(data.get('effort_unit', 'A')), tables['drive_gain'], tables['offset'], tables['residual_sigma'],
                   tables['presliding_distance'], tables['effort_delay'])

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
