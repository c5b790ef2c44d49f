"""Safe file writing: atomic replacement, input fingerprints, writable and exclusive output
directories.

Outputs are written to a temporary file in the destination directory and then
renamed over the target (``os.replace`` is atomic on POSIX), so a crash never
leaves a half-written file, and an earlier good file stays until the new one is
complete.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import stat
import tempfile
from pathlib import Path
from typing import Iterator

from shadow_twin.common.errors import ConfigError

#: Name of the lock file an exclusive output directory holds (see :func:`exclusive_directory`).
LOCK_FILE = '.lock'


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file + fsync + rename).

    Returns the path written. Raises ``OSError`` if the directory is not writable.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f'.{path.name}.', suffix='.tmp', dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; give the usual permissions
        with os.fdopen(fd, 'wb') as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically; see :func:`write_bytes_atomic`."""
    return write_bytes_atomic(path, text.encode('utf-8'))


def sha256_of(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes, or of every file below it for a directory."""
    path = Path(path)
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob('*') if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            digest.update(str(file.relative_to(path)).encode())
        with open(file, 'rb') as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b''):
                digest.update(chunk)
    return digest.hexdigest()


def versioned_path(path: str | os.PathLike) -> Path:
    """Return ``path`` if free, else ``stem.1.suffix``, ``stem.2.suffix``... (first free).

    Used so that a new calibrated model never overwrites an earlier one.
    """
    path = Path(path)
    if not path.exists():
        return path
    index = 1
    while True:
        candidate = path.with_name(f'{path.stem}.{index}{path.suffix}')
        if not candidate.exists():
            return candidate
        index += 1


def check_writable_directory(path: str | os.PathLike, what: str = 'output directory') -> None:
    """Check, without creating anything, that ``path`` is a directory this process can write
    into, or can be created as one (its nearest existing ancestor is a writable directory).

    Raises:
        ConfigError: naming ``what`` and the reason: a file in the way, permission denied,
            or a read-only file system (``access(2)`` reports EROFS even for root).
    """
    path = Path(path)
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f'{what} {path}: {existing} exists and is not a directory')
    if not os.access(existing, os.W_OK | os.X_OK):
        reason = 'read-only file system' if _read_only_fs(existing) else 'permission denied'
        raise ConfigError(f'{what} {path} is not writable ({existing}: {reason})')


def _read_only_fs(path: Path) -> bool:
    return bool(os.statvfs(path).f_flag & os.ST_RDONLY)


@contextlib.contextmanager
def exclusive_directory(path: str | os.PathLike, what: str = 'output directory') -> Iterator[Path]:
    """Create ``path`` if needed and hold an exclusive lock on it while the block runs, so that
    two processes never write one run directory at once.

    The lock is ``fcntl.flock`` on ``<path>/.lock`` (released by the kernel when the process
    ends, even by SIGKILL, so a crashed run never leaves a stale lock); the empty file stays.

    Raises:
        ConfigError: another process holds the lock, or the directory cannot be created.
    """
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        handle = open(path / LOCK_FILE, 'a')
    except OSError as exc:
        raise ConfigError(f'cannot create {what} {path}: {exc.strerror or exc}') from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f'{what} {path} is in use by another process; wait for it to end or '
                              'choose another directory') from None
        try:
            yield path
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_files_together(directory: str | os.PathLike, files: dict[str, str]) -> list[Path]:
    """Write the UTF-8 texts of ``files`` ({name: text}) into ``directory`` as one unit: all are
    written and synced in a hidden staging folder inside it first, then renamed into place with
    SIGINT and SIGTERM held back, so a Ctrl-C or a crash leaves either every new file or none (a
    crash mid-way leaves only the staging folder, removed by the next call).

    An existing entry of one of the names must be a regular file (it is replaced); a symlink, a
    FIFO, a device or a directory in the way is refused, never written through.

    Raises:
        ConfigError: an entry in the way that is not a regular file, or the directory cannot be
            written (nothing of the new files is then visible).
    """
    directory = Path(directory)
    for name in files:
        try:
            mode = os.lstat(directory / name).st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(mode):
            raise ConfigError(f'{directory / name} exists and is not a regular file (a link, a FIFO, a device '
                              'or a directory): not replaced')
    staging = directory / '.staging'
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir()
        for name, text in files.items():
            write_text_atomic(staging / name, text)
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            for name in files:
                os.replace(staging / name, directory / name)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
    except OSError as exc:
        raise ConfigError(f'cannot write into {directory}: {exc.strerror or exc}') from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [directory / name for name in files]


class NotRegularFile(Exception):
    """:func:`read_bytes_limited` will not open it: a directory, device, FIFO or socket."""


class TooLarge(Exception):
    """:func:`read_bytes_limited` will not hold it: ``size`` bytes (None: it grew past the limit while
    being read)."""

    def __init__(self, size: int | None) -> None:
        super().__init__(size)
        self.size = size


def read_bytes_limited(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (links followed), refused before they are read when
    they cannot end or are too many to hold: no device (``/dev/zero``), FIFO or socket is opened,
    and a file over ``limit`` bytes is not read (nor one that grows past it while read). The one
    reader of :func:`read_text_limited` (the commands' inputs) and of
    :func:`shadow_twin.common.state_files.read_state` (the nodes' state files); each words its
    refusal.

    Raises:
        FileNotFoundError: no such file; NotRegularFile; TooLarge; OSError: it cannot be opened or read.
    """
    if not stat.S_ISREG(Path(path).stat().st_mode):
        raise NotRegularFile(str(path))
    with open(path, 'rb') as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limit:
            raise TooLarge(size)
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(None)
    return data


#: bytes: the largest text input the commands read whole (a CSV log of an hour at 500 Hz is ~200 MB).
MAX_TEXT_INPUT = 512 * 1024 * 1024


def read_text_limited(path: str | os.PathLike, what: str = 'file', limit: int = MAX_TEXT_INPUT) -> str:
    """The UTF-8 text of the regular file ``path``, refused early when it cannot end or is too big
    to hold (:func:`read_bytes_limited`): a device (``/dev/zero``), a FIFO or a socket, or a file over
    ``limit`` bytes.

    Raises:
        FileNotFoundError: no such file (the caller words it).
        ConfigError: not a regular file, over the limit (the limit in the message), unreadable or not
            UTF-8; one line naming ``what`` and the path.
    """
    path = Path(path)
    mib = f'{limit / 2**20:.0f} MiB'
    try:
        data = read_bytes_limited(path, limit)
    except NotRegularFile:
        raise ConfigError(f'{what} {path}: not a regular file (a device, FIFO or socket is never read whole)') from None
    except TooLarge as exc:
        size = '' if exc.size is None else f'{exc.size / 2**20:.0f} MiB, '
        raise ConfigError(f'{what} {path}: {size}over the {mib} read whole; split it') from None
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigError(f'{what} {path}: cannot read: {exc.strerror or exc}') from None
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise ConfigError(f'{what} {path}: not UTF-8 text ({exc.reason} at byte {exc.start})') from None
