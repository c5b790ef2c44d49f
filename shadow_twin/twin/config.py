"""The twin's configuration, ROS-free: its modes (:func:`parse_mode`; which bases a mode drives,
:func:`base_sides`) and the real trajectory controllers with the joints (globs on ROS names) each one
drives (:class:`ControllerSpec`, :func:`controllers_from_config`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.globs import matches

MODES = ('sim', 'real', 'both')
#: Controller name used for the simulation in splits and outcomes.
SIM = 'sim'


def parse_mode(mode: str) -> str:
    """``mode`` lower-cased; ConfigError unless one of sim, real, both."""
    value = str(mode).strip().lower()
    if value not in MODES:
        raise ConfigError(f'mode must be one of {list(MODES)}, got {mode!r}')
    return value


def base_sides(mode: str) -> list[str]:
    """The bases a goal's ``multi_dof_trajectory`` drives: 'real' (mode real, both) and 'sim'
    (mode sim, both), in that order."""
    mode = parse_mode(mode)
    return [side for side, modes in (('real', ('real', 'both')), ('sim', ('sim', 'both'))) if mode in modes]


@dataclass(frozen=True)
class ControllerSpec:
    """A real joint trajectory controller: its name, action and joint globs."""

    name: str
    action: str
    joints: tuple[str, ...]

    def matches(self, joint: str) -> bool:
        """True if ``joint`` matches one of the globs (case-sensitive)."""
        return matches(joint, self.joints)


def controllers_from_config(names: Sequence[str], entries: Mapping[str, Mapping[str, Any]]) -> list[ControllerSpec]:
    """Controllers ``names`` (in order) from ``{name: {action: str, joints: [globs]}}``.

    Raises ConfigError: a name listed twice, or without an action or joints.
    """
    out = []
    seen = set()
    for name in names:
        name = str(name)
        if name in seen:
            raise ConfigError(f'real controller {name!r} is listed twice')
        seen.add(name)
        entry = entries.get(name) or {}
        action = str(entry.get('action') or '').strip()
        joints = tuple(str(j) for j in (entry.get('joints') or ()) if str(j).strip())
        if not action:
            raise ConfigError(f'real controller {name!r} has no action (controllers.{name}.action)')
        if not joints:
            raise ConfigError(f'real controller {name!r} has no joints (controllers.{name}.joints)')
        out.append(ControllerSpec(name, action, joints))
    return out
