"""The simulated mobile base (shadow_twin.simulation.mobile_base) inside LiveSimulation:
velocity commands drive the wheels through the diff-drive inverse kinematics, odometry comes
from the free joint, a stale command stops the base, a reload keeps its pose."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError, TrajectoryError
from shadow_twin.control.diff_drive import MIR250_WHEEL_RADIUS, MIR250_WHEEL_SEPARATION
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.mjcf import builtin_model_path
from shadow_twin.simulation.live import LiveSimulation
from shadow_twin.simulation.mobile_base import COMMAND_TIMEOUT


@pytest.fixture
def sim():
    return LiveSimulation(builtin_model_path('mir250'))


def drive(sim, v, omega, seconds, period=0.05):
    """Send (v, omega) every ``period`` s of sim time for ``seconds``."""
    steps = int(round(period / sim.dt))
    for _ in range(int(round(seconds / period))):
        sim.command_base(v, omega)
        sim.step(steps)


def test_geometry_is_read_off_the_model(sim):
    g = sim.base.geometry
    assert g.wheel_radius == pytest.approx(MIR250_WHEEL_RADIUS, abs=1e-6)
    assert g.wheel_separation == pytest.approx(MIR250_WHEEL_SEPARATION, abs=1e-6)


def test_wheels_are_published_but_not_trajectory_joints(sim):
    assert {'left_wheel_joint', 'right_wheel_joint', 'fl_caster_wheel_joint'} <= set(sim.joint_names)
    assert 'left_wheel_joint' not in sim.controlled_joints
    wheel_goal = JointTrajectory(['left_wheel_joint'], np.array([1.0]), np.array([[1.0]]))
    with pytest.raises(TrajectoryError, match='left_wheel_joint'):
        sim.set_trajectory(wheel_goal)


def test_forward_and_turning_commands_give_that_twist(sim):
    drive(sim, 0.5, 0.0, 2.0)
    odom = sim.base_odometry()
    assert odom.twist.v == pytest.approx(0.5, rel=0.02)
    assert abs(odom.pose.y) < 1e-3 and abs(odom.pose.yaw) < 1e-3 and abs(odom.lateral) < 1e-3
    assert 0.85 < odom.pose.x < 1.0                      # 2 s at 0.5 m/s less the spin-up
    x = odom.pose.x
    drive(sim, 0.0, 0.5, 2.0)
    odom = sim.base_odometry()
    assert odom.twist.omega == pytest.approx(0.5, rel=0.02)
    assert abs(odom.pose.x - x) < 0.05                   # turned on the spot (it was rolling at 0.5 m/s)
    assert 0.8 < odom.pose.yaw < 1.0


def test_a_stale_command_stops_the_base(sim):
    sim.command_base(1.0, 0.0)
    sim.step(int(round((COMMAND_TIMEOUT + 1.0) / sim.dt)))
    odom = sim.base_odometry()
    assert abs(odom.twist.v) < 1e-3
    assert odom.pose.x == pytest.approx(COMMAND_TIMEOUT * 1.0, abs=0.1)   # moved only while it was fresh


def test_commands_are_saturated_keeping_the_curvature(sim):
    v, omega = sim.command_base(4.0, 2.0)
    assert v + omega * MIR250_WHEEL_SEPARATION / 2 == pytest.approx(2.0)   # the outer wheel's rim at 2 m/s
    assert omega / v == pytest.approx(0.5)
    assert sim.command_base(math.nan, 0.0) == (0.0, 0.0)


def test_reload_keeps_the_base_where_it_is(sim):
    drive(sim, 0.5, 0.2, 1.0)
    before = sim.base_odometry()
    sim.command_base(0.5, 0.2)
    sim.reload()
    after = sim.base_odometry()
    np.testing.assert_allclose(after.position, before.position, atol=1e-9)
    assert after.twist.v == pytest.approx(before.twist.v, abs=1e-9)
    sim.step(10)
    assert sim.base_odometry().twist.v > 0.4                 # the command stayed in force


def test_a_model_without_a_base_has_none():
    hand = LiveSimulation()
    assert hand.base is None and hand.base_odometry() is None
    with pytest.raises(ConfigError, match='no mobile base'):
        hand.command_base(0.1, 0.0)
