"""Fixtures shared by the ROS integration tests of the twin (test/ros)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope='module')
def scenarios():
    """The fault and load scenarios shared with ``benchmarks/faults.py`` (test/fault_scenarios.py)."""
    import fault_scenarios
    return fault_scenarios


@pytest.fixture(scope='module')
def states(ros):
    """Recorders (depth 1000) of /joint_states ('real') and /sim/joint_states ('sim') in this
    module's client; a module may define its own."""
    from sensor_msgs.msg import JointState
    _, client = ros
    return {'real': client.record(JointState, '/joint_states', depth=1000),
            'sim': client.record(JointState, '/sim/joint_states', depth=1000)}
