"""What the twin's goal preview takes from the sim besides its joint states and odometry (issue 37): the
poses of the scene's free objects and the setpoints of the joints a goal leaves out.

* **Objects** (with ``scene_file``): per free object of the scene, the sim bridge's pose
  (``<preview_objects_prefix>/<name>/pose``, ``geometry_msgs/PoseStamped`` in ``world``, the bridge's
  ``object_pose_*`` output). A prediction starts with each object where the newest pose, received within
  :data:`MAX_AGE` s, puts it, moving at the velocity its last two poses give (stamps at most
  :data:`MAX_GAP` s apart; else at rest): one held in a moving hand moves with it (the grasp check judges
  it, :mod:`shadow_twin.simulation.preview.grasp`); an object with no fresh pose starts where the scene
  puts it. A pose that is not finite, not a unit quaternion or not in ``world`` is dropped and reported by the
  node's callback guard (one line per topic and period).
* **Setpoints** (with ``preview_setpoints_topic``): the sim's ``control_msgs/JointTrajectoryControllerState``
  (the bridge's ``controller_state``, ``controller_state_rate`` > 0): ``reference.positions``, received
  within :data:`MAX_AGE` s, are what the joints a goal does not name hold in the prediction, as the
  controller holds them: fingers closed past a held object keep squeezing it. Without them those joints
  hold where they stand. A message whose names and positions differ in length, or hold a non-finite
  position, is dropped.

Freshness is judged by the time of receipt (the node's steady clock): the sim's stamps may be of another
clock than the twin's.
"""

from __future__ import annotations

import math
import threading
import time

from control_msgs.msg import JointTrajectoryControllerState
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from rclpy.qos import QoSProfile, qos_profile_sensor_data

from shadow_twin.common.errors import BadMessage
from shadow_twin.common.stamps import to_seconds
from shadow_twin.model.scene.config import WORLD_FRAMES
from shadow_twin.ros.guard import guarded_subscription
from shadow_twin.simulation.objects.gate import check_sample
from shadow_twin.simulation.objects.poses import relative_rotvec

#: s: the newest pose or setpoints older than this (by receipt) are not used.
MAX_AGE = 0.5
#: The unit-quaternion tolerance of a pose (the entities' and the follower's).
UNIT_TOLERANCE = 1e-3
#: s: two poses further apart than this give no velocity (the object starts at rest).
MAX_GAP = 0.1


class PreviewInputs:
    """The objects' poses and the setpoints of one node (module doc).

    Args:
        node: the twin's node.
        objects: names of the scene's free objects (none: no pose is taken).
        objects_prefix: ``<prefix>/<name>/pose`` is each object's topic.
        setpoints_topic: the sim's controller_state topic; '' = none.
    """

    def __init__(self, node: Node, objects, objects_prefix: str, setpoints_topic: str) -> None:
        self._lock = threading.Lock()
        self._poses: dict[str, tuple[float, list[float]]] = {}
        self._last: dict[str, object] = {}          # the newest sample per object (the velocity's other end)
        self._setpoints: tuple[float, dict[str, float]] | None = None
        self.topics = {name: f'{objects_prefix.rstrip("/")}/{name}/pose' for name in objects}
        for name, topic in self.topics.items():
            guarded_subscription(node, PoseStamped, topic, lambda msg, n=name: self._on_pose(n, msg),
                                 qos_profile_sensor_data)
        if setpoints_topic:
            guarded_subscription(node, JointTrajectoryControllerState, setpoints_topic, self._on_setpoints,
                                 QoSProfile(depth=5))

    def _on_pose(self, name: str, msg: PoseStamped) -> None:
        if msg.header.frame_id not in WORLD_FRAMES:
            raise BadMessage(f"frame_id {msg.header.frame_id!r} is not the world frame")
        p, q = msg.pose.position, msg.pose.orientation
        kind, detail, sample = check_sample(to_seconds(msg.header.stamp), (p.x, p.y, p.z), (q.w, q.x, q.y, q.z),
                                            UNIT_TOLERANCE)
        if sample is None:
            raise BadMessage(f'{kind}: {detail}')
        velocity = [0.0] * 6
        with self._lock:
            last = self._last.get(name)
            if last is not None and 0.0 < sample.stamp - last.stamp <= MAX_GAP:
                dt = sample.stamp - last.stamp
                velocity = [*((sample.position - last.position) / dt).tolist(),
                            *(relative_rotvec(sample.quat, last.quat) / dt).tolist()]
            self._last[name] = sample
            self._poses[name] = (time.monotonic(), [*sample.position.tolist(), *sample.quat.tolist(), *velocity])

    def _on_setpoints(self, msg: JointTrajectoryControllerState) -> None:
        names, positions = list(msg.joint_names), list(msg.reference.positions)
        if len(names) != len(positions):
            raise BadMessage(f'{len(names)} joint names but {len(positions)} reference positions')
        if not all(math.isfinite(v) for v in positions):
            raise BadMessage('a reference position is not finite')
        with self._lock:
            self._setpoints = (time.monotonic(), dict(zip(names, (float(v) for v in positions))))

    def objects(self) -> dict[str, list[float]]:
        """{object: (13,) pose x, y, z m, qw, qx, qy, qz and velocity vx, vy, vz m/s, wx, wy, wz rad/s (world
        axes)} of the poses received within :data:`MAX_AGE` s."""
        now = time.monotonic()
        with self._lock:
            return {n: list(pose) for n, (at, pose) in self._poses.items() if now - at <= MAX_AGE}

    def holds(self) -> dict[str, float]:
        """{joint: rad} of the setpoints received within :data:`MAX_AGE` s ({} without)."""
        with self._lock:
            if self._setpoints is None or time.monotonic() - self._setpoints[0] > MAX_AGE:
                return {}
            return dict(self._setpoints[1])
