"""Rollouts that go unstable: found, kept quiet, and scored as failed, not as an error.

A parameter set can make MuJoCo's integration diverge (a huge gain, a negative damping...). MuJoCo
then warns (``mjWARN_BADQACC``: "Nan, Inf or huge value in QACC ... The simulation is unstable"),
resets the state to the model's ``qpos0`` and ``mujoco.rollout`` repeats that state to the end:
the positions stay finite, so the error against the recording would be a number that means
nothing. Such a rollout is found by its clock, which stops advancing (:func:`unstable_times`),
and its warning, which MuJoCo would print on stderr and append to MUJOCO_LOG.TXT in the working
directory, is collected instead (:func:`mujoco_warnings`).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import mujoco
import numpy as np

#: rad^2: the objective of a rollout that went unstable, above the error of any joints within their
#: ranges (a finite penalty: every optimiser of a calibration takes it, least squares included).
UNSTABLE_OBJECTIVE = 1e4

_HANDLER = threading.Lock()


@contextlib.contextmanager
def mujoco_warnings() -> Iterator[list[str]]:
    """``with`` block whose MuJoCo warnings are collected in the list it yields (not printed, not
    written to MUJOCO_LOG.TXT). The handler is process-wide: blocks are serialised."""
    messages: list[str] = []
    with _HANDLER:
        previous = mujoco.get_mju_user_warning()
        mujoco.set_mju_user_warning(messages.append)
        try:
            yield messages
        finally:
            mujoco.set_mju_user_warning(previous)


def unstable_times(state_times: np.ndarray, start: float, times: np.ndarray) -> list[float | None]:
    """Per rollout, where it went unstable: ``times[k]`` (s) of the first state whose clock did not
    advance, or None.

    Args:
        state_times: (M, nstep) the states' clock (element 0 of a full physics state), s.
        start: the clock of the initial state, s.
        times: (nstep,) the time each state stands for (e.g. ``time_from_start``), s.
    """
    clock = np.concatenate([np.full((state_times.shape[0], 1), start), state_times], axis=1)
    stalled = ~(np.diff(clock, axis=1) > 0)
    return [float(times[int(np.argmax(row))]) if row.any() else None for row in stalled]


def unstable_message(label: str, at: float, warnings: list[str]) -> str:
    """One line: ``label``'s simulation went unstable at ``at`` s, with MuJoCo's first warning."""
    said = f' (MuJoCo: {" ".join(warnings[0].split())})' if warnings else ''
    return (f'{label}: the simulation went unstable at t = {at:.3f} s of the trajectory{said}; no score '
            f'(check the model\'s and parameters\' gains, damping, armature and masses)')
