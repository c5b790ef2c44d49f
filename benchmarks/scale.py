#!/usr/bin/env python3
"""Benchmark: calibrate and screen on local threads and on a Ray cluster of this machine.

Starts a Ray head (no CPUs: it only schedules) and two worker nodes of one CPU each
(``ray.cluster_utils.Cluster``), then runs the same least-squares calibration
(``config/calibration/fingers_j123.yaml``, seed 0) and the same sensitivity screening on
the shared hand recording (``../shared/data/shadow_hand_e``, ``hand_closing``, as
``benchmarks/calibrate_real_hand.py``) with ``LocalExecutor(2)`` (two threads) and with the
``RayExecutor`` (two nodes x one thread). Prints rollouts/s, the mean batch time of each,
Ray's overhead per batch (Ray batch time - local batch time, as % of the local batch) and
whether the evaluations are equal bit for bit, and the projected speed-up on N machines
like this one from that overhead, with batches N times as large (each machine's slice as here):
N T / (T + overhead), T the local batch time; where the measured overhead is below Ray's round
trip of a batch without rollouts (Ray's node processes run without the threads' shared
interpreter lock, so they can beat two threads of one process) the round trip is taken instead.

Targets (issue 26): equal results; overhead <= 15 % of a batch with 2 workers. Exits 1 on a miss.
Other processes on the machine skew times: re-run when they look off.

Usage: .venv/bin/python benchmarks/scale.py [--budget 60] [--samples 40] [--batch 8]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / 'shared' / 'data' / 'shadow_hand_e'
OVERHEAD_TARGET = 15.0   # % of a batch


def calibrate(evaluator, space, executor, budget: int, batch: int):
    """(evaluations [(x, objective)], rollouts, simulation s, batches)."""
    from shadow_twin.calibration.engine.run import Calibration, CalibrationSettings
    settings = CalibrationSettings('random+lsq', budget, 2, batch, 0)
    with tempfile.TemporaryDirectory() as out:
        result = Calibration(evaluator, space, settings, out, {}, executor=executor).run()
    batches = len({e.batch for e in result.evaluations})
    return [(e.x, e.objective) for e in result.evaluations], len(result.evaluations), result.simulation_time, batches


def sensitivity(evaluator, space, executor, samples: int, batch: int):
    from shadow_twin.calibration.engine.sensitivity import screen
    t0 = time.perf_counter()
    result = screen(evaluator, space, samples, 2, 0, batch_size=batch, executor=executor)
    return list(result.objectives), samples, time.perf_counter() - t0, -(-samples // batch)


def dispatch_cost(nodes, rounds: int = 30) -> float:
    """Median s of one batch's Ray round trip without rollouts: a no-op task on every node of
    ``nodes`` ([(node id, CPUs)]), placed as the executor places slices, submitted and awaited."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    nothing = ray.remote(num_cpus=1)(lambda: None)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        ray.get([nothing.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=True)).remote()
                 for node, _ in nodes])
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--budget', type=int, default=60)
    parser.add_argument('--samples', type=int, default=40)
    parser.add_argument('--batch', type=int, default=8, help='rollouts per batch (default 8)')
    args = parser.parse_args()
    if not DATA.is_dir():
        print(f'needs {DATA}', file=sys.stderr)
        return 1
    from ray.cluster_utils import Cluster
    from calibrate_real_hand import hand_problem   # the same problem as that benchmark's (this directory)
    from shadow_twin.calibration.engine.executor import LocalExecutor, RayExecutor
    evaluator, space = hand_problem()
    t0 = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={'num_cpus': 0})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray_executor = RayExecutor(cluster.address)
    ray_executor.prepare(evaluator)
    print(f'Ray head + 2 worker nodes (1 CPU each) up and the evaluator shipped in {time.perf_counter() - t0:.1f} s')
    dispatch = dispatch_cost(ray_executor.nodes)
    print(f'Ray round trip of a batch without rollouts (a no-op task per node, median of 30): {dispatch * 1e3:.1f} ms')
    ok = True
    try:
        for name, job, size in (('calibrate (random+lsq)', calibrate, args.budget),
                                ('sensitivity', sensitivity, args.samples)):
            local = job(evaluator, space, LocalExecutor(2), size, args.batch)
            remote = job(evaluator, space, ray_executor, size, args.batch)
            equal = local[0] == remote[0]
            t_local, t_ray = local[2] / local[3], remote[2] / remote[3]
            overhead = 100.0 * (t_ray - t_local) / t_local
            print(f'== {name}: {local[1]} rollouts in batches of {args.batch}')
            print(f'  local (2 threads):        {local[1] / local[2]:7.1f} rollouts/s, {t_local * 1e3:7.1f} ms/batch')
            print(f'  Ray (2 nodes x 1 thread): {remote[1] / remote[2]:7.1f} rollouts/s, {t_ray * 1e3:7.1f} ms/batch')
            print(f'  overhead per batch: {(t_ray - t_local) * 1e3:+.1f} ms ({overhead:+.1f} % of a batch; target '
                  f'<= {OVERHEAD_TARGET:.0f} %)   results equal: {"yes" if equal else "NO"}')
            cost = max(t_ray - t_local, dispatch)   # below the round trip: Ray's processes beat two threads
            speedups = ', '.join(f'{n}: {n * t_local / (t_local + cost):.1f}x' for n in (2, 4, 8, 16))
            print(f'  projected speed-up on N machines like this one (batches of {args.batch} per machine, '
                  f'{cost * 1e3:.1f} ms overhead each): {speedups}')
            ok &= equal and overhead <= OVERHEAD_TARGET
    finally:
        ray_executor.close()
        cluster.shutdown()
    print('PASS' if ok else 'MISS: a target above was missed')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
