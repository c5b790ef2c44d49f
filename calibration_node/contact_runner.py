"""Record the contact protocol's runs on the robots through the twin, one bag per run: what
``shadow-twin calibrate --contacts --record`` records and then fits.

Each run (:class:`~shadow_twin.calibration.contacts.protocol.TiltRun`, planned by
:func:`~shadow_twin.calibration.contacts.live.plan_live_tilt` on the robots' model):

1. **positioning** (not recorded): the object put on ``live.park`` if the protocol gives one (out of the
   robots' reach, as step 2 puts it, then :data:`PARK_S` of waiting), then the arm to the protocol's
   ``live.arm_start`` (the forearm upright) and the hand open (the grip's joints at their model's reference
   angle), one goal through the twin's action, in ``live.positioning_s`` s;
2. **the object on its fixture**: each of ``place_services`` (``SetEntityState``) puts the object where
   the fixture holds it at the start pose, at rest: the sim bridge's (its object would otherwise walk
   there from wherever it lay, through the robot, as its follower joins a source that jumped), and the
   mock hardware's; on the real cell the operator has put it there. The run checks that its captured
   pose is within :data:`PLACED_TOLERANCE` of that place;
3. **the grip** (runs with ``grip: true``): the grip's joints closed in ``close_s``, then held
   ``settle_s``; runs without: ``settle_open_s`` of standing;
4. **the tilt, recorded**: the arm joint the plan picked, at the run's rate for its duration (a push run: the
   hand's goal of :func:`~shadow_twin.calibration.contacts.tilt.push_trajectory` from the open hand), while the
   hand's joint states, the object's pose and the palm's pose (a motion-capture rigid body on the palm:
   the mock hand publishes it with ``object_pose_bodies``) are recorded into the run's bag, and the hand's
   contact wrenches where it publishes them (``ContactTopics.contact_topics``; not waited for: a hand
   without tactile sensors records none).

A goal the twin rejects or aborts raises TrajectoryError naming the run. Units: rad, m, s.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTolerance
from geometry_msgs.msg import PoseStamped, WrenchStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from simulation_interfaces.msg import Result
from simulation_interfaces.srv import SetEntityState

from calibration_node.execution import TrajectoryExecutor
from calibration_node.recorder import BagRecorder
from shadow_twin.calibration.contacts.bags import ContactTopics
from shadow_twin.calibration.contacts.live import PLACE_S, LiveTilt, plan_live_tilt, tilt_trajectory
from shadow_twin.calibration.contacts.protocol import ContactProtocol, TiltRun
from shadow_twin.calibration.contacts.tilt import push_trajectory
from shadow_twin.common.errors import ShadowTwinError, TrajectoryError
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.ros.conversions import trajectory_msg
from shadow_twin.ros.spinning import result_within

#: m: how far the captured object may stand from its fixture's place when a run starts.
PLACED_TOLERANCE = 0.01
#: s after parking the object: the sim's object follower takes a jump in its source for a glitch until the
#: source has held the new place 0.5 s (``simulation.objects.gate``), and the preview sees the sim's objects.
PARK_S = 1.0
#: s of recording after a goal's last point (a push's: after the run's duration).
TAIL_S = 0.3
#: s to wait for a service's answer, or for the object's captured pose.
WAIT_S = 10.0


@dataclass(frozen=True)
class ContactRunSettings:
    """The live runs' settings: the twin's ``action_name``; ``place_services`` (SetEntityState services that
    place the object: the sim bridge's, the mock's); the bag ``topics``; ``start_lead``
    (s between sending a goal and its stamped start); ``arm_joints`` (the arm's joints, one of which turns)."""

    action_name: str
    place_services: tuple[str, ...]
    topics: ContactTopics
    start_lead: float
    arm_joints: tuple[str, ...]


class ContactRunRecorder:
    """Records the protocol's runs (module doc) with ``node`` on the robots whose model is ``model`` (the
    cell with the protocol's live scene: plans the motions; MJCF names as the twin's joints)."""

    def __init__(self, node: Node, protocol: ContactProtocol, model: mujoco.MjModel,
                 settings: ContactRunSettings) -> None:
        self.node, self.protocol, self.model, self.settings = node, protocol, model, settings
        self.joint_states, self.object_topic, self.palm_topic = settings.topics.resolved(protocol)
        self.executor = TrajectoryExecutor(node, settings.action_name)
        #: The hand's contact topics: recorded where the hand publishes them, not waited for.
        self.contact_topics = settings.topics.contact_topics()
        self.recorder = BagRecorder(node, {self.joint_states: JointState, self.object_topic: PoseStamped,
                                           self.palm_topic: PoseStamped,
                                           **{topic: WrenchStamped for topic in self.contact_topics}})
        self._latest: PoseStamped | None = None
        self._lock = threading.Lock()
        self._pose_sub = node.create_subscription(PoseStamped, self.object_topic, self._on_pose, 10)
        self._place_clients = {name: node.create_client(SetEntityState, name) for name in settings.place_services}
        hand = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in protocol.grip]
        #: The open hand: the grip's joints at the model's reference angles, rad.
        self.hand_open = {j: float(model.qpos0[model.jnt_qposadr[i]]) for j, i in zip(protocol.grip, hand) if i >= 0}

    def _on_pose(self, msg: PoseStamped) -> None:
        with self._lock:
            self._latest = msg

    def plan(self, run: TiltRun) -> LiveTilt:
        """The run's motion on the robots. Raises ConfigError (see :func:`plan_live_tilt`)."""
        plan = plan_live_tilt(self.model, self.protocol, run, list(self.settings.arm_joints))
        return dataclasses.replace(plan, lead=self.settings.start_lead)

    def record(self, run: TiltRun, bag: Path) -> dict[str, int]:
        """Make ``run`` and record its tilt into ``bag`` (must not exist); returns the messages recorded per
        topic. Raises TrajectoryError (a goal rejected or aborted, the object not on its fixture, a topic
        silent), ConfigError (the plan)."""
        plan = self.plan(run)
        log = self.node.get_logger()
        try:
            live = self.protocol.live
            start = {**plan.start, **self.hand_open}
            if live.park is not None:       # wherever the last run left it: out of the way first
                self._place(np.array([*live.park, 1.0, 0.0, 0.0, 0.0]))
                self.node_sleep(PARK_S)
            self._move(start, live.positioning_s, 0.2)
            self._put_object(plan.object_pose)
            if run.grip:        # the fingers stop on the object short of the grip's targets: no goal tolerance
                self._move(self.protocol.grip, self.protocol.close_s, self.protocol.settle_s, checked=False)
            else:
                self.node_sleep(self.protocol.settle_open_s)
            if run.push:
                trajectory = push_trajectory(run, self.hand_open)
                goal = FollowJointTrajectory.Goal(trajectory=trajectory_msg(trajectory))
                # the pushing finger is held up by the object: neither path nor goal tolerance
                goal.path_tolerance = goal.goal_tolerance = _unchecked(trajectory.joint_names)
                log.info(f'{run.name}: pushing with {", ".join(f"{j} to {t:.2f} rad" for j, t in run.push)} in '
                         f'{run.push_s:g} s, recording {run.duration:g} s')
            else:
                trajectory = tilt_trajectory(plan, run)
                goal = FollowJointTrajectory.Goal(trajectory=trajectory_msg(trajectory))
                log.info(f'{run.name}: turning {plan.joint} at {np.degrees(run.rate):g} deg/s for {run.duration:g} s '
                         f'(axis {plan.alignment:.3f} aligned with the palm\'s {run.axis})')
            topics = [self.joint_states, self.object_topic, self.palm_topic]
            tail = TAIL_S + max(0.0, run.duration - trajectory.duration)    # a push is recorded past its goal's end
            _, counts = self.executor.record_goal(self.recorder, goal, trajectory, bag, self.settings.start_lead,
                                                  tail, wait_for=topics, topics=topics + self.contact_topics)
        except ShadowTwinError as exc:
            raise TrajectoryError(f'contact run {run.name}: {exc}') from None
        return counts

    def _move(self, targets: dict[str, float], seconds: float, tail: float, checked: bool = True) -> None:
        """One goal: the joints ``targets`` (rad) reached in ``seconds``, then ``tail`` s of holding; without
        ``checked`` their goal tolerance is removed (-1, the JTC's rule)."""
        names = list(targets)
        trajectory = JointTrajectory(names, [seconds], [[targets[n] for n in names]],
                                     velocities=[[0.0] * len(names)])
        goal = FollowJointTrajectory.Goal(trajectory=trajectory_msg(trajectory))
        if not checked:
            goal.goal_tolerance = _unchecked(names)
        self.executor.send(goal, self.settings.start_lead, tail)

    def _place(self, pose: np.ndarray) -> None:
        """Put the object at ``pose`` ((7,) m and w, x, y, z; world) by each of the place services. Raises
        TrajectoryError."""
        name = self.protocol.object
        request = SetEntityState.Request(entity=name)
        p, q = request.state.pose.position, request.state.pose.orientation
        p.x, p.y, p.z = (float(v) for v in pose[:3])
        q.w, q.x, q.y, q.z = (float(v) for v in pose[3:])
        for service, client in self._place_clients.items():
            if not client.wait_for_service(timeout_sec=WAIT_S):
                raise TrajectoryError(f'no {service} service to place {name!r}')
            answer = result_within(client.call_async(request), WAIT_S)
            if answer is None or answer.result.result != Result.RESULT_OK:
                why = 'no answer' if answer is None else answer.result.error_message
                raise TrajectoryError(f'{service} did not place {name!r}: {why}')

    def _put_object(self, pose: np.ndarray) -> None:
        """The object on its fixture (module doc, step 2), its captured position then checked. Raises
        TrajectoryError."""
        name = self.protocol.object
        self._place(pose)
        self.node_sleep(PLACE_S)             # a capture frame of the placed object
        with self._lock:
            latest = self._latest
        if latest is None:
            raise TrajectoryError(f'no pose of {name!r} on {self.object_topic}')
        seen = np.array([latest.pose.position.x, latest.pose.position.y, latest.pose.position.z])
        off = float(np.linalg.norm(seen - pose[:3]))
        if off > PLACED_TOLERANCE:
            raise TrajectoryError(f'{name!r} stands {off * 1000:.0f} mm from its place on the fixture (at most '
                                  f'{PLACED_TOLERANCE * 1000:.0f} mm): put it on the plate')

    def node_sleep(self, seconds: float) -> None:
        """Wait ``seconds`` s of the node's clock."""
        clock = self.node.get_clock()
        end = clock.now().nanoseconds + int(seconds * 1e9)
        while clock.now().nanoseconds < end:
            threading.Event().wait(0.01)

    def close(self) -> None:
        """Stop the recorder's subscriptions."""
        self.recorder.destroy()


def _unchecked(names) -> list[JointTolerance]:
    """Tolerances that remove the check of ``names`` (-1, the JTC's rule)."""
    return [JointTolerance(name=n, position=-1.0) for n in names]
