"""Coulomb friction with memory: the presliding (Dahl) state of each joint.

A drive's Coulomb friction does not switch with the sign of the velocity. After a reversal it
builds up over a small travel, and at rest it keeps what the last motion left (the current of a
standing UR holds the static friction of its last move). Dahl's model (P. R. Dahl, *A solid
friction model*, The Aerospace Corporation TOR-158(3107-18), 1968) with exponent 1 gives the
friction as ``fc * s``, with the state ``s`` in [-1, 1] driven by the travel::

    ds/dq = (1 - s sgn(dq)) / d              d: the presliding distance, rad

Over a step of travel ``dq`` in one direction it is solved exactly::

    s_k = sgn(dq) - (sgn(dq) - s_(k-1)) exp(-|dq| / d)

so the state depends on the path, not on the sample rate, and it stays where it is at rest. In a
harmonic drive ``d`` is of the order of 1 mrad (Tjahjowidodo et al., *Friction characterization
and compensation in electro-mechanical systems*, J. Sound Vib. 308, 2007). The term ``fc * s`` is
linear in ``fc``: identification stays linear for a given ``d``.

One implementation for ``shadow-twin identify`` (the regressors, a grid of ``d`` per joint),
``evaluate --effort`` and the monitor's live watch (a :class:`FrictionState` carried from sample to
sample). The state is that of the sample's own position: the effort's delay is the drive's, on the
whole torque (:meth:`shadow_twin.simulation.effort.DriveParameters.measured`).
"""

from __future__ import annotations

import numpy as np

#: rad: the presliding distance where none was identified.
PRESLIDING_DISTANCE = 1e-3
#: rad: the presliding distances ``shadow-twin identify`` tries per joint (the one whose fit of
#: the joint's efforts is best is kept).
PRESLIDING_DISTANCES = tuple(float(d) for d in np.geomspace(1e-4, 1e-2, 9))


def presliding_states(q: np.ndarray, distance, start: np.ndarray | None = None,
                      last_q: np.ndarray | None = None) -> np.ndarray:
    """The friction states along a path.

    Args:
        q: (N, J) positions, rad, in time order (one contiguous motion).
        distance: presliding distance(s), rad > 0: a scalar, (J,), or (J, K) for K candidates per
            joint (the output then has a trailing axis K).
        start: the state before the first sample, broadcastable to the state's shape (default 0:
            unknown, no friction at rest).
        last_q: (J,) the position before the first sample (default: the first sample: its state is
            ``start``).
    Returns:
        (N, J) or (N, J, K) states in [-1, 1].
    Raises:
        ValueError: a distance not > 0, or shapes that do not match.
    """
    q = np.atleast_2d(np.asarray(q, dtype=float))
    d = np.asarray(distance, dtype=float)
    if d.size and not (d > 0).all():
        raise ValueError(f'presliding distance must be > 0, got {d.min():g}')
    wide = d.ndim == 2
    shape = np.broadcast_shapes(q.shape[1:] + ((1,) if wide else ()), d.shape)
    if q.shape[0] == 0:
        return np.zeros((0,) + shape)
    step = np.diff(q, axis=0, prepend=q[:1] if last_q is None else np.asarray(last_q, dtype=float)[None])
    if wide:
        step = step[:, :, None]
    decay = np.exp(-np.abs(step) / d)                  # (N, J[, K])
    target = np.sign(step)
    gain = target * (1.0 - decay)                       # s_k = decay s_(k-1) + gain
    s = np.zeros(shape) if start is None else np.broadcast_to(np.asarray(start, dtype=float), shape).copy()
    out = np.empty((q.shape[0],) + shape)
    moving = step != 0.0
    for k in range(q.shape[0]):
        if moving[k].any():
            s *= decay[k]
            s += gain[k]
        out[k] = s
    return out


class FrictionState:
    """The presliding state of J joints carried along a stream of positions (the live watch).

    The state before the stream is unknown (taken as 0). Dahl's state is linear in its start: the
    true state is the one carried here plus ``unknown`` x the start's, with ``unknown`` the product
    of the decays ``exp(-|dq| / d)`` over the travel since (1 at the start, 0.05 after 3 d). So a
    joint that has stood still since the stream began holds an unknown friction of up to
    ``unknown`` x frictionloss.

    Args:
        distance: (J,) presliding distances, rad > 0.

    Attributes:
        state: (J,) the carried state in [-1, 1].  unknown: (J,) in [0, 1], the weight of the
        unknown start in the true state.  last_q: (J,) rad, the last position, or None.
    """

    def __init__(self, distance: np.ndarray) -> None:
        self.distance = np.asarray(distance, dtype=float)
        self.reset()

    def advance(self, q: np.ndarray) -> np.ndarray:
        """(J,) the state at position ``q`` (J,) rad, reached from the previous one."""
        q = np.asarray(q, dtype=float)
        if self.last_q is not None:
            self.unknown = self.unknown * np.exp(-np.abs(q - self.last_q) / self.distance)
        self.state = presliding_states(q[None], self.distance, self.state, self.last_q)[0]
        self.last_q = q.copy()
        return self.state.copy()

    def reset(self) -> None:
        """Forget the path (a gap in the data): the state is unknown again (0)."""
        self.state = np.zeros(self.distance.shape)
        self.unknown = np.ones(self.distance.shape)
        self.last_q: np.ndarray | None = None
