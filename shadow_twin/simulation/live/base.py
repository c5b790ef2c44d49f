"""Mobile-base commands of :class:`~shadow_twin.simulation.live.simulation.LiveSimulation`: velocity
commands, placing the base, stopping it, its odometry. :class:`MobileBaseCommands` is a mixin of
``LiveSimulation``: its methods use the simulation's lock, data and ``base``
(a :class:`~shadow_twin.simulation.mobile_base.SimMobileBase`, None without one)."""

from __future__ import annotations

import math

import mujoco

from shadow_twin.common.errors import ConfigError
from shadow_twin.simulation.mobile_base import BaseOdometry


class MobileBaseCommands:
    """The mobile-base methods of :class:`~shadow_twin.simulation.live.simulation.LiveSimulation` (a mixin;
    each takes its lock)."""

    def command_base(self, v: float, omega: float, sent: float | None = None) -> tuple[float, float]:
        """Velocity command for the base: forward ``v`` (m/s), yaw rate ``omega`` (rad/s), sent
        at sim time ``sent`` (s; its stamp, see :meth:`_stamp_time`). It takes effect the base's
        command latency after it was sent, or now if that has passed (on arrival for a model
        without latency), and lapses ``base.command_timeout`` s of sim time later.
        Returns the command as applied (saturated). Raises ConfigError when the model has no base."""
        with self.lock:
            if self.base is None:
                raise ConfigError(f'{self.path.name} has no mobile base (no drive wheel joints)')
            now = float(self.data.time)
            sent = self._stamp_time(sent)
            if not self.base.command_latency:       # without latency a command takes effect when it arrives
                sent = min(sent, now)
            return tuple(self.base.command((v, omega), sent, received=now))

    def place_base(self, x: float, y: float, yaw: float) -> None:
        """Put the base at (``x`` m, ``y`` m, ``yaw`` rad) in its odometry frame (the world), at
        rest and without a command (re-anchoring the sim base to the real one). Raises ConfigError
        when the model has no base, ValueError for a value that is not finite."""
        if not all(math.isfinite(float(v)) for v in (x, y, yaw)):
            raise ValueError(f'base pose ({x}, {y}, {yaw}) is not finite')
        with self.lock:
            if self.base is None:
                raise ConfigError(f'{self.path.name} has no mobile base (no drive wheel joints)')
            self.base.place(self.data, x, y, yaw)
            mujoco.mj_forward(self.model, self.data)

    def stop_base(self) -> None:
        """Drop the base's velocity command in force and those held back (the wheels stop);
        nothing without a base."""
        with self.lock:
            if self.base is not None:
                self.base.stop()

    def set_base_command_timeout(self, seconds: float) -> None:
        """From now on a base velocity command lapses after ``seconds`` s of sim time."""
        with self.lock:
            self.base_command_timeout = float(seconds)
            if self.base is not None:
                self.base.command_timeout = self.base_command_timeout

    def base_odometry(self) -> BaseOdometry | None:
        """The base's pose and twist now (see ``SimMobileBase.odometry``); None without a base."""
        with self.lock:
            return None if self.base is None else self.base.odometry(self.data)
