"""Control, ROS-free: the simulated effort controller installed in the MuJoCo actuators
(``controller``), joint trajectories and their sampling as the joint trajectory
controller does (``trajectory``), the JTC's goal validation, tolerances and result
codes (``jtc``), the mobile base's goals and tracking (``base``), and splitting a twin goal among
the robot's controllers (``twin_split``). The old flat module names stay importable for one
release (:mod:`shadow_twin.common.moved`)."""

from shadow_twin.common.moved import install as _install_moved
from shadow_twin.control.controller import ControllerGains, SimController
from shadow_twin.control.trajectory import JointTrajectory

__all__ = ['ControllerGains', 'JointTrajectory', 'SimController']

_install_moved()
