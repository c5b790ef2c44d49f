"""The start lead of the goals the calibration node sends to the twin, from what the twin needs.

The twin server declares ``start_lead`` (s) and ``start_lead_per_point`` (s per trajectory point)
(:mod:`shadow_twin.ros.twin.parameters`, config/twin.yaml, config/twin_cell.yaml): the time it
gives itself from an unstamped goal's arrival to the common start, within which every controller
must accept its part. A goal this node stamps ``now + start_lead + start_lead_per_point * points
+ send_margin`` therefore reaches the twin with at least the time the twin would give itself: the
``send_margin`` (this node's parameter) covers the node's own way from stamping to the twin's
receiving the goal (serialising, DDS, a loaded PC).

:class:`TwinLeadReader` reads the two figures from the twin node's parameter services
(``AsyncParameterClient``) when a run starts, so that a twin reconfigured between runs is
followed. When they cannot be read (no twin node of that name answering, an older twin or
another twin implementation without them, a value that is not a number >= 0), the node's own
``start_lead`` parameter is the whole lead, with one warning line naming why.
Called from the run's worker thread while the node's executor spins (waits poll a future).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rcl_interfaces.msg import ParameterType
from rclpy.node import Node
from rclpy.parameter_client import AsyncParameterClient

from shadow_twin.ros.spinning import result_within

#: The twin server's parameters read, in this order: s, s per point.
TWIN_PARAMETERS = ('start_lead', 'start_lead_per_point')


def goal_points(goal) -> int:
    """Points of a ``control_msgs/FollowJointTrajectory`` goal as the twin counts them for its
    lead: those of its ``trajectory`` and of its ``multi_dof_trajectory`` together."""
    return len(goal.trajectory.points) + len(goal.multi_dof_trajectory.points)


@dataclass(frozen=True)
class StartLead:
    """How far ahead of sending a goal its start is stamped: ``base + per_point * points + margin`` s.

    Attributes:
        base: s (the twin's ``start_lead``, or the node's own ``start_lead`` in the fallback).
        per_point: s per trajectory point (the twin's ``start_lead_per_point``; 0 in the fallback).
        margin: s for this node's own send latency (``send_margin``; 0 in the fallback).
        source: where the figures come from, for the log (e.g. "the twin /shadow_twin's parameters").
    """

    base: float
    per_point: float = 0.0
    margin: float = 0.0
    source: str = 'this node\'s start_lead'

    def seconds(self, points: int) -> float:
        """The lead of a goal of ``points`` points, s."""
        return self.base + self.per_point * int(points) + self.margin

    def for_goal(self, goal) -> float:
        """The lead of a FollowJointTrajectory ``goal`` (:func:`goal_points`), s."""
        return self.seconds(goal_points(goal))

    def describe(self) -> str:
        """One line: the rule and where its figures come from."""
        if self.per_point == 0.0 and self.margin == 0.0:
            return f'{self.base:g} s ({self.source})'
        return (f'start_lead {self.base:g} s + start_lead_per_point {self.per_point:g} s x points + send_margin '
                f'{self.margin:g} s ({self.source})')


class TwinLeadReader:
    """Read the twin's lead parameters (see module doc).

    Args:
        node: the owning node (its logger warns about a fallback).
        twin_node: the twin server's node name (e.g. ``/shadow_twin``).
        timeout: wait for the twin's parameter services and for their answer, s, each.
        callback_group: of the parameter client.
    """

    def __init__(self, node: Node, twin_node: str, timeout: float, callback_group=None) -> None:
        self.node = node
        self.twin_node = '/' + twin_node.strip('/')
        self.timeout = timeout
        self.params = AsyncParameterClient(node, self.twin_node, callback_group=callback_group)

    def _twin_values(self) -> tuple[tuple[float, float] | None, str]:
        """((start_lead s, start_lead_per_point s), '') or (None, why they cannot be used)."""
        if not self.params.wait_for_services(timeout_sec=self.timeout):
            return None, f'no parameter services of {self.twin_node} within {self.timeout:g} s'
        answer = result_within(self.params.get_parameters(list(TWIN_PARAMETERS)), self.timeout)
        if answer is None:
            return None, f'{self.twin_node} did not answer get_parameters within {self.timeout:g} s'
        values = []
        for name, value in zip(TWIN_PARAMETERS, answer.values):
            if value.type == ParameterType.PARAMETER_DOUBLE:
                number = value.double_value
            elif value.type == ParameterType.PARAMETER_INTEGER:
                number = float(value.integer_value)
            else:
                return None, f'{self.twin_node} has no numeric parameter {name} (an older or another twin?)'
            if not math.isfinite(number) or number < 0.0:
                return None, f'{self.twin_node}\'s {name} is {number:g}, not a number >= 0'
            values.append(number)
        if len(values) != len(TWIN_PARAMETERS):
            return None, f'{self.twin_node} answered {len(values)} of {len(TWIN_PARAMETERS)} parameters'
        return (values[0], values[1]), ''

    def read(self, fallback: float, margin: float) -> StartLead:
        """The start lead of the goals of a run starting now: from the twin's parameters plus
        ``margin`` s, else ``fallback`` s alone (one warning line says why). Never raises for an
        unreachable twin."""
        values, why = self._twin_values()
        if values is None:
            lead = StartLead(fallback, source='this node\'s start_lead')
            self.node.get_logger().warning(f'start lead: {why}; using this node\'s start_lead {fallback:g} s for '
                                           'every goal of this run')
            return lead
        return StartLead(values[0], values[1], margin, source=f'the twin {self.twin_node}\'s parameters, read now')
