"""The robot model, ROS-free: MJCF loading (includes, meshes, Shadow's symlink stubs), named
model parameters (MJCF physical values) read and set in place on the compiled model, calibrated
MJCF writing (``mjcf``), the built-in models (``builtin/``), and ROS <-> MJCF joint names (``joint_map``)."""

from shadow_twin.model.joint_map import JointNameMap
from shadow_twin.model.mjcf import ParameterTarget, TwinModel, builtin_model_path

__all__ = ['JointNameMap', 'ParameterTarget', 'TwinModel', 'builtin_model_path']
