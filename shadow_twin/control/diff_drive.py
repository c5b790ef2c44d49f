"""Differential-drive kinematics of the MiR250 base (ROS-free).

Source: the MiR250 + UR5 digital-twin study (IMECE 2023), Eq. 1, the inverse
kinematics of a differential drive with wheel radius ``r`` and half track ``a``::

    [omega_right]         [cos(phi)  sin(phi)  +a]   [X']
    [omega_left ]  = 1/r  [cos(phi)  sin(phi)  -a] . [Y']
                                                     [phi']

where (X', Y') is the base's velocity in the ``odom`` frame and phi' its yaw rate.
The first two columns project the velocity onto the heading: the forward speed
``v = X' cos(phi) + Y' sin(phi)``; so for a body twist (v, omega)::

    omega_left = (v - a omega) / r,    omega_right = (v + a omega) / r

(a lateral velocity, which a differential drive cannot produce, is dropped). The
forward kinematics invert this: ``v = r (omega_left + omega_right) / 2``,
``omega = r (omega_right - omega_left) / (2 a)``.

Figures of the study's table 1: drive wheels 0.200 m in diameter (r = 0.100 m),
0.410 m apart (a = 0.205 m), top speed 2 m/s.

Conventions (REP 103): x forward, y left, yaw counter-clockwise from the ``odom`` x
axis; a positive yaw rate (left turn) turns the right wheel faster. Units: m, rad,
m/s, rad/s, s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from shadow_twin.common.errors import ConfigError

#: MiR250 drive wheel radius, m (study, table 1: 0.200 m diameter).
MIR250_WHEEL_RADIUS = 0.100
#: MiR250 distance between the drive wheels, m (study, table 1).
MIR250_WHEEL_SEPARATION = 0.410
#: MiR250 top speed, m/s (study, table 1).
MIR250_TOP_SPEED = 2.0


class BodyTwist(NamedTuple):
    """Velocity of the base in its own frame: ``v`` forward, m/s; ``omega`` yaw rate, rad/s
    (the ``linear.x`` and ``angular.z`` of a ``geometry_msgs/Twist``)."""

    v: float
    omega: float


class WheelRates(NamedTuple):
    """Angular velocities of the drive wheels, rad/s (positive drives the base forward)."""

    left: float
    right: float


class Pose2D(NamedTuple):
    """Planar pose in the ``odom`` frame: ``x``, ``y`` m; ``yaw`` rad."""

    x: float
    y: float
    yaw: float


#: The zero twist: what a stopped or cancelled follower commands.
ZERO_TWIST = BodyTwist(0.0, 0.0)


@dataclass(frozen=True)
class DiffDriveGeometry:
    """Geometry of a differential drive.

    Attributes:
        wheel_radius: drive wheel radius r, m (default: MiR250, 0.100 m).
        wheel_separation: distance between the drive wheels' contact points 2a, m
            (default: MiR250, 0.410 m).
    Raises:
        ConfigError: a value that is not a finite number > 0.
    """

    wheel_radius: float = MIR250_WHEEL_RADIUS
    wheel_separation: float = MIR250_WHEEL_SEPARATION

    def __post_init__(self) -> None:
        for name in ('wheel_radius', 'wheel_separation'):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f'diff drive {name} must be a number in m, got {value!r}')
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f'diff drive {name} must be finite and > 0 m, got {value}')
            object.__setattr__(self, name, float(value))

    @property
    def half_track(self) -> float:
        """a = wheel_separation / 2, m (the study's Eq. 1)."""
        return self.wheel_separation / 2.0


def wheel_rates(twist: BodyTwist | tuple[float, float], geometry: DiffDriveGeometry) -> WheelRates:
    """Inverse kinematics: wheel rates (rad/s) for a body twist (v m/s, omega rad/s).

    ``omega_left = (v - a omega) / r``, ``omega_right = (v + a omega) / r`` (study, Eq. 1).
    """
    v, omega = twist
    a, r = geometry.half_track, geometry.wheel_radius
    return WheelRates((v - a * omega) / r, (v + a * omega) / r)


def wheel_rates_from_odom_velocity(x_dot: float, y_dot: float, yaw_rate: float, yaw: float,
                                   geometry: DiffDriveGeometry) -> WheelRates:
    """The study's Eq. 1 as written: wheel rates (rad/s) from the velocity in the ``odom``
    frame (X', Y' m/s; phi' rad/s) at heading ``yaw`` = phi (rad).

    ``omega_{right,left} = (1/r) [cos phi, sin phi, +/-a] . (X', Y', phi')``; the
    lateral part of (X', Y') does not enter (a differential drive cannot move sideways).
    """
    v = x_dot * math.cos(yaw) + y_dot * math.sin(yaw)
    return wheel_rates(BodyTwist(v, yaw_rate), geometry)


def body_twist(rates: WheelRates | tuple[float, float], geometry: DiffDriveGeometry) -> BodyTwist:
    """Forward kinematics: body twist (v m/s, omega rad/s) from wheel rates (left, right) rad/s.

    ``v = r (omega_left + omega_right) / 2``, ``omega = r (omega_right - omega_left) / (2a)``
    (the inverse of :func:`wheel_rates`).
    """
    left, right = rates
    r = geometry.wheel_radius
    return BodyTwist(r * (left + right) / 2.0, r * (right - left) / geometry.wheel_separation)


def limit_wheel_rates(rates: WheelRates | tuple[float, float], max_wheel_rate: float) -> WheelRates:
    """Scale both wheel rates (rad/s) by one factor so that neither exceeds ``max_wheel_rate``
    (rad/s, > 0).

    One common factor keeps the ratio of the wheels and so the path's curvature
    ``omega / v``: the base slows down along the commanded arc instead of turning
    onto another one. Rates within the limit come back unchanged; non-finite rates
    come back as zeros (never command NaN).
    """
    left, right = (float(x) for x in rates)
    if not (math.isfinite(left) and math.isfinite(right)):
        return WheelRates(0.0, 0.0)
    largest = max(abs(left), abs(right))
    if largest <= max_wheel_rate:
        return WheelRates(left, right)
    scale = max_wheel_rate / largest
    return WheelRates(left * scale, right * scale)


def saturate_twist(twist: BodyTwist | tuple[float, float], geometry: DiffDriveGeometry,
                   max_speed: float = MIR250_TOP_SPEED, max_yaw_rate: float = math.inf) -> BodyTwist:
    """Limit a body twist, keeping its curvature.

    Each drive wheel's rim speed is limited to ``max_speed`` (m/s; the top speed,
    default 2 m/s, is the rim speed of both wheels when driving straight), so also
    |v| <= max_speed; and |omega| <= ``max_yaw_rate`` (rad/s). All limits act through
    one common factor on v and omega (:func:`limit_wheel_rates`), which keeps the
    curvature omega / v. A non-finite twist gives :data:`ZERO_TWIST`.

    Returns:
        The limited :class:`BodyTwist` (v m/s, omega rad/s).
    """
    v, omega = (float(x) for x in twist)
    if not (math.isfinite(v) and math.isfinite(omega)):
        return ZERO_TWIST
    if abs(omega) > max_yaw_rate:
        scale = max_yaw_rate / abs(omega)
        v, omega = v * scale, omega * scale
    rates = limit_wheel_rates(wheel_rates(BodyTwist(v, omega), geometry), max_speed / geometry.wheel_radius)
    return body_twist(rates, geometry)


def wrap_angle(angle: float) -> float:
    """``angle`` (rad) wrapped into [-pi, pi): the shortest signed rotation of that size."""
    return (float(angle) + math.pi) % (2.0 * math.pi) - math.pi


def integrate_pose(pose: Pose2D | tuple[float, float, float], twist: BodyTwist | tuple[float, float],
                   dt: float) -> Pose2D:
    """Pose (x m, y m, yaw rad) after driving the body twist (v m/s, omega rad/s) for ``dt`` s.

    Exact for a twist constant over ``dt`` (the base moves on a circular arc of radius
    v / omega; a straight line for omega = 0), so the odometry of a stepped simulation
    has no integration drift of its own. The yaw is not wrapped (it stays continuous);
    wrap it with :func:`wrap_angle` where needed.
    """
    x, y, yaw = (float(p) for p in pose)
    v, omega = (float(t) for t in twist)
    turn = omega * dt
    if abs(turn) < 1e-9:
        # Straight, with the midpoint heading (second order in the tiny turn).
        heading = yaw + turn / 2.0
        return Pose2D(x + v * dt * math.cos(heading), y + v * dt * math.sin(heading), yaw + turn)
    radius = v / omega
    return Pose2D(x + radius * (math.sin(yaw + turn) - math.sin(yaw)),
                  y - radius * (math.cos(yaw + turn) - math.cos(yaw)), yaw + turn)
