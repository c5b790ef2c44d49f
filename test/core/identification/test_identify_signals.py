"""Pieces of the identification: the payload regressor against MuJoCo, filtering, recordings' cleaning."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from shadow_twin.common.errors import RecordingError
from shadow_twin.identification.excitation import random_coefficients
from shadow_twin.identification.recordings import ColumnMap, clean
from shadow_twin.identification.regressor import EffortRegressor, point_mass_inertia
from shadow_twin.identification.signals import FilterSettings, differentiate
from shadow_twin.model.mjcf import builtin_model_path

JOINTS = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint', 'wrist_2_joint',
          'wrist_3_joint']


def test_payload_regressor_matches_mj_inverse_of_a_model_with_the_payload():
    spec = mujoco.MjSpec.from_file(str(builtin_model_path('ur5')))
    bare = spec.compile()
    site = spec.site('tool0')
    body = spec.body('wrist_3_link').add_body(name='p', pos=site.pos, quat=site.quat)
    mass, com, inertia_com = 1.7, np.array([0.01, -0.02, 0.06]), np.diag([0.002, 0.003, 0.001])
    body.mass, body.ipos = mass, com
    body.fullinertia = [0.002, 0.003, 0.001, 0, 0, 0]
    body.explicitinertial = True
    loaded = spec.compile()
    rng = np.random.default_rng(1)
    q, qd, qdd = rng.uniform(-2, 2, (50, 6)), rng.uniform(-1, 1, (50, 6)), rng.uniform(-3, 3, (50, 6))
    reg = EffortRegressor(bare, JOINTS).evaluate(q, qd, qdd)
    truth = EffortRegressor(loaded, JOINTS).evaluate(q, qd, qdd).tau_links
    pi = np.concatenate([[mass], mass * com, point_mass_inertia(mass, mass * com, inertia_com)])
    assert np.abs(reg.tau_links + reg.payload @ pi - truth).max() < 1e-9
    assert np.abs(truth - reg.tau_links).max() > 1.0     # the payload matters


def test_filtered_differences_recover_a_sine_without_lag():
    t = np.arange(0, 10, 0.01)
    q = np.sin(2 * np.pi * 0.5 * t)[:, None]
    _, qd, qdd = differentiate(t, q, FilterSettings())
    w = 2 * np.pi * 0.5
    inner = slice(50, -50)
    assert np.abs(qd[inner, 0] - w * np.cos(w * t[inner])).max() < 0.01 * w
    assert np.abs(qdd[inner, 0] + w * w * np.sin(w * t[inner])).max() < 0.02 * w * w


def test_clean_drops_nan_clock_jumps_and_counts_them():
    t = np.arange(1000) * 0.01
    q = np.sin(t)[:, None] * np.ones((1, 2))
    e = np.ones_like(q)
    q[10, 0] = np.nan
    t[500] = t[499] - 0.5          # clock going back
    t[700:] += 2.0                 # a gap
    rec = clean('x', 'x', ['a', 'b'], t, q, e, 'A')
    assert rec.dropped['nan_rows'] == 1 and rec.dropped['clock_back_rows'] == 1 and rec.dropped['clock_gaps'] == 1
    assert len(rec.segments) == 2 and rec.times.size == 998
    assert np.all(np.diff(rec.times) > 0)


def test_clean_refuses_a_recording_without_motion():
    t = np.arange(100) * 0.01
    with pytest.raises(RecordingError, match='no usable motion'):
        clean('x', 'x', ['a'], t, np.zeros((100, 1)), np.ones((100, 1)), 'A')


def test_column_map_presets_and_errors(tmp_path):
    rtde = ColumnMap.load('rtde', 6)
    assert rtde.positions[5] == 'actual_q_5' and rtde.efforts[0] == 'actual_current_0'
    path = tmp_path / 'map.yaml'
    path.write_text('time: 0\npositions: [1, 2]\nefforts: [3, 4]\n')
    headerless = ColumnMap.load(path, 2)
    assert not headerless.header and headerless.efforts == (3, 4)
    path.write_text('time: t\npositions: [a]\nefforts: [b, c]\n')
    with pytest.raises(Exception, match='must list 2 columns'):
        ColumnMap.load(path, 2)


def test_excitation_stays_within_its_limits():
    traj = random_coefficients(np.random.default_rng(0), np.zeros(3), 0.5, 1.0)
    q, qd, _ = traj.sample(np.linspace(0, traj.period, 2001))
    assert np.abs(q).max() <= 0.5 + 1e-9 and np.abs(qd).max() <= 1.0 + 1e-9
    assert np.allclose(q[0], q[-1])


def test_headerless_csv_with_an_index_map(tmp_path):
    from shadow_twin.identification.recordings import from_csv
    t = np.arange(400) * 0.01
    q = np.column_stack([np.sin(t), np.cos(t)])
    rows = [f'{a:.4f} {b:.6f} {c:.6f} 0.5 -0.5' for a, b, c in zip(t, q[:, 0], q[:, 1])]
    rows[50] = '0.5 0.1'                                       # cut short
    path = tmp_path / 'log.txt'
    path.write_text('\n'.join(rows) + '\n')
    columns = ColumnMap.from_mapping({'time': 0, 'positions': [1, 2], 'efforts': [3, 4]}, 2)
    rec = from_csv(path, columns, ['a', 'b'])
    assert rec.dropped['cut_rows'] == 1 and rec.times.size == 399
    assert np.allclose(rec.efforts[0], [0.5, -0.5]) and np.allclose(rec.positions[:, 0], np.sin(rec.times), atol=1e-5)
