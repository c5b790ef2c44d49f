"""Benchmark of the mujoco_bridge node on the built-in Shadow Hand E. Longer than 400 lines: one
benchmark, one script a person runs (its receivers are this file run with --subscriber).

Starts the bridge as a separate process (``python -m mujoco_bridge.main`` with
``config/mujoco_bridge.yaml``) on a private ROS domain, once per publish rate,
and measures from this process (a separate one, over DDS):

* achieved real-time factor: sim time advanced (``sim_time_s`` of
  ``/diagnostics``) per second of the diagnostics messages' ROS stamps over
  the measuring window, and the node's own windowed figure. Target >= 0.99.
* publish period jitter: |receive interval - 1/publish_rate| of
  ``/sim/joint_states`` as received by a lean subscriber process (this script
  with ``--subscriber``: one node, one subscription, ``spin_once`` loop),
  p50/p99/max in ms. Target p99 < 2 ms.
* goal latency: from the goal response (accepted) arriving here to the first
  ``/sim/joint_states`` message whose moved joint differs from its rest
  position (> 1e-6 rad), p50/p90 in ms over ``--trials`` goals (reset and rest
  before each); negative when that message arrived before the goal response
  (the bridge starts the trajectory as it accepts). Also from sending the
  goal. Target p50 < 20 ms.
* CPU of the bridge process: (utime + stime) from ``/proc/<pid>/stat`` over the
  same window (steady publishing, no goal), as a share of one core; and the
  CPU used meanwhile by all other processes (besides the subscriber and this
  script), since other load shows up in the jitter.
* stalls, over the whole run (start, the subscriber process joining, the
  goals): the longest stall of the physics loop, the largest
  ``max_tick_lateness_ms`` (how late the latest tick of the node's window
  started) of all ``/diagnostics`` messages, and the sim time the bridge
  dropped (``dropped_sim_time_s`` at the end). Target: no stall above 20 ms
  and nothing dropped. Also the largest gap between consecutive
  ``/sim/joint_states`` as received here (this process may stall too).
* the machine's own stalls: a reference process (this script with
  ``--reference``: no ROS, no Python threads, a sleep loop at the publish
  rate) runs beside the bridge and logs every wake-up more than 5 ms late. A
  bridge stall counts as the machine's when, in the bridge's own diagnostics,
  its process hardly used the CPU meanwhile (``max_tick_lateness_process_cpu_ms``
  below a quarter of the stall) and the reference woke at least half as late
  within the same diagnostics window: the operating system or the hypervisor
  did not run either process, and no code in the bridge can prevent that. The
  stall target applies to the bridge's own stalls; the machine's are printed
  beside them.

``--runs N`` starts the bridge N times per rate and prints each run and, with
more than one, a summary. Exit status 1 when any run misses a target.

``--model``/``--gains`` run another model (``benchmarks/cell.py`` runs the cell this way);
``--cpu-max P`` adds the target "bridge CPU below P % of one core". ``--objects`` runs every start
twice, without and then with objects and contact outputs (issue 36: "the cell with three free
objects and contact outputs keeps RTF >= 0.99 and jitter p99 < 2 ms at 250 Hz"): the scene of
``config/scene.yaml`` with every object free (the can, the tote, the ball), ``contact_sensors``
'hand' at the default ``contact_rate``; both are printed, the targets apply to both.

Usage: .venv/bin/python benchmarks/bridge.py [--seconds 10] [--trials 20] [--rates 250 1000] [--runs 1]
                                             [--model MJCF --gains YAML] [--cpu-max P] [--objects]
Not part of the tests. Needs rclpy and control_msgs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'test'))
sys.path.insert(0, str(REPO))

from support import ros as ros_helpers  # noqa: E402  (after the path set-up)

from mujoco_bridge.timing import STALL_CPU_SHARE  # noqa: E402

PARAMS = REPO / 'config' / 'mujoco_bridge.yaml'
MOVED_JOINT = 'rh_FFJ3'
#: Targets: RTF, jitter p99 (ms), goal accepted -> motion p50 (ms), longest stall (ms), dropped sim time (s).
RTF_MIN, JITTER_P99_MAX_MS, LATENCY_P50_MAX_MS, STALL_MAX_MS, DROPPED_MAX_S = 0.99, 2.0, 20.0, 20.0, 0.0
#: What the bridge runs (``--model``, ``--gains``: its model_path and gains_file; '' = the built-in hand)
#: and the CPU target (``--cpu-max``, share of one core; None = none), set by main().
BRIDGE = {'model_path': '', 'gains_file': '', 'cpu_max': None}
#: The conditions each start runs under: (label, extra bridge parameters); ``--objects`` adds the second.
CONDITIONS: list[tuple[str, list[str]]] = [('', [])]


def free_scene(folder: Path) -> Path:
    """``config/scene.yaml`` with every object free, written into ``folder`` (``--objects``)."""
    import yaml
    from shadow_twin.common.paths import config_path
    scene = yaml.safe_load(config_path('scene.yaml').read_text())
    for entry in scene['scene']['objects']:
        entry['free'] = True
    path = folder / 'scene_all_free.yaml'
    path.write_text(yaml.safe_dump(scene))
    return path


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of process ``pid`` so far, s."""
    fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def all_cpu_seconds() -> dict[int, float]:
    """{pid: CPU seconds} of every process readable in /proc. (The machine-wide
    /proc/stat counters undercount short periodic bursts in this kind of VM; the
    per-process ones agree with the scheduler's schedstat.)"""
    out = {}
    for entry in Path('/proc').iterdir():
        if entry.name.isdigit():
            try:
                out[int(entry.name)] = cpu_seconds(int(entry.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def percentiles(values, qs=(50, 90, 99)) -> dict[int, float]:
    arr = np.asarray(values, dtype=float)
    return {q: float(np.percentile(arr, q)) for q in qs}


def subscriber_main(topic: str, seconds: float, out: str) -> int:
    """``--subscriber`` mode: a lean process receiving ``topic`` for ``seconds`` s after
    the first message; saves the monotonic receive times (s) to ``out`` (.npy)."""
    import rclpy
    from sensor_msgs.msg import JointState
    rclpy.init()
    node = rclpy.create_node('bridge_benchmark_subscriber')
    received: list[float] = []
    node.create_subscription(JointState, topic, lambda msg: received.append(time.monotonic()), 100)
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline and (not received or received[-1] - received[0] < seconds):
        rclpy.spin_once(node, timeout_sec=0.1)
    np.save(out, np.array(received))
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


#: The reference process logs wake-ups later than this, s.
REFERENCE_LOG_LATENESS = 0.005


def reference_main(rate: float, out: str) -> int:
    """``--reference`` mode: sleep to a fixed schedule at ``rate`` Hz until terminated, appending
    "wall_time_s lateness_s" to ``out`` for every wake-up more than 5 ms late (no ROS, one thread:
    what the machine alone does to a periodic sleeper)."""
    period = 1.0 / rate
    next_tick = time.monotonic()
    with open(out, 'w', buffering=1) as handle:
        while True:
            next_tick += period
            delay = next_tick - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            lateness = time.monotonic() - next_tick
            if lateness > REFERENCE_LOG_LATENESS:
                handle.write(f'{time.time():.6f} {lateness:.6f}\n')
                if lateness > 0.5:
                    next_tick = time.monotonic()


def read_reference(path: Path) -> np.ndarray:
    """(N, 2) [wall time s, lateness s] of the reference's late wake-ups."""
    text = path.read_text() if path.exists() else ''
    rows = [[float(v) for v in line.split()] for line in text.splitlines() if len(line.split()) == 2]
    return np.array(rows).reshape(-1, 2)


def physics_values(msg) -> dict[str, str]:
    """The key/values of the bridge's ``<node>: physics`` status in a DiagnosticArray."""
    status = next(s for s in msg.status if s.name.endswith(': physics'))
    return {kv.key: kv.value for kv in status.values}


def measure_steady(client, proc, rate: float, seconds: float, log_dir: Path, diagnostics) -> dict:
    """RTF, jitter (from a separate subscriber process) and CPU over ``seconds`` (no goal);
    ``diagnostics``: the run's /diagnostics recorder."""
    import subprocess
    time.sleep(1.5)                                     # let the node's window fill
    out = log_dir / f'received_{int(rate)}.npy'
    subscriber = subprocess.Popen([ros_helpers.PYTHON, __file__, '--subscriber', '/sim/joint_states',
                                   str(seconds), str(out)], cwd=REPO)
    time.sleep(1.0)                                     # its discovery
    start = time.monotonic()
    cpu0, wall0, every0 = cpu_seconds(proc.pid), time.monotonic(), all_cpu_seconds()
    subscriber.wait(timeout=seconds + 40.0)
    cpu1, wall1, every1 = cpu_seconds(proc.pid), time.monotonic(), all_cpu_seconds()
    others = sum(every1[p] - every0.get(p, 0.0) for p in every1
                 if p not in (proc.pid, subscriber.pid, os.getpid()))
    received = np.load(out)[int(rate):]                 # skip the first second (start-up)
    diag = [m for _, m in diagnostics.since(start)]
    first, last = diag[0], diag[-1]
    stamp = lambda m: m.header.stamp.sec + m.header.stamp.nanosec * 1e-9  # noqa: E731
    rtf_external = ((float(physics_values(last)['sim_time_s']) - float(physics_values(first)['sim_time_s']))
                    / (stamp(last) - stamp(first)))
    intervals = np.diff(received)
    jitter = np.abs(intervals - 1.0 / rate) * 1e3
    return {
        'rtf': rtf_external,
        'rtf_node': float(physics_values(last)['real_time_factor_achieved']),
        'received_hz': (len(received) - 1) / (received[-1] - received[0]),
        'jitter_ms': percentiles(jitter, (50, 99)),
        'jitter_max_ms': float(jitter.max()),
        'cpu_share': (cpu1 - cpu0) / (wall1 - wall0),
        'other_cores': others / (wall1 - wall0),
        'messages': len(received),
    }


def measure_latency(client, states, trials: int) -> dict:
    """Goal accepted -> first moved /sim/joint_states, over ``trials`` goals."""
    from builtin_interfaces.msg import Duration
    from control_msgs.action import FollowJointTrajectory
    from std_srvs.srv import Trigger
    from trajectory_msgs.msg import JointTrajectoryPoint
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = [MOVED_JOINT]
    goal.trajectory.points = [JointTrajectoryPoint(positions=[1.0], time_from_start=Duration(nanosec=200_000_000))]
    action = client.action_client(FollowJointTrajectory, '/sim/follow_joint_trajectory')
    from_accept, from_send = [], []
    for _ in range(trials):
        assert client.call(Trigger, '/mujoco_bridge/reset').success
        ros_helpers.wait_until(lambda: _resting(states.last()), 5.0)
        time.sleep(0.1)
        rest = _position(states.last())
        sent = time.monotonic()
        future = action.send_goal_async(goal)
        ros_helpers.wait_until(future.done, 5.0, interval=0.0002)
        accepted = time.monotonic()
        handle = future.result()
        assert handle.accepted
        ros_helpers.wait_until(lambda: any(abs(_position(m) - rest) > 1e-6 for _, m in states.since(sent)),
                               2.0, interval=0.0005)
        moved = [r for r, m in states.since(sent) if abs(_position(m) - rest) > 1e-6]
        if not moved:
            raise RuntimeError(f'{MOVED_JOINT} did not move within 2 s of the goal')
        from_send.append((moved[0] - sent) * 1e3)
        # negative when the first moved state arrived before the goal response did
        from_accept.append((moved[0] - accepted) * 1e3)
        client.wait_future(handle.get_result_async(), 10.0)
    return {'from_accept_ms': percentiles(from_accept, (50, 90)),
            'from_send_ms': percentiles(from_send, (50, 90))}


def _position(msg) -> float:
    return msg.position[list(msg.name).index(MOVED_JOINT)]


def _resting(msg) -> bool:
    return msg is not None and max(abs(v) for v in msg.velocity) < 2e-3


def machine_held(values: dict[str, str], stamp: float, reference: np.ndarray) -> bool:
    """Whether the worst stall of one /diagnostics window (``values``, message ``stamp`` in s)
    was the machine's: the bridge process hardly ran during it, and the reference process
    (``reference``: its late wake-ups) woke at least half as late within the window."""
    late_ms = float(values['max_tick_lateness_ms'])
    cpu_ms = float(values.get('max_tick_lateness_process_cpu_ms') or 'nan')
    window = float(values.get('window_s') or 2.0)
    if not cpu_ms < STALL_CPU_SHARE * late_ms:
        return False
    near = (reference[:, 0] >= stamp - window - 0.1) & (reference[:, 0] <= stamp + 0.1)
    return bool(near.any() and reference[near, 1].max() * 1e3 >= 0.5 * late_ms)


def measure_stalls(states, diagnostics, reference_log: Path) -> dict:
    """Over the whole run: the longest stall of the physics loop (largest ``max_tick_lateness_ms``
    of the bridge's /diagnostics), the longest one that was not the machine's (see
    :func:`machine_held`), the reference process's longest late wake-up and how many exceeded the
    target, the sim time dropped (``dropped_sim_time_s`` of the last message) and the largest gap
    between consecutive joint states received here (after the first second)."""
    ros_helpers.wait_until(lambda: diagnostics.count() > 0, 3.0)
    count = diagnostics.count()
    ros_helpers.wait_until(lambda: diagnostics.count() > count, 3.0)     # one after the last goal
    reference = read_reference(reference_log)
    stamp = lambda m: m.header.stamp.sec + m.header.stamp.nanosec * 1e-9  # noqa: E731
    windows = [(physics_values(m), stamp(m)) for _, m in diagnostics.snapshot()]
    windows = [(v, t) for v, t in windows if v.get('max_tick_lateness_ms')]
    lateness = [float(v['max_tick_lateness_ms']) for v, _ in windows]
    own = [float(v['max_tick_lateness_ms']) for v, t in windows if not machine_held(v, t, reference)]
    received = np.array([r for r, _ in states.snapshot()])
    received = received[received >= received[0] + 1.0]
    last = windows[-1][0] if windows else {}
    return {'max_stall_ms': max(lateness) if lateness else float('nan'),
            'own_stall_ms': max(own) if own else 0.0,
            'machine_stall_ms': float(reference[:, 1].max() * 1e3) if len(reference) else 0.0,
            'machine_stalls_over': int((reference[:, 1] * 1e3 > STALL_MAX_MS).sum()),
            'dropped_s': float(last['dropped_sim_time_s']) if last else float('nan'),
            'max_gap_ms': float(np.diff(received).max() * 1e3) if len(received) > 1 else float('nan')}


def run(rate: float, seconds: float, trials: int, client, log_dir: Path, tag: str, states, diagnostics,
        extra: list[str] = ()) -> dict:
    """One bridge start: all figures. ``states``, ``diagnostics``: this client's recorders of
    /sim/joint_states and /diagnostics (cleared here); ``extra``: more ``-p name:=value`` arguments."""
    states.clear()
    diagnostics.clear()
    run_dir = log_dir / f'{int(rate)}{tag}'
    run_dir.mkdir(parents=True, exist_ok=True)
    import subprocess
    model = [arg for name in ('model_path', 'gains_file') if BRIDGE[name] for arg in ('-p', f'{name}:={BRIDGE[name]}')]
    proc = ros_helpers.NodeProcess('mujoco_bridge.main', ['--params-file', str(PARAMS), '-p',
                                                          f'publish_rate:={rate:.1f}', *model, *extra],
                                   run_dir / 'bridge.log')
    reference_log = run_dir / 'reference_late_wakeups.txt'
    reference = subprocess.Popen([sys.executable, __file__, '--reference', str(rate), str(reference_log)])
    try:
        if not ros_helpers.wait_until(lambda: states.count() > 0, 30.0):
            raise RuntimeError(f'no joint states from the bridge:\n{proc.output()}')
        steady = measure_steady(client, proc, rate, seconds, run_dir, diagnostics)
        steady.update(measure_latency(client, states, trials))
        steady.update(measure_stalls(states, diagnostics, reference_log))
        return steady
    finally:
        reference.terminate()
        reference.wait(timeout=5.0)
        proc.stop()


def missed(r: dict) -> list[str]:
    """The targets run ``r`` misses (names)."""
    checks = {'real-time factor': r['rtf'] >= RTF_MIN, 'jitter': r['jitter_ms'][99] < JITTER_P99_MAX_MS,
              'goal latency': r['from_accept_ms'][50] < LATENCY_P50_MAX_MS,
              'stall': r['own_stall_ms'] <= STALL_MAX_MS, 'dropped sim time': r['dropped_s'] <= DROPPED_MAX_S}
    if BRIDGE['cpu_max'] is not None:
        checks['CPU'] = r['cpu_share'] < BRIDGE['cpu_max']
    return [name for name, ok in checks.items() if not ok]


def ok_text(ok: bool) -> str:
    return 'ok' if ok else 'MISSED'


def print_run(rate: float, r: dict, label: str) -> None:
    print(f'\npublish_rate {rate:g} Hz{label} ({r["messages"]} messages, received at {r["received_hz"]:.1f} Hz)')
    print(f'  real-time factor          {r["rtf"]:.4f} (node window {r["rtf_node"]:.4f})'
          f'   target >= {RTF_MIN}: {ok_text(r["rtf"] >= RTF_MIN)}')
    print(f'  period jitter             p50 {r["jitter_ms"][50]:.3f} ms, p99 {r["jitter_ms"][99]:.3f} ms, '
          f'max {r["jitter_max_ms"]:.2f} ms   target p99 < {JITTER_P99_MAX_MS:g} ms: '
          f'{ok_text(r["jitter_ms"][99] < JITTER_P99_MAX_MS)}')
    print(f'  goal accepted -> motion   p50 {r["from_accept_ms"][50]:.2f} ms, '
          f'p90 {r["from_accept_ms"][90]:.2f} ms   target p50 < {LATENCY_P50_MAX_MS:g} ms: '
          f'{ok_text(r["from_accept_ms"][50] < LATENCY_P50_MAX_MS)}')
    print(f'  goal sent -> motion       p50 {r["from_send_ms"][50]:.2f} ms, p90 {r["from_send_ms"][90]:.2f} ms')
    cpu_target = ('' if BRIDGE['cpu_max'] is None else f'   target < {100 * BRIDGE["cpu_max"]:g} %: '
                  f'{ok_text(r["cpu_share"] < BRIDGE["cpu_max"])}')
    print(f'  bridge CPU                {100 * r["cpu_share"]:.1f} % of one core '
          f'(other processes meanwhile: {r["other_cores"]:.2f} of {os.cpu_count()} cores){cpu_target}')
    print(f'  longest stall             {r["max_stall_ms"]:.1f} ms (latest tick), the bridge\'s own '
          f'{r["own_stall_ms"]:.1f} ms   target <= {STALL_MAX_MS:g} ms: {ok_text(r["own_stall_ms"] <= STALL_MAX_MS)}')
    print(f'  machine stalls            reference process woke up to {r["machine_stall_ms"]:.1f} ms late '
          f'({r["machine_stalls_over"]} wake-ups > {STALL_MAX_MS:g} ms); largest receive gap here '
          f'{r["max_gap_ms"]:.1f} ms')
    print(f'  dropped sim time          {r["dropped_s"] * 1e3:.0f} ms   target {DROPPED_MAX_S * 1e3:g} ms: '
          f'{ok_text(r["dropped_s"] <= DROPPED_MAX_S)}')


def print_summary(rate: float, results: list[dict]) -> None:
    stalls = np.array([r['max_stall_ms'] for r in results])
    own = np.array([r['own_stall_ms'] for r in results])
    machine = np.array([r['machine_stall_ms'] for r in results])
    dropped = np.array([r['dropped_s'] for r in results])
    rtf = np.array([r['rtf'] for r in results])
    print(f'\npublish_rate {rate:g} Hz, {len(results)} runs')
    print('  run  RTF     node RTF  longest stall  own stall  machine stall  receive gap  dropped   missed')
    for k, r in enumerate(results, 1):
        print(f'  {k:3d}  {r["rtf"]:.4f}  {r["rtf_node"]:.4f}    {r["max_stall_ms"]:8.1f} ms  '
              f'{r["own_stall_ms"]:6.1f} ms  {r["machine_stall_ms"]:8.1f} ms  '
              f'{r["max_gap_ms"]:8.1f} ms  {r["dropped_s"] * 1e3:5.0f} ms  {", ".join(missed(r)) or "-"}')
    print(f'  overall: longest stall {stalls.max():.1f} ms (median of runs {np.median(stalls):.1f} ms), '
          f'stall > {STALL_MAX_MS:g} ms in {int((stalls > STALL_MAX_MS).sum())} runs, of which the bridge\'s own '
          f'in {int((own > STALL_MAX_MS).sum())} (longest own {own.max():.1f} ms); the reference process stalled '
          f'> {STALL_MAX_MS:g} ms in {int((machine > STALL_MAX_MS).sum())} runs (longest {machine.max():.1f} ms); '
          f'dropped {dropped.sum() * 1e3:.0f} ms in {int((dropped > 0).sum())} of {len(results)} runs, '
          f'RTF min {rtf.min():.4f} mean {rtf.mean():.4f}; '
          f'{sum(1 for r in results if missed(r))} of {len(results)} runs missed a target')


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == '--subscriber':
        return subscriber_main(sys.argv[2], float(sys.argv[3]), sys.argv[4])
    if len(sys.argv) == 4 and sys.argv[1] == '--reference':
        return reference_main(float(sys.argv[2]), sys.argv[3])
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--seconds', type=float, default=10.0, help='steady-state window per rate, s')
    parser.add_argument('--trials', type=int, default=20, help='goals for the latency figure')
    parser.add_argument('--rates', type=float, nargs='+', default=[250.0, 1000.0], help='publish rates, Hz')
    parser.add_argument('--runs', type=int, default=1, help='bridge starts per rate (each one measured)')
    parser.add_argument('--model', default='', help="the bridge's model_path (default: the built-in hand)")
    parser.add_argument('--gains', default='', help="the bridge's gains_file (default: the hand's)")
    parser.add_argument('--cpu-max', type=float, default=None,
                        help='target: bridge CPU below this share of one core, percent (default: none)')
    parser.add_argument('--objects', action='store_true',
                        help='each start also with the scene, every object free, and contact outputs (module doc)')
    args = parser.parse_args()
    BRIDGE.update(model_path=args.model, gains_file=args.gains,
                  cpu_max=None if args.cpu_max is None else args.cpu_max / 100.0)
    if args.runs < 1:
        parser.error('--runs must be >= 1')
    domain = ros_helpers.isolate_domain()
    client = ros_helpers.RosClient('bridge_benchmark', domain_id=domain)
    log_dir = Path(tempfile.mkdtemp(prefix='bridge_benchmark_'))
    if args.objects:
        CONDITIONS.append((', with 3 free objects and contact outputs',
                           ['-p', f'scene_file:={free_scene(log_dir)}', '-p', 'contact_sensors:=hand']))
    print(f'mujoco_bridge benchmark: {args.model or "built-in Shadow Hand E"}, {os.cpu_count()} cores, ROS domain {domain}, '
          f'window {args.seconds:g} s, {args.trials} goals, {args.runs} run(s) per rate; logs in {log_dir}')
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import JointState
    states = client.record(JointState, '/sim/joint_states', depth=1000)
    diagnostics = client.record(DiagnosticArray, '/diagnostics')
    ok = True
    try:
        for rate in args.rates:
            results = []
            for k in range(args.runs):
                for c, (condition, extra) in enumerate(CONDITIONS):
                    label = condition + (f', run {k + 1} of {args.runs}' if args.runs > 1 else '')
                    tag = (f'_run{k + 1}' if args.runs > 1 else '') + (f'_c{c}' if c else '')
                    r = run(rate, args.seconds, args.trials, client, log_dir, tag, states, diagnostics, extra)
                    results.append(r)
                    print_run(rate, r, label)
                    sys.stdout.flush()
                    ok &= not missed(r)
            if args.runs > 1:
                print_summary(rate, results)
    finally:
        client.close()
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
