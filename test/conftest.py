"""Shared fixtures of the shadow_twin core tests.

The real recording, the waypoint file and Shadow's reference MJCF live in
``../shared`` beside the repository (CI checks it out there too). Tests that
need them skip cleanly when it is absent. Nothing here writes into the
repository or into ``../shared``: every output goes under pytest's tmp paths.
"""

from __future__ import annotations

import contextlib
import io
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(__file__).resolve().parents[2] / 'shared'
DATA = SHARED / 'data' / 'shadow_hand_e'
BAG = DATA / 'hand_closing_real.bag'
TRAJECTORIES = DATA / 'trajectories.yaml'
SHADOW_MODEL = SHARED / 'reference' / 'sr_description_mujoco_models' / 'sr_hand_e_plus_environment.xml'
FINGERS_SPACE = REPO / 'config' / 'calibration' / 'fingers_j123.yaml'
THUMB_SPACE = REPO / 'config' / 'calibration' / 'thumb.yaml'
GAINS = REPO / 'config' / 'controllers' / 'shadow_hand_e.yaml'

FF_JOINTS = ['rh_FFJ1', 'rh_FFJ2', 'rh_FFJ3', 'rh_FFJ4']
# Joint order of the real recording and of trajectories.yaml (README.md).
README_JOINTS = ('rh_FFJ1 rh_FFJ2 rh_FFJ3 rh_FFJ4 rh_LFJ1 rh_LFJ2 rh_LFJ3 rh_LFJ4 rh_LFJ5 rh_MFJ1 '
                 'rh_MFJ2 rh_MFJ3 rh_MFJ4 rh_RFJ1 rh_RFJ2 rh_RFJ3 rh_RFJ4 rh_THJ1 rh_THJ2 rh_THJ3 '
                 'rh_THJ4 rh_THJ5 rh_WRJ1 rh_WRJ2').split()
# Settings of the end-to-end calibration shared by test_calibration and test_cli.
CALIBRATION_BUDGET = 12


@pytest.fixture(scope='session', autouse=True)
def ros_home(tmp_path_factory):
    """``ROS_HOME`` (which the nodes started by the tests inherit) in a tmp folder: what nodes keep
    there (the twin monitor's drift state, ROS logs) never reaches the user's ~/.ros."""
    import os
    folder = tmp_path_factory.mktemp('ros_home')
    before = os.environ.get('ROS_HOME')
    os.environ['ROS_HOME'] = str(folder)
    yield folder
    if before is None:
        os.environ.pop('ROS_HOME', None)
    else:
        os.environ['ROS_HOME'] = before


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f'{path} is not available (needs ../shared beside the repository)')
    return path


@pytest.fixture(scope='session')
def real_bag() -> Path:
    """The real ROS 1 recording ``hand_closing_real.bag``."""
    return _need(BAG)


@pytest.fixture(scope='session')
def trajectories_yaml() -> Path:
    """The commanded waypoints ``trajectories.yaml``."""
    return _need(TRAJECTORIES)


@pytest.fixture(scope='session')
def shadow_model() -> Path:
    """Shadow's reference MJCF (its duplicate_geoms includes are git symlink stubs)."""
    return _need(SHADOW_MODEL)


@pytest.fixture(scope='session')
def real_recording(real_bag):
    """The real recording, read once (tests must not modify it)."""
    from shadow_twin.calibration.recordings.recording import read_joint_states
    return read_joint_states(real_bag)


@pytest.fixture(scope='session')
def hand_closing(trajectories_yaml):
    """The ``hand_closing`` trajectory that the real recording executes."""
    from shadow_twin.control.trajectory import load_waypoint_yaml
    return load_waypoint_yaml(trajectories_yaml, 'hand_closing')


def write_joint_state_bag(path, stamps, names, positions, *, bag_times=None, velocities=None,
                          storage='mcap', topic='/joint_states'):
    """Write a ROS 2 bag of ``sensor_msgs/JointState`` messages exactly as given.

    Unlike ``recording.write_joint_states`` this keeps NaN values, duplicate or
    unsorted header stamps: ``bag_times`` (receive times, default the stamps)
    orders the messages in the bag. ``names`` is one list for every message, or
    a list of lists (one per message). Returns the bag path.
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    from shadow_twin.calibration.recordings.recording import JOINT_STATE, typestore
    store = typestore()
    JointState = store.types[JOINT_STATE]
    Header = store.types['std_msgs/msg/Header']
    Time = store.types['builtin_interfaces/msg/Time']
    plugin = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}[storage]
    bag_times = stamps if bag_times is None else bag_times
    empty = np.array([], dtype=np.float64)
    per_message = len(names) > 0 and isinstance(names[0], (list, tuple))
    with Writer(Path(path), version=9, storage_plugin=plugin) as writer:
        connection = writer.add_connection(topic, JOINT_STATE, typestore=store)
        for k, stamp in enumerate(stamps):
            sec = int(math.floor(stamp))
            nanosec = min(int(round((stamp - sec) * 1e9)), 999_999_999)
            msg = JointState(header=Header(stamp=Time(sec=sec, nanosec=nanosec), frame_id=''),
                             name=list(names[k] if per_message else names), position=np.asarray(positions[k], dtype=np.float64),
                             velocity=empty if velocities is None else np.asarray(velocities[k], dtype=np.float64),
                             effort=empty)
            writer.write(connection, int(round(bag_times[k] * 1e9)), store.serialize_cdr(msg, JOINT_STATE))
    return Path(path)


def write_string_bag(path, storage='mcap'):
    """A ROS 2 bag with one ``std_msgs/msg/String`` message and no JointState topic."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from shadow_twin.calibration.recordings.recording import typestore
    store = typestore()
    String = store.types['std_msgs/msg/String']
    plugin = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}[storage]
    with Writer(Path(path), version=9, storage_plugin=plugin) as writer:
        connection = writer.add_connection('/chatter', 'std_msgs/msg/String', typestore=store)
        writer.write(connection, 1_000_000_000, store.serialize_cdr(String(data='hello'), 'std_msgs/msg/String'))
    return Path(path)


def write_empty_joint_state_bag(path, storage='mcap'):
    """A ROS 2 bag with a JointState connection but no messages."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from shadow_twin.calibration.recordings.recording import JOINT_STATE, typestore
    plugin = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}[storage]
    with Writer(Path(path), version=9, storage_plugin=plugin) as writer:
        writer.add_connection('/joint_states', JOINT_STATE, typestore=typestore())
    return Path(path)


@pytest.fixture(scope='session')
def bag_writers():
    """The bag-writing helpers above, for tests (namespace with three functions)."""
    from types import SimpleNamespace
    return SimpleNamespace(joint_states=write_joint_state_bag, string=write_string_bag,
                           empty=write_empty_joint_state_bag)


def snapshot(directory: Path) -> dict[str, bytes]:
    """{relative path: bytes} of every file below ``directory``."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob('*')) if p.is_file()}


def calibrate_args(bag, trajectories, out, *extra, budget=CALIBRATION_BUDGET):
    """Arguments of the reference ``shadow-twin calibrate`` run (default optimiser bo, seed 0)."""
    return ['calibrate', '--bag', str(bag), '--trajectory', f'{trajectories}:hand_closing',
            '--space', str(FINGERS_SPACE), '--budget', str(budget), '--workers', '2',
            '--no-progress', '-q', '--out', str(out), *extra]


@pytest.fixture(scope='session')
def calibration_run(tmp_path_factory, real_bag, trajectories_yaml):
    """One end-to-end ``shadow-twin calibrate`` on the real bag with the built-in model.

    Returns (exit code, stdout, output directory). Tests only read the directory.
    """
    from shadow_twin.cli import main as cli
    out = tmp_path_factory.mktemp('calibration') / 'run'
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = cli.main(calibrate_args(real_bag, trajectories_yaml, out))
    return code, stdout.getvalue(), out


@pytest.fixture(scope='module')
def ros(request):
    """(ros_helpers module, RosClient) on this test run's private ROS domain, one client per
    test module; skips without rclpy or control_msgs."""
    pytest.importorskip('rclpy')
    pytest.importorskip('control_msgs.action')
    from support import ros as ros_helpers
    ros_helpers.isolate_domain()
    client = ros_helpers.RosClient(request.module.__name__.rsplit('.', 1)[-1] + '_client')
    yield ros_helpers, client
    client.close()


@pytest.fixture(scope='session')
def ros2_launch() -> Path:
    """``.venv/bin/ros2`` with upstream ``ros2 launch`` installed and this package's ament layout in
    .venv (``scripts/setup.sh``); both scripts are idempotent and take about a second when done."""
    if not SHARED.is_dir():
        pytest.skip(f'{SHARED} is absent: upstream ros2 launch is installed from ../shared/vendor/ros2_launch')
    for command in (['bash', 'scripts/setup.sh'],
                    ['bash', '../shared/tools/install_ros2_launch.sh', '.venv', '../shared/vendor/ros2_launch']):
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f'{" ".join(command)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}'
    return REPO / '.venv' / 'bin' / 'ros2'


@pytest.fixture(scope='module')
def scenarios():
    """The fault and load scenarios shared with ``benchmarks/faults.py`` (``support.scenarios.hand_faults``)."""
    from support.scenarios import hand_faults
    return hand_faults


@pytest.fixture(scope='module')
def states(ros):
    """Recorders (depth 1000) of /joint_states ('real') and /sim/joint_states ('sim') in this
    module's client; a module may define its own."""
    from sensor_msgs.msg import JointState
    _, client = ros
    return {'real': client.record(JointState, '/joint_states', depth=1000),
            'sim': client.record(JointState, '/sim/joint_states', depth=1000)}


def pytest_collection_modifyitems(items):
    """Markers, not folders, choose what runs (setup.cfg lists them): a test that starts ROS 2
    processes, one that uses the ``ros`` fixture (itself or through another fixture), is marked
    ``ros`` here, so ``-m 'not ros'`` runs the rest wherever it lives; a module that takes minutes, or
    runs ROS another way (``ros2 launch``, rqt), says so itself (``pytestmark``)."""
    for item in items:
        if 'ros' in getattr(item, 'fixturenames', ()):
            item.add_marker(pytest.mark.ros)
