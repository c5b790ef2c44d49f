"""``shadow-twin plot`` PNGs of real vs sim joint positions from a bag: the bag read by
shadow_twin.calibration.recordings.bag_comparison, drawn by shadow_twin.plots.bag_plots.

Synthetic ROS 2 MCAP bags hold a real stream (/joint_states) and a sim stream
(/sim/joint_states, another rate and clock phase) where sim = real + a known
constant offset on one joint and a known extra motion on another; one joint
does not move. Bad input must give exit code 2 and one line on stderr.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from shadow_twin.cli import plot as plot_cli
from shadow_twin.calibration.recordings import bag_comparison as plot
from shadow_twin.common.errors import ConfigError, RecordingError
from shadow_twin.calibration.recordings.recording import JointStateRecording, write_joint_states
from shadow_twin.plots.bag_plots import default_out_dir

JOINTS = ['rh_FFJ3', 'rh_MFJ3', 'rh_THJ1']  # offset joint, extra-motion joint, still joint
OFFSET = 0.05  # rad, sim - real on rh_FFJ3
WOBBLE = 0.02  # rad, amplitude of the sim's extra sine on rh_MFJ3
T0 = 1_700_000_000.0  # bag clock, s
PNG_MAGIC = b'\x89PNG\r\n\x1a\n'


def real_positions(t: np.ndarray) -> np.ndarray:
    """(N, 3) rad: two moving fingers, one still joint."""
    s = t - T0
    return np.stack([0.8 * np.sin(0.5 * s), 0.6 * (1 - np.cos(0.7 * s)), np.full_like(s, 0.01)], axis=1)


def sim_positions(t: np.ndarray) -> np.ndarray:
    """(M, 3) rad: real + OFFSET on rh_FFJ3, + WOBBLE sin(2 pi s) on rh_MFJ3."""
    q = real_positions(t)
    q[:, 0] += OFFSET
    q[:, 1] += WOBBLE * np.sin(2 * np.pi * (t - T0))
    return q


def real_times() -> np.ndarray:
    return T0 + np.arange(0, 4.0, 0.01)  # 100 Hz, 4 s


def sim_times() -> np.ndarray:
    return T0 - 0.2 + np.arange(0, 4.5, 0.002)  # 500 Hz, covers the real stream


def make_bag(path: Path, *, sim: bool = True, real_topic: str = '/joint_states',
             sim_topic: str = '/sim/joint_states', extra_topic: str | None = None) -> Path:
    """A ROS 2 MCAP bag with the real stream and (optionally) the sim stream."""
    rt, st = real_times(), sim_times()
    recs = [JointStateRecording.from_arrays(rt, JOINTS, real_positions(rt), topic=real_topic)]
    if sim:
        recs.append(JointStateRecording.from_arrays(st, JOINTS, sim_positions(st), topic=sim_topic))
    if extra_topic:
        recs.append(JointStateRecording.from_arrays(rt, JOINTS, real_positions(rt), topic=extra_topic))
    return write_joint_states(path, recs)


def expected_wobble_rms() -> float:
    """RMS (rad) of the extra motion at the real sample times, the sim interpolated linearly."""
    rt, st = real_times(), sim_times()
    sim = np.interp(rt, st, sim_positions(st)[:, 1])
    return float(np.sqrt(np.mean((sim - real_positions(rt)[:, 1]) ** 2)))


def table(out: str) -> dict[str, str]:
    """{joint: rest of its table line} from main's stdout."""
    rows = [line.split(None, 1) for line in out.splitlines()]
    return {parts[0]: parts[1] for parts in rows if len(parts) == 2 and parts[0].startswith('rh_')}


def assert_png(path: Path, min_size=(200, 150)) -> tuple[int, int]:
    """The file is a PNG that PIL and matplotlib read, of a sensible size; returns (width, height)."""
    from PIL import Image
    import matplotlib.image
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, path
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        width, height = image.size
    assert min_size[0] <= width <= 4000 and min_size[1] <= height <= 4000, (path, width, height)
    pixels = matplotlib.image.imread(path)
    assert pixels.shape[:2] == (height, width)
    assert pixels.std() > 0  # not a blank image
    return width, height


def error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith('shadow-twin plot: error: ')
    return lines[0]


@pytest.fixture(scope='module')
def pair_bag(tmp_path_factory) -> Path:
    return make_bag(tmp_path_factory.mktemp('bags') / 'pair')


@pytest.fixture(scope='module')
def default_run(pair_bag, tmp_path_factory):
    """``shadow-twin plot --bag BAG --out DIR`` once: (exit code, stdout, stderr, out dir)."""
    import contextlib
    import io
    out = tmp_path_factory.mktemp('plots') / 'pair_plots'
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = plot_cli.main(['--bag', str(pair_bag), '--out', str(out)])
    return code, stdout.getvalue(), stderr.getvalue(), out


# -- success -----------------------------------------------------------------------------------
def test_default_run_writes_valid_pngs_of_moving_joints(default_run, pair_bag):
    code, out, err, out_dir = default_run
    assert code == 0, err
    assert sorted(p.name for p in out_dir.glob('*.png')) == ['overview.png', 'rh_FFJ3.png', 'rh_MFJ3.png']
    sizes = {p.name: assert_png(p) for p in out_dir.glob('*.png')}
    assert sizes['rh_FFJ3.png'] == sizes['rh_MFJ3.png']
    assert f'wrote 3 plots to {out_dir}' in out
    assert 'rh_THJ1' not in out  # still joint skipped by default
    assert not list(out_dir.glob('.*'))  # no temporary files left
    assert sorted(p.name for p in pair_bag.iterdir()) == ['metadata.yaml', 'pair.mcap']  # bag untouched


def test_printed_rms_equals_known_errors(default_run):
    _, out, _, _ = default_run
    rows = table(out)
    assert set(rows) == {'rh_FFJ3', 'rh_MFJ3'}
    assert float(rows['rh_FFJ3'].split()[0]) == pytest.approx(OFFSET, abs=1e-6)
    assert float(rows['rh_FFJ3'].split()[1]) == pytest.approx(OFFSET, abs=1e-6)  # max |sim - real|
    assert float(rows['rh_MFJ3'].split()[0]) == pytest.approx(expected_wobble_rms(), abs=1e-6)
    assert float(rows['rh_MFJ3'].split()[0]) == pytest.approx(WOBBLE / np.sqrt(2), rel=0.02)
    assert re.search(r'real /joint_states vs sim /sim/joint_states', out)


def test_library_api_returns_overview_first(pair_bag, tmp_path):
    files = plot.plot_bag(pair_bag, tmp_path / 'new' / 'dir', joints=['rh_FF*'])
    assert [f.name for f in files] == ['overview.png', 'rh_FFJ3.png']
    assert all(f.parent == tmp_path / 'new' / 'dir' and f.is_file() for f in files)
    cmp = plot.compare_bag(pair_bag)
    assert cmp.real_topic == '/joint_states' and cmp.sim_topic == '/sim/joint_states'
    assert cmp.rms['rh_FFJ3'] == pytest.approx(OFFSET, abs=1e-9)
    trace = cmp.traces[0]
    assert trace.real_t[0] == 0.0 and trace.sim_t[0] == pytest.approx(-0.2, abs=1e-6)  # s from first real sample
    assert trace.err_t.size == real_times().size


def test_all_joints_includes_still_joint(pair_bag, tmp_path, capsys):
    assert plot_cli.main(['--bag', str(pair_bag), '--out', str(tmp_path / 'all'), '--all-joints']) == 0
    out = capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / 'all').glob('*.png')) == \
        ['overview.png', 'rh_FFJ3.png', 'rh_MFJ3.png', 'rh_THJ1.png']
    assert float(table(out)['rh_THJ1'].split()[0]) == pytest.approx(0.0, abs=1e-9)
    assert 'wrote 4 plots' in out


def test_joints_glob_selects(pair_bag, tmp_path, capsys):
    code = plot_cli.main(['--bag', str(pair_bag), '--out', str(tmp_path / 'sel'), '--joints', 'rh_M*, rh_TH?1'])
    assert code == 0
    out = capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / 'sel').glob('*.png')) == ['overview.png', 'rh_MFJ3.png', 'rh_THJ1.png']
    assert set(table(out)) == {'rh_MFJ3', 'rh_THJ1'}  # explicit globs plot still joints too


def test_single_topic_bag_plotted_alone(tmp_path, capsys):
    bag = make_bag(tmp_path / 'single', sim=False)
    assert plot_cli.main(['--bag', str(bag), '--out', str(tmp_path / 'out')]) == 0
    out = capsys.readouterr().out
    assert '/joint_states only' in out and 'wrote 3 plots' in out
    for f in (tmp_path / 'out').glob('*.png'):
        assert_png(f)
    q = real_positions(real_times())[:, 0]
    assert float(table(out)['rh_FFJ3']) == pytest.approx(q.max() - q.min(), abs=1e-6)  # range, rad


def test_default_out_dir_is_bag_name_in_cwd(tmp_path, monkeypatch, capsys):
    bag = make_bag(tmp_path / 'bags' / 'run1', sim=False)
    mcap = bag / 'run1.mcap'
    monkeypatch.chdir(tmp_path)
    assert plot_cli.main(['--bag', str(mcap), '--joints', 'rh_FFJ3']) == 0
    assert (tmp_path / 'run1_plots' / 'rh_FFJ3.png').is_file()
    assert default_out_dir('x/hand_closing_real.bag') == tmp_path / 'hand_closing_real_plots'
    assert default_out_dir('x/run.v2/') == tmp_path / 'run.v2_plots'


def test_explicit_topics_and_several_topics(tmp_path, capsys):
    bag = make_bag(tmp_path / 'named', real_topic='/hand/joint_states', sim_topic='/twin/joint_states')
    assert plot_cli.main(['--bag', str(bag), '--out', str(tmp_path / 'a')]) == 2
    line = error_line(capsys)
    assert "/hand/joint_states" in line and '/twin/joint_states' in line and '--real-topic' in line
    assert not (tmp_path / 'a').exists()
    assert plot_cli.main(['--bag', str(bag), '--out', str(tmp_path / 'b'), '--real-topic', '/hand/joint_states',
                      '--sim-topic', '/twin/joint_states']) == 0
    assert float(table(capsys.readouterr().out)['rh_FFJ3'].split()[0]) == pytest.approx(OFFSET, abs=1e-6)


def test_real_recording(real_bag, tmp_path, capsys):
    assert plot_cli.main(['--bag', str(real_bag), '--out', str(tmp_path / 'real'), '--joints', 'rh_FFJ*,rh_THJ3']) == 0
    out = capsys.readouterr().out
    names = sorted(p.name for p in (tmp_path / 'real').glob('*.png'))
    assert names == ['overview.png', 'rh_FFJ1.png', 'rh_FFJ2.png', 'rh_FFJ3.png', 'rh_FFJ4.png', 'rh_THJ3.png']
    for f in (tmp_path / 'real').glob('*.png'):
        assert_png(f)
    assert '/joint_states only' in out
    assert float(table(out)['rh_FFJ2']) == pytest.approx(1.66, abs=0.05)
    cmp = plot.compare_bag(real_bag)  # default: the moving joints only
    assert 'rh_THJ3' not in [t.joint for t in cmp.traces] and len(cmp.traces) == 23


# -- errors ------------------------------------------------------------------------------------
def test_missing_bag(tmp_path, capsys):
    assert plot_cli.main(['--bag', str(tmp_path / 'nope.bag'), '--out', str(tmp_path / 'o')]) == 2
    assert 'bag not found' in error_line(capsys)
    assert not (tmp_path / 'o').exists()


def test_unreadable_bag_and_no_joint_state_topic(tmp_path, capsys, bag_writers):
    junk = tmp_path / 'junk.bag'
    junk.write_bytes(b'not a bag')
    assert plot_cli.main(['--bag', str(junk), '--out', str(tmp_path / 'o')]) == 2
    assert 'not a readable' in error_line(capsys)
    chatter = bag_writers.string(tmp_path / 'chatter')
    assert plot_cli.main(['--bag', str(chatter), '--out', str(tmp_path / 'o')]) == 2
    assert 'no sensor_msgs/JointState topic' in error_line(capsys)


def test_unknown_topic(pair_bag, tmp_path, capsys):
    assert plot_cli.main(['--bag', str(pair_bag), '--out', str(tmp_path / 'o'), '--sim-topic', '/nope']) == 2
    line = error_line(capsys)
    assert "'/nope'" in line and '--sim-topic' in line and '/sim/joint_states' in line
    with pytest.raises(RecordingError, match='/nope'):
        plot.plot_bag(pair_bag, tmp_path / 'o', real_topic='/nope')


def test_glob_matching_nothing(pair_bag, tmp_path, capsys):
    assert plot_cli.main(['--bag', str(pair_bag), '--out', str(tmp_path / 'o'), '--joints', 'rh_FF*,lh_*']) == 2
    line = error_line(capsys)
    assert "['lh_*']" in line and 'match no recorded joint' in line and 'rh_FFJ3' in line
    assert not (tmp_path / 'o').exists()
    assert plot_cli.main(['--bag', str(pair_bag), '--joints', ' , ']) == 2
    assert '--joints is empty' in error_line(capsys)


def test_never_writes_inside_the_bag(pair_bag, tmp_path, capsys):
    before = sorted(p.name for p in pair_bag.iterdir())
    assert plot_cli.main(['--bag', str(pair_bag), '--out', str(pair_bag / 'plots')]) == 2
    assert 'inside the bag' in error_line(capsys)
    with pytest.raises(ConfigError, match='inside the bag'):
        plot.plot_bag(pair_bag / 'pair.mcap', pair_bag)
    assert sorted(p.name for p in pair_bag.iterdir()) == before


def test_nothing_moves_and_clock_mismatch(tmp_path, capsys):
    rt = real_times()
    still = JointStateRecording.from_arrays(rt, ['a', 'b'], np.zeros((rt.size, 2)))
    bag = write_joint_states(tmp_path / 'still', [still])
    assert plot_cli.main(['--bag', str(bag), '--out', str(tmp_path / 'o')]) == 2
    assert '--all-joints' in error_line(capsys)
    real = JointStateRecording.from_arrays(rt, JOINTS, real_positions(rt))
    sim = JointStateRecording.from_arrays(rt - T0 + 1.0, JOINTS, real_positions(rt), topic='/sim/joint_states')
    bag = write_joint_states(tmp_path / 'clocks', [real, sim])
    with pytest.raises(RecordingError, match='do not overlap in time'):
        plot.compare_bag(bag)


def test_help_and_usage_errors(capsys):
    assert plot_cli.main(['--help']) == 0
    assert 'shadow-twin plot' in capsys.readouterr().out
    assert plot_cli.main([]) == 2
    assert '--bag' in capsys.readouterr().err
