"""The base's wheel slip in a predicted run (ROS-free; issue 37, "the preview flags a goal that would
slide the base").

**Slip** is how far the base's predicted pose is from where its drive wheels' turn takes it: the pose
dead-reckoned from the start with the differential drive's kinematics (each step, forward ``r (dl +
dr) / 2`` and turn ``r (dr - dl) / s`` for the wheels' angle increments ``dl``, ``dr`` rad, ``r`` the wheel
radius and ``s`` the separation, m, as :class:`~shadow_twin.simulation.mobile_base.SimMobileBase` measures
them on the model), against the base's predicted pose: the distance between their positions, m. A base
held still while the arm swings and pushed across the floor slips by all it moves (the issue's case: 41
mm under a +-1 rad, pi rad/s swing at wheel friction 0.5). Only goals without a base part are judged
(the base commanded to stand): a driving base slips too, the more the harder it accelerates (the
preview's cell, its soft wheel contacts: 7 mm over 0.5 m in 3 s, 26 mm over 2 m in 3 s, 51 mm over 1 m
in 1.5 s; the calibration protocol steps the speed at 3-6 m/s^2 on purpose), and a base still coasting
from its last goal skids as its drive stops it. The goal fails (``base_slip``) at the first step past
``base.max_slip`` (m; 0, the default, turns the check off: the demo's and the protocol's arm swings show
the base's slide on purpose, and no MiR250 figure says how much is too much: a lab sets its own).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from shadow_twin.simulation.mobile_base import SimMobileBase


@dataclass(frozen=True)
class BaseSlip:
    """The first step past the limit: ``time`` s, ``slip`` m, ``allowed`` m (``base.max_slip``)."""

    time: float
    slip: float
    allowed: float

    def message(self) -> str:
        """One line naming the slip, the time and the limit."""
        return (f'the base slides {self.slip * 1000:.0f} mm on its wheels by t = {self.time:.3f} s, commanded to '
                f'stand (base.max_slip {self.allowed * 1000:.0f} mm)')


class WheelSlip:
    """The slip of predicted runs on ``model`` (module doc); inactive (:attr:`active` False) without a base."""

    def __init__(self, model: mujoco.MjModel) -> None:
        base = SimMobileBase.find(model)
        self.active = base is not None
        if base is not None:
            self.radius, self.separation = base.geometry.wheel_radius, base.geometry.wheel_separation
            self.wheels = [int(model.jnt_qposadr[model.joint(n).id]) for n in base.wheel_names]

    def slip(self, qpos: np.ndarray, poses: np.ndarray) -> np.ndarray:
        """(N,) slip, m, of the states ``qpos`` ((N, nq)) whose base poses are ``poses`` ((N, 3) x, y m, yaw
        rad); the dead reckoning starts at the first."""
        left, right = np.diff(qpos[:, self.wheels[0]]), np.diff(qpos[:, self.wheels[1]])
        forward = self.radius * (left + right) / 2.0
        turn = self.radius * (right - left) / self.separation
        yaw = poses[0, 2] + np.concatenate([[0.0], np.cumsum(turn)])
        middle = yaw[:-1] + turn / 2.0
        x = poses[0, 0] + np.concatenate([[0.0], np.cumsum(forward * np.cos(middle))])
        y = poses[0, 1] + np.concatenate([[0.0], np.cumsum(forward * np.sin(middle))])
        return np.hypot(poses[:, 0] - x, poses[:, 1] - y)

    def first(self, times: np.ndarray, qpos: np.ndarray, poses: np.ndarray | None,
              max_slip: float) -> tuple[float, BaseSlip | None]:
        """(the largest slip, m; the first step past ``max_slip`` m, or None) of a run (``times`` (N,) s,
        ``qpos`` (N, nq), ``poses`` (N, 3)); (0, None) without a base or with ``max_slip`` 0."""
        if not self.active or poses is None or len(times) < 2 or max_slip <= 0:
            return 0.0, None
        slip = self.slip(qpos, poses)
        past = np.flatnonzero(slip > max_slip)
        if not len(past):
            return float(slip.max()), None
        n = int(past[0])
        return float(slip.max()), BaseSlip(float(times[n]), float(slip[n]), float(max_slip))
