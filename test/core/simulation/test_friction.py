"""The friction's presliding state (shadow_twin/simulation/friction.py): memory at rest, build-up
over travel after a reversal, independent of the sample rate, and the same streamed as in batch."""

from __future__ import annotations

import numpy as np
import pytest

from shadow_twin.common.interpolation import shifted
from shadow_twin.simulation.effort import EFFORT_DELAYS
from shadow_twin.simulation.friction import FrictionState, presliding_states


def _path(rate_hz: float) -> tuple[np.ndarray, np.ndarray]:
    """Out by 0.1 rad, back by 0.003 rad, then at rest: (N,) s, (N, 1) rad."""
    t = np.arange(0.0, 3.0, 1.0 / rate_hz)
    q = np.where(t < 1.0, 0.1 * t, np.where(t < 1.3, 0.1 - 0.01 * (t - 1.0), 0.097))
    return t, q[:, None]


def test_the_state_holds_at_rest_and_builds_up_over_travel_after_a_reversal():
    d = 1e-3
    t, q = _path(1000.0)
    s = presliding_states(q, d)[:, 0]
    assert s[0] == 0.0                                     # unknown before any motion
    assert s[t < 1.0][-1] == pytest.approx(1.0, abs=1e-6)  # 0.1 rad forward: saturated
    back = q[:, 0] >= 0.1 - d                              # the first 1 mrad of the way back
    reversed_ = (t > 1.0) & back
    # after 1 mrad (one presliding distance) of travel back: -1 + 2 exp(-1)
    assert s[reversed_][-1] == pytest.approx(-1.0 + 2.0 * np.exp(-1.0), abs=0.02)
    assert s[t > 1.4] == pytest.approx(s[t > 1.31][0], abs=1e-12)          # rest keeps the last value
    assert s[t > 1.4][0] == pytest.approx(-1.0 + 2.0 * np.exp(-3.0), abs=0.01)    # 3 mrad (3 d) back


def test_the_state_depends_on_the_path_not_the_sample_rate():
    fast = presliding_states(_path(1000.0)[1], 2e-3)
    t_fast = _path(1000.0)[0]
    t_slow, q_slow = _path(100.0)
    slow = presliding_states(q_slow, 2e-3)
    assert np.interp(t_slow, t_fast, fast[:, 0]) == pytest.approx(slow[:, 0], abs=1e-6)


def test_streamed_equals_batch_and_candidates_broadcast():
    _, q = _path(200.0)
    q = np.hstack([q, -2.0 * q])
    distances = np.array([1e-3, 5e-3])
    batch = presliding_states(q, distances)
    state = FrictionState(distances)
    streamed = np.array([state.advance(row) for row in q])
    assert streamed == pytest.approx(batch, abs=1e-12)
    wide = presliding_states(q, np.array([[1e-3, 4e-3], [5e-3, 1e-2]]))
    assert wide.shape == (q.shape[0], 2, 2)
    assert wide[:, 0, 0] == pytest.approx(batch[:, 0]) and wide[:, 1, 0] == pytest.approx(batch[:, 1])
    state.reset()
    assert state.advance(q[-1]).tolist() == [0.0, 0.0]


def test_a_distance_not_above_zero_is_refused():
    with pytest.raises(ValueError, match='must be > 0'):
        presliding_states(np.zeros((3, 1)), 0.0)


def test_shifted_reads_each_column_its_shift_later_and_holds_at_the_ends():
    t = np.arange(0.0, 0.1, 0.01)
    v = np.column_stack([t, -2.0 * t])
    back = shifted(t, v, np.array([-0.004, 0.0]))
    assert back[1:, 0] == pytest.approx(t[1:] - 0.004) and back[0, 0] == 0.0    # held at the first sample
    assert back[:, 1] == pytest.approx(v[:, 1])
    ahead = shifted(t, v, 0.005, at=t[[3, -1]])
    assert ahead[0] == pytest.approx([0.035, -0.07]) and ahead[1] == pytest.approx(v[-1])   # held at the last


def _motion(t: np.ndarray):
    """A swing of every joint, (N, 6) rad, rad/s, rad/s^2 at the times ``t`` (s)."""
    f, phase = np.array([0.4, 0.3, 0.5, 0.7, 0.6, 0.8]), np.arange(6.0)
    w = 2.0 * np.pi * f
    arg = w * t[:, None] + phase
    return 0.4 * np.sin(arg), 0.4 * w * np.cos(arg), -0.4 * w * w * np.sin(arg)


def test_a_late_effort_is_fitted_with_its_delay():
    """Currents measured 4 ms late (each sample the current of the torque 4 ms before it) along a
    swing, with noise: the fit picks 4 ms among its candidate delays for every joint, its residual
    is the noise's, below that of the same fit told there is no delay; the same swing measured
    without delay is fitted with none (the measurement is never shifted: interpolating it would
    average its noise, a smaller residual a fit would take for a better model)."""
    from shadow_twin.identification.fit import DynamicsParameters, solve
    from shadow_twin.identification.regressor import EffortRegressor
    from shadow_twin.model.mjcf import TwinModel
    from shadow_twin.model.ur.description import JOINTS
    model = TwinModel('package://shadow_twin/models/ur5.xml').model
    t = np.arange(0.0, 8.0, 0.01)
    regressor = EffortRegressor(model, JOINTS, presliding_distances=(1e-3,))
    truth = DynamicsParameters(list(JOINTS), 'A', np.array([13.0, 13.0, 13.0, 9.0, 9.0, 9.0]), np.full(6, 0.1),
                               np.full(6, 2.0), np.array([8.0, 8.0, 6.0, 2.0, 2.0, 2.0]), np.full(6, 0.05))
    reg = regressor.evaluate(*_motion(t), times=t)
    noise = np.random.default_rng(3).normal(0.0, 0.02, (t.size, 6))
    start = slice(5, None)         # the friction's state is unknown (0) at the first sample: it builds up
    late = truth.predict(regressor.evaluate(*_motion(t - 0.004))) + noise
    fitted = solve(reg.take(start), late[start], JOINTS, 'A', payload=False, delays=EFFORT_DELAYS)
    assert fitted.parameters.effort_delay == pytest.approx([0.004] * 6)
    assert fitted.fit_sigma == pytest.approx(np.full(6, 0.02), rel=0.1)
    prompt = solve(reg.take(start), late[start], JOINTS, 'A', payload=False)
    assert (fitted.fit_sigma < prompt.fit_sigma).all(), (fitted.fit_sigma, prompt.fit_sigma)
    on_time = truth.predict(reg) + noise
    fitted = solve(reg.take(start), on_time[start], JOINTS, 'A', payload=False, delays=EFFORT_DELAYS)
    assert fitted.parameters.effort_delay == pytest.approx(np.zeros(6)), fitted.parameters.effort_delay
