"""The contact row of the rqt plots perspectives (shadow_twin.plots.contact_panes, ``shadow-twin
perspective --contacts``, ``shadow-twin rqt --contacts``): its fields name fields of the messages
the bridges publish, under the prefixes the bridges and the monitor use, and the plotted force
axis is the one a grasp presses the pads along. The real rqt loading it: test/rqt/test_rqt_contacts.py."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from shadow_twin.cli import perspective as persp_cli
from shadow_twin.cli import rqt as rqt_cli
from shadow_twin.common.errors import ConfigError
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.plots import contact_panes as panes
from shadow_twin.plots import perspective as persp

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / 'config'


def plot_settings(data: dict) -> list[tuple[str, list[str]]]:
    """[(dock title, [field, ...])] of the perspective's rqt_plots, by serial, as rqt imports them."""
    manager = data['groups']['pluginmanager']
    running = ast.literal_eval(manager['keys']['running-plugins']['repr'])
    out = []
    for serial in running['rqt_plot/Plot']:
        group = manager['groups'][f'plugin__rqt_plot__Plot__{serial}']['groups']
        topics = ast.literal_eval(group['plugin']['keys']['topics']['repr'])
        title = ast.literal_eval(group['dock_widget__DataPlotWidget']['keys']['dock_widget_title']['repr'])
        out.append((title, [topics] if isinstance(topics, str) else topics))
    return out


def message_has_field(msg_type, path: str) -> bool:
    """Whether ``path`` (``a/b/c``) names a float field of ``msg_type``, walking its nested messages
    as rqt_plot does (rosidl's field types)."""
    import importlib
    for name in path.split('/'):
        fields = msg_type.get_fields_and_field_types()
        if name not in fields:
            return False
        kind = fields[name]
        if kind == 'double':
            return name == path.split('/')[-1]
        package, _, type_name = kind.partition('/')
        msg_type = getattr(importlib.import_module(f'{package}.msg'), type_name)
    return False


# ------------------------------------------------------------------------------- the shipped files
def test_shipped_contact_perspectives_add_a_force_and_slip_row_of_ff_and_th():
    for name, plain in ((persp.CONTACTS_PLOTS_FILE, persp.PLOTS_FILE),
                        (persp.CELL_CONTACTS_PLOTS_FILE, persp.CELL_PLOTS_FILE)):
        found = plot_settings(json.loads((CONFIG / name).read_text()))
        assert found[:-2] == plot_settings(json.loads((CONFIG / plain).read_text()))   # the plain plots first
        (force_title, force), (slip_title, slip) = found[-2:]
        assert force_title.startswith('pad normal force (N') and slip_title.startswith('slip speed (m/s)')
        expected = [f'{prefix}/{label}/' for label in ('ff', 'th')
                    for prefix in ('/rh/contacts', '/mujoco_bridge/contacts')]
        assert force == [p + 'wrench/wrench/force/y' for p in expected]
        assert slip == [p + 'slip/twist/linear/x' for p in expected]
        needed = persp.needed_topics(json.loads((CONFIG / name).read_text()))
        assert needed[-8:] == force + slip


def test_contact_fields_are_fields_of_the_published_messages():
    pytest.importorskip('geometry_msgs.msg')
    from geometry_msgs.msg import TwistStamped, WrenchStamped
    topic, _, field = panes.NORMAL_FORCE_FIELD.partition('/')
    assert topic == 'wrench' and message_has_field(WrenchStamped, field)
    topic, _, field = panes.SLIP_FIELD.partition('/')
    assert topic == 'slip' and message_has_field(TwistStamped, field)
    assert not message_has_field(WrenchStamped, 'wrench/force/w')              # the check can fail


def test_contact_prefixes_are_the_bridges_and_the_monitors():
    pytest.importorskip('rclpy')
    from mujoco_bridge.bridge_node import NODE_NAME as BRIDGE
    from mujoco_bridge.parameters import SPECS as BRIDGE_SPECS
    from shadow_twin.ros.monitor.parameters import SPECS as MONITOR_SPECS
    bridge = {spec.name: spec.default for spec in BRIDGE_SPECS}
    assert bridge['contact_topic_prefix'] == '~/contacts'                       # private: /<node name>/contacts
    assert panes.SIM_CONTACTS_PREFIX == f'/{BRIDGE}/contacts'
    mock = yaml.safe_load((CONFIG / 'mock_hardware.yaml').read_text())['/**/mock_hardware']['ros__parameters']
    assert panes.REAL_CONTACTS_PREFIX == mock['contact_topic_prefix']
    monitor = {spec.name: spec.default for spec in MONITOR_SPECS}
    assert (monitor['contacts.sim_prefix'], monitor['contacts.real_prefix']) == (panes.SIM_CONTACTS_PREFIX,
                                                                                panes.REAL_CONTACTS_PREFIX)
    assert set(panes.DEFAULT_CONTACT_LABELS) <= set(monitor['contacts.labels']) == set(panes.ALL_CONTACT_LABELS)


def test_a_grasp_presses_the_pads_along_plus_y_of_their_bodies():
    """The plotted axis (+y of the body frame) is the one a grasp loads: the hand's scene can,
    grasped, pushes each touching fingertip with a force whose largest share is along +y (the
    pads face -y). Physics of the built-in hand, read by ContactReader."""
    from shadow_twin.common.paths import config_path
    from shadow_twin.control.trajectory import JointTrajectory
    from shadow_twin.model.scene import SceneConfig
    from shadow_twin.simulation.contact_sensing import ContactReader
    from shadow_twin.simulation.live.simulation import LiveSimulation
    assert panes.NORMAL_FORCE_FIELD.endswith('force/y')
    grasp = {**{f'rh_{f}J{j}': q for f in ('FF', 'MF', 'RF') for j, q in ((3, 1.0), (2, 0.8), (1, 0.6))},
             'rh_THJ5': 0.4, 'rh_THJ4': 1.1, 'rh_THJ2': 0.3, 'rh_THJ1': 0.5}
    sim = LiveSimulation(None, scene=SceneConfig.from_yaml(config_path('scene_hand.yaml')))
    sim.set_trajectory(JointTrajectory(list(grasp), [1.0], [list(grasp.values())]))
    sim.step(int(round(1.5 / sim.dt)))
    readings = ContactReader(sim.model).read(sim.data)
    touching = [label for label in ('ff', 'mf', 'rf', 'th') if readings[label].in_contact]
    assert len(touching) >= 3, {k: v.in_contact for k, v in readings.items()}
    for label in touching:
        force = np.asarray(readings[label].force)
        assert force[1] > 0.5 * np.linalg.norm(force), (label, force)           # within 60 deg of +y


# ------------------------------------------------------------------------------------ the generator
def test_other_labels_and_prefixes_and_the_layout_row():
    data = persp.build_plots_perspective(['rh_FFJ3'], contacts=['mf', 'palm'], real_contacts_prefix='/robot/tactile/',
                                         sim_contacts_prefix='/sim/contacts')
    found = plot_settings(data)
    assert len(found) == 4 and found[0][0].startswith('rh_FFJ3') and found[1][0].startswith('sim - real')
    assert found[2][1] == ['/robot/tactile/mf/wrench/wrench/force/y', '/sim/contacts/mf/wrench/wrench/force/y',
                           '/robot/tactile/palm/wrench/wrench/force/y', '/sim/contacts/palm/wrench/wrench/force/y']
    assert found[3][1][-1] == '/sim/contacts/palm/slip/twist/linear/x' and 'mf, palm' in found[3][0]
    assert plot_settings(persp.build_plots_perspective(['rh_FFJ3'])) == found[:2]      # no contacts: no row
    for labels, message in [([], 'give one or more'), (['ff', 'ff'], "label(s) ['ff'] given more than once"),
                            (['ff', '2x', 'a-b'], "labels ['2x', 'a-b'] are not ROS name tokens")]:
        with pytest.raises(ConfigError, match=message.replace('(', r'\(').replace(')', r'\)').replace('[', r'\[')):
            persp.build_plots_perspective(['rh_FFJ3'], contacts=labels)
    for prefix in ('rh/contacts', '/', '/a//b', '/a b'):
        with pytest.raises(ConfigError, match='the sim contact prefix must be an absolute topic name'):
            panes.contact_panes(['ff'], sim_prefix=prefix)


def test_perspective_main_contacts_options(tmp_path, capsys):
    out = tmp_path / 'contacts.perspective'
    assert persp_cli.main(['--contacts', '--out', str(out)]) == ExitCode.OK
    assert out.read_text() == (CONFIG / persp.CONTACTS_PLOTS_FILE).read_text()
    assert 'contact force and slip plots of ff,th' in capsys.readouterr().out
    assert persp_cli.main(['--cell', '--contacts', '--out', str(out)]) == ExitCode.OK
    assert out.read_text() == (CONFIG / persp.CELL_CONTACTS_PLOTS_FILE).read_text()
    assert persp_cli.main(['--contacts', 'lf,palm', '--joints', 'rh_LFJ3', '--out', str(out)]) == ExitCode.OK
    assert [t for _, topics in plot_settings(json.loads(out.read_text()))[-2:] for t in topics][::2] == [
        '/rh/contacts/lf/wrench/wrench/force/y', '/rh/contacts/palm/wrench/wrench/force/y',
        '/rh/contacts/lf/slip/twist/linear/x', '/rh/contacts/palm/slip/twist/linear/x']
    before = out.read_text()
    for args, message in [(['--monitor', '--contacts'], '--contacts does not apply to --monitor'),
                          (['--real-contacts-prefix', '/x'], '--real-contacts-prefix need(s) --contacts'),
                          (['--contacts', 'ff,', ], 'contact labels: give one or more'),
                          (['--contacts', '--sim-contacts-prefix', 'sim'], 'must be an absolute topic name')]:
        capsys.readouterr()
        assert persp_cli.main([*args, '--out', str(out)]) == ExitCode.BAD_INPUT, args
        err = capsys.readouterr().err
        assert err.startswith('shadow-twin perspective: error: ') and message in err, err
        assert out.read_text() == before                                   # nothing written


def test_rqt_contacts_excludes_perspective(capsys):
    assert rqt_cli.main(['--contacts', '--perspective', str(CONFIG / persp.PLOTS_FILE)]) == ExitCode.BAD_INPUT
    assert 'give --contacts or --perspective, not both' in capsys.readouterr().err
