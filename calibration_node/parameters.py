"""The ``calibration_node``'s ROS parameters: :data:`SPECS`, the typed settings the node reads them
through (:class:`CalibrationNodeSettings`), and :data:`BASE_TOPICS` (the parameters naming the
base's topics, with their message types).

Its ``real_joint_states_topic`` and ``sim_joint_states_topic`` are its own, not
:data:`shadow_twin.ros.parameters.JOINT_STATE_INPUT_SPECS`: one topic each (``/joint_states`` by
default), not read-only.
"""

from __future__ import annotations

from geometry_msgs.msg import PoseStamped, TwistStamped
from nav_msgs.msg import Odometry

from shadow_twin.calibration.search.optimisers import OPTIMISERS
from shadow_twin.calibration.engine.run import DEFAULT_OPTIMIZER
from shadow_twin.ros.parameters import ParameterSpec
from shadow_twin.ros.settings import settings_class

SPECS = (
    ParameterSpec('trajectories_file', '', 'Waypoint YAML of the trajectories (Shadow format); empty = the shipped '
                  'config/trajectories/calibration.yaml.'),
    ParameterSpec('trajectories', ['curl_all', 'stagger'], 'Trajectories a live run executes and records.'),
    ParameterSpec('holdout', 'auto', "Recordings only scored, not fitted: 'auto' = the last one when there are two or "
                  "more, '' = none, else comma-separated names (trajectory names; bag names offline)."),
    ParameterSpec('bag', '', 'Offline: comma-separated ROS 1/2 bags to calibrate from, nothing moves; empty = live.'),
    ParameterSpec('bag_trajectory', '', 'Offline: FILE.yaml:NAME of the trajectory the bags executed, for bags that do '
                  'not hold it (bags recorded by this node do).'),
    ParameterSpec('space_file', '', 'Search-space YAML; empty = config/calibration/finger_dynamics.yaml.'),
    ParameterSpec('objective_joints', ['rh_[FMRL]FJ[123]'], 'Globs of the joints whose position MSE is minimised.'),
    ParameterSpec('optimizer', DEFAULT_OPTIMIZER, 'Optimiser of the model parameters.', choices=tuple(OPTIMISERS)),
    ParameterSpec('budget', 60, 'Rollouts (simulations) of the optimiser.', bounds=(1, 100000)),
    ParameterSpec('workers', 2, 'Simulations in parallel (threads).', bounds=(1, 256)),
    ParameterSpec('reduce', 'auto', "What the search simulates: 'auto' removes the parts that cannot act on the "
                  "objective joints and those acting only through their load when that moves the objective by at most "
                  "0.5 %; 'exact' only the former; 'off' the whole model (reports score the whole model). The cell protocol "
                  "under 'auto': each group's runs with the parts they hold still frozen, under the same rule.",
                  choices=('auto', 'exact', 'off')),
    ParameterSpec('cluster', '', "Where the rollout batches run: '' (this node's threads), auto, ray://HOST:PORT or "
                  'HOST:PORT (a Ray cluster; docs/calibration.md).'),
    ParameterSpec('seed', 0, 'Random seed.', bounds=(0, 2**31 - 1)),
    ParameterSpec('acq_func', 'EI', 'BO acquisition function.', choices=('EI', 'gp_hedge', 'PI', 'LCB')),
    ParameterSpec('log_objective', True, 'BO models the logarithm of the objective (better on wide search spaces).'),
    ParameterSpec('settle_time', 3.0, 'Time compared (and recorded) after a trajectory ends.', bounds=(0.0, 60.0),
                  unit='s'),
    ParameterSpec('max_delay', 0.3, 'Largest fitted sim-to-real delay for recordings aligned by their motion onset '
                  '(bags without a start stamp).', bounds=(0.0, 5.0), unit='s'),
    ParameterSpec('stamped_max_delay', 0.0, 'Largest fitted delay for recordings with a start stamp (live).',
                  bounds=(0.0, 5.0), unit='s'),
    ParameterSpec('twin_node', '/shadow_twin', 'The twin server node: when a live run starts, its start_lead and '
                  'start_lead_per_point parameters give the start lead of every goal (twin_lead.py).'),
    ParameterSpec('twin_timeout', 5.0, "Wait for the twin's parameter services, and for their answer "
                  '(discovery of a twin just started takes seconds on a loaded PC).',
                  bounds=(0.1, 60.0), unit='s'),
    ParameterSpec('send_margin', 0.1, "Added to the twin's lead: this node's own time from stamping a goal to the "
                  "twin's receiving it.", bounds=(0.0, 5.0), unit='s'),
    ParameterSpec('start_lead', 1.0, "Fallback start lead: a goal's start is stamped this long after it is sent "
                  "when the twin's start_lead / start_lead_per_point cannot be read (another twin; a warning says so).",
                  bounds=(0.05, 10.0), unit='s'),
    ParameterSpec('output_dir', '', 'Run directories and installed models; empty = $ROS_HOME/shadow_twin/calibration '
                  '(~/.ros/...).'),
    ParameterSpec('action_name', '/twin/follow_joint_trajectory', 'FollowJointTrajectory action that moves robot and '
                  'sim.'),
    ParameterSpec('real_joint_states_topic', '/joint_states', 'JointState of the robot.'),
    ParameterSpec('sim_joint_states_topic', '/sim/joint_states', 'JointState of the sim.'),
    ParameterSpec('bridge_node', '/mujoco_bridge', 'The sim bridge: its model_path/gains_file are the starting point, '
                  'its model_path is set to the calibrated model and its ~/reload called.'),
    ParameterSpec('model_path', '', 'Base MJCF when the bridge cannot be asked (offline without a bridge); '
                  "empty = built-in."),
    ParameterSpec('gains_file', '', 'Drive gains when the bridge cannot be asked; empty = shipped.'),
    ParameterSpec('install', True, 'Install an accepted calibration into the bridge (else only write it).'),
    ParameterSpec('auto_resume', True, 'At start, resume an interrupted run whose recordings are complete.'),
    ParameterSpec('max_gap', 0.1, 'Largest gap between joint states in a recording; a recording with a longer '
                  'one is set aside (messages were lost) and recorded again.', bounds=(0.001, 10.0), unit='s'),
    ParameterSpec('record_attempts', 3, 'Recordings of one trajectory tried before the run fails (a recording with a '
                  'gap over max_gap is recorded again; a goal the twin rejects, nothing moved, is sent again).',
                  bounds=(1, 20)),
    ParameterSpec('bridge_timeout', 5.0, 'Wait for the bridge services.', bounds=(0.1, 120.0), unit='s'),
    ParameterSpec('status_period', 1.0, 'Period of ~/status and /diagnostics while idle or working.',
                  bounds=(0.05, 60.0), unit='s'),
    ParameterSpec('protocol', '', "Calibration protocol: '' = the hand's calibration (trajectories, "
                  "space_file); 'cell' = config/calibration/cell_protocol.yaml (the MiR250 + UR5 study's base runs "
                  "and arm sweeps); 'contacts' = config/calibration/contact_protocol.yaml (a scene's contact "
                  "parameters, the contact_* parameters); else a protocol YAML (path or package://shadow_twin/...; "
                  "a contact protocol's top key is contact_protocol). Live, its runs are executed and recorded in "
                  "order; offline (bag), each bag is the run of its name (IN1/, IN1.bag, ...). The validation "
                  "(hold-out) runs are held out."),
    ParameterSpec('contact_joint_states_topic', '/rh/joint_states', "Contact protocol: the hand's JointState "
                  '(the grip joints\' efforts), recorded.'),
    ParameterSpec('contact_object_topic', '', "Contact protocol: the object's PoseStamped (a motion capture); '' = "
                  '/mocap/<object>/pose.'),
    ParameterSpec('contact_palm_topic', '', "Contact protocol: the palm frame's PoseStamped; '' = /mocap/<palm>/pose."),
    ParameterSpec('contact_wrench_prefix', '/rh/contacts', "Contact protocol: the hand's contact wrenches, "
                  "<prefix>/<label>/wrench, recorded where published (not fitted); '' = none."),
    ParameterSpec('contact_place_services', ['/mujoco_bridge/set_entity_state'], 'Contact protocol, live: the '
                  'SetEntityState services that put the object on its fixture before each run (add '
                  '/mock_hardware/set_entity_state with mock hardware; on the real cell the operator places it).'),
    ParameterSpec('contact_cell_config', '', "Contact protocol: the cell YAML the runs are made on (replayed as the "
                  "robots make them, on the cell reduced to arm and hand); '' = config/cell.yaml. The hand: "
                  "model_path ('' = the built-in Shadow Hand E; calibrate the hand first)."),
    ParameterSpec('contact_fit', '', "Contact protocol: the search space's parameters fitted, comma-separated; '' = "
                  "the protocol's fit (what its runs identify). The space: space_file ('' = "
                  'config/calibration/hand_contacts.yaml).'),
    ParameterSpec('base_cmd_vel_topic', '/cmd_vel', "Protocol runs: the real base's velocity commands "
                  '(geometry_msgs/TwistStamped), recorded and replayed through the sim.'),
    ParameterSpec('base_odom_topic', '/odom', "Protocol runs: the real base's odometry (nav_msgs/Odometry), recorded; "
                  "each live base run starts from its newest pose."),
    ParameterSpec('base_pose_topic', '', "Protocol runs: a motion-capture geometry_msgs/PoseStamped of the real base, "
                  "recorded and compared instead of the odometry; '' = none."),
    ParameterSpec('frame_file', '', "Protocol runs with base_pose_topic: the motion capture's floor frame (written by "
                  "shadow-twin frame-calibration --out); '' = the poses as published."),
    ParameterSpec('sim_odom_topic', '/sim/odom', "Protocol runs: the sim base's odometry (nav_msgs/Odometry), "
                  "recorded."),
    ParameterSpec('base_settle_time', 1.5, "Protocol runs: time recorded after a run's end (the base coming to "
                  "rest).", bounds=(0.0, 60.0), unit='s'),
)
#: The node's settings: one attribute per parameter of :data:`SPECS`, read when the node starts and
#: after each parameter change (``CalibrationNodeSettings.read(get)``).
CalibrationNodeSettings = settings_class('CalibrationNodeSettings', SPECS, module=__name__)
#: Parameters of the base's topics, and their message types.
BASE_TOPICS = {'base_cmd_vel_topic': TwistStamped, 'base_odom_topic': Odometry, 'base_pose_topic': PoseStamped,
               'sim_odom_topic': Odometry}
