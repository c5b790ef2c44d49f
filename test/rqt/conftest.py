"""Fixtures of the rqt tests: real rqt in .venv, a virtual 1920 x 1080 screen, the live twin with
mock hardware on this run's private ROS domain, and goals that keep its joints moving.

rqt is not on PyPI: ``../shared/tools/install_rqt.sh`` installs rqt_gui, rqt_plot,
rqt_robot_monitor, PyQt5 and pyqtgraph into .venv from ``../shared/vendor/rqt`` (and
apt-installs Xvfb); it takes about a second when done, and CI starts from a fresh clone.
Without ``../shared`` the tests skip, saying so.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

from support import cell as cell_helpers
import pytest

from shadow_twin.common import lifeline
from shadow_twin.plots.perspective import DEFAULT_JOINTS, SCREEN_HEIGHT, SCREEN_WIDTH

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / 'shared'
VENV = REPO / '.venv'
TWIN_START_TIMEOUT = 60.0
#: Poses (rad) between which the goals move the joints of the shipped plots perspective (DEFAULT_JOINTS).
POSE_A, POSE_B = (0.3, 0.3, 0.3, 0.2), (1.2, 1.2, 1.2, 0.9)
#: Seconds of each half of a goal's back-and-forth (A -> B -> A).
STROKE = 1.0


@pytest.fixture(scope='session')
def rqt_installed() -> None:
    """rqt installed into .venv with ``../shared/tools/install_rqt.sh`` (idempotent)."""
    if not SHARED.is_dir():
        pytest.skip(f'{SHARED} is absent: rqt is installed from ../shared/vendor/rqt')
    done = subprocess.run(['bash', str(SHARED / 'tools' / 'install_rqt.sh'), str(VENV), str(SHARED / 'vendor' / 'rqt')],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f'install_rqt.sh failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}'


@pytest.fixture(scope='session')
def display(rqt_installed):
    """``DISPLAY`` of an Xvfb screen of the view's size (1920 x 1080 px, 24 bit) on a free display number."""
    read, write = os.pipe()
    xvfb = subprocess.Popen(['Xvfb', '-displayfd', str(write), '-screen', '0', f'{SCREEN_WIDTH}x{SCREEN_HEIGHT}x24',
                             '-nolisten', 'tcp'], pass_fds=(write,), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=lifeline.death_signal())    # it ends with this test run
    os.close(write)
    with os.fdopen(read) as pipe:
        number = pipe.readline().strip()
    assert number, f'Xvfb did not start (exit status {xvfb.poll()})'
    yield f':{number}'
    xvfb.send_signal(signal.SIGTERM)
    xvfb.wait(timeout=10)


@pytest.fixture(scope='module')
def twin(ros, tmp_path_factory):
    """``shadow-twin up --mock-hardware`` as a real process, publishing /twin/joint_error and
    /diagnostics_agg; yields the process, which must stop with status 0."""
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import JointState
    helpers, client = ros
    errors = client.record(JointState, '/twin/joint_error', depth=5)
    aggregated = client.record(DiagnosticArray, '/diagnostics_agg', depth=5)
    proc = helpers.NodeProcess(None, [], tmp_path_factory.mktemp('twin') / 'up.log',
                               command=[str(VENV / 'bin' / 'shadow-twin'), 'up', '--mock-hardware'])
    cell_helpers.wait_started([proc], [errors, aggregated], TWIN_START_TIMEOUT, 'the twin')
    yield proc
    cell_helpers.stop_all({'up': proc})


def _back_and_forth():
    from builtin_interfaces.msg import Duration
    from control_msgs.action import FollowJointTrajectory
    from trajectory_msgs.msg import JointTrajectoryPoint
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = list(DEFAULT_JOINTS)
    for k, pose in enumerate((POSE_B, POSE_A), start=1):
        t = k * STROKE
        goal.trajectory.points.append(JointTrajectoryPoint(positions=list(pose), time_from_start=Duration(
            sec=int(t), nanosec=int(round((t - int(t)) * 1e9)))))
    return goal


@pytest.fixture(scope='module')
def moving_joints(ros, twin):
    """FollowJointTrajectory goals to /twin/follow_joint_trajectory, one after the other, moving
    DEFAULT_JOINTS back and forth between POSE_A and POSE_B; yields {'sent': n, 'accepted': n}."""
    from control_msgs.action import FollowJointTrajectory
    _, client = ros
    counts = {'sent': 0, 'accepted': 0}
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            counts['sent'] += 1
            try:        # a loaded machine may answer late: then the next goal replaces this one
                handle = client.send_goal(FollowJointTrajectory, '/twin/follow_joint_trajectory',
                                          _back_and_forth(), timeout=10.0)
                if handle.accepted:
                    counts['accepted'] += 1
                    client.wait_future(handle.get_result_async(), 4 * STROKE + 5.0)
                else:
                    stop.wait(0.5)
            except TimeoutError:
                pass
    thread = threading.Thread(target=loop, name='goals', daemon=True)
    thread.start()
    yield counts
    stop.set()
    thread.join(timeout=4 * STROKE + 15.0)
