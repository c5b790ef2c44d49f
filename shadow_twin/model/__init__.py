"""The robot model, ROS-free: MJCF loading (includes, meshes, Shadow's symlink stubs) and calibrated
MJCF writing (``mjcf``), named model parameters (MJCF physical values) read and set in place on the
compiled model (``calibratable``), the built-in models (``builtin/``), UR arms (``ur``), and ROS <-> MJCF
joint names (``joint_map``). The old flat module names stay importable for one release
(:mod:`shadow_twin.common.moved`)."""

from shadow_twin.common.moved import install as _install_moved
from shadow_twin.model.calibratable import ParameterTarget
from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.model.mjcf import TwinModel, builtin_model_path

__all__ = ['JointNameMap', 'ParameterTarget', 'TwinModel', 'builtin_model_path']

_install_moved()
