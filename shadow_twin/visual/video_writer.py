"""Video files written frame by frame, atomically: MP4 (H.264, yuv420p, through the ffmpeg binary that
``imageio-ffmpeg`` ships) or GIF (Pillow), chosen by the file's suffix.

Frames go to a temporary file beside the target (``.<name>.<random>.tmp<suffix>``), which is synced and renamed
over it only when the video is complete (:meth:`VideoWriter.close`); a failure or an ``abort`` removes it, so an
earlier video stays whole. Units: px, frames per second.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import imageio_ffmpeg
import numpy as np
from PIL import Image

from shadow_twin.common.errors import ConfigError

#: The formats written, by suffix.
FORMATS = ('.mp4', '.gif')


def check_video_path(path: str | os.PathLike, width: int, height: int, fps: float) -> Path:
    """``path`` as a Path, checked before any frame is drawn. Raises ConfigError: a suffix not in
    :data:`FORMATS`, an odd width or height for MP4 (H.264 in yuv420p halves the colour planes), a frame rate
    that is not positive and finite, a path that is a directory."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ConfigError(f'video {path}: unknown format {path.suffix or "(no suffix)"!r}; write '
                          f'{" or ".join(FORMATS)}')
    if suffix == '.mp4' and (width % 2 or height % 2):
        raise ConfigError(f'video {path}: MP4 needs an even width and height, got {width}x{height} px')
    if not (np.isfinite(fps) and fps > 0):
        raise ConfigError(f'video {path}: the frame rate must be positive, got {fps}')
    if path.is_dir():
        raise ConfigError(f'video {path} is a directory')
    return path


class VideoWriter:
    """Writes ``width`` x ``height`` px frames at ``fps`` into ``path`` (see the module doc); a context manager
    that closes (complete) on success and aborts on an exception.

    Raises:
        ConfigError: see :func:`check_video_path`.
        OSError: the folder cannot be written (ffmpeg's own failures are OSError or RuntimeError).
    """

    def __init__(self, path: str | os.PathLike, width: int, height: int, fps: float) -> None:
        self.path = check_video_path(path, width, height, fps)
        self.width, self.height, self.fps = int(width), int(height), float(fps)
        self.frames = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        suffix = self.path.suffix.lower()
        handle, name = tempfile.mkstemp(prefix=f'.{self.path.name}.', suffix=f'.tmp{suffix}', dir=self.path.parent)
        os.close(handle)
        self._tmp = Path(name)
        self._gif: list[Image.Image] | None = None
        self._mp4 = None
        if suffix == '.gif':
            self._gif = []
        else:
            self._mp4 = imageio_ffmpeg.write_frames(str(self._tmp), (self.width, self.height), fps=self.fps,
                                                    codec='libx264', pix_fmt_in='rgb24', pix_fmt_out='yuv420p',
                                                    macro_block_size=2, ffmpeg_log_level='error')
            self._mp4.send(None)

    def write(self, frame: np.ndarray) -> None:
        """Append one (H, W, 3) uint8 RGB frame. Raises ValueError for another shape."""
        frame = np.asarray(frame)
        if frame.shape != (self.height, self.width, 3) or frame.dtype != np.uint8:
            raise ValueError(f'a frame must be ({self.height}, {self.width}, 3) uint8, got {frame.shape} {frame.dtype}')
        if self._gif is not None:
            self._gif.append(Image.fromarray(frame).quantize(colors=255, method=Image.Quantize.MEDIANCUT))
        else:
            self._mp4.send(np.ascontiguousarray(frame))
        self.frames += 1

    def close(self) -> Path:
        """Finish the file and rename it over ``path``; returns ``path``. Raises ValueError without a frame."""
        try:
            if not self.frames:
                raise ValueError(f'video {self.path}: no frame to write')
            if self._gif is not None:
                first, *rest = self._gif
                first.save(self._tmp, format='GIF', save_all=True, append_images=rest, loop=0,
                           duration=max(20, int(round(1000 / self.fps))), optimize=False)
            else:
                self._mp4.close()
                self._mp4 = None
            with open(self._tmp, 'rb') as handle:
                os.fsync(handle.fileno())
            os.chmod(self._tmp, 0o666 & ~_umask())
            os.replace(self._tmp, self.path)
        except BaseException:
            self.abort()
            raise
        return self.path

    def abort(self) -> None:
        """Drop what was written (the target is left as it was)."""
        if self._mp4 is not None:
            try:
                self._mp4.close()
            except Exception:       # ffmpeg may already be gone: nothing to keep either way
                pass
            self._mp4 = None
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> 'VideoWriter':
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
