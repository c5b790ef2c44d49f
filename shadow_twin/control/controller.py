"""Simulated controllers: drive the MuJoCo model the way the real robot is driven.

One implementation serves the live bridge (a setpoint each physics step) and the
offline calibration (a whole control sequence for ``mujoco.rollout``): both
call :meth:`SimController.ctrl`.

* Torque motors (``<motor>``, e.g. Shadow's hand) are driven by a per-joint
  effort PD controller, as ros_control's ``effort_controllers/JointTrajectoryController``
  drives the real hand: effort = p*(q_des - q) + d*(qd_des - qd) (the drive gains,
  from YAML; Shadow's ``rh_trajectory_controller.yaml`` uses p 4.0, d 0.1). A motor on
  a fixed tendon (the J0 actuator of an under-actuated J1+J2 pair) receives
  the sum of its joints' efforts, as Shadow's ``mujoco_ros_control`` does.
  The PD law is installed *into* the model as an affine-bias actuator
  (force = kp*ctrl - kp*L - kd*dL/dt, L the joint or tendon length) with
  ctrl = q_des + (kd/kp)*qd_des, which is algebraically the same law but
  evaluated by MuJoCo inside every step, so a control sequence fixed in advance
  is exact closed-loop PD (and the velocity term is integrated implicitly
  with the ``implicitfast`` integrator).
* MJCF position actuators are used as they are (ctrl = q_des); MJCF velocity
  actuators get ctrl = qd_des, and so do MJCF ``<intvelocity>`` actuators (the integral
  part of a PI velocity loop, e.g. the MiR250's wheel drives: torque = kp (act - q), the
  activation ``act`` the integral of ctrl). Their activation is a position setpoint:
  :meth:`SimController.hold_integrators` sets it to where the joint is, whenever a state is
  placed rather than simulated, so a placed wheel holds where it is put.

The integral term is not simulated: a non-zero ``i`` is rejected.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import mujoco
import numpy as np
import yaml

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.globs import first_match
from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.model.calibratable import ParameterTarget

DEFAULT_GAINS = {'p': 4.0, 'i': 0.0, 'd': 0.1}
EFFORT_PID, POSITION, VELOCITY = 'effort_pid', 'position', 'velocity'


@dataclass(frozen=True)
class PidGains:
    """Gains of one joint's effort PID: p (N m/rad), i (N m/(rad s)), d (N m s/rad)."""

    p: float
    i: float = 0.0
    d: float = 0.0


class ControllerGains:
    """Drive gains: per-joint PID gains from YAML, by exact ROS joint name or glob pattern.

    YAML::

        controller:
          default: {p: 4.0, i: 0.0, d: 0.1}
          gains:
            rh_TH*: {p: 4.0, d: 0.2}
            rh_WRJ1: {p: 10.0, d: 0.1}

    Shadow's ros_control form (``<controller>: {gains: {joint: {p, i, d}}}``) is
    accepted too. An exact name wins over a pattern; among patterns the last wins.
    """

    def __init__(self, gains: dict[str, dict] | None = None,
                 default: dict | None = None) -> None:
        self.default = self._parse('default', {**DEFAULT_GAINS, **(default or {})})
        self.entries = {key: self._parse(key, value, self.default) for key, value in (gains or {}).items()}

    @staticmethod
    def _parse(key: str, value, base: PidGains | None = None) -> PidGains:
        if not isinstance(value, dict):
            raise ConfigError(f'gains for {key!r} must be a mapping with p, i, d')
        unknown = set(value) - {'p', 'i', 'd', 'i_clamp', 'antiwindup'}
        if unknown:
            raise ConfigError(f'gains for {key!r}: unknown key(s) {sorted(unknown)}')
        try:
            gains = PidGains(float(value.get('p', base.p if base else DEFAULT_GAINS['p'])),
                             float(value.get('i', 0.0)),
                             float(value.get('d', base.d if base else DEFAULT_GAINS['d'])))
        except (TypeError, ValueError):
            raise ConfigError(f'gains for {key!r} must be numbers') from None
        if not gains.p > 0 or gains.d < 0:
            raise ConfigError(f'gains for {key!r}: need p > 0 and d >= 0, got {gains}')
        if gains.i != 0.0:
            raise ConfigError(f'gains for {key!r}: the simulated controller has no integral term; set i: 0')
        return gains

    @classmethod
    def from_yaml(cls, path: str | Path | None, _seen: tuple[Path, ...] = ()) -> 'ControllerGains':
        """Load gains from YAML (see class doc); None gives the defaults (p 4.0, d 0.1).

        A top-level ``include: [file, ...]`` (paths relative to this file) loads those files
        first; this file's ``default`` and ``gains`` come on top (a later file's entry for the
        same key wins; the default is the last one given). The cell's gains are the hand's and
        the arm's files included by ``config/controllers/cell.yaml``.

        Raises ConfigError: a missing or unreadable file, an include cycle, bad gains.
        """
        if path is None:
            return cls()
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f'controller gains file not found: {path}')
        if path.resolve() in _seen:
            raise ConfigError(f'controller gains file {path} includes itself')
        data = yaml.safe_load(path.read_text()) or {}
        includes = data.pop('include', []) if isinstance(data, dict) else []
        if isinstance(includes, str) or not isinstance(includes, list):
            raise ConfigError(f'{path}: include must be a list of gains files')
        own = cls.from_dict(data, source=str(path)) if data else cls()
        if not includes:
            return own
        merged = cls()
        for name in includes:
            sub = cls.from_yaml(path.parent / str(name), _seen + (path.resolve(),))
            merged.entries.update(sub.entries)
            merged.default = sub.default
        merged.entries.update(own.entries)
        if data and (data.get('controller') or {}).get('default') is not None:
            merged.default = own.default
        return merged

    @classmethod
    def from_dict(cls, data: dict, source: str = 'gains') -> 'ControllerGains':
        """Build from the parsed YAML mapping (see class doc)."""
        if 'controller' in data:
            data = data['controller']
        elif 'gains' not in data:  # ros_control style: one top-level controller key
            nested = [v for v in data.values() if isinstance(v, dict) and 'gains' in v]
            if len(nested) == 1:
                data = nested[0]
        if not isinstance(data, dict) or not isinstance(data.get('gains', {}), dict):
            raise ConfigError(f'{source}: expected a "controller" mapping with "gains"')
        return cls(data.get('gains'), data.get('default'))

    def for_joint(self, name: str) -> PidGains:
        """Gains of ROS joint ``name``."""
        if name in self.entries:
            return self.entries[name]
        return first_match(name, reversed(list(self.entries.items())), self.default)   # the last glob wins

    def to_dict(self, joints: list[str]) -> dict:
        """YAML-ready ``controller`` mapping with explicit gains for ``joints``."""
        return {'controller': {'gains': {j: {'p': self.for_joint(j).p, 'i': 0.0, 'd': self.for_joint(j).d}
                                         for j in joints}}}


@dataclass
class ActuatorDrive:
    """How one actuator is driven: its mode and the joints (indices into the
    controller's joint list) it moves, with their tendon coefficients."""

    actuator: int
    mode: str
    joints: np.ndarray
    coefs: np.ndarray


class SimController:
    """Maps desired joint states to MuJoCo ``ctrl`` and reads joint states back.

    Construct it on a compiled model: motors are converted in place to the PD
    servo form (see module doc) with gains from ``gains``. Copies of the model
    made afterwards (``copy.copy``) carry the conversion.

    Args:
        model: compiled ``MjModel`` (modified in place).
        gains: the drive gains, per-joint PID gains (ROS names).
        joint_map: ROS <-> MJCF joint names (identity by default).
    Raises:
        ConfigError: unsupported actuator type, motor gear != 1, or J1/J2 gains
        that differ on a shared tendon actuator.
    """

    def __init__(self, model: mujoco.MjModel, gains: ControllerGains | None = None,
                 joint_map: JointNameMap | None = None) -> None:
        self.gains = gains or ControllerGains()
        self.joint_map = joint_map or JointNameMap()
        self.drives: list[ActuatorDrive] = []
        joint_ids: list[int] = []
        raw = []
        for a in range(model.nu):
            ids, coefs = self._transmission(model, a)
            raw.append((a, ids, coefs))
            joint_ids.extend(j for j in ids if j not in joint_ids)
        joint_ids.sort()
        #: MJCF joint ids of the controlled joints, model order.
        self.joint_ids = np.array(joint_ids, dtype=int)
        #: ROS names of the controlled joints (order of every array here).
        self.joint_names = [self.joint_map.to_ros(model.joint(j).name) for j in joint_ids]
        self.qpos_adr = model.jnt_qposadr[self.joint_ids]
        self.dof_adr = model.jnt_dofadr[self.joint_ids]
        for a, ids, coefs in raw:
            mode = self._mode(model, a)
            local = np.array([joint_ids.index(j) for j in ids])
            self.drives.append(ActuatorDrive(a, mode, local, np.asarray(coefs, dtype=float)))
            if mode == EFFORT_PID:
                self._install_pd(model, a, [self.joint_names[k] for k in local])
        self._build_ctrl_map(model.nu)

    # -- construction helpers ------------------------------------------------------------
    def _build_ctrl_map(self, nu: int) -> None:
        """The drives as arrays, so :meth:`ctrl` is two matrix products (no loop over actuators):
        ``_coupling`` (J, nu) tendon coefficients, and per actuator whether its ctrl takes the
        desired position (PD servos, position servos) and the desired velocity as such (velocity
        servos); PD servos add ``kd / kp`` times the velocity, read from the model at each call."""
        self._coupling = np.zeros((len(self.joint_names), nu))
        self._takes_position = np.zeros(nu)
        self._takes_velocity = np.zeros(nu)
        for drive in self.drives:
            self._coupling[drive.joints, drive.actuator] = drive.coefs
            self._takes_position[drive.actuator] = float(drive.mode != VELOCITY)
            self._takes_velocity[drive.actuator] = float(drive.mode == VELOCITY)
        self._pd_actuators = np.array([d.actuator for d in self.drives if d.mode == EFFORT_PID], dtype=int)

    @staticmethod
    def _transmission(model, a) -> tuple[list[int], list[float]]:
        trn = model.actuator_trntype[a]
        target = model.actuator_trnid[a, 0]
        if trn == mujoco.mjtTrn.mjTRN_JOINT:
            return [int(target)], [1.0]
        if trn == mujoco.mjtTrn.mjTRN_TENDON:
            start, count = model.tendon_adr[target], model.tendon_num[target]
            ids, coefs = [], []
            for w in range(start, start + count):
                if model.wrap_type[w] != mujoco.mjtWrap.mjWRAP_JOINT:
                    raise ConfigError(f'actuator {model.actuator(a).name!r}: only fixed (joint) tendons are supported')
                ids.append(int(model.wrap_objid[w]))
                coefs.append(float(model.wrap_prm[w]))
            return ids, coefs
        raise ConfigError(f'actuator {model.actuator(a).name!r}: transmission type {trn} is not supported')

    @staticmethod
    def _is_integral(model, a) -> bool:
        """True for an MJCF ``<intvelocity>`` actuator on a joint (integrator dynamics, position bias)."""
        return (model.actuator_dyntype[a] == mujoco.mjtDyn.mjDYN_INTEGRATOR
                and model.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
                and model.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
                and model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE
                and model.actuator_biasprm[a, 1] < 0 and model.actuator_biasprm[a, 2] == 0)

    @staticmethod
    def _mode(model, a) -> str:
        name = model.actuator(a).name
        if SimController._is_integral(model, a):
            return VELOCITY
        if model.actuator_dyntype[a] != mujoco.mjtDyn.mjDYN_NONE or model.actuator_gaintype[a] != mujoco.mjtGain.mjGAIN_FIXED:
            raise ConfigError(f'actuator {name!r}: only motors, position/velocity servos and intvelocity '
                              'actuators are supported')
        bias = model.actuator_biasprm[a]
        if model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_NONE:
            if not np.isclose(model.actuator_gear[a, 0], 1.0):
                raise ConfigError(f'motor {name!r}: gear must be 1 for the simulated effort controller')
            return EFFORT_PID
        if model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE:
            if bias[1] < 0:
                return POSITION
            if bias[1] == 0 and bias[2] < 0:
                return VELOCITY
        raise ConfigError(f'actuator {name!r}: bias is neither a position nor a velocity servo')

    def _install_pd(self, model, a, joints: list[str]) -> None:
        gains = {self.gains.for_joint(j) for j in joints}
        if len(gains) > 1:
            raise ConfigError(f'actuator {model.actuator(a).name!r} drives {joints} whose gains differ '
                              f'({sorted(map(str, gains))}); one tendon actuator needs one p and d')
        g = gains.pop()
        if model.actuator_ctrllimited[a]:
            # A motor's ctrlrange limits torque; ctrl becomes a set point, so the
            # limit moves to the actuator force.
            model.actuator_forcelimited[a] = 1
            model.actuator_forcerange[a] = model.actuator_ctrlrange[a]
            model.actuator_ctrllimited[a] = 0
        model.actuator_biastype[a] = mujoco.mjtBias.mjBIAS_AFFINE
        model.actuator_gainprm[a, 0] = g.p
        model.actuator_biasprm[a, :3] = (0.0, -g.p, -g.d)

    # -- runtime ---------------------------------------------------------------------------
    def ctrl(self, model: mujoco.MjModel, q_des: np.ndarray, qd_des: np.ndarray) -> np.ndarray:
        """``ctrl`` for desired positions/velocities of :attr:`joint_names`.

        Args:
            model: the (converted) model whose current gains apply.
            q_des: (J,) or (N, J) desired positions, rad.
            qd_des: same shape, desired velocities, rad/s.
        Returns:
            (nu,) or (N, nu) control vector(s).
        """
        position = np.asarray(q_des, dtype=float) @ self._coupling
        velocity = np.asarray(qd_des, dtype=float) @ self._coupling
        velocity_weight = self._takes_velocity.copy()
        pd = self._pd_actuators
        velocity_weight[pd] = -model.actuator_biasprm[pd, 2] / model.actuator_gainprm[pd, 0]   # kd / kp
        return position * self._takes_position + velocity * velocity_weight

    def hold_integrators(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Set the activation of every ``<intvelocity>`` actuator to its joint's position (rad),
        so that its integral term holds the joint where it is placed (call after writing
        ``qpos`` by hand: a reset, a placed base, a replay's initial state, a reload)."""
        for a in range(model.nu):
            if self._is_integral(model, a) and model.actuator_actadr[a] >= 0:
                joint = model.actuator_trnid[a, 0]
                data.act[model.actuator_actadr[a]] = data.qpos[model.jnt_qposadr[joint]] * model.actuator_gear[a, 0]

    def joint_state(self, data: mujoco.MjData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Positions (rad), velocities (rad/s) and efforts (N m: ``qfrc_actuator``) of :attr:`joint_names`."""
        return (data.qpos[self.qpos_adr].copy(), data.qvel[self.dof_adr].copy(),
                data.qfrc_actuator[self.dof_adr].copy())

    def current_gains(self, model: mujoco.MjModel) -> dict[str, PidGains]:
        """Effort-PID gains now in ``model`` per ROS joint (after any calibration)."""
        out = {}
        for drive in self.drives:
            if drive.mode != EFFORT_PID:
                continue
            g = PidGains(float(model.actuator_gainprm[drive.actuator, 0]), 0.0,
                         float(-model.actuator_biasprm[drive.actuator, 2]))
            for k in drive.joints:
                out[self.joint_names[k]] = g
        return out

    def is_controller_gain(self, actuator_name: str, model: mujoco.MjModel) -> bool:
        """True if the actuator's kp/kd belong to this controller (a converted motor)."""
        aid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, actuator_name)
        return any(d.actuator == aid and d.mode == EFFORT_PID for d in self.drives)

    def split_values(self, values: Mapping[ParameterTarget, float],
                     model: mujoco.MjModel) -> tuple[dict[ParameterTarget, float], dict[ParameterTarget, float]]:
        """Split calibrated values into (model parameters, drive gains).

        The one place that decides which calibrated values are not MJCF: an actuator's
        kp/kd (N m/rad, N m s/rad) is a drive gain when :meth:`is_controller_gain`
        (a motor this controller drives by effort PID; its gains go to the gains YAML);
        every other value (joint, geom, MJCF servo gains) is a model parameter. Both dicts
        keep the order of ``values``. ``model``: the compiled model this controller was
        built on (actuator names are looked up in it).
        """
        mjcf, gains = {}, {}
        for target, value in values.items():
            if target.kind == 'actuator' and self.is_controller_gain(target.name, model):
                gains[target] = value
            else:
                mjcf[target] = value
        return mjcf, gains
