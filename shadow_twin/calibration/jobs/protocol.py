"""The cell's calibration protocol: the runs of the MiR250 + UR5 twin study as presets (ROS-free).

The study (Simscape MiR250 + UR5 digital twin, IMECE 2023) identified its base on three
runs and validated it on three others:

======  ==============  =====================================  =====================
run     role            base                                   arm
======  ==============  =====================================  =====================
IN1     identification  near-straight                          still
IN2     identification  near-straight (other speed)            still
CN1     identification  arc                                    still
CN2     validation      arc (other radius and speed)           still
CY      validation      arc                                    moving
IY      validation      straight                               swinging its first joint
======  ==============  =====================================  =====================

Its base runs keep the arm still, so they cannot identify the arm. The protocol adds arm
identification runs (role ``arm_identification``: calibration sweeps of
``config/trajectories/ur5.yaml`` with the base still); the arm's validation is its joints in
CY and IY, where it moves while the base drives.

A protocol file (``config/calibration/cell_protocol.yaml``, :meth:`CellProtocol.from_yaml`)
names the arm's rest pose (every run starts and ends there), the search spaces of the two
groups, the screening and fit budgets, and the runs. Each run is a :class:`ProtocolRun`:
a :class:`~shadow_twin.calibration.jobs.motions.BaseMotion` (a velocity profile: trapezoidal
speed with acceleration ``accel``, constant curvature 1/``radius``) and an
:class:`~shadow_twin.calibration.jobs.motions.ArmMotion` (hold the rest pose; swing one joint; or
a named waypoint trajectory), both in :mod:`~shadow_twin.calibration.jobs.motions`.
:meth:`ProtocolRun.goal` turns it into what a ``FollowJointTrajectory`` goal carries: the arm's
:class:`JointTrajectory` and the base's poses relative to its start pose (the ROS layer composes
them with the base's odometry).

Units: m, rad, m/s, rad/s, m/s^2, s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np
import yaml

from shadow_twin.calibration.jobs.motions import ArmMotion, BaseMotion, RunGoal, base_goal, checked_number
from shadow_twin.common.errors import ConfigError, TrajectoryError
from shadow_twin.common.paths import config_path
from shadow_twin.simulation.mobile_base import TwistCommands

IDENTIFICATION, VALIDATION, ARM_IDENTIFICATION = 'identification', 'validation', 'arm_identification'
ROLES = (IDENTIFICATION, VALIDATION, ARM_IDENTIFICATION)
#: Period of a replayed lead-in's velocity commands, s (the twin's base control rate, 50 Hz).
LEAD_IN_COMMAND_PERIOD = 0.02


@dataclass(frozen=True)
class ProtocolRun:
    """One run of the protocol: a name (IN1, CY, ...), its role, the base's and the arm's motion."""

    name: str
    role: str
    base: BaseMotion = field(default_factory=BaseMotion)
    arm: ArmMotion = field(default_factory=ArmMotion)
    description: str = ''

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ConfigError(f'run {self.name}: role must be one of {ROLES}, got {self.role!r}')
        if self.role == ARM_IDENTIFICATION and not self.arm.moves:
            raise ConfigError(f'run {self.name}: an arm identification run must move the arm')
        if self.role != ARM_IDENTIFICATION and self.base.still:
            raise ConfigError(f'run {self.name}: a base {self.role} run must move the base (speed is 0)')

    def goal(self, rest: Mapping[str, float]) -> RunGoal:
        """The run's goal (see :class:`RunGoal`), the arm starting and ending at ``rest``."""
        return base_goal(self.base, self.arm.trajectory_for(rest, self.base.duration))


@dataclass(frozen=True)
class CellProtocol:
    """A whole protocol (see module doc).

    Attributes:
        rest_pose: {arm joint: rad} every run starts and ends at.
        runs: the runs, in the order they are executed.
        arm_space: search-space YAML of the arm group.
        base_space: search-space YAML of the base group.
        screening_samples: parameter sets of each group's sensitivity screening (0: none).
        screened_keep: parameters of each group fitted after screening (the most influential).
        arm_budget, base_budget: rollouts of each group's fit.
        lead_in: a straight drive ahead before every base run, not recorded (None: none). A
            caster's angle at the start changes a slipping base's path by centimetres (up to
            18 cm over a run, measured on the MiR250 model), and after the previous run it is
            unknown; driving ahead leaves every caster trailing, the state the replay starts
            from (:meth:`lead_in_commands`).
        goal_position_tolerance: the base's goal tolerance of every run's goal, m (the goal's
            ``component_goal_tolerance`` TRANSLATION; 0: the twin's ``base.tolerances``). A run
            makes the wheels slip on purpose and a differential base cannot take back a lateral
            error at its end, so its end pose is no target: the recording holds wherever it went
            (a CN1 under load ended 0.08 m to the side and aborted at the twin's 0.05 m).
        goal_yaw_tolerance: the same for yaw, rad (ROTATION; 0: the twin's).
        source: the file it was read from.
    """

    rest_pose: dict
    runs: tuple
    arm_space: Path
    base_space: Path
    screening_samples: int = 20
    screened_keep: int = 4
    arm_budget: int = 40
    base_budget: int = 40
    lead_in: BaseMotion | None = None
    goal_position_tolerance: float = 0.0
    goal_yaw_tolerance: float = 0.0
    source: str = ''

    def __post_init__(self) -> None:
        for name in ('goal_position_tolerance', 'goal_yaw_tolerance'):
            checked_number(getattr(self, name), name, low=0.0)
        if self.lead_in is not None and (self.lead_in.speed <= 0 or self.lead_in.radius):
            raise ConfigError(f'lead_in must drive straight ahead (speed > 0, radius 0), got {self.lead_in}')
        names = [r.name for r in self.runs]
        if len(set(names)) != len(names):
            raise ConfigError(f'protocol run names must be unique, got {names}')
        for role in (IDENTIFICATION, VALIDATION):
            if not self.with_role(role):
                raise ConfigError(f'a protocol needs at least one {role} run')

    def lead_in_goal(self) -> RunGoal | None:
        """The lead-in's goal, the arm holding the rest pose; None without a lead-in."""
        if self.lead_in is None:
            return None
        return base_goal(self.lead_in, ArmMotion().trajectory_for(self.rest_pose, self.lead_in.duration))

    def lead_in_commands(self, period: float = LEAD_IN_COMMAND_PERIOD) -> TwistCommands | None:
        """The lead-in as velocity commands every ``period`` s, for a replay's simulated base
        (:class:`~shadow_twin.calibration.scoring.base_evaluation.BaseObjectiveSettings`); None without one."""
        if self.lead_in is None:
            return None
        times = np.arange(0.0, self.lead_in.duration + period, period)
        return TwistCommands(times, self.lead_in.twist(times))

    def with_role(self, role: str) -> list[ProtocolRun]:
        """The runs of ``role``, in order."""
        return [r for r in self.runs if r.role == role]

    def run(self, name: str) -> ProtocolRun:
        """The run ``name``. Raises ConfigError naming the known runs."""
        for r in self.runs:
            if r.name == name:
                return r
        raise ConfigError(f'no run {name!r} in the protocol; runs: {[r.name for r in self.runs]}')

    @classmethod
    def from_yaml(cls, path: str | Path | None = None) -> 'CellProtocol':
        """Read a protocol file (default ``config/calibration/cell_protocol.yaml``).

        Space files are relative to ``config/calibration`` unless absolute. Raises ConfigError
        naming the problem (missing file, bad YAML, unknown key, bad value).
        """
        path = Path(path) if path else config_path('calibration', 'cell_protocol.yaml')
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except FileNotFoundError:
            raise ConfigError(f'protocol file {path} does not exist') from None
        except yaml.YAMLError as exc:
            raise ConfigError(f'{path}: not valid YAML ({exc})') from None
        if not isinstance(data, dict) or not isinstance(data.get('runs'), dict) or not data['runs']:
            raise ConfigError(f'{path}: a protocol needs a "runs" mapping')
        settings = dict(data.get('protocol') or {})
        try:
            runs = tuple(ProtocolRun(name=str(name), role=spec.get('role', ''),
                                     base=BaseMotion(**(spec.get('base') or {})),
                                     arm=ArmMotion(**(spec.get('arm') or {})),
                                     description=str(spec.get('description', '')))
                         for name, spec in data['runs'].items())
            rest = {str(j): checked_number(v, f'rest_pose {j}') for j, v in (settings.pop('rest_pose') or {}).items()}
            spaces = {k: _space_path(settings.pop(k)) for k in ('arm_space', 'base_space')}
            if settings.get('lead_in') is not None:
                settings['lead_in'] = BaseMotion(**settings['lead_in'])
            protocol = cls(rest, runs, source=str(path), **spaces, **settings)
        except ConfigError as exc:
            raise ConfigError(f'{path}: {exc}') from None
        except (TypeError, KeyError, AttributeError) as exc:
            raise ConfigError(f'{path}: not a protocol ({exc})') from None
        for run in protocol.runs:
            try:
                run.arm.trajectory_for(protocol.rest_pose, 0.0)
            except (ConfigError, TrajectoryError) as exc:
                raise ConfigError(f'{path}: run {run.name}: {exc}') from None
        return protocol


def _space_path(value) -> Path:
    path = Path(str(value))
    path = path if path.is_absolute() else config_path('calibration', str(value))
    if not path.is_file():
        raise ConfigError(f'search space {path} does not exist')
    return path
