"""Safe file writing: atomic replacement and input fingerprints.

Outputs are written to a temporary file in the destination directory and then
renamed over the target (``os.replace`` is atomic on POSIX), so a crash never
leaves a half-written file, and an earlier good file stays until the new one is
complete.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


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
