"""The external-force watch on the whole cell (``shadow-twin up --cell --mock-hardware``; issue 33
item 9), shared by test/cli/test_effort_cell.py and ``benchmarks/effort_cell.py``.

The mock UR carries the hand as the real UR does (the cell reduced to the UR5's joints, the hand
rigid on the flange: ``shadow_twin.model.mock_models.write_arm_stand_in_mjcf``), and the twin
monitor predicts the arm's currents by inverse dynamics of the cell model; so at rest and through
normal goals the watch sees no external force, and a push is an external force.

* :func:`start`: the cell (:func:`support.scenarios.cell_faults.start_cell`) and recorders of the watch's
  outputs, once its first statuses are out.
* :func:`window`: the watch's statuses and residuals stamped in a time span: flags, largest |residual|.
* :func:`normal_goals`: arm goals through the twin as MoveIt sends them (sampled quintic moves,
  positions, velocities and accelerations every 0.1 s), around :data:`support.scenarios.cell.ARM`.
* :func:`push`: a wrench on the standing arm through the mock UR's ``external_wrench`` parameter,
  the first flag after it (on stamps), then released.

Import with rclpy available.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from support.scenarios import cell_faults as faults
from support.scenarios.cell import ARM, START_TIMEOUT, TWIN_ACTION, result_of
from support.ros import ros_now, stamp_s, stamped_at, wait_until

#: The UR5's joints, in the effort watch's order (config/twin_monitor_cell.yaml effort.joints).
JOINTS = list(ARM)
#: The name of the watch's per-joint status, followed by the joint (shadow_twin/ros/monitor/effort.py).
STATUS_PREFIX = 'twin_monitor: external force: '
#: A 30 N push down on the forearm's centre of mass (N, world frame; config/mock_ur.yaml external_wrench).
PUSH = '{body: forearm_link, force: [0, 0, -30]}'
#: s between the samples of a goal (MoveIt's time parameterisation sends points about this far apart).
GOAL_DT = 0.1


@dataclass
class Watch:
    """A running cell with recorders of the effort watch: ``diagnostics`` (/diagnostics),
    ``error`` (/twin/effort_error, measured - predicted, A), ``wrench`` (/mock_ur/external_wrench)."""

    cell: faults.Cell
    diagnostics: object
    error: object
    wrench: object

    @property
    def arm(self):
        """The mock UR's /joint_states recorder."""
        return self.cell.streams['/joint_states']


def start(helpers, client, folder: Path) -> Watch:
    """Start ``up --cell --mock-hardware`` and wait until the effort watch has published a status
    for every arm joint. Raises RuntimeError (with ``up``'s output) when it does not."""
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import WrenchStamped
    from sensor_msgs.msg import JointState
    diagnostics = client.record(DiagnosticArray, '/diagnostics', depth=5000)
    error = client.record(JointState, '/twin/effort_error', depth=20000)
    wrench = client.record(WrenchStamped, '/mock_ur/external_wrench', depth=10)
    cell = faults.start_cell(helpers, client, folder)
    watch = Watch(cell, diagnostics, error, wrench)
    if not wait_until(lambda: {j for _, j, _ in statuses(watch)} == set(JOINTS), START_TIMEOUT):
        cell.up.stop(timeout=15.0)
        raise RuntimeError(f'the effort watch published no status of every arm joint:\n{cell.up.output()[-3000:]}')
    return watch


def statuses(watch: Watch) -> list[tuple[float, str, object]]:
    """(header stamp s, joint, DiagnosticStatus) of every external-force status received, in arrival order."""
    return [(stamp_s(msg), st.name[len(STATUS_PREFIX):], st) for _, msg in watch.diagnostics.snapshot()
            for st in msg.status if st.name.startswith(STATUS_PREFIX)]


def window(watch: Watch, since: float, until: float) -> dict:
    """The watch between the stamps ``since`` and ``until`` (s), once a status stamped after
    ``until`` has arrived (the watch publishes each change at once and all every diagnostics
    period): {'flags': [(stamp, joint, level, message)] of every status not OK, 'statuses': how
    many, 'samples': residual samples, 'max_residual': {joint: largest |measured - predicted| A},
    'mean_residual': {joint: mean A}}. AssertionError when no later status comes within
    :data:`support.scenarios.cell.START_TIMEOUT` s."""
    assert wait_until(lambda: any(t > until for t, _, _ in statuses(watch)), START_TIMEOUT), \
        f'no external-force status stamped after {until:.3f}'
    inside = [(t, j, st) for t, j, st in statuses(watch) if since <= t <= until]
    residual = np.array([m.effort for _, m in watch.error.snapshot() if since <= stamp_s(m) <= until]).reshape(-1, 6)
    peak = np.abs(residual).max(axis=0) if len(residual) else np.full(6, np.nan)
    mean = residual.mean(axis=0) if len(residual) else np.full(6, np.nan)
    return {'flags': [(t, j, int(st.level[0]), st.message) for t, j, st in inside if st.level[0] != 0],
            'statuses': len(inside), 'samples': len(residual),
            'max_residual': dict(zip(JOINTS, peak.tolist())), 'mean_residual': dict(zip(JOINTS, mean.tolist()))}


def quintic_goal(start: np.ndarray, target: np.ndarray, seconds: float):
    """A FollowJointTrajectory goal of the arm from ``start`` to ``target`` (rad, in :data:`JOINTS`'
    order) in ``seconds``, as MoveIt sends one: points every :data:`GOAL_DT` s of a quintic move
    (rest to rest) with positions, velocities and accelerations; goal tolerance 0.05 rad."""
    from control_msgs.action import FollowJointTrajectory
    from control_msgs.msg import JointTolerance
    from trajectory_msgs.msg import JointTrajectoryPoint

    from shadow_twin.ros.conversions import duration_msg
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = list(JOINTS)
    span = np.asarray(target, dtype=float) - np.asarray(start, dtype=float)
    for t in np.linspace(0.0, seconds, int(round(seconds / GOAL_DT)) + 1)[1:]:
        tau = t / seconds
        s = 10 * tau ** 3 - 15 * tau ** 4 + 6 * tau ** 5
        ds = (30 * tau ** 2 - 60 * tau ** 3 + 30 * tau ** 4) / seconds
        dds = (60 * tau - 180 * tau ** 2 + 120 * tau ** 3) / seconds ** 2
        goal.trajectory.points.append(JointTrajectoryPoint(
            positions=(start + s * span).tolist(), velocities=(ds * span).tolist(),
            accelerations=(dds * span).tolist(), time_from_start=duration_msg(float(t))))
    goal.goal_tolerance = [JointTolerance(name=j, position=0.05) for j in JOINTS]
    return goal


def arm_now(watch: Watch) -> np.ndarray:
    """The mock UR's joint positions (rad, :data:`JOINTS`' order) stamped now (waits up to
    :data:`support.scenarios.cell.START_TIMEOUT` s for a later message: a starved PC hands them late)."""
    msg = stamped_at(watch.arm, ros_now(), START_TIMEOUT)
    return np.array([msg.position[list(msg.name).index(j)] for j in JOINTS])


def normal_goals(client, watch: Watch, count: int = 10, seed: int = 33) -> list[tuple[float, float, str]]:
    """Bring the arm to :data:`support.scenarios.cell.ARM` in 3 s, then send ``count`` goals through the
    twin (mode both: the sim and the mock UR), one after another: each moves 1 to 6 joints by up
    to +-0.4 rad from ARM (clear of the cabinet and the base) in 1.0 to 2.5 s (up to 1.2 rad/s and
    4.6 rad/s^2). Returns (start stamp s, end stamp s, '' or what failed) per goal, the move to
    ARM first."""
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    rng = np.random.default_rng(seed)
    centre = np.array(list(ARM.values()))
    plan = [(centre, 3.0)]
    for _ in range(count):
        target = centre.copy()
        moved = rng.choice(6, size=int(rng.integers(1, 7)), replace=False)
        target[moved] += rng.uniform(-0.4, 0.4, len(moved))
        plan.append((target, float(rng.uniform(1.0, 2.5))))
    out = []
    for target, seconds in plan:
        began = ros_now()
        handle = client.send_goal(FollowJointTrajectory, TWIN_ACTION, quintic_goal(arm_now(watch), target, seconds),
                                  timeout=START_TIMEOUT)
        failed = '' if handle.accepted else 'rejected'
        if handle.accepted:
            status, result = result_of(client, handle, seconds + 30.0)
            if status != GoalStatus.STATUS_SUCCEEDED:
                failed = f'status {status}: {result.error_string}'
        out.append((began, ros_now(), failed))
    return out


def push(helpers, client, watch: Watch, wrench: str = PUSH, timeout: float = 10.0) -> dict:
    """Apply ``wrench`` on the standing arm (the mock UR's ``external_wrench``), wait for the
    first status not OK stamped after the push took effect (the stamp of /mock_ur/external_wrench),
    then release it. Returns {'stamp': push s, 'delay': first flag - push s or None, 'joint',
    'level', 'message', 'residual': A}. AssertionError when the parameter is refused."""
    watch.wrench.clear()
    (result,) = client.set_parameters('/mock_ur', {'external_wrench': wrench})
    assert result.successful, result.reason
    assert helpers.wait_until(lambda: watch.wrench.count() > 0, timeout), 'the mock UR published no wrench'
    at = stamp_s(watch.wrench.last())

    def first():
        return next(((t, j, st) for t, j, st in statuses(watch) if t >= at and st.level[0] in (1, 2)), None)
    flagged = helpers.wait_until(lambda: first() is not None, timeout)
    out = {'stamp': at, 'delay': None, 'joint': '', 'level': 0, 'message': '', 'residual': float('nan')}
    if flagged:
        t, joint, st = first()
        values = {kv.key: kv.value for kv in st.values}
        out.update(delay=t - at, joint=joint, level=int(st.level[0]), message=st.message,
                   residual=float(values['residual']))
    (result,) = client.set_parameters('/mock_ur', {'external_wrench': ''})
    assert result.successful, result.reason
    return out
