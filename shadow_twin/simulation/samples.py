"""The states and reports :class:`~shadow_twin.simulation.live.simulation.LiveSimulation` hands out: a joint
state sample, a trajectory's tracking sample, what a reload did and a reload prepared but not yet
swapped in."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from shadow_twin.control.controller import SimController
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.simulation.overrides import ParameterOverrides


@dataclass(frozen=True)
class JointStateSample:
    """Joint state at one sim time: ROS names, positions (rad or m), velocities
    (rad/s or m/s), efforts (N m or N: actuator force on the joint)."""

    sim_time: float
    names: tuple[str, ...]
    position: np.ndarray
    velocity: np.ndarray
    effort: np.ndarray


@dataclass(frozen=True)
class TrackingSample:
    """Desired and actual state of the active trajectory's joints at ``sim_time``.

    ``start_time`` and ``end_time`` are the trajectory's sim times (s);
    ``token`` identifies the trajectory (see :meth:`LiveSimulation.set_trajectory`).
    """

    sim_time: float
    token: int
    joint_names: tuple[str, ...]
    desired_position: np.ndarray
    desired_velocity: np.ndarray
    desired_acceleration: np.ndarray
    actual_position: np.ndarray
    actual_velocity: np.ndarray
    start_time: float
    end_time: float


@dataclass
class ReloadReport:
    """What :meth:`LiveSimulation.reload` did."""

    path: Path
    joints: int
    actuators: int
    kept_state: list[str] = field(default_factory=list)
    new_joints: list[str] = field(default_factory=list)
    dropped_joints: list[str] = field(default_factory=list)
    overrides: list[tuple[str, float, float]] = field(default_factory=list)
    trajectory_kept: bool | None = None

    def summary(self) -> str:
        """One line for the log / the service answer."""
        parts = [f'reloaded {self.path}: {self.joints} joints, {self.actuators} actuators',
                 f'state kept for {len(self.kept_state)} joints by name']
        if self.new_joints:
            parts.append(f'new joints start at their reset position: {self.new_joints}')
        if self.dropped_joints:
            parts.append(f'joints no longer in the model: {self.dropped_joints}')
        if self.overrides:
            parts.append(f'{len(self.overrides)} model-parameter overrides applied')
        if self.trajectory_kept is not None:
            parts.append('active trajectory continues' if self.trajectory_kept
                         else 'active trajectory dropped (its joints changed); holding position')
        return '; '.join(parts)


@dataclass(frozen=True)
class PreparedReload:
    """A model built by :meth:`LiveSimulation.prepare_reload`, not yet swapped in."""

    twin: TwinModel
    controller: SimController
    applied: list
    overrides: ParameterOverrides
    gains_source: object
    #: The scene whose objects the model holds (:class:`~shadow_twin.model.scene.SceneConfig`).
    scene: object = None
