"""``shadow-twin up``: the live twin, one process per node.

Starts the ``mujoco_bridge`` node (the sim, ``config/mujoco_bridge.yaml``), with
``--mock-hardware`` a second bridge named ``mock_hardware``, the robot's mock hardware
(``config/mock_hardware.yaml``), the ``shadow_twin`` trajectory action server
(``config/twin.yaml`` or ``--config``) and the ``twin_monitor`` (sim vs real on
``/twin/joint_error`` and ``/diagnostics``, ``config/twin_monitor.yaml`` or
``--monitor-config``; ``--no-monitor``: none), each as its own process, as ``ros2 launch shadow_twin
twin.launch.py`` does: in one Python process the nodes shared one GIL, and a busy
action server (a preemption storm, a 10,000-point goal) held the physics threads off
their 250 Hz (issue 9). The children's output is this command's; further ROS
arguments may follow ``--ros-args`` (given to every node).

With ``--cell`` the twin is the whole cell (MiR250, cabinet, UR5, hand): the cell MJCF is
written from ``config/cell.yaml`` (or ``--cell-config``) into a temporary directory and run
by the sim bridge with ``config/controllers/cell.yaml``; the twin server takes
``config/twin_cell.yaml``, the monitor ``config/twin_monitor_cell.yaml``; with
``--mock-hardware`` three mock hardware bridges start: ``mock_ur`` (``config/mock_ur.yaml`` on
the cell reduced to the UR5's joints, the hand rigid on the flange, written beside the cell MJCF),
``mock_hardware`` (the hand, its joint states on ``/rh/joint_states`` as a hand driver beside
the UR's) and ``mock_mir`` (``config/mock_mir.yaml``). With ``--scene`` and ``--mock-objects`` the
mock hand carries the scene's objects on the arm: it runs the cell reduced to the arm and the hand
(:func:`write_hand_stand_in_mjcf`, written beside the cell MJCF) with its arm following the mock
UR5's joint states and publishes the hand's joints alone (``published_joints``); its motion capture
gives the objects' poses, which the sim follows, as without ``--cell``, and the palm's
(``object_pose_bodies``: the contact protocol's runs, ``calibrate --contacts --record``). Without ``--mock-objects`` the
cell's objects are the sim's alone (the cell demo moves them in the sim).

With ``--mode shadow`` the sim follows the robots however they are driven (MoveIt, the hand's
tools, the MiR's navigation): the sim bridge also takes ``config/mujoco_bridge_shadow.yaml`` (with
``--cell``: ``mujoco_bridge_shadow_cell.yaml``; ``--shadow-config``), naming the real controllers'
``controller_state`` topics and the MiR's ``/cmd_vel`` (``mujoco_bridge.shadow``), and the twin
server refuses goals (they go to the robots' own controllers); the monitor watches the same sources
(``config/twin_monitor_shadow*.yaml``) and reports the joints of a silent one STALE.

Each node is *ready* once it logs its ready line (:data:`READY_LINES`: the bridges' ``ready:
stepping ...``, the twin server's ``serving ...``, the monitor's ``ready: comparing ...``), which
it logs when it serves its topics and actions; ``up`` copies the nodes' output to its own and
reports ``ready: <node> after <s> s, ...`` once all are. A node that dies after it was ready does
not take the others down, whatever its age: ``up`` reports it and starts it again after 2 s
(``--no-respawn``: leaves it dead); meanwhile the twin aborts a goal that needs it, naming it,
and rejects new ones, and the respawned node restores service (``up`` starts no real driver:
what it respawns is mock hardware or the twin's own nodes). A node that ends before it was ever
ready (it cannot start: a bad parameter, a missing file) or dies 3 times within 60 s stops them
all, exit status 1; one not ready 10 s after its start is reported in one line and waited for
(``shadow_twin.cli.processes``). Ctrl-C / SIGTERM stops the twin server first (it cancels its
controller goals while the bridges still run), then the monitor and the bridges, each with SIGINT
(SIGTERM 10 s later, then SIGKILL), and reports how long each took to stop.

Usage::

    shadow-twin up [--cell [--cell-config FILE]] [--mock-hardware] [--config FILE]
                   [--mode sim|real|both|shadow [--shadow-config FILE]] [--bridge-config FILE] [--mock-config FILE]
                   [--mock-ur-config FILE] [--mock-mir-config FILE] [--scene FILE [--mock-objects]] [--preview-config FILE]
                   [--monitor-config FILE | --no-monitor] [--no-respawn] [--ros-args ...]

``--scene FILE``: the objects of a scene file (``shadow_twin.model.scene``) in the sim bridge's model and,
without ``--cell`` (with it: and ``--mock-objects``), in the hand's mock hardware too (whose
``scene_friction_scale`` and ``scene_mass_scale`` make the "real" objects other than the model's); a bad
file ends ``up`` at once with one line (exit status 2). With ``--mock-hardware`` the mock hand publishes its
objects' poses as a motion-capture system (on its ``object_pose_topic_prefix``, ``/mocap``) and the sim
bridge follows the scene's free objects from them (``follow_objects``, :func:`mocap_sources`); the twin
monitor compares them (``objects.*``: the sim-vs-motion-capture pose error). The twin's preview
simulates the scene too (``scene_file``) and judges the held objects from the sim's object poses and
its controller_state (published at :data:`SETPOINTS_RATE` Hz, ``preview_setpoints_topic``). ``--contacts``: contact
outputs (``contact_sensors`` 'hand') in the sim bridge and the hand's mock hardware, compared by the
monitor (``contacts.enabled``).

Exit status 0 after Ctrl-C / SIGTERM, 1 when a node cannot start or fails, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import yaml

from shadow_twin.cli.processes import ChildProcesses
from shadow_twin.common import lifeline
from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.common.paths import config_path
from shadow_twin.common.signals import StopRequest
from shadow_twin.model.cell.assembly import CellConfig, write_cell_mjcf
from shadow_twin.model.mock_models import write_arm_stand_in_mjcf, write_hand_stand_in_mjcf
from shadow_twin.model.scene import SceneConfig
from shadow_twin.ros.modes import MODES, SHADOW_CONFIG, SHADOW_MONITOR_CONFIG
from mujoco_bridge.controller_state import controller_state_topic
from mujoco_bridge.parameters import SPECS as BRIDGE_SPECS

#: The hand's joint states in the cell: its own topic beside the UR driver's /joint_states.
CELL_HAND_JOINT_STATES = '/rh/joint_states'
#: The line (regular expression, searched in each line of its output) each node's module logs once
#: it serves its topics and actions, after ``]: `` (ROS's console format) or at the start of a line:
#: the bridge once it steps and publishes (``mujoco_bridge.main``), the twin server at the end of its
#: start (``TwinServer``), the monitor once its subscriptions and timers exist (``TwinMonitor``).
READY_LINES = {'mujoco_bridge.main': r'(?:^|\]: )ready: stepping\b',
               'shadow_twin.ros.twin.server': r'(?:^|\]: )serving ',
               'shadow_twin.ros.monitor.node': r'(?:^|\]: )ready: comparing '}
#: The line ``up`` prints once every node is ready (:func:`_report`), for a tool that starts ``up``.
READY_REPORT = r'^\[shadow-twin up\] ready: '
#: The mock UR5's model in the cell, beside the cell MJCF (:func:`write_cell_model`).
MOCK_UR_MODEL = 'mock_ur.xml'
#: The cell's mock hand's model with a scene, beside the cell MJCF (:func:`write_cell_model`).
MOCK_HAND_MODEL = 'mock_hand.xml'
#: The joints the cell's mock hand publishes (the hand model's prefix): the arm's are the mock UR5's.
HAND_JOINTS = 'rh_*'
#: The body the cell's mock hand's motion capture tracks besides the objects (markers on the palm: the
#: contact protocol's palm pose).
MOCK_PALM = 'rh_palm'
#: With a scene: the sim's controller_state (its default action's), whose setpoints the twin's preview
#: holds the joints a goal leaves out to (fingers squeezing a held object), and its rate, Hz.
SIM_SETPOINTS = controller_state_topic(next(spec for spec in BRIDGE_SPECS if spec.name == 'action_name').default)
SETPOINTS_RATE = 50.0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='shadow-twin up', description='Start the sim bridge, optional mock '
                                     'hardware, the twin trajectory server and the twin monitor, one process each.')
    parser.add_argument('--cell', action='store_true',
                        help='the whole cell: MiR250 + cabinet + UR5 + hand (config/cell.yaml)')
    parser.add_argument('--cell-config', type=Path, default=None, help='cell YAML (default config/cell.yaml)')
    parser.add_argument('--mock-hardware', action='store_true', help='also start the mock hardware bridge(s)')
    parser.add_argument('--config', type=Path, default=None,
                        help="the twin server's ROS parameters (default config/twin.yaml)")
    parser.add_argument('--preview-config', type=Path, default=None,
                        help="the twin's goal preview checks (its preview_config; default config/preview.yaml)")
    parser.add_argument('--mode', choices=MODES, default=None,
                        help='override the ROS parameter mode of the twin server; shadow: the sim follows the '
                             "robots' own controllers (the sim bridge also takes --shadow-config)")
    parser.add_argument('--shadow-config', type=Path, default=None,
                        help="with --mode shadow: the sim bridge's shadow sources (default "
                             'config/mujoco_bridge_shadow.yaml, with --cell config/mujoco_bridge_shadow_cell.yaml)')
    parser.add_argument('--bridge-config', type=Path, default=None,
                        help="the sim bridge's ROS parameters (default config/mujoco_bridge.yaml)")
    parser.add_argument('--mock-config', type=Path, default=None,
                        help="ROS parameters of the hand's mock hardware (default config/mock_hardware.yaml)")
    parser.add_argument('--mock-ur-config', type=Path, default=None,
                        help="with --cell: ROS parameters of the mock UR5 (default config/mock_ur.yaml)")
    parser.add_argument('--mock-mir-config', type=Path, default=None,
                        help="with --cell: ROS parameters of the mock MiR250 (default config/mock_mir.yaml)")
    parser.add_argument('--monitor-config', type=Path, default=None,
                        help="the twin monitor's ROS parameters (default config/twin_monitor.yaml)")
    parser.add_argument('--no-monitor', action='store_true',
                        help='do not start the twin monitor (about a tenth of a core on the idle cell, benchmarks/idle.py; a '
                             'calibration does not need it)')
    parser.add_argument('--scene', type=Path, default=None,
                        help='scene YAML of the objects (config/scene.yaml, config/scene_hand.yaml): in the sim, and '
                             "in the hand's mock hardware too (with its own friction and mass factors; with --cell on "
                             "the mock UR5's arm)")
    parser.add_argument('--mock-objects', action='store_true',
                        help="with --cell, --mock-hardware and --scene: the mock hand runs on the mock UR5's arm carrying "
                             "the scene's objects, which the sim follows from its motion capture (without --cell the "
                             'mock hand always carries them)')
    parser.add_argument('--contacts', action='store_true',
                        help="contact outputs per fingertip and palm in the sim and the hand's mock hardware, compared "
                             'by the monitor (contact agreement, slip warning; docs/contacts.md; rqt --contacts shows them)')
    parser.add_argument('--no-respawn', action='store_true',
                        help='leave a node that dies dead (default: start it again after 2 s; the others run on)')
    return parser


def mocap_sources(scene: Path, mock_config: Path) -> str:
    """The sim bridge's ``follow_objects`` that follows each free object of ``scene`` from the mock
    hardware's motion capture: ``{name: <prefix>/<name>/pose}``, the prefix the mock's params file
    ``mock_config`` gives its ``object_pose_topic_prefix`` (''  when it publishes none: object_pose_rate
    0, or a private ``~/`` prefix). Raises ShadowTwinError (a bad scene), FileNotFoundError."""
    params = ros_parameters(mock_config)
    prefix = str(params.get('object_pose_topic_prefix', '')).rstrip('/')
    if not prefix.startswith('/') or not params.get('object_pose_rate', 0):
        return ''
    names = [obj.name for obj in SceneConfig.from_yaml(scene).objects if obj.free]
    return yaml.safe_dump({name: f'{prefix}/{name}/pose' for name in names}, default_flow_style=True).strip() \
        if names else ''


def ros_parameters(params_file: Path) -> dict:
    """The ``ros__parameters`` of the first node of a ROS params file ({} when it has none).
    Raises FileNotFoundError: no such file."""
    if not Path(params_file).is_file():
        raise FileNotFoundError(f'parameter file {params_file} does not exist')
    values = yaml.safe_load(Path(params_file).read_text()) or {}
    return next((v.get('ros__parameters', {}) for v in values.values() if isinstance(v, dict)), {})


def node_commands(args: argparse.Namespace, extra: list[str], cell_model: Path | None = None) -> dict[str, list[str]]:
    """{node name: command line} of the nodes to start, in start order; ``cell_model``: the
    cell MJCF the sim runs (with ``--cell``).

    Raises FileNotFoundError for a params file (ROS parameters) that does not exist."""
    python = sys.executable

    def command(module: str, params: Path, *ros_args: str) -> list[str]:
        if not Path(params).is_file():
            raise FileNotFoundError(f'parameter file {params} does not exist')
        # the params file first: a later -p overrides it (ROS applies parameter overrides in order)
        return [python, '-m', module, '--ros-args', '--params-file', str(params), *ros_args, *extra]
    sim = () if cell_model is None else (
        '-p', f'model_path:={cell_model}', '-p', f'gains_file:={config_path("controllers", "cell.yaml")}')
    scene = () if args.scene is None else ('-p', f'scene_file:={Path(args.scene).resolve()}')
    sim += scene + (() if args.scene is None else ('-p', f'controller_state_rate:={SETPOINTS_RATE}'))
    contacts = ('-p', 'contact_sensors:=hand') if args.contacts else ()
    sim += contacts
    mock_config = args.mock_config or config_path('mock_hardware.yaml')
    mock_objects = args.mock_hardware and (cell_model is None or args.mock_objects)
    follow = mocap_sources(args.scene, mock_config) if args.scene and mock_objects else ''
    if follow:      # a quoted YAML string: ROS reads a -p value as YAML
        sim += ('-p', f'follow_objects:={yaml.safe_dump(follow, default_style=chr(39)).strip()}')
    if args.mode == 'shadow':       # a second params file: its shadow.* sources override the first's
        shadow = args.shadow_config or config_path(SHADOW_CONFIG[cell_model is not None])
        if not Path(shadow).is_file():
            raise FileNotFoundError(f'parameter file {shadow} does not exist')
        sim = ('--params-file', str(shadow), *sim)
    out = {'mujoco_bridge': command('mujoco_bridge.main', args.bridge_config or config_path('mujoco_bridge.yaml'),
                                    *sim)}
    if args.mock_hardware:
        if cell_model is not None:
            # the UR carrying the hand, as the real one: the arm stand-in written beside the cell model
            out['mock_ur'] = command('mujoco_bridge.main', args.mock_ur_config or config_path('mock_ur.yaml'),
                                     '-r', '__node:=mock_ur', '-p', f'model_path:={cell_model.parent / MOCK_UR_MODEL}')
        hand = (scene if cell_model is None else ('-p', f'joint_states_topic:={CELL_HAND_JOINT_STATES}')) + contacts
        if cell_model is not None and scene and args.mock_objects:    # the hand on the mock UR5's arm, with the scene
            ur = ros_parameters(args.mock_ur_config or config_path('mock_ur.yaml'))
            hand += (*scene, '-p', f'model_path:={cell_model.parent / MOCK_HAND_MODEL}',
                     '-p', f'gains_file:={config_path("controllers", "cell.yaml")}',
                     '-p', f'follow_joint_states_topic:={ur.get("joint_states_topic", "/joint_states")}',
                     '-p', f"published_joints:=['{HAND_JOINTS}']", '-p', f"object_pose_bodies:=['{MOCK_PALM}']")
        out['mock_hardware'] = command('mujoco_bridge.main', mock_config,
                                       '-r', '__node:=mock_hardware', *hand)
        if cell_model is not None:
            out['mock_mir'] = command('mujoco_bridge.main', args.mock_mir_config or config_path('mock_mir.yaml'),
                                      '-r', '__node:=mock_mir')
    mode = ['-p', f'mode:={args.mode}'] if args.mode else []
    twin, monitor = ('twin_cell.yaml', 'twin_monitor_cell.yaml') if cell_model else ('twin.yaml', 'twin_monitor.yaml')
    preview = () if args.scene is None else (*scene, '-p', f'preview_setpoints_topic:={SIM_SETPOINTS}')
    if args.preview_config is not None:
        if not Path(args.preview_config).is_file():
            raise FileNotFoundError(f'preview config {args.preview_config} does not exist')
        preview += ('-p', f'preview_config:={Path(args.preview_config).resolve()}')
    out['shadow_twin'] = command('shadow_twin.ros.twin.server', args.config or config_path(twin), *mode, *preview)
    if not args.no_monitor:
        watch = () if args.mode != 'shadow' else (
            '--params-file', str(config_path(SHADOW_MONITOR_CONFIG[cell_model is not None])))
        objects = () if not follow else (       # the followed objects' sim-vs-motion-capture pose error
            '-p', 'objects.enabled:=true', '-p', f'objects.names:=[{", ".join(yaml.safe_load(follow))}]')
        objects += ('-p', 'contacts.enabled:=true') if args.contacts else ()
        bridge_model = cell_model or ros_parameters(args.bridge_config or config_path('mujoco_bridge.yaml')).get(
            'model_path', '')
        objects += ('-p', f'view.model_path:={bridge_model}') if bridge_model else ()   # the robots drawn as the sim
        out['twin_monitor'] = command('shadow_twin.ros.monitor.node', args.monitor_config or config_path(monitor),
                                      *watch, *objects)
    return out


def ready_line(command: list[str]) -> str | None:
    """The ready line (:data:`READY_LINES`) of the module a ``node_commands`` command runs
    (``python -m <module> ...``); None for another command."""
    module = command[command.index('-m') + 1] if '-m' in command[:-1] else None
    return READY_LINES.get(module)


def write_cell_model(config: Path | None) -> Path:
    """Write the cell MJCF of ``config`` (None: config/cell.yaml) into a new temporary
    directory, and beside it (``MOCK_UR_MODEL``) the mock UR5's model, the cell reduced to the
    UR5's joints with the hand rigid on the flange (:func:`write_arm_stand_in_mjcf`), and the mock
    hand's (``MOCK_HAND_MODEL``: the cell reduced to the arm and the hand, :func:`write_hand_stand_in_mjcf`,
    run with a scene); returns the cell MJCF's path. Raises ShadowTwinError (ConfigError, ModelError)."""
    cell = CellConfig.from_yaml(config or config_path('cell.yaml'))
    folder = Path(tempfile.mkdtemp(prefix='shadow_twin_cell_'))
    try:
        path, model = write_cell_mjcf(cell, folder / 'cell.xml')
        write_arm_stand_in_mjcf(cell, folder / MOCK_UR_MODEL)
        write_hand_stand_in_mjcf(cell, folder / MOCK_HAND_MODEL)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    print(f'[shadow-twin up] cell model {path}: {model.njnt} joints, {model.nu} actuators', flush=True)
    return path


def main(argv: list[str] | None = None) -> int:
    """Run until shutdown; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if '--ros-args' in argv:
        k = argv.index('--ros-args')
        argv, extra = argv[:k], argv[k + 1:]
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.no_monitor and args.monitor_config is not None:
        parser.error('--no-monitor and --monitor-config exclude each other')
    cell_model = None
    try:
        if args.scene is not None:
            SceneConfig.from_yaml(args.scene)         # a bad scene file: one line here, not a node failing to start
        if args.cell:
            cell_model = write_cell_model(args.cell_config)
        commands = node_commands(args, extra, cell_model)
    except (FileNotFoundError, ShadowTwinError) as exc:
        print(f'shadow-twin up: {exc}', file=sys.stderr)
        return ExitCode.BAD_INPUT
    try:
        return _run(commands, respawn=set() if args.no_respawn else set(commands))
    finally:
        if cell_model is not None:
            shutil.rmtree(cell_model.parent, ignore_errors=True)


def _report(line: str) -> None:
    print(f'[shadow-twin up] {line}', file=sys.stderr, flush=True)


def _run(commands: dict[str, list[str]], respawn: set[str]) -> int:
    """Start ``commands``, supervise them (a node in ``respawn`` that dies is started again)
    until a signal or a node that ends the supervision, stop all; the exit status."""
    stop = StopRequest()        # not a threading.Event: a handler that sets one can hang (common.signals)
    lifeline.watch_parent(stop.set)     # started by a tool that ended (SIGKILL included): stop as on SIGTERM
    children = ChildProcesses()
    with stop.installed():
        try:
            for name, command in commands.items():
                children.start(name, command, ready_line(command))
            print(f'[shadow-twin up] started: {", ".join(f"{n} (pid {p.pid})" for n, p in children.procs.items())}',
                  flush=True)
            ended = children.supervise(stop.is_set, respawn, _report)
        finally:
            # the twin first: it cancels its controller goals while the bridges still run
            statuses = children.stop(order=['shadow_twin', 'twin_monitor'], report=_report)
    if ended is not None:
        name, status, why = ended
        _report(f'{name} exited with status {status} ({why}); stopped the others')
        return ExitCode.FAILED
    failed = {n: s for n, s in statuses.items() if s != 0}
    if failed:
        print(f'[shadow-twin up] nodes ended with errors: {failed}', file=sys.stderr, flush=True)
        return ExitCode.FAILED
    return ExitCode.OK


if __name__ == '__main__':
    sys.exit(main())
