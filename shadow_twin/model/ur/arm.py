"""Every Universal Robots arm type as an MJCF, generated from UR's description files.

:func:`arm_xml` writes one type's standalone MJCF (the arm on a stand at the cell's mount height,
a floor); :func:`write_arm_mjcf` writes it to a file. The figures come from the type's three files
of UR's ROS 2 description (:mod:`shadow_twin.model.ur.description`) when one is given or installed,
else from the copy of those figures shipped with the project (:mod:`shadow_twin.model.ur.figures`),
so a new type is data, not code. The UR5 needs no description: ``shadow_twin/model/builtin/ur5.xml``
is this generator's output for ``ur5`` (test/core/model/test_ur_arms.py regenerates it). The generated file's header names the
sources and how each figure is derived (:mod:`shadow_twin.model.ur.arm_mjcf`).

Effort limits (N m, the description's ``max_effort``) are recorded in each motor's ``forcerange``
with ``forcelimited="false"``: not applied (see the header), but there for the trajectory checks
(:func:`effort_limits`, :func:`model_effort_limits`).
"""

from __future__ import annotations

import os
from pathlib import Path

import mujoco

from shadow_twin.common.errors import ConfigError, ModelError
from shadow_twin.common.files import write_text_atomic
from shadow_twin.model.mjcf import builtin_model_path
from shadow_twin.model.ur.arm_mjcf import BUILTIN_TYPE, generate_arm_xml
from shadow_twin.model.ur.description import JOINTS, UR_TYPES, check_arm_type, find_ur_description
from shadow_twin.model.ur.figures import arm_description

__all__ = ['UR_TYPES', 'arm_xml', 'effort_limits', 'find_ur_description', 'model_effort_limits',
           'write_arm_mjcf']

def arm_xml(arm_type: str, description: str | os.PathLike | None = None) -> str:
    """The standalone MJCF text of a UR arm type.

    Args:
        arm_type: one of :data:`UR_TYPES` (case-insensitive).
        description: a Universal_Robots_ROS2_Description checkout or its ``config`` folder; None:
            the UR5 is the built-in ``ur5.xml`` (its text), other types come from
            :func:`find_ur_description` (``SHADOW_TWIN_UR_DESCRIPTION``, then the ``ur_description``
            ROS package).
    Raises:
        ConfigError: an unknown type, no description found (one line saying where one may come
            from), or a description file that is missing or malformed.
    """
    arm_type = check_arm_type(arm_type)
    if description is None and arm_type == BUILTIN_TYPE:
        return builtin_model_path(BUILTIN_TYPE).read_text(encoding='utf-8')
    return generate_arm_xml(arm_description(arm_type, description))


def arm_spec(arm_type: str, description: str | os.PathLike | None = None) -> mujoco.MjSpec:
    """:func:`arm_xml` parsed into an ``MjSpec`` (ModelError if MuJoCo refuses it)."""
    xml = arm_xml(arm_type, description)
    try:
        return mujoco.MjSpec.from_string(xml)
    except Exception as exc:  # mujoco raises ValueError with its own message
        raise ModelError(f'the {arm_type} MJCF does not parse: {" ".join(str(exc).split())}') from None


def write_arm_mjcf(arm_type: str, out: str | os.PathLike, description: str | os.PathLike | None = None,
                   force: bool = False) -> tuple[Path, mujoco.MjModel]:
    """Write the standalone MJCF of ``arm_type`` (:func:`arm_xml`) to ``out`` atomically, compiled first.

    Returns:
        (path written, compiled model).
    Raises:
        ConfigError: ``out`` exists and ``force`` is False, is a directory, or cannot be written; see
            :func:`arm_xml`.
        ModelError: the MJCF does not compile. Nothing is written on any error.
    """
    out = Path(out)
    if out.is_dir():
        raise ConfigError(f'{out} is a directory')
    if out.exists() and not force:
        raise ConfigError(f'{out} exists; choose another file or pass --force to overwrite it')
    xml = arm_xml(arm_type, description)
    try:
        model = mujoco.MjModel.from_xml_string(xml)
    except Exception as exc:
        raise ModelError(f'the {arm_type} MJCF does not compile: {" ".join(str(exc).split())}') from None
    try:
        return write_text_atomic(out, xml), model
    except OSError as exc:
        raise ConfigError(f'cannot write {out}: {exc.strerror or exc}') from None


def model_effort_limits(model: mujoco.MjModel) -> dict[str, float]:
    """{joint name: N m} of the motors that record an effort limit without applying it
    (``forcelimited`` false, ``forcerange`` (-L, L) with L > 0; the arms of this module and the
    cell's arm, prefixed). Joints of other actuators are absent."""
    out = {}
    for a in range(model.nu):
        low, high = model.actuator_forcerange[a]
        if (model.actuator_forcelimited[a] or high <= 0 or low != -high
                or model.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT):
            continue
        out[model.joint(int(model.actuator_trnid[a, 0])).name] = float(high)
    return out


def effort_limits(arm_type: str, description: str | os.PathLike | None = None) -> dict[str, float]:
    """{joint: N m} of ``arm_type``: the description's ``max_effort`` (joint_limits.yaml); the UR5
    without a description: those recorded in the built-in ur5.xml (150 N m shoulder pan, shoulder
    lift, elbow; 28 N m wrists). Raises ConfigError as :func:`arm_xml`."""
    arm_type = check_arm_type(arm_type)
    if description is None and arm_type == BUILTIN_TYPE:
        return model_effort_limits(mujoco.MjModel.from_xml_path(str(builtin_model_path(BUILTIN_TYPE))))
    desc = arm_description(arm_type, description)
    return {joint: desc.limits[joint].effort for joint in JOINTS}
