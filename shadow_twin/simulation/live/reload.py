"""Reloading a :class:`~shadow_twin.simulation.live.simulation.LiveSimulation`'s model: build the new model
(:func:`prepare_reload`, off the lock) and swap it in, carrying the state over by joint name
(:func:`apply_reload`, under the lock). The simulation's ``prepare_reload``/``apply_reload``
methods delegate here."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Mapping

import mujoco
import numpy as np

from shadow_twin.control.controller import ControllerGains
from shadow_twin.simulation.overrides import ParameterOverrides
from shadow_twin.simulation.samples import PreparedReload, ReloadReport
from shadow_twin.simulation.trajectory_queue import STOPPED

if TYPE_CHECKING:
    from shadow_twin.simulation.live.simulation import LiveSimulation

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


def prepare_reload(sim: LiveSimulation, path: str | os.PathLike | None = None,
                   overrides: ParameterOverrides | Mapping | None | object = UNCHANGED,
                   gains: ControllerGains | str | os.PathLike | None | object = UNCHANGED,
                   max_bytes: int | None = None) -> PreparedReload:
    """:meth:`LiveSimulation.prepare_reload` of ``sim`` (which see): touches no state of ``sim``."""
    overrides = (sim.overrides if overrides is UNCHANGED else
                 overrides if isinstance(overrides, ParameterOverrides) else ParameterOverrides(overrides))
    gains = sim._gains_source if gains is UNCHANGED else gains
    twin, controller, applied = sim._build(path if path is not None else sim.path, overrides, gains,
                                           max_bytes)
    return PreparedReload(twin, controller, applied, overrides, gains)


def apply_reload(sim: LiveSimulation, prepared: PreparedReload) -> ReloadReport:
    """:meth:`LiveSimulation.apply_reload` of ``sim`` (which see), under ``sim.lock``."""
    twin, controller, applied = prepared.twin, prepared.controller, prepared.applied
    with sim.lock:
        old_model, old_data = sim.model, sim.data
        old_joints = {name: jid for jid, name in model_joints(old_model)}
        old_hold = dict(zip(sim.controller.joint_names, sim._hold))
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
            kept.append(sim.joint_map.to_ros(name))
        _carry_free_joints(old_model, old_data, twin.model, data)
        data.time = old_data.time
        controller.hold_integrators(twin.model, data)
        mujoco.mj_forward(twin.model, data)

        report = ReloadReport(
            twin.path, len(new_names), twin.model.nu, kept,
            [sim.joint_map.to_ros(n) for n in new_names if n not in old_joints],
            [sim.joint_map.to_ros(n) for n in old_joints if n not in new_names], applied)
        active = sim._active or sim._finished
        sim.twin, sim.controller, sim.applied_overrides, sim.data = twin, controller, applied, data
        sim.overrides, sim._gains_source = prepared.overrides, prepared.gains_source
        sim._index()
        sim._followed = {}                    # its columns are the old model's
        sim._hold = sim._hold_positions()
        for k, name in enumerate(sim.controller.joint_names):
            if name in old_hold:
                sim._hold[k] = old_hold[name]
        if active is not None:
            if all(j in sim._controlled_index for j in active.trajectory.joint_names):
                active.columns = np.array([sim._controlled_index[j]
                                           for j in active.trajectory.joint_names], dtype=int)
                report.trajectory_kept = True
            else:
                sim._queue.end(active.token, STOPPED)
                sim._active = sim._finished = None
                sim._hold = sim._hold_positions()
                report.trajectory_kept = False
        return report
