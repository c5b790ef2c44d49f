"""Section ``video`` of the view benchmark: what a frame of ``shadow-twin plot --video`` costs (issue 38).

For the hand (the built-in Shadow Hand E) and the cell (MiR250, cabinet, UR5, hand: ``build_cell_spec``), in one
run: the time to draw a video frame at the default size (``plot --video``'s, 640x480 px) -- the sim and the
real configurations set, the scene with the ghost drawn offscreen and read back, the overlay drawn
(:func:`shadow_twin.visual.video.iter_frames`) -- median and 90th percentile over the frames, and the time to
encode one (H.264, ``VideoWriter``); beside them the model's physics step (``mj_step`` from rest, median over
batches), and the ratio of a frame to a step: how many steps a frame costs on this machine.

The motion drawn: every hinge and slide joint of the model swinging (0.3 rad, 1 Hz), the real lagging the sim by
0.1 s; on the cell the base driving a 1 m circle, the real 5 cm beside the sim. No target: it prints, and checks
only that a frame was drawn (not one colour). The GL backend used is printed (``MUJOCO_GL`` chooses one).

Usage: ``.venv/bin/python benchmarks/view.py --sections video [--video-frames 60] [--video-size 640x480]``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import mujoco
import numpy as np

from shadow_twin.cli.plot import DEFAULT_SIZE, parse_size
from shadow_twin.model.cell.assembly import build_cell_spec, compile_cell
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.visual import video_gl
from shadow_twin.visual.configuration import RobotConfiguration
from shadow_twin.visual.video import Motion, VideoSettings, iter_frames
from shadow_twin.visual.video_writer import VideoWriter

#: Physics steps per timed batch, and batches.
STEP_BATCH, STEP_BATCHES = 50, 20


def add_arguments(parser) -> None:
    """``--video-frames`` (frames timed per model) and ``--video-size`` (WxH px)."""
    parser.add_argument('--video-frames', type=int, default=60, help='video: frames timed per model (default 60)')
    parser.add_argument('--video-size', default=DEFAULT_SIZE,
                        help=f'video: frame size WxH px (default {DEFAULT_SIZE}, plot --video\'s)')


def step_time(model: mujoco.MjModel) -> float:
    """s: the median time of one ``mj_step`` of ``model`` from rest (batches of :data:`STEP_BATCH`)."""
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    batches = []
    for _ in range(STEP_BATCHES):
        began = time.perf_counter()
        for _ in range(STEP_BATCH):
            mujoco.mj_step(model, data)
        batches.append((time.perf_counter() - began) / STEP_BATCH)
    return float(np.median(batches))


def swinging(model: mujoco.MjModel, seconds: float, base: bool) -> Motion:
    """Every scalar joint of ``model`` swinging (module doc); with ``base``, the base on its circle."""
    joints = sorted(RobotConfiguration(model).addresses)
    times = np.arange(0.0, seconds + 0.01, 0.01)
    phase = np.arange(len(joints)) * 0.3

    def angles(t: np.ndarray) -> np.ndarray:
        return 0.3 * np.sin(2 * np.pi * t[:, None] + phase[None])

    def circle(t: np.ndarray, offset: float) -> np.ndarray:
        angle = 0.5 * t
        return np.stack([(1.0 + offset) * np.sin(angle), (1.0 + offset) * (1 - np.cos(angle)), angle], axis=1)
    return Motion(times, joints, angles(times - 0.1), angles(times),
                  circle(times, 0.05) if base else None, circle(times, 0.0) if base else None)


def frame_times(model: mujoco.MjModel, motion: Motion, settings: VideoSettings) -> tuple[list[float], list, float]:
    """(s each frame took to draw, the frames' images, s per frame to encode them as MP4)."""
    drawn, images = [], []
    frames = iter_frames(model, motion, settings)
    while True:
        began = time.perf_counter()
        frame = next(frames, None)
        if frame is None:
            break
        drawn.append(time.perf_counter() - began)
        images.append(frame.image)
    with tempfile.TemporaryDirectory() as folder:
        began = time.perf_counter()
        with VideoWriter(Path(folder) / 'bench.mp4', settings.width, settings.height, settings.fps) as writer:
            for image in images:
                writer.write(image)
        encode = (time.perf_counter() - began) / len(images)
    return drawn[1:], images, encode          # the first frame makes the GL context: not a frame's cost


def run(check, args) -> None:
    """The video section (module doc)."""
    width, height = parse_size(args.video_size)
    settings = VideoSettings(fps=25.0, width=width, height=height)
    seconds = (args.video_frames + 1) / settings.fps
    print(f'== video: a frame of plot --video at {width}x{height} px, {args.video_frames} frames per model '
          f'(no target)', flush=True)
    for name, model, base in (('hand', TwinModel().model, False), ('cell', compile_cell(build_cell_spec()), True)):
        step = step_time(model)
        drawn, images, encode = frame_times(model, swinging(model, seconds, base), settings)
        median, p90 = float(np.median(drawn)), float(np.percentile(drawn, 90))
        print(f'  {name} ({model.ngeom} geoms, {model.nbody} bodies): frame drawn median {median * 1e3:.1f} ms, '
              f'p90 {p90 * 1e3:.1f} ms; encoded {encode * 1e3:.1f} ms; physics step {step * 1e6:.0f} us: a frame '
              f'costs {median / step:.0f} steps ({video_gl.backend()})', flush=True)
        check(len(images) > 0 and int(np.ptp(images[len(images) // 2])) > 0,
              f'  {name}: a frame was drawn ({len(images)} frames, not one colour)')
