"""What the sim bridge and the twin monitor publish for the 3D views (issue 38's contract), published from a
test's own node for a model (default: the built-in Shadow Hand E), so that the browser view can be tested
and measured without the twin:

* ``/tf_static``: ``world`` -> ``sim/world`` and ``world`` -> ``real/world``, identity (latched);
* ``/tf``: every body of the model in its parent body's frame, ``sim/...`` and ``real/...``, at ``rate``, each
  message stamped with its instant (the sim's joints follow :meth:`TwinPublisher.sim_positions`; the real
  ones follow them ``lag`` s late and :attr:`TwinPublisher.offsets` behind);
* ``/sim/markers``: the model's parts in the ``sim/`` frames, their own colours; ``/real/markers``: the same
  parts of the moving bodies (the world body's, the floor, left out: a ghost of the floor would tint the
  whole scene) in the ``real/`` frames, coloured by each link's sim-real error on
  :class:`~shadow_twin.visual.colours.ErrorScale` (both latched; the real array sent again when a colour
  changes);
* ``/twin/joint_error``: sim - real per joint at ``rate``; ``/diagnostics``: one status a second.

With ``probe``, each ``/tf`` message of the sim also carries ``sim/world`` -> ``sim/probe`` translated by
``1e-6 m`` times its sequence number: a page that sees the frame move knows which message moved it.

The messages are built with the bridge's and monitor's own helpers (:mod:`shadow_twin.ros.visual_msgs`).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import mujoco
import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from sensor_msgs.msg import JointState
from std_msgs.msg import Header
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import MarkerArray

from shadow_twin.model.mjcf import builtin_model_path
from shadow_twin.ros.visual_msgs import LATCHED_QOS, TF_QOS, TransformBuffer, identity_transform, part_markers
from shadow_twin.visual.colours import ErrorScale
from shadow_twin.visual.configuration import RobotConfiguration, link_errors
from shadow_twin.visual.frames import BodyTree
from shadow_twin.visual.geometry import geom_parts

#: m per sequence number of the probe frame's translation.
PROBE_STEP = 1e-6
PROBE_FRAME = 'sim/probe'


def ros_time(seconds: float) -> Time:
    """``seconds`` (ROS time, s) as a message stamp."""
    sec = int(seconds)
    return Time(sec=sec, nanosec=int(round((seconds - sec) * 1e9)) % 1_000_000_000)


class TwinPublisher:
    """Publishes the contract (module doc) from ``node`` (an rclpy node spinning elsewhere: its timer runs
    there).

    Args:
        node: the publishing node.
        mesh_dir: where mesh parts' STL files go (the hand has none).
        rate: Hz of ``/tf`` and ``/twin/joint_error``.
        motion: rad, the amplitude of the sim joints' sinusoid (0: still).
        probe: add the probe frame (module doc).
        model_path: the MJCF (default: the built-in hand).
        lag: s the real joints follow the sim's motion late (before :attr:`offsets`).
    """

    def __init__(self, node, mesh_dir: Path, rate: float = 30.0, motion: float = 0.0, probe: bool = False,
                 model_path: Path | None = None, lag: float = 0.0) -> None:
        self.node = node
        self.model = mujoco.MjModel.from_xml_path(str(model_path or builtin_model_path()))
        self.parts = geom_parts(self.model, mesh_dir)
        self.real_parts = [p for p in self.parts if p.body != 0]
        self.joints = list(RobotConfiguration(self.model).addresses)
        self.configuration = RobotConfiguration(self.model)
        self.sim_data, self.real_data = mujoco.MjData(self.model), mujoco.MjData(self.model)
        trees = BodyTree(self.model, 'sim/'), BodyTree(self.model, 'real/')
        self.buffers = [TransformBuffer(t.parents, t.children) for t in trees]
        self.trees = trees
        self.scale = ErrorScale()
        self.motion, self.probe, self.lag = float(motion), probe, float(lag)
        self.offsets: dict[str, float] = {}
        self.lock = threading.Lock()
        self.sequence = 0
        #: {sequence: stamp s} of the probe's messages.
        self.sent: dict[int, float] = {}
        self._colours = None
        self.tf = node.create_publisher(TFMessage, '/tf', TF_QOS)
        self.tf_static = node.create_publisher(TFMessage, '/tf_static', LATCHED_QOS)
        self.sim_markers = node.create_publisher(MarkerArray, '/sim/markers', LATCHED_QOS)
        self.real_markers = node.create_publisher(MarkerArray, '/real/markers', LATCHED_QOS)
        self.joint_error = node.create_publisher(JointState, '/twin/joint_error', 10)
        self.diagnostics = node.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self.tf_static.publish(TFMessage(transforms=[identity_transform('world', 'sim/world'),
                                                     identity_transform('world', 'real/world')]))
        self.sim_markers.publish(part_markers(self.parts, 'sim/', 'sim'))
        self._last_diagnostics = 0.0
        self.timer = node.create_timer(1.0 / rate, self.tick)

    def sim_positions(self, t: float) -> dict[str, float]:
        """{joint: rad} of the sim at ``t`` s: each joint ``motion`` x sin(t + its index), within its range."""
        out = {}
        for k, name in enumerate(self.joints):
            joint = self.model.joint(name)
            low, high = joint.range if self.model.jnt_limited[joint.id] else (-np.pi, np.pi)
            middle, half = (low + high) / 2, (high - low) / 2
            out[name] = float(middle + min(half, self.motion) * np.sin(t + k))
        return out

    def set_offsets(self, offsets: dict[str, float]) -> None:
        """From now the real joints lag the sim by ``offsets`` {joint: rad} (sim - real)."""
        with self.lock:
            self.offsets = dict(offsets)

    def tick(self) -> None:
        """Publish one instant: both trees on /tf, the joint errors, the ghost's colours if they changed and,
        once a second, a diagnostic status."""
        now = time.time()
        stamp = ros_time(now)
        with self.lock:
            offsets = dict(self.offsets)
            self.sequence += 1
            sequence = self.sequence
        sim = self.sim_positions(now if self.motion else 0.0)
        late = self.sim_positions(now - self.lag if self.motion else 0.0)
        real = {name: q - offsets.get(name, 0.0) for name, q in late.items()}
        self.configuration.apply(self.sim_data, sim)
        self.configuration.apply(self.real_data, real)
        messages = []
        for tree, buffer, data in zip(self.trees, self.buffers, (self.sim_data, self.real_data)):
            messages.append(buffer.message(tree.relative(data.xpos, data.xquat), stamp))
        sim_message = TFMessage(transforms=list(messages[0].transforms))
        if self.probe:
            probe = identity_transform('sim/world', PROBE_FRAME, stamp)
            probe.transform.translation.x = sequence * PROBE_STEP
            sim_message.transforms.append(probe)
            self.sent[sequence] = now
        self.tf.publish(sim_message)
        self.tf.publish(messages[1])
        self.joint_error.publish(JointState(header=Header(stamp=stamp),
                                            name=list(sim), position=[sim[n] - real[n] for n in sim]))
        errors = link_errors(self.sim_data, self.real_data)             # (nbody - 1,) m
        colours = self.scale.rgba(np.array([errors[p.body - 1] for p in self.real_parts]))
        if self._colours is None or not np.array_equal(colours, self._colours):
            self._colours = colours
            self.real_markers.publish(part_markers(self.real_parts, 'real/', 'real', colours))
        if now - self._last_diagnostics >= 1.0:
            self._last_diagnostics = now
            worst = max(abs(sim[n] - real[n]) for n in sim)
            level = DiagnosticStatus.OK if worst < 0.05 else DiagnosticStatus.ERROR
            status = DiagnosticStatus(level=level, name='twin_monitor: sim vs real',
                                      message=f'worst joint error {worst:.3f} rad')
            self.diagnostics.publish(DiagnosticArray(header=Header(stamp=stamp),
                                                     status=[status]))

    def close(self) -> None:
        """Stop publishing."""
        self.timer.cancel()
        self.node.destroy_timer(self.timer)
