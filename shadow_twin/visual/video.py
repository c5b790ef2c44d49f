"""A video of a recording: the robot's real motion as a ghost against the sim's motion, each link of the ghost
coloured by its sim-real error, with the time stamp, the links' errors (mm) and a colour legend on every frame
(``shadow-twin plot --video``; the calibration report's and the demo's before/after videos).

This module takes arrays (a :class:`Motion`: times, joint names, real and sim positions, optionally the base's
planar poses) and a model; where they come from (a bag holding both streams, or a recording replayed in the
sim) is the caller's (``shadow_twin.cli.plot``, ``shadow_twin.calibration.engine.report``).

The frames are drawn offscreen by MuJoCo (:mod:`.video_render`) in an OpenGL context of :mod:`.video_gl`: EGL,
or OSMesa where EGL is missing; ``MUJOCO_GL`` (``egl``, ``osmesa``, ``glfw``), set any time before the first
video, forces one (unlike :class:`mujoco.Renderer`, which reads it when ``mujoco`` is first imported). Text
and legend: :mod:`.video_overlay`; files: :mod:`.video_writer` (MP4 or GIF, written atomically).

Units: s, rad, m, px.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import mujoco
import numpy as np
from tqdm import tqdm

from shadow_twin.common.errors import ConfigError, RecordingError
from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.visual.colours import ErrorScale
from shadow_twin.visual.video_overlay import Overlay
from shadow_twin.visual.video_render import CameraView, GhostRenderer, linked_bodies
from shadow_twin.visual.video_writer import VideoWriter, check_video_path

log = logging.getLogger(__name__)
#: Frames sampled to fit the camera's view to the whole video.
FIT_SAMPLES = 40


@dataclass(frozen=True)
class Motion:
    """Real and simulated joint positions on one time axis.

    Attributes:
        times: (T,) s, strictly increasing, T >= 2 (any origin: the time stamps drawn are these).
        joint_names: (J,) ROS joint names.
        real, sim: (T, J) rad (m for a slide joint); NaN: not known then (the joint keeps its last known value).
        real_base, sim_base: (T, 3) the base's planar pose (x m, y m, yaw rad, unwrapped), or None (the base
            stays where the model has it).
    Raises:
        RecordingError: shapes that disagree, fewer than two samples, times not finite or not increasing,
            no joint.
    """

    times: np.ndarray
    joint_names: Sequence[str]
    real: np.ndarray
    sim: np.ndarray
    real_base: np.ndarray | None = None
    sim_base: np.ndarray | None = None

    def __post_init__(self) -> None:
        times = np.asarray(self.times, dtype=float)
        if times.ndim != 1 or times.size < 2 or not np.all(np.isfinite(times)) or np.any(np.diff(times) <= 0):
            raise RecordingError(f'a motion needs at least 2 finite, increasing times, got {times.size}')
        if not len(self.joint_names):
            raise RecordingError('a motion needs at least one joint')
        for what in ('real', 'sim'):
            shape = np.shape(getattr(self, what))
            if shape != (times.size, len(self.joint_names)):
                raise RecordingError(f'motion: {what} positions are {shape}, expected ({times.size}, '
                                     f'{len(self.joint_names)}) (times, joints)')
        for what in ('real_base', 'sim_base'):
            value = getattr(self, what)
            if value is not None and np.shape(value) != (times.size, 3):
                raise RecordingError(f'motion: {what} is {np.shape(value)}, expected ({times.size}, 3)')

    @property
    def start(self) -> float:
        """s: the first time."""
        return float(self.times[0])

    @property
    def end(self) -> float:
        """s: the last time."""
        return float(self.times[-1])

    def at(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """(real (F, J), sim (F, J), real base (F, 3) or None, sim base or None) at ``times`` ((F,) s within
        [start, end]), linearly interpolated (a NaN sample makes its neighbours' interval NaN)."""
        def resample(values):
            if values is None:
                return None
            values = np.asarray(values, dtype=float)
            return np.stack([np.interp(times, self.times, values[:, k]) for k in range(values.shape[1])], axis=1)
        return resample(self.real), resample(self.sim), resample(self.real_base), resample(self.sim_base)


@dataclass(frozen=True)
class VideoSettings:
    """How a video is drawn.

    Attributes:
        fps: frames per second of the video (and of the motion's time: the video plays in real time).
        width, height: px.
        start: s on the motion's clock where the video begins (None: its first time).
        seconds: how long it lasts, s (None: to the motion's end).
        camera: the view (:class:`CameraView`).
        scale: the error colours (full scale m, the ghost's alpha).
        title: a line drawn under the time stamp ('' for none).
    """

    fps: float = 25.0
    width: int = 640
    height: int = 480
    start: float | None = None
    seconds: float | None = None
    camera: CameraView = field(default_factory=CameraView)
    scale: ErrorScale = field(default_factory=ErrorScale)
    title: str = ''

    def frame_times(self, motion: Motion) -> np.ndarray:
        """(F,) s: the instants of ``motion`` each frame shows, every 1/fps s from ``start``.

        Raises ConfigError: a start outside the motion, seconds not positive, a span shorter than one frame."""
        start = motion.start if self.start is None else float(self.start)
        if not (np.isfinite(start) and motion.start - 1e-9 <= start < motion.end):
            raise ConfigError(f'video start {start:g} s is outside the motion ({motion.start:g} to {motion.end:g} s)')
        if self.seconds is not None and not (np.isfinite(self.seconds) and self.seconds > 0):
            raise ConfigError(f'video length must be positive, got {self.seconds} s')
        end = motion.end if self.seconds is None else min(motion.end, start + float(self.seconds))
        count = int(np.floor((end - start) * self.fps + 1e-9))
        if count < 1:
            raise ConfigError(f'{end - start:.3g} s from {start:g} s is shorter than one frame at {self.fps:g} fps')
        return np.clip(start + np.arange(count) / self.fps, motion.start, motion.end)


@dataclass(frozen=True)
class VideoSummary:
    """What :func:`render_video` wrote: ``path``, ``frames``, ``width`` x ``height`` px at ``fps``; ``link_names``
    (L,) and ``max_errors`` (L,) m: each link's largest error over the video; ``render_s``: s drawing frames
    (rendering and overlay, not the encoding)."""

    path: Path
    frames: int
    width: int
    height: int
    fps: float
    link_names: list[str]
    max_errors: np.ndarray
    render_s: float


@dataclass(frozen=True)
class VideoFrame:
    """One frame of a video: ``time`` s (the motion's clock), ``image`` (H, W, 3) uint8 RGB with the overlay,
    ``errors`` (L,) m each link's error, ``pixels`` (L, 2) px where each link's origin is drawn in the sim
    (x right, y down; :meth:`GhostRenderer.pixels`)."""

    time: float
    image: np.ndarray
    errors: np.ndarray
    pixels: np.ndarray


def iter_frames(model: mujoco.MjModel, motion: Motion, settings: VideoSettings,
                joint_map: JointNameMap | None = None) -> Iterator[VideoFrame]:
    """The video's frames, one by one (:class:`VideoFrame`), the camera fitted to the links over the whole span.

    Raises:
        ConfigError: see :meth:`VideoSettings.frame_times` and :class:`GhostRenderer`.
        RenderingUnavailable: no OpenGL backend.
    """
    times = settings.frame_times(motion)
    real, sim, real_base, sim_base = motion.at(times)
    names = list(motion.joint_names)
    base = motion.real_base is not None or motion.sim_base is not None
    with GhostRenderer(model, settings.width, settings.height, names, joint_map, base, settings.camera,
                       settings.scale) as renderer:
        overlay = Overlay(settings.width, settings.height, settings.scale, renderer.link_names, settings.title)

        def put(k: int) -> np.ndarray:
            return renderer.set(dict(zip(names, sim[k])), dict(zip(names, real[k])),
                                None if sim_base is None else sim_base[k], None if real_base is None else real_base[k])

        points = []
        for k in np.unique(np.linspace(0, len(times) - 1, min(len(times), FIT_SAMPLES)).round().astype(int)):
            put(k)
            points.append(renderer.link_positions())
        renderer.fit_camera(np.vstack(points))
        for k, t in enumerate(times):
            errors = put(k)
            image = overlay.draw(renderer.render(errors), float(t), errors)
            yield VideoFrame(float(t), image, errors, renderer.pixels(renderer.sim.xpos[renderer.links]))


def render_video(path: str | os.PathLike, model: mujoco.MjModel, motion: Motion, settings: VideoSettings | None = None,
                 joint_map: JointNameMap | None = None, progress: bool = False) -> VideoSummary:
    """Write the video of ``motion`` drawn with ``model`` into ``path`` (``.mp4`` or ``.gif``, atomically: an
    earlier file stays whole until the new one is complete; the caller decides whether one may be replaced).

    Args:
        path: the video file.
        model: the model both configurations are drawn with (the sim's).
        motion: what is drawn.
        settings: size, frame rate, span, camera (default :class:`VideoSettings`).
        joint_map: ROS -> MJCF joint names (None: identity).
        progress: a tqdm bar on stderr.
    Returns:
        VideoSummary.
    Raises:
        ConfigError: a bad path or settings (:func:`~shadow_twin.visual.video_writer.check_video_path`,
            :meth:`VideoSettings.frame_times`), before anything is drawn.
        RenderingUnavailable: no OpenGL backend.
        OSError: the file cannot be written.
    """
    settings = settings or VideoSettings()
    path = check_video_path(path, settings.width, settings.height, settings.fps)
    count = len(settings.frame_times(motion))
    frames = iter_frames(model, motion, settings, joint_map)
    began = time.perf_counter()
    frame = next(frames)           # the renderer made (every check done) before the file is opened
    drawing, worst = time.perf_counter() - began, None
    with VideoWriter(path, settings.width, settings.height, settings.fps) as writer, \
            tqdm(total=count, desc=f'video {path.name}', unit='frame', disable=not progress, leave=False) as bar:
        while frame is not None:
            worst = frame.errors.copy() if worst is None else np.fmax(worst, frame.errors)
            writer.write(frame.image)
            bar.update()
            began = time.perf_counter()
            frame = next(frames, None)
            drawing += time.perf_counter() - began
    names = _link_names(model, motion, joint_map)
    log.info('wrote %s: %d frames, %dx%d px at %g fps, %.1f s', path, count, settings.width, settings.height,
             settings.fps, count / settings.fps)
    return VideoSummary(path, count, settings.width, settings.height, settings.fps, names, worst, drawing)


def _link_names(model: mujoco.MjModel, motion: Motion, joint_map: JointNameMap | None) -> list[str]:
    """The names of the ghost's links of ``motion`` (as :class:`GhostRenderer` orders them)."""
    links = linked_bodies(model, joint_map, list(motion.joint_names),
                          motion.real_base is not None or motion.sim_base is not None)
    return [model.body(b).name or f'body{b}' for b in links]
