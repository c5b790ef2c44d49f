"""What the twin server listens to besides goals: the joint states of robot and sim (merged
over several topics per source), the UR's speed scaling, and the position limits of the
twin's model (the hand's MJCF, or the cell built from its YAML)."""

from __future__ import annotations

import threading
import time

from sensor_msgs.msg import JointState
from std_msgs.msg import Float64

from shadow_twin.common.errors import ConfigError
from shadow_twin.common.paths import resolve_share_url
from shadow_twin.control import jtc
from shadow_twin.twin.timing import oldest_state
from shadow_twin.model.cell.assembly import CellConfig, build_cell_spec, compile_cell
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.ros.message_checks import check_speed_scaling

#: A speed scaling change of at least this much (percent) is logged.
SPEED_SCALING_LOG_STEP = 1.0


class JointStateCache:
    """The latest joint states of the robot ('real') and the sim ('sim'), and when each
    joint's last state arrived (monotonic s) and on which topic, filled by a listener node on
    its own thread. Several topics of one source (the arm's and the hand's drivers) are
    merged per joint: each joint has the state of the newest message naming it.

    Args:
        topics: {'real': [topics], 'sim': [topics]}.
    """

    def __init__(self, topics: dict[str, list[str]]) -> None:
        self.topics = {source: list(names) for source, names in topics.items()}
        self._lock = threading.Lock()
        self._states: dict[str, dict[str, tuple[float, float]]] = {'real': {}, 'sim': {}}
        self._received: dict[str, dict[str, float]] = {'real': {}, 'sim': {}}
        self._stamp: dict[str, float | None] = {'real': None, 'sim': None}
        self._topic_of: dict[str, dict[str, str]] = {'real': {}, 'sim': {}}
        self._turn = threading.Condition(self._lock)
        self._turns = 0
        #: Wakes the listener for one turn (the node sets it: :meth:`on_turn` queued on the
        #: listener's executor).
        self.request_turn = lambda: None

    def on_message(self, source: str, msg: JointState, topic: str = '') -> None:
        """Subscription callback: store {joint: (position rad, velocity rad/s)} of ``msg``
        (from ``topic`` of ``source``)."""
        now = time.monotonic()
        vel = list(msg.velocity)
        state = {n: (float(q), float(vel[i]) if i < len(vel) else float('nan'))
                 for i, (n, q) in enumerate(zip(msg.name, msg.position))}
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        with self._lock:
            self._states[source].update(state)
            self._stamp[source] = stamp if stamp > 0 else None
            self._received[source].update(dict.fromkeys(state, now))
            self._topic_of[source].update(dict.fromkeys(state, topic))

    def on_turn(self) -> None:
        """Run by the listener's executor: it took a turn (see :meth:`wait_for_turn`)."""
        with self._turn:
            self._turns += 1
            self._turn.notify_all()

    def wait_for_turn(self, timeout: float) -> bool:
        """Ask the listener for a turn (:attr:`request_turn`) and wait until it has taken it: its
        events executor queues the turn behind the events that came before, so by then it has
        taken every message that had arrived before the call. True if it did within ``timeout`` s."""
        with self._turn:
            seen = self._turns
        self.request_turn()
        with self._turn:
            return self._turn.wait_for(lambda: self._turns > seen, timeout)

    def get(self, source: str) -> dict[str, tuple[float, float]]:
        """{joint: (position rad, velocity rad/s)} of ``source`` ('real' or 'sim')."""
        with self._lock:
            return dict(self._states[source])

    def get_stamped(self, source: str) -> tuple[dict[str, tuple[float, float]], float | None]:
        """:meth:`get` and the header stamp (ROS time, s) of the newest message of ``source`` (None
        when it had none): the time the newest states are of."""
        with self._lock:
            return dict(self._states[source]), self._stamp[source]

    def oldest(self, source: str, joints: list[str]) -> tuple[str, float]:
        """The joint of ``joints`` with the oldest ``source`` state and its age, s (inf if never)."""
        with self._lock:
            return oldest_state(self._received[source], joints, time.monotonic())

    def topic_of(self, source: str, joint: str) -> str:
        """The topic ``joint``'s newest ``source`` state came on (every topic of the source, joined,
        if none has come)."""
        with self._lock:
            return self._topic_of[source].get(joint) or ', '.join(self.topics[source])


class SpeedScaling:
    """The arm's speed scaling (percent, std_msgs/Float64 as the UR driver's
    ``speed_scaling_state_broadcaster`` publishes it at 10 Hz): the newest value, logged when
    it changes by :data:`SPEED_SCALING_LOG_STEP` or more; a NaN, infinite or out-of-range value
    is refused (:func:`~shadow_twin.ros.message_checks.check_speed_scaling`: BadMessage, which
    the subscription's guard drops and reports).

    Args:
        topic: where it comes from (for messages).
        log: a logger.
    """

    def __init__(self, topic: str, log) -> None:
        self.topic, self.log = topic, log
        self._lock = threading.Lock()
        self._value: float | None = None
        self._logged: float | None = None

    def on_message(self, msg: Float64) -> None:
        """Subscription callback: keep ``msg.data`` (percent). Raises BadMessage (nothing kept)
        for a value that is not finite or not within 0..100."""
        value = check_speed_scaling(msg)
        with self._lock:
            self._value = value
            changed = self._logged is None or abs(value - self._logged) >= SPEED_SCALING_LOG_STEP
            if changed:
                self._logged = value
        if changed:
            self.log.info(f'arm speed scaling {value:g} % (from {self.topic})')

    @property
    def value(self) -> float | None:
        """The newest speed scaling, percent (None before the first message)."""
        with self._lock:
            return self._value

    def describe(self) -> str:
        value = self.value
        return f'unknown (nothing on {self.topic} yet)' if value is None else f'{value:g} %'

    @property
    def fraction(self) -> float:
        """The newest speed scaling as a fraction 0..1 (1 before the first message)."""
        value = self.value
        return 1.0 if value is None else value / 100.0


def load_limits(model_path: str, cell_config: str) -> dict[str, jtc.JointLimits]:
    """The position limits of the twin's joints: ``model_path``'s MJCF, or when it is empty and
    ``cell_config`` is set, the cell built from that cell YAML (``package://shadow_twin/...``
    allowed), else the built-in hand. Raises ShadowTwinError (ConfigError, ModelError)."""
    if not model_path and cell_config:
        path = resolve_share_url(cell_config)
        if not path.is_file():
            raise ConfigError(f'cell_config {cell_config}: no such file ({path})')
        model = compile_cell(build_cell_spec(CellConfig.from_yaml(path)))
    else:
        model = TwinModel(model_path or None).model
    return jtc.joint_limits_from_model(model)
