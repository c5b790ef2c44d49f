"""Fourier-series excitation trajectories, the standard excitation of arm identification.

Per joint j (Swevers, Ganseman, Tukel, De Schutter & Van Brussel, *Optimal robot excitation
and identification*, IEEE TRA 13(5), 1997, eq. 16)::

    q_j(t) = q0_j + sum_{l=1..L} a_jl / (w_f l) sin(w_f l t) - b_jl / (w_f l) cos(w_f l t)

with w_f = 2 pi f_base: periodic in 1 / f_base, band-limited to L f_base. :func:`random_coefficients`
draws a_jl, b_jl and scales each joint to its amplitude and velocity limits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shadow_twin.common.errors import ConfigError


@dataclass(frozen=True)
class FourierTrajectory:
    """A Fourier-series joint trajectory.

    Attributes:
        q0: (J,) rad, the offsets.
        a, b: (J, L) rad/s, sine and cosine coefficients of the velocity.
        base_hz: f_base, Hz.
    """

    q0: np.ndarray
    a: np.ndarray
    b: np.ndarray
    base_hz: float

    def __post_init__(self) -> None:
        if np.shape(self.a) != np.shape(self.b) or np.shape(self.a)[0] != np.size(self.q0) or self.base_hz <= 0:
            raise ConfigError('Fourier trajectory: q0 (J,), a and b (J, L) and base_hz > 0 needed')

    @property
    def period(self) -> float:
        """s."""
        return 1.0 / self.base_hz

    def sample(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(N, J) positions (rad), velocities (rad/s), accelerations (rad/s^2) at (N,) times (s)."""
        t = np.asarray(times, dtype=float)[:, None, None]
        harmonics = np.arange(1, np.shape(self.a)[1] + 1)
        w = 2 * np.pi * self.base_hz * harmonics                        # (L,)
        a, b = np.asarray(self.a)[None], np.asarray(self.b)[None]      # (1, J, L)
        s, c = np.sin(w * t), np.cos(w * t)
        q = np.asarray(self.q0) + np.sum(a / w * s - b / w * c, axis=2)
        qd = np.sum(a * c + b * s, axis=2)
        qdd = np.sum(-a * w * s + b * w * c, axis=2)
        return q, qd, qdd


def random_coefficients(rng: np.random.Generator, q0, amplitude, velocity, harmonics: int = 5,
                        base_hz: float = 0.1) -> FourierTrajectory:
    """A random Fourier trajectory around ``q0`` (J,) rad whose excursion from q0 stays within
    ``amplitude`` (J,) rad and speed within ``velocity`` (J,) rad/s (scaled by the bound
    sum |a_jl| + |b_jl| of both, so every instant is within them)."""
    q0 = np.asarray(q0, dtype=float)
    nj = q0.size
    amplitude = np.broadcast_to(np.asarray(amplitude, dtype=float), (nj,))
    velocity = np.broadcast_to(np.asarray(velocity, dtype=float), (nj,))
    a = rng.uniform(-1, 1, (nj, harmonics))
    b = rng.uniform(-1, 1, (nj, harmonics))
    w = 2 * np.pi * base_hz * np.arange(1, harmonics + 1)
    pos_bound = np.sum((np.abs(a) + np.abs(b)) / w, axis=1)
    vel_bound = np.sum(np.abs(a) + np.abs(b), axis=1)
    scale = np.minimum(amplitude / pos_bound, velocity / vel_bound)[:, None]
    return FourierTrajectory(q0, a * scale, b * scale, base_hz)
