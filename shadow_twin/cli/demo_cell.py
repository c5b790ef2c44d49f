"""``shadow-twin demo --cell``: the whole cell live, one goal for the three robots, and the
arm swing's effect on the base.

1. Starts, on a private ROS domain kept on this host, ``shadow-twin up --cell
   --mock-hardware`` (the sim bridge on the cell model, mock hardware for the UR5, the hand and
   the MiR250 whose physics differ from the sim's, the twin server and monitor; logs in
   ``<out>/logs``).
2. Sends one ``FollowJointTrajectory`` goal through ``/twin/follow_joint_trajectory`` that
   moves the arm and closes the hand (``trajectory``) while the base drives a quarter arc of
   1 m radius in 8 s (``multi_dof_trajectory``, MoveIt's planar ``virtual_joint`` in
   ``odom``), and prints the result and the tracking: per group the RMS and final sim - real
   error of the joints (rad), and the final pose error of the mock base and of the sim base
   against the goal (m, rad).
3. Swings the extended arm's shoulder pan joint +/-1 rad at full speed (q = -cos(pi t), peak
   pi rad/s) for 6 s with the base commanded still, and prints the peak-to-peak y (m) and
   yaw (rad) of both bases: the effect the MiR250 + UR5 twin study (IMECE 2023) found.
4. Picks up the scene's can (``--scene``, default ``config/scene.yaml``; ``up --scene``): set on the tote,
   grasped from the side, lifted 0.15 m, held, set down and let go in one goal; prints whether it was
   picked up on each side (sim, mock) and which fingertips touch it (``shadow_twin.cli.demo_pick``).
5. Writes ``demo_cell_report.json``, ``base.png`` (base paths, and y / yaw during the swing) and
   ``object.png`` (the can's height over time, sim vs mock, and which fingertips touch, sim vs mock).

Exit status: 0 when the demo ran (whatever the numbers), 1 when a step failed, 2 on bad
arguments.
"""

from __future__ import annotations

import functools
import json
import math
import sys
import threading
import time
from pathlib import Path

import numpy as np
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTolerance
from geometry_msgs.msg import Transform, Twist
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectoryPoint, MultiDOFJointTrajectoryPoint

from shadow_twin.cli.demo_pick import run_pick
from shadow_twin.cli.processes import ChildProcesses
from shadow_twin.cli.up import READY_REPORT
from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.common.files import write_text_atomic
from shadow_twin.control.base.trajectory import yaw_from_quaternion
from shadow_twin.control.diff_drive import wrap_angle
from shadow_twin.common.paths import config_path
from shadow_twin.common.stamps import from_nanoseconds
from shadow_twin.model.cell.assembly import arm_joint_names
from shadow_twin.model.scene import SceneConfig
from shadow_twin.plots.demo_figures import plot_base, plot_pick
from shadow_twin.ros.action_client import LockedActionClient
from shadow_twin.ros.calibration_client import SpinningNode
from shadow_twin.ros.conversions import duration_msg, time_msg
from shadow_twin.ros.dds import isolate_domain

TWIN_ACTION = '/twin/follow_joint_trajectory'
ARM = arm_joint_names()
HAND_CLOSE = {'rh_FFJ3': 1.2, 'rh_MFJ3': 1.2, 'rh_RFJ3': 1.2, 'rh_LFJ3': 1.2, 'rh_THJ4': 0.8, 'rh_WRJ1': -0.3}
ARM_TARGET = [0.5, -0.6, 0.9, -0.3, 0.4, 0.0]            # rad, the goal's last arm point
ARC_RADIUS, ARC_SECONDS = 1.0, 8.0                       # m, s: a quarter arc to the left
SWING_SECONDS = 6.0
#: Sends of a goal the twin rejects (nothing moved; e.g. a controller that did not accept its part within
#: start_lead on a PC still loading the cell: CI saw the first goal rejected so), 1 s apart.
SEND_ATTEMPTS = 3
#: s: the demo's goals are stamped to start this far ahead, so that the controllers have 0.75 s to accept
#: their parts (the twin's own start_lead, 0.5 s, leaves them 0.25 s: CI saw a loaded PC's acceptances
#: come later three sends in a row, while each controller had accepted in time on its side).
GOAL_LEAD = 1.0
REAL_TOPICS = ('/joint_states', '/rh/joint_states')


class CellRecorder:
    """Latest joint states (merged over the real topics) and odometry histories, in memory."""

    def __init__(self, node) -> None:
        self.lock = threading.Lock()
        self.real: dict[str, float] = {}
        self.sim: dict[str, float] = {}
        self.odom: dict[str, list[tuple[float, float, float, float]]] = {'/odom': [], '/sim/odom': []}
        for topic in REAL_TOPICS:
            node.create_subscription(JointState, topic, lambda m: self._joints(self.real, m), 50)
        node.create_subscription(JointState, '/sim/joint_states', lambda m: self._joints(self.sim, m), 50)
        for topic in self.odom:
            node.create_subscription(Odometry, topic, functools.partial(self._odom, topic), 50)

    def _joints(self, into: dict, msg: JointState) -> None:
        with self.lock:
            into.update(zip(msg.name, msg.position))

    def _odom(self, topic: str, msg: Odometry) -> None:
        q = msg.pose.pose.orientation
        yaw = yaw_from_quaternion(q.x, q.y, q.z, q.w)
        with self.lock:
            self.odom[topic].append((time.monotonic(), msg.pose.pose.position.x, msg.pose.pose.position.y, yaw))

    def error(self, joints: list[str]) -> np.ndarray:
        """(J,) sim - real positions now, rad."""
        with self.lock:
            return np.array([self.sim[j] - self.real[j] for j in joints])

    def pose(self, topic: str) -> np.ndarray:
        """(3,) latest (x, y, yaw) of ``topic``."""
        with self.lock:
            return np.array(self.odom[topic][-1][1:])

    def poses_since(self, topic: str, since: float) -> np.ndarray:
        """(N, 3) poses of ``topic`` received after monotonic ``since``."""
        with self.lock:
            return np.array([p[1:] for p in self.odom[topic] if p[0] >= since]).reshape(-1, 3)


def planar(x: float, y: float, yaw: float) -> Transform:
    """A planar pose as a geometry_msgs/Transform (rotation about z)."""
    t = Transform()
    t.translation.x, t.translation.y = float(x), float(y)
    t.rotation.z, t.rotation.w = math.sin(yaw / 2.0), math.cos(yaw / 2.0)
    return t


def cell_goal(start: np.ndarray) -> FollowJointTrajectory.Goal:
    """Arm to ``ARM_TARGET`` and hand closed in 4 s, base on a quarter arc (from pose ``start``)
    along a quintic time law, every 0.5 s a pose with its velocities, as MoveIt sends a planar
    joint (poses alone are joined by straight segments: the base's velocity stepped at every
    point, and the arm's shoulder lift was predicted over its 150 N m limit at the first one)."""
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = ARM + list(HAND_CLOSE)
    goal.trajectory.points = [JointTrajectoryPoint(positions=ARM_TARGET + list(HAND_CLOSE.values()),
                                                   time_from_start=duration_msg(4.0))]
    goal.goal_tolerance = [JointTolerance(name=j, position=0.05) for j in goal.trajectory.joint_names]
    goal.multi_dof_trajectory.header.frame_id = 'odom'
    goal.multi_dof_trajectory.joint_names = ['virtual_joint']
    for k in range(1, 17):
        u = k / 16
        s, ds = 10 * u ** 3 - 15 * u ** 4 + 6 * u ** 5, (30 * u ** 2 - 60 * u ** 3 + 30 * u ** 4) / ARC_SECONDS
        goal.multi_dof_trajectory.points.append(MultiDOFJointTrajectoryPoint(
            transforms=[planar(*arc_pose(start, (math.pi / 2) * s))],
            velocities=[arc_velocity(start, (math.pi / 2) * s, (math.pi / 2) * ds)],
            time_from_start=duration_msg(ARC_SECONDS * u)))
    return goal


def arc_velocity(start: np.ndarray, angle: float, rate: float) -> Twist:
    """d/dt of :func:`arc_pose` at ``angle`` rad turning at ``rate`` rad/s: x_dot, y_dot (m/s, odom)
    and the yaw rate (rad/s), as MoveIt fills a planar joint's velocities."""
    yaw0 = start[2]
    dlx, dly = ARC_RADIUS * math.cos(angle) * rate, ARC_RADIUS * math.sin(angle) * rate
    twist = Twist()
    twist.linear.x = dlx * math.cos(yaw0) - dly * math.sin(yaw0)
    twist.linear.y = dlx * math.sin(yaw0) + dly * math.cos(yaw0)
    twist.angular.z = float(rate)
    return twist


def arc_pose(start: np.ndarray, angle: float) -> np.ndarray:
    """(3,) pose (x, y m, yaw rad, odom) ``angle`` rad along the left arc of ``ARC_RADIUS`` from ``start``."""
    x0, y0, yaw0 = start
    lx, ly = ARC_RADIUS * math.sin(angle), ARC_RADIUS * (1.0 - math.cos(angle))    # in the start frame
    return np.array([x0 + lx * math.cos(yaw0) - ly * math.sin(yaw0), y0 + lx * math.sin(yaw0) + ly * math.cos(yaw0),
                     yaw0 + angle])


def swing_goal() -> FollowJointTrajectory.Goal:
    """The extended arm (lift, elbow 0) swinging its shoulder pan -1 -> +1 rad at pi rad/s peak."""
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = ARM
    rest = [-1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    goal.trajectory.points = [JointTrajectoryPoint(positions=rest, velocities=[0.0] * 6,
                                                   time_from_start=duration_msg(2.0))]
    for t in np.arange(0.05, SWING_SECONDS + 1e-9, 0.05):
        q = [-math.cos(math.pi * t)] + rest[1:]
        qd = [math.pi * math.sin(math.pi * t)] + [0.0] * 5
        goal.trajectory.points.append(JointTrajectoryPoint(positions=q, velocities=qd,
                                                           time_from_start=duration_msg(3.0 + t)))
    return goal


def send(node, action: LockedActionClient, goal, timeout: float, lead: float | None = None,
         on_accept=None) -> tuple[int, str]:
    """Send ``goal`` and wait for its result; (error_code, error_string). ``lead`` (s): stamp each
    send's start ``lead`` s ahead (ROS time; None: the twin's own start lead). A rejected goal
    (nothing moved) is sent again 1 s later, up to :data:`SEND_ATTEMPTS` sends;
    ``on_accept(start_s)`` is called when one is accepted, with its stamped start (s; None
    unstamped). Raises ShadowTwinError when every send is rejected or no answer or result comes
    within ``timeout`` s."""
    for attempt in range(1, SEND_ATTEMPTS + 1):
        start_s = None
        if lead is not None:
            start_s = from_nanoseconds(node.get_clock().now().nanoseconds) + lead
            goal.trajectory.header.stamp = time_msg(start_s)
        future = action.send_goal_async(goal)
        deadline = time.monotonic() + timeout
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not future.done():
            raise ShadowTwinError(f'the twin did not answer the goal within {timeout:g} s (see logs/twin.log)')
        if future.result().accepted:
            if on_accept is not None:
                on_accept(start_s)
            break
        if attempt == SEND_ATTEMPTS:
            raise ShadowTwinError(f'the twin rejected the goal {SEND_ATTEMPTS} times (see logs/twin.log)')
        print(f'   the twin rejected the goal (nothing moved; the reason is in logs/twin.log): sending it again '
              f'(attempt {attempt + 1}/{SEND_ATTEMPTS})', flush=True)
        time.sleep(1.0)
    result = future.result().get_result_async()
    while not result.done() and time.monotonic() < deadline:
        time.sleep(0.02)
    if not result.done():
        raise ShadowTwinError(f'no result within {timeout:g} s')
    return int(result.result().result.error_code), result.result().result.error_string



def run(args) -> int:
    """The demo (module doc); returns the exit status."""
    started = time.monotonic()
    scene_file = Path(getattr(args, 'scene', None) or config_path('scene.yaml')).resolve()
    try:
        scene = SceneConfig.from_yaml(scene_file)      # a bad file: one line, before anything starts
    except ShadowTwinError as exc:
        print(f'shadow-twin demo: error: --scene: {exc}', file=sys.stderr)
        return ExitCode.BAD_INPUT
    out = (args.out or Path('shadow_twin_demo') / f'cell-{time.strftime("%Y%m%d-%H%M%S")}').resolve()
    if out.exists():
        raise ShadowTwinError(f'--out {out} exists; the demo never writes over earlier results')
    (out / 'logs').mkdir(parents=True)
    domain = isolate_domain(args.domain_id)
    print(f'shadow-twin demo --cell: ROS_DOMAIN_ID={domain} (this host only); output in {out}', flush=True)
    processes = ChildProcesses(out / 'logs')
    processes.start('twin', [sys.executable, '-m', 'shadow_twin.cli.main', 'up', '--cell', '--mock-hardware',
                             '--scene', str(scene_file), '--contacts'], ready_line=READY_REPORT)
    ros = SpinningNode('shadow_twin_demo_cell')
    try:
        recorder = CellRecorder(ros.node)
        action = LockedActionClient(ros.node, FollowJointTrajectory, TWIN_ACTION)
        print('1. starting the cell with mock hardware (UR5, hand, MiR250) ...', flush=True)
        deadline = time.monotonic() + 90.0

        def missing() -> list[str]:
            return [what for what, ok in (('up\'s ready line', processes.ready('twin')),
                                          ('the twin action server', action.server_is_ready()),
                                          ('/sim/joint_states', recorder.sim),
                                          ('real joint states', recorder.real),
                                          *((topic, poses) for topic, poses in recorder.odom.items())) if not ok]
        while waiting := missing():
            processes.check()
            if time.monotonic() > deadline:
                raise ShadowTwinError(f'the cell did not come up within 90 s: still missing {", ".join(waiting)} '
                                      '(see logs/twin.log)')
            time.sleep(0.2)
        time.sleep(1.0)
        print('2. one goal: arm + hand in 4 s, base on a quarter arc of 1 m in 8 s', flush=True)
        start = recorder.pose('/odom')
        goal = cell_goal(start)
        t0 = time.monotonic()
        code, message = send(ros.node, action, goal, 60.0, GOAL_LEAD)
        time.sleep(0.5)
        hand = list(HAND_CLOSE)
        errors = {'arm': recorder.error(ARM), 'hand': recorder.error(hand)}
        # each base follows the goal's poses in its own odom frame (the twin server's rule)
        target = arc_pose(start, math.pi / 2)
        base = {}
        for topic in recorder.odom:
            pose = recorder.pose(topic)
            base[topic] = {'position_error_m': float(np.hypot(*(pose[:2] - target[:2]))),
                           'yaw_error_rad': float(abs(wrap_angle(pose[2] - target[2])))}
        paths = {topic: recorder.poses_since(topic, t0) for topic in recorder.odom}
        print(f'   result: error_code {code} {message!r}')
        for group, e in errors.items():
            print(f'   {group:4s} sim - real at the end: RMS {np.sqrt(np.mean(e ** 2)):.4f} rad, '
                  f'max {np.max(np.abs(e)):.4f} rad over {len(e)} joints')
        for topic, e in base.items():
            print(f'   base {topic:9s} end pose vs goal: {e["position_error_m"] * 1e3:.1f} mm, '
                  f'{e["yaw_error_rad"]:.4f} rad')
        print(f'3. arm swing: shoulder pan +/-1 rad at pi rad/s for {SWING_SECONDS:g} s, base commanded still',
              flush=True)
        t1 = time.monotonic()
        swing_code, swing_message = send(ros.node, action, swing_goal(), 60.0, GOAL_LEAD)
        swing = {topic: recorder.poses_since(topic, t1 + GOAL_LEAD + 2.0) for topic in recorder.odom}
        effect = {topic: {'y_ptp_m': float(np.ptp(p[:, 1])), 'yaw_ptp_rad': float(np.ptp(p[:, 2]))}
                  for topic, p in swing.items()}
        print(f'   result: error_code {swing_code} {swing_message!r}')
        for topic, e in effect.items():
            note = ('  (the sim: arm and base in one model)' if topic == '/sim/odom' else
                    '  (the mock UR and mock MiR are separate processes: no coupling; a real cell shows it here)')
            print(f'   base {topic:9s} y peak-to-peak {e["y_ptp_m"] * 1e3:.2f} mm, yaw {e["yaw_ptp_rad"]:.4f} rad '
                  f'({math.degrees(e["yaw_ptp_rad"]):.2f} deg){note}')
        print('4. pick-up: the hand takes the can, lifts it, holds it, sets it down', flush=True)
        try:
            pick, figure = run_pick(ros.node, scene, recorder.pose('/sim/odom'),
                                    functools.partial(send, ros.node, action))
        except ShadowTwinError as exc:                   # the demo goes on: the report says why
            print(f'   no pick-up: {exc}', flush=True)
            pick, figure = {'error': str(exc)}, None
    finally:
        ros.close()
        processes.stop()
    plot_base(out / 'base.png', paths, swing)
    if figure is not None:
        plot_pick(out / 'object.png', figure['heights'], figure['starts'], figure['contacts'], figure['hold'],
                  figure['picked_height'], figure['object'])
    report = {'goal': {'error_code': code, 'error_string': message,
                       'joint_error_end_rad': {g: e.tolist() for g, e in errors.items()}, 'base_end': base},
              'swing': {'error_code': swing_code, 'error_string': swing_message, 'base': effect},
              'pick': pick, 'scene': str(scene_file),
              'wall_time_s': time.monotonic() - started, 'domain_id': domain}
    write_text_atomic(out / 'demo_cell_report.json', json.dumps(report, indent=2) + '\n')
    print(f'report: {out / "demo_cell_report.json"}; plots: {out / "base.png"}'
          + (f', {out / "object.png"}' if figure is not None else ''))
    print(f'demo finished in {time.monotonic() - started:.0f} s')
    return ExitCode.OK
