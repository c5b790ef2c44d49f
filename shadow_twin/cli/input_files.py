"""The user's input files of the offline commands, read and checked: text and YAML files, the
waypoint trajectory (``--trajectory``) and the parameter file (``--params``). Every problem is a
ShadowTwinError naming the file and where in it (the command line prints it on one line, exit 2)."""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from shadow_twin.common.errors import ConfigError, ModelError, TrajectoryError
from shadow_twin.control.trajectory import JointTrajectory, parse_trajectory_arg
from shadow_twin.model.calibratable import ACTUATOR_ATTRIBUTES, GEOM_ATTRIBUTES


def read_text_file(path: Path, what: str) -> str:
    """The UTF-8 text of ``path``. Raises ConfigError (one line) for a missing, unreadable or
    binary file."""
    if not path.is_file():
        raise ConfigError(f'{what} not found: {path}')
    try:
        return path.read_bytes().decode('utf-8')
    except OSError as exc:
        raise ConfigError(f'{what} {path}: cannot read it ({exc.strerror or exc})') from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f'{what} {path} is not a text file (byte {exc.start} is not UTF-8)') from None


def read_yaml_file(path: Path, what: str):
    """The YAML document of ``path``. Raises ConfigError, one line: the file, the line and column
    and the problem for malformed YAML; missing, unreadable or binary files as :func:`read_text_file`."""
    text = read_text_file(path, what)
    try:
        return yaml.load(text, Loader=getattr(yaml, 'CSafeLoader', yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f'line {mark.line + 1}, column {mark.column + 1}: ' if mark is not None else ''
        problem = ' '.join(str(exc.problem or exc.context or 'malformed').split())
        raise ConfigError(f'{what} {path}: {where}not valid YAML: {problem}') from None
    except yaml.YAMLError as exc:
        raise ConfigError(f'{what} {path}: not valid YAML: {" ".join(str(exc).split())}') from None


def load_trajectory(spec: str) -> JointTrajectory:
    """The trajectory of ``--trajectory FILE.yaml:NAME`` (``parse_trajectory_arg``), every error one
    line naming the file: a binary file, malformed YAML (line and column), and a waypoint whose
    ``joint_angles`` holds a string, NaN or inf (the trajectory and waypoint named).
    Raises ConfigError or TrajectoryError."""
    if ':' in spec:
        file, name = spec.rsplit(':', 1)
        data = read_yaml_file(Path(file), 'trajectory file')
        _check_waypoints(Path(file), name, data)
    try:
        return parse_trajectory_arg(spec)
    except TrajectoryError as exc:
        raise TrajectoryError(' '.join(str(exc).split())) from None
    except (ValueError, TypeError, AttributeError) as exc:
        raise TrajectoryError(f'trajectory {spec}: malformed ({" ".join(str(exc).split())})') from None


def _check_waypoints(path: Path, name: str, data) -> None:
    """ConfigError naming the waypoint (0-based) and joint index whose angle or interpolate_time is
    not a finite number, in trajectory ``name`` of the waypoint YAML ``data`` (other problems are
    left to ``load_waypoint_yaml``)."""
    if not isinstance(data, dict):
        raise ConfigError(f'trajectory file {path}: expected a mapping of *_trajectories sections')
    for section, trajectories in data.items():
        if not (str(section).endswith('_trajectories') and isinstance(trajectories, dict)):
            continue
        waypoints = trajectories.get(name)
        if not isinstance(waypoints, list):
            continue
        for k, waypoint in enumerate(waypoints):
            if not isinstance(waypoint, dict):
                raise ConfigError(f'{path}: {name} waypoint {k} is not a mapping with joint_angles and '
                                  f'interpolate_time')
            angles = waypoint.get('joint_angles')
            values = angles if isinstance(angles, list) else []
            for i, value in enumerate(values):
                if not _finite(value):
                    raise ConfigError(f'{path}: {name} waypoint {k}: joint_angles[{i}] is {value!r}, not a finite '
                                      f'number (rad)')
            step = waypoint.get('interpolate_time')
            if step is not None and not _finite(step):
                raise ConfigError(f'{path}: {name} waypoint {k}: interpolate_time is {step!r}, not a finite '
                                  f'number (s)')


def _finite(value) -> bool:
    if isinstance(value, bool):
        return False
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def load_params(path: Path, twin) -> dict:
    """Read a parameters YAML ({values: {joint.attribute: value}}) into targets.

    Raises ConfigError, one line: missing, binary or malformed file (line and problem), a value
    that is not a finite number, a name the model does not have."""
    data = read_yaml_file(path, 'parameters file') or {}
    values = data.get('values', data) if isinstance(data, dict) else data
    if not isinstance(values, dict):
        raise ConfigError(f'{path}: expected "values: {{name.attribute: number}}"')
    out = {}
    for key, value in values.items():
        name, _, attribute = str(key).rpartition('.')
        kind = 'actuator' if attribute in ACTUATOR_ATTRIBUTES else 'geom' if attribute in GEOM_ATTRIBUTES else 'joint'
        if not _finite(value):
            raise ConfigError(f'{path}: {key} must be a finite number, got {value!r}')
        try:
            out[twin.target(kind, name, attribute)] = float(value)
        except ModelError as exc:
            raise ConfigError(f'{path}: {exc}') from None
    return out
