"""What the ``mujoco_bridge`` publishes as joint ``effort`` (:class:`EffortOutput`), and an
external wrench pushed onto a body at run time (:class:`ExternalWrench`): parts of
:class:`mujoco_bridge.bridge_node.MujocoBridge` for the mock UR.

* ``effort_unit`` ``Nm`` (default): each joint's actuator torque (N m; ``qfrc_actuator`` as it
  acted over the last step: :func:`effective_actuator_torque`).
  ``A``: the joint current as ``ur_robot_driver`` publishes it, torque / drive gain
  (``drive_gains``, N m/A per joint glob; '' = the nominal UR5 figures of
  :data:`shadow_twin.monitoring.effort_watch.NOMINAL_UR_DRIVE_GAINS`; a joint no glob matches:
  1.0), through :class:`shadow_twin.simulation.effort.DriveParameters` (the same conversion
  that ``shadow-twin identify`` and the monitor invert). ``effort_noise`` > 0 adds white
  Gaussian noise of that standard deviation (in the published unit), seeded by
  ``effort_noise_seed``.
* ``external_wrench`` (settable with ``ros2 param set``): YAML ``{body: NAME, force: [x, y, z],
  torque: [x, y, z]}`` (N, N m, world frame, at the body's centre of mass: MuJoCo's
  ``xfrc_applied``); '' = none. A body the running model lacks is refused at the set. The
  stepping thread applies it before its next physics step (and again after a ``~/reset`` or
  ``~/reload``), logs it with the sim time and stamp it acts from, and publishes that as
  ``geometry_msgs/WrenchStamped`` on ``~/external_wrench`` (transient_local, depth 1):
  ``header.stamp`` = the stamp of the sim time from which it acts (the push stamp),
  ``frame_id`` = the body ('' when cleared).
"""

from __future__ import annotations

import math
import threading

import mujoco
import numpy as np
from geometry_msgs.msg import WrenchStamped
from rcl_interfaces.msg import SetParametersResult
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from shadow_twin.common.errors import ConfigError
from shadow_twin.monitoring.effort_settings import nominal_drive
from shadow_twin.ros.monitor.parameters import drive_gains
from shadow_twin.ros.parameters import yaml_mapping

WRENCH_PARAMETER = 'external_wrench'


def parse_gains(text: str) -> dict[str, float] | None:
    """``drive_gains`` YAML {joint glob: N m/A} -> dict; '' -> None (the nominal figures).
    Raises ConfigError."""
    return drive_gains(text, 'drive_gains')


def parse_wrench(text: str) -> tuple[str, np.ndarray] | None:
    """``external_wrench`` YAML -> (body, (6,) force N then torque N m), or None for ''.
    Raises ConfigError naming the problem."""
    layout = '{body: NAME, force: [x, y, z], torque: [x, y, z]}'
    data = yaml_mapping(text, 'external_wrench', layout)
    if data is None:
        return None
    if not isinstance(data.get('body'), str) or set(data) - {'body', 'force', 'torque'}:
        raise ConfigError(f'external_wrench: expected {layout}, got {text!r}')
    out = []
    for key in ('force', 'torque'):
        value = data.get(key, [0.0, 0.0, 0.0])
        if (not isinstance(value, list) or len(value) != 3
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                           for v in value)):
            raise ConfigError(f'external_wrench: {key} must be 3 finite numbers, got {value!r}')
        out.extend(float(v) for v in value)
    return data['body'], np.array(out)


def effective_actuator_torque(model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
    """(nv,) N m: the actuator torque that acted over the last step, ``qfrc_actuator`` with each
    affine-bias joint actuator's velocity term taken at the velocity after the step.

    Why: with the ``implicit``/``implicitfast`` integrators MuJoCo integrates an actuator's
    velocity derivative (the servo's ``d``) implicitly, so the force that moved the joint is the
    one at the new velocity; ``qfrc_actuator`` holds the one at the old velocity, dt * d * qacc
    away (2.5 N m per rad/s^2 on the UR5's shoulder pan: more than a 30 N push gives in a
    fast move). Other actuators are taken as they are."""
    out = data.qfrc_actuator.copy()
    if model.opt.integrator not in (mujoco.mjtIntegrator.mjINT_IMPLICIT, mujoco.mjtIntegrator.mjINT_IMPLICITFAST):
        return out
    for a in range(model.nu):
        if (model.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT
                or model.actuator_biastype[a] != mujoco.mjtBias.mjBIAS_AFFINE or model.actuator_biasprm[a, 2] == 0):
            continue
        dof = model.jnt_dofadr[model.actuator_trnid[a, 0]]
        gear = model.actuator_gear[a, 0]
        force = data.actuator_force[a] + model.actuator_biasprm[a, 2] * (gear * data.qvel[dof]
                                                                         - data.actuator_velocity[a])
        if model.actuator_forcelimited[a]:
            force = min(max(force, model.actuator_forcerange[a, 0]), model.actuator_forcerange[a, 1])
        out[dof] += gear * (force - data.actuator_force[a])
    return out


class EffortOutput:
    """Joint efforts as published (see the module doc). Raises ConfigError for bad parameters."""

    def __init__(self, unit: str, gains_text: str, noise: float, seed: int) -> None:
        self.unit, self.gains, self.noise = unit, parse_gains(gains_text), float(noise)
        nominal_drive([], unit, self.gains)         # checks the unit
        self._rng = np.random.default_rng(int(seed))
        self._cache: tuple | None = None

    def __call__(self, sim, names: tuple[str, ...]) -> np.ndarray:
        """(J,) efforts in :attr:`unit` of joints ``names`` (ROS) of ``sim`` (a LiveSimulation) now:
        :func:`effective_actuator_torque` through the drive gains, plus noise."""
        with sim.lock:
            model, data = sim.model, sim.data
            if self._cache is None or self._cache[0] is not model or self._cache[1] is not names:
                dofs = [model.jnt_dofadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT,
                                                           sim.joint_map.to_mjcf(n))] for n in names]
                self._cache = (model, names, np.array(dofs, dtype=int), nominal_drive(names, self.unit, self.gains))
            dofs, drive = self._cache[2], self._cache[3]
            effort = drive.to_effort(effective_actuator_torque(model, data)[dofs], names)
        if self.noise > 0:
            effort = effort + self._rng.normal(0.0, self.noise, effort.shape)
        return effort


class ExternalWrench:
    """The ``external_wrench`` of ``node`` (its ``sim``, ``stamp_of``, logger); see the module doc."""

    def __init__(self, node) -> None:
        self.node = node
        self._lock = threading.Lock()
        self._wanted = parse_wrench(node.get_parameter(WRENCH_PARAMETER).value)
        self._pending = self._wanted is not None
        self._applied_to: tuple | None = None       # (model, data, body id) it was written into
        qos = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
        self.publisher = node.create_publisher(WrenchStamped, '~/external_wrench', qos)
        node.add_on_set_parameters_callback(self._validate)
        if self._wanted is not None:
            self._body_id(self._wanted[0])          # a body the model lacks: ConfigError at start

    def _body_id(self, body: str) -> int:
        bid = mujoco.mj_name2id(self.node.sim.model, mujoco.mjtObj.mjOBJ_BODY, body)
        if bid < 1:
            raise ConfigError(f'external_wrench: no body {body!r} in the running model (the world cannot be pushed)')
        return bid

    def _validate(self, params) -> SetParametersResult:
        for param in params:
            if param.name == WRENCH_PARAMETER:
                try:
                    wanted = parse_wrench(param.value)
                    if wanted is not None:
                        self._body_id(wanted[0])
                except ConfigError as exc:
                    return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def set(self, text: str) -> None:
        """A new ``external_wrench`` value (checked): applied at the next tick."""
        with self._lock:
            self._wanted, self._pending = parse_wrench(text), True

    def tick(self) -> None:
        """In the stepping thread, before stepping: write the wrench into ``xfrc_applied`` when
        it is new or the sim's data were replaced or reset (a reload, ``~/reset``)."""
        sim = self.node.sim
        with self._lock:
            wanted, pending = self._wanted, self._pending
            self._pending = False
        with sim.lock:
            model, data = sim.model, sim.data
            target = self._applied_to
            if not pending and (target is None or (target[0] is model and target[1] is data
                                                   and data.xfrc_applied[target[2]].any())):
                return
            if target is not None and target[0] is model and target[1] is data:
                data.xfrc_applied[target[2]] = 0.0
            self._applied_to = None
            if wanted is None:
                if pending:
                    self._announce('', np.zeros(6), sim.time)
                return
            bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, wanted[0])
            if bid < 1:
                self.node.get_logger().error(f'external_wrench: no body {wanted[0]!r} in the running model; '
                                             'not applied', throttle_duration_sec=5.0)
                return
            data.xfrc_applied[bid] = wanted[1]
            self._applied_to = (model, data, bid)
            if pending:
                self._announce(wanted[0], wanted[1], sim.time)

    def _announce(self, body: str, wrench: np.ndarray, sim_time: float) -> None:
        msg = WrenchStamped()
        msg.header.stamp, msg.header.frame_id = self.node.stamp_of(sim_time), body
        (msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z,
         msg.wrench.torque.x, msg.wrench.torque.y, msg.wrench.torque.z) = (float(v) for v in wrench)
        self.publisher.publish(msg)
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        what = (f'force {wrench[:3].tolist()} N, torque {wrench[3:].tolist()} N m on {body}' if body
                else 'none (cleared)')
        self.node.get_logger().info(f'external wrench: {what} from sim time {sim_time:.4f} s (stamp {stamp:.6f})')
