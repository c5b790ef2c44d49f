"""Batched rollouts on MuJoCo Warp (issue 39): ``--backend warp`` of ``shadow-twin calibrate`` and
``sensitivity``, for a GPU; on Warp's CPU device for testing. The CPU path (``mujoco.rollout``) stays the
default.

:func:`warp_rollout` takes what ``mujoco.rollout.rollout`` takes (one compiled model per parameter set, the
initial full physics state, the controls) and gives each state's time and ``qpos``. The parameter sets become
one Warp model whose fields that differ between them are batched per world (``mujoco_warp.put_model``'s
``batch_sizes``: damping, friction loss, stiffness, spring reference, ranges, the servos' gains, contact
parameters, masses and what MuJoCo derives from them); every world steps at once.

**Tolerance.** MuJoCo Warp computes in 32-bit floats, ``mujoco.rollout`` in 64: the two paths agree within
float32's rounding carried through the run (measured on the hand: the positions within 1e-3 rad over 1 s and
the objective within 1 % of itself: ``test/core/simulation/test_warp_rollout.py``), not bit for bit. A world that
diverges (non-finite positions) keeps its time from there on, as MuJoCo's reset of a diverged run does, so the
evaluator's stability check names it.

MuJoCo Warp and Warp are optional (``pip install mujoco-warp``); the first rollout on a device compiles
Warp's kernels (about 20 s on this 2-core PC's CPU, cached in ``~/.cache/warp`` afterwards).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import mujoco
import numpy as np

from shadow_twin.common.errors import ConfigError

FULL_STATE = mujoco.mjtState.mjSTATE_FULLPHYSICS
BACKENDS = ('cpu', 'warp')


def warp_unavailable() -> str | None:
    """None when MuJoCo Warp can run here, else why not (one line)."""
    try:
        import warp  # lazy: Warp's import and initialisation, only for --backend warp
        warp.config.quiet = True        # no banner, no line per compiled kernel module
        import mujoco_warp  # noqa: F401  lazy: as above
    except ImportError as exc:
        return f'MuJoCo Warp is not installed ({exc}); pip install mujoco-warp'
    return None


def default_device() -> str:
    """Warp's preferred device: ``cuda:0`` where a GPU is, else ``cpu``."""
    import warp as wp  # lazy: only for --backend warp
    wp.config.quiet = True          # no line per compiled kernel module
    wp.init()
    return str(wp.get_preferred_device())


def _batched_fields() -> list[str]:
    """Names of the MuJoCo Warp model fields that take a per-world leading dimension (``*``)."""
    import mujoco_warp as mjw  # lazy: only for --backend warp
    from mujoco_warp._src import warp_util, types
    del mjw
    out = []
    for f in dataclasses.fields(types.Model):
        shape = getattr(f.type, 'shape', ()) if warp_util.is_array_spec(f.type) else ()
        if shape and shape[0] == '*':
            out.append(f.name)
    return out


def differing_fields(models: Sequence[mujoco.MjModel]) -> dict[str, np.ndarray]:
    """{field: (M, ...) its values per model} of the batchable fields in which ``models`` differ.

    Raises:
        ConfigError: the models differ in a field MuJoCo Warp cannot batch (named).
    """
    base = models[0]
    batched = set(_batched_fields())
    out = {}
    for name in dir(base):
        if name.startswith('_'):
            continue
        value = getattr(base, name, None)
        if not isinstance(value, np.ndarray) or value.dtype.kind not in 'fiu':
            continue
        if all(np.array_equal(getattr(m, name), value) for m in models[1:]):
            continue
        if name not in batched:
            raise ConfigError(f'--backend warp: the parameter sets change model field {name}, which MuJoCo Warp '
                              f'does not batch per world; use --backend cpu')
        out[name] = np.stack([getattr(m, name) for m in models])
    return out


def warp_rollout(models: Sequence[mujoco.MjModel], initial_state: np.ndarray, controls: np.ndarray,
                 device: str | None = None) -> np.ndarray:
    """Roll every model out from ``initial_state`` under ``controls``, all worlds at once on ``device``.

    Args:
        models: M compiled models of one structure (copies of one model with parameters set).
        initial_state: MuJoCo's full physics state (``mjSTATE_FULLPHYSICS``) to start from.
        controls: (M, nstep, nu) ``ctrl`` of each step.
        device: a Warp device ('cpu', 'cuda:0'; default: Warp's preferred one).
    Returns:
        (M, nstep, 1 + nq): each step's time (s) and ``qpos`` after it (the columns ``mujoco.rollout``'s
        states begin with).
    Raises:
        ConfigError: MuJoCo Warp missing, models differing in a field it cannot batch, or a model it does
            not support (its message, one line).
    """
    why = warp_unavailable()
    if why:
        raise ConfigError(f'--backend warp: {why}')
    import warp as wp  # lazy: only for --backend warp
    import mujoco_warp as mjw  # lazy: only for --backend warp
    wp.config.quiet = True          # no line per compiled kernel module
    base, count = models[0], len(models)
    controls = np.asarray(controls, dtype=np.float32).reshape(count, -1, base.nu)
    nstep = controls.shape[1]
    batched = differing_fields(models)
    data = mujoco.MjData(base)
    mujoco.mj_setState(base, data, initial_state, FULL_STATE)
    mujoco.mj_forward(base, data)
    with wp.ScopedDevice(device or default_device()):
        try:
            model = mjw.put_model(base, batch_sizes={name: count for name in batched})
        except (NotImplementedError, ValueError) as exc:
            raise ConfigError(f'--backend warp: MuJoCo Warp cannot run this model: {exc}') from None
        for name, values in batched.items():     # (M, n) scalars or (M, n, k) vectors per world
            field = getattr(model, name)
            scalar = wp.types.type_is_scalar(field.dtype)
            values = values.reshape(count, -1) if scalar else values.reshape(count, field.shape[1], -1)
            kind = np.int32 if wp.types.type_is_int(field.dtype) else np.float32
            setattr(model, name, wp.array(values.astype(kind), dtype=field.dtype))
        state = mjw.put_data(base, data, nworld=count)
        ctrl = wp.array(np.ascontiguousarray(controls.transpose(1, 0, 2)), dtype=float)
        qpos = wp.empty((nstep, count, base.nq), dtype=float)
        times = wp.empty((nstep, count), dtype=float)
        for k in range(nstep):
            wp.copy(state.ctrl, ctrl[k])
            mjw.step(model, state)
            wp.copy(qpos[k], state.qpos)
            wp.copy(times[k], state.time)
        positions, clock = qpos.numpy().astype(float), times.numpy().astype(float)
    out = np.concatenate([clock.T[:, :, None], positions.transpose(1, 0, 2)], axis=2)
    bad = ~np.all(np.isfinite(out[:, :, 1:]), axis=2)         # a diverged world keeps its time from there
    for world in np.flatnonzero(bad.any(axis=1)):
        first = int(np.argmax(bad[world]))
        out[world, first:, 0] = out[world, first - 1, 0] if first else float(data.time)
    return out
