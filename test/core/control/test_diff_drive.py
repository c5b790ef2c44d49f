"""Tests of the mobile base's diff-drive kinematics (shadow_twin.control.diff_drive): the MiR250's
geometry, inverse and forward kinematics, speed saturation and the integration of the pose."""

import math

import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.control.diff_drive import (ZERO_TWIST, BodyTwist, DiffDriveGeometry, Pose2D, body_twist,
                                            integrate_pose, limit_wheel_rates, saturate_twist, wheel_rates,
                                            wheel_rates_from_odom_velocity, wrap_angle)


MIR = DiffDriveGeometry()


# ---------------------------------------------------------------------------------------
# Kinematics
# ---------------------------------------------------------------------------------------
def test_mir250_geometry_from_the_study():
    assert MIR.wheel_radius == 0.100 and MIR.wheel_separation == 0.410
    assert MIR.half_track == pytest.approx(0.205)


@pytest.mark.parametrize('field', ['wheel_radius', 'wheel_separation'])
@pytest.mark.parametrize('value', [0.0, -0.1, float('nan'), float('inf'), 'x', True])
def test_geometry_rejects_bad_values(field, value):
    with pytest.raises(ConfigError, match=field):
        DiffDriveGeometry(**{field: value})


def test_inverse_kinematics_is_the_study_formula():
    # omega_left = (v - a omega) / r, omega_right = (v + a omega) / r, a = 0.205 m, r = 0.1 m
    rates = wheel_rates(BodyTwist(0.5, 1.0), MIR)
    assert rates.left == pytest.approx((0.5 - 0.205) / 0.1)
    assert rates.right == pytest.approx((0.5 + 0.205) / 0.1)
    # Eq. 1 as written, from the velocity in odom at heading phi: (1/r)[cos, sin, +/-a].(X', Y', phi')
    phi, x_dot, y_dot, yaw_rate = 0.7, 0.3, -0.2, 0.4
    eq1 = wheel_rates_from_odom_velocity(x_dot, y_dot, yaw_rate, phi, MIR)
    row = np.array([math.cos(phi), math.sin(phi)])
    assert eq1.right == pytest.approx((row @ [x_dot, y_dot] + 0.205 * yaw_rate) / 0.1)
    assert eq1.left == pytest.approx((row @ [x_dot, y_dot] - 0.205 * yaw_rate) / 0.1)


def test_forward_kinematics_inverts_inverse_kinematics():
    rng = np.random.default_rng(0)
    geometry = DiffDriveGeometry(0.0625, 0.445)
    for v, omega in rng.uniform(-2, 2, size=(20, 2)):
        back = body_twist(wheel_rates((v, omega), geometry), geometry)
        assert back == pytest.approx((v, omega))
    assert body_twist((10.0, 10.0), MIR) == pytest.approx((1.0, 0.0))     # straight
    assert body_twist((-5.0, 5.0), MIR) == pytest.approx((0.0, 0.5 / 0.205))  # in place, left


def test_speed_saturation_keeps_the_curvature():
    twist = BodyTwist(3.0, 2.0)   # outer (right) wheel at 3.41 m/s rim speed
    limited = saturate_twist(twist, MIR, max_speed=2.0)
    assert limited.omega / limited.v == pytest.approx(twist.omega / twist.v)
    rates = wheel_rates(limited, MIR)
    assert max(abs(rates.left), abs(rates.right)) * MIR.wheel_radius == pytest.approx(2.0)
    # the yaw-rate limit scales v too
    limited = saturate_twist((0.5, 3.0), MIR, max_speed=2.0, max_yaw_rate=1.5)
    assert limited == pytest.approx((0.25, 1.5))
    # within limits: unchanged; reversing and right turns are limited alike
    assert saturate_twist((0.3, -0.2), MIR) == pytest.approx((0.3, -0.2))
    limited = saturate_twist((-4.0, -1.0), MIR)
    assert limited.omega / limited.v == pytest.approx(0.25) and abs(limited.v) < 2.0
    assert saturate_twist((float('nan'), 0.1), MIR) == ZERO_TWIST
    assert limit_wheel_rates((30.0, -10.0), 20.0) == pytest.approx((20.0, -20.0 / 3))
    assert limit_wheel_rates((float('inf'), 1.0), 20.0) == (0.0, 0.0)


def test_integrate_pose_is_exact_on_arcs():
    # a full circle of radius 0.5 m in 2 pi s returns to the start
    pose = Pose2D(1.0, 2.0, 0.3)
    for _ in range(100):
        pose = integrate_pose(pose, (0.5, 1.0), 2 * math.pi / 100)
    assert pose[:2] == pytest.approx((1.0, 2.0), abs=1e-12)
    assert pose.yaw == pytest.approx(0.3 + 2 * math.pi)
    # a quarter circle in one step: from (0, 0, 0) to (1, 1, pi/2) on radius 1
    assert integrate_pose((0, 0, 0), (1.0, 1.0), math.pi / 2) == pytest.approx((1.0, 1.0, math.pi / 2))
    assert integrate_pose((0, 0, math.pi / 2), (2.0, 0.0), 0.5) == pytest.approx((0.0, 1.0, math.pi / 2))
    assert wrap_angle(3 * math.pi / 2) == pytest.approx(-math.pi / 2)
