"""The tracking law of a base trajectory follower: body twist commands from the reference and the
measured pose (:class:`TrackingGains`, :func:`tracking_error`, :func:`tracking_command`), and the
pose a drive with dead time will have when a command acts (:func:`move_on`, :class:`PosePredictor`).
:class:`~shadow_twin.control.base.follower.BaseTrajectoryFollower` runs them (ROS-free).

Tracking law: Kanayama, Kimura, Miyazaki and Noguchi (1990), "A stable tracking
control method for an autonomous mobile robot", Proc. IEEE ICRA, pp. 384-389. With the
reference pose (x_r, y_r, yaw_r) and its forward speed v_r and yaw rate omega_r, and the
error in the robot frame::

    e_x   =  cos(yaw) (x_r - x) + sin(yaw) (y_r - y)     (along the heading, m)
    e_y   = -sin(yaw) (x_r - x) + cos(yaw) (y_r - y)     (to the left, m)
    e_yaw =  wrap(yaw_r - yaw)                           (rad)

the command is::

    v     = v_r cos(e_yaw) + k_x e_x
    omega = omega_r + v_r k_y e_y + (|v_r| k_theta + k_heading) sin(e_yaw)

For v_r >= 0 and k_heading = 0 this is Kanayama's law ``omega = omega_r + v_r (K_y e_y
+ K_theta sin e_yaw)``, locally stable for K_x, K_y, K_theta > 0 and critically damped
in the lateral error for K_theta = 2 sqrt(K_y). Two twin changes: |v_r| in the heading
term keeps that damping when reversing, and the heading gain ``k_heading`` (not scaled
by v_r) still turns the base to the desired yaw where v_r = 0 (turning in place, and
the hold after the end). A lateral error at v_r = 0 cannot be removed by any such
smooth law (Brockett's condition); it shows in the goal tolerance check.

The follower then limits the command (:mod:`.follower`).

Dead time: a drive that takes a command ``command_latency`` s after its stamp (a velocity
controller that buffers its input, as the cell model's ``base.command_latency``) adds that
latency, and the odometry's age, to the loop; with 0.1 s and 80 ms old odometry the lateral
error of a 0.9 m/s arc grew to 0.22 m (cell model, offline). With a latency the follower is a
Smith predictor (Smith 1957, "Closer control of loops with dead time", Chem. Eng. Prog. 53):
it tracks the reference of the time its command takes effect, from the pose predicted for
that time by :class:`PosePredictor` (the measured pose moved on by the unicycle model with the
commands already sent, each from when it takes effect); the tolerances stay checked on the
measured pose.

Units: m, rad, m/s, rad/s, s.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, fields
from typing import Any, NamedTuple, Sequence

from shadow_twin.common.errors import ConfigError
from shadow_twin.control.base.trajectory import BaseSample
from shadow_twin.control.diff_drive import BodyTwist, Pose2D, wrap_angle


def check_non_negative(obj: Any, what: str) -> None:
    """Every field of dataclass ``obj`` as a float; raises ConfigError naming ``what`` and the field for
    a value that is not a finite number >= 0."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f'{what} {f.name} must be a number, got {value!r}')
        if not (math.isfinite(value) and value >= 0):
            raise ConfigError(f'{what} {f.name} must be finite and >= 0, got {value}')
        setattr(obj, f.name, float(value))


@dataclass
class TrackingGains:
    """Gains of the tracking law (module doc), all >= 0.

    Attributes:
        k_x: along-track error -> speed, 1/s (Kanayama's K_x).
        k_y: lateral error -> yaw rate, per unit forward speed, 1/m^2 (K_y).
        k_theta: heading error -> yaw rate, per unit |forward speed|, 1/m (K_theta;
            2 sqrt(k_y) damps the lateral error critically).
        k_heading: heading error -> yaw rate at any speed, 1/s (twin addition).
    Defaults: tuned on a kinematic model with a 20 ms control period and a 50 ms
    velocity lag (test/core/control/test_base_follower.py), and checked not to oscillate with a
    200 ms lag at 1.9 m/s: lateral natural frequency v_r sqrt(k_y) = 3 rad/s at 1 m/s,
    critically damped (k_theta = 2 sqrt(k_y)). Kanayama et al.'s example gains (K_y =
    64 1/m^2, K_theta = 16 1/m) oscillate with such lags at MiR speeds.
    Raises:
        ConfigError: a value that is not a finite number >= 0.
    """

    k_x: float = 2.0
    k_y: float = 9.0
    k_theta: float = 6.0
    k_heading: float = 1.5

    def __post_init__(self) -> None:
        check_non_negative(self, 'tracking gain')


class TrackingError(NamedTuple):
    """Reference pose minus measured pose, in the robot frame (module doc).

    ``along`` m (e_x, positive: the reference is ahead), ``lateral`` m (e_y, positive:
    the reference is to the left), ``yaw`` rad (e_yaw, wrapped into [-pi, pi)).
    """

    along: float
    lateral: float
    yaw: float

    @property
    def position(self) -> float:
        """Distance between reference and measured position, m."""
        return math.hypot(self.along, self.lateral)


def tracking_error(reference: Sequence[float], pose: Sequence[float]) -> TrackingError:
    """Error of ``pose`` (x m, y m, yaw rad) against ``reference`` (x, y, yaw), in the frame of
    ``pose`` (Kanayama et al. 1990, the error posture)."""
    dx, dy = float(reference[0]) - float(pose[0]), float(reference[1]) - float(pose[1])
    cos_yaw, sin_yaw = math.cos(pose[2]), math.sin(pose[2])
    return TrackingError(cos_yaw * dx + sin_yaw * dy, -sin_yaw * dx + cos_yaw * dy,
                         wrap_angle(float(reference[2]) - float(pose[2])))


def tracking_command(reference: BaseSample, error: TrackingError, gains: TrackingGains) -> BodyTwist:
    """The tracking law of the module doc, before limits: (v m/s, omega rad/s) from the
    reference's forward speed and yaw rate (feed-forward) and the error (feedback)."""
    v_ref, omega_ref = float(reference.forward_speed), float(reference.yaw_rate)
    sin_yaw_error = math.sin(error.yaw)
    v = v_ref * math.cos(error.yaw) + gains.k_x * error.along
    omega = (omega_ref + v_ref * gains.k_y * error.lateral
             + (abs(v_ref) * gains.k_theta + gains.k_heading) * sin_yaw_error)
    return BodyTwist(v, omega)


def move_on(pose: Sequence[float], twist: Sequence[float], seconds: float) -> Pose2D:
    """``pose`` (x m, y m, yaw rad) after driving body ``twist`` (v m/s, omega rad/s) for
    ``seconds`` s: the exact unicycle arc (a straight line for omega = 0)."""
    x, y, yaw = (float(v) for v in pose)
    v, omega = float(twist[0]), float(twist[1])
    turn = omega * seconds
    if abs(turn) < 1e-9:
        return Pose2D(x + v * seconds * math.cos(yaw), y + v * seconds * math.sin(yaw), yaw)
    radius = v / omega
    return Pose2D(x + radius * (math.sin(yaw + turn) - math.sin(yaw)),
                  y - radius * (math.cos(yaw + turn) - math.cos(yaw)), yaw + turn)


class PosePredictor:
    """The pose of a base whose drive takes each command ``latency`` s after it was sent (see
    the module doc): the commands sent are kept with the time they take effect, and a measured
    pose is moved on (:func:`move_on`) by the command in force over each part of the interval.
    Before the first command kept, the base moves at the measured velocity given.

    Args:
        latency: s from a command's sending to its effect, >= 0.
    Raises:
        ConfigError: a negative or non-finite latency.
    """

    def __init__(self, latency: float) -> None:
        latency = float(latency)
        if not (math.isfinite(latency) and latency >= 0):
            raise ConfigError(f'command latency must be finite and >= 0 s, got {latency}')
        self.latency = latency
        self._effects: list[float] = []          # when each kept command takes effect, s, increasing
        self._twists: list[BodyTwist] = []

    def sent(self, t: float, twist: BodyTwist | Sequence[float]) -> None:
        """A command ``twist`` (v m/s, omega rad/s) sent at ``t`` (s); it takes effect at
        ``t + latency``. Commands older than the newest in force before ``t - 1 s`` are dropped."""
        effect = float(t) + self.latency
        while self._effects and self._effects[-1] >= effect:      # a clock that went back: start anew
            self._effects.pop()
            self._twists.pop()
        self._effects.append(effect)
        self._twists.append(BodyTwist(float(twist[0]), float(twist[1])))
        keep = bisect.bisect_right(self._effects, float(t) - 1.0) - 1
        if keep > 0:
            del self._effects[:keep], self._twists[:keep]

    def predict(self, pose: Sequence[float], since: float, until: float,
                velocity: Sequence[float] | None = None) -> Pose2D:
        """``pose`` (x m, y m, yaw rad), measured at ``since`` (s), moved on to ``until`` (s)
        by the commands in force in between (``velocity``, the measured (v m/s, omega rad/s),
        before the first kept one; at rest without it)."""
        out = Pose2D(*(float(v) for v in pose))
        t, until = float(since), float(until)
        k = bisect.bisect_right(self._effects, t) - 1
        twist = self._twists[k] if k >= 0 else BodyTwist(*(velocity or (0.0, 0.0))[:2])
        for effect, following in zip(self._effects[k + 1:], self._twists[k + 1:]):
            if effect >= until:
                break
            out, t, twist = move_on(out, twist, effect - t), effect, following
        return move_on(out, twist, until - t) if until > t else out
