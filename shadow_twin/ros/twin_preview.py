"""The twin's goal preview in ROS: the ``/twin/preview`` action and the prediction of every twin goal.

The sim runs 15-60x faster than real time offline, so the twin predicts a goal's outcome before
anything moves (``docs/preview.md``). :class:`TwinPreview` builds a
:class:`~shadow_twin.simulation.preview.GoalPredictor` on the MJCF the sim runs (the twin's
``model_path`` / ``cell_config``) with the sim bridge's drive gains, predicts a screened goal from the
sim's current state (``/sim/joint_states``, the sim base's ``/sim/odom``; in mode ``real`` the robot's,
the sim then standing still) on a worker thread of its own (the executor threads keep serving
feedback and joint states), and publishes every prediction as JSON (``std_msgs/String`` on
``preview_result_topic``). :class:`PreviewServer` serves ``preview_action_name``
(``control_msgs/action/FollowJointTrajectory``: the same goal, nothing moves): the goal is screened
as a twin goal is (a malformed goal gets the same rejection), then predicted; the result is
SUCCESSFUL or the first failure's error code and ``predicted to fail: ...``; its feedback carries the
goal's target (desired), the predicted end state (actual) and their difference (error).

The twin's ``preview`` parameter decides what a predicted failure does to a twin goal
(:func:`preview_policy`): ``enforce`` rejects it before any controller is called, ``warn`` runs
it and logs the prediction in one line, ``off`` predicts nothing.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from fnmatch import fnmatchcase
from typing import Callable

import mujoco
import numpy as np
from rclpy.node import Node
from rclpy.qos import QoSProfile
from std_msgs.msg import String

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.paths import config_path, resolve_share_url
from shadow_twin.control import jtc
from shadow_twin.control.controller import ControllerGains
from shadow_twin.model.cell import CellConfig, build_cell_spec
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.ros.action_server import AcceptedGoal, FollowJointTrajectoryServer, feedback_message
from shadow_twin.ros.base_driver import BaseDriver
from shadow_twin.ros.conversions import time_msg_ns
from shadow_twin.ros.twin_goal import TwinGoalState
from shadow_twin.ros.twin_inputs import JointStateCache, SpeedScaling
from shadow_twin.simulation.preview import BasePart, GoalPredictor, PreviewGoal, StartState
from shadow_twin.simulation.preview_checks import Prediction, preview_goal
from shadow_twin.simulation.preview_config import PreviewConfig

#: What a predicted failure does to a twin goal.
PREVIEW_POLICIES = ('off', 'warn', 'enforce')
#: Speed scaling (fraction) below which a goal is previewed at full speed (the arm is paused).
MIN_PREVIEW_SCALING = 0.05


def preview_policy(setting: str, mode: str) -> str:
    """The ``preview`` parameter's policy: ``off``, ``warn`` or ``enforce``; ``auto`` is ``enforce``
    in modes ``real`` and ``both`` (the robots move) and ``off`` in ``sim`` and ``shadow``.
    Raises ConfigError for another value."""
    value = str(setting).strip().lower()
    if value == 'auto':
        return 'enforce' if mode in ('real', 'both') else 'off'
    if value not in PREVIEW_POLICIES:
        raise ConfigError(f'preview must be one of {["auto", *PREVIEW_POLICIES]}, got {setting!r}')
    return value


def preview_model(model_path: str, cell_config: str, gains_file: str) -> tuple[mujoco.MjSpec, ControllerGains]:
    """The MJCF the sim runs and its drive gains: ``model_path``, else the cell built from
    ``cell_config``, else the built-in hand (as ``load_limits`` picks the joints); the gains from
    ``gains_file``, else the shipped ``config/controllers/<model>.yaml`` of the model (``cell.yaml``
    for the cell, ``ur5.yaml`` for ``ur5.xml``, ...), else the sim bridge's default
    (``shadow_hand_e.yaml``). Raises ShadowTwinError (ConfigError, ModelError)."""
    if not model_path and cell_config:
        path = resolve_share_url(cell_config)
        if not path.is_file():
            raise ConfigError(f'cell_config {cell_config}: no such file ({path})')
        spec, default_gains = build_cell_spec(CellConfig.from_yaml(path)), config_path('controllers', 'cell.yaml')
    else:
        twin = TwinModel(model_path or None)
        spec, default_gains = twin.spec, config_path('controllers', f'{twin.path.stem}.yaml')
        if not default_gains.is_file():
            default_gains = config_path('controllers', 'shadow_hand_e.yaml')
    gains = resolve_share_url(gains_file) if gains_file else default_gains
    return spec, ControllerGains.from_yaml(gains)


class TwinPreview:
    """Predicts screened twin goals from the current state and publishes each prediction.

    Args:
        node: the twin's node (logger, clock, the result publisher).
        predictor: the predictor on the sim's model.
        source: whose state the prediction starts from: 'sim', or 'real' (mode real).
        states: the twin's joint states.
        base: the base driver (its odometry gives the base's start), None without a base.
        speed_scaling: the arm's speed scaling, None when not followed.
        result_topic: where the predictions go (``std_msgs/String``, JSON).
        mode: the twin's mode (in every published prediction).
    """

    def __init__(self, node: Node, predictor: GoalPredictor, source: str, states: JointStateCache,
                 base: BaseDriver | None, speed_scaling: SpeedScaling | None, result_topic: str, mode: str) -> None:
        self.node, self.log = node, node.get_logger()
        self.predictor = predictor
        self.source, self.states, self.base = source, states, base
        self.speed_scaling = speed_scaling
        self.mode = mode
        self.publisher = node.create_publisher(String, result_topic, QoSProfile(depth=10))
        # one worker: predictions run one at a time, off the executor threads
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix='twin_preview')

    def _start(self, joints: list[str]) -> StartState:
        """The state the prediction starts from (class doc). Raises ``jtc.GoalRejected``
        (INVALID_GOAL) when a goal joint of ``joints`` has no state yet."""
        state = self.states.get(self.source)
        missing = [j for j in joints if j not in state]
        if missing:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'no {self.source} joint state for {missing} yet: the preview '
                                                     f'starts from it')
        positions = {j: q for j, (q, _) in state.items()}
        velocities = {j: v for j, (_, v) in state.items() if np.isfinite(v)}
        pose = twist = None
        if self.base is not None:
            side = self.source if self.source in self.base.endpoints else next(iter(self.base.endpoints))
            latest = self.base.endpoints[side].latest()
            if latest is not None:
                pose, twist = tuple(latest.pose), (latest.v, latest.lateral, latest.omega)
        return StartState(positions, velocities, pose, twist)

    def goal_of(self, plan: TwinGoalState, settings: dict) -> PreviewGoal:
        """The :class:`PreviewGoal` of a screened goal: its trajectory, tolerances and base part, from
        the current state, at the arm's current speed scaling. Raises ``jtc.GoalRejected`` when the
        state of a goal joint is missing."""
        base = None
        if plan.base_goal is not None:
            s = settings['base']
            base = BasePart(plan.base_goal.trajectory, plan.base_goal.tolerances, s.gains, s.limits, s.geometry,
                            s.command_latency, s.control_rate)
        scaling, scaled = 1.0, []
        if self.speed_scaling is not None and plan.trajectory is not None:
            scaling = self.speed_scaling.fraction
            scaled = [j for j in plan.trajectory.joint_names
                      if any(fnmatchcase(j, g) for g in settings['speed_scaled_joints'])]
            if scaling < MIN_PREVIEW_SCALING:
                scaling = 1.0
        joints = [] if plan.trajectory is None else list(plan.trajectory.joint_names)
        return PreviewGoal(plan.trajectory, plan.tolerances, base, self._start(joints), scaling, scaled)

    def predict(self, plan: TwinGoalState, settings: dict, origin: str, policy: str = '') -> Prediction:
        """Predict ``plan`` on the worker thread, waiting up to ``preview_timeout`` s; publish the
        prediction (``origin``: 'goal' or 'preview'; ``policy``: what the twin does with it).

        Raises:
            jtc.GoalRejected: (INVALID_GOAL) the prediction failed or took too long.
        """
        goal = self.goal_of(plan, settings)
        started = time.perf_counter()
        future = self._worker.submit(preview_goal, self.predictor, goal)
        try:
            prediction = future.result(timeout=settings['preview_timeout'])
        except FutureTimeout:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'the goal preview took longer than preview_timeout '
                                                     f'{settings["preview_timeout"]:g} s') from None
        except Exception as exc:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, f'the goal preview failed: {exc}') from None
        elapsed = time.perf_counter() - started
        self.publish(origin, policy, prediction.summary(), elapsed)
        return prediction

    def check_goal(self, plan: TwinGoalState, settings: dict) -> Prediction | None:
        """Predict a screened twin goal under the policy ``settings['preview']``: ``enforce`` raises
        ``jtc.GoalRejected`` with the first predicted failure (its code, ``predicted to fail: ...``)
        or when no prediction came; ``warn`` logs a predicted failure in one line and lets the goal
        run; ``off`` predicts nothing. Returns the prediction (None when there is none)."""
        policy = settings['preview']
        if policy == 'off':
            return None
        try:
            prediction = self.predict(plan, settings, 'goal', policy)
        except jtc.GoalRejected as exc:
            if policy == 'enforce':
                raise
            self.log.warning(f'preview (warn): {exc}; the goal runs unpredicted')
            return None
        if prediction.ok:
            self.log.info(f'preview: {describe_prediction(prediction)}')
        elif policy == 'enforce':
            raise jtc.GoalRejected(prediction.first.code, prediction.verdict().message)
        else:
            self.log.warning(f'preview (warn, the goal runs): {describe_prediction(prediction)}')
        return prediction

    def publish(self, origin: str, policy: str, summary: dict, elapsed: float | None = None) -> None:
        """Publish one prediction (or rejection) ``summary`` as JSON with its context."""
        message = {'stamp': self.node.get_clock().now().nanoseconds * 1e-9, 'origin': origin, 'mode': self.mode,
                   'policy': policy, 'start_from': self.source,
                   'compute_ms': None if elapsed is None else round(elapsed * 1e3, 2), **summary}
        self.publisher.publish(String(data=json.dumps(message)))

    def publish_rejection(self, origin: str, exc: jtc.GoalRejected) -> None:
        """Publish that a goal was rejected by the screening before any prediction."""
        self.publish(origin, '', {'ok': False, 'rejected': True, 'error_code': int(exc.error_code),
                                  'error_string': exc.error_string})

    def shutdown(self) -> None:
        """Stop the worker (a prediction under way finishes first)."""
        self._worker.shutdown(wait=True, cancel_futures=True)


def describe_prediction(prediction: Prediction) -> str:
    """One log line: the verdict, the predicted duration and the largest predicted joint error."""
    worst = max(prediction.joint_errors.items(), key=lambda kv: kv[1], default=None)
    error = '' if worst is None else f'; largest predicted error {worst[1]:.4f} rad ({worst[0]})'
    return f'{prediction.verdict().message}{error}'


def make_preview(node: Node, param: Callable[[str], object], mode: str, shadow: bool, states: JointStateCache,
                 base: BaseDriver | None, speed_scaling: SpeedScaling | None) -> TwinPreview:
    """The twin's :class:`TwinPreview` from its ``preview_*``, ``model_path`` and ``cell_config``
    parameters (``param(name)``): the prediction starts from the robot in mode ``real``, else from
    the sim. Raises ShadowTwinError (ConfigError, ModelError)."""
    spec, gains = preview_model(param('model_path'), param('cell_config'), param('preview_gains_file'))
    config = PreviewConfig.from_yaml(resolve_share_url(param('preview_config')) if param('preview_config')
                                     else config_path('preview.yaml'))
    source = 'real' if mode == 'real' else 'sim'
    return TwinPreview(node, GoalPredictor(spec, gains, config), source, states, base, speed_scaling,
                       param('preview_result_topic'), 'shadow' if shadow else mode)


class PreviewServer(FollowJointTrajectoryServer):
    """``/twin/preview``: screens a goal as the twin does (a malformed goal is rejected the same way),
    predicts it, and ends it SUCCEEDED or ABORTED with the predicted failure; nothing moves.

    Args:
        node: the twin's node.
        action_name: e.g. ``/twin/preview``.
        screen: ``screen(request, settings) -> TwinGoalState``, the twin's screening without the
            liveness checks; raises ``jtc.GoalRejected``.
        preview: the :class:`TwinPreview`.
        settings: the twin's current settings (with ``preview_timeout``).
    """

    preempts_on_accept = False

    def __init__(self, node: Node, action_name: str, screen: Callable, preview: TwinPreview,
                 settings: Callable[[], dict]) -> None:
        self._screen, self.preview, self._settings = screen, preview, settings
        super().__init__(node, action_name, handover_timeout=0.0)

    def validate(self, request) -> TwinGoalState:
        try:
            return self._screen(request, self._settings())
        except jtc.GoalRejected as exc:
            self.preview.publish_rejection('preview', exc)
            raise

    def start(self, goal: AcceptedGoal) -> str | None:
        return None

    def step(self, goal: AcceptedGoal) -> jtc.Verdict:
        """Predict, publish the feedback, end the preview with the prediction's verdict."""
        plan: TwinGoalState = goal.plan
        try:
            prediction = self.preview.predict(plan, self._settings(), 'preview')
        except jtc.GoalRejected as exc:
            return jtc.Verdict.aborted(exc.error_string, exc.error_code)
        if plan.trajectory is not None and prediction.final_errors:
            names = list(plan.trajectory.joint_names)
            target = plan.trajectory.positions[-1]
            error = np.array([prediction.final_errors[j] for j in names])
            zeros = np.zeros(len(names))
            fb = feedback_message(time_msg_ns(self.node.get_clock().now().nanoseconds), names,
                                  prediction.duration or prediction.simulated, (target, zeros, zeros),
                                  (target - error, zeros))
            goal.handle.publish_feedback(fb)
        verdict = prediction.verdict()
        self.log.info(f'preview: {describe_prediction(prediction)}')
        return verdict

    def stop(self, goal: AcceptedGoal) -> None:
        return None

    def cancel(self, goal: AcceptedGoal) -> str:
        return 'preview canceled'

    def period(self) -> float:
        return 0.01

