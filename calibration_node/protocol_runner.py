"""Run the cell's calibration protocol live through the twin, one recorded bag per run.

Each run of a :class:`~shadow_twin.calibration.jobs.protocol.CellProtocol` (IN1, ..., AR1, ...):

1. **positioning** (not recorded): the arm's six joints to the protocol's rest pose in
   ``POSITIONING_TIME`` s through the twin's action (no base part); before a base run, then the
   protocol's ``lead_in`` (a short straight drive ahead, the arm at rest) so that every caster
   trails when the run starts, as the replay assumes;
2. **the goal**: the newest pose of the real base (x, y, yaw in ``odom``, from its odometry)
   is the start of the run's base path: :func:`compose_base_path` turns the run's poses and
   velocities relative to the start pose into ``odom``, and one ``FollowJointTrajectory`` goal
   carries the arm's trajectory (``trajectory``) and the base's path (``multi_dof_trajectory``,
   MoveIt's planar ``virtual_joint`` in ``odom``), stamped to start the run's lead after sending
   (:class:`~calibration_node.twin_lead.StartLead`: what the twin needs for the goal's points);
3. **recording** (:meth:`TrajectoryExecutor.record_goal`): the real and sim joint states, the
   real base's velocity commands and odometry, the sim's odometry, the motion-capture pose when
   there is one, and the commanded arm trajectory stamped with its start, for the goal's
   duration + ``settle_time`` s, into a new bag.

A goal that is rejected (GoalRejectedError: nothing moved, the run may be tried again) or aborted
raises TrajectoryError naming the run and the reason.
Units: m, rad, m/s, rad/s, s.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointComponentTolerance
from geometry_msgs.msg import PoseStamped, TwistStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from sensor_msgs.msg import JointState

from calibration_node.execution import TrajectoryExecutor
from calibration_node.recorder import BagRecorder
from calibration_node.twin_lead import StartLead
from shadow_twin.calibration.jobs.plan import CalibrationPlan
from shadow_twin.calibration.jobs.motions import RunGoal
from shadow_twin.calibration.jobs.protocol import CellProtocol, ProtocolRun
from shadow_twin.common.errors import GoalRejectedError, ShadowTwinError, TrajectoryError
from shadow_twin.control.base.trajectory import DEFAULT_BASE_FRAME, DEFAULT_BASE_JOINT, yaw_from_quaternion
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.ros.conversions import duration_msg, planar_trajectory_msg, trajectory_msg
from shadow_twin.ros.guard import guarded_subscription
from shadow_twin.ros.message_checks import check_odometry

#: Seconds the arm takes to reach the rest pose before each run.
POSITIONING_TIME = 3.0
#: Oldest odometry (s) a run's start pose may come from; older means the base's bridge is not there.
ODOMETRY_MAX_AGE = 0.5
#: Seconds to wait for a fresh odometry message before a run.
ODOMETRY_WAIT = 5.0
#: goal_time_tolerance of a run's goal, s: how long after the trajectory's end the robot may take to
#: come to rest within the goal tolerance. The twin's default (base.goal_time, 2 s) is for normal
#: driving; a protocol run's steep ramps are there to make the wheels slip, and a base that slid on
#: a slippery floor creeps back to its end pose for longer (measured: still 0.012 m/s after 2 s on
#: the benchmark's mock hardware, friction 0.3 and a 20 N m drive limit).
RUN_GOAL_TIME = 6.0


def in_run(exc: ShadowTwinError, context: str) -> TrajectoryError:
    """``exc`` as a TrajectoryError prefixed with ``context`` (the run and its step); a rejected
    goal stays a GoalRejectedError, so that the caller may send the run again."""
    return (GoalRejectedError if isinstance(exc, GoalRejectedError) else TrajectoryError)(f'{context}: {exc}')


def compose_base_path(start, poses, velocities) -> tuple[np.ndarray, np.ndarray]:
    """A base path relative to its start pose, in the frame the start pose is in.

    Args:
        start: (3,) x, y (m), yaw (rad) of the start pose (in ``odom``).
        poses: (K, 3) x, y, yaw relative to the start pose (x forward, y left of it).
        velocities: (K, 3) their time derivatives in the start frame (m/s, m/s, rad/s).
    Returns:
        ((K, 3) poses, (K, 3) velocities) in the start pose's frame: x, y rotated by the start
        yaw and shifted by the start position, yaw = start yaw + relative yaw (unwrapped, not
        wrapped into (-pi, pi]); the velocities' x, y rotated by the start yaw, the yaw rate as is.
    """
    x0, y0, yaw0 = (float(v) for v in start)
    poses = np.asarray(poses, dtype=float).reshape(-1, 3)
    velocities = np.asarray(velocities, dtype=float).reshape(-1, 3)
    c, s = math.cos(yaw0), math.sin(yaw0)
    out_poses = np.column_stack([x0 + c * poses[:, 0] - s * poses[:, 1], y0 + s * poses[:, 0] + c * poses[:, 1],
                                 yaw0 + poses[:, 2]])
    out_velocities = np.column_stack([c * velocities[:, 0] - s * velocities[:, 1],
                                      s * velocities[:, 0] + c * velocities[:, 1], velocities[:, 2]])
    return out_poses, out_velocities


def rest_goal(rest: dict[str, float], seconds: float = POSITIONING_TIME) -> FollowJointTrajectory.Goal:
    """A goal taking the arm's joints to ``rest`` ({joint: rad}) in ``seconds`` s, at rest there
    (zero velocities: a cubic from the current state); no base part."""
    joints = list(rest)
    trajectory = JointTrajectory(joints, [seconds], [[rest[j] for j in joints]], [[0.0] * len(joints)],
                                 name='rest_pose')
    return FollowJointTrajectory.Goal(trajectory=trajectory_msg(trajectory))


def run_goal_msg(goal: RunGoal, start_pose, goal_tolerance: tuple[float, float] = (0.0, 0.0)
                 ) -> FollowJointTrajectory.Goal:
    """The ``FollowJointTrajectory`` goal of one protocol run: the arm's trajectory and, when the
    base moves, its path composed onto ``start_pose`` ((3,) x, y, yaw in ``odom``) as the planar
    ``virtual_joint`` in ``odom``. The stamps are left 0 (the executor stamps them).

    Its ``goal_time_tolerance`` is :data:`RUN_GOAL_TIME`: the runs are meant to make the wheels
    slip, and a base that slid needs longer than the twin's default to come back to its end pose.
    ``goal_tolerance`` (position m, yaw rad; the protocol's ``goal_position_tolerance`` and
    ``goal_yaw_tolerance``) becomes the base's ``component_goal_tolerance`` (TRANSLATION, ROTATION)
    where > 0; 0 leaves the twin's.

    A base run ends at rest by definition; its last point's velocities are set to exactly 0
    (the profile's interpolation leaves round-off there, and the twin, as the JTC, accepts only
    a last point at rest)."""
    msg = FollowJointTrajectory.Goal(trajectory=trajectory_msg(goal.arm),
                                     goal_time_tolerance=duration_msg(RUN_GOAL_TIME))
    if len(goal.base_times):
        poses, velocities = compose_base_path(start_pose, goal.base_poses, goal.base_velocities)
        velocities[-1] = 0.0
        msg.multi_dof_trajectory = planar_trajectory_msg(goal.base_times, poses, velocities,
                                                         DEFAULT_BASE_FRAME, DEFAULT_BASE_JOINT)
        msg.component_goal_tolerance = [
            JointComponentTolerance(joint_name=DEFAULT_BASE_JOINT, component=component, position=float(value))
            for component, value in zip((JointComponentTolerance.TRANSLATION, JointComponentTolerance.ROTATION),
                                        goal_tolerance) if value > 0]
    return msg


class OdometryWatch:
    """The newest planar pose of a ``nav_msgs/Odometry`` topic and when it arrived.

    Args:
        node: the node subscribing. topic: the odometry topic. callback_group: of the subscription.
    """

    def __init__(self, node: Node, topic: str, callback_group=None) -> None:
        self.topic = topic
        self._lock = threading.Lock()
        self._newest: tuple[float, np.ndarray] | None = None      # (monotonic s, (3,) x, y, yaw)
        guarded_subscription(node, Odometry, topic, self._on_odometry, 10, check=check_odometry,
                             callback_group=callback_group)

    def _on_odometry(self, msg: Odometry) -> None:
        p, q = msg.pose.pose.position, msg.pose.pose.orientation
        pose = np.array([p.x, p.y, yaw_from_quaternion(q.x, q.y, q.z, q.w)], dtype=float)
        with self._lock:
            self._newest = (time.monotonic(), pose)

    def pose(self, max_age: float = ODOMETRY_MAX_AGE, wait: float = ODOMETRY_WAIT) -> np.ndarray:
        """(3,) the newest pose (x, y m, yaw rad in the odometry's frame), waiting up to ``wait`` s
        for one at most ``max_age`` s old. Raises TrajectoryError when none comes."""
        deadline = time.monotonic() + wait
        while True:
            with self._lock:
                newest = self._newest
            if newest is not None and time.monotonic() - newest[0] <= max_age:
                return newest[1].copy()
            if time.monotonic() > deadline:
                age = 'none received' if newest is None else f'the newest is {time.monotonic() - newest[0]:.1f} s old'
                raise TrajectoryError(f'no fresh odometry on {self.topic} ({age}): the base\'s start pose is '
                                      'unknown (is the base bridge running?)')
            time.sleep(0.02)


@dataclass(frozen=True)
class RunnerSettings:
    """How runs are executed.

    Attributes:
        start_lead: s between sending a goal and its stamped start, or a StartLead (from the goal's points).
        settle_time: s recorded after a run's end (the base coming to rest).
        positioning_time: s the arm takes to the rest pose before each run.
    """

    start_lead: float | StartLead
    settle_time: float
    positioning_time: float = POSITIONING_TIME


class ProtocolRunner:
    """Execute and record the runs of a protocol plan (see module doc).

    Args:
        plan: the protocol plan (its topics: joint states, base commands, odometry, pose).
        executor: sends goals to the twin.
        recorder: records the bags (the plan's topics are subscribed when missing).
        odometry: the real base's odometry (``plan.base_odom_topic``).
        settings: lead, settling and positioning times.
    Raises:
        ConfigError: the plan has no protocol, or it does not read.
    """

    def __init__(self, plan: CalibrationPlan, executor: TrajectoryExecutor, recorder: BagRecorder,
                 odometry: OdometryWatch, settings: RunnerSettings) -> None:
        self.protocol: CellProtocol = plan.cell_protocol()
        self.executor, self.recorder, self.odometry, self.settings = executor, recorder, odometry, settings
        #: The base's goal tolerance of every run's goal (m, rad; 0: the twin's).
        self.goal_tolerance = (self.protocol.goal_position_tolerance, self.protocol.goal_yaw_tolerance)
        base = plan.base_recording_topics()
        self.topics = {plan.real_topic: JointState, plan.sim_topic: JointState, base['cmd_vel']: TwistStamped,
                       base['odom']: Odometry, base['sim_odom']: Odometry}
        if 'pose' in base:
            self.topics[base['pose']] = PoseStamped
        recorder.subscribe(self.topics)
        #: Topics that must flow before a run: all but the velocity commands (sent only while the base drives).
        self.flowing = [t for t in self.topics if t != base['cmd_vel']]

    def duration(self, run: ProtocolRun) -> float:
        """The run's goal duration, s (without positioning, lead and settling)."""
        return run.goal(self.protocol.rest_pose).duration

    def record(self, run: ProtocolRun, bag: Path) -> tuple[int, dict[str, int]]:
        """Position the arm, then execute ``run`` while recording it into ``bag`` (see module doc).

        Returns (start stamp ns, messages recorded per topic). Raises TrajectoryError naming the
        run (rejected, aborted, no odometry, silent topics), RecordingError if ``bag`` exists."""
        goal = run.goal(self.protocol.rest_pose)
        lead = self.settings.start_lead
        try:
            self.executor.send(rest_goal(self.protocol.rest_pose, self.settings.positioning_time), lead, 0.0)
        except ShadowTwinError as exc:
            raise in_run(exc, f'run {run.name}: moving the arm to the rest pose') from None
        lead_in = self.protocol.lead_in_goal() if len(goal.base_times) else None
        if lead_in is not None:
            try:
                self.executor.send(run_goal_msg(lead_in, self.odometry.pose(), self.goal_tolerance), lead,
                                   self.settings.settle_time)
            except ShadowTwinError as exc:
                raise in_run(exc, f'run {run.name}: the lead-in drive') from None
        try:
            start = self.odometry.pose() if len(goal.base_times) else np.zeros(3)
            return self.executor.record_goal(self.recorder, run_goal_msg(goal, start, self.goal_tolerance), goal.arm,
                                             bag, lead,
                                             self.settings.settle_time, wait_for=self.flowing,
                                             topics=list(self.topics))
        except TrajectoryError as exc:
            raise in_run(exc, f'run {run.name}') from None
