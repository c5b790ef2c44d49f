"""The motion capture stand-in (shadow_twin.simulation.objects.motion_capture): frames at its rate,
delivered after its latency, stamped when measured, with noise of the configured size."""

import math

import numpy as np
import pytest

from shadow_twin.common.errors import ConfigError
from shadow_twin.simulation.objects import CaptureConfig, MotionCapture, angle_between

POSE = (np.array([0.1, 0.2, 0.3]), np.array([1.0, 0.0, 0.0, 0.0]))


def run(capture: MotionCapture, dt: float, duration: float, pose=POSE):
    """Measure at every step of ``dt`` s for ``duration`` s; [(delivery time, name, sample)]."""
    out = []
    for k in range(round(duration / dt) + 1):
        now = k * dt
        capture.measure(now, {'can': pose})
        out += [(now, name, sample) for name, sample in capture.delivered(now)]
    return out


def test_frames_at_the_rate_delivered_after_the_latency():
    config = CaptureConfig(rate=100.0, latency=0.005, position_noise=0.0, angle_noise=0.0)
    frames = run(MotionCapture(['can'], config), dt=0.001, duration=1.0)
    stamps = np.array([s.stamp for _, _, s in frames])
    assert np.allclose(np.diff(stamps), 0.01)
    assert len(frames) == 100          # frames at 0, 0.01, ... 0.99 (the last at 1.0 not yet delivered)
    delays = np.array([t - s.stamp for t, _, s in frames])
    assert np.allclose(delays, 0.005)
    assert all(np.allclose(s.position, POSE[0]) for _, _, s in frames)


def test_noise_has_the_configured_size_and_the_seed_repeats_it():
    config = CaptureConfig(rate=100.0, latency=0.0, position_noise=0.0005, angle_noise=0.005)
    frames = run(MotionCapture(['can'], config, seed=3), dt=0.01, duration=20.0)
    errors = np.array([s.position - POSE[0] for _, _, s in frames])
    assert errors.std(axis=0) == pytest.approx([0.0005] * 3, rel=0.1)
    assert abs(errors.mean()) < 1e-4
    angles = np.array([angle_between(s.quat, POSE[1]) for _, _, s in frames])
    # the angle of a rotation vector of 3 N(0, s) components: a Maxwell distribution, mean 2 s sqrt(2/pi)
    assert angles.mean() == pytest.approx(2 * 0.005 * math.sqrt(2 / math.pi), rel=0.1)
    again = run(MotionCapture(['can'], config, seed=3), dt=0.01, duration=20.0)
    assert all(np.array_equal(a[2].position, b[2].position) for a, b in zip(frames, again))


def test_a_slow_caller_gets_one_frame_per_tick_and_an_occluded_object_none():
    capture = MotionCapture(['can', 'ball'], CaptureConfig(rate=100.0, latency=0.0, position_noise=0.0))
    assert capture.measure(0.0, {'can': POSE})
    assert not capture.measure(0.005, {'can': POSE})
    assert capture.measure(0.035, {'can': POSE})           # 3.5 periods later: one frame, not three
    names = [name for name, _ in capture.delivered(0.05)]
    assert names == ['can', 'can']                         # the ball was never seen
    capture.reset()
    assert capture.due(0.0) and capture.delivered(1.0) == []


@pytest.mark.parametrize('field, value', [('rate', 0.0), ('latency', -0.001), ('position_noise', float('nan')),
                                          ('angle_noise', 'x')])
def test_bad_configuration_is_one_line(field, value):
    with pytest.raises(ConfigError) as error:
        CaptureConfig(**{field: value})
    assert '\n' not in str(error.value) and field.split('_')[0] in str(error.value)
