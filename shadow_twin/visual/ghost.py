"""The real robots' ghost and the sim at one instant, from the twin monitor's time-aligned comparisons: what
the monitor draws as ``real/<body>`` and colours by each link's sim-real error.

The monitor compares each real joint-state stream with the sim interpolated at the real sample's stamp
(:class:`~shadow_twin.monitoring.sim_real_monitor.SimRealMonitor`); the ghost takes, per stream, the newest
compared real sample (its joints as the robot reported them) and the sim there (real + the compared error),
and the base's newest real odometry pose with the sim's pose interpolated at its stamp
(:class:`~shadow_twin.monitoring.base_error.BaseMonitor`). So a link's colour is the error at one instant,
never a real sample against a sim sample a publication period apart (at 1 rad/s, 8 ms apart are 8 mrad).

Units: rad, m, s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shadow_twin.monitoring.base_error import BaseMonitor
from shadow_twin.monitoring.joint.samples import positions_of
from shadow_twin.monitoring.sim_real_monitor import SimRealMonitor


@dataclass(frozen=True)
class GhostState:
    """The robots and the sim at the newest comparison: ``real`` and ``sim`` {joint: rad}; ``real_base`` and
    ``sim_base`` (x m, y m, yaw rad) in the odometry frame, or None without a base comparison; ``t`` (s) and
    ``stamp`` (the message stamp object) of the newest real sample used."""

    t: float
    stamp: Any
    real: dict[str, float] = field(default_factory=dict)
    sim: dict[str, float] = field(default_factory=dict)
    real_base: tuple[float, float, float] | None = None
    sim_base: tuple[float, float, float] | None = None


def ghost_state(joints: SimRealMonitor, base: BaseMonitor | None = None) -> GhostState | None:
    """The newest :class:`GhostState` of the monitor's comparisons (module doc), or None before the first."""
    real: dict[str, float] = {}
    sim: dict[str, float] = {}
    newest, stamp = None, None
    for stream in joints.streams:
        error = stream.latest_error
        if error is None or not error.names:
            continue
        sample = stream.history.at(error.t)
        if sample is None:               # gone from the history (a stream restarted)
            continue
        positions = positions_of(sample, error.names)
        for name, q, e in zip(error.names, positions.tolist(), error.position.tolist()):
            real.setdefault(name, q)
            sim.setdefault(name, q + e)
        if newest is None or error.t > newest:
            newest, stamp = error.t, error.stamp
    real_base = sim_base = None
    if base is not None:
        pose = base.real.latest()
        other = None if pose is None else base.sim.at(pose.t, base.max_gap)
        if other is not None:
            real_base, sim_base = (pose.x, pose.y, pose.yaw), (other.x, other.y, other.yaw)
            if newest is None or pose.t > newest:
                newest, stamp = pose.t, pose.stamp
    if newest is None:
        return None
    return GhostState(newest, stamp, real, sim, real_base, sim_base)
