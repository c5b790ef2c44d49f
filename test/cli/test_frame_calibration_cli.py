"""``shadow-twin frame-calibration``: the motion-capture floor frame from three points, in process
and through the real entry point (``python -m shadow_twin.cli``).

Bad input must give exit 2, exactly one stderr line ``shadow-twin frame-calibration: error: ...``
and write nothing. Expected frames are worked out by hand in the comments.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from shadow_twin.calibration.recordings.frame import FrameCalibration
from shadow_twin.cli import frame_calibration
from shadow_twin.cli import main as cli

REPO = Path(__file__).resolve().parents[2]
PREFIX = 'shadow-twin frame-calibration: error: '
# A = (1, 2, 0.5), B = A + 3 y, C = A - 4 x: x axis = capture +y, z = (3 y) x (-4 x) = +12 z, y = z x x = -x.
# The floor is turned +90 deg about the vertical: quaternion (0, 0, sin 45, cos 45), rpy (0, 0, pi/2).
TURNED = ['--a', '1', '2', '0.5', '--b', '1', '5', '0.5', '--c', '-3', '2', '0.5']
TURNED_AXES = {'x_axis': [0, 1, 0], 'y_axis': [-1, 0, 0], 'z_axis': [0, 0, 1]}
# A = 0, B = x, C = 2 z: z = x x 2z = -2 y -> (0, -1, 0), y = z x x = (0, 0, 1): a wall, +90 deg about x.
WALL = ['--a', '0', '0', '0', '--b', '1', '0', '0', '--c', '0', '0', '2']
COLLINEAR = ['--a', '0', '0', '0', '--b', '1', '0', '0', '--c', '3', '0.0002', '0']   # 0.2 mm off line AB


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(PREFIX)
    assert captured.out == ''
    return lines[0]


def test_json_of_a_floor_turned_a_quarter_turn(capsys):
    assert frame_calibration.main([*TURNED, '--json']) == 0
    result = json.loads(capsys.readouterr().out)
    assert result['origin'] == pytest.approx([1, 2, 0.5])
    for axis, expected in TURNED_AXES.items():
        assert result[axis] == pytest.approx(expected, abs=1e-12)
    half = math.sqrt(0.5)
    assert result['quaternion'] == pytest.approx([0, 0, half, half], abs=1e-12)
    assert result['rpy'] == pytest.approx([0, 0, math.pi / 2], abs=1e-12)
    assert result['out'] is None


def test_json_of_a_wall(capsys):
    assert frame_calibration.main([*WALL, '--json']) == 0
    result = json.loads(capsys.readouterr().out)
    assert result['z_axis'] == pytest.approx([0, -1, 0], abs=1e-12)
    assert result['y_axis'] == pytest.approx([0, 0, 1], abs=1e-12)
    assert result['rpy'] == pytest.approx([math.pi / 2, 0, 0], abs=1e-12)
    assert result['quaternion'] == pytest.approx([math.sqrt(0.5), 0, 0, math.sqrt(0.5)], abs=1e-12)


def test_text_names_origin_axes_quaternion_and_rpy(capsys):
    assert cli.main(['frame-calibration', *TURNED]) == 0      # through the shadow-twin dispatcher
    lines = capsys.readouterr().out.splitlines()
    values = {line.split()[0]: line for line in lines[1:]}
    assert set(values) == {'origin', 'x', 'y', 'z', 'quaternion', 'rpy'}

    def numbers(line):
        return [float(v) for v in line[line.index('[') + 1:line.index(']')].split()]

    assert numbers(values['origin']) == [1.0, 2.0, 0.5] and values['origin'].endswith(' m')
    assert [numbers(values[axis]) for axis in 'xyz'] == [[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    assert numbers(values['quaternion']) == [0.0, 0.0, 0.707107, 0.707107]
    assert numbers(values['rpy']) == [0.0, 0.0, 1.570796] and '90.000 deg' in values['rpy']


def test_out_writes_a_yaml_that_from_dict_reads_back(tmp_path, capsys):
    out = tmp_path / 'frames' / 'mocap.yaml'
    assert frame_calibration.main([*TURNED, '--out', str(out), '--json']) == 0
    result = json.loads(capsys.readouterr().out)
    assert result['out'] == str(out)
    data = yaml.safe_load(out.read_text())
    frame = FrameCalibration.from_dict(data)
    assert np.allclose(frame.origin, [1, 2, 0.5]) and np.allclose(frame.origin, result['origin'])
    assert np.allclose(frame.rotation, np.column_stack([TURNED_AXES[f'{a}_axis'] for a in 'xyz']), atol=1e-12)
    assert data['points'] == {'a': [1.0, 2.0, 0.5], 'b': [1.0, 5.0, 0.5], 'c': [-3.0, 2.0, 0.5]}
    assert 'IMECE 2023' in data['source']
    # the written frame maps the recorded points where they belong: A at 0, B on +x, C on +y
    assert np.allclose(frame.to_frame([[1, 2, 0.5], [1, 5, 0.5], [-3, 2, 0.5]]), [[0, 0, 0], [3, 0, 0], [0, 4, 0]])


def test_text_mode_says_where_it_wrote(tmp_path, capsys):
    out = tmp_path / 'mocap.yaml'
    assert frame_calibration.main([*WALL, '--out', str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f'wrote {out}'
    assert out.is_file()


def test_an_existing_out_is_refused_and_left_untouched(tmp_path, capsys):
    out = tmp_path / 'mocap.yaml'
    out.write_text('keep: me\n')
    assert frame_calibration.main([*TURNED, '--out', str(out)]) == 2
    line = one_error_line(capsys)
    assert '--out' in line and 'exists' in line
    assert out.read_text() == 'keep: me\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['mocap.yaml']       # no temporary file left


def test_collinear_points_exit_2_with_one_line_and_write_nothing(tmp_path, capsys):
    out = tmp_path / 'mocap.yaml'
    assert frame_calibration.main([*COLLINEAR, '--out', str(out)]) == 2
    line = one_error_line(capsys)
    assert 'collinear' in line and '0.200 mm' in line
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize('argv, words', [
    (['--a', '0', '0', '0', '--b', '0.0005', '0', '0', '--c', '0', '1', '0'], 'points A and B coincide'),
    (['--a', '0', 'zero', '0', '--b', '1', '0', '0', '--c', '0', '1', '0'], "invalid float value: 'zero'"),
    (['--a', '0', '0', '0', '--b', '1', '0', '0'], 'required: --c'),
    (['--a', '0', '0', '--b', '1', '0', '0', '--c', '0', '1', '0'], 'expected 3 arguments'),
    (['--a', '0', 'nan', '0', '--b', '1', '0', '0', '--c', '0', '1', '0'], 'point A: not finite'),
])
def test_bad_input_exits_2_with_one_line(argv, words, capsys):
    assert frame_calibration.main(argv) == 2
    assert words in one_error_line(capsys)


def test_the_shadow_twin_help_lists_the_command():
    assert 'frame-calibration' in cli.DELEGATED
    assert 'frame-calibration' in cli.build_parser().format_help()


def shadow_twin(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-m', 'shadow_twin.cli', 'frame-calibration', *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_the_console_entry_point_in_a_subprocess(tmp_path):
    out = tmp_path / 'mocap.yaml'
    done = shadow_twin(*TURNED, '--json', '--out', str(out))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result['z_axis'] == pytest.approx([0, 0, 1], abs=1e-12)
    assert np.allclose(FrameCalibration.from_dict(yaml.safe_load(out.read_text())).origin, [1, 2, 0.5])
    refused = shadow_twin(*COLLINEAR)
    assert refused.returncode == 2 and refused.stdout == ''
    assert len(refused.stderr.splitlines()) == 1 and refused.stderr.startswith(PREFIX)
    assert 'collinear' in refused.stderr
