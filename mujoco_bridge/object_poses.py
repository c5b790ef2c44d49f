"""Object pose output of the bridge: each free scene object's world pose as a motion-capture system
publishes it, from the stepping thread (after the tick's joint states, as the contact outputs):

* ``<object_pose_topic_prefix>/<object>/pose`` (``geometry_msgs/PoseStamped``, ``frame_id``
  ``world``): the object's body frame in the world frame, m and a unit quaternion; ``header.stamp``
  the time the pose was true (the joint states' clock: ROS time, or sim time with ``publish_clock``);
* ``<object_pose_topic_prefix>/<body>/pose`` likewise for each body of the model named in
  ``object_pose_bodies``: a rigid body the capture tracks on a robot (markers on the palm: the contact
  protocol's palm pose, ``shadow_twin.calibration.contacts.bags``).

The frames are :class:`shadow_twin.simulation.objects.MotionCapture`'s, in sim time: taken at
``object_pose_rate`` (on the multiples of its period; a tick takes at most one), each delivered once
``object_pose_latency`` s of sim time have passed since its stamp (so at the first tick after that:
up to a tick later), with Gaussian ``object_pose_position_noise`` (m) and ``object_pose_angle_noise``
(rad) drawn from ``object_pose_seed``. The sim bridge publishes its objects' true poses (no noise, no
latency: what the twin monitor compares); the mock hardware publishes as the issue's capture system
(config/mock_hardware.yaml: 100 Hz, 5 ms, 0.5 mm on ``/mocap``). A reset puts the objects back and
the frames go on (the bridge never sets sim time back; were it to go back, the capture would restart:
``MotionCapture.reset``); a reload, a spawn or a delete (a new model) rebinds it to the new scene's free
objects (an object deleted stops being published).
"""

from __future__ import annotations

import mujoco
import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node

from shadow_twin.common.errors import ConfigError
from shadow_twin.model.scene import free_joint_name
from shadow_twin.simulation.live.entities import WORLD_FRAME
from shadow_twin.simulation.objects import CaptureConfig, MotionCapture


def capture_config(settings) -> CaptureConfig:
    """The :class:`CaptureConfig` of the bridge's ``object_pose_*`` settings (rate > 0).
    Raises ConfigError (one line) for a value out of range."""
    return CaptureConfig(settings.object_pose_rate, settings.object_pose_latency,
                         settings.object_pose_position_noise, settings.object_pose_angle_noise)


class ObjectPoseOutput:
    """Publishes the object poses of the module doc for ``sim`` on ``node``.

    Args:
        node: the bridge node (publishers).
        sim: its ``LiveSimulation`` (``scene``, ``model``, ``data``, ``lock``, ``time``).
        settings: the bridge's settings (``object_pose_rate`` > 0, ``object_pose_topic_prefix``,
            ``object_pose_latency``, ``object_pose_position_noise``, ``object_pose_angle_noise``,
            ``object_pose_seed``, ``object_pose_bodies``).
        stamp_of: sim time (s) -> stamp of a message (the joint states' clock).
    Raises:
        ConfigError: a capture figure out of range; a body of ``object_pose_bodies`` the model lacks.
    """

    def __init__(self, node: Node, sim, settings, stamp_of) -> None:
        self.node, self.sim, self.stamp_of = node, sim, stamp_of
        self.capture = MotionCapture([], capture_config(settings), seed=settings.object_pose_seed)
        self.prefix = settings.object_pose_topic_prefix.rstrip('/')
        self._publishers: dict[str, object] = {}
        self._qpos: dict[str, int] = {}
        self.bodies = [str(b) for b in settings.object_pose_bodies if str(b)]
        self._body_ids: dict[str, int] = {}
        self._model = None
        self._last_time = -np.inf
        with sim.lock:
            self._bind(strict=True)
        c = self.capture.config
        node.get_logger().info(
            f'object poses of {", ".join([*self._qpos, *self._body_ids]) or "no free object (yet)"} on '
            f'{node.resolve_topic_name(self.prefix)}/<object>/pose at {c.rate:g} Hz (latency {c.latency * 1e3:g} ms, '
            f'noise {c.position_noise * 1e3:g} mm and {c.angle_noise:g} rad)')

    @property
    def names(self) -> list[str]:
        """The objects published (the free objects of the running model's scene)."""
        return list(self._qpos)

    def _bind(self, strict: bool = False) -> None:
        """Index the free objects and ``object_pose_bodies`` of the running model (lock held); publishers for
        new names. A body the model lacks: ConfigError when ``strict`` (at start), else left out with a warning
        (a reloaded model)."""
        model = self.sim.model
        self._qpos = {}
        for obj in self.sim.scene.objects:
            joint = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, free_joint_name(obj.name))
            if obj.free and joint >= 0:
                self._qpos[obj.name] = int(model.jnt_qposadr[joint])
                if obj.name not in self._publishers:
                    self._publishers[obj.name] = self.node.create_publisher(
                        PoseStamped, f'{self.prefix}/{obj.name}/pose', 10)
        self._body_ids = {}
        for body in self.bodies:
            index = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
            if index < 0:
                if strict:
                    raise ConfigError(f'object_pose_bodies: the model has no body {body!r}')
                self.node.get_logger().warning(f'object_pose_bodies: the reloaded model has no body {body!r}; '
                                               'its pose is not published')
                continue
            self._body_ids[body] = index
            if body not in self._publishers:
                self._publishers[body] = self.node.create_publisher(PoseStamped, f'{self.prefix}/{body}/pose', 10)
        self.capture.names = [*self._qpos, *self._body_ids]
        self._model = model

    def tick(self, mono: float) -> None:
        """Take a frame when one is due and publish the frames whose latency has passed, at the sim
        time now (``mono``, the tick's monotonic time, is not used: the capture runs on sim time)."""
        sim = self.sim
        with sim.lock:
            if sim.model is not self._model:               # reloaded, an object spawned or deleted
                self._bind()
            now = float(sim.time)
            if now < self._last_time:                      # a reset: time went back
                self.capture.reset()
            self._last_time = now
            if self.capture.due(now):
                qpos = sim.data.qpos
                data = sim.data
                poses = {name: (qpos[q:q + 3].copy(), qpos[q + 3:q + 7].copy()) for name, q in self._qpos.items()}
                poses.update({name: (data.xpos[b].copy(), data.xquat[b].copy()) for name, b in self._body_ids.items()})
                self.capture.measure(now, poses)
            frames = self.capture.delivered(now)
        for name, sample in frames:
            publisher = self._publishers.get(name)
            if publisher is None:
                continue
            msg = PoseStamped()
            msg.header.stamp = self.stamp_of(sample.stamp)
            msg.header.frame_id = WORLD_FRAME
            p, q = msg.pose.position, msg.pose.orientation
            p.x, p.y, p.z = (float(v) for v in sample.position)
            q.w, q.x, q.y, q.z = (float(v) for v in sample.quat)
            publisher.publish(msg)
