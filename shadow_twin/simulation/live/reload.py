"""Reloading a live simulation's model: :class:`ModelReloader`, owned by
:class:`~shadow_twin.simulation.live.simulation.LiveSimulation`, holds what the model is built from
(overrides, gains source, joint map) and does the two steps of a reload that need no simulation
state: build the new model (:meth:`ModelReloader.prepare`, off the lock) and the new ``MjData`` with
the state carried over by joint name (:meth:`ModelReloader.carry_state`, under the simulation's
lock). The simulation swaps the result in (its ``apply_reload``); this module imports none of it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

import mujoco

from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.model.mjcf import TwinModel
from shadow_twin.model.scene import SceneConfig, add_objects
from shadow_twin.simulation.objects import add_following
from shadow_twin.simulation.overrides import ParameterOverrides
from shadow_twin.simulation.samples import PreparedReload, ReloadReport

#: Default of the reload arguments that keep the simulation's current value.
UNCHANGED = object()


def model_joints(model: mujoco.MjModel) -> list[tuple[int, str]]:
    """(id, MJCF name) of the named hinge and slide joints, model order."""
    kinds = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    return [(j, model.joint(j).name) for j in range(model.njnt)
            if model.joint(j).name and int(model.jnt_type[j]) in kinds]


def _carry_free_joints(old_model: mujoco.MjModel, old_data: mujoco.MjData,
                       model: mujoco.MjModel, data: mujoco.MjData) -> None:
    """Copy the pose and velocity of free joints present (by name) in both models (a mobile
    base keeps its place across a reload)."""
    free = int(mujoco.mjtJoint.mjJNT_FREE)
    for j in range(model.njnt):
        name = model.joint(j).name
        old = mujoco.mj_name2id(old_model, mujoco.mjtObj.mjOBJ_JOINT, name) if name else -1
        if int(model.jnt_type[j]) != free or old < 0 or int(old_model.jnt_type[old]) != free:
            continue
        q, q_old = model.jnt_qposadr[j], old_model.jnt_qposadr[old]
        v, v_old = model.jnt_dofadr[j], old_model.jnt_dofadr[old]
        data.qpos[q:q + 7] = old_data.qpos[q_old:q_old + 7]
        data.qvel[v:v + 6] = old_data.qvel[v_old:v_old + 6]


class ModelReloader:
    """What a live simulation's model is built from, and the building and state carrying of a reload.

    Args:
        joint_map: ROS <-> MJCF joint names (shared with the simulation).
        overrides: model-parameter overrides (:class:`ParameterOverrides`, a mapping, or None);
            a reload that omits them keeps these.
        gains_source: drive gains (:class:`ControllerGains`), a YAML path (re-read at each build),
            or None for the defaults; a reload that omits them keeps this source.
        scene: the objects added to every model built (:class:`SceneConfig`; None: none); a
            reload that omits it keeps these (a spawn or a delete gives another).
        followed: the free objects of the scene that follow a pose source: their mocap targets and
            welds are added too (:func:`shadow_twin.simulation.objects.add_following`).
    Raises:
        ConfigError: bad overrides.
    """

    def __init__(self, joint_map: JointNameMap, overrides: ParameterOverrides | Mapping | None = None,
                 gains_source: ControllerGains | str | os.PathLike | None = None,
                 scene: SceneConfig | None = None, followed: tuple[str, ...] = ()) -> None:
        self.joint_map = joint_map
        #: The overrides of the model running now (:meth:`adopt` replaces them).
        self.overrides = overrides if isinstance(overrides, ParameterOverrides) else ParameterOverrides(overrides)
        #: The gains source of the model running now (:meth:`adopt` replaces it).
        self.gains_source = gains_source
        #: The scene whose objects the model running now holds (:meth:`adopt` replaces it).
        self.scene = scene or SceneConfig()
        #: The objects followed (those of them in the scene built get a target and a weld).
        self.followed = tuple(followed)

    @staticmethod
    def gains(source) -> ControllerGains:
        """The gains of ``source`` (None: the defaults; a path: read from the YAML file).
        Raises ConfigError for a bad file."""
        if source is None or isinstance(source, ControllerGains):
            return source or ControllerGains()
        return ControllerGains.from_yaml(source)

    def build(self, path: str | os.PathLike | None, overrides: ParameterOverrides | object = UNCHANGED,
              gains_source: object = UNCHANGED, max_bytes: int | None = None,
              scene: SceneConfig | object = UNCHANGED) -> tuple[TwinModel, SimController, list]:
        """Compile ``path`` (None: the built-in hand) with ``scene``'s objects added, build its
        controller with the gains of ``gains_source`` and apply ``overrides`` (each omitted: the
        current one); touches no state. Returns (model, controller, the overrides applied as
        (name, old, new) values). Raises ModelError (missing, not compiling, over ``max_bytes``, an
        object that does not fit the model), ConfigError (gains, overrides)."""
        overrides = self.overrides if overrides is UNCHANGED else overrides
        gains_source = self.gains_source if gains_source is UNCHANGED else gains_source
        scene = self.scene if scene is UNCHANGED else scene
        twin = TwinModel(path, max_bytes, edit=(lambda spec: self._add(spec, scene)) if scene.objects else None)
        controller = SimController(twin.model, self.gains(gains_source), self.joint_map)
        names = [self.joint_map.to_ros(name) for _, name in model_joints(twin.model)]
        applied = overrides.apply(twin.model, names, self.joint_map)
        return twin, controller, applied

    def _add(self, spec, scene: SceneConfig) -> None:
        """Add ``scene``'s objects to ``spec``, and the targets and welds of those followed."""
        add_objects(spec, scene)
        followed = [name for name in self.followed if name in scene.names]
        if followed:
            add_following(spec, followed)

    def prepare(self, current_path: Path, path: str | os.PathLike | None = None,
                overrides: ParameterOverrides | Mapping | None | object = UNCHANGED,
                gains: ControllerGains | str | os.PathLike | None | object = UNCHANGED,
                max_bytes: int | None = None, scene: SceneConfig | object = UNCHANGED) -> PreparedReload:
        """Build the model a reload swaps in (``LiveSimulation.prepare_reload``, which see); None
        ``path`` recompiles ``current_path``, omitted ``overrides``/``gains``/``scene`` keep the
        current ones. Changes nothing here (:meth:`adopt` does, once the model is swapped in)."""
        overrides = (self.overrides if overrides is UNCHANGED else
                     overrides if isinstance(overrides, ParameterOverrides) else ParameterOverrides(overrides))
        gains = self.gains_source if gains is UNCHANGED else gains
        scene = self.scene if scene is UNCHANGED else scene
        twin, controller, applied = self.build(path if path is not None else current_path, overrides, gains,
                                               max_bytes, scene)
        return PreparedReload(twin, controller, applied, overrides, gains, scene)

    def carry_state(self, old_model: mujoco.MjModel, old_data: mujoco.MjData,
                    prepared: PreparedReload) -> tuple[mujoco.MjData, ReloadReport]:
        """The new model's ``MjData`` (keyframe 0 if it has one), with the positions and velocities
        of the joints (hinge, slide, free) present by name and kind in both models copied from
        ``old_data``, sim time carried on, integrators held and forwarded; and the report of the
        reload (``trajectory_kept`` left for the simulation to set). Reads the old state only."""
        twin, controller = prepared.twin, prepared.controller
        old_joints = {name: jid for jid, name in model_joints(old_model)}
        data = mujoco.MjData(twin.model)
        if twin.model.nkey > 0:
            mujoco.mj_resetDataKeyframe(twin.model, data, 0)
        new_names = [name for _, name in model_joints(twin.model)]
        kept = []
        for jid, name in model_joints(twin.model):
            old = old_joints.get(name)
            if old is None or old_model.jnt_type[old] != twin.model.jnt_type[jid]:
                continue
            data.qpos[twin.model.jnt_qposadr[jid]] = old_data.qpos[old_model.jnt_qposadr[old]]
            data.qvel[twin.model.jnt_dofadr[jid]] = old_data.qvel[old_model.jnt_dofadr[old]]
            kept.append(self.joint_map.to_ros(name))
        _carry_free_joints(old_model, old_data, twin.model, data)
        data.time = old_data.time
        controller.hold_integrators(twin.model, data)
        mujoco.mj_forward(twin.model, data)
        report = ReloadReport(
            twin.path, len(new_names), twin.model.nu, kept,
            [self.joint_map.to_ros(n) for n in new_names if n not in old_joints],
            [self.joint_map.to_ros(n) for n in old_joints if n not in new_names], prepared.applied)
        return data, report

    def adopt(self, prepared: PreparedReload) -> None:
        """``prepared``'s overrides, gains source and scene are the current ones from now on (its
        model was swapped in)."""
        self.overrides, self.gains_source = prepared.overrides, prepared.gains_source
        if prepared.scene is not None:
            self.scene = prepared.scene


def prepare_reload(sim, *args, **kwargs) -> PreparedReload:
    """``sim.prepare_reload(*args, **kwargs)``: kept for one release (the free function before the
    reloader object); call the simulation's method."""
    return sim.prepare_reload(*args, **kwargs)


def apply_reload(sim, prepared: PreparedReload) -> ReloadReport:
    """``sim.apply_reload(prepared)``: kept for one release; call the simulation's method."""
    return sim.apply_reload(prepared)
