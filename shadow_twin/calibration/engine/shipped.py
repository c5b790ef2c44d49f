"""The evaluator as shipped to the nodes of a Ray cluster (:mod:`~shadow_twin.calibration.engine.executor`):
pickled once (:func:`payload`), unpickled once per worker process and kept (:func:`load`), and
proved to run the same thing as this machine (:func:`fingerprint`, :func:`mismatch`, :func:`probe`).

:func:`load` and :func:`probe` run in Ray worker processes; Ray is imported there only.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import socket
from typing import Mapping

import mujoco
import numpy as np

from shadow_twin.calibration.scoring.evaluator_set import parts_of

#: Evaluators each Ray worker process keeps unpickled (newest last).
CACHE_SIZE = 4
#: Per worker process: {key: evaluator}, filled by :func:`load`.
_CACHE: dict[str, object] = {}


class _Pickler(pickle.Pickler):
    """Pickles an evaluator without the MjSpec of its TwinModel (only used to write a calibrated
    MJCF on the driver; it cannot be pickled)."""

    def reducer_override(self, obj):
        if isinstance(obj, mujoco.MjSpec):
            return type(None), ()
        return NotImplemented


def payload(evaluator) -> bytes:
    """``evaluator`` pickled for the workers (its TwinModel's ``spec`` becomes None there)."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(evaluator)
    return buffer.getvalue()


def fingerprint(evaluator) -> dict[str, str]:
    """{'mujoco': MuJoCo version, 'model': SHA-256 of the MJB of every recording's compiled model}.

    Computed by the MuJoCo of the process that runs it, so a node with another build reports
    another hash even for the same pickled model.
    """
    digest = hashlib.sha256()
    for part in parts_of(evaluator):
        model = part.simulator.model
        buffer = np.empty(mujoco.mj_sizeModel(model), dtype=np.uint8)
        mujoco.mj_saveModel(model, None, buffer)
        digest.update(buffer.tobytes())
    return {'mujoco': mujoco.__version__, 'model': digest.hexdigest()}


def mismatch(expected: Mapping[str, str], found: Mapping[str, str], where: str) -> str | None:
    """One line saying how ``found`` (a node's :func:`fingerprint`) differs from ``expected``
    (this machine's), or None when they are the same."""
    if found.get('mujoco') != expected.get('mujoco'):
        return (f'Ray node {where} runs MuJoCo {found.get("mujoco")}, this machine {expected.get("mujoco")}: '
                f'install the same version on every node (refused before any rollout)')
    if found.get('model') != expected.get('model'):
        return (f'Ray node {where} compiles the model to another hash ({str(found.get("model"))[:12]}, here '
                f'{str(expected.get("model"))[:12]}): same MuJoCo and model needed (refused before any rollout)')
    return None


class WorkerMismatch(RuntimeError):
    """Raised in a Ray worker whose MuJoCo or model differs from the driver's."""


def _node_name() -> str:
    return socket.gethostname()


def _unpickled(box: list):
    """The evaluator in the object store (``box[0]``), unpickled in this worker process."""
    import ray   # lazy: only Ray workers run this
    return pickle.loads(ray.get(box[0]))


def load(key: str, box: list, expected: Mapping[str, str]):
    """The evaluator ``key`` in this worker process: from :data:`_CACHE`, else fetched from the
    object store (``box[0]``), unpickled and checked against ``expected``.

    Raises:
        WorkerMismatch: it cannot be unpickled here, or its :func:`fingerprint` differs.
    """
    evaluator = _CACHE.get(key)
    if evaluator is None:
        try:
            evaluator = _unpickled(box)
        except Exception as exc:  # another MuJoCo/numpy build may not even unpickle it
            raise WorkerMismatch(f'Ray node {_node_name()} cannot load the evaluator ({type(exc).__name__}: '
                                 f'{exc}); the same MuJoCo and shadow_twin are needed on every node') from None
        problem = mismatch(expected, fingerprint(evaluator), _node_name())
        if problem:
            raise WorkerMismatch(problem)
        while len(_CACHE) >= CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = evaluator
    return evaluator


def probe(key: str, box: list) -> tuple[str, dict]:
    """(node name, fingerprint of the evaluator as this node loads it): the check before any rollout."""
    evaluator = _CACHE.get(key)
    if evaluator is None:
        try:
            evaluator = _unpickled(box)
        except Exception as exc:
            return _node_name(), {'mujoco': f'{mujoco.__version__} (cannot load the evaluator: {exc})'}
    return _node_name(), fingerprint(evaluator)
