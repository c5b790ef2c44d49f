"""The external-force watch live: the mock UR (config/mock_ur.yaml: joint currents in A through
the nominal drive gains, with noise; damping x3 and friction loss x2 of the model's) and the
twin monitor predicting the efforts by inverse dynamics of ur5.xml, as separate processes on a
private ROS domain. Ten normal trajectories through the mock's action raise no flag; a 30 N push
on the standing arm (``external_wrench``) is flagged within 100 ms, judged on stamps: the push's
(``/mock_ur/external_wrench``) against the first flagged ``/diagnostics`` status."""

from __future__ import annotations

from pathlib import Path

from support import cell as cell_helpers
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]
MONITOR_PARAMS = REPO / 'config' / 'twin_monitor.yaml'
ACTION = '/scaled_joint_trajectory_controller/follow_joint_trajectory'
UR5 = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint', 'wrist_2_joint', 'wrist_3_joint']
START_TIMEOUT = 30.0
PUSH = '{body: forearm_link, force: [0, 0, -30]}'


def stamp_s(stamp) -> float:
    return stamp.sec + 1e-9 * stamp.nanosec


def force_statuses(recorder) -> list[tuple[float, object]]:
    """(header stamp s, status) of every external-force status received, in arrival order."""
    return [(stamp_s(msg.header.stamp), st) for _, msg in recorder.snapshot() for st in msg.status
            if st.name.startswith('twin_monitor: external force: ')]


@pytest.fixture(scope='module')
def topics(ros):
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import WrenchStamped
    from sensor_msgs.msg import JointState
    _, client = ros
    return {'real': client.record(JointState, '/joint_states', depth=200),
            'error': client.record(JointState, '/twin/effort_error', depth=3000),
            'diagnostics': client.record(DiagnosticArray, '/diagnostics', depth=500),
            'wrench': client.record(WrenchStamped, '/mock_ur/external_wrench', depth=10)}


@pytest.fixture(scope='module')
def arm(ros, topics, tmp_path_factory):
    """The mock UR and the twin monitor on ur5.xml (no sim bridge: the effort watch needs none)."""
    folder = tmp_path_factory.mktemp('effort_watch')
    procs = {'ur': cell_helpers.bridge(folder, 'mock_ur', 'mock_ur.yaml'),
             'monitor': cell_helpers.monitor(folder, MONITOR_PARAMS, '-p',
                                             'effort.model_path:=package://shadow_twin/models/ur5.xml',
                                             '-p', 'drift.enabled:=false', '-p', 'diagnostics_period:=0.5')}
    cell_helpers.wait_started(procs, [topics['real'], topics['error']], START_TIMEOUT, 'the mock UR and the monitor')
    yield procs
    cell_helpers.stop_all(procs)


def smooth_goal(start: np.ndarray, target: np.ndarray, seconds: float):
    """A two-point goal from ``start`` to ``target`` (rad) in ``seconds``: a mid point with velocity
    and zero velocity and acceleration at the end (the JTC's quintic segments)."""
    from control_msgs.action import FollowJointTrajectory
    from trajectory_msgs.msg import JointTrajectoryPoint

    from shadow_twin.ros.conversions import duration_msg
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = list(UR5)
    mid = (start + target) / 2
    goal.trajectory.points = [
        JointTrajectoryPoint(positions=mid.tolist(), velocities=(1.5 * (target - start) / seconds).tolist(),
                             accelerations=[0.0] * 6, time_from_start=duration_msg(seconds / 2)),
        JointTrajectoryPoint(positions=target.tolist(), velocities=[0.0] * 6, accelerations=[0.0] * 6,
                             time_from_start=duration_msg(seconds))]
    return goal


def test_ten_normal_trajectories_raise_no_flag(ros, arm, topics):
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    helpers, client = ros
    rng = np.random.default_rng(25)
    start_count = topics['error'].count()
    since = stamp_s(topics['real'].last().header.stamp)
    for k in range(10):
        msg = topics['real'].last()
        now = np.array([msg.position[list(msg.name).index(j)] for j in UR5])
        moved = rng.choice(6, size=rng.integers(1, 7), replace=False)     # varied joints ...
        target = now.copy()
        target[moved] += rng.uniform(-0.5, 0.5, len(moved))
        seconds = float(rng.uniform(0.8, 2.0))                              # ... and speeds
        handle = client.send_goal(FollowJointTrajectory, ACTION, smooth_goal(now, target, seconds), timeout=10.0)
        assert handle.accepted
        result = client.wait_future(handle.get_result_async(), seconds + 10.0)
        assert result.status == GoalStatus.STATUS_SUCCEEDED, result.result.error_string
    until = stamp_s(topics['real'].last().header.stamp)
    assert helpers.wait_until(lambda: any(t >= until for t, _ in force_statuses(topics['diagnostics'])), 5.0)
    during = [(t, st) for t, st in force_statuses(topics['diagnostics']) if since <= t]
    assert {st.name.rsplit(': ', 1)[-1] for _, st in during} == set(UR5)
    flagged = [(t, st.name, st.message) for t, st in during if st.level[0] != 0]
    assert not flagged, flagged[:5]
    errors = [m for _, m in topics['error'].snapshot()[start_count:] if since <= stamp_s(m.header.stamp) <= until]
    assert len(errors) > 0.8 * 125 * (until - since)       # a residual per sample of the 125 Hz joint states
    residual = np.array([m.effort for m in errors])
    assert residual.shape[1] == 6 and np.isfinite(residual).all()


def test_a_30_n_push_on_the_standing_arm_is_flagged_within_100_ms(ros, arm, topics):
    helpers, client = ros
    topics['wrench'].clear()
    before = len(force_statuses(topics['diagnostics']))
    (result,) = client.set_parameters('/mock_ur', {'external_wrench': PUSH})
    assert result.successful, result.reason
    assert helpers.wait_until(lambda: topics['wrench'].count() > 0, 5.0), arm['ur'].output()[-2000:]
    push = stamp_s(topics['wrench'].last().header.stamp)
    assert topics['wrench'].last().header.frame_id == 'forearm_link'

    def first_flag():
        return next(((t, st) for t, st in force_statuses(topics['diagnostics'])[before:]
                     if st.level[0] >= 1 and t >= push), None)
    assert helpers.wait_until(lambda: first_flag() is not None, 5.0), arm['monitor'].output()[-3000:]
    flagged_at, status = first_flag()
    assert flagged_at - push <= 0.1, (flagged_at - push, status.message)
    assert status.name.endswith('shoulder_lift_joint')        # the push's largest torque
    values = {kv.key: kv.value for kv in status.values}
    assert abs(float(values['residual'])) >= float(values['warn_threshold']) and values['unit'] == 'A'
    # the residual on /twin/effort_error shows it from the push on
    lift = UR5.index('shoulder_lift_joint')
    def after():
        return [m for _, m in topics['error'].snapshot() if stamp_s(m.header.stamp) > push + 0.05]
    assert helpers.wait_until(lambda: len(after()) > 0, 5.0)
    after = after()
    assert abs(after[-1].effort[lift]) >= float(values['warn_threshold'])
    # released: back to OK after the hold time
    (result,) = client.set_parameters('/mock_ur', {'external_wrench': ''})
    assert result.successful
    assert helpers.wait_until(lambda: topics['wrench'].last().header.frame_id == '', 5.0)
    released = stamp_s(topics['wrench'].last().header.stamp)
    assert helpers.wait_until(lambda: any(t > released and st.level[0] == 0 and st.name == status.name
                                          for t, st in force_statuses(topics['diagnostics'])), 5.0)


def test_a_bad_wrench_is_refused_and_moves_nothing(ros, arm, topics):
    _, client = ros
    for bad in ('{body: no_such_link, force: [0, 0, 1]}', '{body: forearm_link, force: [0, nan]}', '[1, 2'):
        (result,) = client.set_parameters('/mock_ur', {'external_wrench': bad})
        assert not result.successful and result.reason and '\n' not in result.reason
    assert arm['ur'].alive()
