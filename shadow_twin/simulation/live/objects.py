"""Objects that follow the real world in a live simulation: a mixin of
:class:`~shadow_twin.simulation.live.simulation.LiveSimulation` around
:class:`shadow_twin.simulation.objects.ObjectFollower`.

The objects followed are named when the simulation is built (``followed``: free objects of its
scene); the reloader adds their mocap targets and welds to every model it builds
(:func:`shadow_twin.simulation.objects.add_following`), so a reload, a spawn or a delete keeps them
(a deleted object stops being followed). Each physics step first sets the welds and targets from the
poses offered (:meth:`ObjectFollowingCommands.offer_object_pose`, stamps in sim time); a reset
re-engages them with a join from where the objects are put back. The follower's warnings (a source gone
silent) are queued, at most :data:`MAX_WARNINGS` of them, for the caller to log off the stepping thread
(:meth:`ObjectFollowingCommands.take_object_warnings`).
"""

from __future__ import annotations

from collections import deque

from shadow_twin.common.errors import ConfigError
from shadow_twin.simulation.objects import ObjectFollower, Verdict, followed_objects

#: The most warnings kept until :meth:`ObjectFollowingCommands.take_object_warnings` (the oldest go first):
#: each source says each kind of problem once until it is good again, so this is only reached when nobody
#: takes them.
MAX_WARNINGS = 64


class ObjectFollowingCommands:
    """Pose sources of the followed objects (mixin of ``LiveSimulation``: ``lock``, ``model``, ``data``,
    ``time``). :attr:`objects` is the follower, None while no object is followed."""

    objects: ObjectFollower | None = None
    _object_warnings: deque | None = None
    _object_sources: dict | None = None

    def _index_objects(self) -> None:
        """Follow the followed objects of the (new) model; their gates and tracks are kept by name."""
        if not followed_objects(self.model):
            self.objects = None
        elif self.objects is None:
            self.objects = ObjectFollower(self.model, sources=self._object_sources)
        else:
            self.objects.rebind(self.model)

    def _follow_objects(self) -> None:
        """Set the welds and targets for the next physics step (lock held)."""
        if self.objects is not None:
            warnings = self.objects.update(self.data, self.data.time)
            if warnings:
                if self._object_warnings is None:
                    self._object_warnings = deque(maxlen=MAX_WARNINGS)
                self._object_warnings.extend(warnings)

    def take_object_warnings(self) -> list[str]:
        """The followed objects' one-line warnings (a source gone silent) since the last call, oldest
        first, each once; at most :data:`MAX_WARNINGS` (older ones are lost)."""
        with self.lock:
            queued, self._object_warnings = self._object_warnings, None
        return list(queued or ())

    def name_object_sources(self, sources: dict[str, str]) -> None:
        """Name the followed objects' sources in their warnings and verdicts: {object: name}, e.g.
        ``'can (/mocap/can/pose)'``; an object not named is its own name."""
        with self.lock:
            self._object_sources = dict(sources)
            if self.objects is not None:
                self.objects.sources = dict(sources)
                for name in self.objects.names:
                    self.objects.gate(name).source = sources.get(name, name)

    def _rejoin_objects(self) -> None:
        """After a reset: re-engage every weld with a join from where its object is put back."""
        if self.objects is not None:
            self.objects.rejoin()

    def offer_object_pose(self, name: str, stamp: float, position, quat) -> Verdict:
        """A pose of followed object ``name`` from its source: ``stamp`` (sim time, s), ``position`` (3,) m
        and ``quat`` (4,) w x y z in the world frame; judged by its gate (never raises for what the sample
        holds: the verdict says why it was dropped, log its message when ``report``).
        Raises ConfigError: ``name`` is not followed."""
        with self.lock:
            if self.objects is None:
                raise ConfigError(f'object {name!r} is not followed: no object of the simulation is')
            return self.objects.offer(name, stamp, position, quat, float(self.data.time))

    def object_errors(self) -> dict[str, tuple[float, float] | None]:
        """{followed object: (position error m, angle error rad) of the sim against its source now, or
        None while the source is silent}."""
        with self.lock:
            return {} if self.objects is None else self.objects.errors(self.data, float(self.data.time))

