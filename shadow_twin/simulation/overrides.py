"""Model-parameter overrides (MJCF physical values) of a compiled model: ``glob: {attribute: value}``
rules over ROS joint names (or ``geom:`` MJCF geom names), absolute or scaling, parsed from a mapping
or YAML text and applied in place after every (re)compile (mock hardware that must behave differently
from the twin; see :class:`ParameterOverrides`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping, Sequence

import mujoco
import yaml

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.globs import matching
from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.model.calibratable import (GEOM_ATTRIBUTES, JOINT_ATTRIBUTES, ParameterTarget, apply_parameters,
                                            get_parameter)

_SCALE = re.compile(r'^\s*[x*]\s*([-+0-9.eE]+)\s*$')
#: Prefix of an override key that globs geom names (MJCF) instead of joint names (ROS).
GEOM_PREFIX = 'geom:'


@dataclass(frozen=True)
class OverrideRule:
    """One ``glob: {attribute: value}`` entry: ``pattern`` is a joint glob, or ``geom:GLOB``.

    ``value`` is absolute (SI units of the attribute: N m s/rad for damping,
    N m for frictionloss, kg m^2 for armature, N m/rad for stiffness, rad for
    springref/range; the sliding coefficient, no unit, for a geom's friction)
    unless ``scale`` is True, when it multiplies the value the compiled model has.
    """

    pattern: str
    attribute: str
    value: float
    scale: bool

    @property
    def kind(self) -> str:
        """'geom' for a ``geom:GLOB`` pattern, else 'joint'."""
        return 'geom' if self.pattern.startswith(GEOM_PREFIX) else 'joint'

    @property
    def glob(self) -> str:
        """The glob itself (``pattern`` without ``geom:``)."""
        return self.pattern[len(GEOM_PREFIX):] if self.kind == 'geom' else self.pattern

    def describe(self) -> str:
        return f'{self.pattern}.{self.attribute} {"x" if self.scale else "="}{self.value:g}'


class ParameterOverrides:
    """Model-parameter overrides applied to a freshly compiled model.

    Form (a mapping, or the same as YAML text)::

        rh_[FMRL]FJ[123]: {damping: x3, frictionloss: x0.5}   # scale the model's value
        rh_WRJ1: {damping: 2.0}                                # absolute value
        'geom:*_wheel_contact': {friction: x0.6}               # geoms by MJCF name

    Keys are shell globs over ROS joint names (translated to MJCF names with the
    joint map), attributes those of :data:`shadow_twin.model.calibratable.JOINT_ATTRIBUTES`;
    or ``geom:GLOB``, a glob over the model's (MJCF) geom names, attributes those of
    :data:`shadow_twin.model.calibratable.GEOM_ATTRIBUTES` (``friction``: the sliding
    coefficient, ``geom_friction[:, 0]``). A value is a number (absolute) or a
    string ``'xF'`` / ``'*F'`` (multiply by F). Rules are applied in the order
    given; two rules on one element compound.

    Raises:
        ConfigError: not a mapping, an empty ``geom:`` glob, unknown attribute, or a
            value that is neither a number nor ``xF``.
    """

    def __init__(self, spec: Mapping | None = None) -> None:
        self.rules: list[OverrideRule] = []
        if spec is None:
            return
        if not isinstance(spec, Mapping):
            raise ConfigError(f'overrides must map joint (or geom:) globs to {{attribute: value}}, got {spec!r}')
        for pattern, attributes in spec.items():
            if not isinstance(attributes, Mapping) or not attributes:
                raise ConfigError(f'overrides[{pattern!r}] must be a non-empty mapping of attribute: value')
            geom = str(pattern).startswith(GEOM_PREFIX)
            if geom and not str(pattern)[len(GEOM_PREFIX):]:
                raise ConfigError(f'overrides[{pattern!r}]: empty geom glob')
            known = GEOM_ATTRIBUTES if geom else JOINT_ATTRIBUTES
            for attribute, raw in attributes.items():
                if attribute not in known:
                    raise ConfigError(f'overrides[{pattern!r}]: unknown attribute {attribute!r}; known: {known}')
                self.rules.append(OverrideRule(str(pattern), attribute, *self._value(pattern, attribute, raw)))

    @staticmethod
    def _value(pattern, attribute, raw) -> tuple[float, bool]:
        if isinstance(raw, bool):
            raise ConfigError(f'overrides[{pattern!r}].{attribute}: expected a number or "xF", got {raw!r}')
        if isinstance(raw, (int, float)):
            value, scale = float(raw), False
        else:
            match = _SCALE.match(str(raw))
            if not match:
                raise ConfigError(f'overrides[{pattern!r}].{attribute}: expected a number or "xF" '
                                  f'(scale factor), got {raw!r}')
            try:
                value, scale = float(match.group(1)), True
            except ValueError:
                raise ConfigError(f'overrides[{pattern!r}].{attribute}: bad scale {raw!r}') from None
        if not math.isfinite(value):
            raise ConfigError(f'overrides[{pattern!r}].{attribute}: value must be finite, got {raw!r}')
        return value, scale

    @classmethod
    def from_yaml_text(cls, text: str | None) -> 'ParameterOverrides':
        """Parse YAML text (empty or blank gives no overrides). Raises ConfigError."""
        if text is None or not str(text).strip():
            return cls()
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f'overrides are not valid YAML: {" ".join(str(exc).split())}') from None
        if data is None:
            return cls()
        if isinstance(data, Mapping) and 'overrides' in data and len(data) == 1:
            data = data['overrides']
        return cls(data)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def apply(self, model: mujoco.MjModel, ros_joint_names: Sequence[str],
              joint_map: JointNameMap) -> list[tuple[str, float, float]]:
        """Apply the rules in place to ``model`` (with :func:`~shadow_twin.model.calibratable.apply_parameters`,
        which recomputes the derived constants when an armature changes).

        Args:
            model: compiled model (modified in place).
            ros_joint_names: ROS names of the model's joints, to match joint globs against.
            joint_map: ROS -> MJCF names.
        Returns:
            ``(joint.attribute, old, new)`` for every value set, ``(geom:name.attribute, old, new)``
            for a geom's.
        Raises:
            ConfigError: a glob that matches no joint (or no geom).
        """
        geoms = [name for name in (model.geom(g).name for g in range(model.ngeom)) if name]
        values: dict[ParameterTarget, float] = {}
        changes = []
        for rule in self.rules:
            names = geoms if rule.kind == 'geom' else ros_joint_names
            hits = matching(names, [rule.glob])
            if not hits:
                raise ConfigError(f'override {rule.describe()}: no {rule.kind} matches {rule.glob!r}')
            for name in hits:
                if rule.kind == 'geom':
                    target, label = ParameterTarget('geom', name, rule.attribute), GEOM_PREFIX + name
                else:
                    target, label = ParameterTarget('joint', joint_map.to_mjcf(name), rule.attribute), name
                old = values[target] if target in values else get_parameter(model, target)
                new = old * rule.value if rule.scale else rule.value
                values[target] = new
                changes.append((f'{label}.{rule.attribute}', old, new))
        apply_parameters(model, values)
        return changes
