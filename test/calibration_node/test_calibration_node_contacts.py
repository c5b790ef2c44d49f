"""The contact protocol in the calibration node (``protocol:=<contact protocol YAML>``), offline: real processes
(the node, ``shadow-twin calibrate-live``) on a private ROS domain. The bags of a slipperier can (friction 0.5,
the scene's 1.0; the sim's own runs, made with the shortened protocol of ``test/cli/test_calibrate_contacts.py``)
are fitted through the node's service: the run ends done, its plan names the runs (the hold-out held out), the
can's friction falls towards the bags', the calibrated scene, report and figure are in the run directory, the
user's scene file is untouched, and with no bridge answering nothing is installed (said so). A protocol run
without its bag, and a name the space lacks, are refused before a run directory is made.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.ros]
pytest.importorskip('rosbags')

from support.contact_runs import SCENE_FILE, short_protocol, slippery_bags  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NODE_PARAMS = REPO / 'config' / 'calibration_node.yaml'
START_TIMEOUT = 120.0


@pytest.fixture(scope='module')
def protocol_file(tmp_path_factory) -> Path:
    """The shipped protocol, shortened (support.contact_runs.short_protocol)."""
    return short_protocol(tmp_path_factory.mktemp('protocol') / 'protocol.yaml')


@pytest.fixture(scope='module')
def bags(protocol_file, tmp_path_factory) -> dict[str, Path]:
    """{run: bag} of a can with friction 0.5."""
    return slippery_bags(protocol_file, tmp_path_factory.mktemp('bags'))


def start_node(helpers, folder: Path, name: str, *params: str):
    args = ['-r', f'__node:={name}', '--params-file', str(NODE_PARAMS), '-p', f'output_dir:={folder / "out"}',
            '-p', 'bridge_timeout:=1.0']
    for p in params:
        args += ['-p', p]
    node = helpers.NodeProcess('calibration_node.node', args, folder / f'{name}.log')
    assert helpers.wait_until(lambda: 'ready: ~/calibrate' in node.output() or not node.alive(), START_TIMEOUT), \
        node.output()[-3000:]
    return node


def calibrate_live(helpers, name: str) -> subprocess.CompletedProcess:
    return subprocess.run([helpers.PYTHON, '-m', 'shadow_twin.cli.main', 'calibrate-live', '--node', name,
                           '--service-timeout', str(START_TIMEOUT), '--timeout', '200'],
                          cwd=REPO, capture_output=True, text=True, timeout=260)


def test_the_node_fits_the_contact_protocols_bags_and_writes_the_scene(ros, protocol_file, bags, tmp_path):
    helpers, _ = ros
    digest = hashlib.sha256(SCENE_FILE.read_bytes()).hexdigest()
    node = start_node(helpers, tmp_path, 'contact_calibration', f'protocol:={protocol_file}',
                      f'bag:={bags["grip"]},{bags["grip_holdout"]}', 'budget:=10', 'workers:=1',
                      'acq_func:=gp_hedge', 'log_objective:=false')    # the command's settings (its test's budget)
    try:
        assert f'protocol {protocol_file}' in node.output()
        done = calibrate_live(helpers, 'contact_calibration')
    finally:
        assert node.stop() == 0, node.output()[-3000:]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:] + node.output()[-3000:]
    run_dir = next((tmp_path / 'out').iterdir())
    plan = yaml.safe_load((run_dir / 'plan.yaml').read_text())
    assert [(e['name'], e['holdout']) for e in plan['entries']] == [('grip', False), ('grip_holdout', True)]
    assert plan['contacts']['fit'] == [] and plan['mode'] == 'offline'
    result = json.loads((run_dir / 'result.json').read_text())
    assert result['accepted'] and list(result['values']) == ['can_friction']
    assert result['values']['can_friction'] < 0.85                      # from 1.0 towards the bags' 0.5
    assert result['installed'] is False and 'no answer from /mujoco_bridge' in result['install_message']
    scene = yaml.safe_load((run_dir / 'contacts' / 'scene.yaml').read_text())
    can = next(o for o in scene['scene']['objects'] if o['name'] == 'can')
    assert can['friction']['sliding'] == pytest.approx(result['values']['can_friction'])
    assert (run_dir / 'contacts' / 'runs.png').read_bytes()[:4] == b'\x89PNG'
    assert hashlib.sha256(SCENE_FILE.read_bytes()).hexdigest() == digest       # the user's scene untouched
    assert 'calibrating' in node.output() and 'fitting can_friction' in node.output()


def test_a_missing_run_or_an_unknown_name_is_refused_before_a_run_starts(ros, protocol_file, bags, tmp_path):
    helpers, _ = ros
    cases = {'missing': (f'bag:={bags["grip_holdout"]}', "protocol run(s) ['grip'] have no bag"),
             'unknown': ('contact_fit:=can_grip', "contact_fit ['can_grip']: not in hand_contacts.yaml")}
    for name, (param, words) in cases.items():
        folder = tmp_path / name
        folder.mkdir()
        extra = (param,) if name == 'missing' else (f'bag:={bags["grip"]}', param)
        node = start_node(helpers, folder, f'contact_{name}', f'protocol:={protocol_file}', *extra)
        try:
            done = calibrate_live(helpers, f'contact_{name}')
        finally:
            assert node.stop() == 0, node.output()[-3000:]
        assert done.returncode != 0
        assert words in done.stdout + done.stderr + node.output(), done.stdout + node.output()[-2000:]
        assert not (folder / 'out').exists() or not any((folder / 'out').iterdir())     # no run directory
