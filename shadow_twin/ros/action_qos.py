"""The QoS of the twin's action services (goal, result, cancel), servers and clients alike."""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

#: rclpy's default for an action's services is ``qos_profile_services_default``: reliable, KEEP_LAST 10.
#: A reader that keeps 10 holds at most 10 requests (server) or responses (client) not yet taken: a
#: node whose executor is held up for half a second while goals arrive every 50 ms loses the oldest,
#: and the client waits for ever on a goal the server never saw (a preemption-storm test lost 1 of 100
#: on a loaded CI machine). 100 deep: 5 s of a 20 Hz storm. Depth does not enter QoS matching: peers
#: with rclpy's default still connect.
ACTION_SERVICES_QOS = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST,
                                 reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.VOLATILE)


def action_services_qos() -> dict:
    """Keyword arguments giving rclpy's ``ActionServer`` / ``ActionClient`` :data:`ACTION_SERVICES_QOS`
    for the goal, result and cancel services."""
    return {'goal_service_qos_profile': ACTION_SERVICES_QOS,
            'result_service_qos_profile': ACTION_SERVICES_QOS,
            'cancel_service_qos_profile': ACTION_SERVICES_QOS}
