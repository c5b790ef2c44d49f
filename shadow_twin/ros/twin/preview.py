"""The twin's goal preview in ROS: the watch of every running twin goal, and ``/twin/preview``.

The sim runs 15-60x faster than real time offline, so the twin predicts a goal ahead of the robots
(``docs/preview.md``) without ever delaying it: :class:`TwinPreview` builds nothing before a goal is
sent. Its parts go to the controllers at once, and a
:class:`~shadow_twin.simulation.preview.windows.GoalWatch` predicts the goal in windows ahead of its
execution on a worker thread (the executor threads keep serving feedback and joint states), each
window from the live state (``/sim/joint_states``, the sim base's ``/sim/odom``; in mode ``real``
the robot's, the sim then standing still). The first window (the gate) is checked before the
stamped start. :meth:`TwinPreview.verdict_of` turns a predicted failure into the goal's abort,
which stops the robots and the sim together (the twin server's ``stop``). ``/twin/preview``
requests (:mod:`shadow_twin.ros.twin.preview_server`) are predicted whole, in windows, one at a time on a
low-priority worker thread, their number bounded. Every prediction is published as JSON
(``std_msgs/String`` on ``preview_result_topic``).

The twin's ``preview`` parameter decides what a predicted failure does to a twin goal
(``shadow_twin.ros.twin.parameters.preview_policy``): ``enforce`` aborts it (before its start when
the gate predicts it), ``warn`` logs it in one line and lets it run, ``off`` watches nothing.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
import weakref
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Callable

import mujoco
import numpy as np
from rclpy.node import Node
from rclpy.qos import QoSProfile
from std_msgs.msg import String

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.globs import matching
from shadow_twin.common.paths import config_path, resolve_share_url
from shadow_twin.common.stamps import from_nanoseconds
from shadow_twin.control import jtc
from shadow_twin.control.base.trajectory import yaw_from_quaternion
from shadow_twin.control.controller import ControllerGains
from shadow_twin.model.cell.assembly import CellConfig, build_cell_spec
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.model.scene import SceneConfig
from shadow_twin.model.scene.build import add_objects
from shadow_twin.ros.twin.goal import TwinGoalState
from shadow_twin.ros.twin.context import GoalContext
from shadow_twin.ros.twin.preview_inputs import PreviewInputs
from shadow_twin.simulation.preview.goal import BasePart, PreviewGoal, StartState
from shadow_twin.simulation.preview.predictor import GoalPredictor
from shadow_twin.simulation.preview.checks import Prediction, preview_goal
from shadow_twin.simulation.preview.config import PreviewConfig
from shadow_twin.simulation.preview.windows import GoalWatch, WindowStart, preview_in_windows
from shadow_twin.ros.twin.parameters import TwinSettings

#: Speed scaling (fraction) below which a goal is previewed at full speed (the arm is paused).
MIN_PREVIEW_SCALING = 0.05
#: s: a joint state stamped further than this from the twin's clock gives a window its start time
#: from the clock instead (an unsynchronised or replayed source).
STAMP_TRUST = 0.5


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
    """Watches running twin goals ahead of their execution and predicts ``/twin/preview`` requests;
    publishes every prediction (module doc).

    Args:
        node: the twin's node (logger, clock, the result publisher).
        predictor: the predictor on the sim's model (its ``config`` gives the watch's and the
            requests' figures).
        context: the goal path's :class:`~shadow_twin.ros.twin.context.GoalContext`: the joint
            states, the base (its odometry gives the base's start), the arm's speed scaling; the
            prediction starts from the robot in mode ``real``, else from the sim.
        result_topic: where the predictions go (``std_msgs/String``, JSON).
        mode: the twin's mode as every published prediction names it (``shadow`` in mode shadow).
        inputs: the sim's object poses and setpoints a prediction starts from (None: none).
    """

    def __init__(self, node: Node, predictor: GoalPredictor, context: GoalContext, result_topic: str,
                 mode: str, inputs: PreviewInputs | None = None) -> None:
        self.node, self.log = node, node.get_logger()
        self.predictor = predictor
        self.config = predictor.config
        #: Whose state a prediction starts from: the robot in mode real, else the sim.
        self.source = 'real' if context.mode == 'real' else 'sim'
        self.states, self.base, self.speed_scaling = context.states, context.base, context.speed_scaling
        self.mode, self.inputs = mode, inputs
        self.publisher = node.create_publisher(String, result_topic, QoSProfile(depth=10))
        # each goal's watch on a daemon thread of its own (a preempting goal's gate never waits for the
        # ending goal's window, and no window holds up the process's exit); the requests one at a
        # time on one daemon thread at a low CPU priority (they never slow a goal or the sim)
        self._watches: list[threading.Thread] = []
        self._requests: queue.Queue = queue.Queue()
        self._request_worker = threading.Thread(target=self._serve_requests, name='twin_preview', daemon=True)
        self._request_worker.start()
        self._queued = 0
        self._lock = threading.Lock()
        self._live: weakref.WeakSet = weakref.WeakSet()      # watches and requests a shutdown stops

    # -- the start state --------------------------------------------------------------------------
    def _start(self, joints: list[str]) -> StartState:
        """The live state a prediction starts from (class doc). Raises ``jtc.GoalRejected``
        (INVALID_GOAL) when a goal joint of ``joints`` has no state yet."""
        return self._stamped_start(joints)[0]

    def _stamped_start(self, joints: list[str]) -> tuple[StartState, float | None]:
        """:meth:`_start` and the stamp of the joint states it holds (ROS time, s; None: unstamped)."""
        state, stamp = self.states.get_stamped(self.source)
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
        holds, objects = ({}, {}) if self.inputs is None else (self.inputs.holds(), self.inputs.objects())
        return StartState(positions, velocities, pose, twist, holds=holds, objects=objects), stamp

    def goal_of(self, plan: TwinGoalState, settings: TwinSettings) -> PreviewGoal:
        """The :class:`PreviewGoal` of a screened goal: its trajectory, tolerances and base part, from
        the current state, at the arm's current speed scaling. Raises ``jtc.GoalRejected`` when the
        state of a goal joint is missing."""
        base = None
        if plan.base_goal is not None:
            s = settings.base
            base = BasePart(plan.base_goal.trajectory, plan.base_goal.tolerances, s.gains, s.limits, s.geometry,
                            s.command_latency, s.control_rate)
        scaling, scaled = self._scaling(), []
        if self.speed_scaling is not None and plan.trajectory is not None:
            scaled = matching(plan.trajectory.joint_names, settings.speed_scaled_joints)
        joints = [] if plan.trajectory is None else list(plan.trajectory.joint_names)
        return PreviewGoal(plan.trajectory, plan.tolerances, base, self._start(joints), scaling, scaled)

    def _scaling(self) -> float:
        """The arm's speed scaling now, fraction; 1 when not followed or paused (below
        :data:`MIN_PREVIEW_SCALING`: previewed at full speed)."""
        scaling = 1.0 if self.speed_scaling is None else self.speed_scaling.fraction
        return 1.0 if scaling < MIN_PREVIEW_SCALING else scaling

    # -- the watch of a running goal ---------------------------------------------------------------
    def watch(self, plan: TwinGoalState, settings: TwinSettings) -> GoalWatch | None:
        """Start watching a screened twin goal under ``settings.preview`` (``off``: None), on a
        daemon thread of its own: its gate (the first window) is predicted at once from the state it
        arrived in, while its parts are sent; later windows from the live state once the parts are
        all accepted (``plan.order`` set by the dispatch).
        Raises ``jtc.GoalRejected`` when the state of a goal joint is missing."""
        policy = settings.preview
        if policy == 'off':
            return None
        template = self.goal_of(plan, settings)
        gate = WindowStart(0.0, template.start, None, template.speed_scaling)
        joints = [] if plan.trajectory is None else list(plan.trajectory.joint_names)
        template = replace(template, trajectory_start={j: template.start.positions[j] for j in joints})
        if template.base is not None and template.start.base_pose is not None:
            template = replace(template, base=replace(template.base, start_pose=planar(template.start.base_pose)))

        def live(first: bool) -> WindowStart | None:
            if first:
                return gate
            if plan.order == 0:
                # not yet handed out: nothing to predict until the parts are accepted (a window from the
                # gate's state again held the interpreter while the controllers' acceptances waited: CI
                # saw a cell goal rejected, its parts' acceptances unread 0.45 s after they came)
                return None
            now = from_nanoseconds(self.node.get_clock().now().nanoseconds)
            start, stamp = self._stamped_start(joints)
            # the window starts at the goal time its state is of: the arm's servo is stiff (90,000 N m/rad),
            # and a state 20 ms old against the desired state of now was a jolt of hundreds of N m
            at = stamp if stamp is not None and abs(now - stamp) < STAMP_TRUST else now
            scaled = None
            if plan.sampler is not None and plan.sampler.scaled.any():
                scaled = float(plan.sampler.clock.trajectory_time(np.array([at]))[0])
            return WindowStart(max(0.0, at - plan.start_s), start, scaled, self._scaling())

        def on_window(prediction: Prediction, where: WindowStart, spent: float) -> None:
            if where is gate or not prediction.ok or watch_of.covered:
                self.publish('goal', policy, {**prediction.summary(), 'window_start': round(where.time_offset, 6),
                                              'horizon': self.config.watch_horizon}, spent)
            if not prediction.ok:
                if plan.wake is not None:
                    plan.wake()                  # the goal's thread decides at once, not at its next period
                line = f'preview: {describe_prediction(prediction)} (window from t = {where.time_offset:.3f} s)'
                self.log.error(line) if policy == 'enforce' else self.log.warning(f'{line}; the goal runs (warn)')
            elif where is gate:
                self.log.info(f'preview: the first {self.config.watch_gate:g} s predicted to hold '
                              f'({spent * 1e3:.0f} ms); the goal is watched {self.config.watch_horizon:g} s ahead')

        watch_of = GoalWatch(self.predictor, template, self.config.watch_horizon, self.config.watch_gate,
                             self.config.watch_period, live, on_window)
        self._live.add(watch_of)
        thread = threading.Thread(target=watch_of.run, name='twin_watch', daemon=True)
        thread.start()
        self._watches = [t for t in self._watches if t.is_alive()] + [thread]
        return watch_of

    def verdict_of(self, watch: GoalWatch | None, plan: TwinGoalState, settings: TwinSettings, now: float,
                   ) -> jtc.Verdict | None:
        """What the watch says of a running goal at ``now`` (s, the node's clock), with policy
        ``enforce``: ABORTED with the predicted failure's code (``predicted to fail: ...``); None
        while it holds. A goal running more than one ``watch.period`` past the time its windows
        verified (the watch fell behind on a slow PC, or a prediction raised) is aborted with
        ``watch.behind`` ``abort``, and logged once with ``warn`` (the default: the rule never
        stops correct work on a slow PC). ``warn`` and ``off`` policies: always None."""
        if watch is None or settings.preview != 'enforce':
            return None
        if watch.failure is not None:
            return jtc.Verdict.aborted(f'predicted to fail: {watch.failure.message}', watch.failure.code)
        if watch.covered or plan.order == 0:
            return None
        why = watch.behind(now - plan.start_s)
        if why is None or watch.behind_reported:
            return None
        if self.config.watch_behind == 'abort':
            return jtc.Verdict.aborted(why)
        watch.behind_reported = True
        self.log.warning(f'{why}: the goal runs on unverified (watch.behind warn)')
        return None

    # -- /twin/preview requests ---------------------------------------------------------------------
    def request(self, plan: TwinGoalState, settings: TwinSettings) -> 'PreviewRequest':
        """Queue a ``/twin/preview`` request: the whole goal predicted in windows, on the low-priority
        worker. Raises ``jtc.GoalRejected`` when ``config.request_queue`` requests wait or run already,
        or a goal joint's state is missing."""
        goal = self.goal_of(plan, settings)
        with self._lock:
            if self._queued >= self.config.request_queue:
                raise jtc.GoalRejected(jtc.INVALID_GOAL, f'{self._queued} previews are waiting or running (requests.'
                                                         f'queue {self.config.request_queue}): send it again later')
            self._queued += 1
        job = PreviewRequest(goal, Future())
        self._live.add(job)
        self._requests.put(job)
        return job

    def _serve_requests(self) -> None:
        """The request thread: each queued request in turn, until a None."""
        lower_priority()
        while (job := self._requests.get()) is not None:
            try:
                started = time.perf_counter()
                prediction = preview_in_windows(self.predictor, job.goal, self.config.request_window,
                                                job.cancel.is_set)
                if prediction is not None:
                    self.publish('preview', '', prediction.summary(), time.perf_counter() - started)
                job.future.set_result(prediction)
            except Exception as exc:        # the request's goal ends with it; the thread serves on
                job.future.set_exception(exc)
            finally:
                with self._lock:
                    self._queued -= 1

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

    def shutdown(self, timeout: float = 2.0) -> None:
        """Stop every watch and request and wait up to ``timeout`` s for each thread (a window
        under way finishes first; the threads are daemons: none holds up the process's exit)."""
        for job in list(self._live):
            job.stop()
        self._requests.put(None)
        for thread in [*self._watches, self._request_worker]:
            thread.join(timeout)


@dataclass(eq=False)
class PreviewRequest:
    """A queued ``/twin/preview`` request: its goal, its future (the merged prediction, None when
    canceled) and the event that cancels it between two windows."""

    goal: PreviewGoal
    future: Future | None = None
    cancel: threading.Event = field(default_factory=threading.Event)

    def stop(self) -> None:
        """Cancel it: it stops after the window under way."""
        self.cancel.set()


def lower_priority(niceness: int = 10) -> None:
    """Lower the calling thread's CPU priority by ``niceness`` (Linux: a thread's own nice value);
    nothing where that is not possible."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)
    except (AttributeError, OSError):
        pass


def planar(pose) -> tuple[float, float, float]:
    """(x, y, yaw) of a pose given as (x, y, yaw) or (x, y, z, qw, qx, qy, qz)."""
    values = [float(v) for v in pose]
    if len(values) == 7:
        _, _, _, w, x, y, z = values
        return values[0], values[1], float(yaw_from_quaternion(x, y, z, w))
    return values[0], values[1], values[2]


def describe_prediction(prediction: Prediction) -> str:
    """One log line: the verdict, the predicted duration and the largest predicted joint error."""
    worst = max(prediction.joint_errors.items(), key=lambda kv: kv[1], default=None)
    error = '' if worst is None else f'; largest predicted error {worst[1]:.4f} rad ({worst[0]})'
    return f'{prediction.verdict().message}{error}'


def make_predictor(param: Callable[[str], object]) -> GoalPredictor:
    """The preview's :class:`GoalPredictor` from the twin's ``preview_*``, ``model_path``, ``cell_config`` and
    ``scene_file`` parameters (``param(name)``): the one model the twin builds at start (its joint
    limits are read from it too; a scene's objects have free joints, which have none). Raises
    ShadowTwinError (ConfigError, ModelError)."""
    spec, gains = preview_model(param('model_path'), param('cell_config'), param('preview_gains_file'))
    if param('scene_file'):
        add_objects(spec, SceneConfig.from_yaml(resolve_share_url(param('scene_file'))))
    config = PreviewConfig.from_yaml(resolve_share_url(param('preview_config')) if param('preview_config')
                                     else config_path('preview.yaml'))
    return GoalPredictor(spec, gains, config)


def make_preview(node: Node, predictor: GoalPredictor, param: Callable[[str], object], context: GoalContext,
                 shadow: bool) -> TwinPreview:
    """The twin's :class:`TwinPreview` on ``predictor`` (:func:`make_predictor`) for the goals of
    ``context``; ``shadow``: the twin is in mode shadow."""
    preview_goal(predictor, PreviewGoal(None, horizon=0.05))      # warm up: the first goal's gate pays no first call
    objects = list(predictor.grasps.objects)
    inputs = None
    if objects or param('preview_setpoints_topic'):
        inputs = PreviewInputs(node, objects, param('preview_objects_prefix'), param('preview_setpoints_topic'))
    return TwinPreview(node, predictor, context, param('preview_result_topic'), 'shadow' if shadow else context.mode,
                       inputs)
