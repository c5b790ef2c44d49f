"""The 3D view's TF and markers read as RViz reads them (issue 38): the sim bridge running Shadow's own hand model
(its meshes), the twin monitor drawing the real hand through the same model, and this test as the real hand: it
sends each sim joint state back as the robot's, one joint turned by a known angle. Checked: every marker's frame
resolves to ``world`` through ``/tf`` and ``/tf_static`` (each frame one parent), the mesh markers' files are
there and load, the real fingertip stands from the sim's where the model puts it, and the ghost's colours are
the error scale's colours of each link's error computed here from the model, and go green when the real hand
comes back onto the sim."""

from __future__ import annotations

import threading
from pathlib import Path

import mujoco
import numpy as np
import pytest
import trimesh

from shadow_twin.model.mjcf import TwinModel
from shadow_twin.visual.colours import ErrorScale
from shadow_twin.visual.configuration import RobotConfiguration, link_errors

pytestmark = [pytest.mark.ros]

#: Shadow's hand with its meshes, in ../shared (test/conftest.py's SHADOW_MODEL: that module is not importable by
#: name from test/ros once test/launch's conftest has been collected).
SHADOW_MODEL = (Path(__file__).resolve().parents[3] / 'shared' / 'reference' / 'sr_description_mujoco_models'
                / 'sr_hand_e_plus_environment.xml')

REAL_TOPIC = '/view_test/real_joint_states'
TURNED, ANGLE = 'rh_FFJ3', 0.5          # the joint the real hand holds off the sim's, rad
START_TIMEOUT = 90.0
#: Colour channels compared to this (the sim's hand settles slowly under its controller meanwhile).
COLOUR_TOLERANCE = 0.06


@pytest.fixture(scope='module')
def model_path() -> Path:
    if not SHADOW_MODEL.is_file():
        pytest.skip(f'{SHADOW_MODEL} is absent: Shadow\'s hand model with its meshes')
    return SHADOW_MODEL


class Mirror:
    """The real hand: each sim joint state sent back on :data:`REAL_TOPIC`, same stamp, ``offset`` added."""

    def __init__(self, client) -> None:
        from sensor_msgs.msg import JointState
        self.offset = {TURNED: ANGLE}
        self.last = None
        self.lock = threading.Lock()
        self.pub = client.node.create_publisher(JointState, REAL_TOPIC, 10)
        client.node.create_subscription(JointState, '/sim/joint_states', self._on_sim, 10)

    def _on_sim(self, msg) -> None:
        with self.lock:
            offset = dict(self.offset)
        msg.position = [q + offset.get(n, 0.0) for n, q in zip(msg.name, msg.position)]
        self.last = msg
        self.pub.publish(msg)


@pytest.fixture(scope='module')
def cell(ros, model_path, tmp_path_factory):
    from tf2_msgs.msg import TFMessage
    from visualization_msgs.msg import MarkerArray
    from shadow_twin.ros.visual_msgs import LATCHED_QOS
    helpers, client = ros
    folder = tmp_path_factory.mktemp('view')
    mirror = Mirror(client)
    latched: dict[str, list] = {'/tf_static': [], '/sim/markers': [], '/real/markers': []}
    for topic, kind in (('/tf_static', TFMessage), ('/sim/markers', MarkerArray), ('/real/markers', MarkerArray)):
        client.node.create_subscription(kind, topic, latched[topic].append, LATCHED_QOS)
    tf = client.record(TFMessage, '/tf', depth=1000)
    procs = [helpers.NodeProcess('mujoco_bridge.main', [
                 '--params-file', 'config/mujoco_bridge.yaml', '-p', f'model_path:={model_path}',
                 '-p', f'mesh_dir:={folder / "meshes"}'], folder / 'bridge.log'),
             helpers.NodeProcess('shadow_twin.ros.monitor.node', [
                 '--params-file', 'config/twin_monitor.yaml', '-p', f'real_joint_states_topics:=[{REAL_TOPIC}]',
                 '-p', f'view.model_path:={model_path}', '-p', f'view.mesh_dir:={folder / "meshes"}'],
                 folder / 'monitor.log')]
    kinds = {'/tf_static': TFMessage, '/sim/markers': MarkerArray, '/real/markers': MarkerArray}

    def missing() -> list[str]:
        # each node's static root by name: the bridge may send its statics twice (one CI run counted two messages,
        # both the bridge's, and the monitor's real/world had not come)
        statics = {t.child_frame_id for m in latched['/tf_static'] for t in m.transforms}
        return ([t for t in ('/sim/markers', '/real/markers') if not latched[t]]
                + [f'/tf_static ({root})' for root in ('sim/world', 'real/world') if root not in statics]
                + (['/tf'] if tf.count() <= 50 else []))
    try:
        for attempt in range(2):
            ready = helpers.wait_until(lambda: not missing() or not all(p.alive() for p in procs), START_TIMEOUT / 2)
            if ready:
                break
            for topic in latched:        # a viewer added later gets the latched messages: subscribe again
                client.node.create_subscription(kinds[topic], topic, latched[topic].append, LATCHED_QOS)
        assert not missing() and all(p.alive() for p in procs), f'missing: {missing()}\n' + '\n'.join(
            p.output()[-2000:] for p in procs)
        yield helpers, mirror, latched, tf, procs
    finally:
        for p in procs:
            assert p.stop() is not None


def parents_of(tf_messages) -> dict[str, str]:
    """{child: parent} of every transform seen; a frame given two parents fails the test."""
    out: dict[str, str] = {}
    for msg in tf_messages:
        for t in msg.transforms:
            assert out.setdefault(t.child_frame_id, t.header.frame_id) == t.header.frame_id, t.child_frame_id
    return out


def world_pose(frame: str, latest: dict) -> tuple[np.ndarray, np.ndarray]:
    """(position (3,), rotation matrix (3, 3)) of ``frame`` in ``world``, composing the latest transforms."""
    pos, rot = np.zeros(3), np.eye(3)
    while frame != 'world':
        t = latest[frame]
        q = t.transform.rotation
        mat = np.empty(9)
        mujoco.mju_quat2Mat(mat, np.array([q.w, q.x, q.y, q.z]))
        tr = t.transform.translation
        pos = mat.reshape(3, 3) @ pos + np.array([tr.x, tr.y, tr.z])
        rot = mat.reshape(3, 3) @ rot
        frame = t.header.frame_id
    return pos, rot


def expected_errors(model_path: Path, state, offset: dict) -> tuple[mujoco.MjModel, np.ndarray, float]:
    """The model, each body's sim-real distance (nbody,) m, and how far the first finger's distal frame stands
    from the sim's (m), for the sim at joint state ``state`` and the real hand at ``state`` plus ``offset``."""
    model = TwinModel(model_path).model
    configuration = RobotConfiguration(model)
    sim, real = mujoco.MjData(model), mujoco.MjData(model)
    positions = dict(zip(state.name, state.position))
    configuration.apply(sim, positions)
    configuration.apply(real, {n: q + offset.get(n, 0.0) for n, q in positions.items()})
    tip = model.body('rh_ffdistal').id
    return model, np.concatenate([[0.0], link_errors(sim, real)]), float(np.linalg.norm(sim.xpos[tip] - real.xpos[tip]))


def ghost_colours(markers) -> dict[str, list[np.ndarray]]:
    out: dict[str, list] = {}
    for m in markers.markers:
        if m.ns == 'real' and m.action == m.ADD:
            out.setdefault(m.header.frame_id, []).append(np.array([m.color.r, m.color.g, m.color.b, m.color.a]))
    return out


def test_every_marker_frame_resolves_to_the_world_and_the_meshes_load(cell):
    _, _, latched, tf, _ = cell
    parents = parents_of([*latched['/tf_static'], *(m for _, m in tf.snapshot())])
    frames = {m.header.frame_id for array in (latched['/sim/markers'][-1], latched['/real/markers'][-1])
              for m in array.markers if m.action == m.ADD}
    assert any(f.startswith('sim/') for f in frames) and any(f.startswith('real/') for f in frames)
    for frame in frames:
        seen = [frame]
        while seen[-1] != 'world':
            assert seen[-1] in parents, f'{frame}: {seen[-1]} has no parent on /tf or /tf_static (chain {seen})'
            seen.append(parents[seen[-1]])
            assert len(seen) < 60, f'{frame}: no end to its chain {seen[:8]}...'
    meshes = [m for m in latched['/sim/markers'][-1].markers if m.type == m.MESH_RESOURCE]
    assert len(meshes) >= 20                        # Shadow's hand is drawn from its meshes
    for marker in meshes:
        assert marker.mesh_resource.startswith('file://')
        mesh = trimesh.load(marker.mesh_resource[len('file://'):])
        assert len(mesh.faces) > 0, marker.mesh_resource


def test_the_ghost_parts_from_the_sim_where_the_model_says_and_its_colours_follow(cell, model_path):
    helpers, mirror, latched, tf, procs = cell
    scale = ErrorScale()                 # the monitor's defaults: view.error_scale 0.02 m, view.alpha 0.4
    assert helpers.wait_until(lambda: mirror.last is not None, 10.0)
    model, errors, tip_apart = expected_errors(model_path, mirror.last, {TURNED: ANGLE})
    turned = [model.body(b).name for b in range(1, model.nbody) if errors[b] > scale.full_scale]
    still = [model.body(b).name for b in range(1, model.nbody) if errors[b] < 1e-6 and model.body(b).name]
    assert 'rh_ffdistal' in turned and 'rh_mfdistal' in still and 'rh_palm' in still

    def colours_match(markers, errors) -> bool:
        found = ghost_colours(markers)
        return all(np.abs(colour - scale.rgba(np.array([errors[model.body(frame[len('real/'):]).id]]))[0]).max()
                   < COLOUR_TOLERANCE for frame, colours in found.items() for colour in colours)
    assert helpers.wait_until(lambda: colours_match(latched['/real/markers'][-1], errors), 20.0), \
        procs[1].output()[-2000:]
    red = ghost_colours(latched['/real/markers'][-1])['real/rh_ffdistal'][0]
    assert red[0] > 0.8 and red[1] < 0.2 and red[3] == pytest.approx(scale.alpha)

    # the fingertip's frames on /tf: the real one stands from the sim's by the distance the model gives
    latest = {}
    for msg in [*latched['/tf_static'], *(m for _, m in tf.snapshot())]:
        for t in msg.transforms:
            latest[t.child_frame_id] = t
    sim_tip, real_tip = (world_pose(f'{side}/rh_ffdistal', latest)[0] for side in ('sim', 'real'))
    assert np.linalg.norm(real_tip - sim_tip) == pytest.approx(tip_apart, abs=0.002) and tip_apart > 0.02

    with mirror.lock:
        mirror.offset = {}                          # the real hand back on the sim's: every link green
    zero = np.zeros(model.nbody)
    assert helpers.wait_until(lambda: colours_match(latched['/real/markers'][-1], zero), 20.0)
    assert all(p.alive() for p in procs)
