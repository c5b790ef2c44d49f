"""The goal preview against running twins (``benchmarks/preview.py``'s live sections, issue 33).

The twin runs as in the ROS tests (test/ros/twin/test_preview_hand.py, test_preview_cell.py): the mock
hand and the sim bridge (config/mock_hardware.yaml, config/mujoco_bridge.yaml) with the twin server
(config/twin.yaml, mode both, preview ``auto`` = enforce), or the cell's sim bridge, mock UR5, hand
and MiR250 with config/twin_cell.yaml, each on this process's private ROS domain. Figures are judged
on message stamps (ROS time, the system clock of this host).

* :func:`stopped_before_failure` (item 1): goals whose failure the preview predicts 2-5 s after
  their start: a finger pressed fast into its stop, or commanded past it by its spline (hand); the
  arm swung into the cabinet (cell). Each must be ABORTED with ``predicted to fail: ...``, and
  neither the mock's nor the sim's joints pass the failure: a finger no further than
  ``position_limit_margin`` past its limit, the arm short of where the failure is predicted.
* :func:`first_window_moves_nothing` (item 2): a finger into its stop within 0.1 s: ABORTED, no
  joint of the mock or the sim moves (5 mrad) over the goal's span.

The timing sections (items 3-6) are in ``benchmarks/preview_cost.py``. Import with rclpy.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import numpy as np
import yaml

from support import cell as cell_helpers
from support import ros as ros_helpers
from support.scenarios.cell import make_goal, positions

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / 'config'
TWIN_ACTION = '/twin/follow_joint_trajectory'
PREVIEW_ACTION = '/twin/preview'
FINGERS = ['rh_FFJ3', 'rh_MFJ3', 'rh_RFJ3', 'rh_LFJ3']
HAND = ['rh_FFJ3', 'rh_FFJ4', 'rh_MFJ3', 'rh_RFJ3', 'rh_LFJ3', 'rh_WRJ1', 'rh_WRJ2']
ARM = ['shoulder_lift_joint', 'elbow_joint']
FAILURE_WINDOW = (2.0, 5.0)      # s after the start: where item 1's predicted failures lie
STILL_RAD = 5e-3                 # at rest the hand creeps < 2 mrad/s (test_preview_hand.assert_still)
PREDICTED = 'predicted to fail: '
#: s to wait for a message stamped after a time: a loaded PC hands this process its messages seconds late
WAIT = 30.0
#: Joint states kept by this process's subscriptions (KEEP_LAST): 0.2 s at 250 Hz. A receiver that
#: an overloaded PC runs slower than 500 messages/s come in skips the older ones instead of falling
#: ever further behind (with 2000 it saw states 8 s old, 'now' never arrived); a gap in the recorded
#: states is the price (a motion onset found up to one gap late, both policies alike).
DEPTH = 50


def check(misses: list[str], ok: bool, line: str) -> None:
    """Print ``line`` with PASS/MISS; a miss is kept in ``misses``."""
    print(f'  {line}: {"PASS" if ok else "MISS"}', flush=True)
    if not ok:
        misses.append(line)


def start_lead(params: str) -> float:
    """The twin's ``start_lead`` (s) in ``config/<params>``: the documented minimum lead of a stamped goal."""
    data = yaml.safe_load((CONFIG / params).read_text())
    return float(next(iter(data.values()))['ros__parameters']['start_lead'])


class Twin:
    """A running twin (hand or cell) on this process's ROS domain, with recorders and a client.

    Attributes:
        client: ``ros_helpers.RosClient``; cut: spans judged on incomplete states (:meth:`span`); rec: {'real', 'sim', 'preview', and in the cell
        'hand'} recorders of /joint_states, /sim/joint_states, /twin/preview_result
        (/rh/joint_states); procs: {name: NodeProcess}; lead: the twin's start_lead, s;
        predictor: the offline ``GoalPredictor`` of the same model (what the twin predicts with).
    """

    def __init__(self, cell: bool, folder: Path) -> None:
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String

        from shadow_twin.common.paths import config_path
        from shadow_twin.control.controller import ControllerGains
        from shadow_twin.model.cell.assembly import CellConfig, build_cell_spec, write_cell_mjcf
        from shadow_twin.model.mjcf import TwinModel
        from shadow_twin.simulation.preview.predictor import GoalPredictor
        from shadow_twin.simulation.preview.config import PreviewConfig
        self.cell, params = cell, ('twin_cell.yaml' if cell else 'twin.yaml')
        self.cut = 0                  # spans judged on the states received when the later ones came too late
        self.lead = start_lead(params)
        self.config = PreviewConfig.from_yaml(config_path('preview.yaml'))
        spec = build_cell_spec() if cell else TwinModel(None).spec
        gains = config_path('controllers', 'cell.yaml' if cell else 'shadow_hand_e.yaml')
        self.predictor = GoalPredictor(spec, ControllerGains.from_yaml(gains), self.config)
        self.client = ros_helpers.RosClient('preview_live_benchmark')
        c = self.client
        self.rec = {'real': c.record(JointState, '/joint_states', DEPTH),
                    'sim': c.record(JointState, '/sim/joint_states', DEPTH),
                    'preview': c.record(String, '/twin/preview_result', 200)}
        if cell:
            self.rec['hand'] = c.record(JointState, '/rh/joint_states', DEPTH)
            model, _ = write_cell_mjcf(CellConfig.from_yaml(CONFIG / 'cell.yaml'), folder / 'cell.xml')
            self.procs = cell_helpers.cell_bridges(folder, model)
        else:
            self.procs = cell_helpers.hand_bridges(folder)
        self.procs['twin'] = ros_helpers.NodeProcess('shadow_twin.ros.twin.server',
                                                     ['--params-file', str(CONFIG / params)], folder / 'twin.log')

    def start(self) -> None:
        """Wait until the streams flow and the twin's actions are served; RuntimeError with the logs if not."""
        from control_msgs.action import FollowJointTrajectory
        streams = [r for k, r in self.rec.items() if k != 'preview']
        ok = ros_helpers.wait_until(lambda: all(r.count() for r in streams) or not all(p.alive() for p in
                                                                                        self.procs.values()), 60.0)
        try:
            if not ok or not all(p.alive() for p in self.procs.values()):
                raise TimeoutError('the twin did not start')
            for action in (TWIN_ACTION, PREVIEW_ACTION):
                self.client.action_client(FollowJointTrajectory, action, timeout=60.0)
        except TimeoutError as exc:
            raise RuntimeError(f'{exc}:\n{cell_helpers.logs(self.procs)}') from None
        cell_helpers.wait_matched(self.client.node, 60.0, subscribers={'/joint_states': 2, '/sim/joint_states': 2})
        cell_helpers.wait_flowed(streams, 0.5)

    def dead(self) -> str:
        """'' while every process runs, else which exited and the tail of its log."""
        return '; '.join(f'{name} exited ({p.proc.poll()}): ...{p.output()[-1500:]}'
                         for name, p in self.procs.items() if not p.alive())

    def stop(self) -> None:
        self.client.close()
        for p in self.procs.values():
            p.stop()

    def rest(self) -> None:
        """Every bridge reset (``~/reset``: keyframe 0) and its joints at rest (< 2 mrad/s) on states
        stamped 0.5 s after it (up to :data:`WAIT` s)."""
        from std_srvs.srv import Trigger
        nodes = ['/mujoco_bridge', '/mock_hardware'] + (['/mock_ur'] if self.cell else [])
        for node in nodes:
            answer = self.client.call(Trigger, f'{node}/reset', timeout=WAIT)
            if not answer.success:
                raise RuntimeError(f'{node}/reset: {answer.message}')
        after = ros_helpers.ros_now() + 0.5      # a reset state has zero velocities: judge the ones after it
        for key in [k for k in self.rec if k != 'preview']:
            def resting(key=key):
                msg = self.rec[key].last()
                return (msg is not None and ros_helpers.stamp_s(msg) > after
                        and max(abs(v) for v in msg.velocity) < 2e-3)
            ros_helpers.wait_until(resting, WAIT)

    def send(self, goal, action: str = TWIN_ACTION, feedback=None):
        from control_msgs.action import FollowJointTrajectory
        return self.client.send_goal(FollowJointTrajectory, action, goal, feedback=feedback, timeout=WAIT)

    def start_state(self):
        """The sim's state now, as the twin's preview starts from it (``StartState``)."""
        from shadow_twin.simulation.preview.goal import StartState
        msg = ros_helpers.current(self.rec['sim'], WAIT)
        return StartState(dict(zip(msg.name, msg.position)), dict(zip(msg.name, msg.velocity)))

    def span(self, key: str, t0: float, t1: float) -> list:
        """Messages of recorder ``key`` stamped within ``t0`` .. ``t1`` (ROS time s), once one stamped
        later arrived (up to :data:`WAIT` s; else those received, counted in ``self.cut``).
        RuntimeError when none is stamped in the span."""
        try:
            ros_helpers.stamped_at(self.rec[key], t1, WAIT)
        except AssertionError:
            self.cut += 1
        out = [m for _, m in self.rec[key].snapshot() if t0 <= ros_helpers.stamp_s(m) <= t1]
        if not out:
            raise RuntimeError(f'no {key} joint states stamped within {t0:.3f} .. {t1:.3f} arrived in {WAIT:g} s')
        return out


@contextlib.contextmanager
def running(cell: bool):
    """A started :class:`Twin`, stopped on exit (its logs in a temporary folder, printed)."""
    folder = Path(tempfile.mkdtemp(prefix='preview_live_'))
    print(f'{"cell" if cell else "hand"} twin (mock hardware), logs in {folder}', flush=True)
    twin = Twin(cell, folder)
    try:
        twin.start()
        yield twin
    finally:
        twin.stop()


def finger_goal(rng: np.random.Generator, k: int):
    """Item 1's hand goal: (FollowJointTrajectory goal, core JointTrajectory, [joint]). Even ``k``: the
    finger creeps to 0-0.3 rad by ``a`` (1.9-4.7 s) and is pressed into its upper stop (1.5708 rad)
    in 0.05 s; odd ``k``: it reaches 1.3 rad slowly, then a spline through 1.45 rad at 3 rad/s to the
    stop, whose overshoot commands past it (test/core/simulation/test_preview.py's spline)."""
    from trajectory_msgs.msg import JointTrajectoryPoint

    from shadow_twin.control.trajectory import JointTrajectory
    from shadow_twin.ros.conversions import duration_msg
    joint = FINGERS[k % len(FINGERS)]
    a = float(rng.uniform(1.9, 4.6))
    if k % 2 == 0:
        times, q, qd = [a, a + 0.05], [float(rng.uniform(0.0, 0.3)), 1.5708], None
    else:
        times, q, qd = [a - 0.6, a, a + 0.5], [1.3, 1.45, 1.5708], [0.0, 3.0, 0.0]
    goal = ros_helpers.one_point_goal({joint: q[0]}, times[0], 0.05)
    goal.trajectory.points = [JointTrajectoryPoint(positions=[p], velocities=[] if qd is None else [qd[i]],
                                                   time_from_start=duration_msg(t)) for i, (t, p) in
                              enumerate(zip(times, q))]
    traj = JointTrajectory([joint], np.array(times), np.array(q)[:, None],
                           None if qd is None else np.array(qd)[:, None])
    return goal, traj, [joint]


def cabinet_goal(rng: np.random.Generator):
    """Item 1's cell goal: shoulder lift -0.5 rad and elbow 2.1-2.4 rad in 2.4-5.4 s from the
    keyframe: the forearm meets the cabinet at ~0.9 of it (test/core/simulation/test_preview.py)."""
    from shadow_twin.control.trajectory import JointTrajectory
    seconds, elbow = float(rng.uniform(2.4, 5.4)), float(rng.uniform(2.1, 2.4))
    target = {'shoulder_lift_joint': -0.5, 'elbow_joint': elbow}
    return make_goal(target, seconds), JointTrajectory(ARM, np.array([seconds]), np.array([[-0.5, elbow]])), ARM


def predicted(twin: Twin, msg, traj, joints, tries: list) -> tuple | None:
    """The offline prediction of goal ``msg`` (``traj``: its trajectory) from the sim's state now,
    with the twin's tolerances: (first failure, predicted positions of ``joints`` at its time),
    None unless it fails 2-5 s after the start."""
    from shadow_twin.control.jtc import tolerances_for_goal
    from shadow_twin.ros.parameters import load_constraints
    from shadow_twin.simulation.preview.goal import PreviewGoal
    from shadow_twin.simulation.preview.checks import preview_goal
    tol = tolerances_for_goal(load_constraints(), msg, twin.predictor.joint_names)
    goal = PreviewGoal(traj, tol, start=twin.start_state())
    first = preview_goal(twin.predictor, goal).first
    tries.append(first)
    if first is None or not FAILURE_WINDOW[0] <= first.time <= FAILURE_WINDOW[1]:
        return None
    run = twin.predictor.predict(goal)
    k = min(int(np.searchsorted(run.times, first.time)), len(run.times) - 1)
    return first, run.positions[k, [run.joint_names.index(j) for j in joints]]


def answer(twin: Twin, handle, timeout: float) -> tuple[int, str, float]:
    """(GoalStatus, error_string, ROS time s the answer arrived); status 0 for a rejected goal."""
    if not handle.accepted:
        return 0, 'rejected', ros_helpers.ros_now()
    response = twin.client.wait_future(handle.get_result_async(), timeout)
    return response.status, response.result.error_string, ros_helpers.ros_now()


def stopped_before_failure(twin: Twin, goals: int, rng: np.random.Generator, misses: list[str]) -> None:
    """Item 1 on this twin: ``goals`` goals predicted to fail 2-5 s after their start (module doc)."""
    from action_msgs.msg import GoalStatus
    aborted, leads, tries, lines = 0, [], [], []
    past = {'real': [], 'sim': []}     # cell: share of the way to the failure point; hand: rad past the limit
    for k in range(goals):
        twin.rest()
        for _ in range(10):
            goal, traj, joints = cabinet_goal(rng) if twin.cell else finger_goal(rng, k)
            found = predicted(twin, goal, traj, joints, tries)
            if found is not None:
                break
        else:
            raise RuntimeError(f'no goal predicted to fail 2-5 s after its start in 10 tries: {tries[-1]}')
        first, at_failure = found
        before = {key: positions(ros_helpers.current(twin.rec[key], WAIT), joints) for key in ('real', 'sim')}
        sent = ros_helpers.ros_now()
        start = sent + twin.lead    # unstamped: it starts start_lead after its arrival, so not before this
        status, error, answered = answer(twin, twin.send(goal), traj.times[-1] + 30.0)
        ok = status == GoalStatus.STATUS_ABORTED and error.startswith(PREDICTED)
        aborted += ok
        leads.append(start + first.time - answered)
        if not ok:
            lines.append(f'    goal {k}: predicted {first.kind} at {first.time:.2f} s; answer {status} {error[:120]!r}')
        for key in before:          # the whole span: from the send until 1 s after the answer (stopped by then)
            q = np.array([positions(m, joints) for m in twin.span(key, sent, answered + 1.0)])
            if twin.cell:           # share of the way to the predicted failure point, along the goal's direction
                way = at_failure - before[key]
                past[key].append(float(((q - before[key]) @ way).max() / (way @ way)))
            else:
                hi = twin.predictor.model.jnt_range[twin.predictor.model.joint(joints[0]).id][1]
                past[key].append(float(q[:, 0].max() - hi))
    what = 'cell: the arm into the cabinet' if twin.cell else 'hand: a finger into its stop'
    kinds = sorted({f.kind for f in tries if f is not None})
    print(f'  {what}: {goals} goals ({len(tries)} drawn; predicted {", ".join(kinds)}), answer before the '
          f'failure (start taken as send + start_lead: a lower bound) by min {min(leads):.2f} s, p50 '
          f'{np.median(leads):.2f} s', flush=True)
    for line in lines[:5]:
        print(line)
    check(misses, aborted == goals, f'{what}: ABORTED "{PREDICTED}..." {aborted}/{goals}')
    check(misses, min(leads) > 0, f'{what}: every answer before the predicted failure (min lead {min(leads):.2f} s)')
    worst = max(max(v) for v in past.values())
    if twin.cell:
        check(misses, worst < 1.0, f'{what}: mock and sim stay short of the predicted contact point (max of the way: '
                                   f'mock {100 * max(past["real"]):.0f} %, sim {100 * max(past["sim"]):.0f} %)')
    else:
        margin = twin.config.position_limit_margin
        check(misses, worst <= margin, f'{what}: mock and sim at most {margin * 1e3:.0f} mrad past the limit (max: '
                                       f'mock {max(past["real"]) * 1e3:+.1f} mrad, sim {max(past["sim"]) * 1e3:+.1f} mrad)')


def first_window_moves_nothing(twin: Twin, repeats: int, misses: list[str]) -> None:
    """Item 2: a finger into its stop within 0.1 s of its start: ABORTED, and no hand joint of the
    mock or the sim moves over the goal's span (it starts ``start_lead`` after its arrival) and 1 s after."""
    from action_msgs.msg import GoalStatus
    aborted, moved = 0, []
    for _ in range(repeats):
        twin.rest()
        before = {key: positions(ros_helpers.current(twin.rec[key], WAIT), HAND) for key in ('real', 'sim')}
        sent = ros_helpers.ros_now()
        status, error, answered = answer(twin, twin.send(ros_helpers.one_point_goal({'rh_FFJ3': 1.5708}, 0.1)), WAIT)
        aborted += status == GoalStatus.STATUS_ABORTED and error.startswith(PREDICTED)
        end = max(answered, sent + twin.lead + 0.1) + 1.0
        for key in before:
            change = np.abs(np.array([positions(m, HAND) for m in twin.span(key, sent, end)]) - before[key]).max(axis=0)
            moved.append((float(change.max()), f'{"mock" if key == "real" else key} {HAND[int(change.argmax())]}'))
    print(f'  first window: a finger into its stop in 0.1 s, x{repeats}: last answer {status} {error[:100]!r}')
    check(misses, aborted == repeats, f'first window: ABORTED "{PREDICTED}..." {aborted}/{repeats}')
    most, where = max(moved)
    check(misses, most < STILL_RAD, f'first window: mock and sim moved max {most * 1e3:.2f} mrad ({where}; '
                                    f'target < {STILL_RAD * 1e3:.0f})')
