"""shadow-twin identify's outputs as one unit (issue 34, item 8): ``--out`` locked for the whole
run, the three files together or not at all, ``--force`` replacing only regular files."""

from __future__ import annotations

import os

from support import identify as H
import pytest

from shadow_twin.cli.identify import main
from shadow_twin.common import files
from shadow_twin.common.files import exclusive_directory

OUTPUTS = {'calibrated.xml', 'parameters.yaml', 'report.json'}


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    return H.mock_runs(tmp_path_factory.mktemp('mock'), 'ur10e', seeds=(1,), duration=10.0,
                       truth=H.MockTruth(effects=H.DriveEffects.off()))


def argv(runs, out, *extra):
    return ['--model', str(runs['xml']), '--bag', str(runs['bags'][0]), '--out', str(out), *extra]


def test_a_run_on_an_out_another_run_holds_is_refused(runs, tmp_path, capsys):
    out = tmp_path / 'out'
    with exclusive_directory(out, '--out'):              # another identify, still running
        assert main(argv(runs, out)) == 2
    assert 'in use by another process' in capsys.readouterr().err
    assert {p.name for p in out.iterdir()} == {'.lock'}     # nothing of this run


def test_an_interrupt_while_writing_leaves_no_file_of_the_run(runs, tmp_path, monkeypatch):
    """A Ctrl-C while the outputs are written (here: as the second is staged) leaves none of them,
    and the --out this run created is gone again."""
    out = tmp_path / 'out'
    real = files.write_text_atomic

    def interrupted(path, text):
        if path.name == 'parameters.yaml':
            raise KeyboardInterrupt
        return real(path, text)
    monkeypatch.setattr(files, 'write_text_atomic', interrupted)
    with pytest.raises(KeyboardInterrupt):
        main(argv(runs, out))
    assert not out.exists()
    monkeypatch.setattr(files, 'write_text_atomic', real)
    assert main(argv(runs, out)) == 0
    assert {p.name for p in out.iterdir()} == OUTPUTS | {'.lock'}


def test_force_replaces_regular_files_only(runs, tmp_path, capsys):
    out = tmp_path / 'out'
    out.mkdir()
    mine = tmp_path / 'my_model.xml'
    mine.write_text('mine')
    (out / 'calibrated.xml').symlink_to(mine)
    assert main(argv(runs, out, '--force')) == 2
    assert 'calibrated.xml exists and is not a regular file' in capsys.readouterr().err
    assert mine.read_text() == 'mine' and (out / 'calibrated.xml').is_symlink()
    (out / 'calibrated.xml').unlink()
    os.mkfifo(out / 'report.json')
    assert main(argv(runs, out, '--force')) == 2
    assert 'report.json exists and is not a regular file' in capsys.readouterr().err
    assert not (out / 'calibrated.xml').exists() and not (out / 'parameters.yaml').exists()
    (out / 'report.json').unlink()
    (out / 'report.json').write_text('old')
    assert main(argv(runs, out, '--force')) == 0
    assert (out / 'report.json').read_text().startswith('{')
