"""The ``mujoco_bridge`` node's ROS parameters: :data:`SPECS` (the shared groups of
:mod:`shadow_twin.ros.parameters` it declares, then its own) and the typed settings the node reads
them through (:class:`BridgeSettings`, :func:`read_settings`).

Its ``constraints.*`` parameters depend on the model's joints:
:func:`shadow_twin.ros.parameters.constraint_specs` lists them.
"""

from __future__ import annotations

from typing import Any, Callable

from mujoco_bridge.contact_output import sensors_of
from mujoco_bridge.effort_output import parse_gains, parse_wrench
from mujoco_bridge.object_sources import parse_sources
from shadow_twin.ros.parameters import DIAGNOSTICS_SPECS, GOAL_HANDLING_SPECS, ParameterSpec
from shadow_twin.ros.settings import settings_class
from shadow_twin.simulation.overrides import ParameterOverrides

SPECS = GOAL_HANDLING_SPECS + DIAGNOSTICS_SPECS + (
    ParameterSpec('joint_map_file', '', 'YAML with joint_map: {ROS name: MJCF name}; empty = identity.',
                  read_only=True),
    ParameterSpec('gains_file', '', 'Drive gains YAML of the simulated controller (controller: {default, gains}); '
                  'empty = the shipped config/controllers/shadow_hand_e.yaml; package://shadow_twin/config/... = a '
                  'shipped file. Re-read on ~/reload.'),
    ParameterSpec('publish_rate', 250.0, 'Rate of joint states (and /clock). Physics steps at the model timestep; '
                  'each tick publishes, then steps ahead to the next tick\'s time.', bounds=(1.0, 5000.0), unit='Hz'),
    ParameterSpec('thread_priority', 50, 'SCHED_FIFO priority of the stepping thread (1-99; 0 = normal scheduling), '
                  'as ros2_control\'s controller manager sets for its loop; where the user may not (no rtprio limit) '
                  'a warning says so and the thread runs at normal priority.', read_only=True, bounds=(0, 99)),
    ParameterSpec('real_time_factor', 1.0, 'Sim seconds per wall second the stepping aims at.', bounds=(0.001, 100.0)),
    ParameterSpec('publish_clock', False, 'Publish /clock (rosgraph_msgs/Clock) with the sim time; joint state stamps '
                  'are then sim time too.', read_only=True),
    ParameterSpec('viewer', False, 'Open a passive MuJoCo viewer window (needs a display; runs in its own thread).',
                  read_only=True),
    ParameterSpec('joint_states_topic', '/sim/joint_states', 'sensor_msgs/JointState topic of the simulated joints.',
                  read_only=True),
    ParameterSpec('action_name', '/sim/follow_joint_trajectory', 'control_msgs/action/FollowJointTrajectory server of '
                  'the simulated trajectory controller.', read_only=True),
    ParameterSpec('overrides', '', 'YAML {joint_glob: {attribute: value}} of model parameters set after every '
                  '(re)compile, e.g. "rh_FFJ1: {damping: x3}" (xF scales the model value, a number sets it). '
                  'Attributes: damping, frictionloss, armature, stiffness, springref, range_lower, range_upper. A key '
                  '"geom:GLOB" globs MJCF geom names instead, attribute friction (sliding coefficient), e.g. '
                  '"\'geom:*_wheel_contact\': {friction: x0.6}". A change takes effect on ~/reload.',
                  check=ParameterOverrides.from_yaml_text),
    ParameterSpec('scene_file', '', 'Scene YAML of the objects added to the model (config/scene.yaml for the cell, '
                  'config/scene_hand.yaml for the hand; shadow_twin.model.scene); empty = none. Objects are spawned '
                  'and deleted at run time with ~/spawn_entity and ~/delete_entity. A change takes effect on ~/reload '
                  '(a calibrated scene: shadow-twin calibrate --contacts): the objects are then the new file\'s (those '
                  'spawned at run time are dropped; each keeps its pose by name); refused when a followed object '
                  '(follow_objects) is not in it.'),
    ParameterSpec('scene_friction_scale', 1.0, "Factor on the scene objects' sliding, torsional and rolling friction "
                  '(mock hardware: the real objects\' other contact parameters).', read_only=True,
                  bounds=(0.01, 100.0)),
    ParameterSpec('scene_mass_scale', 1.0, "Factor on the scene objects' mass (and density) (mock hardware).",
                  read_only=True, bounds=(0.01, 100.0)),
    ParameterSpec('contact_sensors', '', "What publishes contact outputs (mujoco_bridge/contact_output.py): 'hand' = "
                  "the Shadow Hand E's fingertips and palm (labels ff mf rf lf th palm), or YAML {label: [body or geom "
                  "globs]}; empty = none.", read_only=True, check=sensors_of),
    ParameterSpec('contact_rate', 50.0, 'Rate of the contact outputs (at most the publish rate).', read_only=True,
                  bounds=(1.0, 1000.0), unit='Hz'),
    ParameterSpec('contact_min_force', 0.01, 'Normal force above which a contact counts (touching without force is '
                  'no contact).', read_only=True, bounds=(0.0, 1000.0), unit='N'),
    ParameterSpec('contact_markers_topic', '/sim/contact_markers', 'visualization_msgs/MarkerArray of the contact '
                  'outputs: an arrow per label in contact, in <tf_prefix><body> (its length 20 mm per N, magenta while '
                  'slipping faster than 10 mm/s); empty = none.', read_only=True),
    ParameterSpec('contact_topic_prefix', '~/contacts', 'Topics of the contact outputs: <prefix>/<label>/wrench '
                  '(WrenchStamped) and <prefix>/<label>/slip (TwistStamped, linear.x m/s).', read_only=True),
    # objects that follow the real world, and the object poses published (mujoco_bridge.object_sources, .object_poses)
    ParameterSpec('follow_objects', '', 'YAML {object: source}: free objects of scene_file that follow a pose source, '
                  "a geometry_msgs/PoseStamped topic (e.g. /mocap/can/pose) or 'tf:<frame>' (a frame on /tf whose "
                  'parent is world or odom); bad samples (NaN, a non-unit quaternion, stamps going back, jumps) are '
                  'dropped with one warning each, a silent source releases its object to physics; empty = none.',
                  read_only=True, check=parse_sources),
    ParameterSpec('object_pose_rate', 100.0, 'Rate of the free scene objects\' poses (geometry_msgs/PoseStamped in '
                  'the world frame on <object_pose_topic_prefix>/<object>/pose, stamped when true): frames on the '
                  'multiples of its period of sim time, as a motion-capture system\'s; 0 = not published.',
                  read_only=True, bounds=(0.0, 1000.0), unit='Hz'),
    ParameterSpec('object_pose_topic_prefix', '~/objects', 'Topics of the object poses: <prefix>/<object>/pose (the '
                  'mock hardware: /mocap).', read_only=True),
    ParameterSpec('object_pose_latency', 0.0, 'Sim time from an object pose\'s stamp to its publication (a capture '
                  'system\'s processing and transport; delivered at the first tick after it).', read_only=True,
                  bounds=(0.0, 10.0), unit='s'),
    ParameterSpec('object_pose_position_noise', 0.0, 'Standard deviation of the Gaussian noise on each coordinate of '
                  'a published object position; 0 = none.', read_only=True, bounds=(0.0, 1.0), unit='m'),
    ParameterSpec('object_pose_angle_noise', 0.0, 'Standard deviation of each component of the random rotation '
                  'vector turning a published object orientation; 0 = none.', read_only=True, bounds=(0.0, 3.14),
                  unit='rad'),
    ParameterSpec('object_pose_bodies', [''], 'Bodies of the model whose poses the motion capture publishes too '
                  '(<object_pose_topic_prefix>/<body>/pose), e.g. rh_palm: markers on the palm for the contact '
                  "protocol; [''] = none. A body the model lacks stops the node at start.", read_only=True),
    ParameterSpec('object_pose_seed', 0, 'Seed of the object pose noise.', read_only=True, bounds=(0, 2**31 - 1)),
    ParameterSpec('late_start_limit', -1.0, 'A goal whose header stamp passed more than this long ago when it arrives '
                  'is rejected (the twin stamps its parts ahead and gives up on a part not accepted before its '
                  'start: such a part must never start); negative = join any late goal mid-way, the JTC rule. Read '
                  'for each goal.', bounds=(-1.0, 3600.0), unit='s'),
    ParameterSpec('max_catch_up', 0.1, 'Largest lag of sim time behind the wall clock that is made up; a larger '
                  'lag (CPU starvation, a long reload) is dropped and logged.', bounds=(0.001, 10.0), unit='s'),
    ParameterSpec('reload_timeout', 10.0, 'Longest wait of ~/reload for the new model to parse and compile (in a '
                  'background thread; stepping goes on). Past it the answer is false, the previous model keeps '
                  'running and the late result is discarded.', bounds=(0.01, 3600.0), unit='s'),
    ParameterSpec('reload_max_bytes', 64 * 2**20, 'Largest size of the MJCF files a ~/reload accepts (the model file '
                  'plus the files it includes); checked before parsing, a bigger model is refused.',
                  bounds=(1024, 2**40), unit='bytes'),
    ParameterSpec('rtf_log_period', 5.0, 'Period of the real-time factor log line; also the measuring window.',
                  read_only=True, bounds=(0.5, 3600.0), unit='s'),
    # the UR's speed scaling (ur_robot_driver's scaled joint trajectory controller)
    ParameterSpec('speed_scaling_input_topic', '', 'std_msgs/Float64 speed scaling (%) the sim follows, e.g. the '
                  'real UR\'s /speed_scaling_state_broadcaster/speed_scaling; empty = none.', read_only=True),
    ParameterSpec('follow_joint_states_topic', '', 'sensor_msgs/JointState of another robot whose joints the sim\'s '
                  'same-named joints track while no trajectory drives them (LiveSimulation.follow), e.g. the mock '
                  'MiR250 carrying the arm mirroring the mock UR5\'s /joint_states so that its base feels the arm '
                  'move; empty = none.', read_only=True),
    ParameterSpec('published_joints', ['*'], 'Globs of the joints published on joint_states; the others are '
                  'simulated but not published (the cell\'s mock hand carries the arm whose joint states the mock UR5 '
                  'publishes). A glob matching no joint of the model stops the node at start.', read_only=True),
    ParameterSpec('speed_scaling_topic', '', 'The mock UR: std_msgs/Float64 topic on which its '
                  'speed_scaling is published at 10 Hz, as ur_robot_driver\'s speed_scaling_state_broadcaster does; '
                  'empty = not published.', read_only=True),
    ParameterSpec('speed_scaling', 100.0, 'Speed scaling of the speed_scaled_joints when no '
                  'speed_scaling_input_topic is given (the mock UR: its speed slider).', bounds=(0.0, 100.0),
                  unit='%'),
    # joint efforts as published (mujoco_bridge.effort_output): torque, or current as ur_robot_driver's
    ParameterSpec('effort_unit', 'Nm', 'Unit of the published joint effort: Nm = actuator torque; A = joint current '
                  'as ur_robot_driver publishes it (torque / drive_gains).', read_only=True, choices=('Nm', 'A')),
    ParameterSpec('drive_gains', '', 'effort_unit A: YAML {joint glob: drive gain}, the first matching glob wins, 1.0 '
                  'where none does; empty = the nominal UR5 figures (shadow_twin.monitoring.effort_watch.'
                  'NOMINAL_UR_DRIVE_GAINS: 13.6, 13.7, 13.7, 9.7, 8.7, 9.0 base to wrist 3).', read_only=True,
                  check=parse_gains, unit='N m/A'),
    ParameterSpec('effort_noise', 0.0, 'Standard deviation of white Gaussian noise added to the published effort; '
                  '0 = none.', read_only=True, bounds=(0.0, 1e6), unit='effort_unit (N m or A)'),
    ParameterSpec('effort_noise_seed', 0, 'Seed of the effort noise.', read_only=True, bounds=(0, 2**31 - 1)),
    ParameterSpec('external_wrench', '', 'A push for tests, settable at run time: YAML {body: NAME, force: [x, y, z], '
                  'torque: [x, y, z]} in the world frame, at the body\'s centre of mass (MuJoCo xfrc_applied); '
                  "'' = none. Applied before the next physics step, logged and published with the stamp it acts from "
                  'on ~/external_wrench (geometry_msgs/WrenchStamped, transient_local).', check=parse_wrench,
                  unit='N (force), N m (torque)'),
    # the simulated JTC's state (mock hardware: what a twin in shadow mode follows)
    ParameterSpec('controller_state_rate', 0.0, 'Rate of control_msgs/JointTrajectoryControllerState on '
                  'controller_state_topic, as ros2_controllers\' JTC publishes it (reference, feedback, error, '
                  'speed_scaling_factor of the controlled joints); 0 = not published.', read_only=True,
                  bounds=(0.0, 1000.0), unit='Hz'),
    ParameterSpec('controller_state_topic', '', 'Topic of the controller state; empty = <controller>/controller_state '
                  'beside action_name (e.g. /rh_trajectory_controller/controller_state).', read_only=True),
    # shadow mode: the sim follows the real controllers' setpoints (mujoco_bridge.shadow)
    ParameterSpec('shadow.controller_state_topics', [''], 'Shadow mode, arm and hand: control_msgs/'
                  'JointTrajectoryControllerState topics of the real controllers (their ~/controller_state) whose '
                  'reference the sim follows from its stamp; [\'\'] or [] = none.', read_only=True),
    ParameterSpec('shadow.joint_trajectory_topics', [''], 'Shadow mode, for a controller that publishes no state: '
                  'the trajectory_msgs/JointTrajectory topics it is sent on (its ~/joint_trajectory), run on their '
                  'own clock from their stamps.', read_only=True),
    ParameterSpec('shadow.joint_states_topics', [''], 'Shadow mode, last resort: sensor_msgs/JointState of the real '
                  'robots, tracked by the sim\'s own servo.', read_only=True),
    ParameterSpec('shadow.cmd_vel_topic', '', 'Shadow mode, base: the geometry_msgs/TwistStamped the real base '
                  'receives (the MiR: /cmd_vel), through the sim\'s wheel law; empty = none.', read_only=True),
    ParameterSpec('shadow.odom_topic', '', 'Shadow mode, base, where no command is observable: the nav_msgs/'
                  'Odometry of the real base, whose twist the sim base is commanded; empty = none.', read_only=True),
    # the mobile base (used when the model has drive wheel joints)
    ParameterSpec('cmd_vel_topic', '/sim/cmd_vel', 'geometry_msgs/TwistStamped velocity commands of the base.',
                  read_only=True),
    ParameterSpec('cmd_vel_timeout', 0.5, 'A base velocity command older than this (in sim time) stops the base.',
                  bounds=(0.01, 60.0), unit='s'),
    ParameterSpec('odom_topic', '/sim/odom', 'nav_msgs/Odometry of the base.', read_only=True),
    ParameterSpec('odom_rate', 50.0, 'Rate of the base odometry (and TF); the stepping thread publishes it, so '
                  'at most publish_rate.', read_only=True, bounds=(1.0, 1000.0), unit='Hz'),
    ParameterSpec('odom_frame', 'sim/odom', 'Frame of the odometry pose (the fixed frame).', read_only=True),
    ParameterSpec('base_frame', 'sim/base_footprint', 'Frame of the base (child frame of the odometry).',
                  read_only=True),
    ParameterSpec('publish_tf', True, 'Also publish odom_frame -> base_frame on /tf.', read_only=True),
    # the 3D view (mujoco_bridge.visual_output)
    ParameterSpec('tf_rate', 30.0, 'Rate of every body\'s transform on /tf (<tf_prefix><parent body> -> '
                  '<tf_prefix><body>, stamped as the joint states); 0 = none (a mock hardware bridge).', read_only=True,
                  bounds=(0.0, 1000.0), unit='Hz'),
    ParameterSpec('tf_prefix', 'sim/', 'Prefix of the body frames on /tf and of the markers\' frames.', read_only=True),
    ParameterSpec('tf_world_frame', 'world', 'Frame the body tree hangs from (/tf_static: <world> -> '
                  '<tf_prefix>world, identity); empty = none.', read_only=True),
    ParameterSpec('markers_topic', '/sim/markers', 'visualization_msgs/MarkerArray of the model\'s visible geoms in '
                  'the body frames (transient local; again after a reload); empty = none.', read_only=True),
    ParameterSpec('mesh_dir', '', 'Folder of the mesh geoms\' STL files the markers name (file:// URIs); empty = '
                  '~/.cache/shadow_twin/meshes.', read_only=True),
)
#: The bridge's settings: one attribute per parameter of :data:`SPECS` (``shadow.cmd_vel_topic`` ->
#: ``shadow_cmd_vel_topic``), with ``velocity_limits`` parsed ({joint: rad/s}) and ``constraints``
#: (the JTC constraints of the model's joints, as ``shadow_twin.control.jtc.default_tolerances`` reads them).
BridgeSettings = settings_class('BridgeSettings', SPECS, parsed={'velocity_limits': dict},
                                derived={'constraints': dict}, module=__name__)


def read_settings(get: Callable[[str], Any], constraints: dict) -> BridgeSettings:
    """The bridge's :class:`BridgeSettings` from its parameters (``get(name)``: a value) and the
    ``constraints`` mapping read already. Raises ConfigError (a value its spec refuses)."""
    return BridgeSettings.read(get, constraints=constraints)
