"""``shadow-twin rqt`` with the real rqt (installed into .venv from ../shared) under Xvfb.

The twin runs as ``shadow-twin up --mock-hardware`` on this run's private ROS domain while
goals move four hand joints. The view is started three times from cold (a fresh HOME each
time); every time, inside the running rqt processes (``probe/rqt_probe.py``, loaded by
``probe/sitecustomize.py`` into the window processes that ``shadow-twin rqt`` starts), every
curve of every rqt_plot must hold at least 100 samples within 20 s of the window showing,
while the Robot Monitor, open at the same time in its own window, lists the twin monitor's
status of every joint; the two windows fit the 1920 x 1080 screen side by side.

The screenshots docs/images/shadow_twin_plots.png and docs/images/shadow_twin_monitor.png come from the same
probe, 12 s after the windows showed, with the twin up, its joints moving (the goals of
``conftest.py`` with 0.35 s strokes) and a 1920x1080 DISPLAY::

    PYTHONPATH=test/rqt/probe SHADOW_TWIN_RQT_PROBE=/tmp/view SHADOW_TWIN_RQT_PROBE_TIMEOUT=12 \\
        SHADOW_TWIN_RQT_PROBE_SAMPLES=1000000 SHADOW_TWIN_RQT_PROBE_ITEMS=1000 \\
        .venv/bin/python -m shadow_twin.cli.rqt && cp /tmp/view/*.png docs/images/
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shadow_twin.cli import rqt as rqt_cli
from shadow_twin.common import lifeline
from shadow_twin.common.exit_codes import ExitCode
from shadow_twin.plots.perspective import (DEFAULT_JOINTS, MONITOR_FILE, PLOTS_FILE, SCREEN_HEIGHT, SCREEN_WIDTH,
                                           build_plots_perspective, needed_topics, published_joints,
                                           write_perspective)

pytestmark = [pytest.mark.rqt, pytest.mark.ros, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PYTHON = str(REPO / '.venv' / 'bin' / 'python')
PROBE = Path(__file__).resolve().parent / 'probe'
SAMPLES = 100          # per curve ...
WITHIN = 20.0          # ... within this many s of the window showing
AGG_GROUP = '/shadow_twin/sim vs real'


def view_env(display: str, out: Path, **probe: str) -> dict[str, str]:
    """Environment of one start of the view: its own HOME, the probe writing into ``out``."""
    home = out / 'home'
    home.mkdir(parents=True, exist_ok=True)
    return {**os.environ, 'DISPLAY': display, 'HOME': str(home), 'PYTHONPATH': str(PROBE),
            'SHADOW_TWIN_RQT_PROBE': str(out), 'SHADOW_TWIN_RQT_PROBE_SAMPLES': str(SAMPLES),
            'SHADOW_TWIN_RQT_PROBE_ITEMS': str(len(published_joints()[0]) + 1),
            'SHADOW_TWIN_RQT_PROBE_TIMEOUT': str(WITHIN), **probe}


def start_view(env: dict[str, str], out: Path, *args: str) -> subprocess.Popen:
    """``shadow-twin rqt ARGS`` (its module, as the shadow-twin command delegates to it)."""
    return subprocess.Popen([PYTHON, '-m', 'shadow_twin.cli.rqt', *args], cwd=REPO,
                            stdout=open(out / 'rqt.log', 'wb'), stderr=subprocess.STDOUT, start_new_session=True,
                            **lifeline.child_options(env))     # it ends when this test run ends


def run_view(env: dict[str, str], out: Path, *args: str, timeout: float = 120.0) -> str:
    """Run ``shadow-twin rqt ARGS`` to its end (SIGINT after ``timeout`` s) and check that it ended OK;
    returns its log."""
    view = start_view(env, out, *args)
    try:
        status = view.wait(timeout=timeout)
    finally:
        if view.poll() is None:
            view.send_signal(signal.SIGINT)
            view.wait(timeout=15)
    log = (out / 'rqt.log').read_text(errors='replace')
    assert status == ExitCode.OK, log[-3000:]
    return log


def probed(out: Path, perspective: str) -> dict:
    return json.loads((out / perspective.replace('.perspective', '.json')).read_text())


def check_window_fits(result: dict) -> None:
    screen, frame = result['screen'], result['frame']
    assert (screen['width'], screen['height']) == (SCREEN_WIDTH, SCREEN_HEIGHT)
    assert frame['x'] >= 0 and frame['y'] >= 0, frame
    assert frame['x'] + frame['width'] <= SCREEN_WIDTH and frame['y'] + frame['height'] <= SCREEN_HEIGHT, frame
    for dock in result['docks']:
        assert dock['visible'] and dock['x'] >= 0 and dock['x'] + dock['width'] <= frame['width'], dock
        assert dock['y'] >= 0 and dock['y'] + dock['height'] <= frame['height'], dock


# --------------------------------------------------------------------------------------- the view
@pytest.mark.parametrize('start', [1, 2, 3])
def test_every_start_shows_every_curve_and_the_joint_statuses(start, display, twin, moving_joints, tmp_path):
    out = tmp_path / f'start{start}'
    out.mkdir()
    began = time.monotonic()
    run_view(view_env(display, out), out, timeout=120)
    plots, monitor = probed(out, PLOTS_FILE), probed(out, MONITOR_FILE)

    # every rqt_plot restored every field of the perspective, and each curve got SAMPLES within WITHIN s
    wanted = needed_topics(build_plots_perspective(DEFAULT_JOINTS))
    got = {name: n for plot in plots['plots'] for name, n in plot['samples'].items()}
    assert sorted(got) == sorted(wanted), plots['plots']
    assert plots['complete'] and plots['elapsed_s'] <= WITHIN, plots['plots']
    assert all(n >= SAMPLES for n in got.values()), got
    assert max(plots['reached_s'].values()) <= WITHIN
    titles = [plot['title'] for plot in plots['plots']]
    assert titles[:-1] == [f'{j}: real vs sim (rad)' for j in DEFAULT_JOINTS] and titles[-1].startswith('sim - real')
    for plot in plots['plots'][:-1]:              # real and sim of a moving joint move
        assert min(plot['spans'].values()) > 0.02, plot

    # the Robot Monitor (its own window, open meanwhile) lists every joint of the twin monitor
    (tree,) = monitor['monitors']
    assert monitor['complete'], tree['items']
    items = {row['path']: row['message'] for row in tree['items']}
    joints = published_joints()[0]
    for joint in joints:
        assert items[f'{AGG_GROUP}/{joint}'].startswith('RMS error '), joint
        assert tree['levels'][f'{AGG_GROUP}/{joint}'] in (0, 1, 2), joint
    assert items[f'{AGG_GROUP}/sim vs real'].startswith('worst joint ')
    assert items['/shadow_twin'] in ('OK', 'Warning', 'Error') and items[AGG_GROUP] == items['/shadow_twin']

    # side by side within 1920 x 1080, plots two to a row above the error plot
    for result in (plots, monitor):
        check_window_fits(result)
    assert plots['frame']['x'] + plots['frame']['width'] <= monitor['frame']['x']
    docks = {d['title']: d for d in plots['docks']}
    first, second = docks[titles[0]], docks[titles[1]]
    assert first['y'] == second['y'] and first['x'] + first['width'] < second['x']
    assert docks[titles[-1]]['y'] > docks[titles[2]]['y'] > first['y']

    print(f'start {start}: view closed after {time.monotonic() - began:.1f} s; curves complete '
          f'{plots["elapsed_s"]:.1f} s after the window showed: '
          + ', '.join(f'{name} {n}' for name, n in got.items())
          + f'; robot monitor: {sum(r["leaf"] for r in tree["items"])} statuses after {monitor["elapsed_s"]:.1f} s, '
          f'{tree["messages_received"]} messages; goals sent {moving_joints["sent"]}')


def test_sigterm_closes_every_window_and_a_closed_window_leaves_the_others(display, ros, twin, tmp_path):
    """The Robot Monitor's window closes itself (as a user would); the plots stay open, and so does
    ``shadow-twin rqt``; then SIGTERM (rqt itself ignores it) closes the plots: exit status 0."""
    import psutil
    view = start_view(view_env(display, tmp_path, SHADOW_TWIN_RQT_PROBE_HOLD=Path(PLOTS_FILE).stem), tmp_path)
    windows = []

    def monitor_closed_plots_shown() -> bool:
        windows[:] = psutil.Process(view.pid).children()
        probed_both = all((tmp_path / Path(f).with_suffix('.json').name).exists() for f in (PLOTS_FILE, MONITOR_FILE))
        return probed_both and len(windows) == 1
    try:
        assert ros[0].wait_until(lambda: monitor_closed_plots_shown() or view.poll() is not None, 90, interval=0.2) \
            and view.poll() is None, (tmp_path / 'rqt.log').read_text()[-3000:]
        assert probed(tmp_path, PLOTS_FILE)['complete'] and probed(tmp_path, MONITOR_FILE)['complete']
        time.sleep(1.0)      # a gap on purpose: nothing else closes in the second after the monitor's window closed
        assert view.poll() is None and windows[0].is_running()       # the plots window and the command stay
        sent = time.monotonic()
        view.send_signal(signal.SIGTERM)
        status = view.wait(timeout=rqt_cli.STOP_GRACE + 10)
    finally:
        if view.poll() is None:
            view.kill()
    assert status == ExitCode.OK, (tmp_path / 'rqt.log').read_text()[-3000:]
    assert time.monotonic() - sent < rqt_cli.STOP_GRACE + 3.0 and not windows[0].is_running()
    assert 'did not close' not in (tmp_path / 'rqt.log').read_text()


# ------------------------------------------------------------------------------------- bad input
def test_topics_that_never_appear_exit_2_naming_them(rqt_installed, twin, tmp_path):
    """Only the missing field is named: the twin's topics are discovered within the timeout (8 s,
    for a loaded machine)."""
    perspective = write_perspective(tmp_path / 'other.perspective',
                                    build_plots_perspective(['rh_FFJ3'], error_topic='/no/such/topic'))
    done = subprocess.run([PYTHON, '-m', 'shadow_twin.cli.rqt', '--perspective', str(perspective), '--timeout', '8'],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == ExitCode.BAD_INPUT, done.stderr
    assert 'shadow-twin rqt: error: after 8 s nothing publishes /no/such/topic/position[3];' in done.stderr
    assert '/joint_states' not in done.stderr.split('nothing publishes')[1].split(';')[0]
    assert f'ROS_DOMAIN_ID ({os.environ["ROS_DOMAIN_ID"]})' in done.stderr


def test_rqt_not_installed_exits_2_with_the_install_hint(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, 'executable', str(tmp_path / 'bin' / 'python'))
    monkeypatch.setenv('PATH', str(tmp_path))
    assert rqt_cli.main([]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith('shadow-twin rqt: error: rqt is not installed') and 'install_rqt.sh' in err, err
    assert 'ros-jazzy-rqt-plot' in err


def test_a_missing_or_invalid_perspective_exits_2(tmp_path, capsys):
    assert rqt_cli.main(['--perspective', str(tmp_path / 'none.perspective')]) == ExitCode.BAD_INPUT
    assert 'none.perspective does not exist' in capsys.readouterr().err
    (tmp_path / 'bad.perspective').write_text('{"keys": {}}')
    assert rqt_cli.main(['--perspective', str(tmp_path / 'bad.perspective')]) == ExitCode.BAD_INPUT
    assert 'is not an rqt perspective' in capsys.readouterr().err
