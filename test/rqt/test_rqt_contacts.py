"""``shadow-twin rqt --contacts`` with the real rqt under Xvfb, the twin's contact outputs on.

The twin runs as ``shadow-twin up --mock-hardware --scene config/scene_hand.yaml`` with the sim
bridge's and the mock hardware's ``contact_sensors: hand`` and the monitor's ``contacts.enabled``
(config files written from the shipped ones), while goals move four hand joints. One cold start of
the view (``test_rqt.py`` starts the plain view three times): every curve of
``config/shadow_twin_contacts_plots.perspective``, the joints' and the contact row's (pad normal force
and slip speed of ff and th from ``/rh/contacts`` and ``/mujoco_bridge/contacts``), must hold
``SAMPLES`` samples within ``WITHIN`` s of the window showing, the contact panes side by side below
the error plot, and the Robot Monitor must list the monitor's ``contact: <label>`` status of every
label beside the joints.

The screenshots docs/images/shadow_twin_contacts_plots.png and shadow_twin_contacts_monitor.png come
from the same probe, with this module's twin, goals closing the hand on the can (GRASP of
benchmarks/contacts.py in 1.5 s, held to 4 s, open at 5.5 s, one after the other) and::

    PYTHONPATH=test/rqt/probe SHADOW_TWIN_RQT_PROBE=/tmp/view SHADOW_TWIN_RQT_PROBE_TIMEOUT=14.5 \\
        SHADOW_TWIN_RQT_PROBE_SAMPLES=1000000 SHADOW_TWIN_RQT_PROBE_ITEMS=1000 \\
        .venv/bin/python -m shadow_twin.cli.rqt --contacts
"""

from __future__ import annotations

import time
from pathlib import Path

from support import cell as cell_helpers
import pytest
import yaml
from test_rqt import run_view, AGG_GROUP, SAMPLES, WITHIN, check_window_fits, probed, view_env

from shadow_twin.plots.contact_panes import ALL_CONTACT_LABELS
from shadow_twin.plots.perspective import (CONTACTS_PLOTS_FILE, MONITOR_FILE, needed_topics, published_joints,
                                           read_perspective)

pytestmark = [pytest.mark.rqt, pytest.mark.ros, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / 'config'
VENV = REPO / '.venv'
TWIN_START_TIMEOUT = 90.0


def with_parameters(name: str, out: Path, **values) -> Path:
    """config/``name`` (one node's ros2 parameters file) with ``values`` added, written to ``out``."""
    data = yaml.safe_load((CONFIG / name).read_text())
    (node,) = data
    data[node]['ros__parameters'].update(values)
    out.write_text(yaml.safe_dump(data))
    return out


@pytest.fixture(scope='module')
def twin(ros, rqt_installed, tmp_path_factory):
    """``shadow-twin up --mock-hardware`` with the hand's scene and the contact outputs and their
    monitor on (overrides conftest's ``twin``, which ``moving_joints`` uses); yields the process."""
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import WrenchStamped
    from sensor_msgs.msg import JointState
    helpers, client = ros
    folder = tmp_path_factory.mktemp('twin_contacts')
    bridge = with_parameters('mujoco_bridge.yaml', folder / 'bridge.yaml', contact_sensors='hand')
    mock = with_parameters('mock_hardware.yaml', folder / 'mock.yaml', contact_sensors='hand')
    monitor = with_parameters('twin_monitor.yaml', folder / 'monitor.yaml', contacts={'enabled': True})
    seen = [client.record(JointState, '/twin/joint_error', depth=5),
            client.record(DiagnosticArray, '/diagnostics_agg', depth=5),
            client.record(WrenchStamped, '/rh/contacts/ff/wrench', depth=5),
            client.record(WrenchStamped, '/mujoco_bridge/contacts/ff/wrench', depth=5)]
    proc = helpers.NodeProcess(None, [], folder / 'up.log', command=[
        str(VENV / 'bin' / 'shadow-twin'), 'up', '--mock-hardware', '--scene', str(CONFIG / 'scene_hand.yaml'),
        '--bridge-config', str(bridge), '--mock-config', str(mock), '--monitor-config', str(monitor)])
    cell_helpers.wait_started([proc], seen, TWIN_START_TIMEOUT, 'the twin with contacts')
    yield proc
    cell_helpers.stop_all({'up': proc})


def test_contacts_view_plots_force_and_slip_and_lists_the_contact_statuses(display, twin, moving_joints, tmp_path):
    joints = published_joints()[0]
    began = time.monotonic()
    run_view(view_env(display, tmp_path, SHADOW_TWIN_RQT_PROBE_ITEMS=str(len(joints) + 1 + 6)),
             tmp_path, '--contacts', timeout=150)
    plots, monitor = probed(tmp_path, CONTACTS_PLOTS_FILE), probed(tmp_path, MONITOR_FILE)

    # every field restored, the contact fields among them, each curve with SAMPLES within WITHIN s
    wanted = needed_topics(read_perspective(CONFIG / CONTACTS_PLOTS_FILE))
    got = {name: n for plot in plots['plots'] for name, n in plot['samples'].items()}
    assert sorted(got) == sorted(wanted), plots['plots']
    for side in ('/rh/contacts', '/mujoco_bridge/contacts'):
        for label in ('ff', 'th'):
            assert {f'{side}/{label}/wrench/wrench/force/y', f'{side}/{label}/slip/twist/linear/x'} <= set(got)
    assert plots['complete'] and plots['elapsed_s'] <= WITHIN, plots['plots']
    assert all(n >= SAMPLES for n in got.values()), got

    # the contact row: force and slip side by side, below the sim - real plot
    titles = [plot['title'] for plot in plots['plots']]
    assert titles[-2].startswith('pad normal force (N') and titles[-1].startswith('slip speed (m/s)')
    check_window_fits(plots)
    docks = {d['title']: d for d in plots['docks']}
    error, force, slip = docks[titles[-3]], docks[titles[-2]], docks[titles[-1]]
    assert titles[-3].startswith('sim - real')
    assert force['y'] == slip['y'] > error['y'] and force['x'] + force['width'] < slip['x']

    # the Robot Monitor lists each label's contact status (both sides publish: not stale)
    (tree,) = monitor['monitors']
    assert monitor['complete'], tree['items']
    items = {row['path']: row['message'] for row in tree['items']}
    for label in ALL_CONTACT_LABELS:
        path = f'{AGG_GROUP}/contact: {label}'
        assert path in items and not items[path].startswith('no contact output'), (label, items.get(path))
        assert tree['levels'][path] in (0, 1), (label, items[path])
    for joint in joints:
        assert items[f'{AGG_GROUP}/{joint}'].startswith('RMS error '), joint
    check_window_fits(monitor)
    print(f'contacts view closed after {time.monotonic() - began:.1f} s; curves complete {plots["elapsed_s"]:.1f} s '
          f'after the window showed ({len(got)} curves, fewest samples {min(got.values())}); contact statuses: '
          + '; '.join(f'{label}: {items[f"{AGG_GROUP}/contact: {label}"]}' for label in ALL_CONTACT_LABELS))
