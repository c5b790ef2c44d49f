"""shadow_twin.ros.twin.base.driver without processes: the base.* parameters (command latency) and
when an odometry pose counts as measured (its stamp, unless the clocks do not match)."""

from __future__ import annotations

import pytest

pytest.importorskip('rclpy')
pytest.importorskip('nav_msgs.msg')

from shadow_twin.common.errors import ConfigError  # noqa: E402
from shadow_twin.control.diff_drive import Pose2D  # noqa: E402
from shadow_twin.ros.twin.base.driver import OdomSample  # noqa: E402
from shadow_twin.ros.twin.base.settings import BASE_SPECS, read_base_settings  # noqa: E402

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)

DEFAULTS = {spec.name: spec.default for spec in BASE_SPECS}


def test_command_latency_is_read_and_checked():
    assert read_base_settings(DEFAULTS.get).command_latency == 0.0
    settings = read_base_settings({**DEFAULTS, 'base.command_latency': 0.1}.get)
    assert settings.command_latency == 0.1
    spec = next(s for s in BASE_SPECS if s.name == 'base.command_latency')
    assert spec.bounds == (0.0, 1.0) and spec.read_only


def test_a_pose_is_measured_at_its_stamp_unless_the_clocks_do_not_match():
    def sample(stamp: float) -> OdomSample:
        return OdomSample(Pose2D(0.0, 0.0, 0.0), 0.0, 0.0, 0.0, received=50.0, stamp=stamp)
    now_s, now_mono = 1000.0, 50.03                  # it arrived 30 ms ago
    assert sample(999.95).measured_at(now_s, now_mono, 0.5) == 999.95           # 50 ms old: its stamp
    for stamp in (0.0, 1000.2, 990.0):               # unset, in the future, older than the timeout
        assert sample(stamp).measured_at(now_s, now_mono, 0.5) == pytest.approx(999.97)


def test_a_negative_gain_names_its_parameter():
    with pytest.raises(ConfigError, match='base.gains'):
        read_base_settings({**DEFAULTS, 'base.gains.k_x': -1.0}.get)
