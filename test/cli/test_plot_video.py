"""``shadow-twin plot --video``: the video test of issue 38 (2 s of the shared real hand recording, replayed in the
sim as calibrate replays it: the file's frame count and size, and its frames changing where the fingers move and
not where the hand stays), a bag holding both streams drawn as recorded (GIF), and bad input: one line, exit 2,
no file touched."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import imageio_ffmpeg
import numpy as np
import pytest
from PIL import Image

from shadow_twin.calibration.recordings.recording import JointStateRecording, write_joint_states
from shadow_twin.cli import plot as plot_cli
from shadow_twin.model.mjcf import builtin_model_path
from shadow_twin.visual.video import VideoSettings, iter_frames
from shadow_twin.visual.video_render import CameraView, linked_bodies

FPS, SECONDS, SIZE = 10, 2.0, (320, 240)
FINGERS = ['rh_ffdistal', 'rh_mfdistal', 'rh_rfdistal', 'rh_lfdistal']


def run(*argv) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``shadow-twin plot ARGV``."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = plot_cli.main([str(a) for a in argv])
    return code, stdout.getvalue(), stderr.getvalue()


def one_error(result) -> str:
    code, _, err = result
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith('shadow-twin plot: error: '), err
    return lines[0]


@pytest.fixture(scope='module')
def hand_video(tmp_path_factory, real_bag, trajectories_yaml):
    """2 s of the real hand closing, from the trajectory start: (exit status, stdout, video path)."""
    path = tmp_path_factory.mktemp('video') / 'hand.mp4'
    code, out, _ = run('--bag', real_bag, '--trajectory', f'{trajectories_yaml}:hand_closing', '--video', path,
                       '--seconds', SECONDS, '--fps', FPS, '--size', f'{SIZE[0]}x{SIZE[1]}')
    return code, out, path


def test_two_seconds_of_the_real_hand(hand_video, real_bag, trajectories_yaml):
    code, out, path = hand_video
    assert code == 0 and f'wrote video {path}: {int(SECONDS * FPS)} frames' in out
    frames = read_frames(path)
    assert frames.shape == (int(SECONDS * FPS), SIZE[1], SIZE[0], 3)
    # where each link is drawn, from the same replay and view as the command's
    motion, twin, joint_map = plot_cli.replay_motion(real_bag, f'{trajectories_yaml}:hand_closing', None, None)
    settings = VideoSettings(FPS, *SIZE, seconds=SECONDS, camera=CameraView(), title=real_bag.name)
    drawn = list(iter_frames(twin.model, motion, settings, joint_map))
    names = [twin.model.body(b).name for b in linked_bodies(twin.model, joint_map, motion.joint_names)]
    first, last = drawn[0].pixels, drawn[-1].pixels

    def change(name: str, pixels: np.ndarray) -> float:
        x, y = pixels[names.index(name)].round().astype(int)
        return float(np.abs(frames[-1, y - 3:y + 4, x - 3:x + 4].astype(int)
                            - frames[0, y - 3:y + 4, x - 3:x + 4].astype(int)).mean())
    moved = [np.linalg.norm(last[names.index(f)] - first[names.index(f)]) for f in FINGERS]
    assert min(moved) > 10                                 # the fingertips travel across the frame in 2 s
    assert all(change(f, first) > 20 and change(f, last) > 20 for f in FINGERS)   # where they were, where they are
    assert np.linalg.norm(last[names.index('rh_palm')] - first[names.index('rh_palm')]) < 1
    assert change('rh_palm', first) < 12                   # the palm stays: its pixels hardly change (its ghost's
    #                                                        colour may shift a little with the wrist's error)


def test_the_printed_line_names_the_largest_link_errors(hand_video):
    _, out, _ = hand_video
    line = next(line for line in out.splitlines() if line.startswith('wrote video'))
    assert f'{SIZE[0]}x{SIZE[1]} px at {FPS:g} fps ({SECONDS:.2f} s); largest link errors: rh_' in line


def paired_bag(path: Path) -> Path:
    """A bag with /joint_states and /sim/joint_states: the first finger closing, the sim 0.2 rad behind at J3."""
    times = 1_700_000_000.0 + np.arange(0.0, 3.0, 0.01)
    joints = ['rh_FFJ1', 'rh_FFJ2', 'rh_FFJ3']
    real = np.outer(np.linspace(0.0, 1.2, times.size), np.ones(3))
    sim = real - np.array([0.0, 0.0, 0.2])
    return write_joint_states(path, [JointStateRecording.from_arrays(times, joints, real, topic='/joint_states'),
                                     JointStateRecording.from_arrays(times, joints, sim, topic='/sim/joint_states')])


def test_a_bag_with_both_streams_is_drawn_as_recorded(tmp_path):
    bag = paired_bag(tmp_path / 'pair')
    code, out, _ = run('--bag', bag, '--video', tmp_path / 'pair.gif', '--fps', 5, '--size', '120x90')
    assert code == 0, out
    frames = read_frames(tmp_path / 'pair.gif')
    assert frames.shape == (14, 90, 120, 3)                # 2.99 s of samples at 5 fps
    assert 'real /joint_states vs sim /sim/joint_states, 3 joint(s)' in out
    assert 'largest link errors: rh_ffmiddle' in out or 'largest link errors: rh_ffdistal' in out


def test_bad_input_is_one_line_and_touches_no_file(tmp_path):
    bag = paired_bag(tmp_path / 'pair')
    earlier = tmp_path / 'earlier.mp4'
    earlier.write_bytes(b'mine')
    assert 'exists' in one_error(run('--bag', bag, '--video', earlier))
    assert earlier.read_bytes() == b'mine'
    video = tmp_path / 'v.mp4'
    times = 1.0 + np.arange(0.0, 1.0, 0.01)
    real_only = write_joint_states(tmp_path / 'real_only', [JointStateRecording.from_arrays(
        times, ['rh_FFJ3'], times[:, None], topic='/joint_states')])
    assert 'no sim stream; give --trajectory' in one_error(run('--bag', real_only, '--video', video))
    for argv, words in ((('--size', '101x80'), 'even'), (('--size', '10x10'), '16 to 4096'), (('--size', 'big'), 'WxH'),
                        (('--start', '99'), 'outside the motion'), (('--camera', 'nope'), 'no such camera'),
                        (('--out', tmp_path / 'o'), '--out is for the PNGs'), (('--camera', '1,2,3,4'), 'AZ,EL')):
        assert words in one_error(run('--bag', bag, '--video', video, *argv)), argv
    assert 'unknown format' in one_error(run('--bag', bag, '--video', tmp_path / 'v.avi'))
    assert 'inside the bag' in one_error(run('--bag', bag, '--video', bag / 'v.mp4'))
    assert '--trajectory needs --video' in one_error(run('--bag', bag, '--trajectory', 'x.yaml:y'))
    assert not video.exists() and sorted(p.name for p in tmp_path.iterdir()) == ['earlier.mp4', 'pair', 'real_only']
    code, out, _ = run('--bag', bag, '--video', earlier, '--force', '--fps', 2, '--size', '64x48')
    assert code == 0 and read_frames(earlier).shape == (5, 48, 64, 3)


def test_the_model_drawn_must_hold_the_bags_joints(tmp_path):
    bag = paired_bag(tmp_path / 'pair')
    assert 'moves a body' in one_error(run('--bag', bag, '--video', tmp_path / 'v.mp4', '--model',
                                           builtin_model_path('ur5')))
    assert not (tmp_path / 'v.mp4').exists()


def read_frames(path: Path) -> np.ndarray:
    """(F, H, W, 3) uint8 of a video file (MP4 through imageio-ffmpeg, GIF through Pillow)."""
    if path.suffix == '.gif':
        with Image.open(path) as gif:
            return np.stack([np.asarray(gif.seek(k) or gif.convert('RGB')) for k in range(gif.n_frames)])
    reader = imageio_ffmpeg.read_frames(str(path))
    width, height = next(reader)['size']
    return np.stack([np.frombuffer(frame, np.uint8).reshape(height, width, 3) for frame in reader])


def test_the_calibration_report_draws_each_hold_out_before_and_after(real_bag, trajectories_yaml, tmp_path,
                                                                      monkeypatch, caplog):
    from shadow_twin.calibration.engine import report
    monkeypatch.setattr(report, 'REPORT_VIDEO', VideoSettings(fps=2.0, width=64, height=48))
    setup = plot_cli.load_setup(_setup_args(real_bag, trajectories_yaml))
    part = setup.evaluator
    damping = {setup.twin.target('joint', 'rh_FFJ3', 'damping'): 1.0}
    names = report.holdout_videos(tmp_path, setup.twin, setup.controller, [part], damping)
    assert names == [f'holdout_1_{report._safe(part.label)}_{when}.mp4' for when in ('before', 'after')]
    before, after = (read_frames(tmp_path / name) for name in names)
    span = part.time_base[-1] - part.time_base[0]
    assert before.shape == after.shape == (int(np.floor(span * 2 + 1e-9)), 48, 64, 3)
    assert np.abs(before.astype(int) - after.astype(int)).max() > 30      # the first finger moves otherwise
    monkeypatch.setattr(report, 'render_video', _no_gl)
    assert report.holdout_videos(tmp_path / 'none', setup.twin, setup.controller, [part], damping) == []
    assert 'no video of hold-out' in caplog.text and not (tmp_path / 'none').exists()


def _setup_args(bag, trajectories):
    parser = plot_cli.OneLineParser()
    plot_cli.add_input_arguments(parser)
    return parser.parse_args(['--bag', str(bag), '--trajectory', f'{trajectories}:hand_closing', '--joints', '*'])


def _no_gl(*args, **kwargs):
    from shadow_twin.visual.video_gl import RenderingUnavailable
    raise RenderingUnavailable('no OpenGL backend for offscreen rendering (egl: none)')


def test_the_demo_draws_its_unseen_trajectory_before_and_after(tmp_path, monkeypatch):
    demo = pytest.importorskip('shadow_twin.cli.demo')     # rclpy and the messages: the demo's own imports
    monkeypatch.setattr(demo, 'DEMO_VIDEO', VideoSettings(fps=5.0, width=96, height=72))
    from shadow_twin.calibration.recordings.recording import (JOINT_STATE, TRAJECTORY, joint_state_messages,
                                                              trajectory_cdr, write_serialized_bag)
    from shadow_twin.common.paths import config_path
    from shadow_twin.common.stamps import to_nanoseconds
    from shadow_twin.control.trajectory import load_waypoint_yaml
    trajectory = load_waypoint_yaml(config_path('trajectories', 'calibration.yaml'), 'slow_grasp')
    t0, start = 1_700_000_000.0, 1_700_000_001.0
    times = t0 + np.arange(0.0, trajectory.duration + 3.0, 0.01)
    commanded, _, _ = trajectory.with_start(np.zeros(len(trajectory.joint_names))).sample(
        np.clip(times - start, 0.0, None), 'auto')
    row = {'trajectory': 'slow_grasp'}
    for when, lag in (('before', 0.2), ('after', 0.0)):
        real = JointStateRecording.from_arrays(times, trajectory.joint_names, commanded, topic='/joint_states')
        sim = JointStateRecording.from_arrays(times, trajectory.joint_names, commanded * (1 - lag),
                                              topic='/sim/joint_states')
        messages = sorted(joint_state_messages(real) + joint_state_messages(sim) + [
            ('/calibration_node/commanded_trajectory', to_nanoseconds(t0), trajectory_cdr(trajectory, start))],
            key=lambda m: m[1])
        row[f'{when}_bag'] = str(write_serialized_bag(tmp_path / f'{when}', {
            '/joint_states': JOINT_STATE, '/sim/joint_states': JOINT_STATE,
            '/calibration_node/commanded_trajectory': TRAJECTORY}, messages))
    out = tmp_path / 'demo'
    assert demo.unseen_videos(out, row) == ['videos/slow_grasp_before.mp4', 'videos/slow_grasp_after.mp4']
    before, after = (read_frames(out / 'videos' / f'slow_grasp_{when}.mp4') for when in ('before', 'after'))
    frames = int(round((trajectory.duration + 1.0) * demo.DEMO_VIDEO.fps))
    assert before.shape == after.shape == (frames, demo.DEMO_VIDEO.height, demo.DEMO_VIDEO.width, 3)
    assert np.abs(before[-8].astype(int) - after[-8].astype(int)).max() > 30      # the lag drawn only before
