"""Tests of shadow_twin.simulation.live following other robots' states and trajectories (shadow
mode's core, no ROS needed): stamped states extrapolated, sources followed at once, a followed
trajectory on its own clock. The stepping, reload and override tests: test_live_sim.py."""

import math

import numpy as np
import pytest

from shadow_twin.common.errors import TrajectoryError
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.simulation.following import FOLLOW_EXTRAPOLATION, FOLLOW_MAX_SPEED
from shadow_twin.simulation.live import LiveSimulation
from test_live_sim import run


def test_followed_joints_track_another_robots_state_until_a_trajectory_or_reset():
    """``follow``: the named joints track the given state moved on at its velocity (at most
    FOLLOW_EXTRAPOLATION s); the target starts where the joint is held and moves at most
    FOLLOW_MAX_SPEED, so a far state is approached, not jumped to; names the model does not drive
    are ignored, a trajectory on the same joint takes precedence while it runs, and a reset ends
    the following."""
    sim = LiveSimulation()
    joint, other = 'rh_FFJ3', 'rh_MFJ3'
    k = sim.controller.joint_names.index(joint)
    held = float(sim._hold[k])
    assert sim.follow({'shoulder_pan_joint': 1.0}) == []
    assert sim.follow({joint: 0.6, 'shoulder_pan_joint': 1.0}, {joint: 0.5}) == [joint]
    sim.step(int(round(0.05 / sim.dt)))
    q, _ = sim._desired(np.array([sim.time, sim.time + 1.0]))
    assert q[0, k] == pytest.approx(held + 0.5 * 0.05, abs=1e-9)            # from where it was, at 0.5 rad/s
    assert q[1, k] == pytest.approx(held + 0.5 * FOLLOW_EXTRAPOLATION, abs=1e-9)   # no further
    sim.follow({joint: 1.5})
    assert sim._followed[''].positions[0] == pytest.approx(held + 0.5 * 0.05 + FOLLOW_MAX_SPEED * 0.05, abs=1e-6)
    for _ in range(int(round(1.0 / sim.dt))):
        sim.follow({joint: 0.9})
        sim.step(1)
    assert sim.positions([joint])[0] == pytest.approx(0.9, abs=0.02)
    sim.set_trajectory(JointTrajectory([joint, other], [0.5], [[0.3, 0.3]]))
    run(sim, 0.4)
    assert sim.positions([joint])[0] < 0.6                                     # the trajectory drives it
    sim.reset()
    held = sim.positions([joint])[0]
    run(sim, 0.5)
    assert sim.positions([joint])[0] == pytest.approx(held, abs=0.02) and abs(held - 0.9) > 0.3   # no longer followed


def test_a_followed_state_that_arrives_late_is_extrapolated_from_its_stamp():
    """A state of sim time ``at`` that arrives 40 ms later is moved on from ``at``: the joint's
    target is where the other robot's joint is now, not 40 ms behind it; one of a sim time 20 ms
    ahead (a late tick) is moved back; one stamped far ahead is taken as now."""
    sim = LiveSimulation()
    joint = 'rh_FFJ3'
    k = sim.controller.joint_names.index(joint)
    rate = 0.8                                                   # rad/s, the other robot's joint
    for _ in range(100):                                         # 0.2 s of states, each 40 ms late
        at = sim.time - 0.04
        sim.follow({joint: 0.2 + rate * at}, {joint: rate}, at=at)
        sim.step(1)
    q, _ = sim._desired(np.array([sim.time]))
    assert q[0, k] == pytest.approx(0.2 + rate * sim.time, abs=1e-9)
    lead = sim.time + 0.02                    # of a sim time still to come (the sim lagging the stamps)
    sim.follow({joint: 0.2 + rate * lead}, {joint: rate}, at=lead)
    q, _ = sim._desired(np.array([sim.time]))
    assert q[0, k] == pytest.approx(0.2 + rate * sim.time, abs=1e-9)           # moved back to now
    sim.follow({joint: 0.2 + rate * sim.time}, {joint: rate}, at=sim.time + 5.0)   # a clock that does not match
    assert sim._followed[''].since == sim.time


def test_a_followed_swing_is_extrapolated_with_its_acceleration_through_a_stall():
    """States of a swinging joint every 8 ms (as the UR5 stand-in publishes), then none for 52 ms
    (a stand-in process not scheduled): the target keeps to the swing within 0.5 mrad, where
    moving on at the last velocity alone ends 6 mrad off (0.5 a t^2 at 4.9 rad/s^2)."""
    sim = LiveSimulation()
    joint = 'rh_FFJ3'
    k = sim.controller.joint_names.index(joint)
    w, amplitude = math.pi, 0.5                                  # the CY elbow swing: 2 s period
    for n in range(40):
        t = 0.008 * n
        sim.follow({joint: amplitude * math.sin(w * t)}, {joint: amplitude * w * math.cos(w * t)}, at=t)
        sim.step_to(t + 0.008)
    t_last = 0.008 * 39
    later = t_last + 0.052
    q, qd = sim._desired(np.array([later]))
    assert q[0, k] == pytest.approx(amplitude * math.sin(w * later), abs=5e-4)
    velocity_only = amplitude * math.sin(w * t_last) + amplitude * w * math.cos(w * t_last) * 0.052
    assert abs(velocity_only - amplitude * math.sin(w * later)) > 5e-3       # what the acceleration term saves


def test_two_sources_are_followed_at_once_and_one_dropped_joint_holds_where_it_was():
    """Shadowing two controllers: each source keeps its own joints; a source that stops naming a
    joint leaves it held where its desired state was, not sent back to its old hold."""
    sim = LiveSimulation()
    first, second = 'rh_FFJ3', 'rh_MFJ3'
    for _ in range(int(round(0.6 / sim.dt))):
        sim.follow({first: 0.5}, source='/arm')
        sim.follow({second: 0.7}, source='/hand')
        sim.step(1)
    assert sim.positions([first, second]) == pytest.approx([0.5, 0.7], abs=0.02)
    sim.follow({second: 0.7}, source='/arm')            # '/arm' now names only the other joint
    run(sim, 0.3)
    assert sim.positions([first])[0] == pytest.approx(0.5, abs=0.02)


def test_a_followed_trajectory_runs_on_its_own_clock_from_its_stamp():
    """``follow_trajectory``: a trajectory stamped 0.1 s ago (it arrived late) is where its own
    clock says now, starting where the joint's desired state was; after its end it holds."""
    sim = LiveSimulation()
    joint = 'rh_FFJ3'
    k = sim.controller.joint_names.index(joint)
    run(sim, 0.2)
    start = float(sim._hold[k])
    stamp = sim.time - 0.1
    assert sim.follow_trajectory(JointTrajectory([joint, 'shoulder_pan_joint'], [1.0], [[1.0, 0.2]]), stamp,
                                 source='/rh_trajectory_controller/joint_trajectory') == [joint]
    q, _ = sim._desired(np.array([sim.time, stamp + 0.5, stamp + 5.0]))
    assert start < q[0, k] < q[1, k] < 1.0                 # joined at 0.1 s, rising
    assert q[2, k] == pytest.approx(1.0)                   # held at its last point
    run(sim, 1.5)
    assert sim.positions([joint])[0] == pytest.approx(1.0, abs=0.03)
    with pytest.raises(TrajectoryError, match='none of the joints'):
        sim.follow_trajectory(JointTrajectory(['shoulder_pan_joint'], [1.0], [[0.2]]))
