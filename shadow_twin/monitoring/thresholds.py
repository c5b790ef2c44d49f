"""Levels (OK / WARN / ERROR / STALE, as ``diagnostic_msgs/DiagnosticStatus``) and the warn / error
thresholds of the RMS position error that set them, per joint glob.

Part of the twin monitor's core; :mod:`shadow_twin.monitoring.joint.error` has the overview.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping

import yaml

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.globs import first_index, first_match

OK, WARN, ERROR, STALE = 0, 1, 2, 3
LEVEL_NAMES = {OK: 'OK', WARN: 'WARN', ERROR: 'ERROR', STALE: 'STALE'}
#: Default thresholds of the RMS position error, rad.
DEFAULT_WARN, DEFAULT_ERROR = 0.05, 0.2


@dataclass(frozen=True)
class Threshold:
    """Warn and error level of a joint's RMS position error, rad (error >= warn > 0)."""

    warn: float
    error: float

    def level(self, rms: float) -> int:
        """OK below ``warn``, WARN from ``warn`` to below ``error``, ERROR from ``error``;
        STALE for NaN."""
        if math.isnan(rms):
            return STALE
        if rms >= self.error:
            return ERROR
        if rms >= self.warn:
            return WARN
        return OK


def _number(value, what: str, unit: str = 'rad') -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f'{what} must be a finite number ({unit}), got {value!r}')
    return float(value)


def checked_threshold(warn, error, where: str, unit: str = 'rad') -> Threshold:
    """A :class:`Threshold` of ``warn`` and ``error`` (in ``unit``), validated: finite
    numbers, error >= warn > 0. Raises ConfigError naming ``where``."""
    warn = _number(warn, f'warn threshold of {where}', unit)
    error = _number(error, f'error threshold of {where}', unit)
    if not warn > 0:
        raise ConfigError(f'warn threshold of {where} must be > 0 {unit}, got {warn:g}')
    if not error >= warn:
        raise ConfigError(f'thresholds of {where}: error ({error:g} {unit}) must be >= warn ({warn:g} {unit})')
    return Threshold(warn, error)



class Thresholds:
    """Warn / error thresholds of the RMS position error per joint.

    Args:
        warn: default warn threshold, rad.
        error: default error threshold, rad.
        overrides: ``{joint_glob: {warn: rad, error: rad}}`` (either key may be left
            out: the default is used); the first glob (in the given order) that
            matches a joint name (fnmatch, case-sensitive) sets that joint's pair.
    Raises:
        ConfigError: a value that is not a finite number, warn <= 0, error < warn
            (after filling in defaults), an unknown key, an empty glob; the message
            names the glob (or the default).
    """

    def __init__(self, warn: float = DEFAULT_WARN, error: float = DEFAULT_ERROR,
                 overrides: Mapping[str, Mapping[str, float]] | None = None) -> None:
        self.default = checked_threshold(warn, error, 'the default (thresholds.warn, thresholds.error)')
        self.overrides: list[tuple[str, Threshold]] = []
        if overrides is None:
            overrides = {}
        if not isinstance(overrides, Mapping):
            raise ConfigError(f'threshold overrides must map joint globs to {{warn: rad, error: rad}}, '
                              f'got {overrides!r}')
        for glob, entry in overrides.items():
            glob = str(glob).strip()
            if not glob:
                raise ConfigError('threshold overrides: a joint glob is empty')
            where = f'joints {glob!r} (threshold_overrides)'
            if not isinstance(entry, Mapping):
                raise ConfigError(f'{where} must be {{warn: rad, error: rad}}, got {entry!r}')
            unknown = sorted(str(k) for k in entry if k not in ('warn', 'error'))
            if unknown:
                raise ConfigError(f'{where}: unknown key(s) {unknown} (allowed: warn, error)')
            self.overrides.append((glob, checked_threshold(entry.get('warn', self.default.warn),
                                                           entry.get('error', self.default.error), where)))
        self._cache: dict[str, Threshold] = {}

    @classmethod
    def from_config(cls, warn: float, error: float, overrides_yaml: str | None) -> 'Thresholds':
        """Thresholds from the node's parameters: ``overrides_yaml`` is YAML text of the
        overrides mapping (empty or None: none). Raises ConfigError (also for bad YAML)."""
        overrides = None
        if overrides_yaml and overrides_yaml.strip():
            try:
                overrides = yaml.safe_load(overrides_yaml)
            except yaml.YAMLError as exc:
                raise ConfigError(f'threshold_overrides is not valid YAML: {" ".join(str(exc).split())}') from None
        return cls(warn, error, overrides)

    def for_joint(self, joint: str) -> Threshold:
        """The pair of ``joint``: the first matching override, else the default."""
        found = self._cache.get(joint)
        if found is None:
            found = first_match(joint, self.overrides, self.default)
            self._cache[joint] = found
        return found

    def level(self, joint: str, rms: float) -> int:
        """Level of ``joint`` at RMS position error ``rms`` rad (see :meth:`Threshold.level`)."""
        return self.for_joint(joint).level(rms)

    def unused_globs(self, joints: Iterable[str]) -> list[str]:
        """Override globs that set the thresholds of none of ``joints``: they match none
        (a typo?), or an earlier glob takes every joint they match."""
        used = set()
        for joint in joints:
            k = first_index(joint, [glob for glob, _ in self.overrides])
            if k is not None:
                used.add(k)
        return [glob for k, (glob, _) in enumerate(self.overrides) if k not in used]


def windowed_verdict(levels: Mapping[str, int] | None, figures: str, window: str, stale: list[str]) -> tuple[int, str]:
    """(level, one-line message) of a comparison over a window of several error figures (the base's
    position and yaw, an object's position and angle): ``levels`` {figure: its level} (None: no
    comparison in the window: STALE), ``figures`` the message's figures (e.g. ``RMS error 0.012 m,
    0.004 rad over 2.0 s``), ``window`` its length as printed, ``stale`` why a source is stale (each
    phrase makes it STALE, the last message kept). The level is the worst figure's; a figure not OK
    is named after the figures, e.g. ``(position WARN)``."""
    if levels is None:
        level, message = STALE, f'no comparison in the last {window} s'
    else:
        level, message = max(levels.values()), figures
        flagged = [f'{what} {LEVEL_NAMES[lvl]}' for what, lvl in levels.items() if lvl != OK]
        if flagged:
            message += f' ({", ".join(flagged)})'
    if stale:
        level, message = STALE, '; '.join(stale) + (f' (last: {message})' if levels is not None else '')
    return level, message
