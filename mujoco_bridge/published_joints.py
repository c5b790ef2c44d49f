"""Which of the sim's joints the bridge publishes on joint_states (its ``published_joints`` globs).

A mock robot whose model carries another robot's joints publishes only its own: the cell's mock hand
simulates the UR5 under it (its arm follows the mock UR5's joint states, so that what the hand holds
feels the arm turn) and publishes the hand's joints alone, as a real hand driver does; the arm's
joint states stay the mock UR5's.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.globs import matches, unmatched


class PublishedJoints:
    """The columns of a joint state that joint_states carries: the joints matching ``globs``.

    Args:
        globs: fnmatch globs of joint (ROS) names; ``['*']`` publishes every joint.
        names: the sim's joint names at start, against which every glob must match one.
    Raises:
        ConfigError: no glob given, or a glob that matches none of ``names`` (one line naming it).
    """

    def __init__(self, globs: Sequence[str], names: Sequence[str]) -> None:
        self.globs = [str(g) for g in globs]
        if not self.globs:
            raise ConfigError("published_joints is empty: give the joints' globs ('*' for all)")
        missing = unmatched(self.globs, list(names))
        if missing:
            raise ConfigError(f'published_joints {missing} match no joint of the model '
                              f'({len(names)} joints, e.g. {list(names)[:3]})')
        self._names: Sequence[str] | None = None
        self._columns = np.zeros(0, dtype=int)
        self.names: list[str] = []
        self.all = self.globs == ['*']

    def columns(self, names: Sequence[str]) -> np.ndarray | None:
        """The indices of ``names`` (a state's joint names, in its order) to publish, computed again only
        when ``names`` is a new sequence (a reload); None when every joint is published."""
        if self.all:
            self.names = list(names)
            return None
        if names is not self._names:
            self._names = names
            self._columns = np.array([k for k, n in enumerate(names) if matches(n, self.globs)], dtype=int)
            self.names = [names[k] for k in self._columns]
        return self._columns
