"""The twin monitor's rqt perspectives, the hand's and the cell's (shadow_twin.plots.perspective,
window layout from shadow_twin.plots.qt_layout, ``shadow-twin perspective``): ROS-free, JSON files
read as rqt imports them and checked against the models' joint orders."""

from __future__ import annotations

import ast
import json
import math
import re
import struct
from pathlib import Path

import pytest

from shadow_twin.cli import perspective as persp_cli
from shadow_twin.common.errors import ConfigError
from shadow_twin.plots import perspective as persp


# -------------------------------------------------------------------------------- perspectives
# The rqt perspectives of shadow_twin.plots.perspective (ROS-free: JSON files).
CONFIG = Path(__file__).resolve().parents[3] / 'config'
PLOTS, MONITOR = CONFIG / persp.PLOTS_FILE, CONFIG / persp.MONITOR_FILE
TOPIC = re.compile(r'^(?P<topic>/.+)/position\[(?P<index>\d+)\]$')


def model_joint_order() -> list[str]:
    """The built-in model's hinge/slide joints in model order, read with MuJoCo directly."""
    import mujoco

    from shadow_twin.model.mjcf import builtin_model_path
    model = mujoco.MjModel.from_xml_path(str(builtin_model_path()))
    kinds = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    return [model.joint(j).name for j in range(model.njnt) if int(model.jnt_type[j]) in kinds and model.joint(j).name]


def imported_value(value):
    """One value as qt_gui's PerspectiveManager imports it: repr evaluated; a QByteArray as bytes."""
    if value['type'] == 'repr':
        return ast.literal_eval(value['repr'])
    assert value['type'] == 'repr(QByteArray.hex)'
    text = value['repr(QByteArray.hex)']
    assert text.startswith("QtCore.QByteArray(b'") and text.endswith("')"), text
    return bytes.fromhex(text[len("QtCore.QByteArray(b'"):-2])


def imported(node):
    """The perspective as rqt imports it: every value evaluated."""
    return {'keys': {k: imported_value(v) for k, v in node['keys'].items()},
            'groups': {k: imported(g) for k, g in node['groups'].items()}}


def plots(data) -> list[tuple[str, list[tuple[str, int]]]]:
    """[(dock title, [(topic, index), ...])] of the rqt_plot instances, by serial number."""
    manager = imported(data['groups']['pluginmanager'])
    out = []
    for serial in manager['keys']['running-plugins']['rqt_plot/Plot']:
        group = manager['groups'][f'plugin__rqt_plot__Plot__{serial}']
        topics = group['groups']['plugin']['keys']['topics']
        topics = [topics] if isinstance(topics, str) else topics          # rqt_py_common's unpack()
        parsed = [TOPIC.match(t) for t in topics]
        assert all(parsed), topics
        title = group['groups']['dock_widget__DataPlotWidget']['keys']['dock_widget_title']
        out.append((title, [(p['topic'], int(p['index'])) for p in parsed]))
    return out


class QtStream:
    """Reads the QDataStream (Qt 5, big-endian) of a window's geometry and state, independently
    of shadow_twin.plots.qt_layout (formats: Qt 5.15 qwidget.cpp, qdockarealayout.cpp)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str):
        values = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return values if len(values) > 1 else values[0]

    def string(self) -> str:
        n = self.take('>I')
        self.at += n
        return self.data[self.at - n:self.at].decode('utf-16-be')

    def geometry(self) -> dict:
        assert self.take('>IHH') == (0x1D9D0CB, 3, 0)
        frame, normal = self.take('>4i'), self.take('>4i')
        screen, maximized, full_screen, screen_width = self.take('>iBBi')
        return {'frame': frame, 'normal': normal, 'screen': screen, 'maximized': maximized,
                'full_screen': full_screen, 'screen_width': screen_width, 'geometry': self.take('>4i')}

    def sequence(self):
        """A dock area's layout: ('h' or 'v', [dock name or nested sequence, ...])."""
        assert self.take('>B') == 0xfc                                 # a sequence (not tabbed)
        orientation, count = self.take('>Bi')
        items = []
        for _ in range(count):
            kind = self.take('>B')
            if kind == 0xfb:                                           # a dock widget
                name, flags = self.string(), self.take('>B')
                pos, size, _, _ = self.take('>4i')
                assert flags == 1 and size > 0, (name, flags, size)   # docked and visible
                items.append(name)
            else:
                assert kind == 0xfc
                self.take('>4i')
                items.append(self.sequence())
        return {1: 'h', 2: 'v'}[orientation], items

    def state(self) -> dict:
        assert self.take('>iiB') == (0xff, 0, 0xfd)
        areas = {}
        for _ in range(self.take('>i')):
            area, width, height = self.take('>3i')
            areas[area] = (width, height, self.sequence())
        self.take('>2i')                                               # central widget size
        corners = self.take('>4i')
        assert self.take('>Bi') == (0xfc, 1)                           # one line of tool bars
        area, count = self.take('>2i')
        toolbar = self.string()
        visible, pos, size, geom0, geom1 = self.take('>BiiII')
        assert self.at == len(self.data)
        return {'areas': areas, 'corners': corners, 'toolbar': (area, count, toolbar, visible)}


def main_window(data) -> dict:
    keys = imported(data['groups']['mainwindow'])['keys']
    return {'geometry': QtStream(keys['geometry']).geometry(), 'state': QtStream(keys['state']).state()}


def test_shipped_perspectives_are_what_the_generator_writes():
    shipped = persp.shipped_perspectives()
    assert sorted(p.name for p in CONFIG.glob('*.perspective')) == sorted(shipped)
    for name, data in shipped.items():
        assert (CONFIG / name).read_text() == persp.perspective_text(data), name


def test_perspectives_have_the_rqt_export_structure():
    data = json.loads(PLOTS.read_text())
    assert set(data) == {'keys', 'groups'} and set(data['groups']) == {'mainwindow', 'pluginmanager'}
    manager = imported(data['groups']['pluginmanager'])
    assert manager['keys']['running-plugins'] == {'rqt_plot/Plot': [1, 2, 3, 4, 5]}   # no robot monitor here
    assert set(manager['groups']) == {f'plugin__rqt_plot__Plot__{k}' for k in range(1, 6)}
    settings = manager['groups']['plugin__rqt_plot__Plot__1']['groups']['plugin']['keys']
    assert settings['autoscroll'] is True and settings['x_limits'] == [0.0, 10.0]
    assert settings['y_limits'] == pytest.approx([-0.05, 1.5708 + 0.05])          # rh_FFJ3's range + margin
    data = json.loads(MONITOR.read_text())
    manager = imported(data['groups']['pluginmanager'])
    assert manager['keys']['running-plugins'] == {'rqt_robot_monitor/RobotMonitor': [1]}
    group = manager['groups']['plugin__rqt_robot_monitor__RobotMonitor__1']['groups']
    assert group['dock_widget__Robot Monitor']['keys']['dock_widget_title'] == 'Robot Monitor: /diagnostics_agg'
    splitter = QtStream(group['plugin']['keys']['splitter'])         # what RobotMonitorWidget restores
    assert splitter.take('>iii') == (0xff, 1, 3)
    errors, warnings, devices = splitter.take('>3i')
    assert devices >= 27 * 17 and devices > errors + warnings          # every joint's row in view
    assert splitter.take('>BiBiB') == (1, 9, 1, 2, 0) and splitter.at == len(splitter.data)
    assert persp.needed_topics(data) == ['/diagnostics_agg']


def test_windows_fit_1920x1080_side_by_side_with_the_plots_in_a_grid():
    windows = {}
    for path in (PLOTS, MONITOR):
        window = main_window(json.loads(path.read_text()))
        geometry = window['geometry']
        assert geometry['frame'] == geometry['normal'] == geometry['geometry']
        x1, y1, x2, y2 = geometry['geometry']
        assert 0 <= x1 < x2 < 1920 and 0 <= y1 < y2 < 1080 - 40           # room for a panel and a title bar
        assert (geometry['screen_width'], geometry['maximized'], geometry['full_screen']) == (1920, 0, 0)
        windows[path.name] = (x1, x2)
        state = window['state']
        assert state['corners'] == (4, 4, 8, 8) and state['toolbar'] == (3, 1, 'MinimizedDockWidgetsToolbar', 0)
        (area,) = state['areas']
        assert area == 3                                                  # the bottom dock area, as rqt adds docks
        width, height, _ = state['areas'][3]
        assert width == x2 - x1 + 1 and 0 < height < y2 - y1 + 1
    assert windows[persp.PLOTS_FILE][1] < windows[persp.MONITOR_FILE][0]  # side by side, no overlap
    assert main_window(json.loads(PLOTS.read_text()))['state']['areas'][3][2] == ('h', [('v', [
        ('h', ['rqt_plot__Plot__1__DataPlotWidget', 'rqt_plot__Plot__2__DataPlotWidget']),
        ('h', ['rqt_plot__Plot__3__DataPlotWidget', 'rqt_plot__Plot__4__DataPlotWidget']),
        'rqt_plot__Plot__5__DataPlotWidget'])])
    assert main_window(json.loads(MONITOR.read_text()))['state']['areas'][3][2] == (
        'h', ['rqt_robot_monitor__RobotMonitor__1__Robot Monitor'])
    # an odd number of joints: the last one alone in its row
    layout = main_window(persp.build_plots_perspective(['rh_FFJ3', 'rh_MFJ3', 'rh_RFJ3']))['state']['areas'][3][2]
    assert layout[1][0][1][1] == ('h', ['rqt_plot__Plot__3__DataPlotWidget'])


def test_perspective_indices_name_the_right_joints():
    order = model_joint_order()
    assert order == persp.published_joints()[0]            # what mujoco_bridge publishes
    found = plots(json.loads(PLOTS.read_text()))
    for (title, topics), joint in zip(found, persp.DEFAULT_JOINTS):
        assert title.startswith(joint)
        assert [t for t, _ in topics] == ['/joint_states', '/sim/joint_states']
        assert [order[i] for _, i in topics] == [joint, joint]
    title, topics = found[-1]
    assert len(found) == len(persp.DEFAULT_JOINTS) + 1 and title.startswith('sim - real')
    assert {t for t, _ in topics} == {'/twin/joint_error'}
    assert [order[k] for _, k in topics] == list(persp.DEFAULT_JOINTS)       # error order = real = model order
    assert [k for _, k in topics] == [3, 4, 7, 20]
    assert persp.needed_topics(json.loads(PLOTS.read_text())) == [
        f'{topic}/position[{k}]' for _, fields in found for topic, k in fields]


def test_perspective_with_another_real_joint_order():
    sim_order = model_joint_order()
    real_order = ['lh_EXTRA'] + sim_order[::-1]           # the robot publishes an extra joint, reversed
    data = persp.build_plots_perspective(['rh_THJ4', 'rh_FFJ3'], real_joints=real_order, real_topic='/robot/joints')
    found = plots(data)
    (_, thj4), (_, ffj3), (_, error) = found
    assert thj4 == [('/robot/joints', real_order.index('rh_THJ4')), ('/sim/joint_states', 20)]
    assert ffj3 == [('/robot/joints', real_order.index('rh_FFJ3')), ('/sim/joint_states', 3)]
    # /twin/joint_error: the real joints the sim has, in the real order (lh_EXTRA left out)
    common = sim_order[::-1]
    assert error == [('/twin/joint_error', common.index('rh_THJ4')), ('/twin/joint_error', common.index('rh_FFJ3'))]


def test_perspective_main_writes_the_file_and_refuses_bad_joints(tmp_path, capsys):
    out = tmp_path / 'sub' / 'twin.perspective'
    assert persp_cli.main(['--joints', 'rh_MFJ3', '--out', str(out)]) == 0
    assert f'open with: shadow-twin rqt --perspective {out}' in capsys.readouterr().out
    (title, topics), _ = plots(json.loads(out.read_text()))
    assert title.startswith('rh_MFJ3') and topics == [('/joint_states', 7), ('/sim/joint_states', 7)]
    before = out.read_text()
    for args, message in [(['--joints', 'rh_FFJ3,rh_XXJ9,rh_FFJ0'], "unknown joint(s) ['rh_XXJ9', 'rh_FFJ0']"),
                          (['--joints', 'rh_FFJ3,rh_FFJ3'], "joint(s) ['rh_FFJ3'] given more than once"),
                          (['--joints', ''], 'give one or more joint names'),
                          (['--joints', 'rh_FFJ3', '--real-order', 'rh_FFJ2,rh_FFJ4'],
                           "joint(s) ['rh_FFJ3'] are not in the real joint order")]:
        capsys.readouterr()
        assert persp_cli.main([*args, '--out', str(out)]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith('shadow-twin perspective: error: ') and message in err, err
        assert out.read_text() == before                    # nothing written
    with pytest.raises(SystemExit) as info:
        persp_cli.main(['--joints', 'rh_FFJ3'])                 # --out is required
    assert info.value.code == 2
    monitor = tmp_path / 'monitor.perspective'
    assert persp_cli.main(['--monitor', '--out', str(monitor)]) == 0
    assert monitor.read_text() == MONITOR.read_text()


def test_read_perspective_names_the_problem(tmp_path):
    with pytest.raises(ConfigError, match='none.perspective does not exist'):
        persp.read_perspective(tmp_path / 'none.perspective')
    (tmp_path / 'text.perspective').write_text('not json')
    with pytest.raises(ConfigError, match='is not readable JSON'):
        persp.read_perspective(tmp_path / 'text.perspective')
    (tmp_path / 'other.perspective').write_text('{"keys": {}, "groups": {}}')
    with pytest.raises(ConfigError, match='is not an rqt perspective'):
        persp.read_perspective(tmp_path / 'other.perspective')
    assert persp.read_perspective(PLOTS) == json.loads(PLOTS.read_text())


# --------------------------------------------------------------------------- cell perspectives
CELL_PLOTS, CELL_MONITOR = CONFIG / persp.CELL_PLOTS_FILE, CONFIG / persp.CELL_MONITOR_FILE
FIELD = re.compile(r'^(?P<topic>/.+?)/(?P<field>position\[\d+\]|vector/[xyz])$')


def cell_joint_order() -> list[str]:
    """The cell's hinge/slide joints in model order (what the sim bridge publishes), read with MuJoCo."""
    import mujoco

    from shadow_twin.model.cell.assembly import CellConfig, build_cell_spec, compile_cell
    model = compile_cell(build_cell_spec(CellConfig.from_yaml(CONFIG / 'cell.yaml')))
    kinds = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    return [model.joint(j).name for j in range(model.njnt) if int(model.jnt_type[j]) in kinds and model.joint(j).name]


def all_plot_fields(data) -> list[tuple[str, list[str]]]:
    """[(dock title, [field, ...])] of every rqt_plot, by serial number."""
    manager = imported(data['groups']['pluginmanager'])
    out = []
    for serial in manager['keys']['running-plugins']['rqt_plot/Plot']:
        group = manager['groups'][f'plugin__rqt_plot__Plot__{serial}']
        topics = group['groups']['plugin']['keys']['topics']
        topics = [topics] if isinstance(topics, str) else topics
        assert all(FIELD.match(t) for t in topics), topics
        out.append((group['groups']['dock_widget__DataPlotWidget']['keys']['dock_widget_title'], topics))
    return out


def index_of(field: str) -> int:
    return int(field.rsplit('[', 1)[1].rstrip(']'))


def test_cell_perspective_plots_arm_joints_from_their_topics_and_the_base_error():
    cell = cell_joint_order()
    assert cell == persp.cell_published_joints()[0]
    ur5 = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint', 'wrist_2_joint',
           'wrist_3_joint']                                              # what mock_ur publishes
    hand = model_joint_order()                                          # what the mock hand publishes
    found = all_plot_fields(json.loads(CELL_PLOTS.read_text()))
    assert len(found) == len(persp.DEFAULT_CELL_JOINTS) + 2
    for (title, (real, sim)), joint in zip(found, persp.DEFAULT_CELL_JOINTS):
        assert title == f'{joint}: real vs sim (rad)'
        assert real.startswith('/joint_states/') and ur5[index_of(real)] == joint
        assert sim.startswith('/sim/joint_states/') and cell[index_of(sim)] == joint
    title, errors = found[-2]
    error_order = ur5 + hand                      # the monitor's message: /joint_states, then /rh/joint_states
    assert title.startswith('sim - real (rad): shoulder_pan_joint')
    assert [error_order[index_of(f)] for f in errors] == list(persp.DEFAULT_CELL_JOINTS)
    assert all(f.startswith('/twin/joint_error/position[') for f in errors)
    title, base = found[-1]
    assert title == 'base: sim - real (x, y m; yaw rad)'
    assert base == ['/twin/base_error/vector/x', '/twin/base_error/vector/y', '/twin/base_error/vector/z']
    settings = imported(json.loads(CELL_PLOTS.read_text())['groups']['pluginmanager'])['groups']
    limits = {k: g['groups']['plugin']['keys']['y_limits'] for k, g in settings.items()}
    assert limits['plugin__rqt_plot__Plot__1'] == pytest.approx([-math.pi - 0.05, math.pi + 0.05])  # +-2 pi clipped
    assert limits['plugin__rqt_plot__Plot__6'] == pytest.approx(list(persp.BASE_Y_LIMITS))
    # a hand joint comes from /rh/joint_states, after the arm's joints in the error message
    (_, (real, sim)), (_, err), _ = all_plot_fields(persp.build_cell_plots_perspective(['rh_FFJ3']))
    assert real == f'/rh/joint_states/position[{hand.index("rh_FFJ3")}]' and cell[index_of(sim)] == 'rh_FFJ3'
    assert err == [f'/twin/joint_error/position[{6 + hand.index("rh_FFJ3")}]']
    # a UR driver publishing another order
    (_, (real, _)), (_, err), _ = all_plot_fields(persp.build_cell_plots_perspective(
        ['elbow_joint'], arm_joints=['wrist_3_joint', 'elbow_joint']))
    assert (real, err) == ('/joint_states/position[1]', ['/twin/joint_error/position[1]'])
    with pytest.raises(ConfigError, match=r"joint\(s\) \['shoulder_pan_joint'\] are not in the real joint order"):
        persp.build_cell_plots_perspective(['shoulder_pan_joint'], arm_joints=['elbow_joint'])
    with pytest.raises(ConfigError, match=r"unknown joint\(s\) \['rh_XXJ1'\]"):
        persp.build_cell_plots_perspective(['rh_XXJ1'])


def test_cell_windows_fit_the_screen_with_the_error_plots_side_by_side():
    for path in (CELL_PLOTS, CELL_MONITOR):
        geometry = main_window(json.loads(path.read_text()))['geometry']
        reference = main_window(json.loads((PLOTS if path == CELL_PLOTS else MONITOR).read_text()))['geometry']
        assert geometry == reference                                     # the hand's windows' places
    assert main_window(json.loads(CELL_PLOTS.read_text()))['state']['areas'][3][2] == ('h', [('v', [
        ('h', ['rqt_plot__Plot__1__DataPlotWidget', 'rqt_plot__Plot__2__DataPlotWidget']),
        ('h', ['rqt_plot__Plot__3__DataPlotWidget', 'rqt_plot__Plot__4__DataPlotWidget']),
        ('h', ['rqt_plot__Plot__5__DataPlotWidget', 'rqt_plot__Plot__6__DataPlotWidget'])])])
    data = json.loads(CELL_MONITOR.read_text())
    group = imported(data['groups']['pluginmanager'])['groups']['plugin__rqt_robot_monitor__RobotMonitor__1']
    splitter = QtStream(group['groups']['plugin']['keys']['splitter'])
    assert splitter.take('>iii') == (0xff, 1, 3)
    panes = splitter.take('>3i')
    assert panes[2] >= (30 + 1 + 3) * 17 and sum(panes) == sum(persp.MONITOR_PANES)   # 30 joints, base, 3 more
    assert persp.needed_topics(data) == ['/diagnostics_agg']


def test_perspective_main_writes_the_cell_files(tmp_path, capsys):
    out = tmp_path / 'cell.perspective'
    assert persp_cli.main(['--cell', '--out', str(out)]) == 0
    assert out.read_text() == CELL_PLOTS.read_text() and 'base pose error plot' in capsys.readouterr().out
    assert persp_cli.main(['--cell', '--monitor', '--out', str(out)]) == 0
    assert out.read_text() == CELL_MONITOR.read_text()
    for args, message in [(['--cell', '--real-order', 'a,b'], '--real-order do(es) not apply to --cell'),
                          (['--arm-order', 'elbow_joint'], '--arm-order need(s) --cell'),
                          (['--cell', '--joints', 'rh_XXJ9'], "unknown joint(s) ['rh_XXJ9']")]:
        capsys.readouterr()
        assert persp_cli.main([*args, '--out', str(tmp_path / 'x.perspective')]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith('shadow-twin perspective: error: ') and message in err, err
    assert not (tmp_path / 'x.perspective').exists()
