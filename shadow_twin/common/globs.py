"""Joint, body and geom names matched against fnmatch globs (case-sensitive, as ROS names are):
the one implementation the configuration's glob tables, the JTC's controller specs, the speed
scaling, the preview's limits and the calibration's joint selections use.

A glob is a name or an ``fnmatch`` pattern (``*``, ``?``, ``[...]``): ``rh_FF*`` matches
``rh_FFJ1`` .. ``rh_FFJ4``, never ``RH_FFJ1``.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Iterable, Mapping, Sequence, TypeVar

T = TypeVar('T')


def matches(name: str, globs: Iterable[str]) -> bool:
    """True if ``name`` matches one of ``globs``."""
    return any(fnmatchcase(name, glob) for glob in globs)


def matching(names: Iterable[str], globs: Iterable[str]) -> list[str]:
    """The ``names`` (in their order) that match one of ``globs``."""
    globs = list(globs)
    return [name for name in names if matches(name, globs)]


def unmatched(globs: Iterable[str], names: Sequence[str]) -> list[str]:
    """The ``globs`` (in their order) that match none of ``names``: a typo, or a part the model lacks."""
    return [glob for glob in globs if not any(fnmatchcase(name, glob) for name in names)]


def first_match(name: str, table: Mapping[str, T] | Iterable[tuple[str, T]], default: T | None = None) -> T | None:
    """The value of the first glob of ``table`` (a mapping or (glob, value) pairs, in order) that
    ``name`` matches, else ``default``."""
    pairs = table.items() if isinstance(table, Mapping) else table
    return next((value for glob, value in pairs if fnmatchcase(name, glob)), default)


def first_index(name: str, globs: Iterable[str]) -> int | None:
    """The index of the first of ``globs`` that ``name`` matches, or None."""
    return next((k for k, glob in enumerate(globs) if fnmatchcase(name, glob)), None)
