"""The UR's speed scaling without ROS processes: the scaled trajectory clock (ur_robot_driver's
scaled JTC), the twin's desired state on it, and the check every speed scaling reader applies
(the readers themselves with fake messages and loggers)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from shadow_twin.control import jtc
from shadow_twin.twin.desired import DesiredSampler
from shadow_twin.control.scaled_time import ScaledClock, SpeedScalingError, checked_speed_scaling, scaled_mask
from shadow_twin.control.trajectory import JointTrajectory

GLOBS = ['*shoulder_pan_joint', '*shoulder_lift_joint', '*elbow_joint', '*wrist_?_joint']
BAD = [math.nan, math.inf, -math.inf, -5.0, 150.0, 100.0000001]


class FakeLog:
    """A logger recording (level, text, keyword arguments)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict]] = []

    def info(self, text, **kwargs):
        self.lines.append(('info', text, kwargs))

    def warning(self, text, **kwargs):
        self.lines.append(('warning', text, kwargs))

    def warnings(self) -> list[tuple[str, dict]]:
        return [(text, kwargs) for level, text, kwargs in self.lines if level == 'warning']


# ----------------------------------------------------------------------------------- the clock
def test_clock_lags_at_the_scaling_and_integrates_across_changes():
    clock = ScaledClock(10.0, scaling=0.1)
    np.testing.assert_allclose(clock.lags([9.0, 10.0, 11.0, 12.0]), [0.0, 0.0, 0.9, 1.8])
    np.testing.assert_allclose(clock.trajectory_time([9.0, 11.0, 12.0]), [-1.0, 0.1, 0.2])
    assert clock.reaches(0.5) == pytest.approx(15.0)                 # 0.5 s of trajectory at 10 %: 5 s
    clock.set_scaling(12.0, 1.0)                                     # 0.2 s done, the lag so far is 1.8 s
    assert (clock.lag, clock.lag_time, clock.scaling) == (pytest.approx(1.8), 12.0, 1.0)
    np.testing.assert_allclose(clock.trajectory_time([12.0, 12.3]), [0.2, 0.5])
    assert clock.reaches(0.5) == pytest.approx(12.3)
    clock.set_scaling(12.1, 0.0)                                     # paused: the time stands still
    assert clock.reaches(0.5) == math.inf
    assert clock.trajectory_time([20.0])[0] == pytest.approx(0.3)
    assert clock.lags([20.0], scaling=1.0)[0] == pytest.approx(1.8)  # an explicit scaling wins
    clock.advance(11.0)                                              # the past: nothing changes
    assert clock.lag_time == 12.1


def test_clock_starts_integrating_at_the_start_or_when_joined():
    before = ScaledClock(10.0, scaling=0.5)
    before.set_scaling(5.0, 0.25)                                    # before the start: no lag yet
    assert (before.lag, before.lag_time) == (0.0, 10.0)
    assert before.reaches(1.0) == pytest.approx(14.0)
    joined = ScaledClock(10.0, scaling=0.5, since=11.0)              # joined mid-way: lag from now on
    assert joined.trajectory_time([11.0, 13.0]) == pytest.approx([1.0, 2.0])


def test_scaled_mask_uses_the_bridges_globs():
    names = ['shoulder_pan_joint', 'ur_wrist_2_joint', 'rh_FFJ3', 'wrist_12_joint']
    assert scaled_mask(names, GLOBS).tolist() == [True, True, False, False]
    assert scaled_mask(names, []).tolist() == [False] * 4


@pytest.mark.parametrize('value', BAD + ['fast', None])
def test_checked_speed_scaling_refuses_nan_inf_and_out_of_range(value):
    with pytest.raises(SpeedScalingError, match='speed scaling must be'):
        checked_speed_scaling(value)


def test_checked_speed_scaling_passes_percentages():
    assert [checked_speed_scaling(v) for v in (0, 10.0, 100.0)] == [0.0, 10.0, 100.0]
    assert issubclass(SpeedScalingError, ValueError)


# ----------------------------------------------------------------------------------- the sampler
def arm_and_hand(seconds: float = 0.5) -> DesiredSampler:
    """shoulder_pan_joint 0 -> 0.5 rad and rh_FFJ3 0 -> 1 rad in ``seconds``, started at 100 s at 10 %."""
    trajectory = JointTrajectory(['shoulder_pan_joint', 'rh_FFJ3'], [seconds], [[0.5, 1.0]])
    names = list(trajectory.joint_names)
    return DesiredSampler(trajectory, [0.0, 0.0], 100.0, scaled_mask(names, GLOBS), 0.1)


def test_sampler_runs_the_scaled_joints_on_the_scaled_clock():
    """At 10 % the arm joint's 0.5 s move takes 5 s (velocity x 0.1); the hand joint keeps its
    timing; the end (when the goal window opens) is the scaled one."""
    sampler = arm_and_hand()
    assert sampler.end_s == pytest.approx(105.0)
    pos, vel, acc, t = sampler.at(102.5)
    np.testing.assert_allclose(pos, [0.25, 1.0])                    # half way; the hand is there
    np.testing.assert_allclose(vel, [0.1, 0.0])                     # 1 rad/s x 0.1; the hand at rest
    assert t == pytest.approx(2.5)                                  # s since start: the unscaled one
    pos, vel, _, _ = sampler.at(100.25)
    np.testing.assert_allclose(pos, [0.025, 0.5])
    np.testing.assert_allclose(vel, [0.1, 2.0])
    pos, vel, _, _ = sampler.at(105.5)
    np.testing.assert_allclose(pos, [0.5, 1.0])
    np.testing.assert_allclose(vel, [0.0, 0.0])


def test_sampler_scales_acceleration_by_the_square():
    trajectory = JointTrajectory(['elbow_joint'], [1.0], [[1.0]], velocities=[[0.0]])     # cubic
    fast = DesiredSampler(trajectory, [0.0], 0.0, [True], 1.0)
    slow = DesiredSampler(trajectory, [0.0], 0.0, [True], 0.5)
    p1, v1, a1, _ = fast.at(0.2)
    p2, v2, a2, _ = slow.at(0.4)
    assert p2[0] == pytest.approx(p1[0]) and v2[0] == pytest.approx(0.5 * v1[0])
    assert a2[0] == pytest.approx(0.25 * a1[0]) and a1[0] != 0.0


def test_sampler_follows_scaling_changes_and_keeps_an_end_it_passed():
    sampler = arm_and_hand()
    sampler.set_scaling(101.0, 1.0)                                 # 0.1 s done at 10 %, then full speed
    assert sampler.scaling == 1.0
    assert sampler.end_s == pytest.approx(101.4)
    assert sampler.at(101.2)[0][0] == pytest.approx(0.3)
    sampler.set_scaling(101.2, 0.0)                                 # paused (the UR's stop): no end yet
    assert sampler.end_s == math.inf
    assert sampler.at(150.0)[0][0] == pytest.approx(0.3)
    assert sampler.at(150.0)[1][0] == 0.0
    sampler.set_scaling(200.0, 1.0)
    assert sampler.end_s == pytest.approx(200.2)
    sampler.set_scaling(201.0, 0.5)                                 # after the end: the end stays
    assert sampler.end_s == pytest.approx(200.2)


def test_sampler_without_scaled_joints_keeps_the_unscaled_clock():
    trajectory = JointTrajectory(['rh_FFJ3'], [1.0], [[1.0]])
    sampler = DesiredSampler(trajectory, [0.0], 10.0, scaled_mask(['rh_FFJ3'], GLOBS), 0.1)
    assert sampler.end_s == 11.0
    assert sampler.at(10.5)[0][0] == pytest.approx(0.5)


def test_the_twins_check_passes_where_a_10_percent_clock_puts_the_arm():
    """The fault: at 10 % real and sim were where the scaled clock puts them, yet the twin aborted
    with GOAL_TOLERANCE_VIOLATED after the unscaled end. On the scaled clock it is still the path
    check, and within tolerance."""
    sampler = arm_and_hand()
    tolerances = jtc.Tolerances(path={'shoulder_pan_joint': jtc.StateTolerance(position=0.05)},
                                goal={'shoulder_pan_joint': jtc.StateTolerance(position=0.02)}, goal_time=2.0)
    for now in (100.6, 102.6, 104.6):
        desired, desired_vel, _, _ = sampler.at(now)
        actual = 0.5 * min(now - 100.0, 5.0) / 5.0
        assert now < sampler.end_s
        verdict = jtc.check_path(['shoulder_pan_joint'], desired[:1], desired_vel[:1], np.array([actual]),
                                 np.array([0.1]), tolerances)
        assert verdict.outcome is jtc.GoalOutcome.RUNNING, verdict.message
    verdict = jtc.check_goal(['shoulder_pan_joint'], [0.5], np.array([0.5]), np.array([0.0]), tolerances,
                             105.1 - sampler.end_s)
    assert verdict.outcome is jtc.GoalOutcome.SUCCEEDED, verdict.message


# ----------------------------------------------------------------------------------- the readers
def test_twin_speed_scaling_reader_drops_invalid_values_with_one_line_per_5_s(monkeypatch):
    """The twin's reader refuses each bad value (BadMessage naming data and the value); its
    subscription's guard drops it with one line per 5 s for the burst."""
    pytest.importorskip('std_msgs.msg')
    from std_msgs.msg import Float64
    from shadow_twin.common.errors import BadMessage
    from shadow_twin.ros import guard as guards
    from shadow_twin.ros.twin import inputs as twin_inputs
    clock = [1000.0]
    monkeypatch.setattr(guards.time, 'monotonic', lambda: clock[0])
    log = FakeLog()
    topic = '/speed_scaling_state_broadcaster/speed_scaling'
    reader = twin_inputs.SpeedScaling(topic, log)
    callback = guards.CallbackGuard(log).wrap(topic, reader.on_message)
    callback(Float64(data=10.0))
    for value in BAD:
        with pytest.raises(BadMessage, match=f'data: .*{value!r}'):
            reader.on_message(Float64(data=value))
        callback(Float64(data=value))
        assert reader.value == 10.0 and reader.fraction == pytest.approx(0.1)
    (text, _), = log.warnings()                                     # one line for the burst
    assert topic in text and 'data' in text and 'nan' in text
    assert '\n' not in text
    clock[0] += guards.LOG_PERIOD
    callback(Float64(data=150.0))
    assert len(log.warnings()) == 2 and '150' in log.warnings()[-1][0]
    callback(Float64(data=0.0))
    assert reader.value == 0.0


def test_bridge_speed_scaling_reader_drops_invalid_values():
    pytest.importorskip('rclpy')
    from std_msgs.msg import Float64
    from mujoco_bridge.bridge_node import MujocoBridge
    from shadow_twin.common.errors import BadMessage
    from shadow_twin.ros.guard import CallbackGuard
    applied = []
    log = FakeLog()
    bridge = SimpleNamespace(sim=SimpleNamespace(speed_scaling=1.0, speed_scaled_joints=('*elbow_joint',),
                                                 set_speed_scaling=applied.append),
                             get_logger=lambda: log)
    guard = CallbackGuard(log)
    callback = guard.wrap('/scaling', lambda msg: MujocoBridge._on_speed_scaling(bridge, msg))
    for value in BAD:
        with pytest.raises(BadMessage, match=f'data: .*{value!r}'):
            MujocoBridge._on_speed_scaling(bridge, Float64(data=value))
        callback(Float64(data=value))
    assert applied == []
    assert guard.dropped == {'/scaling': len(BAD)}
    (text, _), = log.warnings()                                     # one line for the burst
    assert '/scaling' in text and 'data' in text and 'nan' in text
    callback(Float64(data=10.0))
    assert applied == [pytest.approx(0.1)]
