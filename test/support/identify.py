"""A mock UR for the identification tests and benchmark: effort recordings of excitation runs.

The "true" arm is the nominal model with its joints' armature, damping and frictionloss scaled
by known factors and a payload fixed at ``tool0``. It tracks a Fourier excitation trajectory
(shadow_twin/identification/excitation.py) with the project's position servo (SimController and
config/controllers/ur5.yaml gains) in MuJoCo (2 ms steps), and its drives report, at 100 Hz, the
current ``tau / drive_gain + offset + noise`` (A), ``tau`` the servo's torque averaged over the
5 steps (10 ms) centred on the sample (a drive's current is an average too).

The recorded torque is the one the step actually applied: MuJoCo's ``implicitfast`` integrates
the servo's velocity term implicitly, so a step applies ``qfrc_actuator - h d qacc`` (h the
step, d the servo's damping, qacc the realised (v' - v) / h), not ``qfrc_actuator``; without
this correction the recording would carry an apparent extra armature of h d (3.3 kg m^2 on the
shoulder lift). The drives' Coulomb friction is ``fc s`` with the presliding (Dahl) state ``s``
of the effort model (shadow_twin/simulation/friction.py), applied as a joint force (MuJoCo's own
frictionloss is a soft constraint whose passage through zero velocity depends on the joint's
inertia).

A real drive is not the model: by default (``MockTruth.effects``, :class:`DriveEffects`) the mock
also carries presliding friction that holds at rest, gear ripple, a drifting friction, a delayed
and quantised current and flexible big joints, each named with its size and source there.
``DriveEffects.off()`` leaves the model's own structure (the parameter-recovery checks).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from shadow_twin.calibration.recordings.recording import JointStateRecording, write_joint_states
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.identification.excitation import FourierTrajectory, random_coefficients
from shadow_twin.model.ur.arm import arm_xml
from shadow_twin.simulation.friction import PRESLIDING_DISTANCE

REPO = Path(__file__).resolve().parents[2]
GAINS_YAML = REPO / 'config' / 'controllers' / 'ur5.yaml'
JOINTS = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint', 'wrist_2_joint',
          'wrist_3_joint']
#: UR's home-like posture, elbow up, well clear of the floor.
HOME = np.array([0.0, -1.57, 1.57, -1.57, -1.57, 0.0])


@dataclass(frozen=True)
class DriveEffects:
    """What a real UR drive's current carries and the identification model lacks (issue 34). Each is
    named with its size; :meth:`off` turns them all off (the mock is then the model's structure).

    Attributes:
        presliding_angle: rad, the joint's travel over which its Coulomb friction builds up after a
            reversal (a Dahl model, dF/dq = fc / presliding_angle (1 - F sgn(qd) / fc): at rest
            the friction holds what the last motion left; Dahl 1968, The Aerospace Corporation
            TOR-158(3107-18); presliding in the order of 1 mrad for a harmonic drive, Tjahjowidodo
            et al., Mech. Syst. Signal Process. 20(7), 2006). 2 mrad: between the distances the
            identification tries (1.8 and 3.2 mrad); off: the model's default, 1 mrad, one of them.
        ripple: relative amplitude of the friction's position dependence at ``ripple_cycles`` per
            joint revolution (a harmonic drive's ripple at twice the wave generator's turn: Tuttle &
            Seering, IEEE TRA 12(3), 1996); 0.1 assumed.
        ripple_cycles: per joint revolution: 2 x UR's gear ratio of 101.
        current_delay: s, the current reported this late (UR's controller runs at 500 Hz; its
            measurement and filtering add a few ms: 4 ms assumed).
        current_step: A, the current's quantisation (0.01 A assumed).
        friction_drift: relative change of the friction over ``drift_time`` as the gears warm (of
            the order of the decrease Bittencourt & Gunnarsson, J. Dyn. Syst. Meas. Control 134(4),
            2012, measured on a robot joint between 30 and 50 C): -15 %.
        drift_time: s, of the drift; it runs linearly with the mock's clock over the runs recorded.
        joint_stiffness: N m/rad, the gears' stiffness K of the three big joints: a spring
            between the motor (its armature, the current's torque, the encoder) and the link, a
            second hinge on the same axis in the mock's MJCF; the position is read on the motor's
            side, before the deflection (~3e4 N m/rad, the order Kufieta, NTNU 2014, measured on a
            UR5's big joints: a resonance near 9 Hz with the UR10e's upper arm). 0: rigid.
        joint_damping: N m s/rad, the gears' structural damping across that spring (200 assumed:
            a damping ratio near 0.2 at that resonance).
    """

    presliding_angle: float = 0.002
    ripple: float = 0.1
    ripple_cycles: float = 202.0
    current_delay: float = 0.004
    current_step: float = 0.01
    friction_drift: float = -0.15
    drift_time: float = 1200.0
    joint_stiffness: float = 3.0e4
    joint_damping: float = 200.0

    @classmethod
    def off(cls) -> DriveEffects:
        """None of the effects: the model's own structure."""
        return cls(PRESLIDING_DISTANCE, 0.0, 202.0, 0.0, 0.0, 0.0, 1200.0, 0.0, 0.0)


#: s the mock runs before its recording starts: started on its trajectory with no torque, its servo
#: takes up the arm's weight over the first ~0.1 s (the current swings by 1 A within 50 ms while the
#: positions, through the flexible joints, move by 0.5 mrad). No recording of a real arm holds that
#: start: a robot is recorded once it holds itself.
SETTLE = 0.5
#: The three big joints (the flexible ones of :attr:`DriveEffects.joint_stiffness`).
BIG_JOINTS = (0, 1, 2)


@dataclass
class MockTruth:
    """How the mock arm differs from the nominal model (factors on the model's values)."""

    armature: np.ndarray = field(default_factory=lambda: np.array([1.5, 1.4, 1.3, 1.6, 1.2, 1.5]))
    damping: np.ndarray = field(default_factory=lambda: np.array([30.0, 40.0, 25.0, 12.0, 10.0, 8.0]))
    frictionloss: np.ndarray = field(default_factory=lambda: np.array([25.0, 30.0, 20.0, 10.0, 9.0, 8.0]))
    drive_gain: np.ndarray = field(default_factory=lambda: np.array([12.0, 14.5, 12.5, 8.5, 9.5, 9.0]))
    offset: np.ndarray = field(default_factory=lambda: np.array([0.10, -0.15, 0.08, 0.05, -0.04, 0.03]))
    payload_mass: float = 2.0
    payload_com: np.ndarray = field(default_factory=lambda: np.array([0.03, -0.02, 0.06]))
    noise: float = 0.02   # A, standard deviation of the current's noise
    effects: DriveEffects = field(default_factory=DriveEffects)   # on; DriveEffects.off(): the model's structure


def nominal_xml(arm_type: str = 'ur10e') -> str:
    """The nominal MJCF of ``arm_type`` (UR's figures shipped with the project; the UR5 built in)."""
    return arm_xml(arm_type)


def true_model(xml: str, truth: MockTruth) -> mujoco.MjModel:
    """The mock arm: ``xml`` with scaled joint dynamics and the payload, contacts off; with
    :attr:`DriveEffects.joint_stiffness`, a spring joint ``<joint>_gear`` between each big joint's
    motor and its link."""
    spec = mujoco.MjSpec.from_string(xml)
    model = spec.compile()
    for k, name in enumerate(JOINTS):
        joint = spec.joint(name)
        dof = model.jnt_dofadr[model.joint(name).id]
        joint.armature = float(model.dof_armature[dof] * truth.armature[k])
        joint.damping = [float(model.dof_damping[dof] * truth.damping[k]), 0.0, 0.0]
        joint.frictionloss = 0.0   # applied as an explicit Coulomb law by simulate()
        if k in BIG_JOINTS and truth.effects.joint_stiffness > 0:
            gear = spec.body(model.body(int(model.jnt_bodyid[model.joint(name).id])).name).add_joint()
            gear.name, gear.type, gear.axis, gear.pos = f'{name}_gear', joint.type, joint.axis, joint.pos
            gear.stiffness = [truth.effects.joint_stiffness, 0.0, 0.0]
            gear.damping = [truth.effects.joint_damping, 0.0, 0.0]
            gear.limited = mujoco.mjtLimited.mjLIMITED_FALSE
    site = spec.site('tool0')
    body = spec.body('wrist_3_link').add_body(name='mock_payload', pos=site.pos, quat=site.quat)
    body.mass = truth.payload_mass
    body.ipos = truth.payload_com
    r = 0.02   # a small solid sphere: nearly a point mass
    body.fullinertia = [0.4 * truth.payload_mass * r * r] * 3 + [0.0] * 3
    body.explicitinertial = True
    model = spec.compile()
    model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    return model


def true_values(xml: str, truth: MockTruth) -> dict[str, np.ndarray]:
    """{'armature', 'damping', 'frictionloss', 'drive_gain', 'offset'}: (6,) true values;
    'payload_mass', 'payload_com'."""
    model = mujoco.MjModel.from_xml_string(xml)
    dofs = [model.jnt_dofadr[model.joint(j).id] for j in JOINTS]
    return {'armature': model.dof_armature[dofs] * truth.armature, 'damping': model.dof_damping[dofs] * truth.damping,
            'frictionloss': model.dof_frictionloss[dofs] * truth.frictionloss, 'drive_gain': truth.drive_gain,
            'offset': truth.offset, 'payload_mass': truth.payload_mass, 'payload_com': truth.payload_com}


def excitation(seed: int, amplitude: float = 1.0, velocity: float = 2.5, harmonics: int = 5,
               base_hz: float = 0.15) -> FourierTrajectory:
    """A random Fourier excitation around :data:`HOME`: each joint within ``amplitude`` rad of it
    and ``velocity`` rad/s, harmonics of ``base_hz`` (a 20 s run holds three periods)."""
    return random_coefficients(np.random.default_rng(seed), HOME, amplitude, velocity, harmonics, base_hz)


class Standstill:
    """The arm held at :data:`HOME` (a trajectory with ``sample``, as :class:`FourierTrajectory`)."""

    def sample(self, t: np.ndarray):
        q = np.tile(HOME, (np.size(t), 1))
        return q, np.zeros_like(q), np.zeros_like(q)


def still_bag(path: Path, xml: str, truth: MockTruth, friction: np.ndarray, clock: float = 0.0) -> Path:
    """A 6 s bag of the mock arm of ``xml`` and ``truth`` standing at :data:`HOME` (friction (6,) N m;
    ``clock``: s of the mock's clock at its start): a static hold-out."""
    return write_bag(path, *simulate(true_model(xml, truth), Standstill(), 6.0, truth, friction, seed=5, clock=clock))


def simulate(model: mujoco.MjModel, trajectory: FourierTrajectory, duration: float, truth: MockTruth,
             friction: np.ndarray, seed: int = 0, rate_hz: float = 100.0, push: tuple | None = None,
             clock: float = 0.0, settle: float = SETTLE) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Track ``trajectory`` for ``duration`` s with Coulomb friction ``friction`` (6,) N m and the
    drive effects of ``truth.effects`` (:class:`DriveEffects`); ``push``: (body name, (3,) world
    force N, start s): an external force from ``start`` on; ``clock``: s of the mock's clock at the
    run's start (the friction's drift). The mock starts ``settle`` s before the recording, on the
    trajectory (:data:`SETTLE`).
    Returns (N,) times (s), (N, 6) positions (rad), velocities (rad/s) and currents (A) at
    ``rate_hz``."""
    model = copy_model(model)
    controller = SimController(model, ControllerGains.from_yaml(GAINS_YAML))
    order = [controller.joint_names.index(j) for j in JOINTS]
    data = mujoco.MjData(model)
    h = model.opt.timestep
    pre = int(round(settle / h))
    steps = pre + int(round(duration / h))
    t = (np.arange(steps + 1) - pre) * h
    q_des, qd_des, _ = trajectory.sample(t)
    qadr = controller.qpos_adr[order]
    dadr = controller.dof_adr[order]
    data.qpos[qadr] = q_des[0]
    data.qvel[dadr] = qd_des[0]
    servo_d = np.zeros(len(JOINTS))
    for drive in controller.drives:
        for local in drive.joints:
            servo_d[order.index(int(local))] = -model.actuator_biasprm[drive.actuator, 2]
    ctrl = np.zeros((steps, model.nu))
    ctrl[:, :] = controller.ctrl(model, q_des[:steps][:, np.argsort(order)], qd_des[:steps][:, np.argsort(order)])
    q = np.empty((steps + 1, len(JOINTS)))
    qd = np.empty_like(q)
    tau = np.empty((steps, len(JOINTS)))
    q[0], qd[0] = data.qpos[qadr], data.qvel[dadr]
    pushed = None if push is None else (model.body(push[0]).id, np.asarray(push[1], dtype=float), float(push[2]))
    fx = truth.effects
    held = np.zeros(len(JOINTS))          # N m, the Dahl friction state
    for k in range(steps):
        data.ctrl[:] = ctrl[k]
        if pushed is not None and t[k] >= pushed[2]:
            data.xfrc_applied[pushed[0], :3] = pushed[1]
        fc = friction * (1.0 + fx.friction_drift * min(max(clock + t[k], 0.0) / fx.drift_time, 1.0))
        fc = fc * (1.0 + fx.ripple * np.sin(fx.ripple_cycles * data.qpos[qadr]))
        v = data.qvel[dadr]
        settled = fc * np.sign(v)         # Dahl, integrated exactly over the step for constant v
        held = settled + (held - settled) * np.exp(-np.abs(v) * h / fx.presliding_angle)
        data.qfrc_applied[dadr] = -held
        mujoco.mj_step(model, data)
        q[k + 1], qd[k + 1] = data.qpos[qadr], data.qvel[dadr]
        tau[k] = data.qfrc_actuator[dadr] - servo_d * (qd[k + 1] - qd[k])   # h d (realised acceleration)
    every = int(round(1.0 / (rate_hz * h)))
    # the 5 steps centred on a sample: step k's torque is exactly the inverse dynamics at (q_k,
    # v_k, a_k = (v_k+1 - v_k) / h), checked to 1e-12 N m, and a_k is the central second
    # difference of the positions at t_k (semi-implicit Euler: q_k+1 = q_k + h v_k+1)
    half = 2
    lag = int(round(fx.current_delay / h))
    samples = np.arange(pre + every + lag, steps - half, every)
    torque = np.stack([tau[s - lag - half:s - lag + half + 1].mean(axis=0) for s in samples])
    current = torque / truth.drive_gain + truth.offset
    current += np.random.default_rng(seed).normal(0.0, truth.noise, current.shape)
    if fx.current_step > 0:
        current = np.round(current / fx.current_step) * fx.current_step
    return t[samples], q[samples].copy(), qd[samples], current


def copy_model(model: mujoco.MjModel) -> mujoco.MjModel:
    """An independent copy (SimController converts the motors of the model it is given)."""
    return copy.deepcopy(model)


def write_bag(path: Path, times, q, qd, current, storage: str = 'mcap') -> Path:
    """The run as a ROS 2 bag of ``/joint_states`` (effort = current, A)."""
    rec = JointStateRecording.from_arrays(np.asarray(times) + 1000.0, JOINTS, q, qd, current)
    return write_joint_states(path, [rec], storage)


def write_rtde_csv(path: Path, times, q, qd, current) -> Path:
    """The run as a UR RTDE recorder CSV (``timestamp``, ``actual_q_0..5``, ``actual_qd_0..5``,
    ``actual_current_0..5``, comma separated)."""
    header = ['timestamp'] + [f'actual_q_{i}' for i in range(6)] + [f'actual_qd_{i}' for i in range(6)] + \
             [f'actual_current_{i}' for i in range(6)]
    rows = np.column_stack([times, q, qd, current])
    lines = [','.join(header)] + [','.join(f'{v:.9g}' for v in row) for row in rows]
    path.write_text('\n'.join(lines) + '\n')
    return path


def mock_runs(directory: Path, arm_type: str = 'ur10e', seeds=(1, 2), holdout_seed: int = 9,
              duration: float = 20.0, truth: MockTruth | None = None) -> dict:
    """Write fit runs (bags) and a hold-out run (bag and RTDE CSV) of the mock arm into
    ``directory``. Returns {'xml': nominal MJCF path, 'bags': [...], 'holdout': bag, 'csv': csv,
    'truth': true values}."""
    truth = truth or MockTruth()
    xml = nominal_xml(arm_type)
    model = true_model(xml, truth)
    directory.mkdir(parents=True, exist_ok=True)
    nominal = directory / f'{arm_type}.xml'
    nominal.write_text(xml)
    out = {'xml': nominal, 'bags': [], 'truth': true_values(xml, truth)}
    for k, seed in enumerate((*seeds, holdout_seed)):
        run = simulate(model, excitation(seed), duration, truth, out['truth']['frictionloss'], seed,
                       clock=k * duration)
        bag = write_bag(directory / f'run{seed}', *run)
        if seed == holdout_seed:
            out['holdout'] = bag
            out['csv'] = write_rtde_csv(directory / f'run{seed}.csv', *run)
        else:
            out['bags'].append(bag)
    return out
