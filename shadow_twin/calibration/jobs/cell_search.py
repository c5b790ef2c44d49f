"""What a cell group's screening and fit simulate (issue 39): its runs on the model with the parts they need not
move frozen, when that is measured to keep the objective of the model as given within
:data:`~shadow_twin.calibration.scoring.reduced.LOAD_TOLERANCE`; else the whole model.

Every part of the cell hangs from the base's free joint: nothing can be removed without changing what the
compared joints and the base do. A part the runs hold still can be *frozen* (its joints welded where each run
starts them, :func:`~shadow_twin.model.reduction.frozen_spec`): its mass and inertia still load the arm and the
base. The hand for the arm group ("the arm runs on the arm and the hand's load"); the arm and the hand for the
base group when none of its runs moves the arm ("the base on the base and the arm's load"). Validation always
runs on the whole model (:mod:`~shadow_twin.calibration.jobs.cell_job`).
"""

from __future__ import annotations

import logging

import mujoco

from shadow_twin.calibration.scoring import reduced
from shadow_twin.calibration.scoring.evaluator_set import EvaluatorSet
from shadow_twin.control.controller import SimController
from shadow_twin.model.reduction import frozen_spec, subtree_joints

log = logging.getLogger(__name__)


def frozen_joints(job, group: str, run_names: list[str]) -> list[str]:
    """MJCF names of the joints ``group``'s runs need not move (module doc), for a
    :class:`~shadow_twin.calibration.jobs.cell_job.CellCalibrationJob` ``job``."""
    model = job.twin.model

    def body_of(joint: str) -> int:
        return int(model.jnt_bodyid[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint)])
    # the arm's joints from the base to the flange (bodies are numbered parents first)
    arm = sorted((job.controller.joint_map.to_mjcf(j) for j in job.arm_joints), key=body_of)
    runs = {r.name: r for r in job.spec.protocol.runs}
    if group == 'base' and not any(runs[n].arm.moves for n in run_names):
        return subtree_joints(model, model.body(body_of(arm[0])).name)
    return [j for j in subtree_joints(model, model.body(body_of(arm[-1])).name) if j not in arm]


def frozen_part(job, part, joints: list[str]):
    """``part`` (a run's evaluator) on the model with ``joints`` welded where its run starts them."""
    to_mjcf = job.controller.joint_map.to_mjcf
    start = {to_mjcf(j): float(q) for j, q in zip(job.controller.joint_names, part.simulator.start_positions)}
    model = frozen_spec(job.twin.spec, joints, start, job.twin.model).compile()
    return part.on_model(model, SimController(model, job.controller.gains, job.controller.joint_map))


def group_search_model(job, group: str, run_names: list[str], evaluator: EvaluatorSet) -> EvaluatorSet:
    """The evaluator ``group``'s screening and fit run on (module doc); the decision and what it measured are
    logged: the joints frozen, the degrees of freedom left, the gap of the model as given's objective and one
    rollout batch's time each way."""
    joints = frozen_joints(job, group, run_names)
    if not joints:
        return evaluator
    frozen = EvaluatorSet([frozen_part(job, part, joints) for part in evaluator.parts], evaluator.recording_weights)
    gap, costs = reduced.measure_gap(evaluator, frozen, job.spec.workers)
    what = (f'{group}: {len(joints)} joints frozen ({joints[0]} ... {joints[-1]}), '
            f'{frozen.parts[0].simulator.model.nv} of {job.twin.model.nv} dofs; the model as given scores '
            f'{100 * gap:+.3f} % on it, a rollout batch {costs["reduced"]:.2f} s against {costs["full"]:.2f} s')
    if abs(gap) > reduced.LOAD_TOLERANCE:
        log.info('search model: the whole model: %s (more than %g %%)', what, 100 * reduced.LOAD_TOLERANCE)
        return evaluator
    log.info('search model: %s', what)
    return frozen
