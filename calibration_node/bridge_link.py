"""The calibration node's link to the running ``mujoco_bridge``: read the model it runs, install a new one
(or a calibrated scene: ``shadow-twin calibrate --contacts --install``, the contact protocol's runs).

Uses the bridge's parameter services (``AsyncParameterClient``) and its ``~/reload``
(std_srvs/Trigger). Called from a worker thread while the node's executor spins: every
wait polls a future (:func:`shadow_twin.ros.spinning.result_within`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.parameter_client import AsyncParameterClient
from std_srvs.srv import Trigger

from shadow_twin.calibration.contacts.fit import write_calibrated_scene
from shadow_twin.common.errors import ConfigError
from shadow_twin.model.calibratable import ParameterTarget
from shadow_twin.ros.spinning import result_within

#: Seconds a reload may take beyond the service timeout (a big MJCF compiles in seconds).
RELOAD_EXTRA = 30.0


class BridgeLink:
    """Talk to bridge node ``bridge`` (e.g. ``/mujoco_bridge``).

    Args:
        node: the owning node. bridge: the bridge's node name. timeout: wait per request, s.
        callback_group: for the clients.
    """

    def __init__(self, node: Node, bridge: str, timeout: float, callback_group=None) -> None:
        self.bridge = bridge.rstrip('/')
        self.timeout = timeout
        self.params = AsyncParameterClient(node, self.bridge, callback_group=callback_group)
        self.reload_client = node.create_client(Trigger, f'{self.bridge}/reload', callback_group=callback_group)

    def _get(self, names: list[str]) -> list[str] | None:
        if not self.params.wait_for_services(timeout_sec=self.timeout):
            return None
        answer = result_within(self.params.get_parameters(names), self.timeout)
        return None if answer is None else [v.string_value for v in answer.values]

    def _set(self, name: str, value: str) -> tuple[bool, str]:
        answer = result_within(self.params.set_parameters([Parameter(name, value=value)]), self.timeout)
        if answer is None:
            return False, 'no answer'
        return answer.results[0].successful, answer.results[0].reason

    def model_and_gains(self) -> tuple[str, str] | None:
        """(model_path, gains_file) parameters of the bridge ('' = its defaults), or None if unreachable."""
        values = self._get(['model_path', 'gains_file'])
        return None if values is None else (values[0], values[1])

    def scene_file(self) -> str | None:
        """The bridge's ``scene_file`` parameter ('' = no scene), or None if unreachable."""
        values = self._get(['scene_file'])
        return None if values is None else values[0]

    def install(self, model: str, gains: str | None = None) -> tuple[bool, str]:
        """Set the bridge's ``model_path`` (and ``gains_file`` if given) and reload it;
        (installed, what happened).

        If the reload fails, the parameters are set back: the bridge keeps running its previous
        model, and its parameters say so.
        """
        return self._install({'model_path': model, **({'gains_file': gains} if gains else {})},
                             f'{model}' + (f' with gains {gains}' if gains else ''), 'calibrated model')

    def install_scene(self, scene: str) -> tuple[bool, str]:
        """Set the bridge's ``scene_file`` (a calibrated scene: ``shadow-twin calibrate --contacts``) and
        reload it; (installed, what happened). A failed reload sets it back (the bridge keeps its objects)."""
        return self._install({'scene_file': scene}, f'scene {scene}', 'calibrated scene')

    def install_fitted_scene(self, scene: Path, targets: Mapping[ParameterTarget, float],
                             out: Path) -> tuple[bool, str]:
        """Install a contact calibration (``targets``: the fitted values; ``scene``: the protocol's scene with
        them) and reload; (installed, what happened). A bridge running a scene file gets that file with the
        fitted values (``out``/installed_scene.yaml: e.g. the robots' scene of a protocol run live, whose fixture
        stands in the forearm's frame), one running none gets ``scene``."""
        running = self.scene_file()
        if running is None:
            return False, f'no answer from {self.bridge}'
        if running and Path(running).is_file():
            try:
                scene = write_calibrated_scene(running, targets, Path(out) / 'installed_scene.yaml')
            except ConfigError as exc:
                return False, f'the bridge\'s scene {running}: {exc}'
        return self.install_scene(str(Path(scene).resolve()))

    def _install(self, wanted: dict[str, str], what: str, written: str) -> tuple[bool, str]:
        if not self.params.wait_for_services(timeout_sec=self.timeout) or \
                not self.reload_client.wait_for_service(timeout_sec=self.timeout):
            return False, f'bridge {self.bridge} not reachable: {written} written to {next(iter(wanted.values()))} but not loaded'
        old = dict(zip(wanted, self._get(list(wanted)) or [''] * len(wanted)))
        for name, value in wanted.items():
            ok, reason = self._set(name, value)
            if not ok:
                self._restore(old)
                return False, f'bridge refused {name} {value}: {reason}'
        reply = result_within(self.reload_client.call_async(Trigger.Request()), self.timeout + RELOAD_EXTRA)
        if reply is not None and reply.success:
            return True, f'bridge {self.bridge} reloaded {what}'
        self._restore(old)
        why = reply.message if reply is not None else 'no answer'
        previous = ', '.join(f'{name} {value or "(default)"}' for name, value in old.items())
        return False, f'bridge reload failed ({why}); it keeps its previous {previous}'

    def _restore(self, old: dict[str, str]) -> None:
        for name, value in old.items():
            self._set(name, value)
