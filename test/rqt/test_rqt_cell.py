"""``shadow-twin rqt --cell`` with the real rqt under Xvfb, on the cell with its stand-ins.

The sim bridge runs the cell (``shadow-twin model --cell``), ``mock_ur``, the mock hand (on
``/rh/joint_states``) and ``mock_mir`` stand in for the robots, and the twin monitor runs with
``config/twin_monitor_cell.yaml`` (no twin server: the view needs only these topics). One cold
start of the view (kept to one for the wall time; ``test_rqt.py`` starts the hand's view three
times): every curve of the cell plots (arm joints real vs sim from ``/joint_states`` and
``/sim/joint_states``, their errors, the base's ``/twin/base_error/vector/x|y|z``) must hold
``SAMPLES`` samples within ``WITHIN`` s of the window showing, and the Robot Monitor must list
every joint of the cell and ``/shadow_twin/sim vs real/base``; both windows fit 1920 x 1080.
"""

from __future__ import annotations

import time
from pathlib import Path

from support import cell as cell_helpers
import pytest
from test_rqt import run_view, SAMPLES, WITHIN, check_window_fits, probed, view_env

from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.plots.perspective import (CELL_MONITOR_FILE, CELL_PLOTS_FILE, cell_published_joints, needed_topics,
                                           read_perspective)

pytestmark = [pytest.mark.rqt, pytest.mark.ros, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / 'config'
START_TIMEOUT = 60.0
AGG_GROUP = '/shadow_twin/sim vs real'
ARM = ('shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint', 'wrist_2_joint', 'wrist_3_joint')


@pytest.fixture(scope='module')
def cell_twin(ros, rqt_installed, tmp_path_factory):
    """The cell's sim bridge, three stand-ins and the twin monitor as processes, publishing what the
    cell view shows; yields {name: process}, which must all stop with status 0."""
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import Vector3Stamped
    from sensor_msgs.msg import JointState

    from shadow_twin.model.cell.assembly import write_cell_mjcf
    helpers, client = ros
    folder = tmp_path_factory.mktemp('cell')
    model, _ = write_cell_mjcf(None, folder / 'cell.xml')
    seen = [client.record(JointState, '/twin/joint_error', depth=5),
            client.record(Vector3Stamped, '/twin/base_error', depth=5),
            client.record(DiagnosticArray, '/diagnostics_agg', depth=5)]

    procs = {**cell_helpers.cell_bridges(folder, model),
             'monitor': helpers.NodeProcess('shadow_twin.ros.monitor.node', ['--params-file',
                                                                             str(CONFIG / 'twin_monitor_cell.yaml')],
                                            folder / 'monitor.log')}
    cell_helpers.wait_started(procs, seen, START_TIMEOUT)
    yield procs
    cell_helpers.stop_all(procs)


def test_cell_view_shows_every_curve_and_the_base_status(display, cell_twin, tmp_path):
    joints = cell_published_joints()[0]
    hand_and_arm = [j for j in joints if j in ARM or j.startswith('rh_')]
    began = time.monotonic()
    run_view(view_env(display, tmp_path, SHADOW_TWIN_RQT_PROBE_ITEMS=str(len(hand_and_arm) + 2)),
             tmp_path, '--cell', timeout=120)
    plots, monitor = probed(tmp_path, CELL_PLOTS_FILE), probed(tmp_path, CELL_MONITOR_FILE)

    wanted = needed_topics(read_perspective(CONFIG / CELL_PLOTS_FILE))
    got = {name: n for plot in plots['plots'] for name, n in plot['samples'].items()}
    assert sorted(got) == sorted(wanted), plots['plots']
    assert {'/twin/base_error/vector/x', '/twin/base_error/vector/y', '/twin/base_error/vector/z'} <= set(got)
    assert plots['complete'] and plots['elapsed_s'] <= WITHIN, plots['plots']
    assert all(n >= SAMPLES for n in got.values()), got
    titles = [plot['title'] for plot in plots['plots']]
    assert titles[:4] == [f'{j}: real vs sim (rad)' for j in ARM[:4]]
    assert titles[4].startswith('sim - real (rad)') and titles[5].startswith('base: sim - real')

    (tree,) = monitor['monitors']
    assert monitor['complete'], tree['items']
    items = {row['path']: row['message'] for row in tree['items']}
    for joint in hand_and_arm:
        assert items[f'{AGG_GROUP}/{joint}'].startswith('RMS error '), joint
    assert items[f'{AGG_GROUP}/base'].startswith('RMS error ') and ' m, ' in items[f'{AGG_GROUP}/base']
    assert tree['levels'][f'{AGG_GROUP}/base'] in (0, 1, 2)
    assert items[f'{AGG_GROUP}/sim vs real'].startswith('worst joint ')

    for result in (plots, monitor):
        check_window_fits(result)
    assert plots['frame']['x'] + plots['frame']['width'] <= monitor['frame']['x']
    docks = {d['title']: d for d in plots['docks']}
    errors, base = docks[titles[4]], docks[titles[5]]
    assert errors['y'] == base['y'] > docks[titles[2]]['y'] and errors['x'] < base['x']     # side by side, below
    print(f'cell view closed after {time.monotonic() - began:.1f} s; curves complete {plots["elapsed_s"]:.1f} s '
          f'after the window showed ({len(got)} curves, fewest samples {min(got.values())}); robot monitor: '
          f'{sum(r["leaf"] for r in tree["items"])} statuses after {monitor["elapsed_s"]:.1f} s')


def test_cell_and_perspective_options_exclude_each_other(tmp_path, capsys):
    from shadow_twin.cli import rqt as rqt_cli
    assert rqt_cli.main(['--cell', '--perspective', str(CONFIG / CELL_PLOTS_FILE)]) == ExitCode.BAD_INPUT
    assert 'give --cell or --perspective, not both' in capsys.readouterr().err
