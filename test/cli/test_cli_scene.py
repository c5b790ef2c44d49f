"""``--scene`` of evaluate/calibrate/sensitivity (issue 36): every rollout simulates the scene's
objects with the model; an object the fingers close on changes what the sim does, one out of reach
changes nothing; a bad scene file is one line."""

import json

import pytest

from shadow_twin.cli import main as cli
from shadow_twin.common.paths import config_path


def evaluate(bag, trajectories, capsys, *extra):
    code = cli.main(['evaluate', '--bag', str(bag), '--trajectory', f'{trajectories}:hand_closing', '-q',
                     '--joints', 'rh_FF*', '--json', *extra])
    captured = capsys.readouterr()
    return code, captured


def mse(captured) -> dict:
    return json.loads(captured.out)['per_joint_mse']


def write_scene(path, xyz, frame='world'):
    path.write_text(f"""scene:
  objects:
    - name: block
      shape: box
      size: [0.03, 0.03, 0.03]
      mass: 0.2
      frame: {frame}
      xyz: {list(xyz)}
      free: false
""")
    return path


def test_an_object_out_of_reach_changes_nothing_and_one_in_the_grasp_stops_the_fingers(
        real_bag, trajectories_yaml, tmp_path, capsys):
    code, plain = evaluate(real_bag, trajectories_yaml, capsys)
    assert code == 0
    far = write_scene(tmp_path / 'far.yaml', (3.0, 3.0, 3.0))
    code, with_far = evaluate(real_bag, trajectories_yaml, capsys, '--scene', str(far))
    assert code == 0
    assert mse(with_far) == pytest.approx(mse(plain), rel=1e-9, abs=1e-12)
    # the hand scene's can stands where the fingers close: the real hand closed on nothing, so the sim's
    # fingers, stopped by the can, part from the recording
    code, with_can = evaluate(real_bag, trajectories_yaml, capsys, '--scene', str(config_path('scene_hand.yaml')))
    assert code == 0
    assert sum(mse(with_can).values()) > 2.0 * sum(mse(plain).values())


@pytest.mark.parametrize('content, expected', [
    ('scene: [1, 2', 'scene'),
    ('scene:\n  objects:\n    - name: block\n      shape: cone\n', "shape"),
    ('scene:\n  objects:\n    - {name: block, shape: box, size: [0.1, 0.1, 0.1], mass: 1, frame: nowhere}\n',
     'nowhere'),
])
def test_a_bad_scene_is_one_line(content, expected, real_bag, trajectories_yaml, tmp_path, capsys):
    scene = tmp_path / 'bad.yaml'
    scene.write_text(content)
    code, captured = evaluate(real_bag, trajectories_yaml, capsys, '--scene', str(scene))
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert code != 0 and len(lines) == 1 and expected in lines[0], captured.err
