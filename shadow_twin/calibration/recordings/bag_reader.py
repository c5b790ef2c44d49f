"""Opening ROS 1 / ROS 2 bags with ``rosbags`` (ROS 2 Jazzy typestore), and one error for a
damaged one: every reader of the package (joint states, commanded trajectories, base topics)
opens bags with :func:`open_bag_reader` and iterates their messages inside :func:`bag_errors`,
so a damaged bag is one line naming it for every command."""

from __future__ import annotations

import sqlite3
import struct
from contextlib import contextmanager
from pathlib import Path, PosixPath

from rosbags.highlevel import AnyReader, AnyReaderError
from rosbags.rosbag1 import ReaderError as Reader1Error
from rosbags.rosbag2 import ReaderError as Reader2Error
from rosbags.typesys import Stores, get_typestore

from shadow_twin.common.errors import RecordingError


def typestore():
    """The rosbags typestore pinned to ROS 2 Jazzy."""
    return get_typestore(Stores.ROS2_JAZZY)


class _Ros2BagDirectory(PosixPath):
    """A ROS 2 bag directory whatever its name: rosbags' ``AnyReader`` takes any path ending in
    ``.bag`` for a ROS 1 bag, so a ROS 2 bag directory named ``run.bag`` gets an empty suffix."""

    @property
    def suffix(self) -> str:
        return '' if self.is_dir() else super().suffix


def is_ros2_bag_directory(path: Path) -> bool:
    """A directory holding ``metadata.yaml``: a ROS 2 bag, whatever its name."""
    return path.is_dir() and (path / 'metadata.yaml').is_file()


#: What reading a damaged bag raises inside rosbags and its storage libraries (a corrupt chunk,
#: record or CDR message): turned into a RecordingError naming the bag by :func:`bag_errors`.
BAG_READ_ERRORS = (AnyReaderError, Reader1Error, Reader2Error, OverflowError, struct.error, ValueError,
                   KeyError, IndexError, UnicodeDecodeError, EOFError, MemoryError, OSError, sqlite3.Error,
                   TypeError)


@contextmanager
def bag_errors(path: Path, doing: str = 'reading'):
    """Turn any error of ``BAG_READ_ERRORS`` raised while reading ``path`` into one RecordingError:
    ``<bag>: unreadable bag (damaged?): <what rosbags said>`` (one line). A RecordingError passes."""
    try:
        yield
    except RecordingError:
        raise
    except BAG_READ_ERRORS as exc:
        detail = ' '.join(str(exc).split()) or type(exc).__name__
        raise RecordingError(f'{path}: unreadable bag, damaged while {doing} '
                             f'({type(exc).__name__}: {detail})') from None


def open_bag_reader(path: Path):
    """An opened rosbags ``AnyReader`` of a ROS 1 or ROS 2 bag (Jazzy typestore); the caller closes it.
    A directory with ``metadata.yaml`` is read as a ROS 2 bag whatever its name (``run.bag/``).
    Raises RecordingError for a missing or unreadable bag. Iterating its messages can still
    meet damage: wrap it in :func:`bag_errors`."""
    if not path.exists():
        raise RecordingError(f'bag not found: {path}')
    source = _Ros2BagDirectory(path) if is_ros2_bag_directory(path) else path
    try:
        reader = AnyReader([source], default_typestore=typestore())
        reader.open()
    except Exception as exc:
        raise RecordingError(f'{path}: not a readable ROS 1 or ROS 2 bag ({" ".join(str(exc).split())})') from None
    return reader
