"""The ``shadow_twin`` node: one FollowJointTrajectory action for robot and twin together.

Serves ``control_msgs/action/FollowJointTrajectory`` at ``action_name``
(``/twin/follow_joint_trajectory``) and forwards each goal, split by joint group, to the
real trajectory controllers named in the config and/or to the simulated controller of the
``mujoco_bridge`` (``sim_action``), by ``mode`` (``sim``, ``real``, ``both``), and its base
part (``multi_dof_trajectory``) to the base followers. Each goal is previewed first (simulated
faster than real time; ``preview``: enforce, warn, off) and ``/twin/preview`` previews a goal
without moving anything (``shadow_twin.ros.twin.preview``); in mode ``shadow`` every goal is
refused (the sim follows the robots' own controllers). Nothing moves unless every part is
accepted; the twin checks the goal on the actual state and ends it with the controllers'
verdicts. What it does, in order, with a sequence diagram: ``docs/goal_lifecycle.md``; what
each rule is for, with measured figures: ``docs/twin.md``.

The code: :class:`TwinTrajectoryServer` (this module) runs the goal's hooks on
:class:`shadow_twin.ros.action_server.FollowJointTrajectoryServer` (intake, preemption,
cancel, results). A goal goes through four steps, one file each, all given the one
:class:`~shadow_twin.ros.twin.context.GoalContext` (``context.py``): screen (``screening.py``:
pure checks, nothing sent) -> preview (``preview.py``) -> dispatch (``dispatch.py``: the sim
base re-anchored, the parts sent to the controllers) -> follow (``follow.py``: results,
feedback, the verdict); the goal's state is ``goal.py``'s. :class:`TwinServer` is the node
(parameters, joint states, speed scaling); the base part is
:class:`shadow_twin.ros.twin.base.driver.BaseDriver`'s.

Run: ``twin_server --ros-args --params-file config/twin.yaml`` (or
``python -m shadow_twin.ros.twin.server ...``; the cell: ``config/twin_cell.yaml``); all
together: ``shadow-twin up``.
"""

from __future__ import annotations

import sys

from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64
from std_srvs.srv import Trigger

from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.common.stamps import from_nanoseconds
from shadow_twin.control import jtc
from shadow_twin.twin.config import ControllerSpec, SIM, base_sides, parse_mode
from shadow_twin.ros import parameters as ros_params
from shadow_twin.ros.action_server import AcceptedGoal, FollowJointTrajectoryServer
from shadow_twin.ros.twin.base.anchor import AnchorError
from shadow_twin.ros.twin.base.driver import BaseDriver
from shadow_twin.ros.twin.base.settings import read_base_topics
from shadow_twin.ros.guard import guard_of, guarded_service, guarded_subscription
from shadow_twin.ros.message_checks import check_joint_state
from shadow_twin.ros.spinning import BackgroundSpinner, run_node
from shadow_twin.ros.twin.context import ANSWER_TIMEOUT, GoalContext
from shadow_twin.ros.twin.dispatch import GoalDispatch, cancel_and_wait
from shadow_twin.ros.twin.follow import GoalFollower
from shadow_twin.ros.twin.goal import TwinGoalState
from shadow_twin.ros.twin.inputs import JointStateCache, SpeedScaling
from shadow_twin.ros.twin.preview_server import PreviewServer
from shadow_twin.ros.twin.parameters import SHADOW_REJECTION, SPECS, TwinSettings, declare_controllers, read_settings
from shadow_twin.ros.twin.preview import TwinPreview, make_predictor, make_preview
from shadow_twin.ros.twin.screening import GoalScreening

NODE_NAME = 'shadow_twin'
#: Seconds a new goal waits for the goal it preempted to cancel its controller goals, so
#: that those cancels cannot reach a controller after (and so cancel) the new goal's.
HANDOVER_TIMEOUT = 2 * ANSWER_TIMEOUT
EXECUTOR_THREADS = 6
#: s: the twin process's interpreter switch interval (Python's default 0.005; see :func:`main`).
PREVIEW_SWITCH_INTERVAL = 0.0005
class TwinTrajectoryServer(FollowJointTrajectoryServer):
    """The twin's FollowJointTrajectory server: each goal goes screen -> preview -> dispatch ->
    follow (``docs/goal_lifecycle.md``), split by joint group among the controllers of the
    context and, its base part, the base followers; checked on the actual state.

    Args:
        node: the owning node (logger, clock; the action clients are created on it).
        action_name: the action served, e.g. ``/twin/follow_joint_trajectory``.
        context: what the steps read (:class:`~shadow_twin.ros.twin.context.GoalContext`); its
            action clients are created here.
        preview: the goal preview (``docs/preview.md``; the ``preview`` policy is in the
            settings), None: goals are not previewed.
        shadow: mode shadow: every goal is rejected (the context's mode is then ``sim``, the sim
            being what the screening reads).
    """

    def __init__(self, node: Node, action_name: str, context: GoalContext, preview: TwinPreview | None = None,
                 shadow: bool = False) -> None:
        self.context = context
        self.preview = preview
        self.shadow = shadow
        super().__init__(node, action_name, HANDOVER_TIMEOUT)
        context.connect(node, self.group)
        self.screening = GoalScreening(context)
        self.dispatch = GoalDispatch(context)
        self.follow = GoalFollower(context)

    # -- hooks --------------------------------------------------------------------------------------
    def validate(self, request) -> TwinGoalState:
        """The goal's path up to its start: screen it (pure checks, nothing sent), then, one goal
        at a time, re-anchor the sim base if it stands apart, preview it (``docs/preview.md``), and
        dispatch it (every part sent and accepted), taking over from the running goal; returns its
        plan. Mode shadow rejects every goal. Raises ``jtc.GoalRejected`` with the reason."""
        if self.shadow:
            raise jtc.GoalRejected(jtc.INVALID_GOAL, SHADOW_REJECTION)
        settings = self.context.settings()
        plan = self.screening.screen_goal(request, settings)
        with self.dispatch.one_at_a_time():
            self.dispatch.anchor_base(plan, settings)
            # the watch's gate is predicted while the parts are sent: the preview never delays the start.
            # (Predicted after the hand-out instead, a cell goal's acceptance took 30-50 ms less, but the
            # gate then ended after the start on a loaded PC: goals failing in their first window moved.)
            plan.watch = None if self.preview is None else self.preview.watch(plan, settings)
            try:
                with self.dispatch.sending():
                    self.dispatch.send(request, plan, settings)
                    self.preempt_running(plan)
            except BaseException:
                if plan.watch is not None:
                    plan.watch.stop()
                raise
        return plan

    def start(self, goal: AcceptedGoal) -> str | None:
        """The controllers have their parts already (sent and accepted in :meth:`validate`): log the goal."""
        plan: TwinGoalState = goal.plan
        plan.wake = goal.wake.set
        parts = []
        if plan.trajectory is not None:
            parts.append(f'{len(plan.trajectory.joint_names)} joints, {len(goal.handle.request.trajectory.points)} '
                         f'points, {plan.trajectory.duration:.3f} s')
        if plan.base_goal is not None:
            parts.append(f'base {len(plan.base_goal.trajectory.times)} points, '
                         f'{plan.base_goal.trajectory.duration:.3f} s')
        scaling = ''
        if self.context.speed_scaling is not None:
            scaling = f'; arm speed scaling {self.context.speed_scaling.describe()}'
            if plan.sampler is not None and plan.sampler.scaled.any():
                scaling += f' (the time of {int(plan.sampler.scaled.sum())} speed-scaled joints runs at it)'
        self.log.info(f'accepted goal: {"; ".join(parts)}; accepted by {", ".join(plan.parts)}, starting at '
                      f'{plan.start_s:.3f} s{scaling}')
        return None

    def step(self, goal: AcceptedGoal) -> jtc.Verdict | None:
        """Follow the goal: the controllers' results, the preview's verdict, then the feedback and
        the twin's own verdict (:class:`~shadow_twin.ros.twin.follow.GoalFollower`); None while it runs."""
        plan: TwinGoalState = goal.plan
        if self.dispatch.busy:        # a new goal is being accepted: it will preempt this one
            return None
        settings = self.context.settings()
        self.follow.collect_results(plan, settings)
        now_ns = self.node.get_clock().now().nanoseconds
        predicted = None if self.preview is None else self.preview.verdict_of(plan.watch, plan, settings,
                                                                              from_nanoseconds(now_ns))
        if predicted is not None:
            return predicted                 # stop() then stops every part, the sim with the robots
        feedback, verdict = self.follow.step(plan, settings, now_ns)
        goal.handle.publish_feedback(feedback)
        if verdict.outcome is jtc.GoalOutcome.RUNNING:
            return None
        if plan.watch is not None:
            plan.watch.stop()
        return verdict

    def supersedes(self, plan: TwinGoalState, running: TwinGoalState) -> bool:
        """A goal preempts the running one if its parts were handed out after the running one's."""
        return plan.order > running.order

    def preempt(self, goal: AcceptedGoal, by_plan: TwinGoalState) -> None:
        """Note the controllers the new goal takes over (``stop`` leaves those parts to them)."""
        goal.plan.taken_over = frozenset(by_plan.goal_split.groups)
        super().preempt(goal, by_plan)

    def stop(self, goal: AcceptedGoal) -> None:
        """Stop the bases (zero velocity), cancel the controller goals still running (waits for
        the answers of those not gone), except those on controllers a preempting goal took over."""
        plan: TwinGoalState = goal.plan
        if plan.watch is not None:
            plan.watch.stop()
        stopped = []
        if plan.base_runs:
            reason = goal.verdict.message if goal.verdict is not None else 'the twin goal was aborted'
            stopped = self.context.base.abort(plan.base_runs, f'twin goal aborted: {reason}')
        canceled = cancel_and_wait([s for s in plan.subs if s.name not in plan.taken_over], results=False)
        if canceled or stopped:
            self.log.info(f'canceled the parts of: {", ".join(canceled + stopped)}')

    def cancel(self, goal: AcceptedGoal) -> str:
        """Stop the bases (zero velocity), cancel the controller goals and wait until they have ended."""
        plan: TwinGoalState = goal.plan
        if plan.watch is not None:
            plan.watch.stop()
        if plan.base_runs:
            self.context.base.cancel(plan.base_runs)
        cancel_and_wait(plan.subs, results=True)
        return f'goal canceled; controller goals canceled: {", ".join(plan.parts)}'

    def period(self) -> float:
        return 1.0 / self.context.settings().feedback_rate


class TwinServer(Node):
    """The twin's trajectory action server node (``docs/twin.md``). Raises ShadowTwinError/ConfigError
    for a bad configuration (mode, controllers, model, constraints, base)."""

    def __init__(self, node_name: str = NODE_NAME, **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        ros_params.declare(self, SPECS)
        p = self._param
        #: Mode shadow: the sim follows the robots' controllers; every goal is rejected (the
        #: screening and the preview read the sim, as in mode sim).
        self.shadow = str(p('mode')).strip().lower() == 'shadow'
        self.mode = 'sim' if self.shadow else parse_mode(p('mode'))
        self.controllers = self._read_controllers()
        # the one model the twin builds: the preview's copy of the sim's MJCF gives the joint limits too
        self._predictor = make_predictor(p)
        self.limits = jtc.joint_limits_from_model(self._predictor.model)
        self.joints = list(self.limits)
        ros_params.declare(self, ros_params.constraint_specs(
            self.joints, ros_params.load_constraints(p('constraints_file'))))
        self.base_enabled = bool(p('base.enabled'))
        self._settings = self._read_settings()
        self.add_post_set_parameters_callback(lambda _: self._refresh())

        self.joint_states = JointStateCache({'real': ros_params.real_joint_state_topics(self),
                                             'sim': [p('sim_joint_states_topic')]})
        # Joint states arrive at 2 x 250 Hz: a MultiThreadedExecutor spends most of a core on
        # them (and delays the action traffic), so a helper node on its own single-threaded
        # executor takes them.
        self._listener = Node(f'{self.get_name()}_states', namespace=self.get_namespace(), context=self.context,
                              use_global_arguments=False, start_parameter_services=False)
        qos = QoSProfile(depth=10)
        for source, topics in self.joint_states.topics.items():
            for topic in topics:
                guarded_subscription(
                    self._listener, JointState, topic, lambda m, source=source, topic=topic:
                    self.joint_states.on_message(source, m, topic), qos, check=check_joint_state)
        self.speed_scaling = None
        if p('speed_scaling_topic'):
            self.speed_scaling = SpeedScaling(p('speed_scaling_topic'), self.get_logger())
            guarded_subscription(self._listener, Float64, p('speed_scaling_topic'), self.speed_scaling.on_message, qos)
        self._listener_spinner = BackgroundSpinner([self._listener], 'joint state listener')
        # a turn on request (a task queued on the listener's executor), not a polling timer: see
        # JointStateCache.wait_for_turn
        turn = guard_of(self._listener).wrap('listener turn', self.joint_states.on_turn)
        self.joint_states.request_turn = lambda: self._listener_spinner.call_soon(turn)
        self.base = None
        if self.base_enabled:
            topics = {side: read_base_topics(p, side) for side in base_sides(self.mode)}
            anchor = p('base.anchor.service') if p('base.anchor.enabled') else ''
            self.base = BaseDriver(self.context, f'{self.get_name()}_base', self.get_namespace(), topics,
                                   settings=lambda: self._settings.base,
                                   now=lambda: from_nanoseconds(self.get_clock().now().nanoseconds),
                                   anchor_service=anchor, answer_timeout=lambda: self._settings.server_timeout)
            if self.base.anchor is not None:
                guarded_service(self, Trigger, '~/anchor_base', self._on_anchor_base)
        action_names: dict[str, str] = {}
        if self.shadow:
            pass                                        # nothing is sent anywhere
        elif self.mode in ('sim', 'both'):
            action_names[SIM] = p('sim_action')
        if self.mode in ('real', 'both'):
            action_names.update((c.name, c.action) for c in self.controllers)
        context = GoalContext(self.mode, self.controllers, self.limits, action_names, self.joint_states,
                              settings=lambda: self._settings,
                              now_s=lambda: from_nanoseconds(self.get_clock().now().nanoseconds),
                              log=self.get_logger(), base=self.base, speed_scaling=self.speed_scaling)
        self.preview = make_preview(self, self._predictor, p, context, self.shadow)
        self.trajectories = TwinTrajectoryServer(self, p('action_name'), context, preview=self.preview,
                                                 shadow=self.shadow)
        self.preview_server = PreviewServer(self, p('preview_action_name'), self.trajectories.screening, self.preview,
                                            lambda: self._settings)
        real = ', '.join(f'{c.name}: {c.action} {list(c.joints)}' for c in self.controllers)
        base = 'none'
        if self.base is not None:
            base = (f'joint {self._settings.base.joint_name} in {self._settings.base.frame}: '
                    + '; '.join(self.base.describe(side) for side in self.base.endpoints))
        mode = 'shadow (every goal is refused)' if self.shadow else self.mode
        self.get_logger().info(f'serving {p("action_name")}, mode {mode}; preview {self._settings.preview} '
                               f'({p("preview_action_name")}, {p("preview_result_topic")}); '
                               f'real controllers: {real or "none"}; '
                               f'sim: {p("sim_action")}; real joint states: '
                               f'{", ".join(self.joint_states.topics["real"])}; base: {base}')

    def _on_anchor_base(self, request, response):
        """``~/anchor_base``: put the sim base on the real one now (refused while a goal drives them)."""
        if self.base.busy():
            response.success, response.message = False, 'a goal drives the bases: re-anchor when it has ended'
            return response
        try:
            response.success, response.message = True, self.base.anchor.anchor('requested on ~/anchor_base')
        except AnchorError as exc:
            response.success, response.message = False, f'could not re-anchor the sim base: {exc}'
        return response

    @property
    def speed_scaling_percent(self) -> float | None:
        """The arm's newest speed scaling, percent (None when not followed or not heard yet)."""
        return None if self.speed_scaling is None else self.speed_scaling.value

    def destroy_node(self) -> None:
        self.preview.shutdown()
        if self.base is not None:
            self.base.shutdown()
        self._listener_spinner.shutdown()
        self._listener.destroy_node()
        super().destroy_node()

    # -- parameters ----------------------------------------------------------------------------
    def _param(self, name: str):
        return self.get_parameter(name).value

    def _read_controllers(self) -> list[ControllerSpec]:
        return declare_controllers(self)

    def _read_settings(self) -> TwinSettings:
        return read_settings(self._param, ros_params.constraints_config(self, self.joints), self.base_enabled,
                             'shadow' if self.shadow else self.mode)

    def _refresh(self) -> None:
        try:
            self._settings = self._read_settings()
        except ShadowTwinError as exc:
            self.get_logger().error(f'parameters not applied: {exc}')

    def shutdown(self, timeout: float = ANSWER_TIMEOUT + 1.0) -> None:
        """Abort a running goal and cancel its controller goals (call while the executor
        still spins, so that the cancels go out); waits up to ``timeout`` s."""
        self.trajectories.stop_active('the twin server is shutting down', wait=timeout)


def main(args: list[str] | None = None) -> int:
    """Console entry point ``twin_server``: run the node until shutdown; returns the exit status."""
    # the preview's worker threads hand the interpreter lock back and forth with every rollout (a
    # cell window with a base part: 25 calls per 0.5 s); at Python's default 5 ms switch interval a
    # busy executor thread kept the gate waiting: 180 ms for 27 ms of work
    sys.setswitchinterval(PREVIEW_SWITCH_INTERVAL)
    return run_node(TwinServer, NODE_NAME, lambda: MultiThreadedExecutor(num_threads=EXECUTOR_THREADS), args,
                    on_stop=lambda node: node.shutdown())


if __name__ == '__main__':
    sys.exit(main())
