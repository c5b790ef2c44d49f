"""ROS parameters of the project's nodes: one declaration per parameter (type from the
default, description, unit, range for integers and floats, allowed values), enforced
when the node declares it and on every runtime change (``ros2 param set``), and the
JTC ``constraints`` shared by every trajectory controller.

Each node lists its parameters once, as a tuple of :class:`ParameterSpec`, and calls
:func:`declare`: the parameters several nodes declare are listed here, once, in named groups
(:data:`GOAL_HANDLING_SPECS`, :data:`DIAGNOSTICS_SPECS`, :data:`JOINT_STATE_INPUT_SPECS`); each
node's list lives beside the node (``mujoco_bridge.parameters``, ``calibration_node.parameters``,
``shadow_twin.ros.twin.parameters``, ``shadow_twin.ros.monitor.parameters``). The same table gives
the node's typed settings (:mod:`shadow_twin.ros.settings`), the descriptor ``ros2 param describe``
shows (:meth:`ParameterSpec.descriptor`) and the generated reference ``docs/parameters.md``
(:mod:`shadow_twin.ros.parameter_docs`): a default, range or unit changes in one line.
Parameters load from a ros2 params YAML (``--params-file``) or ``-p name:=value``. Float
parameters accept integers (``publish_rate:=1000``).
A value of the wrong type, out of range or not among the allowed choices stops the
node at start with one line naming the parameter (:class:`ConfigError`), and is
refused at runtime with the same reason.

The ``constraints`` (ros2_controllers' joint_trajectory_controller tolerances)
come from one file, ``config/constraints.yaml`` (parameter ``constraints_file``),
shared by the simulated controller, the mock hardware and the twin server; its
values are the defaults of the ``constraints.*`` parameters, which a params file or
``-p`` still overrides per node.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml
from rcl_interfaces.msg import IntegerRange, ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.paths import config_path

#: Largest tolerance / time accepted in ``constraints`` (rad, rad/s, s).
CONSTRAINT_MAX = 1e6


@dataclass(frozen=True)
class ParameterSpec:
    """The declaration of one ROS parameter (not a controller's ``ControllerSpec``, nor a ``mujoco.MjSpec``).

    Attributes:
        name: parameter name (``a.b`` for nested YAML keys).
        default: default value; its Python type is the parameter's type (float
            parameters accept integers too).
        description: what it does (without the unit: see ``unit``).
        read_only: fixed at start (``ros2 param set`` is refused).
        bounds: inclusive (min, max) of an int or float parameter.
        choices: allowed values of a string parameter.
        check: extra validation of a value, raises ConfigError naming the problem
            (e.g. a YAML text that must parse).
        unit: unit of the value (``'s'``, ``'Hz'``, ``'rad/s'``, ``'N m'``; for a YAML mapping, of
            its values); '' = none.
    """

    name: str
    default: Any
    description: str
    read_only: bool = False
    bounds: tuple[float, float] | None = None
    choices: tuple[str, ...] | None = None
    check: Callable[[Any], None] | None = None
    unit: str = ''

    def full_description(self) -> str:
        """The description as the descriptor states it: the text, then ``Unit: U.``,
        ``Range A..B.`` and ``One of: ...`` where they apply."""
        text = self.description
        if self.unit:
            text += f' Unit: {self.unit}.'
        if self.bounds is not None:
            text += f' Range {self.bounds[0]:g}..{self.bounds[1]:g}.'
        if self.choices is not None:
            text += f' One of: {", ".join(self.choices)}.'
        return text

    def descriptor(self) -> ParameterDescriptor:
        """The ``rcl_interfaces/ParameterDescriptor`` declared for this parameter (integer ranges
        are also enforced by rclpy itself)."""
        descriptor = ParameterDescriptor(description=self.full_description(), read_only=self.read_only,
                                         dynamic_typing=isinstance(self.default, float))
        if self.bounds is not None and _is_int(self.default):
            descriptor.integer_range = [IntegerRange(from_value=int(self.bounds[0]), to_value=int(self.bounds[1]),
                                                     step=0)]
        if self.choices is not None:
            descriptor.additional_constraints = f'one of: {", ".join(self.choices)}'
        return descriptor


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_value(spec: ParameterSpec, value) -> str | None:
    """Why ``value`` is not acceptable for ``spec`` (type, range, choices, extra check), or None."""
    if isinstance(spec.default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f'parameter {spec.name} must be a finite number, got {value!r}'
    elif _is_int(spec.default):
        if not _is_int(value):
            return f'parameter {spec.name} must be an integer, got {value!r}'
    elif type(value) is not type(spec.default):
        return f'parameter {spec.name} must be a {type(spec.default).__name__}, got {value!r}'
    if spec.bounds is not None and not spec.bounds[0] <= value <= spec.bounds[1]:
        return f'parameter {spec.name} must be within {spec.bounds[0]:g}..{spec.bounds[1]:g}, got {value!r}'
    if spec.choices is not None and value not in spec.choices:
        return f'parameter {spec.name} must be one of {", ".join(spec.choices)}, got {value!r}'
    if spec.check is not None:
        try:
            spec.check(value)
        except ConfigError as exc:
            return f'parameter {spec.name}: {exc}'
    return None


#: The ParameterSpecs declared on each node, for the runtime check (see :func:`declare`).
_DECLARED: 'weakref.WeakKeyDictionary[Node, dict[str, ParameterSpec]]' = weakref.WeakKeyDictionary()


def declare(node: Node, specs: Iterable[ParameterSpec]) -> None:
    """Declare ``specs`` on ``node`` (names already declared are skipped) and check their values.

    The first call on a node also installs the runtime check: a ``ros2 param set`` of a
    declared parameter is refused with the reason when :func:`check_value` objects.

    Raises:
        ConfigError: a given value is of the wrong type, out of range or not allowed
            (the message names the parameter and the value).
    """
    if node not in _DECLARED:
        _DECLARED[node] = {}
        node.add_on_set_parameters_callback(lambda params: _check_change(node, params))
    declared = _DECLARED[node]
    for spec in specs:
        if node.has_parameter(spec.name):
            continue
        declared[spec.name] = spec
        try:
            node.declare_parameter(spec.name, spec.default, spec.descriptor())
        except Exception as exc:    # rclpy's InvalidParameterValueException/TypeException: say it our way
            given = (getattr(node, '_parameter_overrides', None) or {}).get(spec.name)
            problem = None if given is None else check_value(spec, given.value)
            raise ConfigError(problem or f'parameter {spec.name}: {" ".join(str(exc).split())}') from None
        problem = check_value(spec, node.get_parameter(spec.name).value)
        if problem is not None:
            raise ConfigError(problem)


def _check_change(node: Node, params: list[Parameter]) -> SetParametersResult:
    declared = _DECLARED.get(node, {})
    for param in params:
        spec = declared.get(param.name)
        problem = None if spec is None else check_value(spec, param.value)
        if problem is not None:
            return SetParametersResult(successful=False, reason=problem)
    return SetParametersResult(successful=True)


def yaml_mapping(text: str, name: str, expected: str) -> dict | None:
    """A string parameter holding a YAML mapping (e.g. ``{joint glob: value}``): the mapping, or
    None for ''. Raises ConfigError (one line naming ``name``): malformed YAML, or not a mapping
    (``expected`` describes the layout in the message)."""
    if not str(text or '').strip():
        return None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f'{name}: malformed YAML: {" ".join(str(exc).split())}') from None
    if not isinstance(data, dict):
        raise ConfigError(f'{name}: expected {expected}, got {text!r}')
    return data


def parse_velocity_limits(text: str) -> dict[str, float]:
    """``velocity_limits`` YAML -> {joint: rad/s}. Raises ConfigError."""
    if not text or not text.strip():
        return {}
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f'velocity_limits is not valid YAML: {" ".join(str(exc).split())}') from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f'velocity_limits must map joint names to rad/s, got {data!r}')
    out = {}
    for joint, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
                or not math.isfinite(value):
            raise ConfigError(f'velocity_limits[{joint!r}] must be a number > 0 (rad/s), got {value!r}')
        out[str(joint)] = float(value)
    return out


# -- parameters several nodes declare (each node lists its own beside it) ------------------------
#: The goal handling of a FollowJointTrajectory server: the model whose joints goals are checked
#: against, velocity limits, partial goals, the feedback rate, the JTC constraints file, and the
#: joints whose trajectory time runs at the speed scaling. Declared by the sim bridge
#: (``mujoco_bridge``) and the twin server (``shadow_twin``).
GOAL_HANDLING_SPECS = (
    ParameterSpec('model_path', '', 'MJCF file of the twin; empty = the built-in Shadow Hand E; '
                  'package://shadow_twin/models/<file> = a built-in model (ur5.xml, mir250.xml). A change takes '
                  'effect on ~/reload.'),
    ParameterSpec('velocity_limits', '', 'YAML {joint: velocity limit}: goals whose points or segments exceed these '
                  'are rejected (MJCF has no velocity limits). Empty = none. Read for each goal.',
                  check=parse_velocity_limits, unit='rad/s'),
    ParameterSpec('allow_partial_joints_goal', True, 'Accept goals naming a subset of the joints (others hold).'),
    ParameterSpec('feedback_rate', 50.0, 'Rate of FollowJointTrajectory feedback and goal checks.',
                  bounds=(1.0, 1000.0), unit='Hz'),
    ParameterSpec('constraints_file', '', 'YAML of the JTC constraints (goal_time, stopped_velocity_tolerance, '
                  'per-joint trajectory/goal tolerances) that are the defaults of the constraints.* parameters; empty '
                  '= the shipped config/constraints.yaml.', read_only=True),
    # the UR's speed scaling (ur_robot_driver's scaled joint trajectory controller)
    ParameterSpec('speed_scaled_joints',
                  ['*shoulder_pan_joint', '*shoulder_lift_joint', '*elbow_joint', '*wrist_?_joint'],
                  'Globs of the joints whose trajectory time runs at the speed scaling (the UR\'s).'),
)
#: The period of ``/diagnostics``: the sim bridge and the twin monitor.
DIAGNOSTICS_SPECS = (
    ParameterSpec('diagnostics_period', 1.0, 'Period of /diagnostics messages.', read_only=True,
                  bounds=(0.05, 60.0), unit='s'),
)
#: The robot's and the sim's joint states a node takes in (read by :func:`real_joint_state_topics`):
#: the twin server and the twin monitor.
JOINT_STATE_INPUT_SPECS = (
    ParameterSpec('real_joint_states_topics', ['/joint_states'], 'sensor_msgs/JointState topics of the robot (e.g. the '
                  "UR driver's and the hand driver's), merged per joint.", read_only=True),
    ParameterSpec('real_joint_states_topic', '', 'Deprecated single sensor_msgs/JointState topic of the robot: when '
                  'set, it replaces real_joint_states_topics.', read_only=True),
    ParameterSpec('sim_joint_states_topic', '/sim/joint_states', 'sensor_msgs/JointState topic of the sim.',
                  read_only=True),
)


def load_constraints(path: str | Path | None = None) -> dict:
    """The ``constraints`` mapping of a constraints file (default: the shipped
    ``config/constraints.yaml``), as ``shadow_twin.control.jtc.default_tolerances`` reads it:
    ``{goal_time: s, stopped_velocity_tolerance: rad/s, <joint>: {trajectory: rad, goal: rad}}``.

    The file is a ros2 params file (``/**: ros__parameters: constraints: ...``) so that it can
    also be given with ``--params-file``. Raises ConfigError: missing file, bad YAML or layout.
    """
    path = Path(path) if path else config_path('constraints.yaml')
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f'cannot read the constraints file {path}: {exc.strerror or exc}') from None
    except yaml.YAMLError as exc:
        raise ConfigError(f'constraints file {path} is not valid YAML: {" ".join(str(exc).split())}') from None
    try:
        constraints = data['/**']['ros__parameters']['constraints']
    except (TypeError, KeyError):
        raise ConfigError(f"constraints file {path} must hold '/**: ros__parameters: constraints: ...'") from None
    if not isinstance(constraints, Mapping):
        raise ConfigError(f'constraints in {path} must be a mapping, got {constraints!r}')
    return dict(constraints)


def constraint_specs(joints: Iterable[str], defaults: Mapping) -> list[ParameterSpec]:
    """The ``constraints.*`` parameters of a trajectory controller over ``joints``, with the
    values of ``defaults`` (see :func:`load_constraints`) as defaults: ``constraints.goal_time``
    (s, 0 = no limit), ``constraints.stopped_velocity_tolerance`` (rad/s, 0 = not checked) and per
    joint ``constraints.<joint>.trajectory`` / ``.goal`` (rad, 0 = not checked), as ros2_controllers.

    Raises ConfigError: a default that is not a number.
    """
    def number(value, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f'constraints {where} must be a number, got {value!r}')
        return float(value)

    out = [ParameterSpec('constraints.goal_time', number(defaults.get('goal_time', 0.0), 'goal_time'),
                         'Time after the last point within which all joints must be within their goal tolerance; '
                         '0 = no limit (as ros2_controllers).', bounds=(0.0, CONSTRAINT_MAX), unit='s'),
           ParameterSpec('constraints.stopped_velocity_tolerance',
                         number(defaults.get('stopped_velocity_tolerance', 0.01), 'stopped_velocity_tolerance'),
                         'Goal velocity tolerance of every joint (0 = not checked).',
                         bounds=(0.0, CONSTRAINT_MAX), unit='rad/s')]
    for joint in joints:
        entry = defaults.get(joint) or {}
        if not isinstance(entry, Mapping):
            raise ConfigError(f'constraints.{joint} must map trajectory/goal to rad, got {entry!r}')
        out.append(ParameterSpec(f'constraints.{joint}.trajectory',
                                 number(entry.get('trajectory', 0.0), f'{joint}.trajectory'),
                                 f'Path position tolerance of {joint} while the trajectory runs '
                                 '(0 = not checked).', bounds=(0.0, CONSTRAINT_MAX), unit='rad'))
        out.append(ParameterSpec(f'constraints.{joint}.goal', number(entry.get('goal', 0.0), f'{joint}.goal'),
                                 f'Goal position tolerance of {joint} after the last point (0 = not checked).',
                                 bounds=(0.0, CONSTRAINT_MAX), unit='rad'))
    return out


def unknown_constraint_joints(defaults: Mapping, joints: Iterable[str]) -> list[str]:
    """Joint entries of a constraints mapping that are not in ``joints`` (to warn about)."""
    known = set(joints) | {'goal_time', 'stopped_velocity_tolerance'}
    return sorted(str(k) for k in defaults if k not in known)


def constraints_config(node: Node, joints: Iterable[str]) -> dict:
    """The declared ``constraints`` parameters as the mapping ``shadow_twin.control.jtc.default_tolerances`` reads."""
    config: dict[str, Any] = {
        'goal_time': float(node.get_parameter('constraints.goal_time').value),
        'stopped_velocity_tolerance': float(node.get_parameter('constraints.stopped_velocity_tolerance').value),
    }
    for joint in joints:
        entry = {}
        for key in ('trajectory', 'goal'):
            name = f'constraints.{joint}.{key}'
            if node.has_parameter(name):
                entry[key] = float(node.get_parameter(name).value)
        config[joint] = entry
    return config


def real_joint_state_topics(node) -> list[str]:
    """The robot's JointState topics of a node with the parameters ``real_joint_states_topic``
    (one topic, deprecated; wins when set, with a warning) and ``real_joint_states_topics`` (a
    list; repeats dropped). Raises ConfigError when there is none."""
    single = str(node.get_parameter('real_joint_states_topic').value or '').strip()
    if single:
        node.get_logger().warning('real_joint_states_topic is deprecated: use real_joint_states_topics '
                                  f'(a list); using {single} alone')
        return [single]
    topics = [str(t).strip() for t in node.get_parameter('real_joint_states_topics').value or [] if str(t).strip()]
    if not topics:
        raise ConfigError('real_joint_states_topics is empty: name the JointState topic(s) of the robot')
    return list(dict.fromkeys(topics))
