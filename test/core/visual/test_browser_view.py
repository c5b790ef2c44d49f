"""The browser view's scene logic, without a browser (shadow_twin/visual/browser*.py): the TF tree mirrored as
nested scene nodes (a frame waits for its chain, moves under a new parent with what hangs on it, a loop is
never drawn, an unchanged pose sends nothing), markers under their frames (recoloured in place, replaced,
deleted, waiting for their frame, a mesh file that cannot be read reported once), the panel's plots and
diagnostics, and the same calls on a real viser server (its API as this version has it)."""

from __future__ import annotations

import socket

import mujoco
import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.model.mjcf import builtin_model_path
from shadow_twin.visual.browser import BrowserView, check_port_free
from shadow_twin.visual.browser_frames import FrameTree, Transform
from shadow_twin.visual.browser_markers import MarkerClear, MarkerDelete, MarkerLayer, MarkerPart
from shadow_twin.visual.browser_panel import (DiagnosticsTable, ErrorHistory, Status, plot_groups,
                                              symmetric_limit)
from shadow_twin.visual.frames import BodyTree
from shadow_twin.visual.geometry import geom_parts

IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


class FakeHandle:
    def __init__(self, scene, kind, name, **props):
        self.scene, self.kind, self.name = scene, kind, name
        self.position = np.asarray(props.pop('position', (0.0, 0.0, 0.0)), dtype=float)
        self.wxyz = np.asarray(props.pop('wxyz', (1.0, 0.0, 0.0, 0.0)), dtype=float)
        self.props = props
        self.removed = False

    def __setattr__(self, key, value):
        if key in ('position', 'wxyz', 'color', 'opacity', 'show_axes') and 'props' in self.__dict__:
            self.scene.sets.append((self.name, key))
        object.__setattr__(self, key, value)

    def remove(self):
        assert not self.removed, f'{self.name} removed twice'
        for handle in self.scene.live():        # viser removes the node's subtree with it
            if handle.name == self.name or handle.name.startswith(self.name + '/'):
                handle.removed = True


class FakeScene:
    """The part of ``viser.SceneApi`` the view uses, recording what is added, set and removed."""

    def __init__(self):
        self.handles: list[FakeHandle] = []
        self.sets: list[tuple[str, str]] = []

    def live(self):
        return [h for h in self.handles if not h.removed]

    def node(self, name):
        found = [h for h in self.live() if h.name == name]
        assert len(found) <= 1
        return found[0] if found else None

    def _add(self, kind, name, **props):
        handle = FakeHandle(self, kind, name, **props)
        self.handles.append(handle)
        return handle

    def __getattr__(self, method):
        if method.startswith('add_'):
            return lambda name, *args, **props: self._add(method[4:], name, args=args, **props)
        raise AttributeError(method)


def t(parent, child, xyz=(0.0, 0.0, 0.0), wxyz=IDENTITY):
    return Transform(parent, child, np.array(xyz, dtype=float), np.array(wxyz, dtype=float))


def marker(ns='sim', k=0, frame='sim/palm', shape='box', rgba=(0.5, 0.5, 0.5, 1.0), xyz=(0.0, 0.0, 0.0), mesh=None):
    return MarkerPart(ns, k, frame, shape, np.array([0.1, 0.2, 0.3]), np.array(xyz, dtype=float), IDENTITY,
                      np.array(rgba, dtype=float), mesh)


@pytest.fixture()
def scene():
    fake = FakeScene()
    tree = FrameTree(fake, 'world')
    layer = MarkerLayer(fake, tree)
    tree.on_remade = layer.frames_remade
    errors = []
    layer.on_error = errors.append
    return fake, tree, layer, errors


def test_the_tf_tree_becomes_nested_nodes_posed_relative_to_their_parents(scene):
    fake, tree, _, _ = scene
    tree.update([t('world', 'sim/world'), t('sim/world', 'sim/arm', (0.1, 0, 0)),
                 t('sim/arm', 'sim/palm', (0, 0.2, 0))])
    palm = fake.node('/world/sim:world/sim:arm/sim:palm')
    assert palm is not None and palm.position.tolist() == [0, 0.2, 0]
    assert tree.path('sim/palm') == palm.name and tree.path('world') == '/world'
    position, _ = tree.world_pose('sim/palm')
    assert position.tolist() == pytest.approx([0.1, 0.2, 0.0])


def test_world_poses_compose_back_to_the_models_body_poses():
    model = mujoco.MjModel.from_xml_path(str(builtin_model_path()))
    data = mujoco.MjData(model)
    data.qpos[:] = np.linspace(0.1, 0.5, model.nq)
    mujoco.mj_kinematics(model, data)
    body_tree = BodyTree(model, 'sim/')
    poses = body_tree.relative(data.xpos, data.xquat)
    tree = FrameTree(FakeScene(), 'world')
    tree.update([t('world', 'sim/world')] + [Transform(p, c, poses.pos[k], poses.quat[k])
                                            for k, (p, c) in enumerate(zip(poses.parents, poses.children))])
    for body in range(1, model.nbody):
        position, rotation = tree.world_pose(body_tree.frame(body))
        assert position == pytest.approx(data.xpos[body], abs=1e-9)
        assert rotation.as_quat(scalar_first=True) @ data.xquat[body] == pytest.approx(1.0, abs=1e-9) or \
            rotation.as_quat(scalar_first=True) @ data.xquat[body] == pytest.approx(-1.0, abs=1e-9)


def test_a_frame_and_its_markers_wait_until_its_chain_reaches_the_fixed_frame(scene):
    fake, tree, layer, _ = scene
    tree.update([t('sim/world', 'sim/arm'), t('sim/arm', 'sim/palm')])
    layer.set([marker()])
    assert tree.path('sim/palm') is None and layer.handles == {} and len(layer.markers) == 1
    tree.update([t('world', 'sim/world')])                   # the static transform comes last
    assert tree.path('sim/palm') == '/world/sim:world/sim:arm/sim:palm'
    assert fake.node('/world/sim:world/sim:arm/sim:palm/sim-0').kind == 'box'


def test_a_frame_moved_under_another_parent_is_made_again_with_its_markers(scene):
    fake, tree, layer, _ = scene
    tree.update([t('world', 'a'), t('world', 'b'), t('a', 'arm'), t('arm', 'palm')])
    layer.set([marker(frame='palm')])
    tree.update([t('b', 'arm', (1, 0, 0))])
    assert fake.node('/world/a/arm') is None and fake.node('/world/a/arm/palm/sim-0') is None
    assert fake.node('/world/b/arm').position.tolist() == [1, 0, 0]
    assert fake.node('/world/b/arm/palm/sim-0') is layer.handles[('sim', 0)]


def test_a_loop_of_frames_is_never_drawn(scene):
    fake, tree, _, _ = scene
    tree.update([t('x', 'y'), t('y', 'x'), t('world', 'z'), t('z', 'z')])
    assert tree.path('x') is None and tree.path('y') is None and tree.path('z') == '/world/z'


def test_an_unchanged_pose_sends_nothing_and_a_moved_one_only_its_node(scene):
    fake, tree, _, _ = scene
    tree.update([t('world', 'arm'), t('arm', 'palm', (0, 0, 0.1))])
    fake.sets.clear()
    tree.update([t('world', 'arm', (1e-12, 0, 0)), t('arm', 'palm', (0, 0, 0.2))])
    assert fake.sets == [('/world/arm/palm', 'position')]


def test_markers_are_recoloured_in_place_replaced_deleted_and_cleared(scene):
    fake, tree, layer, _ = scene
    tree.update([t('world', 'sim/palm'), t('world', 'real/palm')])
    layer.apply([marker(k=0), marker(k=1), marker('real', 0, 'real/palm', rgba=(0, 1, 0, 0.4))])
    ghost = layer.handles[('real', 0)]
    assert ghost.props['color'] == (0, 255, 0) and ghost.props['opacity'] == pytest.approx(0.4)
    fake.sets.clear()
    layer.apply([marker('real', 0, 'real/palm', rgba=(1, 0, 0, 0.4))])     # only its colour: the same node
    assert layer.handles[('real', 0)] is ghost and ghost.color == (255, 0, 0)
    assert ('/world/real:palm/real-0', 'color') in fake.sets
    layer.apply([marker(k=1, xyz=(0, 0, 1))])                                # moved: a new node
    assert layer.handles[('sim', 1)].position.tolist() == [0, 0, 1] and len(fake.live()) == 6
    layer.apply([MarkerDelete('sim', 0)])
    assert fake.node('/world/sim:palm/sim-0') is None
    layer.apply([MarkerClear('real'), marker('real', 5, 'real/palm')])       # DELETEALL of a namespace, then an ADD
    assert sorted(layer.handles) == [('real', 5), ('sim', 1)]
    layer.apply([MarkerClear('')])
    assert layer.handles == {} and layer.markers == {}


def test_an_array_that_clears_its_namespace_and_adds_it_again_keeps_the_nodes_in_place(scene):
    fake, tree, layer, _ = scene
    tree.update([t('world', 'real/palm')])
    array = [MarkerClear('real'), *(marker('real', k, 'real/palm', rgba=(0, 1, 0, 0.4)) for k in range(3))]
    layer.apply(array)
    nodes, added = dict(layer.handles), len(fake.handles)
    layer.apply(array)                                                       # the same array again: nothing sent
    fake.sets.clear()
    layer.apply([MarkerClear('real'), marker('real', 0, 'real/palm', rgba=(1, 0, 0, 0.4)),
                 marker('real', 1, 'real/palm', rgba=(0, 1, 0, 0.4))])        # one recoloured, one left out
    assert len(fake.handles) == added and layer.handles == {k: nodes[k] for k in (('real', 0), ('real', 1))}
    assert fake.sets == [('/world/real:palm/real-0', 'color')] and nodes[('real', 2)].removed


def test_an_arrow_moves_on_its_node(scene):
    fake, tree, layer, _ = scene
    tree.update([t('world', 'sim/tip')])
    arrow = MarkerPart('contacts', 0, 'sim/tip', 'arrow', np.array([0.003, 0.007, 0.01]), np.zeros(3), IDENTITY,
                       np.array([0, 0, 1, 1.0]), points=np.array([[0, 0, 0], [0, 0, 0.1]]))
    layer.set([arrow])
    handle = layer.handles[('contacts', 0)]
    assert handle.kind == 'arrows' and handle.props['args'][0].shape == (1, 2, 3)
    assert handle.props['shaft_radius'] == pytest.approx(0.0015) and handle.props['head_length'] == 0.01
    layer.set([MarkerPart(**{**arrow.__dict__, 'points': np.array([[0, 0, 0], [0.05, 0, 0]]),
                             'rgba': np.array([1, 0, 1, 1.0])})])
    assert layer.handles[('contacts', 0)] is handle and handle.points[0, 1] == pytest.approx([0.05, 0, 0])
    assert handle.colors.tolist() == [[255, 0, 255]]


def test_shapes_and_meshes(scene, tmp_path):
    fake, tree, layer, errors = scene
    tree.update([t('world', 'sim/palm')])
    model = mujoco.MjModel.from_xml_string('<mujoco><asset><mesh name="w" vertex="0 0 0 1 0 0 0 1 0 0 0 1"/>'
                                           '</asset><worldbody><geom type="mesh" mesh="w"/></worldbody></mujoco>')
    stl = geom_parts(model, tmp_path)[0].mesh_file
    layer.set([marker(k=0, shape='sphere'), marker(k=1, shape='cylinder'), marker(k=2, shape='mesh', mesh=stl),
               marker(k=3, shape='mesh', mesh=str(tmp_path / 'gone.stl')),
               marker(k=4, shape='mesh', mesh=str(tmp_path / 'gone.stl'))])
    kinds = {k: h.kind for k, h in layer.handles.items()}
    assert kinds == {('sim', 0): 'icosphere', ('sim', 1): 'cylinder', ('sim', 2): 'mesh_simple'}
    assert layer.handles[('sim', 0)].props['scale'] == (0.1, 0.2, 0.3)
    vertices, faces = layer.handles[('sim', 2)].props['args']
    assert vertices.shape == (12, 3) and faces.shape == (4, 3)                  # an STL shares no vertices
    assert len(errors) == 1 and 'gone.stl' in errors[0]                      # reported once per file


def test_plot_groups_follow_the_joint_names():
    names = ['rh_WRJ2', 'rh_WRJ1', *[f'rh_FFJ{k}' for k in (4, 3, 2, 1)], *[f'rh_LFJ{k}' for k in (5, 4, 3, 2, 1)],
             'shoulder_pan_joint', 'elbow_joint', 'base']
    groups = plot_groups(names, per_plot=4)
    assert groups == [['rh_WRJ2', 'rh_WRJ1'], ['rh_FFJ4', 'rh_FFJ3', 'rh_FFJ2', 'rh_FFJ1'],
                      ['rh_LFJ5', 'rh_LFJ4', 'rh_LFJ3', 'rh_LFJ2'], ['rh_LFJ1'],
                      ['shoulder_pan_joint', 'elbow_joint', 'base']]
    with pytest.raises(ValueError):
        plot_groups(names, 0)


def test_the_error_history_keeps_its_window_at_its_resolution():
    history = ErrorHistory(window=1.0)
    assert history.add(10.0, ['a'], [0.1])
    assert not history.add(10.01, ['a'], [0.2])                              # closer than the resolution
    for k in range(1, 40):
        history.add(10.0 + 0.05 * k, ['a', 'b'] if k > 20 else ['a'], [0.1, 0.3])
    t, a, b = history.series(['a', 'b'])
    assert t[-1] == 0.0 and t[0] >= -1.0 - 1e-9 and len(t) == 21
    assert np.isnan(b[0]) and b[-1] == 0.3
    history.add(3.0, ['a'], [1.0])                                           # a replay restarted
    assert list(history.times) == [3.0] and history.names == ['a']


def test_the_plot_range_is_a_round_symmetric_limit():
    assert symmetric_limit(np.array([0.0, 0.0])) == 1e-3
    assert symmetric_limit(np.array([-0.013, 0.004, np.nan])) == pytest.approx(0.02)
    assert symmetric_limit(np.array([0.5])) == pytest.approx(0.5)
    assert symmetric_limit(np.array([0.51])) == pytest.approx(1.0)


class FakeGui:
    def add_folder(self, title):
        import contextlib
        return contextlib.nullcontext()

    def add_html(self, content):
        return type('Html', (), {'content': content})()


def test_diagnostics_show_the_newest_state_and_stale_ones():
    table = DiagnosticsTable(FakeGui(), stale_after=5.0)
    table.update([Status('bridge', 0, 'ok'), Status('monitor <x>', 2, 'rh_FFJ1 off')], now=100.0)
    table.update([Status('bridge', 1, 'slow')], now=103.0)
    text = table.render(104.0)
    assert 'WARN' in text and 'slow' in text and 'ERROR' in text and '&lt;x&gt;' in text
    assert table.render(106.0).count('STALE') == 1                           # the monitor's, silent for 6 s
    table.refresh(106.0)
    assert table.view.content == table.render(106.0)


def test_the_view_on_a_real_viser_server_draws_plots_and_answers_buttons():
    asked = []
    view = BrowserView(port=0, on_pause=lambda paused: asked.append(('pause', paused)),
                       on_reset=lambda: asked.append(('reset',)))
    try:
        view.set_transforms([t('world', 'sim/world'), t('sim/world', 'sim/palm', (0, 0, 0.3))])
        view.apply_markers([marker(shape=s, k=k) for k, s in enumerate(('box', 'sphere', 'cylinder'))]
                           + [MarkerPart('legend', 0, 'world', 'text', np.array([0, 0, 0.05]), np.zeros(3),
                                         IDENTITY, np.ones(4), text='20 mm'),
                              MarkerPart('legend', 1, 'world', 'box', np.full(3, 0.03), np.array([0, -0.6, 0.8]),
                                         IDENTITY, np.ones(4))])
        assert {type(h).__name__ for h in view.markers.handles.values()} == \
            {'BoxHandle', 'IcosphereHandle', 'CylinderHandle', 'LabelHandle'}
        centre, radius = view.robot_sphere()                  # the robot's parts: the legend is no robot's
        assert centre == pytest.approx([0, 0, 0.3], abs=0.01) and 0.1 < radius < 0.3
        for k in range(30):
            view.add_joint_errors(1.0 + 0.1 * k, ['rh_FFJ1', 'rh_FFJ2'], [0.01 * k, -0.01])
        view.set_statuses([Status('bridge', 0, 'ok')], 0.0)
        view.refresh(1.0)
        (names, plot), = view.plots.plots
        assert names == ['rh_FFJ1', 'rh_FFJ2'] and plot.data[1][-1] == pytest.approx(0.29)
        assert view.framed and 'bridge' in view.diagnostics.view.content
        view.controls.press('pause')
        assert asked == [('pause', True)] and view.controls.buttons['pause'].disabled
        view.answered('pause', True, 'paused')
        assert view.controls.buttons['pause'].label == 'Resume' and not view.controls.buttons['pause'].disabled
        view.controls.press('pause')
        view.answered('pause', False, 'no bridge')
        assert asked[-1] == ('pause', False) and view.controls.buttons['pause'].label == 'Resume'
        assert 'no bridge' in view.controls.status.content
    finally:
        view.stop()


def test_a_port_in_use_is_refused_in_one_line():
    with socket.socket() as busy:
        busy.bind(('127.0.0.1', 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ConfigError, match=f'127.0.0.1:{port}'):
            check_port_free('127.0.0.1', port)
        with pytest.raises(ConfigError):
            BrowserView(port=port)
