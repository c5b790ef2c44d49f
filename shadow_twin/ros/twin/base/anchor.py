"""Re-anchoring the sim base to the real one: the two bases part, nothing else brings them together.

Each base follows a goal in its own odometry frame from where it stands. Once the sim base
and the real base are apart (a sim reset or reload puts the sim base back at its keyframe, a
respawned MiR bridge starts at its origin, a run ends a few cm differently), a goal would
send the sim base at speed to cover the standing offset. :class:`BaseAnchor` puts the sim
base where the real base's odometry says it is, through the sim bridge's
``~/set_entity_state`` (``simulation_interfaces/srv/SetEntityState``, see
``mujoco_bridge.base_interface``):

* on request (the twin's ``~/anchor_base`` service, std_srvs/Trigger);
* before a base goal whose sim-real offset exceeds ``base.anchor.position_offset`` (m) or
  ``base.anchor.yaw_offset`` (rad);
* on start, and when the sim base's odometry jumps (a reset or reload of the sim: more than
  :data:`JUMP_POSITION` m or :data:`JUMP_YAW` rad between two messages), while no base run
  is active (a watcher thread at :data:`WATCH_PERIOD`).

An anchoring waits for the bridge's answer and then for a sim odometry within
:data:`PLACED_TOLERANCE` of the pose; it raises :class:`AnchorError` with the reason.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Callable

from simulation_interfaces.msg import Result
from simulation_interfaces.srv import SetEntityState

from shadow_twin.common.errors import ShadowTwinError
from shadow_twin.control.diff_drive import Pose2D, wrap_angle
from shadow_twin.ros.spinning import result_within

#: Largest distance (m) / yaw (rad) between the placed pose and the next sim odometry.
PLACED_TOLERANCE = (0.01, 0.01)
#: A sim odometry this far (m, rad) from the previous one is a jump (reset, reload), not motion.
JUMP_POSITION, JUMP_YAW = 0.1, 0.3
#: Seconds between two looks of the watcher.
WATCH_PERIOD = 0.1


class AnchorError(ShadowTwinError):
    """The sim base could not be put on the real one (the message says why)."""


def pose_offset(a: Pose2D, b: Pose2D) -> tuple[float, float]:
    """(distance m, |yaw difference| rad, wrapped) between two planar poses."""
    return math.hypot(a.x - b.x, a.y - b.y), abs(wrap_angle(a.yaw - b.yaw))


class BaseAnchor:
    """Puts the sim base on the real one (see module doc).

    Args:
        node: a node spun by another thread than the callers' (the base driver's); the
            service client is made on it.
        service: the sim bridge's SetEntityState service, e.g. ``/mujoco_bridge/set_entity_state``.
        real, sim: the two bases' :class:`~shadow_twin.ros.twin.base.driver.BaseEndpoint`.
        busy: callable, True while a base run is active (the watcher leaves the bases alone).
        timeout: callable returning the answer timeout, s.
    """

    def __init__(self, node, service: str, real, sim, busy: Callable[[], bool], timeout: Callable[[], float]
                 ) -> None:
        self.service, self.real, self.sim, self._busy, self._timeout = service, real, sim, busy, timeout
        self.log = node.get_logger()
        self.client = node.create_client(SetEntityState, service)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None
        self._asked = -math.inf         # monotonic s of the newest placement request

    def offset(self) -> tuple[float, float] | None:
        """(m, rad) between the newest real and sim poses; None until both have odometry."""
        real, sim = self.real.latest(), self.sim.latest()
        return None if real is None or sim is None else pose_offset(real.pose, sim.pose)

    def anchor(self, why: str) -> str:
        """Put the sim base at the real base's newest pose; returns what was done. Raises AnchorError."""
        with self._lock:
            real = self.real.latest()
            if real is None:
                raise AnchorError(f'no odometry of the real base on {self.real.topics.odom} yet')
            timeout = self._timeout()
            if not self.client.wait_for_service(timeout_sec=timeout):
                raise AnchorError(f'{self.service} is not available (waited {timeout:g} s)')
            pose = real.pose
            request = SetEntityState.Request()
            request.state.pose.position.x, request.state.pose.position.y = pose.x, pose.y
            request.state.pose.orientation.z = math.sin(pose.yaw / 2.0)
            request.state.pose.orientation.w = math.cos(pose.yaw / 2.0)
            asked = self._asked = time.monotonic()
            response = result_within(self.client.call_async(request), timeout)
            if response is None:
                raise AnchorError(f'{self.service} did not answer within {timeout:g} s')
            if response.result.result != Result.RESULT_OK:
                raise AnchorError(f'{self.service} refused: {response.result.error_message}')
            self._wait_placed(pose, asked, timeout)
        text = (f'sim base re-anchored to the real base ({why}): x {pose.x:.3f} m, y {pose.y:.3f} m, '
                f'yaw {pose.yaw:.3f} rad')
        self.log.info(text)
        return text

    def _wait_placed(self, pose: Pose2D, since: float, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            latest = self.sim.latest()
            if latest is not None and latest.received > since:
                distance, yaw = pose_offset(latest.pose, pose)
                if distance <= PLACED_TOLERANCE[0] and yaw <= PLACED_TOLERANCE[1]:
                    return
            time.sleep(0.005)
        raise AnchorError(f'no sim odometry on {self.sim.topics.odom} showed the base placed within {timeout:g} s')

    def anchor_if_apart(self, position_offset: float, yaw_offset: float) -> str | None:
        """Anchor when the bases are more than ``position_offset`` m or ``yaw_offset`` rad apart;
        returns what was done, None when they are close. Raises AnchorError."""
        offset = self.offset()
        if offset is None or (offset[0] <= position_offset and offset[1] <= yaw_offset):
            return None
        return self.anchor(f'{offset[0]:.3f} m / {offset[1]:.3f} rad apart, above base.anchor offsets '
                           f'{position_offset:g} m / {yaw_offset:g} rad')

    # -- watcher ----------------------------------------------------------------------------------
    def start_watching(self, offsets: Callable[[], tuple[float, float]]) -> None:
        """Anchor once both bases have odometry (start), then whenever the sim base's odometry
        jumps, while no run is active; ``offsets()`` gives the current (m, rad) thresholds."""
        self._watcher = threading.Thread(target=self._watch, args=(offsets,), name='base anchor', daemon=True)
        self._watcher.start()

    def _watch(self, offsets) -> None:
        previous, pending = None, 'start'
        while not self._stop.wait(WATCH_PERIOD):
            latest = self.sim.latest()
            if latest is not None and previous is not None and latest.received != previous.received:
                distance, yaw = pose_offset(latest.pose, previous.pose)
                placed_here = previous.received <= self._asked <= latest.received      # this anchor's own jump
                if (distance > JUMP_POSITION or yaw > JUMP_YAW) and not placed_here:
                    pending = f'the sim base jumped {distance:.2f} m / {yaw:.2f} rad (a reset or reload)'
            previous = latest
            if pending is None or self._busy() or self.offset() is None:
                continue
            try:
                position, yaw = offsets()
                done = self.anchor_if_apart(position, yaw)
                if done is None and pending != 'start':
                    self.log.info(f'{pending}; the bases are within the anchor offsets')
            except AnchorError as exc:
                self.log.warning(f'could not re-anchor the sim base after {pending}: {exc}',
                                 throttle_duration_sec=5.0)
                continue
            pending = None
            previous = self.sim.latest()

    def shutdown(self) -> None:
        """Stop the watcher."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=1.0)
