"""Shadow sources: the topics the sim follows in shadow mode, which joints each carries, and which
have gone silent (their joints are then STALE in the twin monitor).

Part of the twin monitor's core (:mod:`shadow_twin.monitoring.joint.error` has the overview). In
shadow mode the sim bridge follows the real controllers' setpoints (``~/controller_state``:
``control_msgs/JointTrajectoryControllerState``; ``~/joint_trajectory``:
``trajectory_msgs/JointTrajectory``), or the robot's joint states, and the base's velocity
commands or odometry. When such a source stops, the sim holds its last setpoint while the robot
may go on: its joints' sim-real comparison means nothing until it flows again.

A source learns its joints from its messages (``joint_names`` or ``name``; a base source
carries :data:`BASE`). Its last time is the newest header stamp (s; a zero stamp, as a
JointTrajectory to start "now" has, counts as the time it arrived), and it is silent when
``now - last > timeout``; one that has sent nothing is silent too (it cannot be known yet which
joints it carries: :meth:`ShadowSources.stale_joints` names it with no joints).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The pseudo-joint a base source (velocity commands, odometry) carries.
BASE = 'base'


@dataclass
class Source:
    """One shadow source: topic, message type (``pkg/msg/Name``, '' until known), joints, last
    time (s) and message count."""

    topic: str
    type: str = ''
    joints: tuple[str, ...] = ()
    last: float | None = None
    messages: int = 0
    _seen: set = field(default_factory=set, repr=False)

    def silent_for(self, now: float) -> float | None:
        """Seconds since the last message at ``now`` (s), None before the first."""
        return None if self.last is None else now - self.last


class ShadowSources:
    """The shadow sources of the monitor.

    Args:
        topics: their topics (repeats and blanks dropped).
        timeout: silent longer than this, s, is stale (attribute).
    Raises:
        ValueError: ``timeout`` not > 0.
    """

    def __init__(self, topics, timeout: float) -> None:
        if not timeout > 0:
            raise ValueError(f'shadow_source_timeout must be > 0 s, got {timeout!r}')
        self.timeout = float(timeout)
        self.sources = {t: Source(t) for t in dict.fromkeys(str(t).strip() for t in topics) if t}

    def __bool__(self) -> bool:
        return bool(self.sources)

    def heard(self, topic: str, stamp: float, joints, arrival: float) -> None:
        """A message on ``topic`` with header stamp ``stamp`` (s; 0: none) carrying ``joints``
        (names, or ``(BASE,)``), received at ``arrival`` (s, the clock of ``now``)."""
        source = self.sources[topic]
        t = stamp if stamp > 0 else arrival
        source.last = t if source.last is None else max(source.last, t)
        source.messages += 1
        new = [j for j in joints if j not in source._seen]
        if new:
            source._seen.update(new)
            source.joints = source.joints + tuple(new)

    def stale(self, now: float) -> list[Source]:
        """The sources silent for more than ``timeout`` s at ``now`` (s), or never heard."""
        return [s for s in self.sources.values() if s.last is None or now - s.last > self.timeout]

    def stale_joints(self, now: float) -> dict[str, str]:
        """{joint: why} for every joint of a stale source (why: ``shadow source /x silent for 2.1 s``
        or ``... sent nothing yet``); :data:`BASE` for a base source."""
        out: dict[str, str] = {}
        for source in self.stale(now):
            why = (f'shadow source {source.topic} sent nothing yet' if source.last is None else
                   f'shadow source {source.topic} silent for {now - source.last:.1f} s')
            for joint in source.joints:
                out.setdefault(joint, why)
        return out
