"""The friction's presliding state (shadow_twin/simulation/friction.py): memory at rest, build-up
over travel after a reversal, independent of the sample rate, and the same streamed as in batch."""

from __future__ import annotations

import numpy as np
import pytest

from shadow_twin.simulation.friction import FrictionState, delayed_positions, presliding_states


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


def test_delayed_positions_look_back_by_the_delay_and_hold_at_the_start():
    t = np.arange(0.0, 0.1, 0.01)
    q = np.column_stack([t, -2.0 * t])
    back = delayed_positions(t, q, np.array([0.004, 0.0]))
    assert back[1:, 0] == pytest.approx(t[1:] - 0.004) and back[0, 0] == 0.0    # held at the first sample
    assert back[:, 1] == pytest.approx(q[:, 1])
    assert delayed_positions(t, q, 0.005, at=t[3:4])[0] == pytest.approx([0.025, -0.05])


def test_a_late_effort_is_fitted_with_its_delay():
    """Friction states of a reversal seen through a 4 ms delay are those of the delayed path; the
    regressors' candidate with that delay reproduces them, the one without does not."""
    from shadow_twin.identification.regressor import EffortRegressor
    from shadow_twin.model.mjcf import TwinModel
    from shadow_twin.model.ur_description import JOINTS
    model = TwinModel('package://shadow_twin/models/ur5.xml').model
    t = np.arange(0.0, 2.0, 0.01)
    q = np.tile(0.2 * np.sin(2.0 * np.pi * t)[:, None], (1, 6))
    regressor = EffortRegressor(model, JOINTS, presliding_distances=(1e-3,), effort_delays=(0.0, 0.004))
    reg = regressor.evaluate(q, q * 0, q * 0, path=q, times=t)
    fine = np.arange(0.0, 2.0, 0.0005)
    truth = presliding_states(np.tile(0.2 * np.sin(2.0 * np.pi * (fine - 0.004))[:, None], (1, 6)), 1e-3)
    seen = np.interp(t, fine, truth[:, 0])
    late, prompt = reg.friction([reg.candidate_of(1e-3, 0.004)] * 6), reg.friction()
    late_error, prompt_error = (np.sqrt(np.mean((s[10:, 0] - seen[10:]) ** 2)) for s in (late, prompt))
    assert late_error < 0.3 * prompt_error, (late_error, prompt_error)
