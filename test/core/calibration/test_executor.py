"""shadow_twin.calibration.engine.executor: local threads give today's answers bit for bit; a Ray cluster
(two nodes on this machine, ``ray.cluster_utils.Cluster``, one per module) gives the same answers,
survives a worker node killed mid-run with every evaluation checkpointed once, refuses a node with
another MuJoCo build before any rollout; a wrong address is one line and exit 2; a ray:// run whose
head is gone stops with one line and exit 2, and ``--resume`` finishes it locally with the
uninterrupted run's evaluations."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from shadow_twin.calibration.engine import executor as executor_module
from shadow_twin.calibration.engine.executor import (ClusterError, LocalExecutor, RayExecutor, make_executor,
                                                     parse_cluster, split_sizes)
from shadow_twin.calibration.engine.run import CHECKPOINT, Calibration, CalibrationSettings
from shadow_twin.calibration.engine.sensitivity import screen
from support.synthetic_hand import make_problem

from conftest import REPO, calibrate_args
from shadow_twin.cli import main as cli

#: test/: the folder of the support package the child process and the Ray workers import.
HERE = Path(__file__).resolve().parents[2]
#: A small run: 8 random points in batches of 4, then least squares (residual batches).
SETTINGS = dict(optimizer='random+lsq', budget=16, global_budget=8, workers=2, batch_size=4, seed=3)


def free_port() -> int:
    """A TCP port nobody listens on now (for the head's Ray client server)."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def evaluations(out: Path) -> list[dict]:
    """The checkpoint's evaluation lines without their wall times."""
    lines = (out / CHECKPOINT).read_text().splitlines()[1:]
    return [{k: v for k, v in json.loads(line).items() if k != 'wall_time'} for line in lines]


@pytest.fixture(scope='module')
def problem():
    evaluator, space, truth = make_problem()
    return evaluator, space


@pytest.fixture(scope='module')
def local_run(problem, tmp_path_factory):
    evaluator, space = problem
    out = tmp_path_factory.mktemp('local') / 'run'
    result = Calibration(evaluator, space, CalibrationSettings(**SETTINGS), out, {'test': 1}).run()
    return result, evaluations(out)


# -- local: no Ray --------------------------------------------------------------------------------
def test_local_executor_gives_todays_evaluate_bit_for_bit(problem):
    evaluator, space = problem
    sets = [space.values(space.defaults * f) for f in (0.5, 1.0, 2.0)]
    scores, residuals = LocalExecutor(2).evaluate(evaluator, sets, residuals=True)
    direct_scores, direct_residuals = evaluator.evaluate_scored_residuals(sets, nthread=2)
    assert [s.objective for s in scores] == [s.objective for s in direct_scores]
    assert np.array_equal(residuals, direct_residuals)
    plain, none = LocalExecutor(2).evaluate(evaluator, sets)
    assert none is None and [s.objective for s in plain] == [s.objective for s in evaluator.evaluate(sets, 2)]
    bound = LocalExecutor(1).bind(evaluator)
    assert np.array_equal(bound.evaluate_residuals(sets), direct_residuals)
    assert bound.objective_joints == evaluator.objective_joints


def test_cluster_addresses_and_slices():
    assert parse_cluster('') is None and parse_cluster('local') is None and parse_cluster('auto') == 'auto'
    assert parse_cluster('ray://head:10001') == 'ray://head:10001' and parse_cluster('10.0.0.1:6379') == '10.0.0.1:6379'
    for bad in ('head', 'http://head:1', 'ray://:1', 'ray://head:port', 'ray://head:1/x'):
        with pytest.raises(ClusterError, match='--cluster'):
            parse_cluster(bad)
    assert isinstance(make_executor('', 3), LocalExecutor) and make_executor('local', 3).workers == 3
    assert split_sizes(8, [1, 1]) == [4, 4] and split_sizes(7, [2, 1]) == [5, 2] and split_sizes(1, [1, 1]) == [1, 0]
    assert sum(split_sizes(13, [4, 1, 3])) == 13


class FlakyRay:
    """Stands in for the ``ray`` module in ``RayExecutor._join``: its first ``failures`` inits fail as the
    head's client server does when the server process it starts for a client dies (a traceback in the message)."""

    def __init__(self, failures: int) -> None:
        self.failures, self.calls = failures, []

    def init(self, address, **kwargs):
        self.calls.append(address)
        if len(self.calls) <= self.failures:
            raise ConnectionError('Initialization failure from server:\nTraceback (most recent call last):\n'
                                  '  File "proxier.py", line 765, in Datapath\n    if not self.proxy_manager...\n'
                                  'RuntimeError: Starting Ray client server failed. See ray_client_server_23000.err')


@pytest.mark.parametrize('address, failures, attempts, joins', [
    ('ray://head:10001', 2, 3, True),       # two failed starts, the third joins
    ('ray://head:10001', 5, 3, False),      # three failures: one line naming the last reason
    ('head:6379', 1, 1, False),             # a GCS address is tried once
])
def test_joining_a_cluster_tries_a_ray_client_address_again(monkeypatch, caplog, address, failures, attempts, joins):
    monkeypatch.setattr(executor_module, 'JOIN_PAUSE', 0.0)
    executor = RayExecutor.__new__(RayExecutor)
    executor.address, executor._ray = address, FlakyRay(failures)
    if joins:
        executor._join()
    else:
        with pytest.raises(ClusterError) as error:
            executor._join()
        message = str(error.value)
        assert '\n' not in message and message.startswith(f'--cluster {address}: cannot join the Ray cluster')
        assert 'Starting Ray client server failed' in message and 'Traceback' not in message
        assert ('after 3 attempts' in message) == (attempts == 3)
    assert len(executor._ray.calls) == attempts
    retried = [r.getMessage() for r in caplog.records if 'trying again' in r.getMessage()]
    assert len(retried) == min(failures, attempts - 1)


def test_wrong_cluster_address_is_one_line_and_exit_2(real_bag, trajectories_yaml, tmp_path, capsys):
    started = time.perf_counter()
    out = tmp_path / 'run'
    code = cli.main(calibrate_args(real_bag, trajectories_yaml, out, '--cluster', 'ray://127.0.0.1:9'))
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.count('\n') == 0 and err.startswith('shadow-twin calibrate: error: --cluster ray://127.0.0.1:9: no Ray')
    assert not out.exists()                      # checked before --out is created
    assert time.perf_counter() - started < 30


# -- Ray: one cluster for the module ------------------------------------------------------------
@pytest.fixture(scope='module')
def cluster():
    pytest.importorskip('ray')
    from ray.cluster_utils import Cluster
    cluster = Cluster(initialize_head=True, head_node_args={'num_cpus': 0})   # the head schedules, workers roll out
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    executor = RayExecutor(cluster.address)
    yield cluster, workers, executor
    executor.close()
    cluster.shutdown()


def test_ray_screening_gives_the_local_answers(cluster, problem):
    _, _, executor = cluster
    evaluator, space = problem
    assert sorted(c for _, c in executor.nodes) == [1, 1]
    local = screen(evaluator, space, 12, workers=2, seed=1, batch_size=6)
    remote = screen(evaluator, space, 12, workers=2, seed=1, batch_size=6, executor=executor)
    assert np.array_equal(local.objectives, remote.objectives)
    assert local.influence == remote.influence


@pytest.mark.parametrize('key, value, says', [('mujoco', '0.0.1', r'runs MuJoCo \d.*this machine 0\.0\.1'),
                                               ('model', 'f' * 64, r'another hash \(\w{12}, here ffffffffffff\)')])
def test_a_node_with_another_mujoco_or_model_is_refused_before_any_rollout(cluster, monkeypatch, key, value, says):
    _, _, executor = cluster
    evaluator, space, _ = make_problem()          # a new evaluator: shipped and checked again
    real = executor_module.fingerprint
    monkeypatch.setattr(executor_module, 'fingerprint', lambda ev: {**real(ev), key: value})  # this side only
    with pytest.raises(ClusterError, match=says + '.*before any rollout') as info:
        executor.evaluate(evaluator, [space.values(space.defaults)])
    assert '\n' not in str(info.value)


def test_ray_run_with_a_worker_killed_gives_the_local_run_once(cluster, problem, local_run, tmp_path):
    ray_cluster, workers, executor = cluster
    evaluator, space = problem
    killed = threading.Event()

    def kill_soon(done, budget, best):
        if done == 4 and not killed.is_set():     # during the second batch
            killed.set()
            threading.Thread(target=lambda: (time.sleep(0.05), ray_cluster.remove_node(workers[0]))).start()

    result = Calibration(evaluator, space, CalibrationSettings(**SETTINGS), tmp_path, {'test': 1},
                         executor=executor).run(kill_soon)
    lines = evaluations(tmp_path)
    assert killed.is_set()
    assert [e['index'] for e in lines] == list(range(SETTINGS['budget']))     # each evaluation once
    assert lines == local_run[1]                                               # the same evaluations, bit for bit
    assert result.best.objective == local_run[0].best.objective


CHILD = r'''
import sys, time
sys.path.insert(0, sys.argv[3])
from support.synthetic_hand import make_problem
from shadow_twin.calibration.engine.executor import RayExecutor
from shadow_twin.calibration.engine.run import Calibration, CalibrationSettings
from shadow_twin.common.errors import ShadowTwinError
evaluator, space, _ = make_problem()
def progress(done, budget, best):
    print('done', done, flush=True)
    time.sleep(0.3)                                  # time for the test to stop the head
try:
    Calibration(evaluator, space, CalibrationSettings(**eval(sys.argv[4])), sys.argv[2], {'test': 1},
                executor=RayExecutor(sys.argv[1])).run(progress)
except ShadowTwinError as exc:
    print('error:', exc, file=sys.stderr)
    sys.exit(2)
'''


def test_head_gone_stops_with_one_line_and_resume_finishes_locally(problem, local_run, tmp_path):
    """A ray:// client (the address a lab gives ``--cluster``) whose head goes away mid-run: after
    Ray's reconnect grace period (3 s here) the run stops with the executor's one line and exit 2."""
    pytest.importorskip('ray')
    from ray.cluster_utils import Cluster
    evaluator, space = problem
    port = free_port()
    head_cluster = Cluster(initialize_head=True, head_node_args={'num_cpus': 1, 'ray_client_server_port': port})
    out = tmp_path / 'run'
    env = {**os.environ, 'PYTHONPATH': f'{REPO}{os.pathsep}{HERE}', 'RAY_CLIENT_RECONNECT_GRACE_PERIOD': '3'}
    child = subprocess.Popen([sys.executable, '-c', CHILD, f'ray://127.0.0.1:{port}', str(out), str(HERE),
                              repr(SETTINGS)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        for line in child.stdout:
            if line.strip() == 'done 8':
                head_cluster.shutdown()           # the head and every process of the cluster gone
                break
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        head_cluster.shutdown()
    assert child.returncode == 2, err[-2000:]
    last = [line for line in err.splitlines() if line.startswith('error:')]
    assert len(last) == 1 and 'stopped answering' in last[0] and '--resume' in last[0], err[-2000:]
    done = evaluations(out)
    assert 8 <= len(done) < SETTINGS['budget']
    result = Calibration(evaluator, space, CalibrationSettings(**SETTINGS), out, {'test': 1}, resume=True).run()
    assert result.resumed_evaluations >= 8
    assert evaluations(out) == local_run[1]
