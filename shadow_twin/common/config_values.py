"""Checks of the values read from a project YAML file (the cell, a scene): each returns the value
(converted) or raises one ConfigError naming where it is (``where``: the file, section and key) and
what is wrong."""

from __future__ import annotations

import math
from typing import Any, Iterable

from shadow_twin.common.errors import ConfigError


def mapping(value: Any, where: str, known: Iterable) -> dict:
    """``value`` as a mapping whose keys are all in ``known`` (None: an empty one).
    Raises ConfigError: not a mapping, or unknown keys (named, with the known ones)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f'{where}: expected a mapping, got {type(value).__name__}')
    unknown = sorted((str(k) for k in set(value) - set(known)))
    if unknown:
        raise ConfigError(f'{where}: unknown key(s) {unknown}; known: {sorted(known)}')
    return value


def number(value: Any, where: str) -> float:
    """``value`` as a float. Raises ConfigError: not a finite number (a bool is none)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f'{where}: expected a finite number, got {value!r}')
    return float(value)


def boolean(value: Any, where: str) -> bool:
    """``value`` as a bool. Raises ConfigError: not a YAML true or false."""
    if not isinstance(value, bool):
        raise ConfigError(f'{where}: expected true or false, got {value!r}')
    return value


def positive(value: Any, where: str) -> float:
    """``value`` as a float > 0. Raises ConfigError."""
    result = number(value, where)
    if result <= 0:
        raise ConfigError(f'{where}: must be positive, got {value!r}')
    return result


def non_negative(value: Any, where: str) -> float:
    """``value`` as a float >= 0. Raises ConfigError."""
    result = number(value, where)
    if result < 0:
        raise ConfigError(f'{where}: must not be negative, got {value!r}')
    return result
