"""The cell as the calibration tests load it: the built-in cell's MJCF written once per module
(fixture ``cell_file``), the model with config/controllers/cell.yaml's servos (:func:`load_cell`; the
arm modules' module-wide fixture ``cell``; the base modules take a fresh one per test,
``support.base_cell``), and the arm's trajectories of config/trajectories/ur5.yaml with their rest
poses."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.control.trajectory import JointTrajectory, load_waypoint_yaml
from shadow_twin.model.cell.assembly import write_cell_mjcf
from shadow_twin.model.mjcf import TwinModel


REPO = Path(__file__).resolve().parents[2]
TRAJECTORIES = REPO / 'config' / 'trajectories' / 'ur5.yaml'
CELL_GAINS = REPO / 'config' / 'controllers' / 'cell.yaml'
SETTLE = 0.5                     # s simulated and compared after a trajectory ends


def load_cell(path: Path) -> tuple[TwinModel, SimController]:
    """The cell model and its simulated controller with config/controllers/cell.yaml (which converts the
    model's motors into the PD servos, so actuator kp/kd are the gains)."""
    twin = TwinModel(path)
    return twin, SimController(twin.model, ControllerGains.from_yaml(CELL_GAINS))


@functools.lru_cache(maxsize=None)
def trajectory(name: str) -> JointTrajectory:
    """Trajectory ``name`` of config/trajectories/ur5.yaml (read once; not to be modified)."""
    return load_waypoint_yaml(TRAJECTORIES, name)


def rest_state(name: str) -> dict[str, float]:
    """{joint: rad} of the trajectory's first waypoint (the rest pose, where it starts)."""
    traj = trajectory(name)
    return dict(zip(traj.joint_names, traj.positions[0]))


@pytest.fixture(scope='module')
def cell_file(tmp_path_factory) -> Path:
    """The default cell (built-in hand, arm prefix '') as an MJCF file, written once per module as
    ``shadow-twin model --cell`` writes it (a file: nothing can change it)."""
    path, _ = write_cell_mjcf(None, tmp_path_factory.mktemp('cell') / 'cell.xml')
    return path


@pytest.fixture(scope='module')
def cell(cell_file) -> tuple[TwinModel, SimController]:
    """(twin, controller) of the cell, one per module (the arm modules set no parameter in place)."""
    return load_cell(cell_file)
