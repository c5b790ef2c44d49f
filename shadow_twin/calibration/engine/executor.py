"""One interface for evaluating a batch of parameter sets: local threads, or a Ray cluster.

Every batch of rollouts (a calibration's batches, a sensitivity screening, the identifiability
Jacobian) goes through an executor's :meth:`~LocalExecutor.evaluate`:

* :class:`LocalExecutor` (``local``, the default): the evaluator's own batched ``mujoco.rollout``
  on ``workers`` threads of this process, exactly as before.
* :class:`RayExecutor` (``--cluster ray://HOST:PORT``, ``--cluster HOST:PORT`` or ``--cluster
  auto``): the evaluator (model, controller, recording, alignment) is pickled once and put
  into Ray's object store; every batch is cut into one contiguous slice per cluster node,
  sized by its CPUs, and each slice is one Ray task that rolls it out with as many threads as
  the node has CPUs. A worker process unpickles an evaluator once and keeps it for the
  next batches (:mod:`~shadow_twin.calibration.engine.shipped`). The results come back in batch order.

Same answers: a rollout depends only on its own model copy, so a slice gives bit for bit the
objectives and residuals that the whole batch gives locally (``test/core/calibration/test_executor.py``),
provided every node runs the same MuJoCo build. That is checked before any rollout: one probe
task per node unpickles the evaluator and reports its MuJoCo version and the SHA-256 of the
compiled models (MJB as that node's MuJoCo writes them); any difference refuses the cluster
with one line (:class:`ClusterError`), and every task checks it again when it loads.

Faults: a task whose worker or node dies is retried by Ray (``max_retries``, on another node
when its node is gone); the batch completes once, so the calibration checkpoint holds each
evaluation once. A cluster that stops answering (head gone) raises :class:`ClusterError`: the
command prints one line and exits 2, and ``--resume`` continues on ``local`` or another cluster.

Ray is imported only when a cluster is asked for (``import ray`` inside functions).
"""

from __future__ import annotations

import logging
import socket
import time
import uuid
from typing import Mapping, Sequence
from urllib.parse import urlsplit

import numpy as np

from shadow_twin.calibration.scoring.evaluation import Score
from shadow_twin.calibration.engine.shipped import WorkerMismatch, fingerprint, load, mismatch, payload, probe
from shadow_twin.common.errors import ConfigError
from shadow_twin.model.calibratable import ParameterTarget

log = logging.getLogger(__name__)
LOCAL = 'local'
#: Seconds allowed to open a TCP connection to the cluster's address before giving up.
CONNECT_TIMEOUT = 5.0
#: Ray retries of a task whose worker process or node died.
MAX_RETRIES = 4
#: Attempts to join a ray:// cluster: the head's client server starts one server process per client,
#: and that start now and then fails (the process dies at once; its log is empty): a new attempt succeeds.
JOIN_ATTEMPTS = 3
#: s between two attempts to join.
JOIN_PAUSE = 1.0


class ClusterError(ConfigError):
    """The cluster cannot be used: unreachable, gone, or a node that differs (one line)."""


Batch = tuple[list[Score], 'np.ndarray | None']


class _Executor:
    """What both executors share: :meth:`bind`, and use in a ``with`` block (closed at its end)."""

    def bind(self, evaluator) -> 'BoundEvaluator':
        """``evaluator`` whose batch methods go through this executor (see :class:`BoundEvaluator`)."""
        return BoundEvaluator(evaluator, self)

    def close(self) -> None:
        """Release what the executor holds."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LocalExecutor(_Executor):
    """Evaluate batches in this process, on ``workers`` threads of ``mujoco.rollout``.

    Args:
        workers: threads (>= 1).
    """

    name = LOCAL

    def __init__(self, workers: int = 1) -> None:
        self.workers = max(1, int(workers))

    def prepare(self, evaluator) -> None:
        """Nothing to ship locally."""

    def evaluate(self, evaluator, parameter_sets: Sequence[Mapping[ParameterTarget, float]],
                 residuals: bool = False) -> Batch:
        """Score each parameter set with ``evaluator`` (an Evaluator, EvaluatorSet or BaseEvaluator).

        Returns (M scores, (M, R) residuals, rad, or None without ``residuals``), as the evaluator's
        ``evaluate_scored_residuals`` / ``evaluate`` give them.
        """
        if residuals:
            return evaluator.evaluate_scored_residuals(list(parameter_sets), nthread=self.workers)
        return evaluator.evaluate(list(parameter_sets), nthread=self.workers), None


class BoundEvaluator:
    """An evaluator whose ``evaluate``, ``evaluate_scored_residuals`` and ``evaluate_residuals``
    go through an executor (``nthread`` is then the executor's business and ignored); every other
    attribute is the evaluator's. For code that takes an evaluator, e.g. the identifiability
    analysis."""

    def __init__(self, evaluator, executor) -> None:
        self._evaluator, self._executor = evaluator, executor

    def __getattr__(self, name: str):
        return getattr(self._evaluator, name)

    def evaluate(self, parameter_sets, nthread: int = 1, keep_positions: bool = False) -> list[Score]:
        if keep_positions:   # positions are for plots: one or two rollouts, here
            return self._evaluator.evaluate(parameter_sets, nthread, keep_positions=True)
        return self._executor.evaluate(self._evaluator, parameter_sets)[0]

    def evaluate_scored_residuals(self, parameter_sets, nthread: int = 1) -> tuple[list[Score], np.ndarray]:
        return self._executor.evaluate(self._evaluator, parameter_sets, residuals=True)

    def evaluate_residuals(self, parameter_sets, nthread: int = 1) -> np.ndarray:
        return self._executor.evaluate(self._evaluator, parameter_sets, residuals=True)[1]


def _evaluate_slice(key: str, box: list, expected: Mapping[str, str], parameter_sets: list,
                    residuals: bool, nthread: int) -> Batch:
    """One slice of a batch on a Ray worker: as :meth:`LocalExecutor.evaluate` with ``nthread``."""
    return LocalExecutor(nthread).evaluate(load(key, box, expected), parameter_sets, residuals)


def split_sizes(count: int, cpus: Sequence[int]) -> list[int]:
    """Slice sizes of a batch of ``count`` over nodes with ``cpus`` CPUs each, proportional to
    them (largest remainders; ties to the first nodes); sizes sum to ``count``."""
    weights = np.asarray(cpus, dtype=float)
    share = count * weights / weights.sum()
    sizes = np.floor(share).astype(int)
    for i in np.argsort(-(share - sizes), kind='stable')[:count - int(sizes.sum())]:
        sizes[i] += 1
    return [int(s) for s in sizes]


def parse_cluster(cluster: str | None) -> str | None:
    """The Ray address of ``--cluster`` (None: local). Accepts '', 'local', 'auto',
    'ray://HOST:PORT' and 'HOST:PORT'. Raises ClusterError for anything else."""
    text = (cluster or '').strip()
    if text in ('', LOCAL):
        return None
    if text == 'auto':
        return text
    try:
        parts = urlsplit(text if '://' in text else f'ray://{text}')
        port = parts.port
    except ValueError:
        port, parts = None, None
    if parts is None or parts.scheme != 'ray' or not parts.hostname or port is None or parts.path not in ('', '/'):
        raise ClusterError(f'--cluster {text!r}: use ray://HOST:PORT (the head\'s client port, e.g. 10001), '
                           f'HOST:PORT (its GCS port, e.g. 6379), auto or local')
    return text


def last_line(exc: BaseException, limit: int = 200) -> str:
    """The last non-empty line of ``exc``'s message, whitespace collapsed, at most ``limit`` characters.

    Ray passes a server's whole traceback in its message; its last line names what failed.
    """
    lines = [' '.join(line.split()) for line in str(exc).splitlines()]
    lines = [line for line in lines if line] or [type(exc).__name__]
    return lines[-1][:limit]


def _reachable(address: str, timeout: float) -> None:
    """Raise ClusterError unless a TCP connection to ``address``'s host and port opens in ``timeout`` s."""
    parts = urlsplit(address if '://' in address else f'ray://{address}')
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout):
            pass
    except OSError as exc:
        raise ClusterError(f'--cluster {address}: no Ray cluster answers there ({exc.strerror or exc}); start '
                           f'one with `ray start --head` or run without --cluster') from None


class RayExecutor(_Executor):
    """Evaluate batches as Ray tasks over the nodes of a cluster (see the module doc).

    Args:
        address: 'auto', 'ray://HOST:PORT' or 'HOST:PORT' (see :func:`parse_cluster`).
        connect_timeout: s allowed to reach the address.
    Raises:
        ClusterError: bad address, nothing answers, Ray not installed, no node with CPUs.
    """

    name = 'ray'

    def __init__(self, address: str, connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self.address = parse_cluster(address) or 'auto'
        if self.address != 'auto':
            _reachable(self.address, connect_timeout)
        try:
            import ray   # lazy: an optional heavy dependency, only with --cluster
        except ImportError:
            raise ClusterError('--cluster needs Ray: pip install -r requirements.txt') from None
        self._ray = ray
        self._owns = not ray.is_initialized()
        if self._owns:
            self._join()
        self._remote_slice = ray.remote(max_retries=MAX_RETRIES, num_cpus=1)(_evaluate_slice)
        self._remote_probe = ray.remote(max_retries=MAX_RETRIES, num_cpus=0)(probe)
        self._shipped: dict[int, tuple[str, list, dict, object]] = {}
        self.nodes = self._nodes()
        log.info('Ray cluster %s: %d node(s), %d CPUs', self.address, len(self.nodes),
                 sum(c for _, c in self.nodes))

    def _join(self) -> None:
        """ray.init on the address; a ray:// address is tried :data:`JOIN_ATTEMPTS` times, each failure logged.

        Raises:
            ClusterError: the last attempt failed (its reason: the last line of Ray's message).
        """
        attempts = JOIN_ATTEMPTS if self.address.startswith('ray://') else 1
        for attempt in range(1, attempts + 1):
            try:
                self._ray.init(address=self.address, log_to_driver=False, logging_level=logging.WARNING)
                return
            except Exception as exc:  # ConnectionError, RuntimeError...: all one line
                reason = last_line(exc)
                if attempt == attempts:
                    raise ClusterError(f'--cluster {self.address}: cannot join the Ray cluster ({reason})'
                                       + (f' after {attempts} attempts' if attempts > 1 else '')) from None
                log.warning('--cluster %s: attempt %d of %d to join failed (%s); trying again',
                            self.address, attempt, attempts, reason)
                time.sleep(JOIN_PAUSE)

    def _nodes(self) -> list[tuple[str, int]]:
        """[(node id, CPUs)] of the alive nodes that have CPUs."""
        nodes = [(n['NodeID'], int(n.get('Resources', {}).get('CPU', 0))) for n in self._guard(self._ray.nodes)
                 if n.get('Alive')]
        nodes = [n for n in nodes if n[1] > 0]
        if not nodes:
            raise ClusterError(f'--cluster {self.address}: the cluster has no node with CPUs')
        return nodes

    def _guard(self, call, *args):
        """``call(*args)``; Ray's failures become one-line ClusterErrors."""
        try:
            return call(*args)
        except ClusterError:
            raise
        except Exception as exc:
            cause = getattr(exc, 'cause', None)
            if isinstance(cause, WorkerMismatch) or isinstance(exc, WorkerMismatch):
                raise ClusterError(str(cause or exc)) from None
            raise ClusterError(f'the Ray cluster {self.address} stopped answering ({type(exc).__name__}: '
                               f'{last_line(exc, 160)}); the checkpoint is kept: continue with '
                               f'--resume, on local or another --cluster') from None

    def _strategy(self, node_id: str):
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # lazy: Ray only with --cluster
        return NodeAffinitySchedulingStrategy(node_id, soft=True)   # soft: retried elsewhere if it dies

    def prepare(self, evaluator) -> tuple[str, list, dict]:
        """Ship ``evaluator`` once (object store) and check every node against this machine (one
        probe task per node) before any rollout. Returns (key, boxed reference, fingerprint).

        Raises ClusterError: a node with another MuJoCo version or model hash, or the cluster gone.
        """
        shipped = self._shipped.get(id(evaluator))
        if shipped is not None and shipped[3] is evaluator:
            return shipped[:3]
        expected = fingerprint(evaluator)
        box = [self._guard(self._ray.put, payload(evaluator))]   # boxed: tasks fetch it only on a cache miss
        key = uuid.uuid4().hex
        probes = [self._remote_probe.options(scheduling_strategy=self._strategy(node)).remote(key, box)
                  for node, _ in self.nodes]
        for name, found in self._guard(self._ray.get, probes):
            problem = mismatch(expected, found, name)
            if problem:
                raise ClusterError(problem)
        self._shipped[id(evaluator)] = (key, box, expected, evaluator)
        return key, box, expected

    def evaluate(self, evaluator, parameter_sets: Sequence[Mapping[ParameterTarget, float]],
                 residuals: bool = False) -> Batch:
        """As :meth:`LocalExecutor.evaluate`, with the batch cut into one slice per node (sized by
        its CPUs, rolled out on that many threads) and the slices' results joined in batch order."""
        key, box, expected = self.prepare(evaluator)
        sets = list(parameter_sets)
        refs, start = [], 0
        for (node, cpus), size in zip(self.nodes, split_sizes(len(sets), [c for _, c in self.nodes])):
            if size:
                task = self._remote_slice.options(scheduling_strategy=self._strategy(node))
                refs.append(task.remote(key, box, expected, sets[start:start + size], residuals, min(cpus, size)))
                start += size
        parts = self._guard(self._ray.get, refs)
        scores = [s for part in parts for s in part[0]]
        return scores, (np.vstack([part[1] for part in parts]) if residuals else None)

    def close(self) -> None:
        """Disconnect from the cluster (when this executor connected)."""
        self._shipped.clear()
        if self._owns and self._ray.is_initialized():
            try:
                self._ray.shutdown()
            except Exception as exc:  # a cluster already gone
                log.debug('ray.shutdown: %s', exc)


def make_executor(cluster: str | None, workers: int = 1) -> LocalExecutor | RayExecutor:
    """The executor for ``--cluster`` / the node's ``cluster`` parameter ('' or 'local': local
    threads, ``workers`` of them); use it in a ``with`` block, which closes it. Raises ClusterError
    (see :class:`RayExecutor`)."""
    address = parse_cluster(cluster)
    return LocalExecutor(workers) if address is None else RayExecutor(address)
