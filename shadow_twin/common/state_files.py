"""Files a node reads at its start and wrote itself (saved state, caches, checkpoints): read, or
move aside and start fresh.

Such a file can be corrupt (a crash of another tool, a full disk, a hand edit) or hostile (random
bytes, 200,000 ``[`` that make the JSON and YAML parsers recurse past Python's limit, a huge
file, the wrong types, NaN, a directory in its place, no read permission). None of these may stop
the node: :func:`read_state` reads the file with a size cap, decodes and parses it, and on any
problem returns None after

* one line to the caller's ``report`` naming the file, the problem and where the file went;
* moving the file aside to ``<name>.corrupt-<UTC time>`` (``.1``, ``.2``... when that exists):
  never deleted, never overwritten, so that the user can look at it, and so that the node's next
  save does not replace it.

The caller then starts fresh (as without a file). Configuration the user gives (parameters
files, models) is not read this way: a bad one is the user's to fix and is reported, not moved.
"""

from __future__ import annotations

import math
import os
import stat
import time
from pathlib import Path
from typing import Callable, TypeVar

import yaml

from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.common.files import NotRegularFile, TooLarge, read_bytes_limited

T = TypeVar('T')

#: Largest state file read, bytes (64 MiB). The drift watch's state at its defaults (one day of
#: 60 s buckets of the cell's 30 joints) is about 1 MB.
MAX_STATE_BYTES = 64 << 20

#: What a parser may raise on a corrupt or hostile file: malformed text (ValueError covers JSON's
#: errors), YAML's errors, nesting deeper than the interpreter's recursion limit, a file that
#: exhausts memory once parsed, the wrong types or layout, the project's own checks.
PARSE_ERRORS = (ValueError, yaml.YAMLError, RecursionError, MemoryError, TypeError, KeyError, IndexError,
                AttributeError, ShadowTwinError)


def load_yaml(text: str):
    """``yaml.safe_load`` of ``text`` with libyaml where PyYAML has it: it refuses nesting deeper
    than 1000 at once (ScannerError), where the pure-Python loader takes 18 s over 200,000 ``[``
    before its RecursionError (measured here). Raises yaml.YAMLError, RecursionError."""
    return yaml.load(text, Loader=getattr(yaml, 'CSafeLoader', yaml.SafeLoader))


def check_finite(data, where: str = '') -> None:
    """Raise ValueError naming the first float of ``data`` (nested dicts and lists) that is NaN or
    infinite (YAML's ``.nan``, JSON's ``NaN``), for a state that has no use for them."""
    if isinstance(data, float) and not math.isfinite(data):
        raise ValueError(f'{where or "value"} is {data!r}')
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        check_finite(value, f'{where}.{key}' if where else str(key))


class _Unusable(Exception):
    """The file cannot be used (the message says why)."""


def read_state(path: str | os.PathLike, parse: Callable[[str], T], what: str, report: Callable[[str], None],
               max_bytes: int | None = None, fresh: str = 'starting fresh') -> T | None:
    """``parse(text)`` of the UTF-8 file at ``path``, or None: there is no file, or it is unusable
    (then one line to ``report``, and the file is moved aside: see the module doc).

    Args:
        path: the state file.
        parse: text -> the state; raises one of :data:`PARSE_ERRORS` for a file that is not one.
        what: what the file is, for the line (e.g. ``'drift state'``).
        report: gets the one line (e.g. a logger's ``error``).
        max_bytes: a larger file is not read, bytes (default :data:`MAX_STATE_BYTES`).
        fresh: the end of the line: what the caller does instead.
    Returns:
        The parsed state, or None (start fresh).
    """
    path = Path(path)
    max_bytes = MAX_STATE_BYTES if max_bytes is None else max_bytes
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        report(f'{what} {path}: cannot be looked at ({exc.strerror or exc}); {fresh}')
        return None
    try:
        text = _read(path, info, max_bytes)
        return parse(text)
    except _Unusable as exc:
        problem = str(exc)
    except RecursionError:
        problem = 'nested too deeply to parse (RecursionError)'
    except MemoryError:
        problem = 'too large to parse (MemoryError)'
    except UnicodeDecodeError as exc:
        problem = f'not UTF-8 text (byte {exc.start})'
    except PARSE_ERRORS as exc:
        problem = ' '.join(str(exc).split())[:300] or type(exc).__name__
    report(f'{what} {path}: {problem}; {move_aside(path)}; {fresh}')
    return None


def _read(path: Path, info: os.stat_result, max_bytes: int) -> str:
    """The text of the regular file ``path`` (``info``: its lstat). Raises _Unusable, UnicodeDecodeError."""
    if stat.S_ISDIR(info.st_mode):
        raise _Unusable('a directory, not a file')
    if stat.S_ISLNK(info.st_mode) and not path.exists():
        raise _Unusable('a link to nothing')
    try:
        data = read_bytes_limited(path, max_bytes)
    except NotRegularFile:
        raise _Unusable('not a regular file') from None
    except TooLarge as exc:
        size = '' if exc.size is None else f'{exc.size} bytes, '
        raise _Unusable(f'{size}over the {max_bytes}-byte limit') from None
    except OSError as exc:
        raise _Unusable(f'cannot be read ({exc.strerror or exc})') from None
    return data.decode('utf-8')


def move_aside(path: str | os.PathLike) -> str:
    """Rename ``path`` to ``<name>.corrupt-<UTC time YYYYmmddTHHMMSSZ>`` in its directory (with
    ``.1``, ``.2``... when taken: nothing is overwritten); returns what happened, for a log line
    ('moved aside to ...' or 'could not be moved aside (...)'). Never raises OSError."""
    path = Path(path)
    stamp = time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())
    base = path.with_name(f'{path.name}.corrupt-{stamp}')
    for index in range(1000):
        target = base if index == 0 else base.with_name(f'{base.name}.{index}')
        if os.path.lexists(target):
            continue
        try:
            os.rename(path, target)     # the target was free a moment ago: nothing of the user's is replaced
        except OSError as exc:
            return f'could not be moved aside ({exc.strerror or exc})'
        return f'moved aside to {target}'
    return 'could not be moved aside (1000 names taken)'
