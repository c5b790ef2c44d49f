"""The ``mujoco_bridge`` node's services: ``~/reload`` (a background compile, the previous model
kept on failure), ``~/reset`` and ``~/pause`` (:class:`BridgeServices`, a part of
:class:`mujoco_bridge.bridge_node.MujocoBridge`; see its module doc). Reset and pause are the
:class:`~mujoco_bridge.simulation_control.SimulationControl`'s, which also serves them over
``simulation_interfaces``."""

from __future__ import annotations

from rclpy.parameter import Parameter

from mujoco_bridge.entities import scene_of
from mujoco_bridge.object_sources import followed_sources
from shadow_twin.common.errors import ModelTooLarge, ShadowTwinError
from shadow_twin.model.mjcf import builtin_model_path
from shadow_twin.ros import parameters as ros_params
from shadow_twin.simulation.live.reload import UNCHANGED
from shadow_twin.simulation.overrides import ParameterOverrides
from shadow_twin.simulation.reload import BuildBusy, BuildCancelled, BuildTimeout


class BridgeServices:
    """The ``~/reload``, ``~/reset`` and ``~/pause`` handlers of the bridge node it is mixed into
    (which creates the services and the reload's ``BackgroundBuild``)."""

    def _on_reload(self, request, response):
        """Build the new model in a background thread (``BackgroundBuild``; stepping goes on), wait
        for it at most ``reload_timeout`` s or until shutdown, then swap it in under the sim lock.
        Any failure answers false, keeps the previous model and sets ``model_path`` back to it."""
        self._reload_idle.clear()
        try:
            return self._reload(response)
        finally:
            self._reload_idle.set()

    def _reload(self, response):
        settings = self._settings
        raw_path = settings.model_path
        path = raw_path or builtin_model_path()
        timeout = settings.reload_timeout
        try:
            overrides = ParameterOverrides.from_yaml_text(settings.overrides)
            gains, max_bytes = self._gains_file(), settings.reload_max_bytes
            scene = self._new_scene(settings)
            prepared = self._builds.run(
                lambda: self.sim.prepare_reload(path, overrides=overrides, gains=gains, max_bytes=max_bytes, scene=scene),
                timeout, cancel=self._stop, label=f'compiling {path}')
            report = self.sim.apply_reload(prepared)
        except BuildBusy as exc:
            return self._reload_failed(response, f'a reload is still running ({exc.label}, started '
                                                 f'{exc.elapsed:.1f} s ago); try again when it ends')
        except BuildTimeout:
            return self._reload_failed(response, f'compiling {path} took longer than reload_timeout {timeout:g} s '
                                                 f'(it is abandoned, its result will be discarded)')
        except BuildCancelled:
            response.success, response.message = False, f'shutting down: compiling {path} abandoned'
            self.get_logger().warning(f'reload: {response.message}')
            return response
        except ModelTooLarge as exc:
            return self._reload_failed(response, f'{exc} (reload_max_bytes)')
        except ShadowTwinError as exc:
            return self._reload_failed(response, str(exc))
        self._running_model_path = raw_path
        if scene is not UNCHANGED:
            self._running_scene_file = settings.scene_file
            report_scene = f'; scene {settings.scene_file or "(none)"}: {len(scene.objects) if scene else 0} objects'
        else:
            report_scene = ''
        ros_params.declare(self, ros_params.constraint_specs(self.sim.controlled_joints, self._constraints))
        self._settings = self._read_settings()
        response.success, response.message = True, report.summary() + report_scene
        self.get_logger().info(response.message)
        return response

    def _new_scene(self, settings):
        """The objects of the reloaded model: UNCHANGED (the running ones, spawned ones included) unless
        ``scene_file`` changed; then its file's (None: no objects). Raises ConfigError for a bad file or
        one without a followed object (follow_objects)."""
        if settings.scene_file == self._running_scene_file:
            return UNCHANGED
        scene = scene_of(settings)
        followed_sources(settings.follow_objects, scene)
        return scene

    def _reload_failed(self, response, reason: str):
        """Answer a failed reload with ``reason``, log it and set ``model_path`` back to the running model."""
        response.success = False
        response.message = f'{reason}; the previous model keeps running'
        self.get_logger().error(f'reload failed: {response.message}')
        self._restore_model_path()
        return response

    def _restore_model_path(self) -> None:
        """Set ``model_path`` and ``scene_file`` back to the values the running model was loaded with
        ('' for the built-in model when it was ''), without the "takes effect on ~/reload" log line."""
        for name, current, running in (('model_path', self._settings.model_path, self._running_model_path),
                                       ('scene_file', self._settings.scene_file, self._running_scene_file)):
            if current == running:
                continue
            self._restoring_model_path = True
            try:
                result = self.set_parameters([Parameter(name, value=running)])[0]
            finally:
                self._restoring_model_path = False
            if result.successful:
                self.get_logger().warning(f'{name} set back from {current!r} to {running!r}, the one that runs')
            else:
                self.get_logger().error(f'could not set {name} back to {running!r}: {result.reason}')

    def _late_build(self, label: str, seconds: float, error: BaseException | None) -> None:
        """An abandoned reload build ended (in its thread): say so; its result is discarded."""
        if not self._stop.is_set():
            self.get_logger().info(f'{label} ended after {seconds:.1f} s '
                                   f'({"failed: " + str(error) if error else "succeeded"}), too late: discarded')

    def _on_reset(self, request, response):
        response.success, response.message = True, self.control.reset()
        self.get_logger().info(response.message)
        return response

    def _on_pause(self, request, response):
        response.success, response.message = True, self.control.set_paused(bool(request.data))
        self.get_logger().info(response.message)
        return response
