"""Control, ROS-free: the simulated effort controller installed in the MuJoCo actuators
(``controller``), joint trajectories and their sampling as the joint trajectory
controller does (``trajectory``), the JTC's goal validation, tolerances and result
codes (``jtc``), and the mobile base's goals and tracking (``base``); the twin goal's split among the robot's
controllers is :mod:`shadow_twin.twin`'s. The old flat module names stay importable for one
release (:mod:`shadow_twin.common.moved`)."""

from shadow_twin.common.moved import install as _install_moved
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.control.trajectory import JointTrajectory

__all__ = ['ControllerGains', 'JointTrajectory', 'SimController']

_install_moved()
