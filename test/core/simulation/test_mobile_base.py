"""The simulated mobile base (shadow_twin.simulation.mobile_base) inside LiveSimulation:
velocity commands drive the wheels through the diff-drive inverse kinematics, odometry comes
from the free joint, a stale command stops the base, a reload keeps its pose; with a command
latency a stamped command takes effect that long after its stamp."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError, ModelError, TrajectoryError
from shadow_twin.control.diff_drive import MIR250_WHEEL_RADIUS, MIR250_WHEEL_SEPARATION
from shadow_twin.control.trajectory import JointTrajectory
from shadow_twin.model.cell.assembly import LATENCY_NUMERIC
from shadow_twin.model.mjcf import builtin_model_path
from shadow_twin.simulation.live.simulation import LiveSimulation
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


# ------------------------------------------------------------------------- command latency
def mir250_with_latency(path, latency: float):
    """The built-in MiR250 written to ``path`` with a command latency (s; the custom numeric)."""
    spec = mujoco.MjSpec.from_file(str(builtin_model_path('mir250')))
    spec.add_numeric(name=LATENCY_NUMERIC, data=[latency])
    path.write_text(spec.to_xml())
    return path


@pytest.fixture
def late_sim(tmp_path):
    """The MiR250 with a 0.1 s command latency."""
    return LiveSimulation(mir250_with_latency(tmp_path / 'mir250.xml', 0.1))


def test_a_stamped_command_takes_effect_the_latency_after_its_stamp(late_sim):
    late_sim.step(50)                                       # 0.1 s
    late_sim.command_base(0.5, 0.0, sent=0.06)              # sent 40 ms ago: due at 0.16 s
    late_sim.step(29)
    assert late_sim.base.current_command(late_sim.time) == (0.0, 0.0)
    late_sim.step(1)
    assert late_sim.base.current_command(late_sim.time) == (0.5, 0.0)


def test_a_command_later_than_the_latency_takes_effect_when_it_arrives(late_sim):
    late_sim.step(100)                                      # 0.2 s
    assert late_sim.base.late_commands == 0
    late_sim.command_base(0.5, 0.0, sent=0.02)              # 180 ms old: at once
    late_sim.step(1)
    assert late_sim.base.current_command(late_sim.time) == (0.5, 0.0)
    assert late_sim.base.late_commands == 1 and late_sim.base.latest_late == pytest.approx(0.18)   # counted
    late_sim.command_base(0.3, 0.0)                         # unstamped: sent now, due in 0.1 s
    late_sim.step(49)
    assert late_sim.base.current_command(late_sim.time) == (0.5, 0.0)
    late_sim.step(1)
    assert late_sim.base.current_command(late_sim.time) == (0.3, 0.0)
    assert late_sim.base.late_commands == 1                 # that one was on time


def test_a_command_stamped_ahead_of_a_lagging_sim_waits_for_its_time(late_sim):
    late_sim.step(50)                                       # 0.1 s; the stamps' clock is at 0.12 s
    late_sim.command_base(0.5, 0.0, sent=0.12)              # due at 0.22 s
    late_sim.step(59)
    assert late_sim.base.current_command(late_sim.time) == (0.0, 0.0)
    late_sim.step(1)
    assert late_sim.base.current_command(late_sim.time) == (0.5, 0.0)
    late_sim.command_base(0.3, 0.0, sent=late_sim.time + 5.0)    # a clock that does not match: sent now
    late_sim.step(50)
    assert late_sim.base.current_command(late_sim.time) == (0.3, 0.0)


def test_a_late_command_never_undoes_a_newer_one(late_sim):
    late_sim.step(50)
    late_sim.command_base(0.4, 0.0, sent=0.1)               # due at 0.2 s
    late_sim.step(60)                                       # 0.22 s: in force
    late_sim.command_base(0.9, 0.0, sent=0.09)              # sent before it, arrived after
    late_sim.step(5)
    assert late_sim.base.current_command(late_sim.time) == (0.4, 0.0)


def test_commands_superseded_while_paused_are_not_kept(late_sim):
    late_sim.paused = True
    for v in np.linspace(0.1, 0.5, 500):
        late_sim.command_base(v, 0.0)
    assert len(late_sim.base._pending) == 1
    late_sim.paused = False
    late_sim.step(51)
    assert late_sim.base.current_command(late_sim.time) == (pytest.approx(0.5), 0.0)


def test_a_negative_command_latency_is_refused(tmp_path):
    with pytest.raises(ModelError, match='base_command_latency is -0.1'):
        LiveSimulation(mir250_with_latency(tmp_path / 'mir250.xml', -0.1))


# ------------------------------------------------------------------------- the PI velocity loop
def mir250_with_integral(path, ki: float | None):
    """The built-in MiR250 written to ``path`` with the wheel loops' integral gain ``ki`` (N m/rad;
    None: without the integral actuators, a P loop)."""
    spec = mujoco.MjSpec.from_file(str(builtin_model_path('mir250')))
    for side in ('left', 'right'):
        integral = spec.actuator(f'{side}_wheel_integral')
        if ki is None:
            spec.delete(integral)
        else:
            integral.gainprm[0], integral.biasprm[1] = ki, -ki
    path.write_text(spec.to_xml())
    return path


def test_the_integral_holds_a_wheel_commanded_to_stand_against_a_torque(tmp_path):
    turned = {}
    for label, ki in (('P', None), ('PI', 2000.0)):
        sim = LiveSimulation(mir250_with_integral(tmp_path / f'{label}.xml', ki))
        wheel = sim.model.joint('left_wheel_joint').dofadr[0]
        sim.step(int(0.5 / sim.dt))
        start = sim.positions(['left_wheel_joint'])[0]
        sim.data.qfrc_applied[wheel] = 40.0             # N m, a steady disturbance, no command
        sim.step(int(3.0 / sim.dt))
        turned[label] = abs(sim.positions(['left_wheel_joint'])[0] - start)
    # P: the servo yields torque / kv rad/s for as long as the torque lasts; PI: torque / ki rad, then holds
    assert turned['P'] > 0.2
    assert turned['PI'] < 40.0 / 2000.0 * 1.5 and turned['PI'] < turned['P'] / 10


def test_a_placed_wheel_is_held_where_it_is_put_not_where_it_was(tmp_path):
    sim = LiveSimulation(mir250_with_integral(tmp_path / 'pi.xml', 2000.0))
    sim.set_positions({'left_wheel_joint': 50.0})
    act = sim.data.act[sim.model.actuator('left_wheel_integral').actadr[0]]
    assert act == pytest.approx(50.0)                   # the integral starts from the placed angle
    sim.step(int(1.0 / sim.dt))
    assert sim.positions(['left_wheel_joint'])[0] == pytest.approx(50.0, abs=0.01)
    sim.reset()
    assert sim.data.act[sim.model.actuator('left_wheel_integral').actadr[0]] == pytest.approx(
        sim.positions(['left_wheel_joint'])[0])
