"""The videos' core (shadow_twin/visual/video*.py) on a small arm: a motion's arrays and frame times, the camera
views, the links a motion moves, the ghost drawn where the real arm is and coloured by its error, the overlay, the
MP4 and GIF files (frame count, size, written atomically) and the GL backend's order and its one-line failure."""

from __future__ import annotations

import imageio_ffmpeg
import mujoco
import numpy as np
import pytest
from PIL import Image

from shadow_twin.common.errors import ConfigError, RecordingError
from shadow_twin.visual import video_gl
from shadow_twin.visual.colours import ErrorScale
from shadow_twin.visual.video import Motion, VideoSettings, iter_frames, render_video
from shadow_twin.visual.video_overlay import Overlay
from shadow_twin.visual.video_render import CameraView, GhostRenderer, linked_bodies
from shadow_twin.visual.video_writer import VideoWriter, check_video_path

XML = """
<mujoco>
  <worldbody>
    <light pos="0 0 2" dir="0 0 -1"/>
    <camera name="front" pos="0.15 -1.2 0.1" xyaxes="1 0 0 0 0 1"/>
    <geom name="stand" type="box" size="0.05 0.05 0.05" pos="0 0 -0.1" rgba="0.5 0.5 0.5 1"/>
    <body name="arm" pos="0 0 0">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" rgba="0.1 0.1 0.9 1"/>
      <body name="hand" pos="0.3 0 0">
        <joint name="slide" type="slide" axis="1 0 0"/>
        <geom type="box" size="0.04 0.04 0.04" rgba="0.1 0.1 0.9 1"/>
      </body>
    </body>
    <body name="can" pos="0.5 0.3 0">
      <freejoint/>
      <geom type="cylinder" size="0.03 0.05" rgba="0.8 0.8 0.8 1"/>
    </body>
  </worldbody>
</mujoco>
"""
SMALL = dict(width=240, height=180)


@pytest.fixture(scope='module')
def model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(XML)


def swing(seconds: float = 1.0, rate: float = 50.0, lag: float = 0.3) -> Motion:
    """The arm swinging up 0 -> -1 rad (about y: up); the sim ``lag`` of the real angle behind (sim = real (1 - lag))."""
    times = np.arange(0.0, seconds + 1e-9, 1.0 / rate)
    real = np.stack([-times / seconds, np.zeros_like(times)], axis=1)
    return Motion(times, ['hinge', 'slide'], real, real * np.array([1.0 - lag, 1.0]))


def test_a_motion_checks_its_arrays_and_interpolates():
    motion = swing()
    real, sim, real_base, sim_base = motion.at(np.array([0.25, 0.5]))
    assert real[:, 0] == pytest.approx([-0.25, -0.5]) and sim[:, 0] == pytest.approx([-0.175, -0.35])
    assert real_base is None and sim_base is None
    times = np.array([0.0, 0.1, 0.2])
    for bad in (dict(times=times[:1], real=np.zeros((1, 1)), sim=np.zeros((1, 1))),
                dict(times=times[::-1], real=np.zeros((3, 1)), sim=np.zeros((3, 1))),
                dict(times=times, real=np.zeros((3, 2)), sim=np.zeros((3, 1))),
                dict(times=times, real=np.zeros((3, 1)), sim=np.zeros((3, 1)), real_base=np.zeros((3, 2)))):
        with pytest.raises(RecordingError):
            Motion(joint_names=['hinge'], **bad)


def test_frame_times_follow_the_rate_the_start_and_the_length():
    motion = swing(seconds=2.0)
    assert len(VideoSettings(fps=10).frame_times(motion)) == 20
    times = VideoSettings(fps=4, start=0.5, seconds=1.0).frame_times(motion)
    assert times.tolist() == pytest.approx([0.5, 0.75, 1.0, 1.25])
    assert len(VideoSettings(fps=10, start=1.5, seconds=5.0).frame_times(motion)) == 5    # cut at the end
    for bad in (dict(start=2.5), dict(start=-1.0), dict(seconds=0.0), dict(seconds=0.05, fps=10)):
        with pytest.raises(ConfigError):
            VideoSettings(**bad).frame_times(motion)


def test_camera_views_parse_angles_a_distance_or_a_name():
    assert (CameraView.parse('30,-10').azimuth, CameraView.parse('30,-10').elevation) == (30.0, -10.0)
    assert CameraView.parse('30,-10,2.5').distance == 2.5 and CameraView.parse('30,-10').distance is None
    assert CameraView.parse('front').name == 'front' and CameraView.parse(None) == CameraView()
    for bad in ('1,2,3,4', '1,nan', '1,-2,0', 'a,b'):
        with pytest.raises(ConfigError):
            CameraView.parse(bad)


def test_the_links_are_the_bodies_the_motion_moves(model):
    names = lambda ids: [model.body(b).name for b in ids]      # noqa: E731
    assert names(linked_bodies(model, None, ['hinge'])) == ['arm', 'hand']
    assert names(linked_bodies(model, None, ['slide', 'unknown'])) == ['hand']    # the can, the stand: never
    assert linked_bodies(model, None, ['unknown']).size == 0
    with pytest.raises(ConfigError, match='moves a body'):
        GhostRenderer(model, 32, 32, ['unknown'])


def test_the_ghost_is_drawn_where_the_real_arm_is_in_its_error_colour(model):
    with GhostRenderer(model, 120, 90, ['hinge', 'slide'], camera=CameraView('front')) as renderer:
        errors = renderer.set({'hinge': 0.0}, {'hinge': -0.8})           # the real arm raised, the sim's level
        chord = np.hypot(1 - np.cos(0.8), np.sin(0.8))      # per m from the hinge: the centres of mass turn
        assert errors[0] == pytest.approx(0.15 * chord) and errors[1] == pytest.approx(0.3 * chord)
        image = renderer.render(errors).astype(int)
        beyond = 0.035 * np.array([[1.0, 0.0, 0.0], [np.cos(0.8), 0.0, np.sin(0.8)]])   # in the box, past the arm
        (sim_x, sim_y), (real_x, real_y) = renderer.pixels(
            np.array([renderer.sim.xpos[2], renderer.real.xpos[2]]) + beyond).round().astype(int)
        assert real_y < sim_y - 10                                          # raised: higher in the frame
        r, g, b = image[real_y, real_x]
        assert r > g + 20 and r > b + 20                                    # red: far beyond the 2 cm scale
        r, g, b = image[sim_y, sim_x]
        assert b > r + 20                                                   # the sim's own blue, solid
        still = renderer.render(renderer.set({'hinge': 0.0}, {'hinge': 0.0})).astype(int)
        assert np.abs(still[real_y - 2:real_y + 3, real_x - 2:real_x + 3] - image[real_y - 2:real_y + 3,
                                                                                  real_x - 2:real_x + 3]).mean() > 10
    with pytest.raises(ConfigError, match="no such camera.*'front'"):
        GhostRenderer(model, 32, 32, ['hinge'], camera=CameraView('back'))
    with pytest.raises(ConfigError, match='at least 16'):
        GhostRenderer(model, 8, 32, ['hinge'])


def test_the_overlay_keeps_the_middle_clear_and_lists_only_known_errors():
    names = ['arm', 'hand', 'finger']
    overlay = Overlay(320, 240, ErrorScale(), names, title='a bag')
    grey = np.full((240, 320, 3), 128, dtype=np.uint8)
    drawn = overlay.draw(grey, 1.25, np.array([0.001, 0.03, np.nan]))
    assert grey.min() == grey.max() == 128                              # the input is left as it was
    changed = np.abs(drawn.astype(int) - 128).sum(axis=2) > 0
    assert changed[:20, :40].any() and changed[-20:, :40].any() and changed[-20:, -40:].any()
    assert not changed[90:150, 120:200].any()
    unknown = overlay.draw(grey, 1.25, np.full(3, np.nan))
    changed_unknown = np.abs(unknown.astype(int) - 128).sum(axis=2) > 0
    assert changed_unknown[:20, :40].any() and not changed_unknown[-30:, :40].any()    # no link to list
    rows = lambda image: np.flatnonzero((np.abs(image[:, :8].astype(int) - 128).sum(axis=(1, 2)) > 0)[120:])  # noqa
    assert len(rows(overlay.draw(grey, 0.0, np.array([0.01, 0.02, 0.03])))) > len(rows(drawn))   # 3 lines > 2


@pytest.mark.parametrize('suffix', ['.mp4', '.gif'])
def test_a_video_file_holds_every_frame_at_its_size(tmp_path, suffix):
    path = tmp_path / f'clip{suffix}'
    with VideoWriter(path, 64, 48, 10.0) as writer:
        for k in range(7):
            writer.write(np.full((48, 64, 3), 30 * k, dtype=np.uint8))
    assert read_frames(path).shape == (7, 48, 64, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]       # no temporary file left


def test_a_failed_video_leaves_the_earlier_file_whole(tmp_path):
    path = tmp_path / 'clip.mp4'
    path.write_bytes(b'earlier')
    with pytest.raises(RuntimeError):
        with VideoWriter(path, 64, 48, 10.0) as writer:
            writer.write(np.zeros((48, 64, 3), dtype=np.uint8))
            raise RuntimeError('stopped')
    with pytest.raises(ValueError, match='no frame'):
        VideoWriter(path, 64, 48, 10.0).close()
    with pytest.raises(ValueError, match='must be'):
        with VideoWriter(path, 64, 48, 10.0) as writer:
            writer.write(np.zeros((48, 62, 3), dtype=np.uint8))
    assert path.read_bytes() == b'earlier' and [p.name for p in tmp_path.iterdir()] == ['clip.mp4']
    for bad, match in ((tmp_path / 'a.avi', 'unknown format'), (tmp_path / 'a.mp4', 'even')):
        with pytest.raises(ConfigError, match=match):
            check_video_path(bad, 63, 48, 10.0)
    (tmp_path / 'dir.gif').mkdir()
    with pytest.raises(ConfigError, match='directory'):
        check_video_path(tmp_path / 'dir.gif', 64, 48, 10.0)
    with pytest.raises(ConfigError, match='frame rate'):
        check_video_path(tmp_path / 'a.gif', 64, 48, 0.0)


def test_a_video_of_a_swing_shows_the_arm_moving_and_its_largest_error(model, tmp_path):
    motion = swing(seconds=1.0, lag=0.3)
    settings = VideoSettings(fps=10, camera=CameraView('front'), **SMALL)
    summary = render_video(tmp_path / 'swing.mp4', model, motion, settings)
    frames = read_frames(summary.path)
    assert frames.shape == (10, SMALL["height"], SMALL["width"], 3) and summary.frames == 10 and summary.link_names == ['arm', 'hand']
    last = 0.9                                                 # the last frame's real angle (rad)
    assert summary.max_errors[1] == pytest.approx(0.6 * np.sin(0.3 * last / 2), rel=1e-6)   # chord of 0.3 x angle
    drawn = list(iter_frames(model, motion, settings))
    (x0, y0), (x1, y1) = drawn[0].pixels[1].round().astype(int), drawn[-1].pixels[1].round().astype(int)
    assert y1 < y0 - 3                                          # the hand rose in the frame
    window = lambda frame, x, y: frame[y - 2:y + 3, x - 2:x + 3].astype(int)     # noqa: E731
    assert np.abs(window(frames[-1], x0, y0) - window(frames[0], x0, y0)).mean() > 15   # where it was
    assert np.abs(window(frames[-1], x1, y1) - window(frames[0], x1, y1)).mean() > 15   # where it is


def test_the_backends_are_tried_in_order_and_their_failure_is_one_line(monkeypatch):
    monkeypatch.delenv('MUJOCO_GL', raising=False)
    assert video_gl._order() == ('egl', 'osmesa')
    monkeypatch.setenv('MUJOCO_GL', 'OSMesa')
    assert video_gl._order() == ('osmesa',)
    monkeypatch.setenv('MUJOCO_GL', 'something')
    assert video_gl._order() == ('egl', 'osmesa')
    tried = []

    def missing(name):
        tried.append(name)
        raise ImportError(f'no {name} here\n(second line)')
    monkeypatch.setattr(video_gl, '_chosen', None)
    monkeypatch.setenv('PYOPENGL_PLATFORM', 'egl')      # as chosen already: nothing of PyOpenGL is forgotten
    monkeypatch.setattr(video_gl.importlib, 'import_module', missing)
    monkeypatch.setattr(video_gl.ctypes.util, 'find_library', lambda name: f'lib{name}.so')
    monkeypatch.delenv('MUJOCO_GL')
    with pytest.raises(video_gl.RenderingUnavailable) as caught:
        video_gl.gl_context(32, 32)
    assert tried == ['mujoco.egl', 'mujoco.osmesa']
    assert 'egl: no mujoco.egl here (second line); osmesa: no mujoco.osmesa here' in str(caught.value)
    assert '\n' not in str(caught.value)
    monkeypatch.setattr(video_gl.ctypes.util, 'find_library', lambda name: None if name == 'OSMesa' else name)
    with pytest.raises(video_gl.RenderingUnavailable, match='egl: no mujoco.egl here.*osmesa: libOSMesa not found'):
        video_gl.gl_context(32, 32)
    assert tried == ['mujoco.egl', 'mujoco.osmesa', 'mujoco.egl']     # a missing library: not imported


def read_frames(path) -> np.ndarray:
    """(F, H, W, 3) uint8 of a video file (MP4 through imageio-ffmpeg, GIF through Pillow)."""
    if str(path).endswith('.gif'):
        with Image.open(path) as gif:
            frames = []
            for k in range(gif.n_frames):
                gif.seek(k)
                frames.append(np.asarray(gif.convert('RGB')))
        return np.stack(frames)
    reader = imageio_ffmpeg.read_frames(str(path))
    width, height = next(reader)['size']
    return np.stack([np.frombuffer(frame, np.uint8).reshape(height, width, 3) for frame in reader])
