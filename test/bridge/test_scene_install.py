"""A calibrated scene installed in the running bridge (issue 37: contact calibration "installs and
reloads"): ``shadow-twin calibrate --contacts --install``'s path (``calibrate_scene.install_scene``, the
calibration node's ``BridgeLink``) sets a hand bridge's ``scene_file`` and reloads it: the objects are the
new file's and keep their poses by name. A scene file that does not load leaves the bridge as it was,
``scene_file`` set back, and the node runs on."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

sim_msg = pytest.importorskip('simulation_interfaces.msg')
sim_srv = pytest.importorskip('simulation_interfaces.srv')

from shadow_twin.calibration.contacts.fit import write_calibrated_scene  # noqa: E402
from shadow_twin.cli.calibrate_scene import install_scene  # noqa: E402
from shadow_twin.model.calibratable import ParameterTarget  # noqa: E402
from support import bridge as bridge_support  # noqa: E402
from support.bridge import namespaced_bridge  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SCENE = REPO / 'config' / 'scene_hand.yaml'
NS = '/sci'
NODE = f'{NS}/mujoco_bridge'
OK = sim_msg.Result.RESULT_OK


@pytest.fixture(scope='module')
def bridge(ros, tmp_path_factory):
    """A paused hand bridge with the hand's scene, in namespace /sci."""
    from sensor_msgs.msg import JointState
    states = ros[1].record(JointState, f'{NS}/joint_states', depth=100)
    proc = namespaced_bridge(ros, tmp_path_factory.mktemp('scene_install'), NS, lambda: states.count() > 0,
                             scene_file=str(SCENE))
    state = sim_msg.SimulationState(state=sim_msg.SimulationState.STATE_PAUSED)
    assert call(ros, sim_srv.SetSimulationState, 'set_simulation_state', state=state).result.result == OK
    yield proc
    assert proc.alive(), proc.output()
    assert proc.stop() == 0, proc.output()


def call(ros, srv, service, **fields):
    return bridge_support.call(ros, srv, f'{NODE}/{service}', **fields)


def entities(ros) -> list[str]:
    return list(call(ros, sim_srv.GetEntities, 'get_entities').entities)


def can_position(ros) -> tuple[float, float, float]:
    answer = call(ros, sim_srv.GetEntityState, 'get_entity_state', entity='can')
    assert answer.result.result == OK, answer.result.error_message
    p = answer.state.pose.position
    return p.x, p.y, p.z


def test_a_calibrated_scene_is_installed_and_the_objects_keep_their_poses(ros, bridge, tmp_path):
    calibrated = write_calibrated_scene(SCENE, {ParameterTarget('geom', 'can', 'friction'): 0.55,
                                                ParameterTarget('body', 'can', 'mass'): 0.21}, tmp_path / 'scene.yaml')
    data = yaml.safe_load(calibrated.read_text())          # one object more: the new file's objects are seen
    data['scene']['objects'].append({'name': 'marker', 'shape': 'sphere', 'size': [0.01], 'mass': 0.01,
                                     'xyz': [0.5, 0.5, 0.05], 'free': False})
    calibrated.write_text(yaml.safe_dump(data))
    before = can_position(ros)
    installed, what = install_scene(calibrated, NODE)
    assert installed, (what, bridge.output()[-2000:])
    assert f'scene {calibrated}' in what
    assert entities(ros)[-1] == 'marker' and 'can' in entities(ros)
    assert can_position(ros) == pytest.approx(before, abs=1e-9)          # kept by name across the reload
    assert f'scene {calibrated}: {len(data["scene"]["objects"])} objects' in bridge.output()   # the reload's log


def test_a_scene_that_does_not_load_leaves_the_bridge_as_it_was(ros, bridge, tmp_path):
    names = entities(ros)
    broken = tmp_path / 'broken.yaml'
    broken.write_text('scene:\n  objects:\n    - {name: can, shape: teapot}\n')
    installed, what = install_scene(broken, NODE)
    assert not installed and 'bridge reload failed' in what and 'keeps its previous scene_file' in what, what
    assert entities(ros) == names
    assert f"scene_file set back from '{broken}'" in bridge.output()
    assert bridge.alive()
