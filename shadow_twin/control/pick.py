"""A pick-up for the cell: the UR5 brings the Shadow Hand E beside an upright cylinder (a can), the
hand closes round it, the arm lifts it, holds it, sets it down where it was and lets it go.

* :func:`solve_arm_ik`: the arm's inverse kinematics for a body's pose (position and orientation),
  damped least squares (Levenberg-Marquardt) on MuJoCo's body Jacobian (``mj_jacBody``), as in
  Buss, "Introduction to inverse kinematics with Jacobian transpose, pseudoinverse and damped least
  squares methods" (2004), eq. (11): dq = J^T (J J^T + lambda^2 I)^-1 e.
* :func:`plan_pick`: the joint-space waypoints of the whole motion (arm and hand), for one
  ``FollowJointTrajectory`` goal. The grasp is a side (power) grasp: the forearm horizontal, the palm
  facing the can, the fingers wrapping round it in a horizontal plane, the thumb up; every straight
  move of the hand (in, lift, down, out) is a row of IK solutions, each from the previous one.

The hand's pose is its root body's (``rh_forearm``: +z towards the fingers, the palm facing -y, the
first finger towards +x). ROS-free; units m, rad, s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mujoco
import numpy as np

from shadow_twin.common.errors import ModelError

#: The hand's posture target round the can (rad), every joint of the hand (a joint left out would keep
#: what an earlier goal left there: the wrist flexed, a finger spread): fingers J3, J2, J1 flexed past
#: where the can stops them (the joints' PD drives then squeeze it), the thumb opposed as in
#: benchmarks/contacts.py's GRASP, the wrist, the spreads (J4, LFJ5) and THJ3 straight. Chosen in
#: simulation (the cell, config/scene.yaml's can standing on the tote): with J3, J2, J1 at 1.0, 0.8, 0.6
#: the can stays on its support, at 1.3, 1.0, 0.8 it slips out during the lift.
GRASP = {'rh_WRJ2': 0.0, 'rh_WRJ1': 0.0, 'rh_LFJ5': 0.0, 'rh_THJ3': 0.0,
         **{f'rh_{f}J4': 0.0 for f in ('FF', 'MF', 'RF', 'LF')},
         **{f'rh_{f}J{j}': q for f in ('FF', 'MF', 'RF', 'LF') for j, q in ((3, 1.5), (2, 1.3), (1, 1.0))},
         'rh_THJ5': 0.4, 'rh_THJ4': 1.1, 'rh_THJ2': 0.3, 'rh_THJ1': 0.5}
#: The hand open: every joint straight (rad).
OPEN = {name: 0.0 for name in GRASP}
#: The can's centre in the forearm frame at the grasp, m: against the palm (-y: its surface 2 mm off
#: the palm's), 12 mm short of the knuckles (+z, at 0.342), 15 mm below the hand's mid-plane (x) so
#: that the forearm clears the can's support (chosen in simulation with :data:`GRASP`).
OBJECT_IN_HAND = (-0.015, -0.055, 0.33)
#: The hand's root body.
HAND_BODY = 'rh_forearm'


def side_grasp_rotation(approach) -> np.ndarray:
    """(3, 3) forearm orientation (columns: its x, y, z axes in the world) for a side grasp of an
    upright cylinder whose palm moves along the horizontal ``approach`` (3,) towards it: the palm's
    normal (-y) along ``approach``, the thumb's side (x) up, the fingers (z) horizontal, so that they
    close round the cylinder in a horizontal plane. Raises ValueError when ``approach`` has no
    horizontal part."""
    a = np.array([approach[0], approach[1], 0.0], dtype=float)
    if np.linalg.norm(a) < 1e-9:
        raise ValueError('the approach direction must have a horizontal part')
    x, y = np.array([0.0, 0.0, 1.0]), -a / np.linalg.norm(a)
    return np.column_stack([x, y, np.cross(x, y)])


def solve_arm_ik(model: mujoco.MjModel, data: mujoco.MjData, joints: list[str], position, rotation, q0,
                 body: str = HAND_BODY, damping: float = 0.05, iterations: int = 200,
                 tolerance: tuple[float, float] = (1e-4, 1e-3)) -> np.ndarray:
    """Joint positions (J,) of ``joints`` (hinges) that put ``body``'s origin at ``position`` (3,)
    m and its frame at ``rotation`` (3, 3), the world frame, the other joints as in ``data``.

    Damped least squares from ``q0`` (J,) rad (module doc), ``damping`` lambda (m); each step's joint
    change is limited to 0.5 rad; results are wrapped into the joints' ranges. ``data`` is not changed.
    Raises ModelError when ``body`` or a joint is not in the model, or when it does not converge
    within ``iterations`` to ``tolerance`` (position m, orientation rad): the pose is out of reach.
    """
    try:
        bid = model.body(body).id
        jids = [model.joint(j).id for j in joints]
    except KeyError as exc:
        raise ModelError(f'inverse kinematics: {exc.args[0]}') from None
    dofs, adrs = model.jnt_dofadr[jids], model.jnt_qposadr[jids]
    work = mujoco.MjData(model)
    work.qpos[:] = data.qpos
    work.qpos[adrs] = np.asarray(q0, dtype=float)
    target = np.zeros(4)
    mujoco.mju_mat2Quat(target, np.asarray(rotation, dtype=float).reshape(-1))
    jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
    rot_error = np.zeros(3)
    for _ in range(iterations):
        mujoco.mj_kinematics(model, work)
        mujoco.mj_comPos(model, work)
        pos_error = np.asarray(position, dtype=float) - work.xpos[bid]
        mujoco.mju_subQuat(rot_error, target, work.xquat[bid])        # in the body's frame
        rot_world = work.xmat[bid].reshape(3, 3) @ rot_error
        if np.linalg.norm(pos_error) < tolerance[0] and np.linalg.norm(rot_world) < tolerance[1]:
            return _in_range(model, jids, work.qpos[adrs].copy())
        mujoco.mj_jacBody(model, work, jacp, jacr, bid)
        jac = np.vstack([jacp[:, dofs], jacr[:, dofs]])
        step = jac.T @ np.linalg.solve(jac @ jac.T + damping ** 2 * np.eye(6), np.r_[pos_error, rot_world])
        work.qpos[adrs] += np.clip(step, -0.5, 0.5)
    raise ModelError(f'inverse kinematics: {body} cannot reach ({", ".join(f"{v:.3f}" for v in position)}) m '
                     f'with that orientation (error {np.linalg.norm(pos_error) * 1e3:.1f} mm, '
                     f'{np.degrees(np.linalg.norm(rot_world)):.1f} deg after {iterations} iterations)')


def _in_range(model: mujoco.MjModel, jids: list[int], q: np.ndarray) -> np.ndarray:
    """``q`` with each limited hinge's angle moved by whole turns into its range where that helps."""
    for k, j in enumerate(jids):
        if model.jnt_limited[j]:
            low, high = model.jnt_range[j]
            while q[k] > high and q[k] - 2 * np.pi >= low:
                q[k] -= 2 * np.pi
            while q[k] < low and q[k] + 2 * np.pi <= high:
                q[k] += 2 * np.pi
    return q


@dataclass
class PickPlan:
    """The pick-up's waypoints, one ``FollowJointTrajectory`` goal.

    Attributes:
        joint_names: J names: the arm's, then the hand's (:data:`GRASP`).
        times: (K,) ``time_from_start`` of each point, s.
        positions: (K, J) rad.
        phases: {phase: (start s, end s)}: 'approach', 'close', 'lift', 'hold', 'lower', 'release', 'retreat'.
        lift: how high the hand lifts the object, m.
    """

    joint_names: list[str]
    times: np.ndarray
    positions: np.ndarray
    phases: dict[str, tuple[float, float]] = field(default_factory=dict)
    lift: float = 0.0


#: Seconds of each phase of :func:`plan_pick`, in order.
PHASE_SECONDS = {'approach': 3.5, 'down': 1.5, 'in': 2.0, 'close': 1.5, 'settle': 0.5, 'lift': 2.0, 'hold': 2.0,
                 'lower': 2.0, 'release': 1.0, 'retreat': 1.5}


def plan_pick(model: mujoco.MjModel, data: mujoco.MjData, arm: list[str], object_position, approach,
              lift: float = 0.15, standoff: float = 0.12, clearance: float = 0.12, q0=None) -> PickPlan:
    """The pick-up's waypoints (:class:`PickPlan`) of an upright cylinder centred at
    ``object_position`` (3,) m (world frame; the model's state in ``data``), grasped from the side, the
    palm moving along the horizontal ``approach`` (3,) (:func:`side_grasp_rotation`,
    :data:`OBJECT_IN_HAND`).

    The hand, open, goes first ``standoff`` m back from the grasp and ``clearance`` m above it, down,
    then straight in to the grasp, closes (:data:`GRASP`); the arm lifts ``lift`` m, holds, lowers it
    back; the hand opens and backs out ``standoff`` m. Timing: :data:`PHASE_SECONDS` ('approach'
    includes 'down' and 'in', 'close' includes 'settle'). ``arm``: the arm's six joint names; ``q0``:
    the IK's first guess (rad; None: the arm's positions in ``data``).
    Raises ModelError: a pose out of reach; ValueError: a bad ``approach``.
    """
    rotation = side_grasp_rotation(approach)
    grasp = np.asarray(object_position, dtype=float) - rotation @ np.asarray(OBJECT_IN_HAND)
    up = np.array([0.0, 0.0, 1.0])
    guess = np.array([data.qpos[model.jnt_qposadr[model.joint(j).id]] for j in arm]) if q0 is None else q0
    opened, closed = np.array(list(OPEN.values())), np.array(list(GRASP.values()))
    points: list[tuple[float, np.ndarray, np.ndarray]] = []
    phases: dict[str, tuple[float, float]] = {}
    clock = 0.0

    back = rotation[:, 1]           # against the approach

    def move(name: str, offset, start, hand, count: int = 1) -> np.ndarray:
        """A straight move of the hand through ``offset(s)`` (3,) m from the grasp, s in (0, 1], in
        ``count`` IK points; the last point's joint positions."""
        nonlocal clock
        q, begin, seconds = start, clock, PHASE_SECONDS[name]
        for s in np.linspace(0.0, 1.0, count + 1)[1:]:
            q = solve_arm_ik(model, data, arm, grasp + offset(s), rotation, q)
            points.append((begin + seconds * s, q, hand))
        clock = begin + seconds
        phases[name] = (begin, clock)
        return q

    def wait(name: str, q, hand) -> None:
        nonlocal clock
        phases[name] = (clock, clock + PHASE_SECONDS[name])
        clock += PHASE_SECONDS[name]
        points.append((clock, q, hand))

    q = move('approach', lambda s: standoff * back + clearance * up, guess, opened)
    q = move('down', lambda s: standoff * back + clearance * (1 - s) * up, q, opened, 3)
    q_grasp = move('in', lambda s: standoff * (1 - s) * back, q, opened, 4)
    wait('close', q_grasp, closed)
    wait('settle', q_grasp, closed)
    q = move('lift', lambda s: lift * s * up, q_grasp, closed, 5)
    wait('hold', q, closed)
    move('lower', lambda s: lift * (1 - s) * up, q, closed, 5)
    wait('release', q_grasp, opened)
    move('retreat', lambda s: standoff * s * back, q_grasp, opened, 3)
    phases.pop('down')
    phases['approach'] = (0.0, phases.pop('in')[1])
    phases['close'] = (phases['close'][0], phases.pop('settle')[1])
    return PickPlan(list(arm) + list(GRASP), np.array([p[0] for p in points]),
                    np.array([np.r_[p[1], p[2]] for p in points]), phases, float(lift))
