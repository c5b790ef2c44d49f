"""A calibration problem with known answer, for the least-squares and identifiability tests.

The built-in hand model, with the first finger's damping set to known values, follows
``curl_all`` (config/trajectories/calibration.yaml); its joint states at 250 Hz (optionally
with Gaussian noise) are the "real" recording, stamped with the trajectory start, so the
evaluator needs neither onset detection nor a delay fit. A calibration of the same
damping values must find them again.
"""

from __future__ import annotations

import numpy as np

from shadow_twin.calibration.scoring.evaluation import Evaluator
from shadow_twin.calibration.scoring.placement import AlignmentSettings
from shadow_twin.calibration.recordings.recording import JointStateRecording
from shadow_twin.calibration.search.search_space import Dimension, SearchSpace
from shadow_twin.common.paths import config_path
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.control.trajectory import JointTrajectory, load_waypoint_yaml
from shadow_twin.model.calibratable import apply_parameters
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.simulation.offline import TrajectorySimulator

START = 100.0                    # s, trajectory start on the recording's clock
PRE_ROLL = 0.2                   # s of rest recorded before it
SETTLE = 0.5                     # s compared after the trajectory ends
OBJECTIVE = ['rh_FFJ1', 'rh_FFJ2', 'rh_FFJ3']
#: Searched dimensions: name -> (joints, low, high); all damping (N m s/rad), log scale.
DIMENSIONS = {'J3_damping': (['rh_FFJ3'], 0.01, 0.5), 'J12_damping': (['rh_FFJ1', 'rh_FFJ2'], 0.01, 0.5),
              # a finger that is not in the objective: no effect on the residuals at all
              'MF_damping': (['rh_MFJ1', 'rh_MFJ2', 'rh_MFJ3'], 0.01, 0.5)}
#: The "real" hand's values (the model's own default is 0.05).
TRUTH = {'J3_damping': 0.11, 'J12_damping': 0.03, 'MF_damping': 0.05}


def make_problem(names=('J3_damping', 'J12_damping'), noise: float = 0.0, seed: int = 0):
    """(evaluator, search space, true point (D,)) for the dimensions ``names``.

    ``noise``: standard deviation of Gaussian noise on the recorded positions after the
    trajectory start, rad.
    """
    twin = TwinModel()
    controller = SimController(twin.model, ControllerGains.from_yaml(config_path('controllers',
                                                                                  'shadow_hand_e.yaml')))
    trajectory = load_waypoint_yaml(config_path('trajectories', 'calibration.yaml'), 'curl_all')
    dims = [Dimension(n, [twin.target('joint', j, 'damping') for j in DIMENSIONS[n][0]], DIMENSIONS[n][1],
                      DIMENSIONS[n][2], 0.05, log=True) for n in names]
    space = SearchSpace(dims, 'synthetic')
    truth = np.array([TRUTH[n] for n in names])
    sim = TrajectorySimulator(twin.model, controller, trajectory, trajectory.duration + SETTLE + 0.1)
    model = sim.model_copies(1)[0]
    apply_parameters(model, space.values(truth))
    positions = sim.run([model])[0][1::2]                      # 2 ms steps -> 250 Hz
    times = START + sim.times[1::2]
    rest_times = START - PRE_ROLL + np.arange(int(PRE_ROLL * 250) + 1) / 250.0
    positions = np.vstack([np.repeat(sim.start_positions[None], rest_times.size, axis=0), positions])
    if noise:  # on the motion only: the initial state is read from the recording at START
        positions[rest_times.size:] += np.random.default_rng(seed).normal(0.0, noise, (times.size, positions.shape[1]))
    recording = JointStateRecording.from_arrays(np.concatenate([rest_times, times]), controller.joint_names,
                                                positions, source='synthetic')
    evaluator = Evaluator(twin, controller, recording, trajectory, OBJECTIVE,
                          settings=AlignmentSettings(settle_time=SETTLE), trajectory_start=START)
    return evaluator, space, truth


def first_finger_recording(twin, controller, rest=1.0, after=1.5, start=50.0, others=None, rate=250.0):
    """A simulated recording of a first-finger trajectory started at ``start`` (s) after ``rest`` s
    of rest, every joint recorded; ``others``: {joint: rad} where joints the trajectory does not
    name rest (and are simulated to rest)."""
    joints = ['rh_FFJ1', 'rh_FFJ2', 'rh_FFJ3', 'rh_FFJ4']
    trajectory = JointTrajectory(joints, np.array([0.6, 1.2]), np.array([[0.2, 0.4, 0.6, 0.0], [0.3, 0.6, 1.0, 0.1]]),
                                 name='ff')
    sim = TrajectorySimulator(twin.model, controller, trajectory, trajectory.duration + after,
                              initial_positions=others or {})
    step = max(1, int(round(1.0 / (rate * sim.dt))))
    positions = sim.run([sim.model_copies(1)[0]])[0][step - 1::step]
    times = start + sim.times[step - 1::step]
    rest_times = start - rest + np.arange(int(rest * rate)) / rate
    positions = np.vstack([np.repeat(sim.start_positions[None], rest_times.size, axis=0), positions])
    recording = JointStateRecording.from_arrays(np.concatenate([rest_times, times]), controller.joint_names,
                                                positions, source='synthetic')
    return recording, trajectory
