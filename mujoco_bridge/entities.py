"""The bridge's entities over ROS 2's standard ``simulation_interfaces``: the scene's objects
(``scene_file``, :mod:`shadow_twin.model.scene`) and, in a model with a mobile base, the base.

* ``~/get_entities`` (``GetEntities``) and ``~/get_entities_states``: the base (named by its
  ``base_frame``) and the objects, filtered by ``filters.filter``, a regular expression searched in
  each name (at most :data:`MAX_FILTER` characters; categories, tags and bounds are not supported:
  a request that sets them is refused);
* ``~/get_entity_state`` / ``~/set_entity_state``: an object's pose and twist in the world frame
  (``odom``: the sim's odometry frame is its world frame; :mod:`shadow_twin.simulation.live.entities`);
  the base as :mod:`mujoco_bridge.base_interface` places it (at rest, x, y, yaw);
* ``~/spawn_entity`` (``SpawnEntity``): ``resource_string``, or the file at ``uri``
  (``file://`` or a path), is one object of a scene file as YAML without its name and pose
  (``shape``, ``size``, ``mass``, ``friction``, ``free``...); ``name`` names it and ``initial_pose``
  places it (header.frame_id: world, odom or a body of the model, e.g. ``rh_palm``); the model is
  rebuilt with it and everything else keeps its live state (a reload with another scene);
* ``~/delete_entity``: an object (with those fixed to it); the objects of the scene file too, but
  not the base and nothing of the model file.

Every refusal answers a ``Result`` code with the reason and is logged; nothing is changed then.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import yaml
from rclpy.node import Node
from scipy.spatial.transform import Rotation
from simulation_interfaces.msg import EntityState, Result
from simulation_interfaces.srv import (DeleteEntity, GetEntities, GetEntitiesStates, GetEntityState, SetEntityState,
                                       SpawnEntity)

from shadow_twin.common.errors import ConfigError, ModelError
from shadow_twin.model.scene import ObjectConfig, SceneConfig, object_names
from shadow_twin.model.scene.config import NAME, WORLD_FRAMES
from shadow_twin.ros.guard import guarded_service
from shadow_twin.ros.message_checks import BadMessage, check_finite, check_pose
from shadow_twin.simulation.live import entities as live

#: Longest ``filters.filter`` regular expression accepted, characters.
MAX_FILTER = 256
#: Largest spawn resource (``resource_string`` or the ``uri`` file), bytes.
MAX_RESOURCE = 64 * 1024
#: Keys of a spawn resource that ``initial_pose`` and ``name`` give instead.
POSE_KEYS = ('name', 'frame', 'xyz', 'rpy')


def scene_of(settings) -> SceneConfig | None:
    """The bridge's scene: ``scene_file``'s objects with the ``scene_friction_scale`` and
    ``scene_mass_scale`` factors, None without a file. Raises ConfigError (the file's problem)."""
    if not settings.scene_file:
        return None
    return SceneConfig.from_yaml(settings.scene_file).scaled(settings.scene_friction_scale, settings.scene_mass_scale)


def _refuse(response, code: int, why: str):
    response.result.result, response.result.error_message = code, why
    return response


class Refusal(Exception):
    """A spawn refused: ``code`` (a ``Result`` or ``SpawnEntity`` code) and ``why`` (one line)."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code, self.why = code, why


class EntityServices:
    """Serves the entity services of the module doc on ``node`` (the bridge: it has ``sim``, ``base``
    and ``stamp_of``) in ``callback_group``; ``settings()`` gives the bridge's settings now
    (``base_frame``, ``reload_max_bytes``). :attr:`spawned` lists the objects spawned at run time
    (``ResetSimulation``'s ``SCOPE_SPAWNED`` removes them)."""

    def __init__(self, node: Node, settings, callback_group=None) -> None:
        self.node, self.settings = node, settings
        self.spawned: list[str] = []
        for srv, name, handler in ((GetEntities, '~/get_entities', self._on_get_entities),
                                   (GetEntitiesStates, '~/get_entities_states', self._on_get_states),
                                   (GetEntityState, '~/get_entity_state', self._on_get_state),
                                   (SetEntityState, '~/set_entity_state', self._on_set_state),
                                   (SpawnEntity, '~/spawn_entity', self._on_spawn),
                                   (DeleteEntity, '~/delete_entity', self._on_delete)):
            guarded_service(node, srv, name, handler, callback_group=callback_group)

    @property
    def base_entity(self) -> str | None:
        """The base's entity name (its ``base_frame``), None without a base."""
        return self.settings().base_frame if self.node.base is not None else None

    def names(self) -> list[str]:
        """Every entity: the base first (if any), then the objects in scene order."""
        return ([self.base_entity] if self.base_entity else []) + object_names(self.node.sim.model)

    def _log(self, ok: bool, text: str) -> None:
        if ok:      # one call site per severity (rclpy)
            self.node.get_logger().info(text)
        else:
            self.node.get_logger().warning(text)

    # -- queries ---------------------------------------------------------------------------------------
    def _matching(self, filters, response) -> list[str] | None:
        """The entities ``filters`` select, or None with ``response`` refused."""
        if filters.categories or filters.tags.tags or filters.bounds.points:
            _refuse(response, Result.RESULT_FEATURE_UNSUPPORTED, 'entity categories, tags and bounds are not '
                                                                 'supported; filter by name (a regular expression)')
            return None
        if len(filters.filter) > MAX_FILTER:
            _refuse(response, Result.RESULT_OPERATION_FAILED, f'filter longer than {MAX_FILTER} characters')
            return None
        try:
            pattern = re.compile(filters.filter)
        except re.error as exc:
            _refuse(response, Result.RESULT_OPERATION_FAILED, f'filter {filters.filter!r} is no regular expression: '
                                                              f'{exc}')
            return None
        return [name for name in self.names() if pattern.search(name)]

    def _on_get_entities(self, request, response):
        names = self._matching(request.filters, response)
        if names is not None:
            response.entities, response.result.result = names, Result.RESULT_OK
        return response

    def _state(self, name: str) -> EntityState:
        """The state of entity ``name`` (stamped now, world frame). Raises ConfigError: no such entity."""
        state = EntityState()
        sim = self.node.sim
        if name == self.base_entity:
            odometry = sim.base_odometry()
            position, quat, yaw = odometry.position, odometry.orientation, odometry.pose[2]
            forward, sideways = odometry.twist.v, odometry.lateral      # body frame -> world axes
            linear = np.array([forward * np.cos(yaw) - sideways * np.sin(yaw),
                               forward * np.sin(yaw) + sideways * np.cos(yaw), 0.0])
            angular = np.array([0.0, 0.0, odometry.twist.omega])
        else:
            motion = live.object_motion(sim, name)
            position, quat, linear, angular = motion.position, motion.quat, motion.linear, motion.angular
        state.header.stamp = self.node.stamp_of(sim.time)
        state.header.frame_id = live.WORLD_FRAME
        p, q = state.pose.position, state.pose.orientation
        p.x, p.y, p.z = (float(v) for v in position)
        q.w, q.x, q.y, q.z = (float(v) for v in quat)
        t = state.twist
        t.linear.x, t.linear.y, t.linear.z = (float(v) for v in linear)
        t.angular.x, t.angular.y, t.angular.z = (float(v) for v in angular)
        return state

    def _on_get_state(self, request, response):
        try:
            response.state = self._state(request.entity)
        except ConfigError as exc:
            return _refuse(response, Result.RESULT_NOT_FOUND, str(exc))
        response.result.result = Result.RESULT_OK
        return response

    def _on_get_states(self, request, response):
        names = self._matching(request.filters, response)
        if names is not None:
            response.entities = names
            response.states = [self._state(name) for name in names]
            response.result.result = Result.RESULT_OK
        return response

    # -- changes ---------------------------------------------------------------------------------------
    def _on_set_state(self, request, response):
        if request.entity in ('', self.base_entity) and self.node.base is not None:
            return self.node.base.set_state(request, response)
        state = request.state
        try:
            check_pose(state.pose, 'state.pose')
            check_finite([getattr(v, c) for v in (state.twist.linear, state.twist.angular) for c in 'xyz'],
                         'state.twist')
        except BadMessage as exc:
            return self._refused(response, SetEntityState.Response.INVALID_POSE, str(exc), 'set_entity_state')
        if state.header.frame_id not in ('', *WORLD_FRAMES):
            return self._refused(response, Result.RESULT_OPERATION_FAILED, f'header.frame_id '
                                 f'{state.header.frame_id!r}: objects are placed in world (or odom, or empty)',
                                 'set_entity_state')
        p, q, t = state.pose.position, state.pose.orientation, state.twist
        motion = live.EntityMotion(np.array([p.x, p.y, p.z]), np.array([q.w, q.x, q.y, q.z]),
                                   np.array([t.linear.x, t.linear.y, t.linear.z]),
                                   np.array([t.angular.x, t.angular.y, t.angular.z]))
        try:
            live.set_object_motion(self.node.sim, request.entity, motion)
        except ConfigError as exc:
            code = Result.RESULT_NOT_FOUND if 'no object' in str(exc) else SetEntityState.Response.INVALID_POSE
            return self._refused(response, code, str(exc), 'set_entity_state')
        response.result.result = Result.RESULT_OK
        self._log(True, f'set_entity_state: {request.entity} at ({p.x:.3f}, {p.y:.3f}, {p.z:.3f}) m in world')
        return response

    def _refused(self, response, code: int, why: str, service: str):
        self._log(False, f'{service} refused: {why}')
        return _refuse(response, code, why)

    def _resource(self, request) -> dict:
        """The spawn request's resource as a mapping. Raises Refusal."""
        codes = SpawnEntity.Response
        text = request.resource_string
        if not text and request.uri:
            path = Path(request.uri[len('file://'):] if request.uri.startswith('file://') else request.uri)
            try:
                if path.stat().st_size > MAX_RESOURCE:
                    raise Refusal(codes.RESOURCE_PARSE_ERROR, f'{path} is larger than {MAX_RESOURCE} bytes')
                text = path.read_text()
            except OSError as exc:
                raise Refusal(codes.MISSING_ASSETS, f'uri {request.uri!r} cannot be read: {exc.strerror}') from None
        if not text:
            raise Refusal(codes.NO_RESOURCE, 'neither resource_string nor uri is given')
        if len(text) > MAX_RESOURCE:
            raise Refusal(codes.RESOURCE_PARSE_ERROR, f'resource_string is longer than {MAX_RESOURCE} bytes')
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise Refusal(codes.UNSUPPORTED_FORMAT, f'the resource is not YAML: {" ".join(str(exc).split())}') from None
        if not isinstance(data, dict):
            raise Refusal(codes.UNSUPPORTED_FORMAT, 'the resource must be one object of a scene file (a YAML '
                                                    'mapping: shape, size, mass...)')
        given = sorted(set(data) & set(POSE_KEYS))
        if given:
            raise Refusal(codes.RESOURCE_PARSE_ERROR, f'the resource gives {given}: the name and the pose come from '
                                                      'the request')
        return data

    def _spawn_name(self, request) -> str:
        """The new object's name. Raises Refusal."""
        codes = SpawnEntity.Response
        name, taken = request.name, set(self.names())
        if not name or not NAME.match(name):
            raise Refusal(codes.NAME_INVALID, f'name {name!r}: letters, digits, _ . - only (not first . or -)')
        if name in taken:
            if not request.allow_renaming:
                raise Refusal(codes.NAME_NOT_UNIQUE, f'an entity named {name!r} exists already')
            name = next(f'{name}_{k}' for k in range(1, len(taken) + 2) if f'{name}_{k}' not in taken)
        return name

    def _object(self, request, name: str) -> ObjectConfig:
        """The object the spawn request declares. Raises Refusal."""
        codes = SpawnEntity.Response
        data, pose = self._resource(request), request.initial_pose
        try:
            check_pose(pose.pose, 'initial_pose.pose')
        except BadMessage as exc:
            raise Refusal(codes.INVALID_POSE, str(exc)) from None
        p, q = pose.pose.position, pose.pose.orientation
        rpy = Rotation.from_quat([q.x, q.y, q.z, q.w]).as_euler('xyz')       # URDF rpy: extrinsic x, y, z
        entry = {**data, 'name': name, 'frame': pose.header.frame_id or live.WORLD_FRAME,
                 'xyz': [p.x, p.y, p.z], 'rpy': [float(a) for a in rpy]}
        try:
            return ObjectConfig.from_mapping(entry, f'spawn {name!r}')
        except ConfigError as exc:
            missing = 'mesh' in str(exc) and 'not found' in str(exc)
            raise Refusal(codes.MISSING_ASSETS if missing else codes.RESOURCE_PARSE_ERROR, str(exc)) from None

    def _on_spawn(self, request, response):
        try:
            name = self._spawn_name(request)
            obj = self._object(request, name)
            report = live.spawn_object(self.node.sim, obj, self.settings().reload_max_bytes)
        except Refusal as exc:
            return self._refused(response, exc.code, exc.why, 'spawn_entity')
        except (ConfigError, ModelError) as exc:          # a frame, a clash with the model: nothing changed
            return self._refused(response, Result.RESULT_OPERATION_FAILED, str(exc), 'spawn_entity')
        self.spawned.append(name)
        response.entity_name, response.result.result = name, Result.RESULT_OK
        self._log(True, f'spawned {name} ({obj.shape}, {"free" if obj.free else "fixed to " + obj.frame}); '
                        f'{report.summary()}')
        return response

    def _on_delete(self, request, response):
        if request.entity == self.base_entity:
            return self._refused(response, Result.RESULT_OPERATION_FAILED, 'the base is part of the model, not of '
                                 'the scene: it is not deleted', 'delete_entity')
        try:
            removed = live.delete_objects(self.node.sim, [request.entity], self.settings().reload_max_bytes)
        except (ConfigError, ModelError) as exc:
            code = Result.RESULT_NOT_FOUND if 'no object' in str(exc) else Result.RESULT_OPERATION_FAILED
            return self._refused(response, code, str(exc), 'delete_entity')
        self.spawned = [n for n in self.spawned if n not in removed]
        response.result.result = Result.RESULT_OK
        self._log(True, f'deleted {", ".join(removed)}')
        return response

    def despawn(self) -> list[str]:
        """Delete every object spawned at run time (``ResetSimulation`` ``SCOPE_SPAWNED``); the names."""
        present = [n for n in self.spawned if n in object_names(self.node.sim.model)]
        removed = live.delete_objects(self.node.sim, present, self.settings().reload_max_bytes) if present else []
        self.spawned = []
        return removed
