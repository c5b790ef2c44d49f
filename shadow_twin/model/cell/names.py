"""Joint and body names of the cell (MiR250 + cabinet + UR5 + hand), shared by its configuration,
assembly and mock hardware models and by the modules that use the cell.

See :mod:`shadow_twin.model.cell.assembly` for the cell itself.
"""

from __future__ import annotations

#: Joint names of the UR5 as ur_robot_driver publishes them (before the arm prefix).
UR5_JOINTS = ('shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint',
              'wrist_1_joint', 'wrist_2_joint', 'wrist_3_joint')
#: The base's free joint (the base pose; not a published joint state).
BASE_FREE_JOINT = 'base_free'
#: Driven (velocity-controlled) wheel joints of the MiR250.
BASE_WHEEL_JOINTS = ('left_wheel_joint', 'right_wheel_joint')
#: The MJCF custom numeric holding the base drive's command latency, s (``BaseConfig.command_latency``;
#: read by ``SimMobileBase``).
LATENCY_NUMERIC = 'base_command_latency'
#: Passive caster joints of the MiR250.
BASE_CASTER_JOINTS = tuple(f'{c}_caster_{j}_joint' for c in ('fl', 'fr', 'bl', 'br') for j in ('rotation', 'wheel'))
#: Root body of the arm in ur5.xml and of the hand (Shadow's naming).
ARM_ROOT, HAND_ROOT = 'base_link', 'rh_forearm'
#: Name of the arm's root body in the cell when the arm prefix is empty (see :mod:`shadow_twin.model.cell.assembly`).
ARM_ROOT_UNPREFIXED = 'ur5_base_link'


def arm_joint_names(prefix: str = '') -> list[str]:
    """The cell's six UR5 joint names with ``prefix`` (e.g. ``ra_shoulder_pan_joint``), base to tool."""
    return [prefix + name for name in UR5_JOINTS]


def base_free_joint_name() -> str:
    """Name of the base's free joint (``base_free``): its qpos is the base pose (x y z, quat w x y z)."""
    return BASE_FREE_JOINT


def arm_root_name(prefix: str = '') -> str:
    """Name of the arm's root body in the cell (``P base_link``, or ``ur5_base_link`` with no prefix)."""
    return prefix + ARM_ROOT if prefix else ARM_ROOT_UNPREFIXED
