"""The string parameters of the effort watch and the mock UR's push (YAML mappings in a ROS
string parameter): parsed, and every malformed value one line naming the parameter."""

import numpy as np
import pytest

from mujoco_bridge.effort_output import parse_wrench
from shadow_twin.common.errors import ConfigError
from shadow_twin.ros.monitor.parameters import drive_gains, parse_sigmas

pytestmark = pytest.mark.ros   # rclpy and DDS (setup.cfg)


def test_good_values_parse():
    body, wrench = parse_wrench('{body: forearm_link, force: [0, 30, 0]}')
    assert body == 'forearm_link' and wrench.tolist() == [0, 30, 0, 0, 0, 0]
    assert parse_wrench('') is None and parse_sigmas('  ') == {} and drive_gains('') is None
    assert parse_sigmas("{'wrist_*': 0.1}") == {'wrist_*': 0.1}
    assert drive_gains('{elbow_joint: 13.7}') == {'elbow_joint': 13.7}
    assert isinstance(wrench, np.ndarray)


@pytest.mark.parametrize('parse, text, problem', [
    (parse_wrench, '{body: [', 'external_wrench: malformed YAML'),
    (parse_wrench, '[1, 2]', 'external_wrench: expected {body: NAME'),
    (parse_wrench, '{body: b, force: [1, 2]}', 'external_wrench: force must be 3 finite numbers'),
    (parse_wrench, '{body: b, force: [.nan, 0, 0]}', 'external_wrench: force must be 3 finite numbers'),
    (parse_wrench, '{body: b, push: [1, 0, 0]}', 'external_wrench: expected {body: NAME'),
    (parse_sigmas, 'wrist: [', 'effort.sigma_overrides: malformed YAML'),
    (parse_sigmas, '0.1', 'effort.sigma_overrides: expected {joint glob: sigma}'),
    (drive_gains, '{elbow_joint: -1}', "effort.drive_gains: gain of 'elbow_joint' = -1 must be a number > 0"),
    (drive_gains, '[13]', 'effort.drive_gains: expected {joint glob: N m/A}'),
])
def test_malformed_values_are_one_line_errors(parse, text, problem):
    with pytest.raises(ConfigError) as info:
        parse(text)
    assert str(info.value).startswith(problem) and '\n' not in str(info.value)
