"""Files the nodes read at start never stop them (issue 33 item 8): each reader of such a file
(the drift watch's state, the calibration node's plan of an interrupted run), given each corrupt or
hostile file, reports one line naming the file and the problem, moves the file aside (kept, never
overwritten) and starts fresh."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from shadow_twin.common import files, state_files
from shadow_twin.common.errors import ConfigError
from shadow_twin.monitoring.drift import DriftSettings, DriftTrend, load_state, save_state


def read_drift(path: Path) -> tuple[object, list[str]]:
    """The drift watch's reader: (state or None, its lines)."""
    lines: list[str] = []
    return load_state(path, DriftSettings(window=10.0, bucket=1.0), lines.append), lines


def read_plan(path: Path) -> tuple[object, list[str]]:
    """The calibration node's reader of an interrupted run's plan (its line is the ConfigError)."""
    from shadow_twin.calibration.jobs.plan import CalibrationPlan
    try:
        return CalibrationPlan.read(path.parent), []
    except ConfigError as exc:
        return None, [str(exc)]


def plan_text(budget) -> str:
    """A calibration plan's YAML with ``budget``."""
    return yaml.safe_dump(dict(run_id='r', mode='offline', model_path='m', gains_file='g', space_file='s',
                               objective_joints=[['rh_FFJ3']], settings={'budget': budget}, alignment={},
                               entries=[{'name': 'a', 'bag': 'a'}]))


#: reader, file name, a good file's text, wrong types, NaN in a value
READERS = {
    'drift': (read_drift, 'twin_monitor.json', None,
              json.dumps({'version': 1, 'baseline': 'x'}), '{"version": 1, "first_moved": {"a": NaN}}'),
    'plan': (read_plan, 'plan.yaml', plan_text(20), yaml.safe_dump({'run_id': 'r', 'entries': 5}),
             plan_text(float('nan'))),
}


def hostile(kind: str, path: Path, wrong: str, nan: str) -> bytes | None:
    """Make ``path`` a hostile file of ``kind``; returns its bytes (None: not a plain file)."""
    data = {'random bytes': bytes([0xff, 0xfe]) + bytes(range(256)) * 40,
            "200,000 '['": b'[' * 200_000,
            'empty': b'',
            'wrong types': wrong.encode(),
            'NaN': nan.encode()}.get(kind)
    if data is not None:
        path.write_bytes(data)
        return data
    if kind == 'huge':                          # sparse: no 64 MiB written
        with open(path, 'wb') as handle:
            handle.truncate(state_files.MAX_STATE_BYTES + 1)
    elif kind == 'directory':
        (path / 'inside').mkdir(parents=True)
    elif kind == 'dangling link':
        path.symlink_to(path.parent / 'nowhere')
    return None


KINDS = ('random bytes', "200,000 '['", 'empty', 'wrong types', 'NaN', 'huge', 'directory', 'dangling link')
PROBLEM = {'NaN': 'nan', 'random bytes': 'not UTF-8', "200,000 '['": 'nest', 'huge': 'byte limit', 'directory': 'a directory',
           'dangling link': 'a link to nothing'}


@pytest.mark.parametrize('kind', KINDS)
@pytest.mark.parametrize('reader', sorted(READERS))
def test_a_hostile_file_is_named_in_one_line_moved_aside_and_the_reader_starts_fresh(tmp_path, reader, kind):
    read, name, _, wrong, nan = READERS[reader]
    path = tmp_path / name
    data = hostile(kind, path, wrong, nan)
    state, lines = read(path)
    assert state is None
    assert len(lines) == 1 and str(path) in lines[0], lines
    assert PROBLEM.get(kind, '').lower() in lines[0].lower(), lines
    aside = [p for p in tmp_path.iterdir() if p.name.startswith(f'{name}.corrupt-')]
    assert not os.path.lexists(path) and len(aside) == 1 and f'moved aside to {aside[0]}' in lines[0]
    if data is not None:
        assert aside[0].read_bytes() == data                     # kept as it was
    assert read(path) == (None, []) if reader == 'drift' else 'does not exist' in read(path)[1][0]


def test_an_unreadable_file_is_moved_aside(tmp_path, monkeypatch):
    """No read permission (as root the mode does not stop a read: the open is made to fail)."""
    path = tmp_path / 'twin_monitor.json'
    path.write_text('{}')

    def refuse(*args, **kwargs):
        raise PermissionError(13, 'Permission denied')
    monkeypatch.setattr(files, 'open', refuse, raising=False)       # the one reader (common/files.py)
    state, lines = read_drift(path)
    assert state is None and len(lines) == 1 and 'cannot be read (Permission denied)' in lines[0]
    assert list(tmp_path.glob('twin_monitor.json.corrupt-*')) and not path.exists()


def test_a_file_moved_aside_never_replaces_another(tmp_path, monkeypatch):
    import time
    epoch = time.gmtime(0)
    monkeypatch.setattr(state_files.time, 'gmtime', lambda *_: epoch)     # all in one second
    for k in range(3):
        (tmp_path / 'state').write_text(f'bad {k}')
        assert 'moved aside' in state_files.move_aside(tmp_path / 'state')
    kept = sorted(p.name for p in tmp_path.iterdir())
    assert kept == ['state.corrupt-19700101T000000Z', 'state.corrupt-19700101T000000Z.1',
                    'state.corrupt-19700101T000000Z.2']
    assert {(tmp_path / n).read_text() for n in kept} == {'bad 0', 'bad 1', 'bad 2'}


def test_a_good_file_is_read_and_left_in_place(tmp_path):
    good = tmp_path / 'run' / 'plan.yaml'
    good.parent.mkdir()
    good.write_text(READERS['plan'][2])
    plan, lines = read_plan(good)
    assert lines == [] and plan.settings == {'budget': 20} and good.exists()
    trend = DriftTrend(DriftSettings(window=10.0, bucket=1.0))
    trend.baseline = {'rh_FFJ3': 0.01}
    path = save_state(trend, tmp_path / 'twin_monitor.json')
    state, lines = read_drift(path)
    assert lines == [] and state.baseline == {'rh_FFJ3': 0.01} and path.exists()
    assert state_files.read_state(tmp_path / 'none', json.loads, 'x', lines.append) is None and lines == []
