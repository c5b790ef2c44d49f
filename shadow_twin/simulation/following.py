"""Following another robot (:meth:`~shadow_twin.simulation.live.simulation.LiveSimulation.follow`): the
followed state, moved on at its velocity and acceleration for a short while, and joined from where
the sim's target was along a path within the joints' speed and acceleration limits; or a trajectory
the other robot's controller was sent (:class:`FollowedTrajectory`), sampled on its own clock.
Either gives the desired state of its joints at the sim's step times (``at``).

**The join rule** (:func:`follow_target`). Each new state is a *goal*: the other robot's reference
(rad, rad/s), moved on from its stamp. The target the sim's servo tracks is the goal plus a
*correction*, the gap between where the target was when the state arrived and the goal; the
correction closes at a speed of at most ``FOLLOW_GAIN * gap`` and ``sqrt(FOLLOW_JOIN_ACCELERATION *
gap)`` (a ramp down it can brake from), its speed changing at most :data:`FOLLOW_JOIN_ACCELERATION`,
and the target's speed within ``FOLLOW_JOIN_SPEED * FOLLOW_MAX_SPEED`` (or the goal's, if faster). So after a gap of any length, or a
state far from the last, the target neither jumps nor outruns the joints' limits; a gap below
:data:`FOLLOW_JOIN_TOLERANCE` (the few µrad to mrad between consecutive states of a smooth
motion) is closed at once, so a steadily followed robot is tracked exactly as stamped.

**Holding the measured pose.** Where the other robot's measured positions come with its reference
(a JTC's ``feedback``), a slow integral adds ``(measured - sim's position) / FOLLOW_INTEGRAL_TIME``
per second to the goal, within :data:`FOLLOW_INTEGRAL_LIMIT`, while the reference holds still: the sim's servo (a PD loop, with no
integral term) then holds what the real one holds, e.g. the Shadow wrist (p 10 N m/rad), which
sags 51 mrad under the hand's weight in the cell sim while the robot's controller holds it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

#: Longest a followed state is moved on at its velocity and acceleration, s (five periods of a 50 Hz
#: stream); then at the velocity reached until :data:`FOLLOW_COAST`.
FOLLOW_EXTRAPOLATION = 0.1
#: Longest a followed state is moved on at all, s: past it the target brakes to a stop (the followed
#: robot's ``joint_states`` stopped). A source late by more than 0.1 s is common on a loaded 2-core PC
#: (the follower's process or the source's not scheduled, late ticks of 28-114 ms in one live contact
#: run); braking then, at FOLLOW_MAX_ACCELERATION, and rejoining jerked the mock hand's arm (it follows
#: the mock UR5's joint states) enough to shake a held can loose: its tilt 1.5 deg behind for a moment
#: and the grip's efforts 42-49 mN m below the same run's replay. Coasting 0.3 s: docs/benchmarks.md (the contact
#: protocol on the robots).
FOLLOW_COAST = 0.3
#: Fastest a followed target moves, rad/s: the UR5's joint speed limit (pi rad/s, UR5 technical
#: specifications: 180 deg/s for every joint; the Shadow Hand's model gives no limit, so its joints
#: get the same). A followed state far from the target (the first message, a stream that resumes
#: after a stall, a glitch) is joined within it: a mock MiR250 whose 30 kg arm jumped from the rest
#: pose to the mock UR5's start tipped over (2 benchmark runs of 7).
FOLLOW_MAX_SPEED = math.pi
#: A followed state's acceleration comes from the velocities of consecutive states at least this
#: far apart (s), and is clipped to :data:`FOLLOW_MAX_ACCELERATION` (rad/s^2): a mock robot whose
#: process is not scheduled for 40 ms moves its followed arm on that long from the last state it
#: got, and without the acceleration term a swinging elbow's target was 7 mrad off when the next
#: state arrived, a jerk that made a slipping base's path diverge from its replay. The same
#: figure bounds how fast the join's speed changes.
FOLLOW_MIN_INTERVAL = 0.002
FOLLOW_MAX_ACCELERATION = 50.0
#: The join's own figures: its speed changes at most FOLLOW_JOIN_ACCELERATION (rad/s^2), and goal
#: plus join stay within FOLLOW_JOIN_SPEED of FOLLOW_MAX_SPEED (or the goal's own speed, if faster),
#: so that the sim's servo, lagging its target, stays within the limit too (joining 0.6 rad at pi
#: rad/s and 50 rad/s^2, the Shadow hand sim's FFJ3 (p 4 N m/rad) overshot to 3.73 rad/s; at 0.75 pi
#: and 10 rad/s^2, 2.32 rad/s, and WRJ1 1.13 rad/s).
FOLLOW_JOIN_ACCELERATION = 10.0
FOLLOW_JOIN_SPEED = 0.75
#: 1/s: a small gap between the target and the goal closes at this rate (time constant 50 ms;
#: re-planned at each state, stable for states up to 2 / FOLLOW_GAIN = 0.1 s apart).
FOLLOW_GAIN = 20.0
#: rad: a gap at most this large is closed at once (a step the servo takes in its stride: the
#: acceleration term keeps consecutive states of a 0.5 rad swing within 0.5 mrad).
FOLLOW_JOIN_TOLERANCE = 1e-3
#: s: time constant of the integral on (measured - sim) positions; rad: its bound, and the largest
#: error it integrates (a larger one is a motion or a glitch, not a servo's steady offset).
FOLLOW_INTEGRAL_TIME = 1.0
FOLLOW_INTEGRAL_LIMIT = 0.1
#: rad/s: the integral runs only while the followed reference is this slow (it holds a pose): in
#: motion the sim's error is the model's, for shadow mode to show.
FOLLOW_REST_SPEED = 1e-3


@dataclass(frozen=True)
class Followed:
    """The state :meth:`LiveSimulation.follow` tracks, all (K,) over its controller ``columns``:
    the goal's positions (rad, the integral ``bias`` included), velocities (rad/s) and accelerations
    (rad/s^2) at sim time ``since`` (s); the correction (target minus goal) at ``since``, rad,
    its speed then and the speed it ramps to, rad/s; the integral ``bias``, rad."""

    columns: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray
    accelerations: np.ndarray
    since: float
    correction: np.ndarray = None
    correction_speed: np.ndarray = None
    closing_speed: np.ndarray = None
    bias: np.ndarray = None

    def __post_init__(self) -> None:
        zeros = np.zeros(len(self.columns))
        for name in ('correction', 'correction_speed', 'closing_speed', 'bias'):
            if getattr(self, name) is None:
                object.__setattr__(self, name, zeros)

    def at(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(N, K) target positions (rad) and velocities (rad/s) at sim ``times`` (N,), s: the goal
        moved on (or back) at most :data:`FOLLOW_EXTRAPOLATION` s from ``since`` at its velocity and
        acceleration, then at the velocity reached up to :data:`FOLLOW_COAST` s, plus the correction;
        past that the target brakes to a stop at :data:`FOLLOW_MAX_ACCELERATION` (a source gone
        silent leaves the sim standing)."""
        rel = np.asarray(times, dtype=float)[:, None] - self.since
        ahead = np.clip(rel, -FOLLOW_EXTRAPOLATION, FOLLOW_EXTRAPOLATION)
        coast = np.clip(rel - FOLLOW_EXTRAPOLATION, 0.0, FOLLOW_COAST - FOLLOW_EXTRAPOLATION)
        qd = self.velocities + self.accelerations * ahead
        q = self.positions + (self.velocities + 0.5 * self.accelerations * ahead) * ahead + qd * coast
        # the correction: its speed ramps from correction_speed to closing_speed at the acceleration limit
        w0, w1 = self.correction_speed, self.closing_speed
        ramp = np.abs(w1 - w0) / FOLLOW_JOIN_ACCELERATION                     # (K,) s
        sign = np.sign(w1 - w0)
        tau = np.clip(rel, 0.0, FOLLOW_COAST)
        early = np.minimum(tau, ramp)
        c = self.correction + w0 * early + 0.5 * sign * FOLLOW_JOIN_ACCELERATION * early ** 2 \
            + w1 * (tau - early) + w0 * np.minimum(ahead, 0.0)
        w = np.where(tau < ramp, w0 + sign * FOLLOW_JOIN_ACCELERATION * tau, w1)
        closed = c * self.correction <= 0.0                                   # it never overshoots the goal
        c, w = np.where(closed, 0.0, c), np.where(closed, 0.0, w)
        q, qd = q + c, qd + w
        # past the extrapolation the target stops, braking at the acceleration limit; back before it, holds
        stop = np.clip(rel - FOLLOW_COAST, 0.0, np.abs(qd) / FOLLOW_MAX_ACCELERATION)
        q = q + (qd - 0.5 * np.sign(qd) * FOLLOW_MAX_ACCELERATION * stop) * stop
        qd = np.where(rel >= FOLLOW_COAST, qd - np.sign(qd) * FOLLOW_MAX_ACCELERATION * stop, qd)
        return q, np.where(rel <= -FOLLOW_EXTRAPOLATION, 0.0, qd)


@dataclass(frozen=True)
class FollowedTrajectory:
    """A trajectory another robot's controller runs (e.g. one sent on its ``~/joint_trajectory``
    topic), followed on its own clock: (K,) controller ``columns`` of its joints, the
    ``trajectory`` (its ``joint_names`` in the order of ``columns``, its first point at
    ``time_from_start`` 0 where the joints were) and the sim time it started, s. Before the start
    the joints hold its first point, after the end its last, as the JTC holds them."""

    columns: np.ndarray
    trajectory: object              # shadow_twin.control.trajectory.JointTrajectory
    start: float

    def at(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(N, K) positions (rad) and velocities (rad/s) at sim ``times`` (N,), s."""
        rel = np.clip(np.asarray(times, dtype=float) - self.start, 0.0, float(self.trajectory.times[-1]))
        positions, velocities, _ = self.trajectory.sample(rel)
        ended = (np.asarray(times, dtype=float) - self.start) >= float(self.trajectory.times[-1])
        velocities[ended] = 0.0
        return positions, velocities


def closing_speed(gap: np.ndarray, goal_speed: np.ndarray, max_speed: float = FOLLOW_MAX_SPEED) -> np.ndarray:
    """(K,) speed (rad/s) at which a correction closes ``gap`` (K,) (goal minus target, rad) while
    the goal moves at ``goal_speed`` (K,) rad/s: ``FOLLOW_GAIN * gap``, at most
    ``sqrt(FOLLOW_JOIN_ACCELERATION * |gap|)`` (it can brake to 0 at half the join's acceleration by
    the goal) and such that goal plus correction stays within ``FOLLOW_JOIN_SPEED * max_speed`` (or
    the goal's own speed, if faster)."""
    size = np.abs(gap)
    speed = np.sign(gap) * np.minimum(FOLLOW_GAIN * size, np.sqrt(FOLLOW_JOIN_ACCELERATION * size))
    limit = np.maximum(max_speed * FOLLOW_JOIN_SPEED, np.abs(goal_speed))
    return np.clip(goal_speed + speed, -limit, limit) - goal_speed


def follow_target(previous: Followed | None, names: Sequence[str], columns: np.ndarray,
                  positions: Mapping[str, float], velocities: Mapping[str, float] | None, at: float,
                  hold: np.ndarray, measured: Mapping[str, float] | None = None,
                  actual: np.ndarray | None = None) -> Followed:
    """The state to follow after a new one arrives (see :meth:`LiveSimulation.follow` and the
    module's join rule).

    Args:
        previous: the state followed so far, None for none.
        names: the followed ROS joints, (K,); ``columns``: their (K,) controller columns.
        positions: {joint: rad} of the new state; ``velocities``: {joint: rad/s} (None: 0).
        at: the sim time the new state is of, s (its stamp, already mapped to sim time).
        hold: (J,) held positions of the controlled joints, rad: the start when ``previous``
            is None or of other columns.
        measured: {joint: rad}, the other robot's measured positions at ``at`` (None: none; a
            missing joint: none for it); ``actual``: (K,) the sim's positions at ``at``, rad.
            With both, the integral on their difference moves the goal (module doc).
    Returns:
        The new followed state: it starts where ``previous``'s target (or ``hold``) was at
        ``at``, at its speed, and joins the new goal within :data:`FOLLOW_MAX_SPEED` and
        :data:`FOLLOW_MAX_ACCELERATION`, however long since ``previous``.
    """
    rates = velocities or {}
    given = np.clip(np.array([float(rates.get(n, 0.0)) for n in names]), -FOLLOW_MAX_SPEED, FOLLOW_MAX_SPEED)
    acceleration = np.zeros(len(names))
    if previous is not None and np.array_equal(previous.columns, columns):
        elapsed = max(0.0, at - previous.since)
        start, start_speed = (v[0] for v in previous.at(np.array([at])))
        bias = previous.bias
        if FOLLOW_MIN_INTERVAL <= elapsed <= FOLLOW_EXTRAPOLATION:   # from consecutive states
            acceleration = np.clip((given - previous.velocities) / elapsed, -FOLLOW_MAX_ACCELERATION,
                                   FOLLOW_MAX_ACCELERATION)
    else:
        elapsed, start, start_speed = 0.0, hold[columns].copy(), np.zeros(len(names))
        bias = np.zeros(len(names))
    if measured is not None and actual is not None:
        real = np.array([float(measured.get(n, math.nan)) for n in names])
        error = np.nan_to_num(real - np.asarray(actual, dtype=float), nan=0.0)
        error[(np.abs(error) > FOLLOW_INTEGRAL_LIMIT) | (np.abs(given) > FOLLOW_REST_SPEED)] = 0.0
        bias = np.clip(bias + error * min(elapsed, FOLLOW_EXTRAPOLATION) / FOLLOW_INTEGRAL_TIME,
                       -FOLLOW_INTEGRAL_LIMIT, FOLLOW_INTEGRAL_LIMIT)
    goal = np.array([float(positions[n]) for n in names]) + bias
    correction = start - goal
    correction_speed = start_speed - given
    joined = np.abs(correction) <= FOLLOW_JOIN_TOLERANCE
    correction[joined] = 0.0
    correction_speed[joined] = 0.0
    closing = closing_speed(-correction, given)
    return Followed(columns, goal, given, acceleration, at, correction, correction_speed, closing, bias)
