"""The ``mujoco_bridge`` node: the live MuJoCo twin on ROS 2.

* A stepping thread advances physics so that sim time tracks the wall clock
  times ``real_time_factor`` (a lag above ``max_catch_up`` is dropped and
  logged) and publishes ``sensor_msgs/JointState`` on ``joint_states_topic``
  at ``publish_rate``, stamped with the ROS time the state refers to (with
  ``publish_clock``: the sim time, also published on ``/clock``). Each tick
  publishes first and then steps ahead to the next tick's time, so the physics
  cost does not delay the messages.
* The achieved real-time factor (sim time advanced per wall second: a dropped
  lag counts as sim time lost), the latest tick's lateness and the dropped sim
  time are measured over a sliding window, logged every ``rtf_log_period`` s
  and published on ``/diagnostics`` (with the sim time dropped since start; see ``diagnostics``).
  A tick more than 20 ms late is logged with who held it: the CPU the process
  used meanwhile tells its own threads (the GIL) from the operating system or
  hypervisor not running it (``timing.stall_cause``).
* ``action_name`` serves ``FollowJointTrajectory``: the simulated JTC (see ``trajectory_server``).
* Speed scaling (the UR's): the trajectory time of ``speed_scaled_joints`` runs at the
  percentage of ``speed_scaling_input_topic`` (the robot's), else of ``speed_scaling``; the mock
  UR publishes its own on ``speed_scaling_topic``.
* ``follow_joint_states_topic``: joints named there track that robot's state (moved on from its
  stamp) while no trajectory drives them (the mock MiR250's arm mirroring the mock UR5's).
* A model with a mobile base (drive wheel joints on a free body) also takes ``TwistStamped`` on
  ``cmd_vel_topic`` and publishes ``nav_msgs/Odometry`` on ``odom_topic`` and TF (``base_interface``).
* Shadow mode (``shadow.*``, see ``shadow``): the sim follows the real controllers'
  ``controller_state``, their ``joint_trajectory`` topics or the real joint states, and the real
  base's ``cmd_vel`` or odometry; with ``controller_state_rate`` > 0 the bridge publishes its own
  JTC's ``controller_state`` (mock hardware, see ``controller_state``).
* Joint ``effort``: actuator torque (N m), or with ``effort_unit`` A the joint current as
  ``ur_robot_driver`` publishes it (the mock UR); ``external_wrench`` pushes a body at run time
  (see ``effort_output``); contact outputs per fingertip and palm (``contact_output``).
* Objects: ``follow_objects`` follow PoseStamped or TF sources (``object_sources``); poses out (``object_poses``).
* The 3D view: every body on ``/tf`` as ``sim/<body>`` and the visible geoms as markers (``visual_output``).
* Services (see ``services``): ``~/reload`` (std_srvs/Trigger: recompile ``model_path``, keep the
  state by joint name; the compile runs in a background thread, so stepping goes on, for at most
  ``reload_timeout`` s, and a model over ``reload_max_bytes`` is refused before parsing; on failure
  answer success false with the reason (MuJoCo's text), keep the old model running and set
  ``model_path`` back to it), ``~/reset`` (back to keyframe 0 / qpos0) and ``~/pause``; ROS 2's
  ``simulation_interfaces``: the run state (``simulation_control``) and the entities, the objects of
  ``scene_file`` and the base (``entities``).

Mock hardware: another instance, node name and params file (``-r __node:=mock_hardware``).
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

from builtin_interfaces.msg import Time as TimeMsg
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.time import Time
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64
from std_srvs.srv import SetBool, Trigger

from mujoco_bridge.base_interface import BaseInterface
from mujoco_bridge.contact_output import ContactOutput
from mujoco_bridge.controller_state import ControllerStatePublisher, controller_state_topic
from mujoco_bridge.diagnostics import BridgeDiagnostics
from mujoco_bridge.entities import EntityServices, scene_of
from mujoco_bridge.object_poses import ObjectPoseOutput
from mujoco_bridge.object_sources import ObjectSources, followed_sources
from mujoco_bridge.effort_output import WRENCH_PARAMETER, EffortOutput, ExternalWrench
from mujoco_bridge.parameters import SPECS, BridgeSettings, read_settings
from mujoco_bridge.published_joints import PublishedJoints
from mujoco_bridge.services import BridgeServices
from mujoco_bridge.shadow import ShadowSources
from mujoco_bridge.simulation_control import SimulationControl
from mujoco_bridge.timing import STALL_WARNING, RateMeter, SimClock, set_realtime_priority
from mujoco_bridge.trajectory_server import SimulatedTrajectoryController
from mujoco_bridge.visual_output import VisualOutput
from shadow_twin.common.paths import config_path, resolve_share_url
from shadow_twin.common.stamps import from_nanoseconds, to_seconds
from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.ros import parameters as ros_params
from shadow_twin.ros.conversions import doubles, time_msg, time_msg_ns
from shadow_twin.ros.guard import guarded_service, guarded_subscription, guarded_timer
from shadow_twin.ros.message_checks import check_joint_state, check_speed_scaling
from shadow_twin.ros.spinning import BackgroundSpinner
from shadow_twin.simulation.live.simulation import LiveSimulation, ParameterOverrides
from shadow_twin.simulation.reload import BackgroundBuild

NODE_NAME = 'mujoco_bridge'


class MujocoBridge(BridgeServices, BridgeDiagnostics, Node):
    """The live twin node (see module doc).

    Args:
        node_name: default node name (remappable with ``-r __node:=NAME``).
        kwargs: passed to ``rclpy.node.Node`` (e.g. ``context``, ``parameter_overrides``).
    Raises:
        ShadowTwinError: the model does not compile, or the gains, joint map or
            overrides are invalid (the message says which and why).
    """

    def __init__(self, node_name: str = NODE_NAME, **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        ros_params.declare(self, SPECS)
        self._settings = s = read_settings(self._param, {})    # its constraints: once the model's joints are known
        self.publish_clock, scene = s.publish_clock, scene_of(s)
        sources = followed_sources(s.follow_objects, scene)
        self.sim = LiveSimulation(s.model_path or None, gains=self._gains_file(),
                                  joint_map=JointNameMap.from_yaml(s.joint_map_file or None),
                                  overrides=ParameterOverrides.from_yaml_text(s.overrides),
                                  base_command_timeout=s.cmd_vel_timeout, scene=scene, followed=tuple(sources))
        self._constraints = ros_params.load_constraints(s.constraints_file)
        ros_params.declare(self, ros_params.constraint_specs(self.sim.controlled_joints, self._constraints))
        self._warn_unknown_constraints()
        self._settings = s = self._read_settings()
        self.add_post_set_parameters_callback(self._after_set)
        self._running_model_path = s.model_path     # model_path of the model that runs
        self._running_scene_file = s.scene_file     # scene_file of the objects that run
        self._restoring_model_path = False
        self._builds = BackgroundBuild('model_reload', on_late=self._late_build)
        self._reload_idle = threading.Event()     # cleared while ~/reload runs (shutdown waits for it)
        self._reload_idle.set()

        self.clock = SimClock(s.real_time_factor)
        self.meter = RateMeter(window=s.rtf_log_period)
        self._dropped_s = 0.0
        self._last_drop_log = self._last_stall_log = 0.0
        self._stop = threading.Event()
        self._loop_thread = threading.Thread(target=self._loop, name='mujoco_stepping', daemon=True)

        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.joint_state_pub = self.create_publisher(JointState, s.joint_states_topic, qos)
        self.clock_pub = None
        if self.publish_clock:
            self._clock_msg = Clock()
            self.clock_pub = self.create_publisher(Clock, '/clock', qos)
        self.diagnostics_pub = self.create_publisher(DiagnosticArray, '/diagnostics', 10)

        # Inputs (velocity commands, speed scaling, joint states and object poses to follow) are taken by a helper
        # node on its own events executor: the MultiThreadedExecutor rebuilt its wait set in Python for each message,
        # holding the GIL the stepping thread needs (the cell's sim bridge: a tenth of a core, ticks 3-4 ms late).
        self._inputs = Node(f'{self.get_name()}_inputs', namespace=self.get_namespace(), context=self.context,
                            use_global_arguments=False, start_parameter_services=False)
        self.jtc = SimulatedTrajectoryController(
            self, self.sim, s.action_name, settings=lambda: self._settings, now_s=self._now_s,
            to_sim_time=self._to_sim_time, stamp_of=self.stamp_of)
        services = MutuallyExclusiveCallbackGroup()
        guarded_service(self, Trigger, '~/reload', self._on_reload, callback_group=services)
        guarded_service(self, Trigger, '~/reset', self._on_reset, callback_group=services)
        guarded_service(self, SetBool, '~/pause', self._on_pause, callback_group=services)
        guarded_timer(self, s.diagnostics_period, self._publish_diagnostics, 'diagnostics')
        guarded_timer(self, s.rtf_log_period, self._log_rate, 'real-time factor log')
        self.sim.set_speed_scaling(s.speed_scaling / 100.0, list(s.speed_scaled_joints))
        if s.speed_scaling_topic:
            scaling_pub = self.create_publisher(Float64, s.speed_scaling_topic, 10)
            self.create_timer(0.1, lambda: scaling_pub.publish(Float64(data=self._settings.speed_scaling)))
        if s.speed_scaling_input_topic:
            guarded_subscription(self._inputs, Float64, s.speed_scaling_input_topic, self._on_speed_scaling, 10)
        self._following = False                 # a followed joint state has arrived
        if s.follow_joint_states_topic:
            guarded_subscription(self._inputs, JointState, s.follow_joint_states_topic, self._on_followed_state,
                                 qos, check=check_joint_state)
        self.base = None if self.sim.base is None else BaseInterface(
            self, self._inputs, self.sim, s, self.stamp_of, self._stamp_sim_time, self._now_s)
        self.entities = EntityServices(self, lambda: self._settings, services)     # simulation_interfaces
        self.control = SimulationControl(self, self._anchor, services, despawn=self.entities.despawn)
        self.shadow = ShadowSources(self, self._inputs, self.sim, s, self._stamp_sim_time, self._now_s)
        self.controller_state = None if s.controller_state_rate <= 0 else ControllerStatePublisher(
            self, self.sim, s.controller_state_topic or controller_state_topic(s.action_name),
            s.controller_state_rate, self.stamp_of)
        contacts = ContactOutput(self, self.sim, s, self.stamp_of) if s.contact_sensors else None
        poses = ObjectPoseOutput(self, self.sim, s, self.stamp_of) if s.object_pose_rate > 0 else None
        base_tf = self.base.frames if self.base is not None and self.base.tf_pub is not None else None
        view = VisualOutput(self, self.sim, s, self.stamp_of, base_tf) if s.tf_rate > 0 or s.markers_topic else None
        self._outputs = [o for o in (self.base, self.controller_state, contacts, poses, view) if o is not None]
        self.object_sources = ObjectSources(self._inputs, self.sim, sources, self._stamp_sim_time, self.get_logger())
        self._inputs_spinner = BackgroundSpinner([self._inputs], 'inputs')
        self.viewer = None
        if s.viewer:
            from mujoco_bridge.viewer import PassiveViewer  # lazy: only with viewer:=true (needs a display)
            self.viewer = PassiveViewer(self.sim, self.get_logger())

        self.published = PublishedJoints(s.published_joints, self.sim.joint_names)
        self._msg = JointState()
        self._msg_names = None
        self._published_sim_time = math.nan     # sim time of the latest published state, s
        self.effort_output = EffortOutput(s.effort_unit, s.drive_gains, s.effort_noise, s.effort_noise_seed)
        self.wrench = ExternalWrench(self)      # external_wrench: a push for tests (see effort_output)
        self.get_logger().info(
            f'model {self.sim.path} ({len(self.sim.joint_names)} joints, timestep {self.sim.dt * 1e3:g} ms); '
            f'joint states on {self.joint_state_pub.topic_name} at {s.publish_rate:g} Hz, '
            f'trajectory action {s.action_name}, real-time factor {self.clock.real_time_factor:g}'
            + (', publishing /clock' if self.publish_clock else '')
            + (f', overrides: {self._overrides_text()}' if self.sim.applied_overrides else ''))
        if s.publish_rate > 1.0 / self.sim.dt + 1e-9:
            self.get_logger().warning(
                f'publish_rate {s.publish_rate:g} Hz is above the physics rate '
                f'{1.0 / self.sim.dt:g} Hz: consecutive messages may repeat a state (same stamp)')

    def _warn_unknown_constraints(self) -> None:
        """Warn about ``constraints.*`` values for joints the model lacks (undeclared ROS parameters are
        otherwise ignored silently): ROS parameters, and the entries of a ``constraints_file`` given
        explicitly (the shipped file covers the whole cell: a model of one robot lacks the others')."""
        given = getattr(self, '_parameter_overrides', {}) or {}
        unknown = sorted(n for n in given if n.startswith('constraints.') and not self.has_parameter(n))
        if self._settings.constraints_file:
            unknown += ros_params.unknown_constraint_joints(self._constraints, self.sim.controlled_joints)
        if unknown:
            self.get_logger().warning(f'ignoring constraints for joints the model does not have: {unknown}')

    def _overrides_text(self) -> str:
        rules = ', '.join(rule.describe() for rule in self.sim.overrides.rules)
        return f'{rules} ({len(self.sim.applied_overrides)} values set)'

    # -- ROS parameters ------------------------------------------------------------------------
    def _param(self, name: str):
        return self.get_parameter(name).value

    def _gains_file(self) -> Path:
        given = self._settings.gains_file
        return resolve_share_url(given) if given else config_path('controllers', 'shadow_hand_e.yaml')

    def _read_settings(self) -> BridgeSettings:
        """The current parameters (and the model joints' constraints) as typed settings."""
        return read_settings(self._param, ros_params.constraints_config(self, self.sim.controlled_joints))

    def _on_speed_scaling(self, msg: Float64) -> None:
        """The robot's speed scaling (percent): the sim's scaled joints follow it. Raises BadMessage
        (nothing applied) for a value that is not finite or not within 0..100; the subscription's
        guard drops and reports it."""
        value = check_speed_scaling(msg) / 100.0
        if value != self.sim.speed_scaling:
            self.sim.set_speed_scaling(value)
            self.get_logger().info(f'speed scaling {100 * value:g} % ({", ".join(self.sim.speed_scaled_joints)})',
                                   throttle_duration_sec=1.0)

    def _after_set(self, changed: list[Parameter]) -> None:
        self._settings = self._read_settings()
        for param in changed:
            if param.name == 'cmd_vel_timeout':
                self.sim.set_base_command_timeout(float(param.value))
            if param.name in ('speed_scaling', 'speed_scaled_joints'):
                self.sim.set_speed_scaling(self._settings.speed_scaling / 100.0,
                                           list(self._settings.speed_scaled_joints))
            if param.name == WRENCH_PARAMETER:
                self.wrench.set(param.value)
            if param.name == 'real_time_factor':
                self._anchor(real_time_factor=float(param.value))
                self.get_logger().info(f'real-time factor set to {param.value:g}')
            elif param.name in ('model_path', 'overrides', 'gains_file', 'scene_file') and not self._restoring_model_path:
                self.get_logger().info(f'{param.name} set to {param.value!r}; takes effect on ~/reload')

    # -- time -------------------------------------------------------------------------------------
    def _ros_now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _anchor(self, real_time_factor: float | None = None) -> None:
        """Declare the current sim time to be now (no catching up on time before this)."""
        self.clock.anchor(time.monotonic(), self._ros_now_ns(), self.sim.time, real_time_factor)
        self.meter.reset()

    def _on_followed_state(self, msg: JointState) -> None:
        velocities = dict(zip(msg.name, msg.velocity)) if len(msg.velocity) == len(msg.name) else None
        followed = self.sim.follow(dict(zip(msg.name, msg.position)), velocities,
                                   self._stamp_sim_time(msg.header.stamp))
        if followed and not self._following:
            self._following = True
            self.get_logger().info(f'following {", ".join(followed)} on {self._settings.follow_joint_states_topic}')

    def stamp_of(self, sim_time: float) -> TimeMsg:
        """Stamp of a state at ``sim_time`` (s): sim time with publish_clock; while paused,
        now (the frozen state holds now); else the ROS time at which sim time was ``sim_time``."""
        if self.publish_clock:
            return time_msg(sim_time)
        if self.sim.paused:
            return time_msg_ns(self._ros_now_ns())
        return time_msg_ns(self.clock.stamp_ns(sim_time))

    def _now_s(self) -> float:
        """"Now" on the clock of goal header stamps, s."""
        return self.sim.time if self.publish_clock else from_nanoseconds(self._ros_now_ns())

    def _to_sim_time(self, stamp: TimeMsg) -> float:
        """Sim time (s) of a goal's header ``stamp``."""
        return to_seconds(stamp) if self.publish_clock else self.clock.sim_time_at(Time.from_msg(stamp).nanoseconds)

    def _stamp_sim_time(self, stamp: TimeMsg) -> float | None:
        """Sim time (s) of a message's header ``stamp``; None for an unset (zero) stamp."""
        return self._to_sim_time(stamp) if stamp.sec or stamp.nanosec else None

    # -- stepping loop -----------------------------------------------------------------------------
    def start(self) -> None:
        """Anchor sim time to now and start stepping (and the viewer, if enabled)."""
        self._anchor()
        self.object_sources.started = True          # their stamps map to sim time from now on
        self._loop_thread.start()
        if self.viewer is not None:
            self.viewer.start()

    def _loop(self) -> None:
        """Tick at ``publish_rate`` on a fixed schedule of monotonic times; each tick knows how
        late it started (the oversleep, or how long the previous tick overran). The thread runs
        at ``thread_priority`` (SCHED_FIFO) where the user may set it."""
        refused = set_realtime_priority(self._settings.thread_priority)
        if refused is not None:
            self.get_logger().warning(f'the stepping thread runs at normal priority: {refused}')
        next_tick = time.monotonic()
        previous_start, previous_cpu = next_tick, time.process_time()
        while not self._stop.is_set():
            period = 1.0 / self._settings.publish_rate
            next_tick += period
            now = time.monotonic()
            if next_tick > now:
                time.sleep(next_tick - now)
                lateness = time.monotonic() - next_tick
            else:
                lateness = now - next_tick
                if lateness > self._settings.max_catch_up:   # too far behind: restart the schedule now
                    next_tick = now
                # else the ticks that are due run back to back, each stepping to its own
                # scheduled time: a short stall (the GIL busy elsewhere) loses no state
            started, cpu = time.monotonic(), time.process_time()
            waited, used = started - previous_start, cpu - previous_cpu
            previous_start, previous_cpu = started, cpu
            if lateness > STALL_WARNING:
                self._warn_stall(lateness, waited, used)
            try:
                self._tick(next_tick, lateness, used)
            except Exception as exc:  # keep stepping; a bug is logged, not fatal
                if not self.context.ok():   # ROS is shutting down (Ctrl-C, SIGTERM)
                    return
                self.get_logger().error(f'stepping failed: {exc!r}', throttle_duration_sec=5.0)

    def _tick(self, scheduled: float, lateness: float = 0.0, process_cpu: float = 0.0) -> None:
        """Publish the state of the ``scheduled`` tick (monotonic s), then step ahead to the next
        tick's sim time; the tick started ``lateness`` s after its schedule, and the process used
        ``process_cpu`` s of CPU since the previous tick began (both recorded by the rate meter).

        Publish first, step after (a control loop's read-then-compute order): the message leaves
        as soon as the thread wakes and the physics cost is paid between publications. Only when
        the sim is behind (the first tick, a re-anchor, a stall) does a tick step before publishing.
        Stepping to scheduled, not actual, wake-up times gives every tick the same number of physics
        steps (2 at 250 Hz with a 2 ms timestep): evenly spaced stamps whatever the jitter. Below the
        physics rate a tick whose state did not advance publishes nothing (stamps strictly increase).
        """
        sim = self.sim
        self.wrench.tick()                          # a new (or reset) external wrench, before stepping
        dropped = self._step_to(scheduled)          # 0 steps unless the sim is behind
        state = sim.joint_state()
        self.meter.tick(scheduled, state.sim_time, lateness, dropped, process_cpu)
        repeated = state.sim_time == self._published_sim_time and not sim.paused
        if not (repeated and self._settings.publish_rate * sim.dt <= 1.0 + 1e-9):
            self._publish(state)
        for output in self._outputs:                # odometry and TF, controller state, contacts, objects: when due
            output.tick(scheduled)
        self._step_to(scheduled + 1.0 / self._settings.publish_rate)

    def _step_to(self, mono: float) -> float:
        """Step (unless paused) to the sim time of monotonic time ``mono`` (s), at most
        ``max_catch_up`` s of sim time; returns the sim time dropped beyond that (s)."""
        sim = self.sim
        if sim.paused:
            return 0.0
        max_steps = max(1, int(self._settings.max_catch_up / sim.dt))
        steps = sim.steps_until(self.clock.target(mono))
        if steps * sim.dt > sim.base_command_timeout and self.base is not None:
            # a stall (the process stopped or starved) longer than cmd_vel_timeout: the base's
            # command is older than that now and is not driven on, not even while catching up
            sim.stop_base()
        sim.step(min(steps, max_steps))
        if steps <= max_steps:
            return 0.0
        dropped = (steps - max_steps) * sim.dt
        self._drop_lag(steps * sim.dt, dropped, mono)
        return dropped

    def _publish(self, state) -> None:
        """Publish ``state`` (a ``JointStateSample``) on joint_states (and /clock)."""
        msg = self._msg
        columns = self.published.columns(state.names)
        if state.names is not self._msg_names:      # the first state, or a reload changed the joints
            msg.name, self._msg_names = list(self.published.names), state.names
        msg.header.stamp = self.stamp_of(state.sim_time)
        effort = self.effort_output(self.sim, state.names)
        if columns is None:
            msg.position, msg.velocity, msg.effort = doubles(state.position), doubles(state.velocity), doubles(effort)
        else:
            msg.position, msg.velocity = doubles(state.position[columns]), doubles(state.velocity[columns])
            msg.effort = doubles(effort[columns])
        self.joint_state_pub.publish(msg)
        self._published_sim_time = state.sim_time
        if self.clock_pub is not None:
            self._clock_msg.clock = time_msg(state.sim_time)
            self.clock_pub.publish(self._clock_msg)

    # -- shutdown ----------------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Stop stepping and the viewer, abort a running goal, stop waiting for a reload's compile
        (its daemon thread is abandoned: process exit does not wait for it)."""
        self._stop.set()
        self._reload_idle.wait(1.0)     # a reload waiting for its compile answers first (within 50 ms)
        if self._loop_thread.is_alive():
            self._loop_thread.join(timeout=2.0)
        if self.viewer is not None:
            self.viewer.stop()
        self.jtc.destroy()
        self._inputs_spinner.shutdown()
        self._inputs.destroy_node()
