"""Zero-phase filtered central differences: velocities and accelerations from sampled positions.

Positions are low-pass filtered forwards and backwards (``scipy.signal.butter`` +
``scipy.signal.filtfilt``: no phase lag, the magnitude response squared), then differentiated
twice by central differences on the actual sample times (``numpy.gradient``, second order
inside, first order at the ends). This is the standard preprocessing of arm identification
(Gautier, *Dynamic identification of robots with power model*, ICRA 1997; Swevers et al.,
*Optimal robot excitation and identification*, IEEE TRA 13(5), 1997): the cut-off sits well
above the excitation's bandwidth (a few Hz) and well below the noise.

The measured efforts are fitted raw, not through the same filter ("parallel filtering", Gautier
1997): the Coulomb friction is a nonlinear function of the velocity, and a filtered sign of
the velocity is not the sign of the filtered velocity (on the mock UR, filtering the efforts
biased the friction and armature by 10-50 %). Noise on the efforts is output noise, which least
squares averages out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import scipy.signal

from shadow_twin.common.errors import ConfigError

#: The lowest cut-off a user may ask for, as a fraction of the sample rate (0.5 Hz at 100 Hz): below
#: it the filter flattens the excitation itself (a few Hz) and its coefficients lose their precision.
MIN_CUTOFF_FRACTION = 0.005


@dataclass(frozen=True)
class FilterSettings:
    """Butterworth low-pass applied forwards and backwards.

    Attributes:
        cutoff_hz: cut-off frequency, Hz (lowered to ``max_fraction`` of the sample rate
            where the rate is too low for it).
        order: filter order (the zero-phase filter has twice this order).
        max_fraction: largest cut-off as a fraction of the sample rate (< 0.5, Nyquist).
    """

    cutoff_hz: float = 10.0
    order: int = 4
    max_fraction: float = 0.4

    def __post_init__(self) -> None:
        if not (np.isfinite(self.cutoff_hz) and self.cutoff_hz > 0):
            raise ConfigError(f'filter cut-off {self.cutoff_hz!r} Hz must be a positive number')
        if not 1 <= int(self.order) <= 8:
            raise ConfigError(f'filter order {self.order!r} must be 1..8')
        if not 0 < self.max_fraction < 0.5:
            raise ConfigError(f'max_fraction {self.max_fraction!r} must be in (0, 0.5)')

    def check_rate(self, rate_hz: float, source: str) -> None:
        """Refuse a cut-off asked for (``--cutoff``) that is meaningless at ``rate_hz`` samples/s.

        Raises:
            ConfigError: ``cutoff_hz`` below :data:`MIN_CUTOFF_FRACTION` of the rate or at or above
                its Nyquist frequency (half the rate), the allowed range in Hz named.
        """
        low, nyquist = MIN_CUTOFF_FRACTION * rate_hz, 0.5 * rate_hz
        if not low * (1 - 1e-9) <= self.cutoff_hz < nyquist:
            raise ConfigError(f'--cutoff {self.cutoff_hz:g} Hz is outside the usable range for the {rate_hz:.4g} Hz '
                              f'samples of {source}: {low:.3g} Hz <= cutoff < {nyquist:.4g} Hz (the Nyquist '
                              f'frequency; at least {MIN_CUTOFF_FRACTION:g} of the sample rate)')

    def cutoff_for(self, rate_hz: float) -> float:
        """The cut-off used at ``rate_hz`` samples per second, Hz."""
        return float(min(self.cutoff_hz, self.max_fraction * rate_hz))

    def padlen(self) -> int:
        """Samples ``filtfilt`` pads each end with; a segment needs more than this."""
        return 3 * (int(self.order) + 1)

    def to_dict(self, rate_hz: float | None = None) -> dict:
        """JSON-ready, with the method and (given the rate) the cut-off actually used."""
        out = {'method': 'butterworth low-pass, scipy.signal.filtfilt (zero phase); central differences '
                         '(numpy.gradient) on the sample times', **asdict(self)}
        if rate_hz is not None:
            out.update(sample_rate_hz=float(rate_hz), cutoff_used_hz=self.cutoff_for(rate_hz))
        return out


def lowpass(values: np.ndarray, rate_hz: float, settings: FilterSettings) -> np.ndarray:
    """(N, ...) ``values`` filtered along axis 0 (zero phase) at ``rate_hz`` samples/s.

    Raises:
        ValueError: fewer samples than the filter's padding needs (``settings.padlen()``).
    """
    values = np.asarray(values, dtype=float)
    if values.shape[0] <= settings.padlen():
        raise ValueError(f'{values.shape[0]} samples: the filter needs more than {settings.padlen()}')
    b, a = scipy.signal.butter(int(settings.order), settings.cutoff_for(rate_hz), fs=rate_hz)
    return scipy.signal.filtfilt(b, a, values, axis=0, padlen=settings.padlen())


def differentiate(times: np.ndarray, positions: np.ndarray, settings: FilterSettings
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Filtered positions (rad), velocities (rad/s), accelerations (rad/s^2), each (N, J), of one
    contiguous segment: (N,) times (s, increasing) and (N, J) positions (rad)."""
    times = np.asarray(times, dtype=float)
    q = lowpass(positions, sample_rate(times), settings)
    qd = np.gradient(q, times, axis=0)
    qdd = np.gradient(qd, times, axis=0)
    return q, qd, qdd


def sample_rate(times: np.ndarray) -> float:
    """Samples per second from the median step of (N,) increasing times (s)."""
    steps = np.diff(np.asarray(times, dtype=float))
    return float(1.0 / np.median(steps)) if steps.size else 0.0
