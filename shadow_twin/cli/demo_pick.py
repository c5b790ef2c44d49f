"""The pick-up step of ``shadow-twin demo --cell``: the arm brings the hand to the scene's can, the hand
closes on it, the arm lifts it, holds it, sets it down and lets it go, all in one
``FollowJointTrajectory`` goal through the twin (sim and mock hardware from one stamped start).

* The object: the scene's first free upright cylinder (``config/scene.yaml``: the can), set on the top of
  its first box fixed to the base (the tote) with ``SetEntityState``: where the scene declares it (the
  cabinet's top, 0.2 m from the arm's base) the UR5 carrying the 0.45 m long hand cannot bring its palm
  beside it without its upper arm over the can.
* The motion: :func:`shadow_twin.control.pick.plan_pick` (IK on the cell model ``up`` runs, written
  here too), the palm moving towards the cabinet (-x of the base).
* Measured, on the messages' stamps from the goal's stamped start (now + :data:`START_LEAD`): the
  object's pose on each side (:data:`POSE_PREFIXES`, ``<prefix>/<object>/pose``: the sim bridge's
  object poses and the mock hardware's motion capture) and the fingertip and palm contacts of each
  side (:data:`CONTACT_PREFIXES`, ``<prefix>/<label>/wrench``; the demo starts ``up --contacts``).
  Picked up: the object's lowest height during the hold is more than :data:`PICKED_HEIGHT` m above
  its start.

In the cell the mock hardware holds no objects: ``up --cell`` gives the scene to the sim bridge only,
the mock UR5 carries a rigid hand and the mock hand is the hand alone; the report says so.
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

import mujoco
import numpy as np
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTolerance
from geometry_msgs.msg import PoseStamped, WrenchStamped
from simulation_interfaces.msg import Result
from simulation_interfaces.srv import GetEntityState, SetEntityState
from trajectory_msgs.msg import JointTrajectoryPoint

from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.common.paths import config_path
from shadow_twin.common.stamps import to_seconds
from shadow_twin.control.pick import plan_pick
from shadow_twin.model.cell.assembly import CellConfig, arm_joint_names, write_cell_mjcf
from shadow_twin.ros.conversions import duration_msg
from shadow_twin.simulation.contact_sensing import DEFAULT_SENSORS

SIM_BRIDGE = '/mujoco_bridge'
#: The object poses of each side: the sim bridge's (``object_pose_topic_prefix`` ~/objects) and the mock
#: hardware's motion capture (config/mock_hardware.yaml), ``<prefix>/<object>/pose``.
POSE_PREFIXES = {'sim': f'{SIM_BRIDGE}/objects', 'mock': '/mocap'}
#: The contact outputs of each side (``up --contacts``): the sim bridge's ``~/contacts`` and the mock
#: hand's (config/mock_hardware.yaml's ``contact_topic_prefix``).
CONTACT_PREFIXES = {'sim': f'{SIM_BRIDGE}/contacts', 'mock': '/rh/contacts'}
LIFT = 0.15                  # m, the planned lift
PICKED_HEIGHT = 0.10         # m: picked up when the object stays this much above its start through the hold
#: s from sending the goal to its stamped start (the twin previews it, then dispatches it before that start).
START_LEAD = 1.0
#: s: the hold is judged from this long after its planned start (the arm settles) to its end.
HOLD_MARGIN = 0.5
#: Where on its support the object is set, m, in the base frame from the support's top centre.
SPOT_OFFSET = (0.0, 0.02)
HAND_TOLERANCE = 0.2       # rad, the hand's goal tolerance in the pick-up's goal
APPROACH = (-1.0, 0.0, 0.0)  # the palm's approach, base frame: towards the cabinet


def pick_target(scene) -> tuple:
    """(object, support, spot): the scene's first free cylinder, its first box fixed to ``base_link``
    without rotation, and (3,) m the object's centre standing on the support in the base frame.
    Raises ShadowTwinError naming what the scene lacks."""
    objects = [o for o in scene.objects if o.free and o.shape == 'cylinder']
    supports = [o for o in scene.objects if not o.free and o.shape == 'box' and o.frame == 'base_link'
                and not any(o.rpy)]
    if not objects or not supports:
        raise ShadowTwinError('the scene has no free cylinder and box fixed to base_link to pick it from: no pick-up')
    obj, support = objects[0], supports[0]
    spot = np.array([support.xyz[0] + SPOT_OFFSET[0], support.xyz[1] + SPOT_OFFSET[1],
                     support.xyz[2] + support.size[2] + obj.size[1] + 0.001])
    return obj, support, spot


def in_world(base: np.ndarray, point: np.ndarray) -> np.ndarray:
    """(3,) ``point`` (base frame) in the world, the base at planar pose ``base`` (x, y m, yaw rad)."""
    c, s = np.cos(base[2]), np.sin(base[2])
    return np.array([base[0] + c * point[0] - s * point[1], base[1] + s * point[0] + c * point[1], point[2]])


def in_base(base: np.ndarray, point: np.ndarray) -> np.ndarray:
    """Inverse of :func:`in_world`."""
    c, s = np.cos(base[2]), np.sin(base[2])
    dx, dy = point[0] - base[0], point[1] - base[1]
    return np.array([c * dx + s * dy, -s * dx + c * dy, point[2]])


class Entities:
    """``GetEntityState`` / ``SetEntityState`` of one bridge (``prefix``, e.g. /mujoco_bridge)."""

    def __init__(self, node, prefix: str) -> None:
        self.prefix = prefix
        self.get = node.create_client(GetEntityState, f'{prefix}/get_entity_state')
        self.set = node.create_client(SetEntityState, f'{prefix}/set_entity_state')

    @staticmethod
    def _call(client, request, timeout: float):
        """The response, or None when the service is absent or silent for ``timeout`` s."""
        if not client.wait_for_service(timeout_sec=timeout):
            return None
        future = client.call_async(request)
        deadline = time.monotonic() + timeout
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.002)
        return future.result() if future.done() else None

    def position(self, name: str, timeout: float = 2.0) -> np.ndarray | None:
        """(3,) the entity's position (world, m), None when the bridge lacks it or does not answer."""
        response = self._call(self.get, GetEntityState.Request(entity=name), timeout)
        if response is None or response.result.result != Result.RESULT_OK:
            return None
        p = response.state.pose.position
        return np.array([p.x, p.y, p.z])

    def place(self, name: str, position: np.ndarray, yaw: float) -> None:
        """Set the entity upright at ``position`` (world, m) turned ``yaw`` rad, at rest.
        Raises ShadowTwinError when the bridge refuses or does not answer."""
        request = SetEntityState.Request(entity=name)
        request.state.header.frame_id = 'world'
        p, q = request.state.pose.position, request.state.pose.orientation
        p.x, p.y, p.z = (float(v) for v in position)
        q.w, q.z = float(np.cos(yaw / 2)), float(np.sin(yaw / 2))
        response = self._call(self.set, request, 5.0)
        if response is None or response.result.result != Result.RESULT_OK:
            why = 'no answer' if response is None else response.result.error_message
            raise ShadowTwinError(f'{self.prefix}/set_entity_state {name}: {why}')


class PickRecorder:
    """Each side's object height (:data:`POSE_PREFIXES`) and contacts (:data:`CONTACT_PREFIXES`), on
    the messages' stamps (ROS time, s)."""

    def __init__(self, node, name: str) -> None:
        self.lock = threading.Lock()
        self.heights: dict[str, list[tuple[float, float]]] = {side: [] for side in POSE_PREFIXES}
        self.contacts = {(side, label): [] for side in CONTACT_PREFIXES for label in DEFAULT_SENSORS}
        self.recording = False
        for side, prefix in POSE_PREFIXES.items():
            node.create_subscription(PoseStamped, f'{prefix}/{name}/pose', lambda m, side=side: self._pose(side, m),
                                     200)
        for side, label in self.contacts:
            node.create_subscription(WrenchStamped, f'{CONTACT_PREFIXES[side]}/{label}/wrench',
                                     lambda m, key=(side, label): self._contact(key, m), 20)

    def _pose(self, side: str, msg: PoseStamped) -> None:
        with self.lock:
            if self.recording:
                self.heights[side].append((to_seconds(msg.header.stamp), float(msg.pose.position.z)))

    def _contact(self, key: tuple[str, str], msg: WrenchStamped) -> None:
        f = msg.wrench.force
        with self.lock:
            if self.recording:
                self.contacts[key].append((to_seconds(msg.header.stamp), bool(f.x or f.y or f.z)))

    def start(self) -> None:
        with self.lock:
            for series in (*self.heights.values(), *self.contacts.values()):
                series.clear()
            self.recording = True

    def stop(self) -> None:
        with self.lock:
            self.recording = False

    def since(self, start_s: float) -> tuple[dict, dict]:
        """({side: (N, 2) time s from ``start_s``, height m}, {side: {label: (M, 2) time s, in contact 0/1}})."""
        with self.lock:
            heights = {side: np.array(h, dtype=float).reshape(-1, 2) - [start_s, 0.0]
                       for side, h in self.heights.items()}
            contacts = {side: {label: np.array(self.contacts[side, label], dtype=float).reshape(-1, 2) - [start_s, 0.0]
                               for label in DEFAULT_SENSORS} for side in CONTACT_PREFIXES}
        return heights, contacts


def pick_goal(plan) -> FollowJointTrajectory.Goal:
    """The plan as one goal. Goal tolerances: the arm 0.05 rad; the hand :data:`HAND_TOLERANCE` (it ends
    open with the forearm horizontal: the sim's wrist sags about 0.1 rad under the hand's weight)."""
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = list(plan.joint_names)
    goal.trajectory.points = [JointTrajectoryPoint(positions=[float(v) for v in q], time_from_start=duration_msg(t))
                              for t, q in zip(plan.times, plan.positions)]
    goal.goal_tolerance = [JointTolerance(name=j, position=HAND_TOLERANCE if j.startswith('rh_') else 0.05)
                           for j in plan.joint_names]
    return goal


def verdict(heights: np.ndarray, start: float, hold: tuple[float, float]) -> dict:
    """{'picked_up', 'lift_min_m', 'lift_max_m', 'end_m', 'samples', 'sampled_s'}: ``heights`` (N, 2)
    time s (from the goal's start), height m; the lift during ``hold`` (s, s) above ``start`` m; picked
    up: its minimum above :data:`PICKED_HEIGHT` (and samples there); 'sampled_s': the first and last
    sample's time (s; None without samples)."""
    sampled = [float(heights[0, 0]), float(heights[-1, 0])] if len(heights) else None
    during = heights[(heights[:, 0] >= hold[0]) & (heights[:, 0] <= hold[1]), 1] - start if len(heights) else []
    if len(during) == 0:
        return {'picked_up': False, 'lift_min_m': None, 'lift_max_m': None, 'end_m': None, 'samples': len(heights),
                'sampled_s': sampled}
    return {'picked_up': bool(np.min(during) > PICKED_HEIGHT), 'lift_min_m': float(np.min(during)),
            'lift_max_m': float(np.max(during)), 'end_m': float(heights[-1, 1] - start), 'samples': len(heights),
            'sampled_s': sampled}


def share(contacts: np.ndarray, window: tuple[float, float]) -> float | None:
    """Fraction of the (M, 2) (time s, in contact 0/1) samples in ``window`` (s, s) in contact; None
    without samples there (the contact outputs are off or silent)."""
    inside = (contacts[:, 0] >= window[0]) & (contacts[:, 0] <= window[1])
    return float(np.mean(contacts[inside, 1])) if np.any(inside) else None


def run_pick(node, scene, base: np.ndarray, send) -> tuple[dict, dict]:
    """Place, plan, send and measure the pick-up (module doc); ``base``: the sim base's planar pose
    (x, y m, yaw rad, world), ``send(goal, timeout, lead, on_accept)`` -> (error_code, error_string):
    the goal stamped to start ``lead`` s after each send (a rejected goal is sent again), and
    ``on_accept(start_s)`` called with the accepted goal's start (ROS time, s). Returns the
    report's 'pick' entry and the figure's data; prints what it does. Raises ShadowTwinError."""
    obj, support, spot = pick_target(scene)
    sim = Entities(node, SIM_BRIDGE)
    recorder = PickRecorder(node, obj.name)
    print(f'   {obj.name}: declared on {obj.frame} at {list(obj.xyz)} m, out of the hand\'s reach there (the upper '
          f'arm would cover it); set upright on the {support.name} ({support.frame}) at {spot.round(3).tolist()} m '
          f'with {SIM_BRIDGE}/set_entity_state', flush=True)
    sim.place(obj.name, in_world(base, spot), base[2])
    time.sleep(1.0)
    start = sim.position(obj.name)
    if start is None:
        raise ShadowTwinError(f'{SIM_BRIDGE}/get_entity_state does not answer for {obj.name}')
    with tempfile.TemporaryDirectory(prefix='shadow_twin_pick_') as folder:   # the cell model up runs, for IK
        path, _ = write_cell_mjcf(CellConfig.from_yaml(config_path('cell.yaml')), Path(folder) / 'cell.xml')
        model = mujoco.MjModel.from_xml_path(str(path))
        data = mujoco.MjData(model)
        plan = plan_pick(model, data, arm_joint_names(), in_base(base, start), APPROACH, lift=LIFT)
    print(f'   one goal, {plan.times[-1]:.1f} s: approach, close, lift {LIFT:g} m, hold, set down, release',
          flush=True)
    recorder.start()
    started = []
    try:
        code, message = send(pick_goal(plan), plan.times[-1] + 30.0, START_LEAD, started.append)
        time.sleep(0.5)
    finally:
        recorder.stop()
    heights, contacts = recorder.since(started[0] if started else float('nan'))
    mock_side = len(heights['mock']) > 0
    hold = (plan.phases['hold'][0] + HOLD_MARGIN, plan.phases['hold'][1])
    starts = {'sim': float(start[2]), **({'mock': float(heights['mock'][0, 1])} if mock_side else {})}
    result = {side: verdict(heights[side], starts[side], hold) for side in starts}
    if not mock_side:
        result['mock'] = {'picked_up': None, 'why': 'no object poses on /mocap: up --cell gives the '
                          'scene to the sim bridge only (the mock UR5 carries a rigid hand, the mock hand is the hand '
                          'alone); a mock pick-up needs up to give one mock process the arm, the hand\'s fingers and '
                          'the scene'}
    touched = {side: {label: share(c, hold) for label, c in series.items()} for side, series in contacts.items()}
    report = {'object': obj.name, 'support': support.name, 'placed_at_base_frame_m': spot.tolist(),
              'start_world_m': start.tolist(), 'planned_lift_m': LIFT, 'picked_height_m': PICKED_HEIGHT,
              'phases_s': {k: list(v) for k, v in plan.phases.items()}, 'judged_s': list(hold),
              'error_code': code, 'error_string': message,
              'sides': result, 'contacts_during_hold': touched,
              'contacts_source': {side: f'{prefix}/<label>/wrench' for side, prefix in CONTACT_PREFIXES.items()}}
    words = {True: 'picked up', False: 'NOT picked up', None: 'not measured'}
    summary = '; '.join(f'{side} {words[r["picked_up"]]}' + (f' (lift {r["lift_min_m"] * 1e3:.0f}-'
                                                               f'{r["lift_max_m"] * 1e3:.0f} mm while held)'
                                                               if r.get('lift_min_m') is not None else '')
                        for side, r in result.items())
    fingers = '; '.join(f'{side} ' + (', '.join(label for label, part in shares.items() if part and part > 0.5)
                                      or 'none') for side, shares in touched.items())
    print(f'   result: error_code {code} {message!r}')
    print(f'   pick-up of the {obj.name}: {summary}; touching while held: {fingers}', flush=True)
    return report, {'heights': heights, 'starts': starts, 'contacts': contacts, 'hold': hold,
                    'picked_height': PICKED_HEIGHT, 'object': obj.name}
