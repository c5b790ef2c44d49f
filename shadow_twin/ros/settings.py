"""Typed, frozen settings objects made from a node's :class:`~shadow_twin.ros.parameters.ParameterSpec`
table: the one source of a node's parameters also gives the object its code reads them through.

:func:`settings_class` makes, once per node, a frozen dataclass with one attribute per parameter
(``a.b`` -> ``a_b``: ``base.anchor.yaw_offset`` is ``base_anchor_yaw_offset``) of the spec's type
(float, int, bool, str; a string list is a tuple), plus the *derived* fields a node computes from
several parameters (e.g. the twin's JTC ``constraints``). ``Cls.read(get, **derived)``
reads every parameter with ``get(name)`` (e.g. ``node.get_parameter(name).value``), checks it with
the spec's own :func:`~shadow_twin.ros.parameters.check_value` and converts it to the spec's type.
A *parsed* parameter (a YAML text whose spec's ``check`` parses it) holds what that ``check``
returned, parsed once; a derived field of a parameter's name replaces that parameter's raw value::

    BridgeSettings = settings_class('BridgeSettings', SPECS, parsed={'velocity_limits': dict},
                                    derived={'constraints': dict})
    settings = BridgeSettings.read(node_getter, constraints=...)
    settings.publish_rate          # float, Hz
    settings.velocity_limits       # {joint: rad/s}, parse_velocity_limits's result
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, Iterable, Mapping

from shadow_twin.common.errors import ConfigError
from shadow_twin.ros.parameters import ParameterSpec, check_value


def attribute_name(parameter: str) -> str:
    """The settings attribute of parameter ``parameter``: dots become underscores
    (``base.limits.max_speed`` -> ``base_limits_max_speed``)."""
    return parameter.replace('.', '_')


def value_type(spec: ParameterSpec) -> type:
    """The Python type of ``spec``'s value in a settings object: that of its default, a list as a
    tuple."""
    return tuple if isinstance(spec.default, (list, tuple)) else type(spec.default)


def typed_value(spec: ParameterSpec, value: Any) -> Any:
    """``value`` of the parameter ``spec``, checked (:func:`check_value`) and converted to
    :func:`value_type` (an integer of a float parameter becomes a float; a list a tuple).

    Raises:
        ConfigError: the value is of the wrong type, out of range, not allowed or fails the
            spec's own check (the message names the parameter).
    """
    problem = check_value(spec, value)
    if problem is not None:
        raise ConfigError(problem)
    kind = value_type(spec)
    return tuple(value) if kind is tuple else kind(value)


def parsed_value(spec: ParameterSpec, value: Any) -> Any:
    """What ``spec``'s ``check`` makes of ``value`` (its parse, e.g. a YAML text's mapping), after
    the type, range and choice checks of :func:`check_value`; the check runs once.

    Raises:
        ConfigError: as :func:`typed_value` (the message names the parameter).
    """
    problem = check_value(dataclasses.replace(spec, check=None), value)
    if problem is not None:
        raise ConfigError(problem)
    try:
        return spec.check(value)
    except ConfigError as exc:
        raise ConfigError(f'parameter {spec.name}: {exc}') from None


class Settings:
    """Base of the classes :func:`settings_class` makes (a frozen dataclass: one attribute per
    parameter, then the derived fields)."""

    #: The parameters, in declaration order.
    SPECS: ClassVar[tuple[ParameterSpec, ...]] = ()
    #: Names of the derived fields (a parameter's name among them: its raw value is not read).
    DERIVED: ClassVar[tuple[str, ...]] = ()
    #: Attribute names of the parsed parameters (they hold their spec's ``check`` result).
    PARSED: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def read(cls, get: Callable[[str], Any], **derived: Any) -> 'Settings':
        """The settings of the parameter values ``get(name)`` and the ``derived`` fields (every
        one of :attr:`DERIVED`, by attribute name).

        Raises:
            ConfigError: a value fails its spec (see :func:`typed_value`).
            TypeError: a derived field is missing or unknown.
        """
        values = {}
        for spec in cls.SPECS:
            attribute = attribute_name(spec.name)
            if attribute not in cls.DERIVED:
                read = parsed_value if attribute in cls.PARSED else typed_value
                values[attribute] = read(spec, get(spec.name))
        return cls(**values, **derived)

    def value(self, parameter: str) -> Any:
        """The value of the parameter named ``parameter`` (``a.b``), as typed here."""
        return getattr(self, attribute_name(parameter))


def settings_class(name: str, specs: Iterable[ParameterSpec], derived: Mapping[str, Any] | None = None,
                   module: str | None = None, parsed: Mapping[str, Any] | None = None) -> type:
    """A frozen dataclass ``name`` (subclass of :class:`Settings`) with one attribute per spec of
    ``specs`` (:func:`attribute_name`, :func:`value_type`; a ``parsed`` parameter {name: type}
    holds its spec's ``check`` result, :func:`parsed_value`) and the ``derived`` fields {attribute:
    type}; ``module`` is its ``__module__`` (where it is defined). Its docstring lists every
    attribute with its unit and description.

    Raises:
        ValueError: two parameters map to the same attribute; a parsed parameter is not in
            ``specs`` or its spec has no ``check``.
    """
    specs = tuple(specs)
    derived = dict(derived or {})
    parsed = {attribute_name(n): kind for n, kind in (parsed or {}).items()}
    checked = {attribute_name(s.name) for s in specs if s.check is not None}
    if set(parsed) - checked:
        raise ValueError(f'parsed parameters without a spec that parses them: {sorted(set(parsed) - checked)}')
    fields, seen = [], {}
    for spec in specs:
        attribute = attribute_name(spec.name)
        if attribute in seen:
            raise ValueError(f'parameters {seen[attribute]} and {spec.name} are both the attribute {attribute}')
        seen[attribute] = spec.name
        if attribute not in derived:
            fields.append((attribute, parsed.get(attribute, value_type(spec))))
    fields += list(derived.items())
    lines = [f'Settings of {len(specs)} ROS parameters (frozen; ``read`` makes one from the parameters).', '',
             'Attributes:']
    for spec in specs:
        attribute = attribute_name(spec.name)
        if attribute not in derived:
            unit = f' ({spec.unit})' if spec.unit else ''
            how = ', parsed' if attribute in parsed else ''
            lines.append(f'    {attribute}{unit}: parameter ``{spec.name}``{how}. {spec.description}')
    lines += [f'    {attribute}: derived (see the reader).' for attribute in derived]
    cls = dataclasses.make_dataclass(name, fields, bases=(Settings,), frozen=True,
                                     namespace={'SPECS': specs, 'DERIVED': tuple(derived), 'PARSED': tuple(parsed),
                                                '__doc__': '\n'.join(lines)})
    if module is not None:
        cls.__module__ = module
    return cls
