"""ROS parameters of the ``mujoco_bridge`` node: declarations (with descriptions,
units and ranges), validation of runtime changes, and a typed snapshot.

Parameters load from a ros2 params YAML (``config/mujoco_bridge.yaml``) with
``--ros-args --params-file FILE`` (or ``-p name:=value``). Numbers may be
written as integers where a float is expected. Those marked *read-only* are fixed at start;
the others may be changed at runtime (``ros2 param set``) and take effect as
their description says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import yaml
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter

from shadow_twin.common.errors import ConfigError
from shadow_twin.simulation.live import ParameterOverrides


@dataclass(frozen=True)
class Spec:
    """One parameter: name, default, description, read-only, numeric range (min, max)."""

    name: str
    default: Any
    description: str
    read_only: bool = False
    bounds: tuple[float, float] | None = None


SPECS = (
    Spec('model_path', '', 'MJCF file of the twin; empty = the built-in Shadow Hand E. A change takes '
         'effect on ~/reload.'),
    Spec('joint_map_file', '', 'YAML with joint_map: {ROS name: MJCF name}; empty = identity.', read_only=True),
    Spec('gains_file', '', 'Simulated effort-PID gains YAML (controller: {default, gains}); empty = the shipped '
         'config/controllers/shadow_hand_e.yaml. Re-read on ~/reload.'),
    Spec('publish_rate', 250.0, 'Rate of joint states (and /clock), Hz. Physics steps at the model timestep '
         'and is advanced to the wall clock before each publication.', bounds=(1.0, 5000.0)),
    Spec('real_time_factor', 1.0, 'Sim seconds per wall second the stepping aims at.', bounds=(0.001, 100.0)),
    Spec('publish_clock', False, 'Publish /clock (rosgraph_msgs/Clock) with the sim time; joint state stamps '
         'are then sim time too.', read_only=True),
    Spec('viewer', False, 'Open a passive MuJoCo viewer window (needs a display; runs in its own thread).',
         read_only=True),
    Spec('joint_states_topic', '/sim/joint_states', 'sensor_msgs/JointState topic of the simulated joints.',
         read_only=True),
    Spec('action_name', '/sim/follow_joint_trajectory', 'control_msgs/action/FollowJointTrajectory server of '
         'the simulated trajectory controller.', read_only=True),
    Spec('overrides', '', 'YAML {joint_glob: {attribute: value}} of physical parameters set after every '
         '(re)compile, e.g. "rh_FFJ1: {damping: x3}" (xF scales the model value, a number sets it). Attributes: '
         'damping, frictionloss, armature, stiffness, springref, range_lower, range_upper. A change takes '
         'effect on ~/reload.'),
    Spec('velocity_limits', '', 'YAML {joint: rad/s}: goals whose points or segments exceed these are '
         'rejected (MJCF has no velocity limits). Empty = none. Read for each goal.'),
    Spec('allow_partial_joints_goal', True, 'Accept goals naming a subset of the joints (others hold).'),
    Spec('max_catch_up', 0.1, 'Largest lag of sim time behind the wall clock that is made up, s; a larger '
         'lag (CPU starvation, a long reload) is dropped and logged.', bounds=(0.001, 10.0)),
    Spec('feedback_rate', 50.0, 'Rate of FollowJointTrajectory feedback and goal checks, Hz.',
         bounds=(1.0, 1000.0)),
    Spec('diagnostics_period', 1.0, 'Period of /diagnostics messages, s.', read_only=True,
         bounds=(0.05, 60.0)),
    Spec('rtf_log_period', 5.0, 'Period of the real-time factor log line, s; also the measuring window.',
         read_only=True, bounds=(0.5, 3600.0)),
    Spec('constraints.goal_time', 0.0, 'Time after the last point within which all joints must be within '
         'their goal tolerance, s; 0 = no limit (as ros2_controllers).', bounds=(0.0, 1e6)),
    Spec('constraints.stopped_velocity_tolerance', 0.01, 'Goal velocity tolerance of every joint, rad/s '
         '(0 = not checked).', bounds=(0.0, 1e6)),
)


def joint_specs(joints: Iterable[str]) -> list[Spec]:
    """Per-joint ``constraints.<joint>.trajectory`` / ``.goal`` position tolerances (rad, 0 = not checked)."""
    out = []
    for joint in joints:
        out.append(Spec(f'constraints.{joint}.trajectory', 0.0, f'Path position tolerance of {joint} while '
                        'the trajectory runs, rad (0 = not checked).', bounds=(0.0, 1e6)))
        out.append(Spec(f'constraints.{joint}.goal', 0.0, f'Goal position tolerance of {joint} after the last '
                        'point, rad (0 = not checked).', bounds=(0.0, 1e6)))
    return out


def declare(node: Node, specs: Iterable[Spec]) -> None:
    """Declare ``specs`` on ``node`` (skipping names already declared).

    Numeric (float) parameters accept integers too (``publish_rate:=1000``):
    they are declared with dynamic typing and checked by :func:`check_value`.
    Raises ConfigError naming the parameter if a given value is invalid.
    """
    for spec in specs:
        if node.has_parameter(spec.name):
            continue
        numeric = isinstance(spec.default, float)
        description = spec.description
        if spec.bounds is not None:
            description += f' Range {spec.bounds[0]:g}..{spec.bounds[1]:g}.'
        descriptor = ParameterDescriptor(description=description, read_only=spec.read_only,
                                         dynamic_typing=numeric)
        node.declare_parameter(spec.name, spec.default, descriptor)
        problem = check_value(spec, node.get_parameter(spec.name).value)
        if problem is not None:
            raise ConfigError(problem)


_SPECS_BY_NAME = {spec.name: spec for spec in SPECS}


def spec_of(name: str) -> Spec | None:
    """The Spec of parameter ``name`` (per-joint constraints included), or None."""
    if name in _SPECS_BY_NAME:
        return _SPECS_BY_NAME[name]
    if name.startswith('constraints.') and name.rsplit('.', 1)[-1] in ('trajectory', 'goal'):
        return Spec(name, 0.0, '', bounds=(0.0, 1e6))
    return None


def check_value(spec: Spec, value) -> str | None:
    """Why ``value`` is not acceptable for ``spec``, or None."""
    if isinstance(spec.default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f'parameter {spec.name} must be a number, got {value!r}'
        if not math.isfinite(value) or (spec.bounds is not None
                                        and not spec.bounds[0] <= value <= spec.bounds[1]):
            return (f'parameter {spec.name} must be within {spec.bounds[0]:g}..{spec.bounds[1]:g}, '
                    f'got {value!r}')
    elif type(value) is not type(spec.default):
        return f'parameter {spec.name} must be a {type(spec.default).__name__}, got {value!r}'
    return None


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


def validate_change(params: list[Parameter]) -> SetParametersResult:
    """on-set callback: refuse runtime values that cannot work (the reason is returned)."""
    for p in params:
        spec = spec_of(p.name)
        problem = None if spec is None else check_value(spec, p.value)
        if problem is not None:
            return SetParametersResult(successful=False, reason=problem)
        try:
            if p.name == 'overrides':
                ParameterOverrides.from_yaml_text(p.value)
            elif p.name == 'velocity_limits':
                parse_velocity_limits(p.value)
        except ConfigError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
    return SetParametersResult(successful=True)


def constraints_config(node: Node, joints: Iterable[str]) -> dict:
    """The ``constraints`` parameters as the mapping ``shadow_twin.control.jtc.default_tolerances`` reads."""
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
