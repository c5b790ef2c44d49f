"""The goal preview without ROS: a goal (:mod:`.goal`: what is previewed and what comes out)
simulated in a copy of the live model before anything moves (:mod:`.predictor`), judged as the
JTC and the robots' limits would (:mod:`.checks`, with the figures of :mod:`.config`, contacts
from :mod:`.contacts`), ahead of its execution or whole (:mod:`.windows`).

``from shadow_twin.simulation.preview import GoalPredictor`` (and the other names below) keeps
working (the module was ``shadow_twin/simulation/preview.py`` before issue 35)."""

from shadow_twin.simulation.preview.goal import BasePart, PredictedRun, PreviewGoal, StartState
from shadow_twin.simulation.preview.predictor import EFFORT_SENSOR_PREFIX, GoalPredictor, add_effort_sensors

__all__ = ['EFFORT_SENSOR_PREFIX', 'BasePart', 'GoalPredictor', 'PredictedRun', 'PreviewGoal', 'StartState',
           'add_effort_sensors']
