"""The lag share (shadow_twin.monitoring.lag): a sim that is the robot shifted in time is all lag,
one that moves less far is all model, and a mix is in between."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shadow_twin.monitoring.lag import LagWindow, lag_shares

RATE = 250.0             # Hz, the hand's joint states
T = np.arange(0.0, 2.0, 1.0 / RATE)


def sine(t, freq=1.5, amp=0.4):
    return amp * np.sin(2 * math.pi * freq * t)


def test_a_shifted_sine_is_all_lag_and_the_lag_is_found():
    delay = 0.04                       # the sim 40 ms late: sim(t) = real(t - delay)
    real, sim = sine(T), sine(T - delay)
    (share,) = lag_shares(T, sim, real, max_lag=0.1)
    assert share.share > 0.99
    assert share.lag == pytest.approx(delay, abs=0.5 / RATE)
    assert share.rms > 0.05 and share.rms_shifted < 0.01 * share.rms


def test_a_sim_that_leads_has_a_negative_lag():
    real, sim = sine(T), sine(T + 0.02)
    (share,) = lag_shares(T, sim, real, max_lag=0.1)
    assert share.share > 0.99 and share.lag == pytest.approx(-0.02, abs=0.5 / RATE)


def test_a_scaled_sine_is_all_model():
    real, sim = sine(T), 0.7 * sine(T)
    (share,) = lag_shares(T, sim, real, max_lag=0.1)
    assert share.share < 0.02
    assert share.rms_shifted == pytest.approx(share.rms, rel=0.02)


def test_joints_are_judged_each_on_its_own_and_a_mix_lies_between():
    real = np.stack([sine(T), sine(T), sine(T), np.zeros_like(T)], axis=1)
    sim = np.stack([sine(T - 0.03), 0.8 * sine(T), 0.9 * sine(T - 0.03), np.zeros_like(T)], axis=1)
    shares = lag_shares(T, sim, real, max_lag=0.1)
    assert shares[0].share > 0.99 and shares[1].share < 0.02
    assert 0.2 < shares[2].share < 0.95
    assert math.isnan(shares[3].share) and shares[3].rms == 0.0       # no error: no share


def test_too_few_samples_or_bad_input():
    (share,) = lag_shares(T[:20], sine(T[:20]), sine(T[:20] - 0.01), max_lag=0.1)   # 80 ms < 2 x max_lag
    assert math.isnan(share.share)
    with pytest.raises(ValueError, match='strictly increasing'):
        lag_shares(T[::-1], sine(T), sine(T))
    with pytest.raises(ValueError, match='alike'):
        lag_shares(T, sine(T), sine(T)[:-1])
    with pytest.raises(ValueError, match='max_lag'):
        lag_shares(T, sine(T), sine(T), max_lag=-1.0)


def test_the_window_keeps_its_span_and_uses_the_newest_joints():
    window = LagWindow(window=1.0)
    names = ('rh_FFJ3', 'rh_MFJ3')
    for t in T:
        window.add(t, names, [sine(t), sine(t)], [sine(t - 0.05), 0.5 * sine(t)])
    assert len(window) == pytest.approx(RATE, abs=1)           # one second at 250 Hz
    shares = window.shares(max_lag=0.1)
    assert list(shares) == list(names)
    assert shares['rh_FFJ3'].share > 0.99 and shares['rh_FFJ3'].lag == pytest.approx(0.05, abs=0.005)
    assert shares['rh_MFJ3'].share < 0.02
    window.add(0.5, names, [0.0, 0.0], [0.0, 0.0])             # a stamp back: the stream restarted
    assert len(window) == 1
