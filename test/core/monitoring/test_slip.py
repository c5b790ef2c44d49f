"""Slip watch and contact agreement (shadow_twin/monitoring/slip.py): debounced on stamps, silent on
a steady hold, robust to bad samples; agreement counted from the definition of a match."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.monitoring.slip import (BAD_SLIP, BAD_STAMP, STAMP_BACK, ContactAgreement, SlipWatch,
                                         contact_agreement)

RATE = 250.0         # Hz, the bridge's publish rate
PERIOD = 1.0 / RATE


def _stamps(seconds: float, start: float = 100.0) -> np.ndarray:
    return start + np.arange(int(round(seconds * RATE))) * PERIOD


@pytest.mark.parametrize('hold', [0.0, 0.02, 0.1])
def test_the_warning_comes_once_the_slip_has_stayed_over_the_threshold_for_hold(hold):
    watch = SlipWatch(threshold=0.01, hold=hold, release=0.2)
    t = _stamps(2.0)
    onset = t[100]
    slip = np.where(t >= onset, 0.03, 0.002)
    events = watch.feed('ff', t, slip, np.ones_like(t, dtype=bool))
    assert len(events) == 1 and events[0].slipping and events[0].label == 'ff'
    first_due = t[t - onset >= hold - 1e-9][0]            # the first sample stamp hold s after the onset
    assert events[0].stamp == first_due and events[0].since == onset and events[0].peak == 0.03
    assert watch.slipping() == ['ff'] and watch.state('ff').slipping


def test_slides_shorter_than_hold_and_slip_out_of_contact_never_warn():
    watch = SlipWatch(threshold=0.01, hold=0.05)
    t = _stamps(4.0)
    burst = (np.floor((t - t[0]) / 0.5) % 2 == 1) & ((t - t[0]) % 0.5 < 0.04)   # 40 ms bursts every second
    slip = np.where(burst, 0.5, 0.0)
    assert watch.feed('ff', t, slip, np.ones_like(t, dtype=bool)) == []
    assert watch.feed('mf', t, np.full_like(t, 0.5), np.zeros_like(t, dtype=bool)) == []   # nothing held
    assert watch.slipping() == []


def test_a_steady_60_s_hold_with_noise_below_the_threshold_is_silent():
    rng = np.random.default_rng(36)
    watch = SlipWatch(threshold=0.01, hold=0.02)
    t = _stamps(60.0)
    slip = np.abs(rng.normal(0.002, 0.002, len(t))).clip(max=0.0099)    # creep and noise, always below
    for label in ('ff', 'mf', 'th'):
        assert watch.feed(label, t, slip, np.ones_like(t, dtype=bool)) == []
    assert {label: s.slipping for label, s in watch.states().items()} == {'ff': False, 'mf': False, 'th': False}
    assert watch.dropped == {}


def test_the_warning_ends_after_release_without_sliding_and_on_a_lost_contact():
    watch = SlipWatch(threshold=0.01, hold=0.02, release=0.1)
    t = _stamps(3.0, start=0.0)
    slip = np.where((t >= 0.5) & (t < 1.0), 0.05, 0.0)
    slip[(t >= 0.7) & (t < 0.76)] = 0.0                   # a 60 ms stick inside the slide: not released
    events = watch.feed('ff', t, slip, np.ones_like(t, dtype=bool))
    assert [e.slipping for e in events] == [True, False]
    assert events[1].since == t[t >= 1.0][0] and events[1].stamp == t[t - 1.0 >= 0.1 - 1e-9][0]
    assert events[1].peak == 0.05
    # slipping again, then the object is dropped: no contact counts as not sliding
    t2 = _stamps(1.0, start=5.0)
    contact = t2 < 5.5
    events = watch.feed('ff', t2, np.full_like(t2, 0.2), contact)
    assert [e.slipping for e in events] == [True, False]
    assert events[1].since == t2[~contact][0] and events[1].stamp - events[1].since == pytest.approx(0.1, abs=PERIOD)


def test_stamps_going_back_and_nan_are_ignored_and_counted():
    watch = SlipWatch(threshold=0.01, hold=0.02)
    assert watch.update('ff', 1.0, 0.05, True) is None
    assert watch.update('ff', 1.0, 0.05, True) is None              # not after: dropped
    assert watch.update('ff', 0.5, 0.05, True) is None              # back: dropped
    assert watch.update('ff', 1.01, math.nan, True) is None         # NaN slip in contact: dropped
    assert watch.update('ff', math.nan, 0.05, True) is None         # NaN stamp: dropped
    assert watch.update('ff', 1.012, -0.1, True) is None            # a negative speed: dropped
    assert watch.update('ff', 1.015, math.nan, False) is None       # no contact: no slip needed, kept
    assert watch.dropped == {STAMP_BACK: 2, BAD_SLIP: 2, BAD_STAMP: 1}
    assert watch.state('ff').stamp == 1.015 and not watch.state('ff').in_contact
    # the dropped samples did not break the debounce: 1.02 .. 1.04 slide, the warning at 1.04
    events = [watch.update('ff', t, 0.05, True) for t in (1.02, 1.03, 1.035, 1.04)]
    assert [e.stamp for e in events if e] == [1.04]


@pytest.mark.parametrize('kwargs, words', [
    ({'threshold': 0.0}, 'slip threshold (m/s) must be a finite number > 0'),
    ({'threshold': math.inf}, 'slip threshold (m/s) must be a finite number > 0'),
    ({'hold': -0.1}, 'slip hold (s) must be a finite number >= 0'),
    ({'release': 'soon'}, 'slip release (s) must be a finite number >= 0'),
])
def test_bad_settings_are_one_clear_line(kwargs, words):
    with pytest.raises(ConfigError) as err:
        SlipWatch(**kwargs)
    assert words in str(err.value) and '\n' not in str(err.value)


# ---------------------------------------------------------------------------------------------
# Contact agreement
# ---------------------------------------------------------------------------------------------

def _grasp(t, on, off):
    return (t >= on) & (t < off)


def test_agreement_counts_the_samples_inside_the_delay_as_disagreeing():
    """Real at 100 Hz, the sim at the same stamps (jittered by 1 ms) touching ``delay`` later and
    letting go ``delay`` later: exactly the real samples in [on, on + delay) and [off, off + delay)
    disagree."""
    rng = np.random.default_rng(1)
    t_real = np.arange(0.0, 5.0, 0.01)
    t_sim = t_real + rng.uniform(-0.001, 0.001, len(t_real))
    on, off, delay = 1.0031, 3.0031, 0.0456
    real = _grasp(t_real, on, off)
    sim = _grasp(t_sim, on + delay, off + delay)
    result = contact_agreement(t_real, real, t_sim, sim, tolerance=0.004)
    inside = np.count_nonzero(_grasp(t_real, on, on + delay) | _grasp(t_real, off, off + delay))
    assert inside == 8                                 # 1.01 .. 1.04 and 3.01 .. 3.04
    assert result.matched == len(t_real) and result.unmatched == 0
    assert result.agreed == len(t_real) - inside and result.fraction == pytest.approx(1 - inside / len(t_real))


def test_agreement_matches_the_nearest_stamp_and_leaves_samples_without_a_partner_unmatched():
    t_real = np.arange(0.0, 2.0, 0.01)                 # 100 Hz
    t_sim = np.arange(0.0, 1.5, 0.004)                 # 250 Hz, stops at 1.5 s
    real = np.ones(len(t_real), dtype=bool)
    sim = np.ones(len(t_sim), dtype=bool)
    result = contact_agreement(t_real, real, t_sim, sim, tolerance=0.02)
    gap = np.count_nonzero(t_real > t_sim[-1] + 0.02)
    assert result.unmatched == gap > 0 and result.matched == len(t_real) - gap and result.fraction == 1.0
    # a one-sample flicker of the sim is seen by the one real sample it is nearest to
    sim[np.argmin(np.abs(t_sim - 0.5))] = False
    assert contact_agreement(t_real, real, t_sim, sim, tolerance=0.02).agreed == len(t_real) - gap - 1
    assert math.isnan(contact_agreement([], [], t_sim, sim, 0.02).fraction)
    with pytest.raises(ValueError, match='non-decreasing'):
        contact_agreement(t_real[::-1], real, t_sim, sim, 0.02)


def test_the_agreement_window_forgets_old_samples_and_drops_stamps_going_back():
    window = ContactAgreement(window=1.0, tolerance=0.005)
    for t in np.arange(0.0, 3.0, 0.01):                # disagree for the first second, then agree
        window.add('real', 'ff', t, True)
        window.add('sim', 'ff', t + 0.001, t >= 1.0)
    result = window.agreement('ff')
    assert result.fraction == 1.0 and result.matched == pytest.approx(100, abs=1)
    assert not window.add('sim', 'ff', 1.5, True) and not window.add('real', 'ff', math.nan, True)
    assert window.dropped == {STAMP_BACK: 1, BAD_STAMP: 1}
    assert window.agreements().keys() == {'ff'} and math.isnan(window.agreement('th').fraction)
    with pytest.raises(ConfigError, match='window'):
        ContactAgreement(window=0.0)
