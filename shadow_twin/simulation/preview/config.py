"""What a goal preview checks, and with which figures: :class:`PreviewConfig` (ROS-free).

The twin's goal preview (:mod:`shadow_twin.simulation.preview.predictor`) simulates a goal before anything
moves and checks the predicted run as the joint trajectory controller and the robots' own limits
would (:mod:`shadow_twin.simulation.preview.checks`). The figures come from ``config/preview.yaml``
(:meth:`PreviewConfig.from_yaml`; its comments give the sources):

* ``effort_limits``: {joint glob: N m}, a lab's own effort limits. The arm's published limits
  (Universal Robots' ROS 2 description, ``config/<type>/joint_limits.yaml`` ``max_effort``; UR5:
  150 N m shoulder pan, shoulder lift, elbow, 28 N m wrists) are recorded in its MJCF and always
  checked (:func:`shadow_twin.simulation.preview.checks.effort_limit_of`: the smaller counts). The
  sim's UR servo is not clamped, so the predicted effort is compared, not capped.
* ``effort_window``: s over which the predicted effort is averaged before it is compared (the
  sim's stiff servo answers the velocity step of a linearly interpolated goal with a
  millisecond-long impulse of hundreds of N m that no drive delivers or needs; a limit holds for
  the motor current, filtered).
* ``position_limit_margin``: rad past an MJCF joint range (MuJoCo's limits are soft) that the
  predicted position may go before it counts as driving the joint into its limit (a finger opened
  fast to its stop passes it by ~10 mrad); a commanded position past the range always counts.
* ``contacts``: ``min_depth`` (m of penetration that counts), ``period`` (s between the states
  checked) and ``allowed`` pairs of body-name globs (the wheels on the floor, the fingers on
  each other). Pairs already touching in the model's reference pose (``qpos0``: neighbouring
  links) are allowed too.
* ``base``: ``max_speed`` (m/s; MiR250 2 m/s), ``max_acceleration`` (m/s^2), ``max_yaw_rate``
  (rad/s) of the predicted and the commanded base motion.
* ``settle_time``: s simulated after the last point at most, to judge the goal tolerance
  (capped by the goal's ``goal_time``).

Units: rad, rad/s, N m, m, m/s, m/s^2, s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import yaml

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.globs import first_match, matches
from shadow_twin.control.base.trajectory import DEFAULT_MAX_YAW_RATE
from shadow_twin.control.diff_drive import MIR250_TOP_SPEED

#: MiR250 acceleration used when none is configured, m/s^2 (see config/preview.yaml).
DEFAULT_MAX_ACCELERATION = 0.0
#: Contact pairs allowed when none are configured: wheels and casters on the floor, the hand's
#: own links on each other (a grasp closes fingers onto the thumb).
DEFAULT_ALLOWED = (('world', '*wheel*'), ('world', '*caster*'), ('rh_*', 'rh_*'))


def _positive(value, what: str, allow_zero: bool = False) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f'preview {what} must be a number, got {value!r}') from None
    if not math.isfinite(number) or number < 0 or (number == 0 and not allow_zero):
        raise ConfigError(f'preview {what} must be finite and {">= 0" if allow_zero else "> 0"}, got {value!r}')
    return number


@dataclass(frozen=True)
class BasePreviewLimits:
    """Limits of the base's predicted and commanded motion: ``max_speed`` m/s, ``max_acceleration``
    m/s^2 (0: not checked, the default), ``max_yaw_rate`` rad/s (the others > 0); ``max_slip`` m the base
    may slide on its wheels while a goal without a base part runs (:mod:`shadow_twin.simulation.preview.base_slip`;
    0: not checked, the default). Raises ConfigError."""

    max_speed: float = MIR250_TOP_SPEED
    max_acceleration: float = DEFAULT_MAX_ACCELERATION
    max_yaw_rate: float = DEFAULT_MAX_YAW_RATE
    max_slip: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, 'max_slip', _positive(self.max_slip, 'base.max_slip', allow_zero=True))
        for name in ('max_speed', 'max_yaw_rate'):
            object.__setattr__(self, name, _positive(getattr(self, name), f'base.{name}'))
        if self.max_acceleration:
            object.__setattr__(self, 'max_acceleration', _positive(self.max_acceleration, 'base.max_acceleration'))


@dataclass(frozen=True)
class PreviewConfig:
    """The preview's checks (module doc).

    Attributes:
        effort_limits: {joint glob: largest |effort|, N m}; the first matching glob applies,
            joints matching none are not checked.
        effort_window: s over which the effort is averaged before the comparison (0: each step).
        position_limit_margin: rad past the MJCF range that counts as hitting the limit.
        contact_min_depth: m of penetration below which a contact is ignored.
        contact_period: s between the predicted states checked for contacts.
        allowed_contacts: pairs of body-name globs that may touch (either order).
        base: :class:`BasePreviewLimits`.
        settle_time: s simulated after the last point at most (goal tolerance), >= 0.
        watch_horizon: s of a running goal each window of the watch predicts, > 0.
        watch_gate: s the watch's first window (the gate, judged before the start) predicts, > 0.
        watch_period: s between the starts of two windows of the watch, > 0, < ``watch_horizon``.
        watch_behind: what a goal running more than one period past what the watch verified gets:
            ``warn`` (one log line; the default) or ``abort``.
        request_window: s simulated per window of a ``/twin/preview`` request (a canceled request
            stops after the window under way), > 0.
        request_queue: ``/twin/preview`` requests waiting or running at most (more are rejected at once), >= 1.
        grasp_slide_limit: m a held object may slide in the hand before the goal fails
            (:mod:`shadow_twin.simulation.preview.grasp`); 0, the default, turns the grasp check off.
        grasp_min_fingertips: fingertips touching an object that make it held, and under which a held one
            has left the hand, >= 1.
        held_objects: scene objects taken as held at the start whatever touches them (declared held).
    Raises:
        ConfigError: a negative or non-finite figure, a malformed pair.
    """

    effort_limits: Mapping[str, float] = field(default_factory=dict)
    effort_window: float = 0.1
    position_limit_margin: float = 0.03
    contact_min_depth: float = 0.002
    contact_period: float = 0.01
    allowed_contacts: tuple[tuple[str, str], ...] = DEFAULT_ALLOWED
    base: BasePreviewLimits = field(default_factory=BasePreviewLimits)
    settle_time: float = 2.0
    watch_horizon: float = 1.5
    watch_gate: float = 0.5
    watch_period: float = 0.25
    watch_behind: str = 'warn'
    request_window: float = 1.0
    request_queue: int = 4
    grasp_slide_limit: float = 0.0
    grasp_min_fingertips: int = 2
    held_objects: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ('watch_horizon', 'watch_gate', 'watch_period', 'request_window'):
            object.__setattr__(self, name, _positive(getattr(self, name), name.replace('_', '.', 1)))
        if self.watch_period >= self.watch_horizon:
            raise ConfigError(f'preview watch.period ({self.watch_period:g} s) must be shorter than watch.horizon '
                              f'({self.watch_horizon:g} s): each window must overlap the next')
        if self.watch_behind not in ('warn', 'abort'):
            raise ConfigError(f"preview watch.behind must be 'warn' or 'abort', got {self.watch_behind!r}")
        queue = _positive(self.request_queue, 'requests.queue')
        if queue != int(queue) or queue < 1:
            raise ConfigError(f'preview requests.queue must be a whole number >= 1, got {self.request_queue!r}')
        object.__setattr__(self, 'request_queue', int(queue))
        object.__setattr__(self, 'grasp_slide_limit', _positive(self.grasp_slide_limit, 'grasp.slide_limit',
                                                                allow_zero=True))
        tips = _positive(self.grasp_min_fingertips, 'grasp.min_fingertips')
        if tips != int(tips) or tips < 1:
            raise ConfigError(f'preview grasp.min_fingertips must be a whole number >= 1, got {self.grasp_min_fingertips!r}')
        object.__setattr__(self, 'grasp_min_fingertips', int(tips))
        if not isinstance(self.held_objects, (list, tuple)) or not all(isinstance(n, str) for n in self.held_objects):
            raise ConfigError(f'preview grasp.held: a list of object names, got {self.held_objects!r}')
        object.__setattr__(self, 'held_objects', tuple(self.held_objects))
        limits = {str(k): _positive(v, f'effort limit of {k!r}') for k, v in dict(self.effort_limits).items()}
        object.__setattr__(self, 'effort_limits', limits)
        object.__setattr__(self, 'effort_window', _positive(self.effort_window, 'effort_window', allow_zero=True))
        object.__setattr__(self, 'position_limit_margin',
                           _positive(self.position_limit_margin, 'position_limit_margin', allow_zero=True))
        object.__setattr__(self, 'contact_min_depth',
                           _positive(self.contact_min_depth, 'contacts.min_depth', allow_zero=True))
        object.__setattr__(self, 'contact_period', _positive(self.contact_period, 'contacts.period'))
        object.__setattr__(self, 'settle_time', _positive(self.settle_time, 'settle_time', allow_zero=True))
        pairs = []
        for pair in self.allowed_contacts:
            if isinstance(pair, str) or not isinstance(pair, Sequence) or len(pair) != 2:
                raise ConfigError(f'preview contacts.allowed: each entry must be a pair of body globs, got {pair!r}')
            pairs.append((str(pair[0]), str(pair[1])))
        object.__setattr__(self, 'allowed_contacts', tuple(pairs))

    def effort_limit(self, joint: str) -> float | None:
        """The effort limit of ``joint`` (N m), None when no glob matches."""
        return first_match(joint, self.effort_limits)

    def contact_allowed(self, body1: str, body2: str) -> bool:
        """True if the bodies ``body1`` and ``body2`` may touch (a configured pair, either order)."""
        return any((matches(body1, [a]) and matches(body2, [b])) or (matches(body1, [b]) and matches(body2, [a]))
                   for a, b in self.allowed_contacts)

    @classmethod
    def from_mapping(cls, data: Mapping | None) -> 'PreviewConfig':
        """From the parsed ``preview:`` mapping of config/preview.yaml (every key optional).
        Raises ConfigError for unknown keys or bad values."""
        data = dict(data or {})
        known = {'effort_limits', 'effort_window', 'position_limit_margin', 'contacts', 'base', 'settle_time',
                 'watch', 'requests', 'grasp'}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f'preview config: unknown key(s) {sorted(unknown)}; known: {sorted(known)}')
        contacts = dict(data.get('contacts') or {})
        unknown = set(contacts) - {'min_depth', 'period', 'allowed'}
        if unknown:
            raise ConfigError(f'preview contacts: unknown key(s) {sorted(unknown)}')
        base = dict(data.get('base') or {})
        unknown = set(base) - {'max_speed', 'max_acceleration', 'max_yaw_rate', 'max_slip'}
        if unknown:
            raise ConfigError(f'preview base: unknown key(s) {sorted(unknown)}')
        kwargs = {}
        for section, keys in (('watch', ('horizon', 'gate', 'period', 'behind')), ('requests', ('window', 'queue')),
                              ('grasp', ('slide_limit', 'min_fingertips', 'held'))):
            given = data.get(section) or {}
            if not isinstance(given, Mapping) or set(given) - set(keys):
                raise ConfigError(f'preview {section}: a mapping with the keys {list(keys)}, got {given!r}')
            kwargs.update((f'{section.rstrip("s")}_{k}', v) for k, v in given.items() if k != 'held')
            if section == 'grasp' and 'held' in given:
                kwargs['held_objects'] = given['held'] or ()
        if 'effort_limits' in data:
            if not isinstance(data['effort_limits'], Mapping):
                raise ConfigError('preview effort_limits must be a mapping {joint glob: N m}')
            kwargs['effort_limits'] = data['effort_limits']
        for key in ('effort_window', 'position_limit_margin', 'settle_time'):
            if key in data:
                kwargs[key] = data[key]
        if 'min_depth' in contacts:
            kwargs['contact_min_depth'] = contacts['min_depth']
        if 'period' in contacts:
            kwargs['contact_period'] = contacts['period']
        if 'allowed' in contacts:
            kwargs['allowed_contacts'] = tuple(contacts['allowed'] or ())
        return cls(base=BasePreviewLimits(**base), **kwargs)

    @classmethod
    def from_yaml(cls, path: str | Path | None) -> 'PreviewConfig':
        """From a YAML file whose top-level key ``preview`` holds :meth:`from_mapping`'s mapping;
        None: the defaults. Raises ConfigError (missing file, bad YAML, bad values)."""
        if path is None:
            return cls()
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f'preview config not found: {path}')
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f'{path}: not valid YAML: {exc}') from None
        if not isinstance(data, Mapping) or not isinstance(data.get('preview', {}), (Mapping, type(None))):
            raise ConfigError(f'{path}: expected a mapping with the key preview')
        return cls.from_mapping(data.get('preview'))
